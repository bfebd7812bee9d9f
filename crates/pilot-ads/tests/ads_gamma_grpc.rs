//! GRPCRoutes attached to a Service (GAMMA) with real gRPC: a gRPC for
//! Python client (PyPI's `grpcio`, the scripts of
//! `crates/pilot-system-tests/tests/grpc/`) calls real gRPC servers
//! (`server.py`, answering as `echo-v1` or `echo-v2` with the method
//! called and the metadata they got), through a real Envoy sidecar (the
//! client dials the sidecar's listener with the Service's name as
//! `:authority`) and as a proxyless client of pilot's xDS (it dials
//! `xds:///echo:<port>`). The routes are the Gateway API's mesh
//! conformance manifests from the corpus `gateway-api` at
//! `../shared/corpora/` (`grpcroute-weight`,
//! `grpcroute-request-header-modifier`); the corpus has no mesh manifest
//! matching methods, so that GRPCRoute is written here. The expectations
//! are those the conformance states for the header modifier; the others
//! are written here.
//!
//! The conformance's port 7070 is moved to a free port, served by the
//! gRPC upstreams (HTTP/2, protocol `GRPC`).

mod support;

use std::collections::BTreeMap;

use serde_json::Value;
use support::envoy::eventually;
use support::gamma::{Gamma, MESH};
use support::grpc::Python;

/// The conformance's gRPC echo service.
const GRPC_ECHO: &str = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho";
/// Calls per measured split.
const CALLS: u64 = 2000;

/// A GRPCRoute matching methods: a whole method, a whole service, a
/// method of any service; every other call goes to echo-v1.
fn methods_route() -> String {
    format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: methods, namespace: {MESH}}}
spec:
  parentRefs: [{{group: "", kind: Service, name: echo, port: 7070}}]
  rules:
  - matches: [{{method: {{service: {GRPC_ECHO}, method: EchoTwo}}}}]
    backendRefs: [{{name: echo-v2, port: 7070}}]
  - matches: [{{method: {{service: pilot.test.Canary}}}}]
    backendRefs: [{{name: echo-v2, port: 7070}}]
  - matches: [{{method: {{method: Three}}}}]
    backendRefs: [{{name: echo-v2, port: 7070}}]
  - backendRefs: [{{name: echo-v1, port: 7070}}]
"#
    )
}

/// The method match's table: the method called, the backend that must
/// answer.
fn method_cases() -> Vec<(String, &'static str)> {
    [
        (format!("/{GRPC_ECHO}/EchoTwo"), "echo-v2"),
        (format!("/{GRPC_ECHO}/Echo"), "echo-v1"),
        // An exact method: not a prefix of the name.
        (format!("/{GRPC_ECHO}/EchoTwoMore"), "echo-v1"),
        ("/other.Service/EchoTwo".to_string(), "echo-v1"),
        ("/pilot.test.Canary/Anything".to_string(), "echo-v2"),
        ("/pilot.test.Canary/EchoTwo".to_string(), "echo-v2"),
        // A service is a whole name, not a prefix of one.
        ("/pilot.test.CanaryTwo/Anything".to_string(), "echo-v1"),
        ("/any.Service/Three".to_string(), "echo-v2"),
        ("/any.Service/ThreeMore".to_string(), "echo-v1"),
    ]
    .into_iter()
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_sidecar_grpc_calls_go_to_the_backend_of_their_method() {
    let Some(mesh) = Gamma::grpc(&[], &methods_route()).await else {
        return;
    };
    let _sidecar = mesh.client(MESH).await;
    let mut client = mesh.grpc_client(MESH);
    let target = sidecar_target(&mesh);
    tokio::task::block_in_place(|| check_methods(&mut client, &target));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxyless_grpc_calls_go_to_the_backend_of_their_method() {
    let Some(mesh) = Gamma::grpc(&[], &methods_route()).await else {
        return;
    };
    let mut client = mesh.grpc_client(MESH);
    let target = proxyless_target(&mesh);
    tokio::task::block_in_place(|| check_methods(&mut client, &target));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_sidecar_grpc_calls_split_70_30_and_a_zero_weight_backend_gets_none() {
    let Some(mesh) = Gamma::grpc(&["grpcroute-weight"], "").await else {
        return;
    };
    let _sidecar = mesh.client(MESH).await;
    let mut client = mesh.grpc_client(MESH);
    let target = sidecar_target(&mesh);
    tokio::task::block_in_place(|| check_split(&mut client, &target));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxyless_grpc_calls_split_70_30_and_a_zero_weight_backend_gets_none() {
    let Some(mesh) = Gamma::grpc(&["grpcroute-weight"], "").await else {
        return;
    };
    let mut client = mesh.grpc_client(MESH);
    let target = proxyless_target(&mesh);
    tokio::task::block_in_place(|| check_split(&mut client, &target));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_sidecar_grpc_calls_matched_by_metadata_have_it_modified() {
    let Some(mesh) = Gamma::grpc(&["grpcroute-request-header-modifier"], "").await else {
        return;
    };
    let _sidecar = mesh.client(MESH).await;
    let mut client = mesh.grpc_client(MESH);
    let target = sidecar_target(&mesh);
    let echo = format!("/{GRPC_ECHO}/Echo");
    tokio::task::block_in_place(|| {
        wait_for_routes(&mut client, &target, "x-test-case=set");
        let cases = [
            (
                "x-test-case=set some-other-header=this-header-should-be-set x-header-set=this-value-should-be-overwritten",
                Expect::backend("echo-v1")
                    .got("x-test-case", "set")
                    .got("some-other-header", "this-header-should-be-set")
                    .got("x-header-set", "set-overwrites-values"),
            ),
            (
                "x-test-case=add x-header-add=this-value-should-be-appended",
                Expect::backend("echo-v1")
                    .got("x-test-case", "add")
                    .got("x-header-add", "this-value-should-be-appended,add-appends-values"),
            ),
            (
                "x-test-case=remove x-header-remove=this-should-be-removed",
                Expect::backend("echo-v1")
                    .got("x-test-case", "remove")
                    .not_got("x-header-remove"),
            ),
            (
                "x-test-case=multi x-header-set-2=set-header-2 x-header-add-2=add-header-2 x-header-remove-2=should-be-removed-2",
                Expect::backend("echo-v2")
                    .got("x-test-case", "multi")
                    .got("x-header-set-1", "header-set-1")
                    .got("x-header-set-2", "header-set-2")
                    .got("x-header-add-1", "header-add-1")
                    .got("x-header-add-2", "add-header-2,header-add-2")
                    .not_got("x-header-remove-1")
                    .not_got("x-header-remove-2"),
            ),
        ];
        expect(&mut client, &target, &echo, &cases);
    });
}

/// gRPC's xDS client routes by the route's matches and weighted clusters,
/// but it does not apply a route's request header mutations (gRFC A28
/// lists the route fields gRPC reads; `request_headers_to_add` and
/// `request_headers_to_remove` are not among them), and pilot's
/// configuration for proxyless clients leaves them out. So a proxyless
/// client's calls matched by metadata go to the rule's backend, and the
/// server gets the metadata as the client sent it: the GRPCRoute's
/// RequestHeaderModifier does not apply to proxyless gRPC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxyless_grpc_calls_matched_by_metadata_reach_their_backend_unmodified() {
    let Some(mesh) = Gamma::grpc(&["grpcroute-request-header-modifier"], "").await else {
        return;
    };
    let mut client = mesh.grpc_client(MESH);
    let target = proxyless_target(&mesh);
    let echo = format!("/{GRPC_ECHO}/Echo");
    tokio::task::block_in_place(|| {
        wait_for_routes(&mut client, &target, "x-test-case=set");
        let cases = [
            (
                "x-test-case=set x-header-set=client-value",
                Expect::backend("echo-v1")
                    .got("x-test-case", "set")
                    .got("x-header-set", "client-value"),
            ),
            (
                "x-test-case=add",
                Expect::backend("echo-v1").not_got("x-header-add"),
            ),
            (
                "x-test-case=remove x-header-remove=client-value",
                Expect::backend("echo-v1").got("x-header-remove", "client-value"),
            ),
            (
                "x-test-case=multi x-header-remove-1=client-value",
                Expect::backend("echo-v2")
                    .got("x-header-remove-1", "client-value")
                    .not_got("x-header-set-1")
                    .not_got("x-header-add-1"),
            ),
        ];
        expect(&mut client, &target, &echo, &cases);
    });
}

/// The sidecar's listener for the conformance's port 7070, called with
/// `echo:<port>` as `:authority` (the Service's short name in the
/// client's namespace).
fn sidecar_target(mesh: &Gamma) -> String {
    let port = mesh.ports.grpc;
    format!("127.0.0.1:{port}@echo:{port}")
}

/// The Service `echo` on the conformance's port 7070 through pilot's xDS.
fn proxyless_target(mesh: &Gamma) -> String {
    format!("xds:///echo:{}", mesh.ports.grpc)
}

/// Waits until a call to `target` with `metadata` (`key=value` words) is
/// answered by a backend (the sidecar or the proxyless client has its
/// routes).
fn wait_for_routes(client: &mut Python, target: &str, metadata: &str) {
    eventually("a call through the routes to be answered", || {
        client.ask(&format!("echo {target} /{GRPC_ECHO}/Echo {metadata}"))["backend"].is_string()
    });
}

fn check_methods(client: &mut Python, target: &str) {
    wait_for_routes(client, target, "");
    let failures: Vec<String> = method_cases()
        .into_iter()
        .filter_map(|(method, backend)| {
            let reply = client.ask(&format!("echo {target} {method}"));
            let right = reply["backend"] == backend && reply["method"] == method.as_str();
            (!right).then(|| format!("{method}: not answered by {backend} for {method}: {reply}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}\n{}", failures.join("\n"), client.log());
}

/// [`CALLS`] calls: every one answered by echo-v1 or echo-v2 (echo-v3,
/// of weight 0 and not in the registry, gets none), echo-v1's share 70%
/// within 5 points. With 2,000 calls the share's standard deviation is
/// about 1.02 points: 5 points is about 4.9 of them, a false failure
/// about once in a million runs.
fn check_split(client: &mut Python, target: &str) {
    wait_for_routes(client, target, "");
    let answer = client.ask(&format!("calls {target} /{GRPC_ECHO}/Echo {CALLS}"));
    assert_eq!(
        answer["errors"],
        serde_json::json!({}),
        "{answer}\n{}",
        client.log()
    );
    let counts: BTreeMap<String, u64> = serde_json::from_value(answer["counts"].clone()).unwrap();
    eprintln!("70/30 over {CALLS} calls to {target}: {counts:?}");
    let v1 = counts.get("echo-v1").copied().unwrap_or(0);
    let v2 = counts.get("echo-v2").copied().unwrap_or(0);
    assert_eq!(v1 + v2, CALLS, "every call answered by v1 or v2: {counts:?}");
    let share = v1 as f64 * 100.0 / CALLS as f64;
    assert!((65.0..=75.0).contains(&share), "70/30 split: {counts:?}");
}

/// What the server's answer to one call must be.
#[derive(Debug, Default)]
struct Expect {
    backend: &'static str,
    /// Metadata the server must have got, with these values (repeated
    /// keys joined by `,` in order).
    got: Vec<(&'static str, &'static str)>,
    /// Metadata the server must not have got.
    not_got: Vec<&'static str>,
}

impl Expect {
    fn backend(backend: &'static str) -> Self {
        Expect {
            backend,
            ..Default::default()
        }
    }

    fn got(mut self, key: &'static str, value: &'static str) -> Self {
        self.got.push((key, value));
        self
    }

    fn not_got(mut self, key: &'static str) -> Self {
        self.not_got.push(key);
        self
    }

    fn check(&self, reply: &Value) -> Result<(), String> {
        if reply["backend"] != self.backend {
            return Err(format!("not answered by {}", self.backend));
        }
        let joined = |key: &str| -> Option<String> {
            let values = reply["metadata"][key].as_array()?;
            Some(
                values
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(","),
            )
        };
        for (key, value) in &self.got {
            if joined(key).as_deref() != Some(*value) {
                return Err(format!("{key} is {:?}, not {value}", joined(key)));
            }
        }
        for key in &self.not_got {
            if joined(key).is_some() {
                return Err(format!("the server got {key}"));
            }
        }
        Ok(())
    }
}

/// Calls `method` on `target` with each case's metadata (`key=value`
/// words) and reports every answer that is not as expected.
fn expect(client: &mut Python, target: &str, method: &str, cases: &[(&str, Expect)]) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(metadata, expected)| {
            let reply = client.ask(&format!("echo {target} {method} {metadata}"));
            expected
                .check(&reply)
                .err()
                .map(|e| format!("{metadata}: {e}\n  got {reply}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}\n{}", failures.join("\n"), client.log());
}
