//! `pilot-discovery --data-dir`, killed with SIGKILL and its journal
//! damaged the ways a crash, a disk or a hand can damage it: every
//! acknowledged write survives a torn tail and no revision is handed out
//! twice; a flipped byte stops the start with the file and offset named
//! and changes nothing; an object that no longer validates is quarantined
//! and the server starts.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{http, rule, rules};
use serde_json::Value;

/// A pilot-discovery process on a data directory.
struct Discovery {
    child: Child,
    rest: SocketAddr,
}

/// How a start ended: serving, or exited (code and what it logged).
enum Started {
    Serving(Discovery),
    Exited(Option<i32>, String),
}

fn start(dir: &Path, log: &Path) -> Started {
    let ready = dir.with_extension("ready.json");
    let _ = std::fs::remove_file(&ready);
    let log_file = std::fs::File::create(log).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pilot-discovery"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--xds-listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(dir)
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .unwrap();
    for _ in 0..600 {
        if let Some(status) = child.try_wait().unwrap() {
            return Started::Exited(status.code(), std::fs::read_to_string(log).unwrap());
        }
        if let Ok(text) = std::fs::read_to_string(&ready) {
            let bound: Value = serde_json::from_str(&text).unwrap();
            let rest: SocketAddr = bound["rest"]
                .as_str()
                .unwrap()
                .trim_start_matches("http://")
                .parse()
                .unwrap();
            if http(rest, "GET", "/readyz", &[], None).0 == 200 {
                return Started::Serving(Discovery { child, rest });
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!(
        "pilot-discovery never became ready: {}",
        std::fs::read_to_string(log).unwrap()
    );
}

fn serving(dir: &Path, log: &Path) -> Discovery {
    match start(dir, log) {
        Started::Serving(discovery) => discovery,
        Started::Exited(code, log) => panic!("pilot-discovery exited ({code:?}): {log}"),
    }
}

impl Discovery {
    /// Creates a rule; its resourceVersion, once acknowledged (201).
    fn create(&self, body: &Value) -> u64 {
        let bytes = serde_json::to_vec(body).unwrap();
        let (code, answer) = http(
            self.rest,
            "POST",
            &rules("default"),
            &[("content-type", "application/json")],
            Some(&bytes),
        );
        assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
        let object: Value = serde_json::from_slice(&answer).unwrap();
        object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// The rules' names and resource versions.
    fn names(&self) -> Vec<(String, u64)> {
        let (code, answer) = http(self.rest, "GET", &rules("default"), &[], None);
        assert_eq!(code, 200);
        let list: Value = serde_json::from_slice(&answer).unwrap();
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| {
                (
                    item["metadata"]["name"].as_str().unwrap().to_string(),
                    item["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .parse()
                        .unwrap(),
                )
            })
            .collect()
    }

    /// SIGKILL: no shutdown code runs.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Discovery {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The journal segment being appended to (the newest).
fn active_segment(dir: &Path) -> PathBuf {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("journal-") && name.ends_with(".jsonl")
        })
        .collect();
    segments.sort();
    segments.pop().expect("a journal segment")
}

/// A complete, checksummed journal record storing `object` at `revision`,
/// as the store writes them (the revision first).
fn record(revision: u64, object: &Value) -> Vec<u8> {
    let json = format!(r#"{{"revision":{revision},"put":{object}}}"#);
    format!("{:08x} {json}\n", crc32(json.as_bytes())).into_bytes()
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn append(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

#[test]
fn a_write_torn_by_a_crash_loses_no_acknowledged_write_and_no_revision_is_reused() {
    let temporary = tempfile::tempdir().unwrap();
    let dir = temporary.path().join("data");
    let log = temporary.path().join("log");
    let server = serving(&dir, &log);
    let mut acknowledged = Vec::new();
    for name in ["a", "b", "c"] {
        acknowledged.push((name.to_string(), server.create(&rule(name, "v1"))));
    }
    server.kill();
    // The write in flight at the crash: half its record reached the disk,
    // it was never acknowledged.
    let last = acknowledged.last().unwrap().1;
    let mut in_flight = rule("d", "v1");
    in_flight["metadata"]["resourceVersion"] = (last + 1).to_string().into();
    let whole = record(last + 1, &in_flight);
    append(&active_segment(&dir), &whole[..whole.len() / 2]);

    let server = serving(&dir, &log);
    assert_eq!(server.names(), acknowledged);
    let next = server.create(&rule("e", "v1"));
    assert!(
        next > last + 1,
        "revision {} was handed out before the crash; got {next}",
        last + 1
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("partial record"), "{logged}");
    // The segment as found is kept for inspection.
    let kept: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.contains(".torn-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    server.kill();

    // Cut the last acknowledged record (not a crash: something cut the
    // file). That write is gone, the warning says so, and its revision is
    // still never reused.
    let segment = active_segment(&dir);
    let bytes = std::fs::read(&segment).unwrap();
    assert!(!bytes.is_empty(), "e's record is in the active segment");
    std::fs::write(&segment, &bytes[..bytes.len() - 10]).unwrap();
    let server = serving(&dir, &log);
    let names: Vec<String> = server.names().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let after = server.create(&rule("f", "v1"));
    assert!(after > next, "e had revision {next}; f got {after}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("an acknowledged write that is lost"), "{logged}");
    server.kill();
}

#[test]
fn a_flipped_byte_stops_the_start_names_file_and_offset_and_keeps_the_journal() {
    let temporary = tempfile::tempdir().unwrap();
    let dir = temporary.path().join("data");
    let log = temporary.path().join("log");
    let server = serving(&dir, &log);
    for name in ["a", "b", "c"] {
        server.create(&rule(name, "v1"));
    }
    server.kill();
    let segment = active_segment(&dir);
    let mut bytes = std::fs::read(&segment).unwrap();
    // In the middle record: "b" becomes "x".
    let second = bytes.iter().position(|b| *b == b'\n').unwrap() + 1;
    let at = second
        + bytes[second..]
            .windows(10)
            .position(|w| w == br#""name":"b""#)
            .unwrap()
        + 8;
    bytes[at] = b'x';
    std::fs::write(&segment, &bytes).unwrap();

    let Started::Exited(code, logged) = start(&dir, &log) else {
        panic!("pilot-discovery started on a corrupt journal")
    };
    assert_eq!(code, Some(1), "{logged}");
    let expected = format!(
        "{}: the record at byte {second} (line 2) is corrupt (checksum mismatch)",
        segment.display()
    );
    assert!(logged.contains(&expected), "{expected:?} not in {logged}");
    // Never emptied: the journal is as it was, for inspection.
    assert_eq!(std::fs::read(&segment).unwrap(), bytes);
    // Twice the same answer: the failed start changed nothing.
    let Started::Exited(Some(1), again) = start(&dir, &log) else {
        panic!("the second start did not fail the same way")
    };
    assert!(again.contains(&expected), "{again}");
}

#[test]
fn an_object_that_no_longer_validates_is_quarantined_and_the_server_starts() {
    let temporary = tempfile::tempdir().unwrap();
    let dir = temporary.path().join("data");
    let log = temporary.path().join("log");
    let server = serving(&dir, &log);
    let good = server.create(&rule("good", "v1"));
    server.kill();
    // A record written by a version with looser rules (or by hand): its
    // only route weighs 30.
    let mut bad = rule("bad", "v1");
    bad["spec"]["route"][0]["weight"] = 30.into();
    bad["metadata"]["resourceVersion"] = (good + 1).to_string().into();
    append(&active_segment(&dir), &record(good + 1, &bad));

    let server = serving(&dir, &log);
    assert_eq!(server.names(), [("good".to_string(), good)]);
    let (code, _) = http(
        server.rest,
        "GET",
        &format!("{}/bad", rules("default")),
        &[],
        None,
    );
    assert_eq!(code, 404);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("quarantined") && logged.contains("RouteRule default/bad"),
        "{logged}"
    );
    let kept = std::fs::read_to_string(dir.join("quarantine.jsonl")).unwrap();
    assert!(
        kept.contains("RouteRule default/bad") && kept.contains("got 30"),
        "{kept}"
    );
    // Operators see it where every quarantined object is listed and
    // counted.
    let (code, listing) = http(server.rest, "GET", "/debug/quarantine", &[], None);
    assert_eq!(code, 200);
    let listing: Value = serde_json::from_slice(&listing).unwrap();
    let items = listing["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{listing}");
    assert_eq!(items[0]["name"], "bad");
    assert_eq!(items[0]["reason"], "Journal");
    assert!(items[0]["errors"].to_string().contains("got 30"), "{listing}");
    let (_, metrics) = http(server.rest, "GET", "/metrics", &[], None);
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(
        metrics.contains("pilot_config_quarantined{kind=\"RouteRule\"} 1"),
        "{metrics}"
    );
    // Its revision is not handed out again.
    assert!(server.create(&rule("next", "v1")) > good + 1);
    server.kill();
}
