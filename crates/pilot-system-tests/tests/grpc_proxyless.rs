//! Proxyless gRPC with PyPI's `grpcio` (in `.tools/grpc`, installed by
//! `scripts/install-deps`): pilot-discovery serves xDS-enabled gRPC servers
//! and a gRPC client that dials `xds:///` names, with bootstraps written by
//! `pilotctl grpc-bootstrap`. Checked: the health service answers SERVING
//! through `xds:///`, proxy-status shows all four types SYNCED, an 80/20
//! RouteRule splits ~1,000 calls within five standard deviations, a header
//! match goes to v3, a bootstrap without `GENERATOR` works too, a fault rule aborts calls, a timeout ends delayed calls, an Envoy on the same
//! server gets Envoy listeners, a rule change changes the split on the same channel,
//! an unknown name fails with "does not exist", nothing is NACKed, and
//! the servers start serving only on pilot's inbound listeners. Calls
//! made without pause while the split rule is deleted and applied again
//! (and changed) all succeed: the subset clusters stay with the client
//! until its routes no longer name them. A VirtualService and
//! DestinationRule split and match calls as the rules do. A name out of
//! the client's scope (a Sidecar) does not exist for it.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use pilot_system_tests::{Store, discovery};
use pilot_test_support::{Discovery, eventually, free_port, pilotctl, workspace};
use serde_json::Value;

const HOST: &str = "greeter.default.svc.cluster.local";
const CLIENT_NODE: &str = "sidecar~127.0.0.1~grpc-client.default~default.svc.cluster.local";
const ENVOY_NODE: &str = "sidecar~127.0.0.2~envoy.default~default.svc.cluster.local";
const PLAIN_NODE: &str = "sidecar~127.0.0.3~plain.default~default.svc.cluster.local";
const SERVER_NODE: &str = "sidecar~127.0.0.1~greeter.default~default.svc.cluster.local";
/// Calls per measured split.
const CALLS: u64 = 1000;

#[test]
fn grpc_client_resolves_xds_names_through_pilot() {
    let GrpcMesh {
        dir,
        server,
        servers,
        mut client,
        service_port,
        client_bootstrap,
    } = grpc_mesh(&rules(80, 20));
    let url = Some(server.url.as_str());

    // The health service through xds:///, then all four types SYNCED.
    let full = format!("xds:///{HOST}:{service_port}");
    let health = client.ask(&format!("health {full}"));
    assert_eq!(health["status"], "SERVING", "{health}\n{}", client.log());
    let mut status = String::new();
    eventually("proxy-status to show the gRPC client SYNCED", || {
        status = pilotctl(url, &["proxy-status"], &[], None).stdout;
        status
            .lines()
            .any(|l| l.starts_with(CLIENT_NODE) && l.matches("SYNCED").count() == 4)
    });
    assert!(
        status
            .lines()
            .any(|l| l.starts_with(SERVER_NODE) && l.contains("SYNCED")),
        "{status}"
    );

    // A bootstrap without GENERATOR (as a user might write by hand): the
    // first request names a listener, so the node is served as gRPC.
    let mut plain: Value =
        serde_json::from_str(&std::fs::read_to_string(&client_bootstrap).unwrap()).unwrap();
    plain["node"]["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("GENERATOR")
        .expect("pilotctl sets GENERATOR");
    plain["node"]["id"] = PLAIN_NODE.into();
    let plain_bootstrap = dir.path().join("plain.json");
    std::fs::write(&plain_bootstrap, plain.to_string()).unwrap();
    let mut plain_client = Python::start("client.py", &["plain"], &plain_bootstrap, dir.path());
    let health = plain_client.ask(&format!("health {full}"));
    assert_eq!(health["status"], "SERVING", "{health}\n{}", plain_client.log());
    drop(plain_client);

    // An Envoy on the same server at the same time gets Envoy listeners
    // (the generator is part of the proxy's class), and syncs too.
    let envoy = pilot_test_support::Envoy::ads(
        ENVOY_NODE,
        &[("INTERCEPTION_MODE", "NONE")],
        server.xds_port,
        false,
    )
    .unwrap();
    eventually("proxy-status to show the Envoy SYNCED", || {
        status = pilotctl(url, &["proxy-status"], &[], None).stdout;
        status
            .lines()
            .any(|l| l.starts_with(ENVOY_NODE) && l.matches("SYNCED").count() == 4)
    });
    let listeners = envoy.admin("/config_dump?resource=dynamic_listeners");
    assert!(
        listeners.contains(&format!("127.0.0.1_{service_port}")),
        "{listeners}"
    );
    assert!(!listeners.contains("api_listener"), "{listeners}");
    drop(envoy);

    // 80/20 over ~1,000 calls, on the short name (the client's namespace).
    let short = format!("xds:///greeter:{service_port}");
    let counts = client.count(&short, CALLS, None);
    eprintln!("80/20 rule, {CALLS} calls: {counts:?}");
    assert_split(&counts, 0.8);
    // The header match sends everything to v3; name.namespace resolves too.
    let canary = client.count(
        &format!("xds:///greeter.default:{service_port}"),
        100,
        Some("x-canary=yes"),
    );
    assert_eq!(canary, [("v3".to_string(), 100)].into(), "{}", client.log());
    // Fault injection (gRFC A33): the abort reaches the application as
    // UNAVAILABLE, from the client's own fault filter.
    let aborted = client.ask(&format!("count {short} 20 x-fault=yes"));
    assert_eq!(aborted["counts"], serde_json::json!({}), "{aborted}");
    assert_eq!(aborted["errors"]["UNAVAILABLE"], 20, "{aborted}");
    // The rule's timeout (gRFC A31's max_stream_duration) ends calls that
    // its own injected delay holds up.
    let slow = client.ask(&format!("count {short} 3 x-slow=yes"));
    assert_eq!(slow["counts"], serde_json::json!({}), "{slow}");
    assert_eq!(slow["errors"]["DEADLINE_EXCEEDED"], 3, "{slow}");

    // A new split, seen by the same channel (no new client, no restart).
    let before = rds_acked(&server);
    let replaced = pilotctl(url, &["apply", "-f", "-"], &[], Some(&rules(30, 70)));
    assert_eq!(replaced.code, 0, "{replaced:?}");
    eventually("the client to ACK the new routes", || {
        let now = rds_acked(&server);
        !now.is_empty() && now.iter().all(|v| !before.contains(v))
    });
    let counts = client.count(&short, CALLS, None);
    eprintln!("30/70 rule, {CALLS} calls: {counts:?}");
    assert_split(&counts, 0.3);

    // An unknown name: the client's "does not exist", and no NACK anywhere.
    let unknown = client.ask(&format!(
        "health xds:///nosuch.default.svc.cluster.local:{service_port}"
    ));
    assert_eq!(unknown["error"], "UNAVAILABLE", "{unknown}");
    assert!(
        unknown["message"].as_str().unwrap().contains("does not exist"),
        "{unknown}"
    );
    let (code, body) = server.get("/debug/proxy-status");
    assert_eq!(code, 200, "{body}");
    let proxies: Value = serde_json::from_str(&body).unwrap();
    for proxy in proxies["proxies"].as_array().unwrap() {
        for (short, state) in proxy["types"].as_object().unwrap() {
            assert!(
                state["nack"].is_null(),
                "{} NACKed {short}: {state}",
                proxy["node"]
            );
        }
    }
    // Nor ever since the server started.
    let (code, metrics) = server.get("/metrics");
    assert_eq!(code, 200, "{metrics}");
    for short in ["cds", "eds", "lds", "rds"] {
        let line = format!("pilot_total_xds_rejects_total{{type=\"{short}\"}} 0");
        assert!(metrics.lines().any(|l| l == line), "no {line:?} in {metrics}");
    }
    drop(servers);
}

/// Continuous calls through the 80/20 split while the rule is deleted and
/// applied again, five times waiting for the client to apply each change
/// and three times without waiting, then changed to other subsets: not
/// one call fails.
#[test]
fn grpc_calls_keep_succeeding_while_the_split_is_deleted_and_applied() {
    let dir = tempfile::tempdir().unwrap();
    let service_port = free_port();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let services = dir.path().join("services.yaml");
    let mut text = format!(
        "services:\n- hostname: {HOST}\n  ports: [{{name: grpc, port: {service_port}, protocol: GRPC}}]\n  instances:\n"
    );
    for (version, port) in ["v1", "v2", "v3"].iter().zip(&ports) {
        text.push_str(&format!(
            "  - {{address: 127.0.0.1, port: {port}, labels: {{app: greeter, version: {version}}}}}\n"
        ));
    }
    std::fs::write(&services, text).unwrap();
    let server = discovery(&Store::Memory, &["--services", services.to_str().unwrap()]);
    let url = Some(server.url.as_str());
    let split = |v1: (&str, u32), v2: (&str, u32)| {
        format!(
            "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {{name: greeter-split, namespace: default}}\nspec:\n  destination: {{name: greeter}}\n  route:\n  - {{labels: {{version: {}}}, weight: {}}}\n  - {{labels: {{version: {}}}, weight: {}}}\n",
            v1.0, v1.1, v2.0, v2.1
        )
    };
    let apply = |yaml: &str| {
        let applied = pilotctl(url, &["apply", "-f", "-"], &[], Some(yaml));
        assert_eq!(applied.code, 0, "{applied:?}");
    };
    let delete = || {
        let deleted = pilotctl(url, &["delete", "routerule", "greeter-split"], &[], None);
        assert_eq!(deleted.code, 0, "{deleted:?}");
    };
    apply(&split(("v1", 80), ("v2", 20)));

    let client_bootstrap = dir.path().join("client.json");
    let xds = format!("127.0.0.1:{}", server.xds_port);
    let written = pilotctl(
        None,
        &[
            "grpc-bootstrap",
            "--xds-address",
            &xds,
            "-o",
            client_bootstrap.to_str().unwrap(),
        ],
        &[],
        None,
    );
    assert_eq!(written.code, 0, "{written:?}");
    let _servers: Vec<Python> = ["v1", "v2", "v3"]
        .iter()
        .zip(&ports)
        .map(|(version, port)| {
            let mut python = Python::start(
                "server.py",
                &[version, &port.to_string()],
                &client_bootstrap,
                dir.path(),
            );
            assert_eq!(python.line(), "started", "{}", python.log());
            python
        })
        .collect();
    let mut client = Python::start("client.py", &["load"], &client_bootstrap, dir.path());
    let target = format!("xds:///{HOST}:{service_port}");
    eventually("the split to reach the client", || {
        let counts = client.count(&target, 50, None);
        counts.contains_key("v1") && counts.contains_key("v2")
    });

    // Waits until the client ACKed routes it had not ACKed before.
    let applied = |before: &[String]| {
        eventually("the client to ACK the new routes", || {
            let now = rds_acked(&server);
            !now.is_empty() && now.iter().all(|v| !before.contains(v))
        });
    };
    let loading = client.ask(&format!("load {target}"));
    assert_eq!(loading["loading"], target.as_str(), "{loading}");
    for _ in 0..5 {
        let before = rds_acked(&server);
        delete();
        applied(&before);
        let before = rds_acked(&server);
        apply(&split(("v1", 80), ("v2", 20)));
        applied(&before);
    }
    for _ in 0..3 {
        delete();
        apply(&split(("v1", 80), ("v2", 20)));
    }
    // The pushes of those changes may still be on their way, and an ACK
    // of one of them is not the next change's: the next two changes are
    // known by where calls go. Only the 50/50 split sends calls to v3;
    // once it routes them, every push before it is over, and of what
    // follows only the 80/20 split sends calls to v1.
    apply(&split(("v2", 50), ("v3", 50)));
    eventually("the client to route by the 50/50 split", || {
        client.count(&target, 20, None).contains_key("v3")
    });
    apply(&split(("v1", 80), ("v2", 20)));
    eventually("the client to route by the 80/20 split again", || {
        client.count(&target, 20, None).contains_key("v1")
    });
    let result = client.ask("stop");
    let calls: u64 = result["counts"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_u64)
        .sum();
    let failed: u64 = result["errors"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_u64)
        .sum();
    eprintln!("split deleted and applied under load: {calls} calls succeeded, {failed} failed: {result}");
    assert!(calls > 0, "{result}\n{}", client.log());
    assert_eq!(failed, 0, "{result}\n{}", client.log());
}

/// A VirtualService and its DestinationRule (`networking.istio.io/v1`)
/// route proxyless gRPC as the v1alpha2 rules do: ~1,000 calls split
/// 80/20 by weight, a header match to v3, other header values unaffected.
#[test]
fn grpc_client_follows_a_virtual_service_split_and_header_match() {
    let mut mesh = grpc_mesh(&virtual_service(80, 20));
    let full = format!("xds:///{HOST}:{}", mesh.service_port);
    let health = mesh.client.ask(&format!("health {full}"));
    assert_eq!(health["status"], "SERVING", "{health}\n{}", mesh.client.log());
    let short = format!("xds:///greeter:{}", mesh.service_port);
    let counts = mesh.client.count(&short, CALLS, None);
    eprintln!("80/20 VirtualService, {CALLS} calls: {counts:?}");
    assert_split(&counts, 0.8);
    let canary = mesh.client.count(&full, 100, Some("x-canary=yes"));
    assert_eq!(canary, [("v3".to_string(), 100)].into(), "{}", mesh.client.log());
    let others = mesh.client.count(&full, 100, Some("x-canary=no"));
    assert!(!others.contains_key("v3"), "{others:?}");
    assert_eq!(others.values().sum::<u64>(), 100, "{others:?}");
    drop(mesh.servers);
}

/// Scoping for proxyless gRPC: a service of another namespace resolves
/// through `xds:///` until a Sidecar of the client's namespace imports
/// only `./*`; then the client's channel to it fails UNAVAILABLE with
/// "does not exist" (the name is out of its scope, so pilot sends no
/// listener for it) while the greeter of its own namespace still answers.
#[test]
fn grpc_client_out_of_scope_name_does_not_exist() {
    let mut mesh = grpc_mesh(&virtual_service(80, 20));
    let url = Some(mesh.server.url.as_str());
    let port = mesh.service_port;
    // A service of namespace `prod`, served by the v1 greeter.
    let services = mesh.dir.path().join("services.yaml");
    let mut text = std::fs::read_to_string(&services).unwrap();
    let instance = text
        .lines()
        .find(|l| l.contains("version: v1"))
        .unwrap()
        .to_string();
    text.push_str(&format!(
        "- hostname: other.prod.svc.cluster.local\n  ports: [{{name: grpc, port: {port}, protocol: GRPC}}]\n  instances:\n{instance}\n"
    ));
    let staging = mesh.dir.path().join("services.yaml.new");
    std::fs::write(&staging, text).unwrap();
    std::fs::rename(&staging, &services).unwrap();
    let other = format!("xds:///other.prod.svc.cluster.local:{port}");
    let full = format!("xds:///{HOST}:{port}");
    eventually("the other namespace's service to resolve", || {
        mesh.client.ask(&format!("health {other}"))["status"] == "SERVING"
    });

    let sidecar = "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: default}\nspec:\n  egress: [{hosts: [\"./*\"]}]\n";
    let applied = pilotctl(url, &["apply", "-f", "-"], &[], Some(sidecar));
    assert_eq!(applied.code, 0, "{applied:?}");
    let mut answer = Value::Null;
    eventually("the out-of-scope name to not exist", || {
        answer = mesh.client.ask(&format!("health {other}"));
        answer["error"] == "UNAVAILABLE"
    });
    assert!(
        answer["message"]
            .as_str()
            .unwrap_or_default()
            .contains("does not exist"),
        "{answer}"
    );
    let health = mesh.client.ask(&format!("health {full}"));
    assert_eq!(health["status"], "SERVING", "{health}\n{}", mesh.client.log());
    drop(mesh.servers);
}

/// The split (v1/v2 by weight) and the header match to v3 as a
/// VirtualService over a DestinationRule's subsets.
fn virtual_service(v1: u32, v2: u32) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: greeter, namespace: default}}
spec:
  host: greeter
  subsets:
  - {{name: v1, labels: {{version: v1}}}}
  - {{name: v2, labels: {{version: v2}}}}
  - {{name: v3, labels: {{version: v3}}}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: greeter, namespace: default}}
spec:
  hosts: [greeter]
  http:
  - name: canary
    match: [{{headers: {{x-canary: {{exact: "yes"}}}}}}]
    route: [{{destination: {{host: greeter, subset: v3}}}}]
  - name: split
    route:
    - {{destination: {{host: greeter, subset: v1}}, weight: {v1}}}
    - {{destination: {{host: greeter, subset: v2}}, weight: {v2}}}
"#
    )
}

/// pilot-discovery with the greeter service (v1, v2, v3) and `rules`
/// applied, three xDS-enabled greeter servers serving on pilot's
/// listeners, and a gRPC client.
struct GrpcMesh {
    dir: tempfile::TempDir,
    server: Discovery,
    servers: Vec<Python>,
    client: Python,
    service_port: u16,
    client_bootstrap: PathBuf,
}

fn grpc_mesh(rules: &str) -> GrpcMesh {
    let dir = tempfile::tempdir().unwrap();
    let service_port = free_port();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let services = dir.path().join("services.yaml");
    let mut text = format!(
        "services:\n- hostname: {HOST}\n  ports: [{{name: grpc, port: {service_port}, protocol: GRPC}}]\n  instances:\n"
    );
    for (version, port) in ["v1", "v2", "v3"].iter().zip(&ports) {
        text.push_str(&format!(
            "  - {{address: 127.0.0.1, port: {port}, labels: {{app: greeter, version: {version}}}}}\n"
        ));
    }
    std::fs::write(&services, text).unwrap();
    let server = discovery(&Store::Memory, &["--services", services.to_str().unwrap()]);
    let url = Some(server.url.as_str());
    let applied = pilotctl(url, &["apply", "-f", "-"], &[], Some(rules));
    assert_eq!(applied.code, 0, "{applied:?}");

    // Bootstraps from pilotctl, for the servers' node and the client's.
    let xds = format!("127.0.0.1:{}", server.xds_port);
    let server_bootstrap = dir.path().join("server.json");
    let client_bootstrap = dir.path().join("client.json");
    for (path, extra) in [
        (
            &server_bootstrap,
            &["--id", "greeter.default", "--labels", "app=greeter"][..],
        ),
        (&client_bootstrap, &[][..]),
    ] {
        let mut args = vec![
            "grpc-bootstrap",
            "--xds-address",
            &xds,
            "-o",
            path.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let written = pilotctl(None, &args, &[], None);
        assert_eq!(written.code, 0, "{written:?}");
    }

    // Three xDS-enabled servers: each serves only once pilot sent the
    // listener for its address.
    let servers: Vec<Python> = ["v1", "v2", "v3"]
        .iter()
        .zip(&ports)
        .map(|(version, port)| {
            let mut python = Python::start(
                "server.py",
                &[version, &port.to_string(), "--xds"],
                &server_bootstrap,
                dir.path(),
            );
            assert_eq!(python.line(), "started", "{}", python.log());
            python
        })
        .collect();
    let mut client = Python::start("client.py", &[], &client_bootstrap, dir.path());
    for (port, python) in ports.iter().zip(&servers) {
        eventually("the xDS-enabled server to serve on pilot's listener", || {
            client.ask(&format!("health 127.0.0.1:{port}"))["status"] == "SERVING"
        });
        assert!(python.log().contains("will start serving"), "{}", python.log());
    }
    GrpcMesh {
        dir,
        server,
        servers,
        client,
        service_port,
        client_bootstrap,
    }
}

/// The split rule (v1/v2 by weight), the header rule to v3, a header rule
/// that aborts with 503 (gRPC: UNAVAILABLE) and one that delays calls
/// beyond its timeout.
fn rules(v1: u32, v2: u32) -> String {
    format!(
        r#"apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {{name: greeter-split, namespace: default}}
spec:
  destination: {{name: greeter}}
  precedence: 1
  route:
  - {{labels: {{version: v1}}, weight: {v1}}}
  - {{labels: {{version: v2}}, weight: {v2}}}
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {{name: greeter-canary, namespace: default}}
spec:
  destination: {{name: greeter}}
  precedence: 2
  match: {{request: {{headers: {{x-canary: {{exact: "yes"}}}}}}}}
  route:
  - {{labels: {{version: v3}}}}
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {{name: greeter-fault, namespace: default}}
spec:
  destination: {{name: greeter}}
  precedence: 3
  match: {{request: {{headers: {{x-fault: {{exact: "yes"}}}}}}}}
  httpFault: {{abort: {{percent: 100, httpStatus: 503}}}}
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {{name: greeter-slow, namespace: default}}
spec:
  destination: {{name: greeter}}
  precedence: 4
  match: {{request: {{headers: {{x-slow: {{exact: "yes"}}}}}}}}
  httpFault: {{delay: {{percent: 100, fixedDelay: 5s}}}}
  httpReqTimeout: {{simpleTimeout: {{timeout: 200ms}}}}
"#
    )
}

/// Only v1 and v2 answered, and v1's share is within five standard
/// deviations of `p` (a false failure about once in 3.5 million runs).
fn assert_split(counts: &std::collections::BTreeMap<String, u64>, p: f64) {
    let v1 = counts.get("v1").copied().unwrap_or(0);
    let v2 = counts.get("v2").copied().unwrap_or(0);
    assert_eq!(v1 + v2, CALLS, "calls went elsewhere or failed: {counts:?}");
    let n = CALLS as f64;
    let sigma = (n * p * (1.0 - p)).sqrt();
    let off = (v1 as f64 - n * p).abs();
    assert!(
        off <= 5.0 * sigma,
        "v1 got {v1} of {CALLS}, expected {} ± {:.0} (5 sigma): {counts:?}",
        n * p,
        5.0 * sigma
    );
}

/// The RDS versions the gRPC client's streams ACKed.
fn rds_acked(server: &Discovery) -> Vec<String> {
    let (_, body) = server.get("/debug/proxy-status");
    let value: Value = serde_json::from_str(&body).unwrap_or_default();
    value["proxies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["node"] == CLIENT_NODE)
        .filter_map(|p| p["types"]["RDS"]["acked"].as_str().map(str::to_string))
        .collect()
}

/// The venv's Python (`scripts/install-deps` installs grpcio there).
fn python() -> PathBuf {
    let path = workspace().join(".tools/grpc/bin/python");
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-deps (PyPI grpcio, grpcio-health-checking)",
        path.display()
    );
    path
}

/// A Python script from tests/grpc/, fed commands on stdin, its stderr in
/// a log file; killed when dropped.
struct Python {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    log: PathBuf,
}

impl Python {
    fn start(script: &str, args: &[&str], bootstrap: &Path, dir: &Path) -> Self {
        let log = dir.join(format!("{script}-{}.log", args.first().unwrap_or(&"client")));
        let mut child = Command::new(python())
            .arg(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/grpc")
                    .join(script),
            )
            .args(args)
            .env("GRPC_XDS_BOOTSTRAP", bootstrap)
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("cannot run the grpc venv's python");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Python {
            child,
            stdin,
            stdout,
            log,
        }
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the script ended:\n{}", self.log());
        line.trim().to_string()
    }

    /// One command, its JSON answer.
    fn ask(&mut self, command: &str) -> Value {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        let line = self.line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// `n` calls: the answers by server name (errors fail the test).
    fn count(
        &mut self,
        target: &str,
        n: u64,
        header: Option<&str>,
    ) -> std::collections::BTreeMap<String, u64> {
        let answer = self.ask(&format!("count {target} {n} {}", header.unwrap_or("")));
        assert_eq!(
            answer["errors"],
            serde_json::json!({}),
            "{answer}\n{}",
            self.log()
        );
        serde_json::from_value(answer["counts"].clone()).unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Python {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
