//! Having the real Envoy check generated configuration (feature
//! `testing`): the resources become the static resources of a bootstrap
//! (EDS clusters with their load assignments inlined, RDS listeners with
//! their route configurations inlined, scoped ones with their scopes and
//! their route configurations), which `envoy --mode validate`
//! loads exactly as it would serve them.
//!
//! Needs only an Envoy binary, whose path the caller gives (an embedder's
//! tests can use [`envoy_on_path`]); nothing else is required.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

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
    HttpConnectionManager, ScopedRouteConfigurationsList, http_connection_manager, scoped_routes,
};
use prost::Message;

use crate::Resources;
use crate::build::util::{any, socket};

/// The name of the ADS cluster in test bootstraps.
pub const XDS_CLUSTER: &str = "xds-grpc";

/// The Envoy binary named by `$ENVOY`, else `envoy` (looked up on `PATH`
/// when it runs).
pub fn envoy_on_path() -> PathBuf {
    std::env::var_os("ENVOY").map_or_else(|| PathBuf::from("envoy"), PathBuf::from)
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
    // The agent's SDS cluster the mesh's TLS contexts name; secrets stay
    // unanswered here.
    let mut sds = xds_cluster(xds_port);
    sds.name = crate::build::security::SDS_CLUSTER.into();
    if let Some(assignment) = &mut sds.load_assignment {
        assignment.cluster_name = sds.name.clone();
    }
    clusters.push(sds);
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

/// Runs `envoy --mode validate` (the binary at `envoy`) on `resources` as
/// static configuration; `Err` carries what Envoy said.
pub fn validate(envoy: &Path, node_id: &str, resources: &Resources) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("bootstrap.pb");
    std::fs::write(&path, static_bootstrap(node_id, resources, 15010).encode_to_vec())
        .map_err(|e| e.to_string())?;
    let output = Command::new(envoy)
        .arg("--mode")
        .arg("validate")
        .arg("-c")
        .arg(&path)
        .arg("--log-level")
        .arg("warn")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", envoy.display()))?;
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

/// What the real Envoy (the binary at `envoy`) loaded from `resources` (as
/// static configuration, like [`validate`]), as the JSON of its admin
/// `/config_dump`, with timestamps removed. Listeners are told not to bind,
/// and the admin port is Envoy's own choice, so that scenarios can be
/// dumped side by side.
pub fn config_dump(envoy: &Path, node_id: &str, resources: &Resources) -> Result<serde_json::Value, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut bootstrap = static_bootstrap(node_id, resources, 15010);
    if let Some(statics) = bootstrap.static_resources.as_mut() {
        for listener in &mut statics.listeners {
            listener.bind_to_port = Some(envoy_types::pb::google::protobuf::BoolValue { value: false });
        }
    }
    bootstrap.admin = Some(envoy_types::pb::envoy::config::bootstrap::v3::Admin {
        address: Some(socket("127.0.0.1", 0)),
        ..Default::default()
    });
    let path = dir.path().join("bootstrap.pb");
    let admin_path = dir.path().join("admin-address");
    std::fs::write(&path, bootstrap.encode_to_vec()).map_err(|e| e.to_string())?;
    let child = Command::new(envoy)
        .arg("-c")
        .arg(&path)
        .arg("--admin-address-path")
        .arg(&admin_path)
        .args(["--disable-hot-restart", "--log-level", "error"])
        .args(["--base-id", &std::process::id().to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", envoy.display()))?;
    let mut guard = KillOnDrop(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    let body = loop {
        let answer = std::fs::read_to_string(&admin_path)
            .ok()
            .and_then(|address| get(address.trim(), "/config_dump").ok());
        match answer {
            Some((200, body)) => break body,
            _ if Instant::now() >= deadline => return Err("envoy's admin did not answer within 60 s".into()),
            _ => {
                if let Ok(Some(status)) = guard.0.try_wait() {
                    return Err(format!("envoy exited ({status}) before its admin answered"));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    let mut dump: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("config_dump is not JSON: {e}"))?;
    strip_volatile(&mut dump);
    Ok(dump)
}

/// A child process killed (and reaped) when dropped.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A plain HTTP/1.1 GET on a connection of its own: the status code and
/// the body (chunked or not).
fn get(address: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(answer.len());
    let head = String::from_utf8_lossy(&answer[..split]).to_ascii_lowercase();
    let body = answer.get(split + 4..).unwrap_or_default();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let chunked = head
        .lines()
        .any(|line| line.replace(' ', "") == "transfer-encoding:chunked");
    let body = if chunked { dechunk(body) } else { body.to_vec() };
    Ok((code, String::from_utf8_lossy(&body).into_owned()))
}

/// The payload of a chunked body.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    while let Some(line_end) = body.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&body[..line_end])
            .ok()
            .and_then(|line| usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16).ok())
            .unwrap_or(0);
        let rest = &body[line_end + 2..];
        if size == 0 || rest.len() < size {
            break;
        }
        payload.extend_from_slice(&rest[..size]);
        body = rest[size..].strip_prefix(b"\r\n").unwrap_or(&rest[size..]);
    }
    payload
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
            let named = |name: &str| resources.routes.iter().find(|r| r.name == name).cloned();
            match &mut manager.route_specifier {
                Some(http_connection_manager::RouteSpecifier::Rds(rds)) => {
                    if let Some(routes) = named(&rds.route_config_name) {
                        manager.route_specifier =
                            Some(http_connection_manager::RouteSpecifier::RouteConfig(routes));
                    }
                }
                // The manager's scopes (those whose key starts with its
                // name) listed in it, each with its routes inline.
                Some(http_connection_manager::RouteSpecifier::ScopedRoutes(scoped)) => {
                    use envoy_types::pb::envoy::config::route::v3::scoped_route_configuration::key::fragment;
                    let manager_name = Some(fragment::Type::StringKey(scoped.name.clone()));
                    let scopes = resources
                        .scoped_routes
                        .iter()
                        .filter(|scope| {
                            scope
                                .key
                                .as_ref()
                                .and_then(|key| key.fragments.first())
                                .is_some_and(|first| first.r#type == manager_name)
                        })
                        .map(|scope| {
                            let mut scope = scope.clone();
                            scope.route_configuration = named(&scope.route_configuration_name);
                            scope.route_configuration_name.clear();
                            scope
                        })
                        .collect();
                    scoped.config_specifier =
                        Some(scoped_routes::ConfigSpecifier::ScopedRouteConfigurationsList(
                            ScopedRouteConfigurationsList {
                                scoped_route_configurations: scopes,
                            },
                        ));
                }
                _ => continue,
            }
            *config = any(&manager);
        }
    }
    listener
}

fn xds_cluster(port: u16) -> Cluster {
    let mut cluster = Cluster {
        name: XDS_CLUSTER.into(),
        connect_timeout: Some(crate::build::util::duration(std::time::Duration::from_secs(1))),
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
    crate::build::cluster::use_http2(&mut cluster);
    cluster
}
