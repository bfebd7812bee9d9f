//! The SDS socket, private whatever the process umask: it hands out the
//! workload's private key to whoever connects, so its directory is the
//! agent's (created, or set, 0700) and the socket 0600; with a group
//! (`--sds-socket-group`, for an Envoy running as another uid of that
//! group) 0770 and 0660, both owned by the group. Modes are set
//! explicitly after creation, so the umask never widens them, and the
//! directory is private before the socket exists in it.
//!
//! The directory must be the socket's own: one owned by another uid, or
//! shared with the sticky bit (`/tmp`), is refused rather than changed.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use tokio::net::UnixListener;

use crate::AgentError;

/// Binds `path` private to the agent's uid (and `group`, a name of
/// `/etc/group` or a numeric gid), replacing a stale socket left by an
/// earlier agent.
pub(super) fn bind(path: &Path, group: Option<&str>) -> Result<UnixListener, AgentError> {
    let gid = group.map(group_id).transpose()?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let fail = |at: &Path, message: String| AgentError::SdsSocket {
        path: at.to_path_buf(),
        message,
    };
    if !dir.exists() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| fail(dir, format!("creating its directory: {e}")))?;
    }
    let meta = std::fs::metadata(dir).map_err(|e| fail(dir, e.to_string()))?;
    if !meta.is_dir() {
        return Err(fail(dir, "the socket's directory is not a directory".into()));
    }
    if meta.mode() & 0o1000 != 0 {
        return Err(fail(
            dir,
            "the socket's directory is shared (sticky bit): give the socket a directory of its own".into(),
        ));
    }
    let uid = rustix::process::geteuid().as_raw();
    if meta.uid() != uid {
        return Err(fail(
            dir,
            format!(
                "the socket's directory belongs to uid {}, not the agent's uid {uid}: give the socket a directory of its own",
                meta.uid()
            ),
        ));
    }
    let (dir_mode, socket_mode) = if gid.is_some() {
        (0o770, 0o660)
    } else {
        (0o700, 0o600)
    };
    if let Some(gid) = gid {
        std::os::unix::fs::chown(dir, None, Some(gid))
            .map_err(|e| fail(dir, format!("giving the directory to gid {gid}: {e}")))?;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(dir_mode))
        .map_err(|e| fail(dir, format!("setting mode {dir_mode:o}: {e}")))?;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(path, format!("removing the stale socket: {e}"))),
    }
    let listener = UnixListener::bind(path).map_err(|e| fail(path, e.to_string()))?;
    if let Some(gid) = gid {
        std::os::unix::fs::chown(path, None, Some(gid))
            .map_err(|e| fail(path, format!("giving the socket to gid {gid}: {e}")))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(socket_mode))
        .map_err(|e| fail(path, format!("setting mode {socket_mode:o}: {e}")))?;
    Ok(listener)
}

/// The gid of `group`: a number, or a name of `/etc/group`.
pub(crate) fn group_id(group: &str) -> Result<u32, AgentError> {
    if let Ok(gid) = group.parse::<u32>() {
        return Ok(gid);
    }
    let file = Path::new("/etc/group");
    let text = std::fs::read_to_string(file).map_err(|e| AgentError::file(file, e))?;
    parse_group(&text, group).ok_or_else(|| AgentError::Identity {
        field: "--sds-socket-group",
        message: format!("no group {group:?} in /etc/group (give a group name or a numeric gid)"),
    })
}

/// The gid of `name` in `/etc/group` text (`name:password:gid:members`).
fn parse_group(text: &str, name: &str) -> Option<u32> {
    text.lines().find_map(|line| {
        let mut fields = line.split(':');
        (fields.next() == Some(name))
            .then(|| fields.nth(1).and_then(|gid| gid.trim().parse().ok()))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_by_name_or_number() {
        let text = "root:x:0:\nenvoy:x:1337:envoy\nbroken\n";
        assert_eq!(parse_group(text, "envoy"), Some(1337));
        assert_eq!(parse_group(text, "root"), Some(0));
        assert_eq!(parse_group(text, "missing"), None);
        assert_eq!(group_id("4242").unwrap(), 4242);
        let error = group_id("no-such-group-here").unwrap_err().to_string();
        assert!(
            error.contains("--sds-socket-group") && error.contains("no-such-group-here"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn the_socket_and_its_directory_are_private_and_a_shared_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("sds/deeper/socket");
        let _listener = bind(&socket, None).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(socket.parent().unwrap()), 0o700);
        assert_eq!(mode(&socket), 0o600);
        // Bound again over the stale socket, and an existing directory
        // opened up is made private again.
        std::fs::set_permissions(socket.parent().unwrap(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let _again = bind(&socket, None).unwrap();
        assert_eq!(mode(socket.parent().unwrap()), 0o700);
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let error = bind(&shared.join("socket"), None).unwrap_err().to_string();
        assert!(error.contains("sticky") && error.contains("shared"), "{error}");
        assert_eq!(mode(&shared), 0o1777, "a shared directory is left as it was");
    }
}
