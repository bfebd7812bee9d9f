//! The ADS server driving a real Envoy 1.40 (no traffic capture): real
//! requests through Envoy's listener reach the versions the rules say, and
//! the server records what Envoy ACKed and NACKed.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::bootstrap::v3::{Admin, Bootstrap, bootstrap};
use envoy_types::pb::envoy::config::core::v3::{
    AggregatedConfigSource, ApiConfigSource, ApiVersion, ConfigSource, GrpcService, Node, api_config_source,
    config_source, grpc_service,
};
use envoy_types::pb::google::protobuf::{Struct, Value, value};
use pilot_model::{
    ConfigKey, ConfigStore, Labels, NetworkEndpoint, Port, Protocol, Service, ServiceDiscovery,
    ServiceInstance, document, istio,
};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_xds::{XdsOptions, XdsServer, testing};
use prost::Message;

const HOST: &str = "reviews.default.svc.cluster.local";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A tiny HTTP/1.1 server that answers every request with its version,
/// after an optional delay.
fn upstream(version: &'static str, delay_ms: Arc<AtomicU64>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let delay = Arc::clone(&delay_ms);
            std::thread::spawn(move || serve(stream, version, delay));
        }
    });
    port
}

fn serve(mut stream: TcpStream, version: &str, delay: Arc<AtomicU64>) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
        let end = buffer.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        buffer.drain(..end);
        std::thread::sleep(Duration::from_millis(delay.load(Ordering::Relaxed)));
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{version}",
            version.len()
        );
        if stream.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// One request through Envoy's listener; (status, body).
fn request(port: u16, headers: &[(&str, &str)]) -> (u16, String) {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new());
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut text = String::from("GET / HTTP/1.1\r\nhost: reviews\r\nconnection: close\r\n");
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str("\r\n");
    if stream.write_all(text.as_bytes()).is_err() {
        return (0, String::new());
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn admin(port: u16, path: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: admin\r\nconnection: close\r\n\r\n"
    );
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

/// Retries `check` until it passes or 30 s have gone by.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Counts of bodies over `n` requests.
fn spread(port: u16, n: usize, headers: &[(&str, &str)]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for _ in 0..n {
        let (status, body) = request(port, headers);
        *counts
            .entry(if status == 200 {
                body
            } else {
                format!("status {status}")
            })
            .or_default() += 1;
    }
    counts
}

struct Envoy {
    child: Child,
    admin: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_envoy(xds_port: u16, delta: bool) -> Envoy {
    let dir = tempfile::tempdir().unwrap();
    let admin_port = free_port();
    let ads = || ConfigSource {
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource {},
        )),
        resource_api_version: ApiVersion::V3 as i32,
        ..Default::default()
    };
    let mut base = testing::static_bootstrap("unused", &pilot_xds::Resources::default(), xds_port);
    let statics = base.static_resources.take().unwrap();
    let metadata = Struct {
        fields: [(
            "INTERCEPTION_MODE".to_string(),
            Value {
                kind: Some(value::Kind::StringValue("NONE".into())),
            },
        )]
        .into(),
    };
    let bootstrap = Bootstrap {
        node: Some(Node {
            id: "sidecar~10.99.0.1~client.default~default.svc.cluster.local".into(),
            cluster: "client".into(),
            metadata: Some(metadata),
            ..Default::default()
        }),
        static_resources: Some(bootstrap::StaticResources { clusters: statics.clusters, ..Default::default() }),
        dynamic_resources: Some(bootstrap::DynamicResources {
            ads_config: Some(ApiConfigSource {
                api_type: if delta {
                    api_config_source::ApiType::DeltaGrpc as i32
                } else {
                    api_config_source::ApiType::Grpc as i32
                },
                transport_api_version: ApiVersion::V3 as i32,
                grpc_services: vec![GrpcService {
                    target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(grpc_service::EnvoyGrpc {
                        cluster_name: testing::XDS_CLUSTER.into(),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            cds_config: Some(ads()),
            lds_config: Some(ads()),
            ..Default::default()
        }),
        admin: Some(Admin {
            address: Some(envoy_types::pb::envoy::config::core::v3::Address {
                address: Some(envoy_types::pb::envoy::config::core::v3::address::Address::SocketAddress(
                    envoy_types::pb::envoy::config::core::v3::SocketAddress {
                        address: "127.0.0.1".into(),
                        port_specifier: Some(
                            envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier::PortValue(u32::from(admin_port)),
                        ),
                        ..Default::default()
                    },
                )),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let path = dir.path().join("bootstrap.pb");
    std::fs::write(&path, bootstrap.encode_to_vec()).unwrap();
    let log = std::fs::File::create(dir.path().join("envoy.log")).unwrap();
    let child = Command::new(testing::envoy_binary())
        .arg("-c")
        .arg(&path)
        .arg("--disable-hot-restart")
        .arg("--base-id")
        .arg(admin_port.to_string())
        .arg("--log-level")
        .arg("warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("envoy runs (scripts/install-deps installs it)");
    Envoy {
        child,
        admin: admin_port,
        _dir: dir,
    }
}

fn instance(service: &Arc<Service>, port: u16, version: &str) -> ServiceInstance {
    ServiceInstance {
        endpoint: NetworkEndpoint {
            address: "127.0.0.1".parse::<IpAddr>().unwrap(),
            port,
            service_port: service.ports[0].clone(),
        },
        service: Arc::clone(service),
        labels: Labels::from_pairs([("version", version)]),
        availability_zone: None,
        service_account: None,
    }
}

fn rule(text: &str) -> pilot_model::DynConfig {
    let header = "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\n";
    document::parse("rule.yaml", &format!("{header}{text}"), &istio::registry())
        .unwrap()
        .remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_the_world_routing_scenarios() {
    routing_scenarios(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_routing_scenarios() {
    routing_scenarios(true).await;
}

async fn routing_scenarios(delta: bool) {
    let store = MemoryConfigStore::new(istio::registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let registry = MemoryServiceRegistry::new();
    let service_port = free_port();
    let service = registry.add_service(Service::new(
        HOST,
        vec![Port::new("http", service_port, Protocol::Http)],
    ));
    let slow = Arc::new(AtomicU64::new(0));
    let fast = Arc::new(AtomicU64::new(0));
    for version in ["v1", "v2", "v3"] {
        let port = upstream(
            version,
            if version == "v1" {
                Arc::clone(&slow)
            } else {
                Arc::clone(&fast)
            },
        );
        registry.add_instance(instance(&service, port, version)).unwrap();
    }

    let server = XdsServer::new(
        controller.clone(),
        Arc::new(registry.clone()),
        XdsOptions::default(),
    );
    let xds_port = free_port();
    let service_handle = server.service();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service_handle)
            .serve(([127, 0, 0, 1], xds_port).into())
            .await
            .unwrap();
    });
    let envoy = start_envoy(xds_port, delta);
    let admin_port = envoy.admin;
    let run = |f: Box<dyn FnOnce() + Send>| tokio::task::spawn_blocking(f);

    // No rules: every version gets traffic.
    run(Box::new(move || {
        eventually("every version answers", || {
            spread(service_port, 30, &[]).len() == 3
        });
    }))
    .await
    .unwrap();
    // The feedback shows the proxy in sync on every type.
    let synced = || {
        server.status().iter().any(|p| {
            p.node_id.starts_with("sidecar~10.99.0.1")
                && p.incremental == delta
                && pilot_xds::TYPES
                    .iter()
                    .all(|t| p.types.get(t).is_some_and(|s| s.synced()))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !synced() {
        assert!(
            Instant::now() < deadline,
            "proxy never synced: {:?}",
            server.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // 100% to v1, then 80/20 v1/v2.
    let all_v1 = store
        .create(rule("metadata: {name: reviews-default, namespace: default}\nspec:\n  destination: {name: reviews}\n  route: [{labels: {version: v1}}]\n"))
        .await
        .unwrap();
    run(Box::new(move || {
        eventually("all traffic to v1", || {
            spread(service_port, 20, &[]).keys().eq(["v1"])
        })
    }))
    .await
    .unwrap();
    let mut split = rule(
        "metadata: {name: reviews-default, namespace: default}\nspec:\n  destination: {name: reviews}\n  route: [{labels: {version: v1}, weight: 80}, {labels: {version: v2}, weight: 20}]\n",
    );
    split.meta.resource_version = all_v1.meta.resource_version.clone();
    store.update(split).await.unwrap();
    let counts = tokio::task::spawn_blocking(move || {
        eventually("v2 gets traffic", || {
            spread(service_port, 20, &[]).contains_key("v2")
        });
        spread(service_port, 1000, &[])
    })
    .await
    .unwrap();
    let v1 = counts.get("v1").copied().unwrap_or(0) as f64 / 1000.0;
    assert!((0.75..=0.85).contains(&v1), "80/20 split, got {counts:?}");
    assert!(!counts.contains_key("v3"), "{counts:?}");

    // A header match sends jason to v3; the others are unaffected.
    store
        .create(rule("metadata: {name: reviews-jason, namespace: default}\nspec:\n  destination: {name: reviews}\n  precedence: 2\n  match: {request: {headers: {end-user: {exact: jason}}}}\n  route: [{labels: {version: v3}}]\n"))
        .await
        .unwrap();
    run(Box::new(move || {
        eventually("jason reaches v3", || {
            spread(service_port, 10, &[("end-user", "jason")])
                .keys()
                .eq(["v3"])
        });
        assert!(!spread(service_port, 50, &[("end-user", "mary")]).contains_key("v3"));
    }))
    .await
    .unwrap();

    // An abort fault answers with its status; a timeout cuts a slow upstream.
    store
        .create(rule("metadata: {name: reviews-abort, namespace: default}\nspec:\n  destination: {name: reviews}\n  precedence: 3\n  match: {request: {headers: {x-fault: {exact: abort}}}}\n  route: [{labels: {version: v2}}]\n  httpFault: {abort: {percent: 100, httpStatus: 418}}\n"))
        .await
        .unwrap();
    store
        .create(rule("metadata: {name: reviews-timeout, namespace: default}\nspec:\n  destination: {name: reviews}\n  precedence: 3\n  match: {request: {headers: {x-slow: {exact: yes}}}}\n  route: [{labels: {version: v1}}]\n  httpReqTimeout: {simpleTimeout: {timeout: 200ms}}\n"))
        .await
        .unwrap();
    slow.store(2000, Ordering::Relaxed);
    run(Box::new(move || {
        eventually("the abort fault answers 418", || {
            request(service_port, &[("x-fault", "abort")]).0 == 418
        });
        eventually("the timeout answers 504", || {
            let started = Instant::now();
            request(service_port, &[("x-slow", "yes")]).0 == 504
                && started.elapsed() < Duration::from_millis(1500)
        });
    }))
    .await
    .unwrap();
    slow.store(0, Ordering::Relaxed);

    // A change Envoy rejects (a regex RE2 cannot compile) is NACKed and
    // recorded; traffic keeps flowing on the previous configuration.
    let sent_before = server.version().unwrap();
    store
        .create(rule("metadata: {name: reviews-bad-regex, namespace: default}\nspec:\n  destination: {name: reviews}\n  precedence: 9\n  match: {request: {headers: {cookie: {regex: \"(unclosed\"}}}}\n  route: [{labels: {version: v2}}]\n"))
        .await
        .unwrap();
    server.wait_version(sent_before + 1).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let nack = loop {
        let nack = server
            .status()
            .iter()
            .find_map(|p| p.types.get("RDS").and_then(|s| s.nack.clone()));
        if let Some(nack) = nack {
            break nack;
        }
        assert!(
            Instant::now() < deadline,
            "no NACK recorded: {:?}",
            server.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        nack.message.contains("unclosed") || nack.message.to_lowercase().contains("regex"),
        "{nack:?}"
    );
    run(Box::new(move || {
        assert_eq!(
            request(service_port, &[("end-user", "jason")]).1,
            "v3",
            "the previous routes still serve"
        );
    }))
    .await
    .unwrap();
    store
        .delete(&ConfigKey::new("RouteRule", "default", "reviews-bad-regex"), None)
        .await
        .unwrap();

    // Deleting the rules restores the default: every version again.
    for name in [
        "reviews-default",
        "reviews-jason",
        "reviews-abort",
        "reviews-timeout",
    ] {
        store
            .delete(&ConfigKey::new("RouteRule", "default", name), None)
            .await
            .unwrap();
    }
    run(Box::new(move || {
        eventually("every version again", || spread(service_port, 40, &[]).len() == 3)
    }))
    .await
    .unwrap();

    // Removing an instance removes it from Envoy's endpoints without a
    // listener rebuild.
    let listener_updates = |admin_port: u16| -> String {
        admin(admin_port, "/stats?filter=listener_manager.lds.update_success")
    };
    let before = listener_updates(admin_port);
    let v3 = registry.instances(HOST, &[], &[Labels::from_pairs([("version", "v3")])]);
    registry.remove_instances(HOST, v3[0].endpoint.address, Some(v3[0].endpoint.port));
    let v3_port = v3[0].endpoint.port;
    run(Box::new(move || {
        eventually("v3's endpoint leaves /clusters", || {
            !admin(admin_port, "/clusters").contains(&format!("127.0.0.1:{v3_port}"))
        });
        assert!(!spread(service_port, 30, &[]).contains_key("v3"));
    }))
    .await
    .unwrap();
    assert_eq!(
        listener_updates(admin_port).split("\r\n\r\n").nth(1),
        before.split("\r\n\r\n").nth(1),
        "no listener update"
    );
    drop(envoy);
}
