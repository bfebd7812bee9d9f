//! The REST API is not served off loopback without a credential: the
//! binary refuses to start on such an address without `--token-file`
//! unless `--allow-unauthenticated` says so, and warns in its log of every
//! listener that takes requests without a credential.

use std::io::Read;
use std::time::Duration;

/// Runs `pilot-discovery` with `args` until it exits (killed after a
/// minute, as a guard against a hang); whether it exited and its stderr.
fn run(args: &[&str]) -> (Option<std::process::ExitStatus>, String) {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.json");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pilot-discovery"))
        .args(["--xds-listen", "127.0.0.1:0", "--log-level", "info"])
        .arg("--ready-file")
        .arg(&ready)
        .args(args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut status = None;
    for _ in 0..600 {
        if let Some(exited) = child.try_wait().unwrap() {
            status = Some(exited);
            break;
        }
        if ready.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    (status, stderr)
}

#[test]
fn rest_off_loopback_needs_a_token_file_or_an_explicit_allow() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "admin-token-0123456789abcdef rw admin\n").unwrap();
    let tokens = tokens.display().to_string();

    // Refused before anything is bound.
    let (status, stderr) = run(&["--listen", "0.0.0.0:0"]);
    assert!(status.is_some_and(|s| !s.success()), "started: {stderr}");
    assert!(stderr.contains("without authentication"), "{stderr}");
    assert!(stderr.contains("--token-file"), "{stderr}");
    assert!(stderr.contains("--allow-unauthenticated"), "{stderr}");

    // With a token file or the explicit allow, the check passes: the
    // server goes on to bind (an address of the documentation range, not
    // this machine's, so nothing is ever served off loopback here).
    for extra in [
        &["--token-file", tokens.as_str()][..],
        &["--allow-unauthenticated"][..],
    ] {
        let mut args = vec!["--listen", "192.0.2.1:0"];
        args.extend(extra);
        let (status, stderr) = run(&args);
        assert!(status.is_some_and(|s| !s.success()), "{stderr}");
        assert!(!stderr.contains("without authentication"), "{extra:?}: {stderr}");
        assert!(
            stderr.contains("cannot listen on 192.0.2.1:0 for the REST API"),
            "{extra:?}: {stderr}"
        );
    }
}

#[test]
fn every_listener_without_a_credential_is_a_warning_in_the_log() {
    let (status, stderr) = run(&["--listen", "127.0.0.1:0"]);
    assert!(status.is_none(), "exited: {stderr}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("WARN")).collect();
    assert!(
        warnings
            .iter()
            .any(|l| l.contains("REST API accepts requests without a credential")),
        "{stderr}"
    );
    assert!(
        warnings
            .iter()
            .any(|l| l.contains("ADS accepts streams without a credential")),
        "{stderr}"
    );
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "admin-token-0123456789abcdef rw admin\n").unwrap();
    let (status, stderr) = run(&[
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        &tokens.display().to_string(),
    ]);
    assert!(status.is_none(), "exited: {stderr}");
    assert!(!stderr.contains("without a credential"), "{stderr}");
}
