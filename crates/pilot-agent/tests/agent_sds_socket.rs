//! The SDS socket hands out the workload's private key to whoever
//! connects: under umask 000 its directory is still 0700 and the socket
//! 0600, so another uid cannot connect; with `--sds-socket-group` a member
//! of the group can (0770 and 0660) and another uid still cannot. The
//! probe is `curl --unix-socket` run as uid 65534 through `setpriv`:
//! refused, it fails to connect with "Permission denied" (exit 7).
//!
//! Needs root (to run the probe as another uid); fails with that message
//! when not root, never passes vacuously.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use pilot_agent::DiscoveryAuth;
use pilot_agent::sds::{Sds, SdsOptions};
use pilot_ca::SpiffeId;

const NOBODY: &str = "65534";

/// Whether uid 65534 with gid `gid` (and no other group) can connect to
/// `socket`; the probe's output when it cannot for another reason than
/// permission.
fn can_connect(socket: &Path, gid: &str) -> bool {
    let out = Command::new("setpriv")
        .args(["--reuid", NOBODY, "--regid", gid, "--clear-groups"])
        .args(["curl", "-sSv", "--max-time", "10", "--unix-socket"])
        .arg(socket)
        .arg("http://sds/")
        .output()
        .expect("setpriv and curl");
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        // Could not connect: only a permission refusal is an answer.
        Some(7) => {
            assert!(
                stderr.contains("Permission denied"),
                "the probe failed otherwise: {stderr}"
            );
            false
        }
        _ => true,
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().mode() & 0o7777
}

#[test]
fn under_umask_000_another_uid_cannot_open_the_sds_socket_and_a_group_member_can() {
    assert!(
        rustix::process::geteuid().is_root(),
        "the SDS socket test needs root (the probe runs as uid 65534; CI runs as root; elsewhere: \
         cargo nextest run -p pilot-agent -E 'not binary(agent_sds_socket)')"
    );
    rustix::process::umask(rustix::fs::Mode::empty());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Only the socket's own directory and mode stand in the way.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let options = |socket: &str| {
        SdsOptions::new(
            dir.path().join(socket),
            // Nothing answers there: the socket is bound before any
            // certificate is asked for.
            "127.0.0.1:9".into(),
            DiscoveryAuth::default(),
            SpiffeId::parse("spiffe://cluster.local/ns/default/sa/reviews").unwrap(),
            dir.path().join("mesh-roots.pem"),
        )
    };

    let private = dir.path().join("private/socket");
    let sds = runtime.block_on(Sds::start(options("private/socket"))).unwrap();
    assert_eq!(mode(private.parent().unwrap()), 0o700);
    assert_eq!(mode(&private), 0o600);
    assert!(
        !can_connect(&private, NOBODY),
        "another uid opened the SDS socket"
    );

    let shared = dir.path().join("shared/socket");
    let grouped = runtime
        .block_on(Sds::start(SdsOptions {
            socket_group: Some(NOBODY.into()),
            ..options("shared/socket")
        }))
        .unwrap();
    assert_eq!(mode(shared.parent().unwrap()), 0o770);
    assert_eq!(mode(&shared), 0o660);
    assert_eq!(std::fs::metadata(&shared).unwrap().gid(), 65534);
    assert!(
        can_connect(&shared, NOBODY),
        "a member of --sds-socket-group could not connect"
    );
    assert!(
        !can_connect(&shared, "65533"),
        "a uid outside the group opened the SDS socket"
    );
    drop((sds, grouped));
}
