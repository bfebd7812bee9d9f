//! The Gateway API for service mesh (GAMMA) through a real Envoy with real
//! traffic: HTTPRoutes attached to a Service, from the Gateway API's mesh
//! conformance manifests (the corpus `gateway-api` at
//! `../shared/corpora/`), route a sidecar's requests for that Service to
//! upstreams that say who they are and echo the request they got (path,
//! host, headers). The expectation tables are those the mesh conformance
//! tests state, for a client in `gateway-conformance-mesh` (and, for the
//! consumer route, one in `gateway-conformance-mesh-consumer`).
//!
//! The conformance Services are `echo` (both versions), `echo-v1` and
//! `echo-v2`, each with ports 80 and 8080 (and 7070 for the GRPCRoutes);
//! the test creates them in the registry on free ports and moves the
//! manifests' ports to those. The GRPCRoutes are tested with a real gRPC
//! client and servers, through a sidecar and proxyless, in
//! `ads_gamma_grpc.rs`.

mod support;

use std::collections::BTreeMap;

use support::envoy::eventually;
use support::gamma::{Answer, CONSUMER, Expect, Gamma, MESH, Ports, Request, blocking, echo, expect, send};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simple_route_sends_the_services_requests_to_its_backend() {
    let Some(mesh) = Gamma::with(&["httproute-simple-same-namespace"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    blocking(move || {
        let cases: Vec<(Request, Expect)> = ["/", "/any/path", "/v2"]
            .into_iter()
            .map(|path| (echo(path), Expect::backend("echo-v1")))
            .collect();
        expect(port, &cases);
        // Every request, not just most of them.
        let spread: Vec<Option<String>> = (0..20).map(|_| send(port, &echo("/")).backend).collect();
        assert!(
            spread.iter().all(|b| b.as_deref() == Some("echo-v1")),
            "{spread:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_paths_split_and_weights_share_the_rest_70_30() {
    // mesh-split's exact paths, and httproute-weight's 70/30 for every
    // other request on port 80.
    let Some(mesh) = Gamma::with(&["mesh-split", "httproute-weight"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    let counts = blocking(move || {
        expect(
            port,
            &[
                (echo("/v1"), Expect::backend("echo-v1")),
                (echo("/v2"), Expect::backend("echo-v2")),
            ],
        );
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for _ in 0..2000 {
            let answer = send(port, &echo("/"));
            let key = answer
                .backend
                .unwrap_or_else(|| format!("status {}", answer.status));
            *counts.entry(key).or_default() += 1;
        }
        counts
    })
    .await;
    let v1 = counts.get("echo-v1").copied().unwrap_or(0);
    let v2 = counts.get("echo-v2").copied().unwrap_or(0);
    assert_eq!(v1 + v2, 2000, "every request answered by v1 or v2: {counts:?}");
    // 70 ± 5 points: 2000 requests put 5 points at about 5 standard
    // deviations of the binomial count.
    assert!((1300..=1500).contains(&v1), "70/30 split: {counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_and_headers_match_with_the_gateway_api_precedence() {
    let Some(mesh) = Gamma::with(&["httproute-matching"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    blocking(move || {
        expect(
            port,
            &[
                (echo("/"), Expect::backend("echo-v1")),
                (echo("/example"), Expect::backend("echo-v1")),
                (echo("/").header("Version", "one"), Expect::backend("echo-v1")),
                (echo("/v2"), Expect::backend("echo-v2")),
                (echo("/v2/example"), Expect::backend("echo-v2")),
                (echo("/").header("Version", "two"), Expect::backend("echo-v2")),
                (echo("/v2/"), Expect::backend("echo-v2")),
                // A prefix takes whole segments: /v2example is not /v2's.
                (echo("/v2example"), Expect::backend("echo-v1")),
                (echo("/foo/v2/example"), Expect::backend("echo-v1")),
            ],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_parameters_match_and_what_matches_nothing_is_404() {
    let Some(mesh) = Gamma::with(&["httproute-query-param-matching"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    blocking(move || {
        expect(
            port,
            &[
                (echo("/?animal=whale"), Expect::backend("echo-v1")),
                (echo("/?animal=dolphin"), Expect::backend("echo-v2")),
                (
                    echo("/?animal=whale&otherparam=irrelevant"),
                    Expect::backend("echo-v1"),
                ),
                (echo("/?animal=dolphin&color=yellow"), Expect::backend("echo-v2")),
                (echo("/?color=blue"), Expect::status(404)),
                (echo("/?animal=dog"), Expect::status(404)),
                (echo("/?animal=whaledolphin"), Expect::status(404)),
                (echo("/"), Expect::status(404)),
                (echo("/path1?animal=whale"), Expect::backend("echo-v1")),
                (
                    echo("/?animal=whale").header("version", "one"),
                    Expect::backend("echo-v2"),
                ),
                (echo("/path3?animal=shark"), Expect::backend("echo-v1")),
                (
                    echo("/path4?animal=kraken").header("version", "three"),
                    Expect::backend("echo-v1"),
                ),
                (echo("/?animal=shark"), Expect::status(404)),
                (echo("/path4?animal=kraken"), Expect::status(404)),
                (echo("/path5?animal=hydra"), Expect::backend("echo-v1")),
            ],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_answer_each_status_code_with_their_location() {
    let Some(mesh) = Gamma::with(&[
        "httproute-303-redirect",
        "httproute-307-redirect",
        "httproute-308-redirect",
    ])
    .await
    else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    blocking(move || {
        expect(
            port,
            &[
                (
                    echo("/redirect"),
                    Expect::status(303).header("location", "http://echo/redirect"),
                ),
                (
                    echo("/temporary"),
                    Expect::status(307).header("location", "http://echo/temporary"),
                ),
                (
                    echo("/permanent"),
                    Expect::status(308).header("location", "http://echo/permanent"),
                ),
            ],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_replace_path_host_port_and_scheme() {
    let Some(mesh) = Gamma::with(&[
        "httproute-redirect-path",
        "httproute-redirect-port",
        "httproute-redirect-scheme",
        "httproute-redirect-host-and-status",
    ])
    .await
    else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    let to = |status: u16, location: &str| Expect::status(status).header("location", location.to_string());
    blocking(move || {
        expect(
            port,
            &[
                (
                    echo("/original-prefix/lemon"),
                    to(302, "http://echo/replacement-prefix/lemon"),
                ),
                (
                    echo("/full/path/original"),
                    to(302, "http://echo/full-path-replacement"),
                ),
                (
                    echo("/path-and-host"),
                    to(302, "http://example.org/replacement-prefix"),
                ),
                (
                    echo("/path-and-status"),
                    to(301, "http://echo/replacement-prefix"),
                ),
                (
                    echo("/full-path-and-host"),
                    to(302, "http://example.org/replacement-full"),
                ),
                (
                    echo("/full-path-and-status"),
                    to(301, "http://echo/replacement-full"),
                ),
                (echo("/port"), to(302, "http://echo:8083/port")),
                (
                    echo("/port-and-host"),
                    to(302, "http://example.org:8083/port-and-host"),
                ),
                (
                    echo("/port-and-status"),
                    to(301, "http://echo:8083/port-and-status"),
                ),
                (
                    echo("/port-and-host-and-status"),
                    to(302, "http://example.org:8083/port-and-host-and-status"),
                ),
                (echo("/scheme"), to(302, "https://echo/scheme")),
                (
                    echo("/scheme-and-host"),
                    to(302, "https://example.org/scheme-and-host"),
                ),
                (
                    echo("/scheme-and-status"),
                    to(301, "https://echo/scheme-and-status"),
                ),
                (
                    echo("/scheme-and-host-and-status"),
                    to(302, "https://example.org/scheme-and-host-and-status"),
                ),
                (
                    echo("/hostname-redirect"),
                    to(302, "http://example.org/hostname-redirect"),
                ),
                (
                    echo("/host-and-status"),
                    to(301, "http://example.org/host-and-status"),
                ),
            ],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_headers_are_set_added_and_removed() {
    header_modifier("httproute-request-header-modifier").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_own_filters_set_add_and_remove_its_request_headers() {
    header_modifier("httproute-request-header-modifier-backend").await;
}

/// The request header modifier's cases, for its filters on the rules or
/// on their backends (the manifest `name`).
async fn header_modifier(name: &str) {
    let Some(mesh) = Gamma::with(&[name]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    blocking(move || {
        expect(
            port,
            &[
                (
                    echo("/set").header("Some-Other-Header", "val"),
                    Expect::backend("echo-v1")
                        .path("/set")
                        .got("some-other-header", "val")
                        .got("x-header-set", "set-overwrites-values"),
                ),
                (
                    echo("/set")
                        .header("Some-Other-Header", "val")
                        .header("X-Header-Set", "some-other-value"),
                    Expect::backend("echo-v1")
                        .got("some-other-header", "val")
                        .got("x-header-set", "set-overwrites-values"),
                ),
                (
                    echo("/add").header("Some-Other-Header", "val"),
                    Expect::backend("echo-v1")
                        .path("/add")
                        .got("some-other-header", "val")
                        .got("x-header-add", "add-appends-values"),
                ),
                (
                    echo("/add")
                        .header("Some-Other-Header", "val")
                        .header("X-Header-Add", "some-other-value"),
                    Expect::backend("echo-v1")
                        .got("some-other-header", "val")
                        .got("x-header-add", "some-other-value,add-appends-values"),
                ),
                (
                    echo("/remove").header("X-Header-Remove", "val"),
                    Expect::backend("echo-v1")
                        .path("/remove")
                        .not_got("x-header-remove"),
                ),
                (
                    echo("/multiple")
                        .header("X-Header-Set-2", "set-val-2")
                        .header("X-Header-Add-2", "add-val-2")
                        .header("X-Header-Remove-2", "remove-val-2")
                        .header("Another-Header", "another-header-val"),
                    Expect::backend("echo-v1")
                        .path("/multiple")
                        .got("x-header-set-1", "header-set-1")
                        .got("x-header-set-2", "header-set-2")
                        .got("x-header-add-1", "header-add-1")
                        .got("x-header-add-2", "add-val-2,header-add-2")
                        .got("x-header-add-3", "header-add-3")
                        .got("another-header", "another-header-val")
                        .not_got("x-header-remove-1")
                        .not_got("x-header-remove-2"),
                ),
                (
                    echo("/case-insensitivity")
                        .header("x-header-set", "original-val-set")
                        .header("x-header-add", "original-val-add")
                        .header("x-header-remove", "original-val-remove")
                        .header("Another-Header", "another-header-val"),
                    Expect::backend("echo-v1")
                        .got("x-header-set", "header-set")
                        .got("x-header-add", "original-val-add,header-add")
                        .got("another-header", "another-header-val")
                        .not_got("x-header-remove"),
                ),
            ],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_are_rewritten_by_prefix_or_in_full() {
    let Some(mesh) = Gamma::with(&["httproute-rewrite-path"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    let modified = |path: &'static str| {
        Expect::backend("echo-v1")
            .path(path)
            .got("x-header-add", "header-val-1")
            .got("x-header-add-append", "append-val-1,header-val-2")
            .got("x-header-set", "set-overwrites-values")
            .not_got("x-header-remove")
    };
    let with_headers = |path: &str| {
        echo(path)
            .header("X-Header-Remove", "remove-val")
            .header("X-Header-Add-Append", "append-val-1")
            .header("X-Header-Set", "set-val")
    };
    blocking(move || {
        expect(
            port,
            &[
                (
                    echo("/prefix/one/two"),
                    Expect::backend("echo-v1").path("/one/two"),
                ),
                (
                    echo("/strip-prefix/three"),
                    Expect::backend("echo-v1").path("/three"),
                ),
                (echo("/strip-prefix"), Expect::backend("echo-v1").path("/")),
                (echo("/full/one/two"), Expect::backend("echo-v1").path("/one")),
                (
                    with_headers("/full/rewrite-path-and-modify-headers/test"),
                    modified("/test"),
                ),
                (
                    with_headers("/prefix/rewrite-path-and-modify-headers/one"),
                    modified("/prefix/one"),
                ),
            ],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_port_restricts_the_route_to_that_port() {
    let Some(mesh) = Gamma::with(&["mesh-ports"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let Ports { http, alt, .. } = mesh.ports;
    blocking(move || {
        // echo-v1's route names port 80: on 8080 it does not apply.
        expect(
            http,
            &[
                (
                    Request::get("echo-v1", "/"),
                    Expect::backend("echo-v1").header("x-header-set", "v1"),
                ),
                (
                    Request::get("echo-v2", "/"),
                    Expect::backend("echo-v2").header("x-header-set", "v2"),
                ),
            ],
        );
        expect(
            alt,
            &[
                (
                    Request::get(&format!("echo-v1:{alt}"), "/"),
                    Expect::backend("echo-v1").absent("x-header-set"),
                ),
                (
                    Request::get(&format!("echo-v2:{alt}"), "/"),
                    Expect::backend("echo-v2").header("x-header-set", "v2"),
                ),
            ],
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_route_applies_only_to_clients_of_its_namespace() {
    let Some(mesh) = Gamma::with(&["mesh-consumer-route"]).await else {
        return;
    };
    let port = mesh.ports.http;
    let host = format!("echo-v1.{MESH}");
    // One sidecar at a time: both would listen on the same loopback ports.
    let consumer = mesh.client(CONSUMER).await;
    let request = Request::get(&host, "/");
    let case = (
        request.clone(),
        Expect::backend("echo-v1").header("x-header-set", "set"),
    );
    blocking(move || expect(port, &[case])).await;
    drop(consumer);
    let _producer = mesh.client(MESH).await;
    let case = (request, Expect::backend("echo-v1").absent("x-header-set"));
    blocking(move || {
        // The consumer's sidecar is gone once its listener refuses
        // connections; then the producer's answers.
        eventually("the producer namespace's sidecar answers", || {
            send(port, &Request::get(&host, "/")).status == 200
        });
        expect(port, &[case])
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaces_consumer_routes_replace_the_producer_routes_for_its_clients() {
    // The producer routes every path of echo-v1; the consumer's route
    // only /only. A consumer client's other requests match no route of
    // its namespace: 404, the producer's routes are not its.
    let routes = format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: producer, namespace: {MESH}}}
spec:
  parentRefs: [{{group: "", kind: Service, name: echo-v1}}]
  rules:
  - filters: [{{type: ResponseHeaderModifier, responseHeaderModifier: {{set: [{{name: X-Route, value: producer}}]}}}}]
    backendRefs: [{{name: echo-v1, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: consumer, namespace: {CONSUMER}}}
spec:
  parentRefs: [{{group: "", kind: Service, name: echo-v1, namespace: {MESH}}}]
  rules:
  - matches: [{{path: {{type: Exact, value: /only}}}}]
    filters: [{{type: ResponseHeaderModifier, responseHeaderModifier: {{set: [{{name: X-Route, value: consumer}}]}}}}]
    backendRefs: [{{name: echo-v1, namespace: {MESH}, port: 80}}]
"#
    );
    let Some(mesh) = Gamma::with_also(&[], &routes).await else {
        return;
    };
    let port = mesh.ports.http;
    let host = format!("echo-v1.{MESH}");
    let consumer = mesh.client(CONSUMER).await;
    let cases = vec![
        (
            Request::get(&host, "/only"),
            Expect::backend("echo-v1").header("x-route", "consumer"),
        ),
        (Request::get(&host, "/"), Expect::status(404)),
        (Request::get(&host, "/other"), Expect::status(404)),
    ];
    blocking(move || expect(port, &cases)).await;
    drop(consumer);
    let _producer = mesh.client(MESH).await;
    let cases = vec![
        (
            Request::get(&host, "/only"),
            Expect::backend("echo-v1").header("x-route", "producer"),
        ),
        (
            Request::get(&host, "/"),
            Expect::backend("echo-v1").header("x-route", "producer"),
        ),
    ];
    blocking(move || expect(port, &cases)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_share_of_a_backend_that_cannot_take_traffic_is_answered_500() {
    // echo-v1, a Service the registry does not hold, and a reference to
    // no Service at all, a third each; and a rule with only the latter
    // two.
    let routes = format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: partly, namespace: {MESH}}}
spec:
  parentRefs: [{{group: "", kind: Service, name: echo}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /partly}}}}]
    backendRefs:
    - {{name: echo-v1, port: 80}}
    - {{name: nowhere, port: 80}}
    - {{group: example.com, kind: Bucket, name: b}}
  - matches: [{{path: {{type: PathPrefix, value: /none}}}}]
    backendRefs:
    - {{name: nowhere, port: 80}}
    - {{group: example.com, kind: Bucket, name: b}}
"#
    );
    let Some(mesh) = Gamma::with_also(&[], &routes).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    let (partly, none) = blocking(move || {
        let count = |path: &str| {
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            for _ in 0..60 {
                let answer = send(port, &echo(path));
                let key = answer
                    .backend
                    .unwrap_or_else(|| format!("status {}", answer.status));
                *counts.entry(key).or_default() += 1;
            }
            counts
        };
        (count("/partly"), count("/none"))
    })
    .await;
    // 60 requests a third each: either answer missing has odds of about
    // 1e-10.
    assert_eq!(
        partly.keys().collect::<Vec<_>>(),
        ["echo-v1", "status 500"],
        "{partly:?}"
    );
    assert_eq!(none.keys().collect::<Vec<_>>(), ["status 500"], "{none:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_session_persistence_keeps_each_session_on_one_endpoint() {
    // Session persistence (the experimental channel's): the Service echo
    // has two endpoints (v1 and v2). Requests without a session go to
    // either, and each answer names its endpoint, in the cookie `shop` on
    // port 80 and in the header `x-session` on port 8080; the requests
    // carrying it go to that endpoint alone.
    let text = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: by-cookie, namespace: {MESH}}}\n\
         spec:\n  parentRefs: [{{group: \"\", kind: Service, name: echo, port: 80}}]\n  \
         rules:\n  - sessionPersistence: {{sessionName: shop}}\n    backendRefs: [{{name: echo, port: 80}}]\n\
         ---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: by-header, namespace: {MESH}}}\n\
         spec:\n  parentRefs: [{{group: \"\", kind: Service, name: echo, port: 8080}}]\n  \
         rules:\n  - sessionPersistence: {{type: Header, sessionName: x-session}}\n    backendRefs: [{{name: echo, port: 8080}}]\n"
    );
    let Some(mesh) = Gamma::with_also(&[], &text).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let (http, alt) = (mesh.ports.http, mesh.ports.alt);
    blocking(move || {
        // The session's token as the answer gives it: the cookie's
        // `name=value`, or the header's value.
        let cookie = |answer: &Answer| {
            answer
                .headers
                .get("set-cookie")
                .and_then(|c| c.split(';').next())
                .filter(|c| c.starts_with("shop="))
                .map(str::to_string)
        };
        let header = |answer: &Answer| answer.headers.get("x-session").cloned();
        for (port, token, name) in [
            (http, &cookie as &dyn Fn(&Answer) -> Option<String>, "cookie"),
            (alt, &header, "x-session"),
        ] {
            eventually(&format!("a session by {name} to be given"), || {
                token(&send(port, &echo("/"))).is_some()
            });
            if name == "cookie" {
                // A Session cookie (the default): it ends with the
                // browser session, so it has no Max-Age or Expires.
                let set = send(port, &echo("/"))
                    .headers
                    .get("set-cookie")
                    .cloned()
                    .unwrap_or_default();
                let lower = set.to_ascii_lowercase();
                assert!(
                    set.starts_with("shop=") && !lower.contains("max-age") && !lower.contains("expires"),
                    "{set}"
                );
            }
            // Without a session, both endpoints take requests; each answer
            // names its own.
            let mut by_backend: BTreeMap<String, String> = BTreeMap::new();
            for _ in 0..40 {
                let answer = send(port, &echo("/"));
                let backend = answer.backend.clone().expect("an endpoint answered");
                by_backend.insert(backend, token(&answer).expect("the answer names its endpoint"));
            }
            assert_eq!(
                by_backend.keys().collect::<Vec<_>>(),
                ["echo-v1", "echo-v2"],
                "{name}: both endpoints take requests without a session"
            );
            // With a session, its endpoint alone.
            for (backend, session) in &by_backend {
                let request = if name == "cookie" {
                    echo("/").header("cookie", session)
                } else {
                    echo("/").header("x-session", session)
                };
                let answered: Vec<Option<String>> = (0..20).map(|_| send(port, &request).backend).collect();
                assert!(
                    answered.iter().all(|b| b.as_deref() == Some(backend.as_str())),
                    "{name} {session}: {answered:?}"
                );
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_name_changes_nothing_of_how_it_routes() {
    // MeshHTTPRouteNamedRule: the named rule and the unnamed one each send
    // their prefix to their backend.
    let Some(mesh) = Gamma::with(&["httproute-named-rule"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    blocking(move || {
        expect(
            port,
            &[
                (echo("/named"), Expect::backend("echo-v1")),
                (echo("/unnamed"), Expect::backend("echo-v2")),
            ],
        );
    })
    .await;
}
