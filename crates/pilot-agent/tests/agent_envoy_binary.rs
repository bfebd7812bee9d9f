//! An Envoy binary that is missing or cannot be run is a configuration
//! error: pilot-agent says which binary and what to set, and exits 1 at
//! once, before it writes a bootstrap or starts anything, instead of
//! retrying as if Envoy had crashed.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{PATIENCE, agent_binary, free_port};

/// Runs `pilot-agent proxy sidecar` with `envoy` as its Envoy binary and
/// `path` as its PATH; waits for it to exit.
fn run_with(envoy: &str, path: &str, config_dir: &Path) -> Output {
    let mut child = Command::new(agent_binary())
        .args(["proxy", "sidecar", "--envoy-binary", envoy, "--config-dir"])
        .arg(config_dir)
        .args([
            "--ip",
            "10.0.0.31",
            "--id",
            "client-3.default",
            "--interception-mode",
            "NONE",
            "--discovery-address",
            "127.0.0.1:15010",
            "--status-addr",
            &format!("127.0.0.1:{}", free_port()),
        ])
        .env("PATH", path)
        .env_remove("ENVOY_BINARY")
        .env_remove("INSTANCE_IP")
        .env_remove("POD_NAME")
        .env_remove("POD_NAMESPACE")
        .env_remove("PILOT_DISCOVERY_URL")
        .env_remove("PILOT_TOKEN_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run pilot-agent");
    let _ = pilot_test_support::watchdog(child.id(), "KILL");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > PATIENCE {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "pilot-agent kept running with envoy binary {envoy:?}:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_missing_or_non_executable_envoy_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let not_executable = dir.path().join("envoy-not-executable");
    std::fs::write(&not_executable, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&not_executable, std::fs::Permissions::from_mode(0o644)).unwrap();
    let empty_path = dir.path().join("empty-bin");
    std::fs::create_dir(&empty_path).unwrap();
    let missing = dir.path().join("no-such-envoy");

    let cases = [
        (missing.to_str().unwrap(), "no such file"),
        (not_executable.to_str().unwrap(), "not executable (mode 644)"),
        (dir.path().to_str().unwrap(), "not a file"),
        ("envoy", "not found on PATH"),
    ];
    for (envoy, expected) in cases {
        let config_dir = dir.path().join("proxy");
        let output = run_with(envoy, empty_path.to_str().unwrap(), &config_dir);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{envoy}: {stderr}");
        assert!(
            stderr.contains(&format!("envoy binary {envoy}: {expected}")),
            "{envoy}: {stderr}"
        );
        assert!(stderr.contains("--envoy-binary or ENVOY_BINARY"), "{stderr}");
        assert!(!stderr.contains("restart"), "not retried: {stderr}");
        assert!(!config_dir.exists(), "nothing written for {envoy}");
    }
}
