//! Child processes that never outlive their test.

use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A child process killed (SIGKILL) and reaped when dropped, with a
/// watchdog that kills it too if the test process dies first (a test killed
/// by a timeout leaves nothing behind).
pub struct ProcessGuard {
    child: Option<Child>,
    watchdog: Option<Child>,
}

impl ProcessGuard {
    /// Guards `child`; the watchdog sends it `signal` (`KILL`, `TERM`) when
    /// this process is gone, then SIGKILL 15 s later.
    pub fn new(child: Child, signal: &str) -> Self {
        let watchdog = watchdog(child.id(), signal);
        ProcessGuard {
            child: Some(child),
            watchdog,
        }
    }

    /// Starts `command` and guards it (SIGKILL from the watchdog); when the
    /// test process dies first, the watchdog also removes `dir` (the
    /// child's data) once the child is gone. A process-wide server in a
    /// `static` is never dropped, so its temporary directory would stay
    /// behind after every run.
    pub fn spawn_removing(command: &mut Command, dir: &Path) -> std::io::Result<Self> {
        let child = command.spawn()?;
        let watchdog = watchdog_then(child.id(), "KILL", Some(dir));
        Ok(ProcessGuard {
            child: Some(child),
            watchdog,
        })
    }

    /// Starts `command` and guards it (SIGKILL from the watchdog).
    pub fn spawn(command: &mut Command) -> std::io::Result<Self> {
        Ok(Self::new(command.spawn()?, "KILL"))
    }

    /// The process id, while it has not been killed.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The child, while it has not been killed.
    pub fn child(&mut self) -> Option<&mut Child> {
        self.child.as_mut()
    }

    /// Takes the child out of the guard (the watchdog stays until drop).
    pub fn take(&mut self) -> Option<Child> {
        self.child.take()
    }

    /// Kills and reaps the process (and stops its watchdog).
    pub fn kill(&mut self) {
        for mut process in [self.child.take(), self.watchdog.take()].into_iter().flatten() {
            let _ = process.kill();
            let _ = process.wait();
        }
    }
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts a shell that sends `pid` the `signal` (then SIGKILL if it still
/// runs 15 s later) once this test process is gone.
pub fn watchdog(pid: u32, signal: &str) -> Option<Child> {
    watchdog_then(pid, signal, None)
}

/// [`watchdog`], then (with `remove`) waits for `pid` to be gone and
/// removes that directory.
fn watchdog_then(pid: u32, signal: &str, remove: Option<&Path>) -> Option<Child> {
    let remove = remove.map_or(String::new(), |dir| {
        // Single-quoted for the shell ('\'' closes, escapes, reopens).
        let quoted = dir.display().to_string().replace('\'', "'\\''");
        format!("; rm -rf '{quoted}'")
    });
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while kill -0 {parent} 2>/dev/null; do sleep 1; done; kill -{signal} {pid} 2>/dev/null; \
             i=0; while kill -0 {pid} 2>/dev/null && [ $i -lt 15 ]; do sleep 1; i=$((i+1)); done; \
             kill -KILL {pid} 2>/dev/null{remove}",
            parent = std::process::id()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
}

/// Sends `signal` (`STOP`, `CONT`, `TERM`, ...) to `pid` with `kill`.
pub fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} {pid} failed");
}
