//! Every guide of `docs/guide/` runs as written: one test per guide runs
//! its `sh guide` blocks in order (in namespaces of its own, so the ports
//! it shows are free), checks the outputs it quotes and that its clean-up
//! stops what it started (`pilot_system_tests::guide`; how to add a guide:
//! docs/guide/testing.md). A guide with nothing to run says why in
//! [`NOT_RUN`], and a guide in neither list fails
//! `every_guide_is_run_or_says_why_not`.

use std::path::Path;
use std::time::Duration;

use pilot_system_tests::guide;

/// The guides run here, each by the test of the same name.
const RUN: &[&str] = &[
    "agent.md",
    "backend-and-registry.md",
    "capture.md",
    "console.md",
    "end-user-auth.md",
    "external-authorization.md",
    "gateway-api.md",
    "gateways.md",
    "grpc.md",
    "injection.md",
    "kubectl.md",
    "mesh-example.md",
    "mtls.md",
    "replicas.md",
    "scoping.md",
    "securing-ads.md",
    "server.md",
    "status.md",
    "stores.md",
    "validation.md",
];

/// The guides that are not run, and why.
const NOT_RUN: &[(&str, &str)] = &[
    ("README.md", "the index of the guides: no commands"),
    (
        "ambient.md",
        "needs a real ztunnel, which is not installed here; what it describes is driven by pilot-server's tests/ambient/ (ztunnel.rs: a delta client that speaks as ztunnel does; ca_impersonation.rs)",
    ),
    (
        "deploy-kubernetes.md",
        "needs a release build and a real Kubernetes cluster; what CI can check of it runs as tests/image.rs (the image) and tests/deploy.rs (the manifests)",
    ),
    (
        "embedding.md",
        "its commands are the embedder crate's tests (pilot-embedder-example, run by CI) and the examples backend-and-registry.md runs",
    ),
    (
        "kubernetes.md",
        "needs a real Kubernetes cluster (kubectl, KUBECONFIG); its commands are checked by hand (CRDs: pilot-store-k8s' tests)",
    ),
    (
        "testing.md",
        "its commands are scripts/test and the benchmarks themselves",
    ),
];

/// How long a guide may run (after building what it runs): long enough for
/// a loaded 2-core machine; a guide that hangs fails.
const TIMEOUT: Duration = Duration::from_secs(240);

fn run(name: &str) {
    guide::run(
        name,
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("guides"),
        TIMEOUT,
    );
}

#[test]
fn every_guide_is_run_or_says_why_not() {
    let dir = pilot_test_support::workspace().join("docs/guide");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("docs/guide")
        .map(|entry| {
            entry
                .expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".md"))
        .collect();
    names.sort();
    for name in &names {
        let run = RUN.contains(&name.as_str());
        let not_run = NOT_RUN.iter().find(|(n, _)| n == name);
        assert!(
            run != not_run.is_some(),
            "docs/guide/{name} must be in exactly one of RUN (with a test) and NOT_RUN (with the reason) of tests/guides.rs"
        );
        let text = std::fs::read_to_string(dir.join(name)).expect("the guide");
        let runnable = guide::steps(&text)
            .iter()
            .any(|s| matches!(s, guide::Step::Run { .. }));
        assert_eq!(
            run, runnable,
            "docs/guide/{name}: in RUN exactly when it has `sh guide` blocks"
        );
        if let Some((_, why)) = not_run {
            // Said loudly on every run, not skipped silently.
            eprintln!("NOT RUN: docs/guide/{name}: {why}");
        }
    }
    for name in RUN.iter().chain(NOT_RUN.iter().map(|(n, _)| n)) {
        assert!(
            names.iter().any(|n| n == name),
            "docs/guide/{name} is listed but does not exist"
        );
    }
}

/// Runs a guide made of `markdown`; the panic message when it fails.
fn failure_of(markdown: &str) -> Option<String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("made-up.md");
    std::fs::write(&path, markdown).expect("the guide");
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("guides");
    std::panic::catch_unwind(|| guide::run_file(&path, &work, Duration::from_secs(20)))
        .err()
        .map(|panic| {
            panic
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "a panic without a message".into())
        })
}

#[test]
fn the_runner_fails_a_guide_that_breaks_its_promises() {
    let passes = "```sh guide\nWORK=$(mktemp -d)\nsleep 1000 &\nSLEEP=$!\necho hello $((1 + 1))\n```\n\n```text guide-output\nhello 2\n```\n\n<!-- guide-check\ngrep -q 'hello 2' \"$GUIDE_OUTPUT\"\n-->\n\n```sh guide\nkill $SLEEP\nwait || true\nrm -rf $WORK\n```\n";
    assert_eq!(failure_of(passes), None);
    let cases = [
        (
            "a command fails",
            passes.replace("echo hello", "false && echo hello; false; echo"),
            "failed",
        ),
        (
            "other output",
            passes.replace("hello 2\n```", "hello 3\n```"),
            "did not print",
        ),
        (
            "a check fails",
            passes.replace("grep -q 'hello 2'", "grep -q 'hello 3'"),
            "failed",
        ),
        (
            "a process left",
            passes.replace("kill $SLEEP\nwait || true\n", ""),
            "left processes running",
        ),
        (
            "a file left",
            passes.replace("rm -rf $WORK", ":"),
            "left files in /tmp",
        ),
        (
            "a hang",
            passes.replace("echo hello", "sleep 60; echo hello"),
            "did not finish",
        ),
    ];
    for (what, markdown, message) in cases {
        let failure = failure_of(&markdown).unwrap_or_else(|| panic!("{what}: the guide passed"));
        assert!(failure.contains(message), "{what}: {failure}");
    }
}

#[test]
fn guide_agent() {
    run("agent.md");
}

#[test]
fn guide_backend_and_registry() {
    run("backend-and-registry.md");
}

#[test]
fn guide_capture() {
    run("capture.md");
}

#[test]
fn guide_console() {
    run("console.md");
}

#[test]
fn guide_external_authorization() {
    run("external-authorization.md");
}

#[test]
fn guide_gateway_api() {
    run("gateway-api.md");
}

#[test]
fn guide_gateways() {
    run("gateways.md");
}

#[test]
fn guide_grpc() {
    run("grpc.md");
}

#[test]
fn guide_injection() {
    run("injection.md");
}

#[test]
fn guide_mesh_example() {
    run("mesh-example.md");
}

#[test]
fn guide_mtls() {
    run("mtls.md");
}

#[test]
fn guide_end_user_auth() {
    run("end-user-auth.md");
}

#[test]
fn guide_replicas() {
    run("replicas.md");
}

#[test]
fn guide_scoping() {
    run("scoping.md");
}

#[test]
fn guide_securing_ads() {
    run("securing-ads.md");
}

#[test]
fn guide_server() {
    run("server.md");
}

#[test]
fn guide_kubectl() {
    run("kubectl.md");
}

#[test]
fn guide_status() {
    run("status.md");
}

#[test]
fn guide_stores() {
    run("stores.md");
}

#[test]
fn guide_validation() {
    run("validation.md");
}
