//! The real binaries: `pilot-discovery` (found, or built, by
//! pilot-test-support) on free loopback ports, and `pilotctl` with a clean
//! environment.

#![allow(dead_code, unused_imports)]

use std::process::{Command, Stdio};

pub use pilot_test_support::{Discovery, PATIENCE, eventually, free_port, workspace};

/// `pilot-discovery`: cargo does not build another package's binary for
/// these tests, so pilot-test-support finds it beside them or builds it.
pub fn discovery_binary() -> std::path::PathBuf {
    pilot_test_support::binary(pilot_test_support::PILOT_DISCOVERY)
}

/// What a `pilotctl` run did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `pilotctl` with `args` against `server` (if any), with no config
/// file and no PILOT_SERVER unless `env` sets them.
pub fn pilotctl(server: Option<&str>, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Run {
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_pilotctl"));
    if let Some(server) = server {
        command.args(["--server", server]);
    }
    command
        .args(args)
        .current_dir(workspace())
        .env("HOME", home.path())
        .env_remove("PILOT_SERVER")
        .env_remove("PILOT_CONFIG")
        .env_remove("XDG_CONFIG_HOME")
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("cannot run pilotctl");
    if let Some(text) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    let output = child.wait_with_output().unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).to_string(),
        stderr: String::from_utf8_lossy(&output.stderr).to_string(),
    }
}

/// A services file for the bookinfo services on `port`, reviews in three
/// versions.
pub fn bookinfo_services(port: u16) -> String {
    let mut text = String::from("services:\n");
    for (name, versions) in [
        ("productpage", &["v1"][..]),
        ("details", &["v1"]),
        ("ratings", &["v1"]),
        ("reviews", &["v1", "v2", "v3"]),
    ] {
        text.push_str(&format!(
            "- hostname: {name}.default.svc.cluster.local\n  ports: [{{name: http, port: {port}, protocol: HTTP}}]\n  instances:\n"
        ));
        for (i, version) in versions.iter().enumerate() {
            text.push_str(&format!(
                "  - {{address: 127.0.0.1, port: {}, labels: {{app: {name}, version: {version}}}}}\n",
                20000 + i
            ));
        }
    }
    text
}
