//! Two pilot-discovery replicas on one (fake) Kubernetes API server, four
//! real Envoys.
//!
//! Each Envoy's ADS cluster lists both replicas: its home replica at
//! priority 0, the other at priority 1, with a TCP health check, so two
//! Envoys start on each replica and fail over when theirs dies. A write
//! through replica A reaches all four Envoys; `pilotctl proxy-status`
//! through B lists all four with their replica; every object shows 4/4.
//! Then A is killed (`kill -9`, no resign): its Envoys reconnect to B,
//! proxy-status through B shows all four on B (within the lease ttl plus
//! the reconnect time: polled, never timed), B holds the
//! `pilot-status-writer` Lease, status is 4/4 again, and every Envoy has
//! the same listeners and clusters as before, none lost or duplicated; a
//! write through B then reaches all four.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use pilot_system_tests::{Mesh, Store, list, weighted};
use pilot_test_support::{
    Discovery, Envoy, FakeCluster, PATIENCE, XDS_CLUSTER, eventually, free_port, pilotctl, signal, workspace,
};
use serde_json::{Value, json};

const ENVOYS: usize = 4;
const RULE_80_20: &str = "examples/bookinfo/route-rule-reviews-80-20.yaml";
const ALL_V1: &str = "examples/bookinfo/route-rule-all-v1.yaml";

#[test]
fn two_replicas_on_kubernetes_share_proxies_status_and_the_writer() {
    let cluster = FakeCluster::start();
    let store = Store::Kubernetes(&cluster);
    let mesh = Mesh::bookinfo();
    let a = mesh.replica(&store, "pilot-a");
    let b = mesh.replica(&store, "pilot-b");
    let (url_a, url_b) = (Some(a.url.as_str()), Some(b.url.as_str()));

    // Bookinfo but the 80/20 rule, applied through A.
    for file in std::fs::read_dir(workspace().join("examples/bookinfo")).unwrap() {
        let path = file.unwrap().path();
        if path.ends_with("route-rule-reviews-80-20.yaml") {
            continue;
        }
        let applied = pilotctl(url_a, &["apply", "-f", path.to_str().unwrap()], &[], None);
        assert_eq!(applied.code, 0, "{applied:?}");
    }

    let nodes: Vec<String> = (0..ENVOYS)
        .map(|i| {
            format!(
                "sidecar~10.0.0.{}~replicas{i}.default~default.svc.cluster.local",
                60 + i
            )
        })
        .collect();
    let homes = |i: usize| {
        if i < ENVOYS / 2 {
            ("pilot-a", a.xds_port, b.xds_port)
        } else {
            ("pilot-b", b.xds_port, a.xds_port)
        }
    };
    let envoys: Vec<Envoy> = (0..ENVOYS)
        .map(|i| {
            let (_, home, other) = homes(i);
            envoy(&nodes[i], home, other)
        })
        .collect();

    // A write through A reaches all four Envoys (two of them through B,
    // which learns it from the API server).
    // (reviews-default: all v1 before, 80/20 after.)
    let applied = pilotctl(url_a, &["apply", "-f", RULE_80_20], &[], None);
    assert_eq!(applied.code, 0, "{applied:?}");
    let (v1, v2) = (mesh.reviews("v1"), mesh.reviews("v2"));
    for envoy in &envoys {
        eventually("every Envoy to receive the reviews 80/20 split", || {
            let weights = weighted(&dump(envoy));
            weights.contains(&(v1.clone(), 80)) && weights.contains(&(v2.clone(), 20))
        });
    }

    // proxy-status through B lists all four, each with its replica.
    eventually(
        "proxy-status through B to list all four Envoys with their replica",
        || {
            let replicas = replicas_of(&b);
            (0..ENVOYS).all(|i| replicas.get(&nodes[i]).map(String::as_str) == Some(homes(i).0))
        },
    );
    let table = pilotctl(url_b, &["proxy-status"], &[], None);
    assert_eq!(table.code, 0, "{table:?}");
    assert!(
        table
            .stdout
            .lines()
            .next()
            .unwrap_or_default()
            .contains("REPLICA"),
        "{table:?}"
    );
    for (i, node) in nodes.iter().enumerate() {
        let row = row(&table.stdout, node).unwrap_or_default();
        assert!(
            row.split_whitespace().any(|w| w == homes(i).0),
            "{node} on {}: {table:?}",
            homes(i).0
        );
    }

    // Every object: 4/4, whoever writes.
    let kinds = ["routerules", "destinationpolicies", "egressrules", "ingressrules"];
    eventually("every object to show 4/4 at its current version", || {
        let objects: Vec<Value> = kinds.iter().flat_map(|kind| list(url_b, kind)).collect();
        objects.len() > 5 && objects.iter().all(|o| reports(o, ENVOYS as u64))
    });
    let before: Vec<Resources> = envoys.iter().map(|e| resources(&dump(e))).collect();
    for resources in &before {
        assert!(resources.is_distinct(), "{resources:?}");
    }

    // kill -9 A: no resign, its Lease expires.
    signal(a.pid(), "KILL");
    drop(a);
    let on_b = |seen: &BTreeMap<String, String>| {
        seen.len() == ENVOYS
            && nodes
                .iter()
                .all(|n| seen.get(n).map(String::as_str) == Some("pilot-b"))
    };
    let mut seen = BTreeMap::new();
    let started = std::time::Instant::now();
    while started.elapsed() < PATIENCE {
        seen = replicas_of(&b);
        if on_b(&seen) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(
        on_b(&seen),
        "proxy-status through B after A died: {seen:?}\nB's log:\n{}\nEnvoy 0's xDS cluster:\n{}\nits stats:\n{}\nits log:\n{}",
        b.log(),
        envoys[0].admin("/stats?filter=control_plane|xds-grpc.upstream_cx|xds-grpc.upstream_rq|xds-grpc.lb"),
        envoys[0]
            .log()
            .lines()
            .rev()
            .take(30)
            .collect::<Vec<_>>()
            .join("\n"),
        envoys[0]
            .admin("/clusters")
            .lines()
            .filter(|l| l.starts_with(XDS_CLUSTER) && (l.contains("health") || l.contains("rq_total")))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    let _ = envoys[0].admin("/stats?filter=control_plane|xds-grpc.upstream_cx|xds-grpc.upstream_rq");
    let table = pilotctl(url_b, &["proxy-status"], &[], None);
    for node in &nodes {
        assert_eq!(
            table
                .stdout
                .lines()
                .filter(|l| l.starts_with(node.as_str()))
                .count(),
            1,
            "{table:?}"
        );
        let row = row(&table.stdout, node).unwrap_or_default();
        assert!(
            row.split_whitespace().any(|w| w == "pilot-b"),
            "{node} on pilot-b: {table:?}"
        );
    }
    let leases: kube::Api<Lease> = kube::Api::namespaced(cluster.client(), "default");
    eventually("B to hold the pilot-status-writer Lease", || {
        cluster
            .block_on(leases.get_opt("pilot-status-writer"))
            .ok()
            .flatten()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .as_deref()
            == Some("pilot-b")
    });
    eventually("every object to show 4/4 after the failover", || {
        let objects: Vec<Value> = kinds.iter().flat_map(|kind| list(url_b, kind)).collect();
        objects.len() > 5 && objects.iter().all(|o| reports(o, ENVOYS as u64))
    });
    // No configuration lost or duplicated.
    for (envoy, before) in envoys.iter().zip(&before) {
        let mut after = resources(&dump(envoy));
        eventually("each Envoy to have what it had before the failover", || {
            after = resources(&dump(envoy));
            &after == before
        });
        assert!(after.is_distinct(), "{after:?}");
    }

    // A write through B reaches all four.
    let applied = pilotctl(url_b, &["apply", "-f", ALL_V1], &[], None);
    assert_eq!(applied.code, 0, "{applied:?}");
    for envoy in &envoys {
        eventually("every Envoy to drop the 80/20 split", || {
            let dump = dump(envoy);
            !dump.is_null() && !weighted(&dump).contains(&(v1.clone(), 80))
        });
    }
    drop(envoys);
    b.terminate();
    drop(cluster);
}

/// An Envoy whose ADS cluster has `home` at priority 0 and `other` at
/// priority 1, TCP health-checked, so it moves to `other` when `home` dies.
fn envoy(node: &str, home: u16, other: u16) -> Envoy {
    let admin_port = free_port();
    let socket = |port: u16| json!({"socket_address": {"address": "127.0.0.1", "port_value": port}});
    let ads = json!({"ads": {}, "resource_api_version": "V3"});
    let endpoints = |port: u16, priority: u32| json!({"priority": priority, "lb_endpoints": [{"endpoint": {"address": socket(port)}}]});
    let bootstrap = json!({
        "node": {"id": node, "cluster": "pilot", "metadata": {"INTERCEPTION_MODE": "NONE"}},
        "admin": {"address": socket(admin_port)},
        "dynamic_resources": {
            "ads_config": {
                "api_type": "GRPC",
                "transport_api_version": "V3",
                "grpc_services": [{"envoy_grpc": {"cluster_name": XDS_CLUSTER}}],
            },
            "cds_config": ads,
            "lds_config": ads,
        },
        "static_resources": {"clusters": [{
            "name": XDS_CLUSTER,
            "type": "STATIC",
            "connect_timeout": "1s",
            "typed_extension_protocol_options": {
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                    "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                    "explicit_http_config": {"http2_protocol_options": {}},
                },
            },
            "health_checks": [{
                // Without traffic Envoy checks every `no_traffic_interval`
                // (60 s by default): a dead replica would be noticed late.
                "timeout": "1s", "interval": "1s", "no_traffic_interval": "1s",
                "no_traffic_healthy_interval": "1s", "unhealthy_interval": "1s",
                "unhealthy_threshold": 1, "healthy_threshold": 1,
                "tcp_health_check": {},
            }],
            "load_assignment": {
                "cluster_name": XDS_CLUSTER,
                "endpoints": [endpoints(home, 0), endpoints(other, 1)],
            },
        }]},
    });
    Envoy::start(&bootstrap.to_string(), "bootstrap.json", admin_port, "warn").unwrap()
}

fn dump(envoy: &Envoy) -> Value {
    serde_json::from_str(&envoy.admin("/config_dump")).unwrap_or_default()
}

/// The names of an Envoy's dynamic listeners, clusters and route
/// configurations, each with how many times it appears.
#[derive(Debug, PartialEq, Eq)]
struct Resources(BTreeMap<(String, String), usize>);

impl Resources {
    fn is_distinct(&self) -> bool {
        !self.0.is_empty() && self.0.values().all(|count| *count == 1)
    }
}

fn resources(dump: &Value) -> Resources {
    let mut found = BTreeMap::new();
    for config in dump["configs"].as_array().into_iter().flatten() {
        let sections = [
            ("listener", "dynamic_listeners", "active_state", "listener"),
            ("cluster", "dynamic_active_clusters", "cluster", ""),
            ("route", "dynamic_route_configs", "route_config", ""),
        ];
        for (what, list, field, inner) in sections {
            for item in config[list].as_array().into_iter().flatten() {
                let mut resource = &item[field];
                if !inner.is_empty() {
                    resource = &resource[inner];
                }
                if let Some(name) = resource["name"].as_str() {
                    *found.entry((what.to_string(), name.to_string())).or_insert(0) += 1;
                }
            }
        }
    }
    Resources(found)
}

/// `/debug/proxy-status` of `server` (what `pilotctl proxy-status`
/// reads): node -> replica serving it. A node listed by two replicas is
/// kept as `"duplicate"`.
fn replicas_of(server: &Discovery) -> BTreeMap<String, String> {
    let (code, body) = server.get("/debug/proxy-status");
    let value: Value = if code == 200 {
        serde_json::from_str(&body).unwrap_or_default()
    } else {
        Value::Null
    };
    let mut replicas = BTreeMap::new();
    for proxy in value["proxies"].as_array().into_iter().flatten() {
        if proxy["connected"] == false {
            continue;
        }
        let node = proxy["node"].as_str().unwrap_or_default().to_string();
        let replica = proxy["replica"].as_str().unwrap_or_default().to_string();
        if replicas.insert(node.clone(), replica).is_some() {
            replicas.insert(node, "duplicate".to_string());
        }
    }
    replicas
}

/// The proxy-status row of `node`.
fn row<'a>(table: &'a str, node: &str) -> Option<&'a str> {
    table
        .lines()
        .find(|line| line.split_whitespace().next() == Some(node))
}

/// True when `object`'s status is about its current version with every
/// one of `proxies` ACKed.
fn reports(object: &Value, proxies: u64) -> bool {
    let status = &object["status"];
    status["observedVersion"] == object["metadata"]["resourceVersion"]
        && status["proxies"] == proxies
        && status["acked"] == proxies
        && status["nacked"] == 0
}
