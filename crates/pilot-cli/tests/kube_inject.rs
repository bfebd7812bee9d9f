//! `pilotctl kube-inject` as a user runs it: files and stdin, the injected
//! result on stdout, errors at file:line:col with nothing written.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

fn pilotctl(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pilotctl"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // pilotctl may refuse its arguments (an invalid mesh config) and exit
    // before it reads stdin: the pipe is then closed, which is not this
    // test's failure; its exit code and stderr say what happened.
    match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.unwrap(),
    }
    child.wait_with_output().unwrap()
}

const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: web, ports: [{containerPort: 8080}]}]\n";

#[test]
fn injects_from_stdin_and_reinjecting_the_output_is_a_no_op() {
    let once = pilotctl(&["kube-inject", "-f", "-"], DEPLOYMENT);
    assert!(once.status.success(), "{}", String::from_utf8_lossy(&once.stderr));
    let out = String::from_utf8(once.stdout).unwrap();
    assert!(
        out.contains("name: pilot-proxy") && out.contains("name: pilot-init"),
        "{out}"
    );
    assert!(out.contains("- \"8080\""), "the app's port is captured: {out}");
    assert_eq!(
        String::from_utf8_lossy(&once.stderr).trim(),
        "injected Deployment shop/web"
    );

    let twice = pilotctl(&["kube-inject", "-f", "-"], &out);
    assert!(twice.status.success());
    assert_eq!(String::from_utf8(twice.stdout).unwrap(), out);
    assert!(String::from_utf8_lossy(&twice.stderr).contains("already injected"));
}

#[test]
fn the_mesh_config_sets_the_template() {
    let dir = tempfile::tempdir().unwrap();
    let mesh = dir.path().join("mesh.yaml");
    std::fs::write(
        &mesh,
        "sidecarInjector:\n  proxyImage: registry.example/proxy:9\n  discoveryAddress: pilot.mesh:15010\n",
    )
    .unwrap();
    let out = pilotctl(
        &["kube-inject", "--mesh-config", mesh.to_str().unwrap(), "-f", "-"],
        DEPLOYMENT,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.contains("image: registry.example/proxy:9") && out.contains("pilot.mesh:15010"),
        "{out}"
    );

    std::fs::write(&mesh, "sidecarInjector:\n  proxyImage: x\n  discovery: y\n").unwrap();
    let out = pilotctl(
        &["kube-inject", "--mesh-config", mesh.to_str().unwrap(), "-f", "-"],
        DEPLOYMENT,
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mesh.yaml: 3:3: .sidecarInjector: unknown field `discovery`"),
        "{stderr}"
    );
}

#[test]
fn an_error_in_any_input_names_its_position_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, DEPLOYMENT).unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "kind: Pod\nmetadata:\n  name: p\n  annotations:\n    traffic.sidecar.istio.io/includeInboundPorts: \"80,abc\"\nspec:\n  containers: [{name: a, image: a}]\n",
    )
    .unwrap();
    let out = pilotctl(
        &[
            "kube-inject",
            "-f",
            good.to_str().unwrap(),
            "-f",
            bad.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "nothing half-written");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:5:5: Pod p: .metadata.annotations[traffic.sidecar.istio.io/includeInboundPorts]: \"abc\" is not a port",
            bad.display()
        )),
        "{stderr}"
    );
}
