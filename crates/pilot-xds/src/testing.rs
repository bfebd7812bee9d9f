//! Having the real Envoy check generated configuration (feature
//! `testing`): the resources become the static resources of a bootstrap
//! (EDS clusters with their load assignments inlined, RDS listeners with
//! their route configurations inlined), which `envoy --mode validate`
//! loads exactly as it would serve them.

use std::process::Command;

use envoy_types::pb::envoy::config::bootstrap::v3::{Bootstrap, bootstrap};
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    ApiConfigSource, ApiVersion, GrpcService, Node, api_config_source, grpc_service,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use prost::Message;

use pilot_test_support::{ProcessGuard, envoy_binary, free_port, http};

use crate::Resources;
use crate::util::{any, socket};

/// The name of the ADS cluster in test bootstraps.
pub const XDS_CLUSTER: &str = pilot_test_support::XDS_CLUSTER;

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

/// What the real Envoy loaded from `resources` (as static configuration,
/// like [`validate`]), as the JSON of its admin `/config_dump`, with
/// timestamps removed. Listeners are told not to bind, so that scenarios
/// can be dumped side by side.
pub fn config_dump(node_id: &str, resources: &Resources) -> Result<serde_json::Value, String> {
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let admin_port = free_port();
    let mut bootstrap = static_bootstrap(node_id, resources, 15010);
    if let Some(statics) = bootstrap.static_resources.as_mut() {
        for listener in &mut statics.listeners {
            listener.bind_to_port = Some(envoy_types::pb::google::protobuf::BoolValue { value: false });
        }
    }
    bootstrap.admin = Some(envoy_types::pb::envoy::config::bootstrap::v3::Admin {
        address: Some(socket("127.0.0.1", admin_port)),
        ..Default::default()
    });
    let path = dir.path().join("bootstrap.pb");
    std::fs::write(&path, bootstrap.encode_to_vec()).map_err(|e| e.to_string())?;
    let _envoy = ProcessGuard::spawn(
        Command::new(envoy_binary())
            .arg("-c")
            .arg(&path)
            .args(["--disable-hot-restart", "--log-level", "error"])
            .args(["--base-id", &admin_port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
    )
    .map_err(|e| format!("cannot run envoy (run scripts/install-deps): {e}"))?;
    let admin = std::net::SocketAddr::from(([127, 0, 0, 1], admin_port));
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        match http::request(admin, "GET", "/config_dump", &[], &[]) {
            Ok(answer) if answer.code == 200 => break answer.text(),
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            other => return Err(format!("envoy's admin did not answer: {other:?}")),
        }
    };
    let mut dump: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("config_dump is not JSON: {e}"))?;
    strip_volatile(&mut dump);
    Ok(dump)
}

/// Removes what changes from run to run (timestamps, the binary's build)
/// and puts Envoy's lists of resources (`static_*`, `dynamic_*`, which it
/// dumps in hash order) in name order. Order inside a resource is kept.
fn strip_volatile(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove("last_updated");
            map.remove("bootstrap");
            for (key, child) in map.iter_mut() {
                if (key.starts_with("static_") || key.starts_with("dynamic_"))
                    && let serde_json::Value::Array(items) = child
                {
                    items.sort_by_key(resource_name);
                }
                strip_volatile(child);
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_volatile),
        _ => {}
    }
}

/// The name of a dumped resource (`{"cluster": {"name": ...}}` and the like).
fn resource_name(item: &serde_json::Value) -> String {
    let named = |v: &serde_json::Value| v.get("name").and_then(|n| n.as_str()).map(str::to_string);
    named(item)
        .or_else(|| item.as_object().and_then(|o| o.values().find_map(named)))
        .unwrap_or_default()
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
    let mut cluster = Cluster {
        name: XDS_CLUSTER.into(),
        connect_timeout: Some(crate::util::duration(std::time::Duration::from_secs(1))),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Static as i32,
        )),
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: XDS_CLUSTER.into(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: vec![LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                        address: Some(socket("127.0.0.1", port)),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    crate::clusters::use_http2(&mut cluster);
    cluster
}
