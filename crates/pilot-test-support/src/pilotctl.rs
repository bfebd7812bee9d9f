//! `pilotctl` run as a user runs it, with a clean environment: a fresh
//! `HOME`, no `PILOT_SERVER`, `PILOT_CONFIG` or `XDG_CONFIG_HOME` unless a
//! test sets them, from the workspace root (so `examples/...` paths work).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::binaries::{PILOTCTL, binary};

/// What a `pilotctl` run did.
#[derive(Debug)]
pub struct Run {
    /// The exit code (-1 if killed by a signal).
    pub code: i32,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

/// Runs `pilotctl` (found or built by [`binary`]) with `args` against
/// `server` (`--server`, if any), more environment variables `env` and
/// `stdin` as its standard input (none if `None`).
pub fn pilotctl(server: Option<&str>, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Run {
    pilotctl_at(&binary(PILOTCTL), server, args, env, stdin)
}

/// [`pilotctl`] with the binary at `path` (pilot-cli's own tests pass
/// cargo's `CARGO_BIN_EXE_pilotctl`).
pub fn pilotctl_at(
    path: &Path,
    server: Option<&str>,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&str>,
) -> Run {
    let home = tempfile::tempdir().expect("a temporary HOME");
    let mut command = Command::new(path);
    if let Some(server) = server {
        command.args(["--server", server]);
    }
    command
        .args(args)
        .current_dir(crate::workspace())
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
    let mut child = command
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", path.display()));
    if let Some(text) = stdin
        && let Some(mut input) = child.stdin.take()
    {
        input.write_all(text.as_bytes()).expect("pilotctl's stdin");
    }
    let output = child.wait_with_output().expect("pilotctl's output");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).to_string(),
        stderr: String::from_utf8_lossy(&output.stderr).to_string(),
    }
}
