//! Running the scripts through `iptables-save` and `iptables-restore`.

use std::io::Write as _;
use std::process::{Command, Stdio};

use super::rules::{self, Family};
use super::{CaptureConfig, IptablesError};

/// The families a configuration writes: IPv4, and IPv6 when asked.
pub fn families(config: &CaptureConfig) -> Vec<Family> {
    if config.ipv6 {
        vec![Family::V4, Family::V6]
    } else {
        vec![Family::V4]
    }
}

/// What `apply` would feed `iptables-restore --noflush` on a namespace with
/// none of our rules, one script per family.
pub fn dry_run(config: &CaptureConfig) -> Vec<(Family, String)> {
    families(config)
        .into_iter()
        .map(|family| (family, rules::apply_script(config, family, "")))
        .collect()
}

/// Installs the capture rules, replacing ours if present (run twice, the
/// same rules), each family in one `iptables-restore` transaction. Returns
/// the scripts applied.
pub fn apply(config: &CaptureConfig) -> Result<Vec<(Family, String)>, IptablesError> {
    let mut applied = Vec::new();
    for family in families(config) {
        let existing = save(family)?;
        let script = rules::apply_script(config, family, &existing);
        restore(family, &script)?;
        applied.push((family, script));
    }
    Ok(applied)
}

/// Removes exactly our chains and the jumps to them, in both families when
/// `ip6tables` is present. Returns the scripts applied (none when nothing
/// of ours was installed).
pub fn cleanup(ipv6: bool) -> Result<Vec<(Family, String)>, IptablesError> {
    let mut applied = Vec::new();
    let families = if ipv6 {
        vec![Family::V4, Family::V6]
    } else {
        vec![Family::V4]
    };
    for family in families {
        let existing = save(family)?;
        if let Some(script) = rules::cleanup_script(&existing) {
            restore(family, &script)?;
            applied.push((family, script));
        }
    }
    Ok(applied)
}

/// `iptables-save -t nat` of one family.
pub(super) fn save(family: Family) -> Result<String, IptablesError> {
    let program = family.save_program();
    let output = Command::new(program)
        .args(["-t", "nat"])
        .stdin(Stdio::null())
        .output()
        .map_err(|source| IptablesError::Missing { program, source })?;
    check(program, output.status, &output.stderr)?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn restore(family: Family, script: &str) -> Result<(), IptablesError> {
    let program = family.restore_program();
    let mut child = Command::new(program)
        .arg("--noflush")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| IptablesError::Missing { program, source })?;
    if let Some(mut stdin) = child.stdin.take() {
        // A write error shows as the program's failure below.
        let _ = stdin.write_all(script.as_bytes());
    }
    let output = child
        .wait_with_output()
        .map_err(|source| IptablesError::Missing { program, source })?;
    check(program, output.status, &output.stderr)
}

fn check(
    program: &'static str,
    status: std::process::ExitStatus,
    stderr: &[u8],
) -> Result<(), IptablesError> {
    if status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(stderr).trim().to_string();
    let lower = stderr.to_ascii_lowercase();
    if lower.contains("permission denied") || lower.contains("operation not permitted") {
        return Err(IptablesError::NotPermitted { program, stderr });
    }
    Err(IptablesError::Failed {
        program,
        status: status.to_string(),
        stderr,
    })
}
