//! Having the real Envoy check generated configuration (feature
//! `testing`): the resources become the static resources of a bootstrap
//! (EDS clusters with their load assignments inlined, RDS listeners with
//! their route configurations inlined), which `envoy --mode validate`
//! loads exactly as it would serve them.

use std::path::PathBuf;
use std::process::Command;

use envoy_types::pb::envoy::config::bootstrap::v3::{Bootstrap, bootstrap};
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    ApiConfigSource, ApiVersion, GrpcService, Http2ProtocolOptions, Node, api_config_source, grpc_service,
};
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{HttpProtocolOptions, http_protocol_options};
use prost::Message;

use crate::Resources;
use crate::util::{any, socket};

/// The name of the ADS cluster in test bootstraps.
pub const XDS_CLUSTER: &str = "xds-grpc";

/// The Envoy binary: `$ENVOY`, else `.tools/envoy/bin/envoy` in the
/// workspace (installed by `scripts/install-deps`), else `envoy` on `PATH`.
pub fn envoy_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("ENVOY") {
        return PathBuf::from(path);
    }
    let tools = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/envoy/bin/envoy");
    if tools.exists() {
        return tools;
    }
    PathBuf::from("envoy")
}

/// A bootstrap whose static resources are `resources`, with an ADS
/// cluster at `xds_port` on 127.0.0.1 for what stays dynamic (SDS secrets).
pub fn static_bootstrap(node_id: &str, resources: &Resources, xds_port: u16) -> Bootstrap {
    let mut clusters: Vec<Cluster> = resources
        .clusters
        .iter()
        .map(|c| inline_endpoints(c, resources))
        .collect();
    clusters.push(xds_cluster(xds_port));
    let listeners: Vec<Listener> = resources
        .listeners
        .iter()
        .map(|l| inline_routes(l, resources))
        .collect();
    Bootstrap {
        node: Some(Node {
            id: node_id.to_string(),
            cluster: "pilot".into(),
            ..Default::default()
        }),
        static_resources: Some(bootstrap::StaticResources {
            listeners,
            clusters,
            ..Default::default()
        }),
        dynamic_resources: Some(bootstrap::DynamicResources {
            ads_config: Some(ApiConfigSource {
                api_type: api_config_source::ApiType::Grpc as i32,
                transport_api_version: ApiVersion::V3 as i32,
                grpc_services: vec![GrpcService {
                    target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                        grpc_service::EnvoyGrpc {
                            cluster_name: XDS_CLUSTER.into(),
                            ..Default::default()
                        },
                    )),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Runs `envoy --mode validate` on `resources` as static configuration;
/// `Err` carries what Envoy said.
pub fn validate(node_id: &str, resources: &Resources) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("bootstrap.pb");
    std::fs::write(&path, static_bootstrap(node_id, resources, 15010).encode_to_vec())
        .map_err(|e| e.to_string())?;
    let envoy = envoy_binary();
    let output = Command::new(&envoy)
        .arg("--mode")
        .arg("validate")
        .arg("-c")
        .arg(&path)
        .arg("--log-level")
        .arg("warn")
        .output()
        .map_err(|e| format!("cannot run {} (run scripts/install-deps): {e}", envoy.display()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "envoy rejected the configuration:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn inline_endpoints(cluster: &Cluster, resources: &Resources) -> Cluster {
    let mut cluster = cluster.clone();
    let eds = cluster::ClusterDiscoveryType::Type(cluster::DiscoveryType::Eds as i32);
    if cluster.cluster_discovery_type == Some(eds) {
        cluster.cluster_discovery_type = Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Static as i32,
        ));
        cluster.eds_cluster_config = None;
        cluster.load_assignment = resources
            .endpoints
            .iter()
            .find(|e| e.cluster_name == cluster.name)
            .cloned();
    }
    cluster
}

fn inline_routes(listener: &Listener, resources: &Resources) -> Listener {
    let mut listener = listener.clone();
    for chain in &mut listener.filter_chains {
        for filter in &mut chain.filters {
            let Some(filter::ConfigType::TypedConfig(config)) = &mut filter.config_type else {
                continue;
            };
            let Ok(mut manager) = HttpConnectionManager::decode(config.value.as_slice()) else {
                continue;
            };
            if filter.name != "envoy.filters.network.http_connection_manager" {
                continue;
            }
            if let Some(http_connection_manager::RouteSpecifier::Rds(rds)) = &manager.route_specifier
                && let Some(routes) = resources.routes.iter().find(|r| r.name == rds.route_config_name)
            {
                manager.route_specifier = Some(http_connection_manager::RouteSpecifier::RouteConfig(
                    routes.clone(),
                ));
                *config = any(&manager);
            }
        }
    }
    listener
}

fn xds_cluster(port: u16) -> Cluster {
    let options = HttpProtocolOptions {
        upstream_protocol_options: Some(
            http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                http_protocol_options::ExplicitHttpConfig {
                    protocol_config: Some(
                        http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                            Http2ProtocolOptions::default(),
                        ),
                    ),
                },
            ),
        ),
        ..Default::default()
    };
    let mut cluster = Cluster {
        name: XDS_CLUSTER.into(),
        connect_timeout: Some(crate::util::duration(std::time::Duration::from_secs(1))),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(cluster::DiscoveryType::Static as i32)),
        load_assignment: Some(envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment {
            cluster_name: XDS_CLUSTER.into(),
            endpoints: vec![envoy_types::pb::envoy::config::endpoint::v3::LocalityLbEndpoints {
                lb_endpoints: vec![envoy_types::pb::envoy::config::endpoint::v3::LbEndpoint {
                    host_identifier: Some(envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier::Endpoint(
                        envoy_types::pb::envoy::config::endpoint::v3::Endpoint {
                            address: Some(socket("127.0.0.1", port)),
                            ..Default::default()
                        },
                    )),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    cluster.typed_extension_protocol_options.insert(
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions".into(),
        any(&options),
    );
    cluster
}
