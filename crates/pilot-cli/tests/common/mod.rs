//! pilotctl's own tests' setup: this package's `pilotctl` (cargo builds it
//! for them) run with a clean environment, and a real `pilot-discovery`
//! (found, or built, by pilot-test-support) on free loopback ports. Tests
//! of several binaries together are in pilot-system-tests.

#![allow(
    dead_code,
    unused_imports,
    reason = "each test binary uses its own part of the shared support module"
)]

use std::path::Path;

pub(crate) use pilot_test_support::{Discovery, Run, free_port, workspace};

/// `pilot-discovery`: cargo does not build another package's binary for
/// these tests, so pilot-test-support finds it beside them or builds it.
pub(crate) fn discovery_binary() -> std::path::PathBuf {
    pilot_test_support::binary(pilot_test_support::PILOT_DISCOVERY)
}

/// Runs this package's `pilotctl` with `args` against `server` (if any),
/// with no config file and no PILOT_SERVER unless `env` sets them.
pub(crate) fn pilotctl(
    server: Option<&str>,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&str>,
) -> Run {
    pilot_test_support::pilotctl_at(
        Path::new(env!("CARGO_BIN_EXE_pilotctl")),
        server,
        args,
        env,
        stdin,
    )
}
