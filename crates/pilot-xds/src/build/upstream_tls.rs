//! TLS a cluster originates as its DestinationRule's `tls` says, for the
//! modes that use the operator's certificates rather than the mesh's
//! (`ISTIO_MUTUAL` and auto mutual TLS are `security/outbound.rs`):
//!
//! - `SIMPLE`: TLS verifying the server against `caCertificates` (a file),
//!   or the secret `credentialName-cacert` over SDS, or, with neither, the
//!   system's trust bundle ([`SYSTEM_CA_BUNDLE`]) as Istio verifies at the
//!   client; the server's certificate must carry one of
//!   `subjectAltNames` when given. `insecureSkipVerify` verifies nothing.
//! - `MUTUAL`: the same, presenting `clientCertificate` / `privateKey`
//!   (files) or the secret `credentialName` over SDS.
//! - `sni` is sent as the server name; without it, the destination's host
//!   (none for a wildcard host).
//! - `DISABLE`: plaintext, and no automatic mutual TLS either.
//!
//! A BackendTLSPolicy's TLS (`pilot_routing::backend_tls`) is a `SIMPLE`
//! setting whose certificate authorities come over SDS under their own
//! name (`ca_credential`, `configmap://...`); `MUTUAL`, presenting the
//! secret `credentialName`, at a router whose Gateway names a client
//! certificate for its backends.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{DataSource, TransportSocket, data_source, transport_socket};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, SdsSecretConfig, SubjectAltNameMatcher, TlsCertificate,
    UpstreamTlsContext, common_tls_context, subject_alt_name_matcher,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
use pilot_routing::{ClientTls, TlsMode};

use super::util::{ads, any};

/// The trust bundle a `SIMPLE` or `MUTUAL` cluster verifies its server
/// with when its setting names no CA (Debian's and most distributions').
pub(crate) const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Sets `cluster`'s transport socket for a `SIMPLE` or `MUTUAL` setting
/// towards `host`; other modes leave it alone.
pub(crate) fn apply(cluster: &mut Cluster, tls: Option<&ClientTls>, host: &str) {
    let Some(tls) = tls else { return };
    if !matches!(tls.mode, TlsMode::Simple | TlsMode::Mutual) {
        return;
    }
    let context = UpstreamTlsContext {
        common_tls_context: Some(common_context(tls)),
        sni: tls
            .sni
            .clone()
            .or_else(|| (!host.starts_with('*')).then(|| host.to_string()))
            .unwrap_or_default(),
        ..Default::default()
    };
    cluster.transport_socket = Some(TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&context))),
    });
    cluster.transport_socket_matches.clear();
}

/// The certificate presented (`MUTUAL`) and the server's verification.
fn common_context(tls: &ClientTls) -> CommonTlsContext {
    let mut common = CommonTlsContext::default();
    if tls.mode == TlsMode::Mutual {
        match (&tls.credential_name, &tls.client_certificate, &tls.private_key) {
            (Some(secret), _, _) => common
                .tls_certificate_sds_secret_configs
                .push(secret_config(secret)),
            (None, Some(certificate), Some(key)) => common.tls_certificates.push(TlsCertificate {
                certificate_chain: Some(file(certificate)),
                private_key: Some(file(key)),
                ..Default::default()
            }),
            _ => {}
        }
    }
    if tls.insecure_skip_verify {
        return common;
    }
    let mut validation = CertificateValidationContext {
        match_typed_subject_alt_names: san_matchers(&tls.subject_alt_names),
        crl: tls.ca_crl.as_deref().map(file),
        ..Default::default()
    };
    // A BackendTLSPolicy's bundles; else the credential's own CA.
    let ca_secret = match (&tls.ca_credential, &tls.credential_name) {
        (Some(bundle), _) => Some(bundle.clone()),
        (None, Some(secret)) => Some(format!("{secret}-cacert")),
        (None, None) => None,
    };
    common.validation_context_type = Some(match ca_secret {
        Some(secret) => common_tls_context::ValidationContextType::CombinedValidationContext(
            common_tls_context::CombinedCertificateValidationContext {
                default_validation_context: Some(validation),
                validation_context_sds_secret_config: Some(secret_config(&secret)),
                ..Default::default()
            },
        ),
        None => {
            validation.trusted_ca = Some(file(tls.ca_certificates.as_deref().unwrap_or(SYSTEM_CA_BUNDLE)));
            common_tls_context::ValidationContextType::ValidationContext(validation)
        }
    });
    common
}

/// Matchers admitting a certificate that carries one of `names` as a DNS
/// or URI subject alternative name (Istio's `subjectAltNames`).
pub(crate) fn san_matchers(names: &[String]) -> Vec<SubjectAltNameMatcher> {
    names
        .iter()
        .flat_map(|name| {
            [
                subject_alt_name_matcher::SanType::Dns,
                subject_alt_name_matcher::SanType::Uri,
            ]
            .map(|kind| SubjectAltNameMatcher {
                san_type: kind as i32,
                matcher: Some(StringMatcher {
                    match_pattern: Some(string_matcher::MatchPattern::Exact(name.clone())),
                    ..Default::default()
                }),
                ..Default::default()
            })
        })
        .collect()
}

fn file(path: &str) -> DataSource {
    DataSource {
        specifier: Some(data_source::Specifier::Filename(path.to_string())),
        ..Default::default()
    }
}

/// A secret the control plane serves over ADS, as a gateway's
/// `credentialName`.
fn secret_config(name: &str) -> SdsSecretConfig {
    SdsSecretConfig {
        name: name.to_string(),
        sds_config: Some(ads()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use prost::Message;

    fn context(cluster: &Cluster) -> UpstreamTlsContext {
        let socket = cluster.transport_socket.as_ref().expect("a transport socket");
        let Some(transport_socket::ConfigType::TypedConfig(any)) = &socket.config_type else {
            panic!("typed config")
        };
        UpstreamTlsContext::decode(any.value.as_slice()).unwrap()
    }

    fn setting(mode: TlsMode) -> ClientTls {
        let mut tls = ClientTls::default();
        tls.mode = mode;
        tls
    }

    #[test]
    fn simple_without_a_ca_verifies_with_the_system_bundle_and_sends_the_host() {
        let mut cluster = Cluster::default();
        apply(&mut cluster, Some(&setting(TlsMode::Simple)), "api.example.com");
        let context = context(&cluster);
        assert_eq!(context.sni, "api.example.com");
        let common = context.common_tls_context.unwrap();
        assert!(common.tls_certificates.is_empty());
        let Some(common_tls_context::ValidationContextType::ValidationContext(validation)) =
            common.validation_context_type
        else {
            panic!("a validation context")
        };
        assert_eq!(validation.trusted_ca, Some(file(SYSTEM_CA_BUNDLE)));
    }

    #[test]
    fn mutual_presents_its_files_and_checks_the_names() {
        let mut tls = setting(TlsMode::Mutual);
        tls.client_certificate = Some("/c.pem".into());
        tls.private_key = Some("/k.pem".into());
        tls.ca_certificates = Some("/ca.pem".into());
        tls.subject_alt_names = vec!["db.example.com".into()];
        tls.sni = Some("sni.example.com".into());
        let mut cluster = Cluster::default();
        apply(&mut cluster, Some(&tls), "*.example.com");
        let context = context(&cluster);
        assert_eq!(context.sni, "sni.example.com");
        let common = context.common_tls_context.unwrap();
        assert_eq!(common.tls_certificates[0].certificate_chain, Some(file("/c.pem")));
        let Some(common_tls_context::ValidationContextType::ValidationContext(validation)) =
            common.validation_context_type
        else {
            panic!("a validation context")
        };
        assert_eq!(validation.trusted_ca, Some(file("/ca.pem")));
        assert_eq!(validation.match_typed_subject_alt_names.len(), 2);
    }

    #[test]
    fn credential_name_and_insecure_skip_verify() {
        let mut tls = setting(TlsMode::Mutual);
        tls.credential_name = Some("client".into());
        let mut cluster = Cluster::default();
        apply(&mut cluster, Some(&tls), "*");
        let context = context(&cluster);
        assert_eq!(context.sni, "");
        let common = context.common_tls_context.unwrap();
        assert_eq!(common.tls_certificate_sds_secret_configs[0].name, "client");
        assert_eq!(validation_secret(common), "client-cacert");
        let mut tls = setting(TlsMode::Simple);
        tls.insecure_skip_verify = true;
        let mut cluster = Cluster::default();
        apply(&mut cluster, Some(&tls), "h");
        assert!(context_of(&cluster).validation_context_type.is_none());
        let mut cluster = Cluster::default();
        apply(&mut cluster, Some(&setting(TlsMode::Disable)), "h");
        assert!(cluster.transport_socket.is_none());
    }

    #[test]
    fn a_backend_tls_policy_secures_its_port_at_the_edge_only() {
        let text = "apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\n\
                    metadata: {name: api-tls, namespace: shop}\n\
                    spec:\n  targetRefs: [{group: '', kind: Service, name: api, sectionName: https}]\n  \
                    validation: {caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], hostname: api.example.com}\n";
        let objects =
            pilot_model::document::parse("policy.yaml", text, &pilot_api::default_registry()).unwrap();
        let model = pilot_routing::RoutingConfigs::from_configs(&objects)
            .unwrap()
            .compile();
        let service = std::sync::Arc::new(pilot_model::Service::new(
            "api.shop.svc.cluster.local",
            vec![
                pilot_model::Port::new("http", 80, pilot_model::Protocol::Http),
                pilot_model::Port::new("https", 443, pilot_model::Protocol::Tcp),
            ],
        ));
        let clusters = |edge: bool, client: Option<&str>| {
            super::super::clusters::outbound(
                false,
                edge,
                client,
                &[std::sync::Arc::clone(&service)],
                &model,
                None,
            )
        };
        let named = |clusters: &[Cluster], port: u16| {
            clusters
                .iter()
                .find(|c| c.name == format!("outbound|{port}||api.shop.svc.cluster.local"))
                .cloned()
                .unwrap()
        };
        let router = clusters(true, None);
        let secured = context(&named(&router, 443));
        assert_eq!(secured.sni, "api.example.com");
        let Some(common_tls_context::ValidationContextType::CombinedValidationContext(combined)) =
            secured.common_tls_context.unwrap().validation_context_type
        else {
            panic!("a combined validation context")
        };
        assert_eq!(
            combined.validation_context_sds_secret_config.unwrap().name,
            "configmap://shop/ca"
        );
        assert_eq!(
            combined
                .default_validation_context
                .unwrap()
                .match_typed_subject_alt_names
                .len(),
            2,
            "api.example.com, as a DNS or URI name"
        );
        assert!(named(&router, 80).transport_socket.is_none(), "another port");
        assert!(
            context_of(&named(&router, 443))
                .tls_certificate_sds_secret_configs
                .is_empty(),
            "no client certificate"
        );
        let sidecar = clusters(false, None);
        assert!(named(&sidecar, 443).transport_socket.is_none(), "a sidecar's");

        // A router whose Gateway names a client certificate presents it,
        // and still verifies the backend with the policy's bundle.
        let router = clusters(true, Some("kubernetes://shop/client"));
        let common = context_of(&named(&router, 443));
        let presented: Vec<&str> = common
            .tls_certificate_sds_secret_configs
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(presented, ["kubernetes://shop/client"]);
        assert_eq!(validation_secret(common), "configmap://shop/ca");
        assert!(named(&router, 80).transport_socket.is_none(), "another port");
    }

    /// The SDS secret a combined validation context verifies the server
    /// with.
    fn validation_secret(common: CommonTlsContext) -> String {
        let Some(common_tls_context::ValidationContextType::CombinedValidationContext(combined)) =
            common.validation_context_type
        else {
            panic!("a combined validation context")
        };
        combined.validation_context_sds_secret_config.unwrap().name
    }

    fn context_of(cluster: &Cluster) -> CommonTlsContext {
        context(cluster).common_tls_context.unwrap()
    }
}
