//! A lab of network namespaces for the tests that capture real traffic:
//! namespaces this test process creates (named after its pid), veth links
//! between them or to a bridge, processes spawned inside them, curl and
//! Envoy's admin stats read from inside. Dropped, every process it started
//! is killed and the namespaces go.
//!
//! Needs root; [`require_root`] fails with the reason otherwise, so a test
//! never passes vacuously.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use pilot_test_support::workspace;

/// Fails the test with `why` (what needs root, how to skip it) unless the
/// process runs as root.
pub(crate) fn require_root(why: &str) {
    let uid = Command::new("id").arg("-u").output().expect("id -u runs");
    assert_eq!(String::from_utf8_lossy(&uid.stdout).trim(), "0", "{why}");
}

/// Namespaces, links and processes; see the module doc.
pub(crate) struct Lab {
    namespaces: Vec<(String, String)>,
    links: u32,
    children: Vec<(String, Child)>,
}

impl Lab {
    /// Creates one namespace per name in `names`, as
    /// `pilot<tag><pid><name>`.
    pub(crate) fn new(tag: &str, names: &[&str]) -> Lab {
        let id = std::process::id();
        let mut lab = Lab {
            namespaces: Vec::new(),
            links: 0,
            children: Vec::new(),
        };
        for name in names {
            let ns = format!("pilot{tag}{id}{name}");
            must(Command::new("ip").args(["netns", "add", &ns]));
            lab.namespaces.push((name.to_string(), ns));
        }
        for (_, ns) in &lab.namespaces {
            must(lab.exec(ns).args(["ip", "link", "set", "lo", "up"]));
        }
        lab
    }

    /// The namespace made for `name`.
    pub(crate) fn ns(&self, name: &str) -> String {
        self.namespaces
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, ns)| ns.clone())
            .unwrap_or_else(|| panic!("no namespace {name} in this lab"))
    }

    /// A veth pair between namespaces `a` and `b` (both up, no address):
    /// the device names in `a` and in `b`.
    pub(crate) fn veth(&mut self, a: &str, b: &str) -> (String, String) {
        self.links += 1;
        let id = std::process::id() % 100_000;
        let (dev_a, dev_b) = (format!("v{id}x{}", self.links), format!("v{id}y{}", self.links));
        let (ns_a, ns_b) = (self.ns(a), self.ns(b));
        must(Command::new("ip").args([
            "link", "add", &dev_a, "netns", &ns_a, "type", "veth", "peer", "name", &dev_b, "netns", &ns_b,
        ]));
        must(self.exec(&ns_a).args(["ip", "link", "set", &dev_a, "up"]));
        must(self.exec(&ns_b).args(["ip", "link", "set", &dev_b, "up"]));
        (dev_a, dev_b)
    }

    /// One layer-2 segment: a bridge in namespace `hub` and, for each
    /// `(namespace, address/prefix)`, a veth from it to the bridge carrying
    /// that address. Returns each namespace's device.
    pub(crate) fn bridge(&mut self, hub: &str, members: &[(&str, &str)]) -> Vec<String> {
        let hub_ns = self.ns(hub);
        must(
            self.exec(&hub_ns)
                .args(["ip", "link", "add", "br0", "type", "bridge"]),
        );
        must(self.exec(&hub_ns).args(["ip", "link", "set", "br0", "up"]));
        let mut devices = Vec::new();
        for (member, address) in members {
            let (dev, port) = self.veth(member, hub);
            must(
                self.exec(&hub_ns)
                    .args(["ip", "link", "set", &port, "master", "br0"]),
            );
            must(
                self.exec(&self.ns(member))
                    .args(["ip", "addr", "add", address, "dev", &dev]),
            );
            devices.push(dev);
        }
        devices
    }

    /// `sh -c script` in namespace `ns`, which must succeed.
    pub(crate) fn sh(&self, ns: &str, script: &str) {
        must(self.exec(ns).args(["sh", "-c", script]));
    }

    /// A command that runs in namespace `ns`.
    pub(crate) fn exec(&self, ns: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", ns]);
        command
    }

    /// A command that runs as in a pod of namespace `ns`: its network
    /// namespace and an IPC namespace of its own, as Kubernetes gives
    /// every pod. Envoy's hot-restart shared memory
    /// (`/dev/shm/envoy_shared_memory_<base id>`) lives in the IPC
    /// namespace, so sidecars started this way never meet another test's
    /// Envoy with the same `--base-id`, and keep the default as a pod does.
    pub(crate) fn exec_pod(&self, ns: &str) -> Command {
        let mut command = self.exec(ns);
        command.args(["unshare", "--ipc", "--"]);
        command
    }

    /// Starts `command` (stdout discarded, stderr inherited), stopped when
    /// the lab drops.
    pub(crate) fn spawn(&mut self, name: &str, command: &mut Command) {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{name} does not start: {e}"));
        self.children.push((name.to_string(), child));
    }

    /// Starts `python3 -c script args...` in `ns` and waits for its first
    /// line, which must be `ready`.
    pub(crate) fn spawn_python(&mut self, ns: &str, script: &str, args: &[&str]) {
        let mut child = self
            .exec(ns)
            .args(["python3", "-c", script])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 starts");
        let mut ready = String::new();
        use std::io::BufRead as _;
        std::io::BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut ready)
            .expect("the server's first line");
        assert_eq!(ready.trim(), "ready", "python server {args:?} did not start");
        self.children.push((format!("python {args:?}"), child));
    }

    /// `curl -sS --max-time 10 ARGS... -w '\n%{http_code}'` in `ns`, as
    /// `uid` (root when `None`): the status (0: no HTTP answer) and the
    /// body followed by curl's errors.
    pub(crate) fn curl(&self, ns: &str, uid: Option<&str>, args: &[&str]) -> (u16, String) {
        let mut command = self.exec(ns);
        if let Some(uid) = uid {
            command.args(["setpriv", "--reuid", uid, "--regid", uid, "--clear-groups"]);
        }
        command.args(["curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}"]);
        command.args(args);
        let out = run(&mut command);
        let stdout = text(&out.stdout);
        let (body, status) = stdout.rsplit_once('\n').unwrap_or(("", &stdout));
        (
            status.trim().parse().unwrap_or(0),
            format!("{body}{}", text(&out.stderr)),
        )
    }

    /// The counter `name` of the Envoy whose admin listens on
    /// 127.0.0.1:15000 in `ns` (0 when Envoy has not made it yet).
    pub(crate) fn envoy_stat(&self, ns: &str, name: &str) -> u64 {
        let url = format!("http://127.0.0.1:15000/stats?filter=^{name}$");
        let (status, body) = self.curl(ns, None, &[&url]);
        assert_eq!(status, 200, "{body}");
        body.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for (_, ns) in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Runs `command` to completion.
pub(crate) fn run(command: &mut Command) -> Output {
    command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"))
}

/// Runs `command`, which must succeed.
pub(crate) fn must(command: &mut Command) {
    let out = run(command);
    assert!(out.status.success(), "{command:?}: {}", text(&out.stderr));
}

/// Bytes as text, lossily.
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Sets the permission bits of `path`.
pub(crate) fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// The Envoy binary itself: `.tools/envoy/bin/envoy` is a Python wrapper
/// that uid 1337 cannot run (its interpreter lives under /root).
pub(crate) fn raw_envoy_binary() -> PathBuf {
    let lib = workspace().join(".tools/envoy/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|entries| {
        entries
            .filter_map(Result::ok)
            .map(|e| e.path().join("site-packages/envoy/_bin/envoy"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| panic!("no Envoy under {}: run scripts/install-deps", lib.display()))
}
