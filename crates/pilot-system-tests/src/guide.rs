//! Runs a guide of `docs/guide/` as a user pastes it, and checks what it
//! says it prints.
//!
//! A guide marks what the runner executes:
//!
//! - a fenced block whose info string is `sh guide` is run by bash, in
//!   order, all blocks of a guide in one shell (a variable set in one block
//!   is seen by the next), from the repository's root, with `set -euo
//!   pipefail`: a command that fails fails the guide;
//! - a fenced block whose info string is `text guide-output` lists lines
//!   the block run before it must print (stdout and stderr together), in
//!   this order, each a whole line (trailing blanks aside); other lines may
//!   come between them;
//! - an HTML comment that starts `<!-- guide-check` holds bash run at that
//!   point, unseen by readers: checks of what is random (counts within a
//!   tolerance) or not shown. `$GUIDE_OUTPUT` is the file holding the
//!   output of the last block run.
//!
//! Each guide runs in namespaces of its own (`unshare`): a network
//! namespace with only a loopback interface, so the fixed ports a guide
//! shows (8080, 15010, 9080, 2379, ...) are free whatever else the machine
//! runs; a mount namespace with its own empty `/tmp`, `/dev/shm` (Envoy's
//! hot-restart memory) and `/run/netns`; a PID namespace, so everything
//! the guide started dies with it. After its last block, the guide must
//! have stopped every process it started and left `/tmp` empty (its "stop
//! and clean up" block is checked). A guide that takes longer than its
//! timeout is killed and fails.
//!
//! Before the timed run, every `cargo run ARGS --` and `cargo build ARGS`
//! of the guide is built (`cargo build ARGS`), so the timeout covers
//! running only.

use std::ffi::OsStr;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pilot_test_support::{PILOT_AGENT, PILOT_DISCOVERY, PILOTCTL, ProcessGuard, binary, cargo, workspace};

/// One step of a guide, in the order the guide shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A `sh guide` block: commands run as written.
    Run {
        /// The line of the block's opening fence (1-based).
        line: usize,
        /// The commands.
        text: String,
    },
    /// A `text guide-output` block: lines the last run block printed.
    Output {
        /// The line of the block's opening fence (1-based).
        line: usize,
        /// The lines expected, in order.
        text: String,
    },
    /// A `<!-- guide-check ... -->` comment: hidden checks.
    Check {
        /// The line of the comment's start (1-based).
        line: usize,
        /// The commands.
        text: String,
    },
}

/// The steps of a guide's Markdown text.
pub fn steps(markdown: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut lines = markdown.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        let trimmed = line.trim();
        let line = index + 1;
        let (end, make): (&str, fn(usize, String) -> Step) = if let Some(info) = trimmed.strip_prefix("```") {
            match info.split_whitespace().collect::<Vec<_>>().as_slice() {
                ["sh", "guide"] => ("```", |line, text| Step::Run { line, text }),
                ["text", "guide-output"] => ("```", |line, text| Step::Output { line, text }),
                _ => {
                    // Any other fenced block: skip to its end.
                    for (_, inner) in lines.by_ref() {
                        if inner.trim() == "```" {
                            break;
                        }
                    }
                    continue;
                }
            }
        } else if trimmed == "<!-- guide-check" {
            ("-->", |line, text| Step::Check { line, text })
        } else {
            continue;
        };
        let mut text = String::new();
        for (_, inner) in lines.by_ref() {
            if inner.trim() == end {
                break;
            }
            text.push_str(inner);
            text.push('\n');
        }
        steps.push(make(line, text));
    }
    steps
}

/// The `cargo build` argument lists for each distinct `cargo run ARGS --`
/// (or `cargo run ARGS` ending the command) and `cargo build ARGS` of the
/// run blocks.
pub fn cargo_builds(steps: &[Step]) -> Vec<Vec<String>> {
    let mut builds: Vec<Vec<String>> = Vec::new();
    for step in steps {
        let Step::Run { text, .. } = step else { continue };
        for line in text.lines() {
            // The words before a comment.
            let words: Vec<&str> = line
                .split_whitespace()
                .take_while(|w| !w.starts_with('#'))
                .collect();
            for at in 0..words.len().saturating_sub(1) {
                if words[at] != "cargo" || !matches!(words[at + 1], "run" | "build") {
                    continue;
                }
                let args: Vec<String> = words[at + 2..]
                    .iter()
                    .take_while(|w| !matches!(**w, "--" | "&" | "|" | ";" | "&&" | "||" | ">" | ")"))
                    .filter(|w| **w != "-q")
                    .map(|w| w.to_string())
                    .collect();
                if !builds.contains(&args) {
                    builds.push(args);
                }
            }
        }
    }
    builds
}

/// Runs `docs/guide/NAME` (e.g. `server.md`) within `timeout`, panicking
/// with the failing block, its output and the guide's log when a command
/// fails, a quoted output is not printed, the clean-up leaves something
/// behind or the time runs out. Prints how long the run took.
///
/// The script and each block's output go to a new directory under `work`
/// (not under `/tmp`, which the guide gets empty).
pub fn run(name: &str, work: &Path, timeout: Duration) {
    run_file(&workspace().join("docs/guide").join(name), work, timeout);
}

/// [`run`] for a guide at any path (named in messages by its file name
/// under `docs/guide/`).
pub fn run_file(path: &Path, work: &Path, timeout: Duration) {
    let root = workspace();
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let name = name.as_str();
    let markdown = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let steps = steps(&markdown);
    assert!(
        steps.iter().any(|s| matches!(s, Step::Run { .. })),
        "docs/guide/{name} has no `sh guide` block to run"
    );

    // Build what the guide runs, untimed: the three binaries, then each
    // `cargo run` and `cargo build` of the guide (fresh by then, or an example to build).
    for binary_of in [PILOT_DISCOVERY, PILOTCTL, PILOT_AGENT] {
        binary(binary_of);
    }
    for args in cargo_builds(&steps) {
        let status = cargo()
            .arg("build")
            .args(&args)
            .current_dir(&root)
            .status()
            .expect("cargo runs");
        assert!(
            status.success(),
            "cargo build {} (for docs/guide/{name}) failed",
            args.join(" ")
        );
    }

    std::fs::create_dir_all(work).expect("the guides' work directory");
    let work = tempfile::Builder::new()
        .prefix(&format!("{}-", name.trim_end_matches(".md")))
        .tempdir_in(work)
        .expect("a work directory");
    let script = work.path().join("guide.sh");
    std::fs::write(&script, script_text(name, &root, &steps, work.path())).expect("the script");

    let started = Instant::now();
    // The guide's commands see a user's environment: no variable cargo
    // sets for this test process (see `cargo()`), no server or cluster
    // chosen by the environment.
    let mut command = isolated(&script, cargo().get_envs());
    command
        .current_dir(&root)
        .env_remove("PILOT_SERVER")
        .env_remove("KUBECONFIG")
        .env("CARGO_NET_OFFLINE", "true")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut guard = ProcessGuard::spawn(&mut command).expect("unshare runs (util-linux)");
    let child = guard.child().expect("the guide's shell");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("the guide's shell") {
            break Some(status);
        }
        if started.elapsed() > timeout {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Killing unshare kills the namespace's first process (--kill-child),
    // and with it every process of the guide.
    guard.kill();
    let elapsed = started.elapsed();
    let log = format!(
        "{}{}",
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default()
    );
    let failing = std::fs::read_to_string(work.path().join("current")).unwrap_or_default();
    let block_output =
        |n: &str| std::fs::read_to_string(work.path().join(format!("{n}.out"))).unwrap_or_default();
    let failure_context = || {
        format!(
            "--- the failing block (docs/guide/{name}:{}) printed:\n{}\n--- the guide's log:\n{log}",
            failing.trim(),
            block_output(failing.trim().split(':').next().unwrap_or(""))
        )
    };
    let Some(status) = status else {
        panic!(
            "docs/guide/{name} did not finish within {timeout:?} (killed)\n{}",
            failure_context()
        );
    };
    assert!(
        status.success(),
        "docs/guide/{name} failed ({status}) in block {}\n{}",
        failing.trim(),
        failure_context()
    );

    // The quoted outputs.
    let mut last_run = None;
    for step in &steps {
        match step {
            Step::Run { line, .. } => last_run = Some(*line),
            Step::Output { line, text } => {
                let run = last_run
                    .unwrap_or_else(|| panic!("docs/guide/{name}:{line}: output before any run block"));
                let printed = block_output(&run.to_string());
                if let Err(missing) = printed_in_order(&printed, text) {
                    panic!(
                        "docs/guide/{name}:{line}: the block at line {run} did not print, in order:\n{missing}\n--- it printed:\n{printed}"
                    );
                }
            }
            Step::Check { .. } => {}
        }
    }
    eprintln!("docs/guide/{name}: ran in {:.1} s", elapsed.as_secs_f64());
}

/// Checks that every line of `expected` is a line of `printed`, in order;
/// else returns the first line not found (and those after it).
pub fn printed_in_order(printed: &str, expected: &str) -> Result<(), String> {
    let mut printed = printed.lines().map(str::trim_end);
    let mut wanted = expected
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .peekable();
    while let Some(line) = wanted.peek() {
        if printed.by_ref().any(|p| p == *line) {
            wanted.next();
        } else {
            return Err(wanted.collect::<Vec<_>>().join("\n"));
        }
    }
    Ok(())
}

/// `unshare` running `script` in new network, mount and PID namespaces
/// (in a user namespace too when not root).
fn isolated<'a>(script: &Path, env: impl Iterator<Item = (&'a OsStr, Option<&'a OsStr>)>) -> Command {
    let mut command = Command::new("unshare");
    for (name, value) in env {
        if value.is_none() {
            command.env_remove(name);
        }
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        command.args(["--user", "--map-root-user"]);
    }
    command
        .args([
            "--net",
            "--mount",
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
        ])
        .arg("bash")
        .arg("-c")
        .arg(
            "set -e; ip link set lo up; mount -t tmpfs guide-tmp /tmp; mount -t tmpfs guide-shm /dev/shm; \
             mkdir -p /run/netns; mount -t tmpfs guide-netns /run/netns; exec bash \"$0\"",
        )
        .arg(script);
    command
}

/// The bash script of a guide: each run block's output into `N.out` (N its
/// line), the hidden checks in between, then the clean-up checks.
fn script_text(name: &str, root: &Path, steps: &[Step], work: &Path) -> String {
    let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
    let mut script = format!(
        "# docs/guide/{name}, as run by pilot-system-tests' guide runner\nset -euo pipefail\ncd {}\nGUIDE_WORK={}\nGUIDE_OUTPUT=/dev/null\n",
        quote(root),
        quote(work)
    );
    for step in steps {
        match step {
            Step::Run { line, text } => {
                script.push_str(&format!(
                    "echo '{line}: run' > \"$GUIDE_WORK/current\"\necho '>>> docs/guide/{name}:{line}' >&2\n{{\n{text}\n}} > \"$GUIDE_WORK/{line}.out\" 2>&1\nGUIDE_OUTPUT=\"$GUIDE_WORK/{line}.out\"\ncat \"$GUIDE_OUTPUT\" >&2\n"
                ));
            }
            Step::Check { line, text } => {
                script.push_str(&format!(
                    "echo '{line}: check' > \"$GUIDE_WORK/current\"\necho '>>> check docs/guide/{name}:{line}' >&2\n{text}\n"
                ));
            }
            Step::Output { .. } => {}
        }
    }
    script.push_str(CLEAN_UP_CHECK);
    script
}

/// After the last block: no process but this shell (PID 1 of the
/// namespace) within 5 s, and an empty `/tmp`.
const CLEAN_UP_CHECK: &str = r#"
echo 'clean-up: check' > "$GUIDE_WORK/current"
shopt -s nullglob dotglob
for attempt in $(seq 50); do
  left=()
  for proc in /proc/[0-9]*; do
    [ "${proc#/proc/}" = "$$" ] || left+=("$proc")
  done
  [ "${#left[@]}" -eq 0 ] && break
  sleep 0.1
done
if [ "${#left[@]}" -gt 0 ]; then
  echo "the guide's clean-up left processes running:" >&2
  for proc in "${left[@]}"; do
    echo "  ${proc#/proc/}: $(tr '\0' ' ' < "$proc/cmdline" 2>/dev/null)" >&2
  done
  exit 1
fi
leftover=(/tmp/*)
if [ "${#leftover[@]}" -gt 0 ]; then
  echo "the guide's clean-up left files in /tmp: ${leftover[*]}" >&2
  exit 1
fi
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_the_marked_blocks_in_order() {
        let markdown = "# A guide\n\n```sh\nnot run\n```\n\n```sh guide\necho hello\ncargo run -p pilot-cli -- get rr\n```\n\n```text guide-output\nhello\n```\n\n<!-- guide-check\ngrep -q hello \"$GUIDE_OUTPUT\"\n-->\n\n```sh guide\ncargo run --example validate -- x & # cargo run y\ncargo run -q -p pilot-cli -- get dp\ncargo build -p pilot-agent\n```\n";
        let steps = steps(markdown);
        assert_eq!(
            steps,
            vec![
                Step::Run {
                    line: 7,
                    text: "echo hello\ncargo run -p pilot-cli -- get rr\n".into()
                },
                Step::Output {
                    line: 12,
                    text: "hello\n".into()
                },
                Step::Check {
                    line: 16,
                    text: "grep -q hello \"$GUIDE_OUTPUT\"\n".into()
                },
                Step::Run {
                    line: 20,
                    text: "cargo run --example validate -- x & # cargo run y\ncargo run -q -p pilot-cli -- get dp\ncargo build -p pilot-agent\n".into()
                },
            ]
        );
        assert_eq!(
            cargo_builds(&steps),
            vec![
                vec!["-p".to_string(), "pilot-cli".to_string()],
                vec!["--example".to_string(), "validate".to_string()],
                vec!["-p".to_string(), "pilot-agent".to_string()],
            ]
        );
    }

    #[test]
    fn outputs_are_matched_as_whole_lines_in_order() {
        let printed = "Compiling\nb one\nnoise\nc two  \n";
        assert_eq!(printed_in_order(printed, "b one\nc two\n"), Ok(()));
        assert_eq!(printed_in_order(printed, "c two\nb one\n"), Err("b one".into()));
        assert_eq!(printed_in_order(printed, "one\n"), Err("one".into()));
    }
}
