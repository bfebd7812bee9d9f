//! Inbound filter chains by mutual TLS mode: STRICT requires TLS with the
//! workload certificate and a client certificate the mesh root signed;
//! PERMISSIVE inspects the first bytes (`tls_inspector`) and serves TLS
//! and plaintext on two chains; DISABLE leaves the chain plaintext.
//!
//! On TLS chains the HTTP connection manager sets the
//! `x-forwarded-client-cert` header to the caller's identity (its URI
//! SAN), so the application sees who called it; plaintext chains remove
//! any such header a caller sent.

use envoy_types::pb::envoy::config::core::v3::{
    ApiConfigSource, ApiVersion, ConfigSource, GrpcService, TransportSocket, api_config_source,
    config_source, grpc_service, transport_socket,
};
use envoy_types::pb::envoy::config::listener::v3::{
    FilterChain, FilterChainMatch, Listener, ListenerFilter, filter, listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, DownstreamTlsContext, SdsSecretConfig, common_tls_context,
};
use envoy_types::pb::google::protobuf::{Any, BoolValue};
use pilot_routing::MtlsMode;
use prost::Message;

use super::{DEFAULT_SECRET, ROOT_SECRET, SDS_CLUSTER};
use crate::build::util::any;

/// The TLS inspector listener filter's name.
const TLS_INSPECTOR: &str = "envoy.filters.listener.tls_inspector";
/// The HTTP connection manager's name.
const HCM: &str = "envoy.filters.network.http_connection_manager";

/// Rewrites an inbound listener's chains for `mode`.
pub(crate) fn secure_inbound(listener: &mut Listener, mode: MtlsMode) {
    match mode {
        MtlsMode::Strict => {
            for chain in &mut listener.filter_chains {
                make_tls(chain);
            }
        }
        MtlsMode::Permissive => {
            let mut plain = listener.filter_chains.clone();
            for chain in &mut listener.filter_chains {
                make_tls(chain);
                chain.filter_chain_match = Some(transport_protocol("tls"));
            }
            for chain in &mut plain {
                chain.filter_chain_match = Some(transport_protocol("raw_buffer"));
                chain.name = format!("{}_plaintext", chain.name);
            }
            listener.filter_chains.extend(plain);
            listener.listener_filters.push(ListenerFilter {
                name: TLS_INSPECTOR.into(),
                config_type: Some(listener_filter::ConfigType::TypedConfig(any(
                    &TlsInspector::default(),
                ))),
                ..Default::default()
            });
        }
        _ => {}
    }
}

/// An SDS secret served by the agent.
pub(crate) fn sds(name: &str) -> SdsSecretConfig {
    SdsSecretConfig {
        name: name.into(),
        sds_config: Some(ConfigSource {
            config_source_specifier: Some(config_source::ConfigSourceSpecifier::ApiConfigSource(
                ApiConfigSource {
                    api_type: api_config_source::ApiType::Grpc as i32,
                    transport_api_version: ApiVersion::V3 as i32,
                    grpc_services: vec![GrpcService {
                        target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                            grpc_service::EnvoyGrpc {
                                cluster_name: SDS_CLUSTER.into(),
                                ..Default::default()
                            },
                        )),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            )),
            resource_api_version: ApiVersion::V3 as i32,
            ..Default::default()
        }),
    }
}

/// The workload certificate, peers verified against the mesh root.
pub(crate) fn mesh_tls_context(validation: common_tls_context::ValidationContextType) -> CommonTlsContext {
    CommonTlsContext {
        tls_certificate_sds_secret_configs: vec![sds(DEFAULT_SECRET)],
        validation_context_type: Some(validation),
        ..Default::default()
    }
}

fn make_tls(chain: &mut FilterChain) {
    let context = DownstreamTlsContext {
        common_tls_context: Some(mesh_tls_context(
            common_tls_context::ValidationContextType::ValidationContextSdsSecretConfig(sds(ROOT_SECRET)),
        )),
        require_client_certificate: Some(BoolValue { value: true }),
        ..Default::default()
    };
    chain.transport_socket = Some(TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&context))),
    });
    for filter in &mut chain.filters {
        if filter.name != HCM {
            continue;
        }
        let Some(filter::ConfigType::TypedConfig(config)) = &mut filter.config_type else {
            continue;
        };
        if let Ok(mut manager) = HttpConnectionManager::decode(config.value.as_slice()) {
            manager.forward_client_cert_details =
                http_connection_manager::ForwardClientCertDetails::SanitizeSet as i32;
            manager.set_current_client_cert_details =
                Some(http_connection_manager::SetCurrentClientCertDetails {
                    uri: true,
                    ..Default::default()
                });
            *config = Any {
                type_url: config.type_url.clone(),
                value: manager.encode_to_vec(),
            };
        }
    }
}

fn transport_protocol(protocol: &str) -> FilterChainMatch {
    FilterChainMatch {
        transport_protocol: protocol.into(),
        ..Default::default()
    }
}
