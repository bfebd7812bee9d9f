//! Outbound mutual TLS: a cluster to mesh workloads originates mutual TLS
//! with the workload certificate and checks the server's identity (a URI
//! SAN of the destination's service accounts).
//!
//! - DestinationRule `tls.mode: ISTIO_MUTUAL`: every connection of the
//!   cluster.
//! - No TLS setting (auto mTLS): per endpoint, by its metadata: an
//!   instance labelled `security.istio.io/tlsMode: istio` runs a sidecar,
//!   its load-assignment entry carries `tlsMode: istio` under
//!   `envoy.transport_socket_match`, and the cluster's
//!   `transport_socket_matches` send mutual TLS there and plaintext
//!   elsewhere; unless the destination's PeerAuthentication (its
//!   namespace's, the mesh's, or one selecting the cluster's subset)
//!   says DISABLE.
//! - Any other TLS mode: left as the traffic policy says.
//!
//! Mutual TLS sends the SNI Istio's sidecars send,
//! `outbound_.<port>_.<subset>_.<hostname>` (the subset's name, empty for
//! the whole service): an `AUTO_PASSTHROUGH` gateway routes by it
//! (`gateway/sni_dnat.rs`).

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{Metadata, TransportSocket, transport_socket};
use envoy_types::pb::envoy::extensions::transport_sockets::raw_buffer::v3::RawBuffer;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, SubjectAltNameMatcher, UpstreamTlsContext, common_tls_context,
    subject_alt_name_matcher,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
use envoy_types::pb::google::protobuf::{Struct, Value, value};
use pilot_model::{Labels, Service, ServiceInstance};
use pilot_routing::MtlsMode;
use pilot_routing::{ClientTls, TlsMode};

use super::inbound::{mesh_tls_context, sds};
use super::{MeshTls, ROOT_SECRET, TLS_MODE_ISTIO, TLS_MODE_LABEL, namespace_of};
use crate::build::util::any;

/// Where Envoy reads an endpoint's transport socket match.
const SOCKET_MATCH_KEY: &str = "envoy.transport_socket_match";
/// The metadata key (and label suffix) of the TLS mode.
const TLS_MODE_KEY: &str = "tlsMode";

/// Secures the outbound cluster of `service` on `port` (its `subset`)
/// as the module describes, sending `sni`; `tls` is the traffic policy's
/// setting.
pub(crate) fn secure_outbound(
    cluster: &mut Cluster,
    service: &Service,
    port: u16,
    subset: &Labels,
    sni: &str,
    tls: Option<&ClientTls>,
    security: &MeshTls,
) {
    match tls.map(|t| t.mode) {
        Some(TlsMode::IstioMutual) => cluster.transport_socket = Some(upstream_tls(service, sni, security)),
        Some(_) => {}
        None => {
            let namespace = namespace_of(&service.hostname);
            if security.mtls_mode(namespace, subset, port) == MtlsMode::Disable {
                return;
            }
            let tls = upstream_tls(service, sni, security);
            cluster.transport_socket_matches = vec![
                cluster::TransportSocketMatch {
                    name: format!("{TLS_MODE_KEY}-{TLS_MODE_ISTIO}"),
                    r#match: Some(tls_mode_struct()),
                    transport_socket: Some(tls),
                },
                cluster::TransportSocketMatch {
                    name: format!("{TLS_MODE_KEY}-disabled"),
                    r#match: Some(Struct::default()),
                    transport_socket: Some(TransportSocket {
                        name: "envoy.transport_sockets.raw_buffer".into(),
                        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&RawBuffer {}))),
                    }),
                },
            ];
        }
    }
}

/// The load-assignment metadata of an instance with a sidecar
/// (`security.istio.io/tlsMode: istio`); none for others.
pub(crate) fn endpoint_metadata(instance: &ServiceInstance) -> Option<Metadata> {
    (instance.labels.0.get(TLS_MODE_LABEL).map(String::as_str) == Some(TLS_MODE_ISTIO)).then(|| Metadata {
        filter_metadata: [(SOCKET_MATCH_KEY.to_string(), tls_mode_struct())].into(),
        ..Default::default()
    })
}

fn tls_mode_struct() -> Struct {
    Struct {
        fields: [(
            TLS_MODE_KEY.to_string(),
            Value {
                kind: Some(value::Kind::StringValue(TLS_MODE_ISTIO.into())),
            },
        )]
        .into(),
    }
}

/// Mutual TLS with the workload certificate, sending `sni`; the server
/// must chain to the mesh root and, when the service's accounts are known,
/// carry one of their SPIFFE identities.
fn upstream_tls(service: &Service, sni: &str, security: &MeshTls) -> TransportSocket {
    let namespace = namespace_of(&service.hostname);
    let sans = service
        .service_accounts
        .iter()
        .map(|account| SubjectAltNameMatcher {
            san_type: subject_alt_name_matcher::SanType::Uri as i32,
            matcher: Some(StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::Exact(
                    security.spiffe_id(namespace, account),
                )),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    let validation = common_tls_context::ValidationContextType::CombinedValidationContext(
        common_tls_context::CombinedCertificateValidationContext {
            default_validation_context: Some(CertificateValidationContext {
                match_typed_subject_alt_names: sans,
                ..Default::default()
            }),
            validation_context_sds_secret_config: Some(sds(ROOT_SECRET)),
            ..Default::default()
        },
    );
    let context = UpstreamTlsContext {
        common_tls_context: Some(mesh_tls_context(validation)),
        sni: sni.to_string(),
        ..Default::default()
    };
    TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&context))),
    }
}
