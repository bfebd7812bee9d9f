//! schemathesis (PyPI, installed by scripts/install-deps into
//! .tools/schemathesis) fuzzes the REST API from the OpenAPI document the
//! server itself serves, with every check (no 5xx, status codes, content
//! types and bodies as documented, security as declared, schema-violating
//! input rejected), without tokens and with them.
//!
//! What is fuzzed is what differs: every kind at its storage version with
//! tokens. A kind's other served versions have the same schema and the
//! same handlers (only `apiVersion` changes: `tests/networking_versions.rs`
//! and kubectl's tests cover them), and without tokens only the
//! authentication differs, so that run takes one group's kinds
//! (`networking.istio.io`) and the discovery and document endpoints.
//! Every operation of the document cost a second of the fuzzer's CPU per
//! run; both runs over every version of every kind were the two longest
//! tests of CI.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::TestServer;

fn schemathesis() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = root.join(".tools/schemathesis/bin/schemathesis");
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-deps (it installs PyPI's schemathesis there)",
        path.display()
    );
    path
}

/// The operations a run leaves out, as one regular expression over paths:
/// every kind's versions other than its storage version and, when
/// `only_group` is given, every other group's kinds.
fn left_out(only_group: Option<&str>) -> String {
    let registry = pilot_api::default_registry();
    let mut paths = Vec::new();
    for id in registry.kinds() {
        let schema = registry.get(&id).expect("a registered kind");
        let other_group = only_group.is_some_and(|group| group != schema.group);
        for version in &schema.versions {
            if other_group || *version != schema.version {
                paths.push(format!(
                    "/apis/{}/{version}/(namespaces/[^/]+/)?{}(/|$)",
                    regex_escape(&schema.group),
                    schema.plural
                ));
            }
        }
    }
    format!("^({})", paths.join("|"))
}

fn regex_escape(text: &str) -> String {
    text.replace('.', "\\.")
}

/// Runs every check against `server`; `token` is sent as the bearer when
/// given; `only_group` limits the kinds fuzzed to one group's
/// ([`left_out`]). Panics with schemathesis' report when any check fails.
async fn fuzz(server: &TestServer, token: Option<&str>, only_group: Option<&str>) {
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/schemathesis/schemathesis.toml");
    let mut command = Command::new(schemathesis());
    command
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(format!("http://{}/openapi.json", server.rest))
        .args([
            "--checks",
            "all",
            "--max-examples",
            "5",
            "--workers",
            "1",
            "--seed",
            "16",
            "--exclude-path-regex",
            &left_out(only_group),
        ])
        .env("SCHEMATHESIS_HOOKS", "")
        .env("NO_COLOR", "1");
    if let Some(token) = token {
        command.args(["--header", &format!("Authorization: Bearer {token}")]);
    }
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("cannot run schemathesis");
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "schemathesis found failures:\n{report}");
    // It tested every operation of the document (none skipped as unusable).
    let number = |label: &str| -> Option<usize> {
        let line = report.lines().find(|l| l.trim_start().starts_with(label))?;
        let value = line.trim_start().strip_prefix(label)?.trim();
        // `Selected: 62/182` (of the document's operations), `Tested: 62`.
        value.split('/').next()?.trim().parse().ok()
    };
    let selected = number("Selected:").expect("a Selected: line");
    assert!(selected >= 30, "{report}");
    assert_eq!(number("Tested:"), Some(selected), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_api_passes_every_schemathesis_check_without_tokens() {
    let server = TestServer::start(&[]).await;
    fuzz(&server, None, Some("networking.istio.io")).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_api_passes_every_schemathesis_check_with_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let token = "0123456789abcdef-schemathesis";
    std::fs::write(&tokens, format!("{token} rw fuzzer\n")).unwrap();
    let server = TestServer::start(&["--token-file", tokens.to_str().unwrap()]).await;
    fuzz(&server, Some(token), None).await;
    server.stop().await;
}
