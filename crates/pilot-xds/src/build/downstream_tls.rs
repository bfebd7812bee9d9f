//! TLS a listener terminates with its own certificate, for a gateway's
//! server ([`server_socket`]: a secret over SDS or files, MUTUAL requiring
//! a client certificate) and for a Sidecar's ingress listener
//! ([`ingress_socket`]).
//!
//! A Sidecar's ingress listener (`ingress[].tls`, compiled:
//! [`IngressTls`]), as Istio reads it: the listener terminates TLS with the certificate and key files the
//! settings name (mounted into the proxy), in place of the mesh's mutual
//! TLS, so the workload's PeerAuthentication does not apply to that port.
//! `MUTUAL` requires a client certificate the `caCertificates` file
//! signed, `OPTIONAL_MUTUAL` verifies one when offered; `PASSTHROUGH`
//! (or no mode) forwards the connection as it came. After termination
//! an `HTTPS` port speaks HTTP, a `TLS` port TCP.
//!
//! Where HTTP follows the termination (`HTTPS`, `HTTP`, `HTTP2`, `GRPC`
//! ports), the listener offers ALPN `h2` and `http/1.1` ([`HTTP_ALPN`],
//! Istio's `ALPNHttp`), so a client speaking HTTP/2 negotiates it; the
//! connection manager serves either. Istio offers the same on ports of
//! every protocol; a port forwarding TCP offers none here, since a client
//! told `h2` would speak HTTP/2 to an application that may not.

use envoy_types::pb::envoy::config::core::v3::{DataSource, TransportSocket, data_source, transport_socket};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, SdsSecretConfig, TlsCertificate,
    TlsParameters, certificate_validation_context, common_tls_context,
};
use envoy_types::pb::google::protobuf::BoolValue;
use pilot_model::Protocol;
use pilot_routing::{IngressTls, IngressTlsMode, ServerTls, ServerTlsMode};

use super::util::{ads, any};

/// The ALPN values a listener offers where it terminates TLS for HTTP:
/// HTTP/2 first, then HTTP/1.1 (Istio's `ALPNHttp`).
pub(crate) const HTTP_ALPN: [&str; 2] = ["h2", "http/1.1"];

/// The transport socket terminating `tls`, offering [`HTTP_ALPN`] when
/// `protocol` (the one spoken after termination) is HTTP; `None` for
/// passthrough.
pub(crate) fn ingress_socket(tls: &IngressTls, protocol: Protocol) -> Option<TransportSocket> {
    if !tls.terminates() {
        return None;
    }
    let file = |path: &str| {
        (!path.is_empty()).then(|| DataSource {
            specifier: Some(data_source::Specifier::Filename(path.to_string())),
            ..Default::default()
        })
    };
    let mut common = CommonTlsContext {
        tls_certificates: vec![TlsCertificate {
            certificate_chain: file(&tls.server_certificate),
            private_key: file(&tls.private_key),
            ..Default::default()
        }],
        alpn_protocols: alpn(protocol),
        ..Default::default()
    };
    let (min, max) = tls.versions;
    if min != 0 || max != 0 || !tls.cipher_suites.is_empty() {
        common.tls_params = Some(TlsParameters {
            tls_minimum_protocol_version: min,
            tls_maximum_protocol_version: max,
            cipher_suites: tls.cipher_suites.clone(),
            ..Default::default()
        });
    }
    if tls.mode != IngressTlsMode::Simple {
        common.validation_context_type = Some(common_tls_context::ValidationContextType::ValidationContext(
            CertificateValidationContext {
                trusted_ca: file(&tls.ca_certificates),
                crl: file(&tls.ca_crl),
                verify_certificate_spki: tls.verify_certificate_spki.clone(),
                verify_certificate_hash: tls.verify_certificate_hash.clone(),
                ..Default::default()
            },
        ));
    }
    let context = DownstreamTlsContext {
        common_tls_context: Some(common),
        require_client_certificate: (tls.mode == IngressTlsMode::Mutual).then_some(BoolValue { value: true }),
        ..Default::default()
    };
    Some(TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&context))),
    })
}

/// A gateway server's TLS, terminated with its certificate: a secret over SDS, or
/// files; MUTUAL requires a client certificate its CA (a file, or the
/// secret `credentialName-cacert`) signed, with one of the server's
/// `subjectAltNames` when it lists any. Where `protocol` (what follows
/// the termination) is HTTP, ALPN offers `h2` and `http/1.1`, as Istio's
/// gateways do.
pub(crate) fn server_socket(tls: &ServerTls, protocol: Protocol) -> TransportSocket {
    let file = |path: &str| DataSource {
        specifier: Some(data_source::Specifier::Filename(path.to_string())),
        ..Default::default()
    };
    let mut common = CommonTlsContext {
        alpn_protocols: alpn(protocol),
        ..Default::default()
    };
    match (&tls.credential_name, &tls.server_certificate, &tls.private_key) {
        (Some(secret), _, _) => common.tls_certificate_sds_secret_configs.push(SdsSecretConfig {
            name: secret.clone(),
            sds_config: Some(ads()),
        }),
        (None, Some(certificate), Some(key)) => common.tls_certificates.push(TlsCertificate {
            certificate_chain: Some(file(certificate)),
            private_key: Some(file(key)),
            ..Default::default()
        }),
        _ => {}
    }
    let mutual = tls.mode == ServerTlsMode::Mutual;
    if mutual {
        let validation = CertificateValidationContext {
            trusted_ca: tls.ca_certificates.as_deref().map(file),
            match_typed_subject_alt_names: super::upstream_tls::san_matchers(&tls.subject_alt_names),
            // Insecure fallback: a certificate that does not verify is let
            // in as one not sent would be.
            trust_chain_verification: if tls.client_certificate_optional {
                certificate_validation_context::TrustChainVerification::AcceptUntrusted as i32
            } else {
                0
            },
            ..Default::default()
        };
        common.validation_context_type =
            match (&tls.ca_certificates, &tls.client_ca_secret, &tls.credential_name) {
                (Some(_), _, _) => Some(common_tls_context::ValidationContextType::ValidationContext(
                    validation,
                )),
                (None, Some(bundle), _) => Some(
                    common_tls_context::ValidationContextType::CombinedValidationContext(
                        common_tls_context::CombinedCertificateValidationContext {
                            default_validation_context: Some(validation),
                            validation_context_sds_secret_config: Some(SdsSecretConfig {
                                name: bundle.clone(),
                                sds_config: Some(ads()),
                            }),
                            ..Default::default()
                        },
                    ),
                ),
                (None, None, Some(secret)) => Some(
                    common_tls_context::ValidationContextType::CombinedValidationContext(
                        common_tls_context::CombinedCertificateValidationContext {
                            default_validation_context: Some(validation),
                            validation_context_sds_secret_config: Some(SdsSecretConfig {
                                name: format!("{secret}-cacert"),
                                sds_config: Some(ads()),
                            }),
                            ..Default::default()
                        },
                    ),
                ),
                (None, None, None) => None,
            };
    }
    let context = DownstreamTlsContext {
        common_tls_context: Some(common),
        require_client_certificate: (mutual && !tls.client_certificate_optional)
            .then_some(BoolValue { value: true }),
        ..Default::default()
    };
    TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&context))),
    }
}

/// The ALPN values a listener terminating TLS offers where `protocol`
/// follows: [`HTTP_ALPN`] for HTTP, none otherwise.
pub(crate) fn alpn(protocol: Protocol) -> Vec<String> {
    if protocol.is_http() {
        HTTP_ALPN.iter().map(|p| p.to_string()).collect()
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::protobuf::Any;
    use prost::Message;

    fn context(socket: TransportSocket) -> DownstreamTlsContext {
        let Some(transport_socket::ConfigType::TypedConfig(Any { value, .. })) = socket.config_type else {
            panic!("typed config");
        };
        DownstreamTlsContext::decode(value.as_slice()).unwrap()
    }

    use pilot_api::networking::{ServerTlsMode, ServerTlsSettings, TlsProtocol};

    fn settings(mode: ServerTlsMode) -> ServerTlsSettings {
        ServerTlsSettings {
            mode: Some(mode),
            server_certificate: "/etc/certs/cert.pem".into(),
            private_key: "/etc/certs/key.pem".into(),
            ca_certificates: "/etc/certs/ca.pem".into(),
            min_protocol_version: Some(TlsProtocol::TlsV1_2),
            ..Default::default()
        }
    }

    #[test]
    fn simple_terminates_with_the_files_and_asks_no_client_certificate() {
        let tls = IngressTls::of(&settings(ServerTlsMode::Simple));
        assert_eq!(tls.after_termination(Protocol::Https), Protocol::Http);
        assert_eq!(tls.after_termination(Protocol::Tcp), Protocol::Tcp);
        let context = context(ingress_socket(&tls, Protocol::Http).unwrap());
        assert_eq!(context.require_client_certificate, None);
        let common = context.common_tls_context.unwrap();
        assert_eq!(common.alpn_protocols, ["h2", "http/1.1"]);
        assert_eq!(common.validation_context_type, None);
        let certificate = &common.tls_certificates[0];
        assert_eq!(
            certificate.certificate_chain.as_ref().unwrap().specifier,
            Some(data_source::Specifier::Filename("/etc/certs/cert.pem".into()))
        );
        assert_eq!(
            certificate.private_key.as_ref().unwrap().specifier,
            Some(data_source::Specifier::Filename("/etc/certs/key.pem".into()))
        );
        assert_eq!(common.tls_params.unwrap().tls_minimum_protocol_version, 3);
    }

    #[test]
    fn mutual_requires_a_client_certificate_from_the_ca() {
        let context = context(
            ingress_socket(&IngressTls::of(&settings(ServerTlsMode::Mutual)), Protocol::Tcp).unwrap(),
        );
        assert_eq!(
            context.require_client_certificate,
            Some(BoolValue { value: true })
        );
        let common = context.common_tls_context.unwrap();
        assert!(common.alpn_protocols.is_empty(), "TCP after termination: no ALPN");
        let Some(common_tls_context::ValidationContextType::ValidationContext(validation)) =
            common.validation_context_type
        else {
            panic!("a validation context");
        };
        assert_eq!(
            validation.trusted_ca.unwrap().specifier,
            Some(data_source::Specifier::Filename("/etc/certs/ca.pem".into()))
        );
        let optional = context_of(ServerTlsMode::OptionalMutual);
        assert_eq!(optional.require_client_certificate, None);
        assert!(
            optional
                .common_tls_context
                .unwrap()
                .validation_context_type
                .is_some()
        );
    }

    fn context_of(mode: ServerTlsMode) -> DownstreamTlsContext {
        context(ingress_socket(&IngressTls::of(&settings(mode)), Protocol::Grpc).unwrap())
    }

    #[test]
    fn passthrough_terminates_nothing() {
        let tls = IngressTls::of(&settings(ServerTlsMode::Passthrough));
        assert!(ingress_socket(&tls, Protocol::Http).is_none());
        assert_eq!(tls.after_termination(Protocol::Https), Protocol::Https);
    }
}
