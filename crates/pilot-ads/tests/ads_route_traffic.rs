//! Route features through a real Envoy with real traffic, counted at the
//! upstreams (ServiceEntries' `STATIC` endpoints on loopback servers): a
//! DestinationRule's consistent hash keeps each header value on one
//! endpoint while different values spread; a VirtualService's redirect
//! answers 301 with its Location; a mirror copies the configured share of
//! requests to its destination.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use support::envoy::{eventually, free_port, request_to, spread_to, upstream};
use support::mesh::Mesh;

/// A `STATIC` ServiceEntry for `host` on `port` with an endpoint per
/// upstream port.
fn service_entry(host: &str, port: u16, upstreams: &[u16]) -> String {
    let endpoints: Vec<String> = upstreams
        .iter()
        .map(|u| format!("{{address: 127.0.0.1, ports: {{http: {u}}}}}"))
        .collect();
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  hosts: [{host}]\n  location: MESH_INTERNAL\n  ports: [{{number: {port}, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  endpoints: [{}]\n",
        endpoints.join(", "),
        name = host.split('.').next().unwrap_or(host),
    )
}

/// An HTTP/1.1 server answering 200 `name` to every request, counting
/// them.
fn counting_upstream(name: &'static str, count: Arc<AtomicU64>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let count = Arc::clone(&count);
            std::thread::spawn(move || {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buffer.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0) + 4;
                    buffer.drain(..end);
                    count.fetch_add(1, Ordering::SeqCst);
                    let response = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{name}", name.len());
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// The head of the response to a GET of `path` for `host` through Envoy's
/// listener on `port` (status line and headers, lowercase).
fn response_head(port: u16, host: &str, path: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    if write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
    )
    .is_err()
    {
        return String::new();
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
        .split_once("\r\n\r\n")
        .map(|(head, _)| head.to_ascii_lowercase())
        .unwrap_or_default()
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consistent_hash_keeps_a_header_value_on_one_endpoint() {
    // The hash policy rides on the VirtualService's route.
    hash_keeps_a_header_value_on_one_endpoint("hash.mesh.test", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consistent_hash_holds_without_a_virtual_service() {
    // No rule routes the host: the hash policy rides on the default route.
    hash_keeps_a_header_value_on_one_endpoint("plainhash.mesh.test", false).await;
}

/// 30 header values, 10 requests each, to `host` with a DestinationRule's
/// consistent hash on the header (and a VirtualService routing the host if
/// `routed`): each value lands on one endpoint, the values on several.
async fn hash_keeps_a_header_value_on_one_endpoint(host: &'static str, routed: bool) {
    let mesh = Mesh::start().await;
    let none = || Arc::new(AtomicU64::new(0));
    let upstreams = [
        upstream("a", none()),
        upstream("b", none()),
        upstream("c", none()),
    ];
    let port = free_port();
    let virtual_service = if routed {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: hash, namespace: default}}\nspec:\n  hosts: [{host}]\n  http:\n  - route: [{{destination: {{host: {host}}}}}]\n---\n"
        )
    } else {
        String::new()
    };
    // The rules first: the host is never balanced otherwise.
    mesh.apply(
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: hash, namespace: default}}\nspec:\n  host: {host}\n  trafficPolicy: {{loadBalancer: {{consistentHash: {{httpHeaderName: x-user}}}}}}\n---\n{virtual_service}{}",
            service_entry(host, port, &upstreams)
        ),
    )
    .await;
    blocking(move || {
        eventually(&format!("{host} answers"), || {
            request_to(port, host, &[("x-user", "u0")]).0 == 200
        })
    })
    .await;
    let landed = blocking(move || {
        let mut landed = BTreeMap::new();
        for user in 0..30 {
            let user = format!("u{user}");
            let counts = spread_to(port, host, 10, &[("x-user", &user)]);
            landed.insert(user, counts);
        }
        landed
    })
    .await;
    for (user, counts) in &landed {
        assert_eq!(
            counts.len(),
            1,
            "{user}'s 10 requests land on one endpoint: {counts:?}"
        );
        assert!(
            counts.keys().all(|k| ["a", "b", "c"].contains(&k.as_str())),
            "{counts:?}"
        );
    }
    let endpoints: BTreeSet<&String> = landed.values().flat_map(|c| c.keys()).collect();
    assert!(
        endpoints.len() > 1,
        "30 users spread over the endpoints: {landed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_answers_301_with_its_location() {
    let mesh = Mesh::start().await;
    let port = free_port();
    let target = upstream("target", Arc::new(AtomicU64::new(0)));
    mesh.apply(
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: moved, namespace: default}}\nspec:\n  hosts: [moved.mesh.test]\n  http:\n  - match: [{{uri: {{prefix: /old}}}}]\n    redirect: {{uri: /new, authority: target.mesh.test, redirectCode: 301}}\n  - route: [{{destination: {{host: moved.mesh.test}}}}]\n---\n{}",
            service_entry("moved.mesh.test", port, &[target])
        ),
    )
    .await;
    let head = blocking(move || {
        let mut head = String::new();
        eventually("a 301 for /old", || {
            head = response_head(port, "moved.mesh.test", "/old/page");
            head.starts_with("http/1.1 301")
        });
        head
    })
    .await;
    assert!(
        head.lines().any(|l| l == "location: http://target.mesh.test/new"),
        "{head}"
    );
    // Other paths are routed, not redirected.
    let other = blocking(move || request_to(port, "moved.mesh.test", &[])).await;
    assert_eq!(other, (200, "target".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_receives_its_share_of_the_requests() {
    let mesh = Mesh::start().await;
    let (primary_count, shadow_count) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let primary = counting_upstream("primary", Arc::clone(&primary_count));
    let shadow = counting_upstream("shadow", Arc::clone(&shadow_count));
    let (port, shadow_port) = (free_port(), free_port());
    mesh.apply(
        &format!(
            "{}---\n{}---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: mirrored, namespace: default}}\nspec:\n  hosts: [mirrored.mesh.test]\n  http:\n  - route: [{{destination: {{host: mirrored.mesh.test}}}}]\n    mirror: {{host: shadow.mesh.test, port: {{number: {shadow_port}}}}}\n    mirrorPercentage: {{value: 50}}\n",
            service_entry("shadow.mesh.test", shadow_port, &[shadow]),
            service_entry("mirrored.mesh.test", port, &[primary]),
        ),
    )
    .await;
    let seen = Arc::clone(&shadow_count);
    blocking(move || {
        eventually("the mirror receiving requests", || {
            request_to(port, "mirrored.mesh.test", &[]) == (200, "primary".to_string())
                && seen.load(Ordering::SeqCst) > 0
        })
    })
    .await;
    let (primary_before, shadow_before) = (
        primary_count.load(Ordering::SeqCst),
        shadow_count.load(Ordering::SeqCst),
    );
    const N: u64 = 1000;
    let answers = blocking(move || spread_to(port, "mirrored.mesh.test", N as usize, &[])).await;
    assert_eq!(answers.get("primary").copied(), Some(N as usize), "{answers:?}");
    assert_eq!(primary_count.load(Ordering::SeqCst) - primary_before, N);
    // Mirrored requests are sent without waiting for them: wait until the
    // count is within the binomial range (500 ± 5σ); it only grows.
    let seen = Arc::clone(&shadow_count);
    blocking(move || {
        eventually("about half the requests mirrored", || {
            (420..=580).contains(&(seen.load(Ordering::SeqCst) - shadow_before))
        })
    })
    .await;
    let mirrored = shadow_count.load(Ordering::SeqCst) - shadow_before;
    assert!(mirrored <= 580, "{mirrored} of {N} mirrored at 50%");
}
