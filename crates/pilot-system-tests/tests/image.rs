//! pilot's container image (deploy/image/Containerfile), built by
//! `scripts/build-image` with the real buildah from the binaries this test
//! run already has (target/debug: no release build needed), in a storage
//! root under a temporary directory (so runs never collide and nothing is
//! left behind): two builds give the same image, the image holds only the
//! binaries, their libraries and the user files, and pilot-discovery runs
//! from it (`buildah run --isolation chroot`) as uid 65532 and answers
//! `/readyz`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use pilot_test_support::{
    PILOT_AGENT, PILOT_DISCOVERY, PILOTCTL, ProcessGuard, binary, eventually, free_port, http, signal,
    workspace,
};

/// The builds' time (the default, the last commit's time, would change
/// between two builds that straddle a commit): 2023-11-14T22:13:20Z.
const SOURCE_DATE_EPOCH: &str = "1700000000";

#[test]
fn two_builds_of_the_same_binaries_give_the_same_image() {
    let storage = Storage::new();
    let binaries = binaries();
    let first = storage.build(&binaries, "localhost/pilot:first");
    let second = storage.build(&binaries, "localhost/pilot:second");
    assert_eq!(first, second, "the image ids of two builds of the same binaries");
    let digests: Vec<String> = ["localhost/pilot:first", "localhost/pilot:second"]
        .iter()
        .map(|tag| {
            storage.image(tag)["FromImageDigest"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert!(digests[0].starts_with("sha256:"), "{digests:?}");
    assert_eq!(digests[0], digests[1], "the manifest digests of two builds");
    // The image's time is SOURCE_DATE_EPOCH, not the time of the build.
    let image = storage.image("localhost/pilot:first");
    assert_eq!(
        image["OCIv1"]["created"], "2023-11-14T22:13:20Z",
        "{}",
        image["OCIv1"]
    );
}

#[test]
fn the_image_runs_pilot_discovery_as_a_non_root_user_without_a_shell() {
    let storage = Storage::new();
    storage.build(&binaries(), "localhost/pilot:test");

    // What the image says it runs, and as whom.
    let image = storage.image("localhost/pilot:test");
    let config = &image["OCIv1"]["config"];
    assert_eq!(config["User"], "65532:65532", "{config}");
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/local/bin/pilot-discovery"]),
        "{config}"
    );

    let container = storage.ok(&["from", "--pull-never", "--quiet", "localhost/pilot:test"]);
    let container = container.trim().to_string();

    // Its files: the three binaries, the libraries and loader ldd names,
    // the user files and /tmp; nothing else (no shell, no package manager).
    let mount = PathBuf::from(storage.ok(&["mount", &container]).trim());
    let files = files_under(&mount);
    for expected in [
        "/usr/local/bin/pilot-discovery",
        "/usr/local/bin/pilot-agent",
        "/usr/local/bin/pilotctl",
        "/etc/passwd",
        "/etc/group",
    ] {
        assert!(
            files.contains(expected),
            "{expected} missing from the image: {files:?}"
        );
    }
    let unexpected: Vec<&String> = files
        .iter()
        .filter(|f| !f.starts_with("/usr/local/bin/") && !f.starts_with("/etc/") && !is_library(f))
        .collect();
    assert!(
        unexpected.is_empty(),
        "the image holds more than pilot needs: {unexpected:?}"
    );
    assert!(
        !files.iter().any(|f| f.ends_with("/sh")),
        "a shell in the image: {files:?}"
    );
    let passwd = std::fs::read_to_string(mount.join("etc/passwd")).expect("/etc/passwd in the image");
    assert!(passwd.contains("pilot:x:65532:65532:"), "{passwd}");
    storage.ok(&["umount", &container]);

    // pilot-discovery from the image: the memory store, REST on a loopback
    // port (chroot isolation shares the host's network).
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut server = storage.spawn(&[
        "run",
        "--isolation",
        "chroot",
        &container,
        "--",
        "/usr/local/bin/pilot-discovery",
        "--listen",
        &listen,
        "--xds-listen",
        "127.0.0.1:0",
    ]);
    eventually("pilot-discovery from the image answers /readyz", || {
        http::get(port, "/readyz") == (200, "ready".to_string())
    });
    // It runs as the image's user, not as root.
    let pid = pid_listening_as(port);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the server's /proc status");
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_default()
        .to_string();
    assert_eq!(uid, "65532", "pilot-discovery's uid in the container");
    server.stop();

    // No shell to run.
    let sh = storage.run(&[
        "run",
        "--isolation",
        "chroot",
        &container,
        "--",
        "/bin/sh",
        "-c",
        "true",
    ]);
    assert!(!sh.status.success(), "/bin/sh ran in the image");
    storage.ok(&["rm", &container]);
}

#[test]
fn build_image_names_what_is_missing() {
    let empty = tempfile::tempdir().expect("a temporary directory");
    let output = Command::new(workspace().join("scripts/build-image"))
        .arg("--binaries")
        .arg(empty.path())
        .output()
        .expect("scripts/build-image runs");
    assert!(
        !output.status.success(),
        "built from an empty directory: {}",
        text(&output)
    );
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains(&format!("{}/pilot-agent is missing", empty.path().display())),
        "{said}"
    );

    let unknown = Command::new(workspace().join("scripts/build-image"))
        .arg("--binary")
        .output()
        .expect("scripts/build-image runs");
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown));
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("unknown argument --binary"),
        "{}",
        text(&unknown)
    );
}

/// A buildah storage root (and run root) in a temporary directory; its
/// containers and images are removed when dropped.
struct Storage {
    dir: tempfile::TempDir,
}

impl Storage {
    fn new() -> Self {
        assert!(
            Command::new("buildah")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success()),
            "buildah does not run: scripts/install-deps installs it (Debian package buildah)"
        );
        Storage {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn runroot(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    /// `scripts/build-image` into this storage; the image id.
    fn build(&self, binaries: &Path, tag: &str) -> String {
        let output = Command::new(workspace().join("scripts/build-image"))
            .arg("--binaries")
            .arg(binaries)
            .args(["--tag", tag])
            .arg("--root")
            .arg(self.root())
            .arg("--runroot")
            .arg(self.runroot())
            .env("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH)
            .output()
            .expect("scripts/build-image runs");
        assert!(
            output.status.success(),
            "scripts/build-image failed: {}",
            text(&output)
        );
        let id = String::from_utf8_lossy(&output.stdout).trim().to_string();
        assert_eq!(id.len(), 64, "not an image id: {}", text(&output));
        id
    }

    /// `buildah inspect` of an image, as JSON.
    fn image(&self, name: &str) -> serde_json::Value {
        let json = self.ok(&["inspect", "--type", "image", name]);
        serde_json::from_str(&json).expect("buildah inspect prints JSON")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("buildah");
        command
            .arg("--root")
            .arg(self.root())
            .arg("--runroot")
            .arg(self.runroot())
            .args(["--storage-driver", "vfs"])
            .args(args);
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("buildah runs")
    }

    /// `buildah ARGS`, which must succeed; its standard output.
    fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "buildah {args:?} failed: {}",
            text(&output)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn spawn(&self, args: &[&str]) -> Running {
        let child = self
            .command(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("buildah run starts");
        // buildah passes SIGTERM on to the container's process; a SIGKILL
        // would leave that process running, so the watchdog sends SIGTERM.
        Running {
            guard: ProcessGuard::new(child, "TERM"),
        }
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        for args in [&["rm", "--all"][..], &["rmi", "--all", "--force"][..]] {
            let _ = self.run(args);
        }
    }
}

/// `buildah run`, stopped with SIGTERM (which buildah passes on) and reaped.
struct Running {
    guard: ProcessGuard,
}

impl Running {
    fn stop(&mut self) {
        if let Some(mut child) = self.guard.take() {
            signal(child.id(), "TERM");
            let _ = child.wait();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The directory holding this test run's pilot-discovery, pilot-agent and
/// pilotctl (built first if needed).
fn binaries() -> PathBuf {
    let paths: Vec<PathBuf> = [PILOT_DISCOVERY, PILOT_AGENT, PILOTCTL]
        .into_iter()
        .map(binary)
        .collect();
    let dir = paths[0].parent().expect("the binaries' folder").to_path_buf();
    for path in &paths {
        assert_eq!(
            path.parent(),
            Some(dir.as_path()),
            "the binaries are in one folder"
        );
    }
    dir
}

/// Every file and symbolic link under `root`, as absolute paths in the image.
fn files_under(root: &Path) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)
            .expect("a directory of the image")
            .flatten()
        {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(path);
            } else {
                let relative = path.strip_prefix(root).expect("under the root");
                files.insert(format!("/{}", relative.display()));
            }
        }
    }
    files
}

/// A shared library or the dynamic loader (`/lib/x86_64-linux-gnu/libc.so.6`,
/// `/lib64/ld-linux-x86-64.so.2`).
fn is_library(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or_default();
    (path.starts_with("/lib") || path.starts_with("/usr/lib")) && name.contains(".so")
}

/// The process listening on 127.0.0.1:`port` (from /proc/net/tcp's inode and
/// the processes' open sockets).
fn pid_listening_as(port: u16) -> u32 {
    let tcp = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let local = format!("0100007F:{port:04X}");
    let inode = tcp
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(1) == Some(&local.as_str()) && f.get(3) == Some(&"0A"))
        .and_then(|f| f.get(9).map(|s| s.to_string()))
        .expect("a listening socket on the port");
    let socket = format!("socket:[{inode}]");
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == socket))
        {
            return pid;
        }
    }
    panic!("no process holds the socket listening on port {port}");
}

fn text(output: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
