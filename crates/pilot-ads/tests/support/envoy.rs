//! Helpers to drive a real Envoy against the ADS server: version-echoing
//! upstreams, an Envoy with an ADS bootstrap, plain HTTP requests.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pilot_api::istio;
use pilot_model::{Labels, NetworkEndpoint, Service, ServiceInstance, document};
use pilot_test_support::Envoy;
pub(crate) use pilot_test_support::free_port;

pub(crate) const HOST: &str = "reviews.default.svc.cluster.local";

/// A tiny HTTP/1.1 server that answers every request with its version,
/// after an optional delay.
pub(crate) fn upstream(version: &'static str, delay_ms: Arc<AtomicU64>) -> u16 {
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

pub(crate) fn serve(mut stream: TcpStream, version: &str, delay: Arc<AtomicU64>) {
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

/// One request for `reviews` through Envoy's listener; (status, body).
pub(crate) fn request(port: u16, headers: &[(&str, &str)]) -> (u16, String) {
    request_to(port, "reviews", headers)
}

/// One request for `host` through Envoy's listener; (status, body).
pub(crate) fn request_to(port: u16, host: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new());
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut text = format!("GET / HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n");
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

/// A GET on Envoy's admin endpoint at `port`, the whole response.
pub(crate) fn admin(port: u16, path: &str) -> String {
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
pub(crate) fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Counts of bodies over `n` requests for `reviews`.
pub(crate) fn spread(port: u16, n: usize, headers: &[(&str, &str)]) -> BTreeMap<String, usize> {
    spread_to(port, "reviews", n, headers)
}

/// Counts of bodies (or `status N`) over `n` requests for `host`.
pub(crate) fn spread_to(
    port: u16,
    host: &str,
    n: usize,
    headers: &[(&str, &str)],
) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for _ in 0..n {
        let (status, body) = request_to(port, host, headers);
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

/// A real Envoy, with no traffic capture, fed by the ADS server on
/// `xds_port`.
pub(crate) fn start_envoy(xds_port: u16, delta: bool) -> Envoy {
    start_envoy_as(
        "sidecar~10.99.0.1~client.default~default.svc.cluster.local",
        xds_port,
        delta,
    )
}

/// A real Envoy with node id `node`, with no traffic capture, fed by the
/// ADS server on `xds_port`.
pub(crate) fn start_envoy_as(node: &str, xds_port: u16, delta: bool) -> Envoy {
    Envoy::ads(node, &[("INTERCEPTION_MODE", "NONE")], xds_port, delta)
        .expect("envoy starts (scripts/install-deps installs it)")
}

pub(crate) fn instance(service: &Arc<Service>, port: u16, version: &str) -> ServiceInstance {
    ServiceInstance::new(
        Arc::clone(service),
        NetworkEndpoint::new(
            "127.0.0.1".parse::<IpAddr>().unwrap(),
            port,
            service.ports[0].clone(),
        ),
        Labels::from_pairs([("version", version)]),
    )
}

pub(crate) fn rule(text: &str) -> pilot_model::DynConfig {
    let header = "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\n";
    document::parse("rule.yaml", &format!("{header}{text}"), &istio::registry())
        .unwrap()
        .remove(0)
}

/// Routes all of `reviews` to `version` (updating the `reviews-default`
/// rule at its current version) and waits until Envoy's listener on
/// `service_port` serves only that version.
pub(crate) async fn route_reviews_to(
    store: &dyn pilot_model::ConfigStore,
    version: &'static str,
    service_port: u16,
) {
    let current = store
        .get(&pilot_model::ConfigKey::new(
            "RouteRule",
            "default",
            "reviews-default",
        ))
        .await
        .unwrap()
        .unwrap();
    let mut updated = rule(&format!(
        "metadata: {{name: reviews-default, namespace: default}}\nspec:\n  destination: {{name: reviews}}\n  route: [{{labels: {{version: {version}}}}}]\n"
    ));
    updated.meta.resource_version = current.meta.resource_version.clone();
    store.update(updated).await.unwrap();
    tokio::task::spawn_blocking(move || {
        eventually(&format!("{version} serves"), || {
            spread(service_port, 10, &[]).keys().eq([version])
        })
    })
    .await
    .unwrap();
}

/// The ADS server over `controller` and `registry` on a free loopback
/// port, and a real Envoy (no traffic capture) fed by it, incremental
/// when `delta`.
pub(crate) fn serve_envoy(
    controller: Arc<pilot_store::Controller>,
    registry: Arc<dyn pilot_model::ServiceDiscovery>,
    delta: bool,
) -> (pilot_ads::XdsServer, Envoy) {
    let (server, xds_port) = super::server::serve(controller, registry);
    (server, start_envoy(xds_port, delta))
}
