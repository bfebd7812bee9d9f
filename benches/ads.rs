//! ADS convergence: time from a RouteRule write to every connected client
//! having ACKed the new route configuration, with in-process clients on real
//! tonic gRPC streams over loopback, in a mesh of 1,000 services; and the
//! process's resident memory with the clients connected and after they left.
//!
//!     cargo bench --bench ads [-- CLIENTS...]      (default: 100 1000)
//!
//! Each client is a sidecar with its own IP and no instances of its own; it
//! subscribes to CDS and LDS (wildcard), to the EDS and RDS names those
//! carry, and ACKs every response. Times are sampled from the server's
//! feedback (`XdsServer::status`) every millisecond.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use futures::StreamExt;
use pilot::memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot::model::{ConfigStore, Labels, Port, Protocol, Service, istio};
use pilot::store::Controller;
use pilot_xds::{XdsOptions, XdsServer};
use prost::Message;
use tokio::sync::mpsc;

mod common;

const SERVICES: usize = 1_000;
const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn split_rule(service: usize, v1: i32) -> pilot::model::DynConfig {
    let name = format!("svc-{service}");
    common::split_rule(&name, &format!("{name}-split"), v1)
        .to_dyn()
        .expect("serializes")
}

/// One client: subscribes, follows EDS/RDS names, ACKs everything.
async fn client(port: u16, index: usize) {
    let mut grpc = loop {
        if let Ok(c) = AggregatedDiscoveryServiceClient::connect(format!("http://127.0.0.1:{port}")).await {
            break c.max_decoding_message_size(64 * 1024 * 1024);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let ip = IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + index as u32));
    let node = Node {
        id: format!("sidecar~{ip}~client-{index}.default~default.svc.cluster.local"),
        ..Default::default()
    };
    let (tx, rx) = mpsc::channel(16);
    let request = |type_url: &str, names: Vec<String>, version: &str, nonce: &str| DiscoveryRequest {
        node: Some(node.clone()),
        type_url: type_url.into(),
        resource_names: names,
        version_info: version.into(),
        response_nonce: nonce.into(),
        ..Default::default()
    };
    tx.send(request(CDS, vec![], "", "")).await.unwrap();
    tx.send(request(LDS, vec![], "", "")).await.unwrap();
    let Ok(response) = grpc
        .stream_aggregated_resources(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|r| (r, rx))
        }))
        .await
    else {
        return;
    };
    let mut responses = response.into_inner();
    let (mut eds, mut rds): (BTreeSet<String>, BTreeSet<String>) = Default::default();
    while let Some(Ok(response)) = responses.next().await {
        let mut follow_up = None;
        if response.type_url == CDS {
            let names: BTreeSet<String> = response
                .resources
                .iter()
                .filter_map(|a| Cluster::decode(a.value.as_slice()).ok())
                .filter(|c| c.eds_cluster_config.is_some())
                .map(|c| c.name)
                .collect();
            if names != eds {
                eds = names;
                follow_up = Some(request(EDS, eds.iter().cloned().collect(), "", ""));
            }
        } else if response.type_url == LDS {
            let names: BTreeSet<String> = response
                .resources
                .iter()
                .filter_map(|a| Listener::decode(a.value.as_slice()).ok())
                .flat_map(|l| l.filter_chains.into_iter().flat_map(|c| c.filters))
                .filter_map(|f| match f.config_type {
                    Some(filter::ConfigType::TypedConfig(any)) => {
                        HttpConnectionManager::decode(any.value.as_slice()).ok()
                    }
                    _ => None,
                })
                .filter_map(|m| match m.route_specifier {
                    Some(http_connection_manager::RouteSpecifier::Rds(rds)) => Some(rds.route_config_name),
                    _ => None,
                })
                .collect();
            if names != rds {
                rds = names;
                follow_up = Some(request(RDS, rds.iter().cloned().collect(), "", ""));
            }
        }
        let names = if response.type_url == EDS {
            eds.iter().cloned().collect()
        } else if response.type_url == RDS {
            rds.iter().cloned().collect()
        } else {
            vec![]
        };
        if tx
            .send(request(
                &response.type_url,
                names,
                &response.version_info,
                &response.nonce,
            ))
            .await
            .is_err()
        {
            return;
        }
        if let Some(follow_up) = follow_up
            && tx.send(follow_up).await.is_err()
        {
            return;
        }
    }
}

/// Waits until `clients` proxies have ACKed RDS at `version` or later;
/// returns the time each took (sampled every millisecond).
async fn acked(server: &XdsServer, clients: usize, version: u64, start: Instant) -> Vec<Duration> {
    let mut done: std::collections::HashMap<String, Duration> = std::collections::HashMap::new();
    while done.len() < clients {
        for proxy in server.status() {
            let at = proxy
                .types
                .get("RDS")
                .and_then(|s| s.acked.as_ref())
                .and_then(|v| v.parse::<u64>().ok());
            if at.is_some_and(|v| v >= version) {
                done.entry(proxy.node_id.clone())
                    .or_insert_with(|| start.elapsed());
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "clients never converged"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    done.into_values().collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

async fn converge(clients: usize) {
    let store = MemoryConfigStore::new(istio::registry());
    let registry = MemoryServiceRegistry::new();
    for s in 0..SERVICES {
        let host = format!("svc-{s}.default.svc.cluster.local");
        registry.add_service(Service::new(&host, vec![Port::new("http", 9080, Protocol::Http)]));
        for i in 0..4u32 {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (s as u32) * 4 + i));
            let labels = Labels::from_pairs([("version", if i < 2 { "v1" } else { "v2" })]);
            registry.add_endpoints(&host, ip, labels).expect("service exists");
        }
        store.create(split_rule(s, 50)).await.expect("create");
    }
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    controller.wait_synced().await;
    let server = XdsServer::new(Arc::clone(&controller), Arc::new(registry), XdsOptions::default());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let serving = server.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server_task = tokio::spawn(async move {
        let _ = serving
            .serve(([127, 0, 0, 1], port).into(), async {
                let _ = stopped.await;
            })
            .await;
    });
    server.wait_version(1).await;
    let before = rss_mb();
    let tasks: Vec<_> = (0..clients).map(|i| tokio::spawn(client(port, i))).collect();
    let start = Instant::now();
    acked(&server, clients, 1, start).await;
    let connected = start.elapsed();
    let with_clients = rss_mb();

    let mut writes = Vec::new();
    for round in 0..3 {
        let current = store
            .get(&pilot::model::ConfigKey::new(
                "RouteRule",
                "default",
                "svc-1-split",
            ))
            .await
            .unwrap()
            .unwrap();
        let mut next = split_rule(1, [80, 20, 50][round]);
        next.meta.resource_version = current.meta.resource_version.clone();
        let version = server.version().unwrap() + 1;
        let start = Instant::now();
        store.update(next).await.unwrap();
        let mut times = acked(&server, clients, version, start).await;
        times.sort();
        writes.push((
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            *times.last().unwrap(),
        ));
    }
    let _ = stop.send(());
    for task in tasks {
        task.abort();
    }
    let _ = server_task.await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss_mb();
    for (p50, p99, max) in writes {
        println!(
            "| {clients} | {:.0} ms | {:.0} ms | {:.0} ms | {:.1} s | {before:.0} MB | {with_clients:.0} MB | {after:.0} MB |",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3,
            connected.as_secs_f64()
        );
    }
}

fn main() {
    let counts: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let counts = if counts.is_empty() {
        vec![100, 1000]
    } else {
        counts
    };
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "| clients | write to all ACKed p50 | p99 | max | initial sync | RSS before | RSS connected | RSS after |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for clients in counts {
        runtime.block_on(converge(clients));
    }
}
