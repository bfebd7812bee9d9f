//! schemathesis (PyPI, installed by scripts/install-deps into
//! .tools/schemathesis) fuzzes the REST API from the OpenAPI document the
//! server itself serves, with every check (no 5xx, status codes, content
//! types and bodies as documented, security as declared, schema-violating
//! input rejected), without tokens and with them.

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

/// Runs every check against `server`; `token` is sent as the bearer when
/// given. Panics with schemathesis' report when any check fails.
async fn fuzz(server: &TestServer, token: Option<&str>) {
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
        value.rsplit('/').next()?.trim().parse().ok()
    };
    let selected = number("Selected:").expect("a Selected: line");
    assert!(selected >= 30, "{report}");
    assert_eq!(number("Tested:"), Some(selected), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_api_passes_every_schemathesis_check_without_tokens() {
    let server = TestServer::start(&[]).await;
    fuzz(&server, None).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_api_passes_every_schemathesis_check_with_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let token = "0123456789abcdef-schemathesis";
    std::fs::write(&tokens, format!("{token} rw fuzzer\n")).unwrap();
    let server = TestServer::start(&["--token-file", tokens.to_str().unwrap()]).await;
    fuzz(&server, Some(token)).await;
    server.stop().await;
}
