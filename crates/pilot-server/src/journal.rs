//! `--data-dir` for the memory store: every write is appended to a journal
//! and fsynced before it is applied; at start the last snapshot and the
//! journal after it are replayed, then compacted into a new snapshot, as
//! they are again every [`COMPACT_AFTER`] writes.
//!
//! Files in the data directory:
//! - `snapshot.json`: `{"revision": N, "objects": [document, ...]}`,
//!   replaced atomically (written beside, fsynced, renamed, directory
//!   fsynced);
//! - `journal.jsonl`: one line per write after the snapshot,
//!   `{"revision": N, "put": document}` or
//!   `{"revision": N, "delete": {"kind", "namespace", "name"}}`.
//!
//! The append and its fsync run on the writing task, under the store's
//! write lock (never across an `.await`): writes are serialized and each
//! costs one fsync, which suits operator-paced configuration.
//!
//! A write whose journal line cannot be written and synced fails, and the
//! journal is cut back to its previous length, so the store and the files
//! stay as they were.
//!
//! Damage (issue 19): each line is `CRC32 JSON` (the checksum of the JSON,
//! 8 hex digits; lines without one, from older versions, are read as
//! JSON). At start:
//! - a partial last record (no newline: a crash mid-append, whose write
//!   was not acknowledged, unless something else cut the file) is skipped,
//!   with a warning that says both; the journal is kept aside as
//!   `journal.jsonl.torn-<unix time>` before a new one is started, and the
//!   revision the partial record names is never reused;
//! - a complete line that fails its checksum or does not parse is
//!   corruption: the server does not start, names the line and changes
//!   nothing, so no acknowledged write is dropped silently;
//! - a stored object that no longer validates is quarantined: logged with
//!   every error, left out of the store, and kept in `quarantine.jsonl`
//!   (appended, with the reason) instead of stopping the server.
//!
//! The directory is fsynced after files are created or renamed in it.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pilot_model::{ConfigKey, DynConfig, KindRegistry, Revision, StoreError};
use pilot_store_memory::{MemoryConfigStore, PendingWrite, WriteAhead};
use serde::{Deserialize, Serialize};

const SNAPSHOT: &str = "snapshot.json";
const JOURNAL: &str = "journal.jsonl";
const LOCK: &str = "lock";
const QUARANTINE: &str = "quarantine.jsonl";
/// Writes kept in the journal before it is folded into a new snapshot.
pub const COMPACT_AFTER: usize = 1000;

/// Why a data directory could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("data directory {}: {message}", dir.display())]
pub struct JournalError {
    /// The directory.
    pub dir: PathBuf,
    /// What is wrong, naming the file (and line) concerned.
    pub message: String,
}

/// Opens (creating it if needed) the memory store persisted in `dir`.
pub fn open(dir: &Path, registry: KindRegistry, history: usize) -> Result<MemoryConfigStore, JournalError> {
    open_with(dir, registry, history, COMPACT_AFTER)
}

/// [`open`], compacting the journal into a new snapshot once it holds
/// `compact_after` writes.
pub fn open_with(
    dir: &Path,
    registry: KindRegistry,
    history: usize,
    compact_after: usize,
) -> Result<MemoryConfigStore, JournalError> {
    let fail = |message: String| JournalError {
        dir: dir.to_path_buf(),
        message,
    };
    std::fs::create_dir_all(dir).map_err(|e| fail(format!("cannot create it: {e}")))?;
    // One server per directory: a second one would interleave journals.
    let lock = File::create(dir.join(LOCK)).map_err(|e| fail(format!("cannot create {LOCK}: {e}")))?;
    lock.try_lock().map_err(|e| {
        fail(format!(
            "it is in use by another pilot-discovery (cannot lock {LOCK}: {e})"
        ))
    })?;
    sync_dir(dir).map_err(|e| fail(format!("cannot sync the directory: {e}")))?;
    let Loaded {
        revision,
        objects,
        torn,
    } = load(dir).map_err(fail)?;
    if torn {
        // Keep the evidence: the journal as found, beside the new one.
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let aside = dir.join(format!("{JOURNAL}.torn-{seconds}"));
        std::fs::copy(dir.join(JOURNAL), &aside)
            .and_then(|_| File::open(&aside).and_then(|f| f.sync_all()))
            .map_err(|e| {
                fail(format!(
                    "cannot keep the torn journal aside as {}: {e}",
                    aside.display()
                ))
            })?;
        tracing::warn!(kept = %aside.display(), "the journal as found is kept aside for inspection");
    }
    let mut valid = Vec::with_capacity(objects.len());
    let mut quarantined = Vec::new();
    for object in objects.into_values() {
        let key = object.key();
        let checked = match registry.prepare(object.clone()) {
            Ok(checked) => checked,
            Err(error) => {
                tracing::error!(key = %key, %error, "stored object no longer passes validation: quarantined (not served; kept in {QUARANTINE})");
                quarantined.push((object, error.to_string()));
                continue;
            }
        };
        // Keep what was stored (version, creation time) and the filled type.
        valid.push(DynConfig {
            meta: pilot_model::ConfigMeta {
                group: checked.meta.group,
                version: checked.meta.version,
                ..object.meta
            },
            spec: object.spec,
        });
    }
    if !quarantined.is_empty() {
        quarantine(dir, &quarantined).map_err(fail)?;
    }
    write_snapshot(dir, revision, &valid).map_err(fail)?;
    // Emptied (its records are in the snapshot now), then opened for
    // appending: every write lands at the end, also after a truncation.
    let journal = File::create(dir.join(JOURNAL))
        .and_then(|file| file.sync_all())
        .and_then(|()| OpenOptions::new().append(true).open(dir.join(JOURNAL)))
        .map_err(|e| fail(format!("cannot reset {JOURNAL}: {e}")))?;
    sync_dir(dir).map_err(|e| fail(format!("cannot sync the directory: {e}")))?;
    tracing::info!(dir = %dir.display(), revision, objects = valid.len(), quarantined = quarantined.len(), "restored the memory store");
    let write_ahead = Journal {
        dir: dir.to_path_buf(),
        path: dir.join(JOURNAL),
        compact_after,
        state: Mutex::new(JournalState {
            file: journal,
            objects: valid.iter().map(|o| (o.key(), o.clone())).collect(),
            records: 0,
        }),
        _lock: Some(lock),
    };
    Ok(MemoryConfigStore::restore(
        registry,
        history,
        valid,
        revision,
        Arc::new(write_ahead),
    ))
}

struct Journal {
    dir: PathBuf,
    path: PathBuf,
    compact_after: usize,
    state: Mutex<JournalState>,
    /// Held (locked) while the store lives.
    _lock: Option<File>,
}

/// The journal file, and what snapshot + journal hold (to write the next
/// snapshot without asking the store).
struct JournalState {
    file: File,
    objects: BTreeMap<ConfigKey, DynConfig>,
    records: usize,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    revision: Revision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    put: Option<DynConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delete: Option<ConfigKey>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotFile {
    revision: Revision,
    objects: Vec<DynConfig>,
}

impl WriteAhead for Journal {
    fn record(&self, write: PendingWrite<'_>) -> Result<(), StoreError> {
        let record = match write {
            PendingWrite::Put { revision, config } => Record {
                revision,
                put: Some(config.clone()),
                delete: None,
            },
            PendingWrite::Delete { revision, key } => Record {
                revision,
                put: None,
                delete: Some(key.clone()),
            },
        };
        let json = serde_json::to_vec(&record).map_err(StoreError::unavailable)?;
        let mut line = format!("{:08x} ", crc32(&json)).into_bytes();
        line.extend_from_slice(&json);
        line.push(b'\n');
        // Writes reach us one at a time under the store's write lock; this
        // lock only guards the file and the mirror, never across an await.
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let file = &mut state.file;
        let before = file.metadata().map(|m| m.len()).map_err(|e| self.failed(e))?;
        let written = file.write_all(&line).and_then(|()| file.sync_data());
        if let Err(error) = written {
            // Leave the file as it was, so a restart does not replay a write
            // the caller was told had failed.
            let _ = file.set_len(before).and_then(|()| file.sync_data());
            return Err(self.failed(error));
        }
        // The write is durable; the store applies it next.
        let revision = record.revision;
        match (record.put, record.delete) {
            (Some(object), _) => {
                state.objects.insert(object.key(), object);
            }
            (_, Some(key)) => {
                state.objects.remove(&key);
            }
            _ => {}
        }
        state.records += 1;
        if state.records >= self.compact_after {
            self.compact(&mut state, revision);
        }
        Ok(())
    }
}

impl Journal {
    /// Folds the journal into a new snapshot at `revision`. A failure is
    /// logged and changes nothing that matters: the old snapshot and the
    /// whole journal still replay to the same state.
    fn compact(&self, state: &mut JournalState, revision: Revision) {
        let objects: Vec<DynConfig> = state.objects.values().cloned().collect();
        if let Err(error) = write_snapshot(&self.dir, revision, &objects) {
            tracing::warn!(%error, "journal not compacted; it keeps growing until the next try");
            return;
        }
        // Records up to `revision` are now in the snapshot and skipped on
        // replay, so emptying the journal is safe even if it fails halfway.
        match state.file.set_len(0).and_then(|()| state.file.sync_data()) {
            Ok(()) => state.records = 0,
            Err(error) => tracing::warn!(%error, "journal not truncated after a snapshot"),
        }
    }

    fn failed(&self, error: std::io::Error) -> StoreError {
        StoreError::unavailable(format!(
            "cannot write the journal {}: {error}; nothing was changed",
            self.path.display()
        ))
    }
}

/// What a data directory holds.
struct Loaded {
    revision: Revision,
    objects: BTreeMap<ConfigKey, DynConfig>,
    /// The journal ended in a partial record.
    torn: bool,
}

/// The snapshot's revision and objects with the journal replayed on top.
fn load(dir: &Path) -> Result<Loaded, String> {
    let mut revision = 0;
    let mut objects = BTreeMap::new();
    let snapshot_path = dir.join(SNAPSHOT);
    match std::fs::read(&snapshot_path) {
        Ok(bytes) => {
            let snapshot: SnapshotFile =
                serde_json::from_slice(&bytes).map_err(|e| format!("{SNAPSHOT} is unreadable: {e}"))?;
            revision = snapshot.revision;
            for object in snapshot.objects {
                objects.insert(object.key(), object);
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot read {SNAPSHOT}: {e}")),
    }
    let journal = match std::fs::read(dir.join(JOURNAL)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("cannot read {JOURNAL}: {e}")),
    };
    let complete = match journal.iter().rposition(|b| *b == b'\n') {
        Some(end) => &journal[..=end],
        None => &[][..],
    };
    let tail = &journal[complete.len()..];
    let torn = !tail.is_empty();
    let lines = complete.split(|b| *b == b'\n').filter(|l| !l.is_empty());
    for (number, line) in lines.enumerate() {
        let corrupt = |why: String| {
            format!(
                "{JOURNAL} line {} is corrupt ({why}); nothing was changed. It may hold acknowledged \
                 writes: inspect it, then move the directory's journal aside to start without it",
                number + 1
            )
        };
        let record = parse_record(line).map_err(corrupt)?;
        if record.revision <= revision {
            continue;
        }
        revision = record.revision;
        match (record.put, record.delete) {
            (Some(object), None) => {
                objects.insert(object.key(), object);
            }
            (None, Some(key)) => {
                objects.remove(&key);
            }
            _ => return Err(corrupt("neither or both of put and delete".into())),
        }
    }
    if torn {
        // The revision the partial record was written at, if it got that
        // far: never handed out again.
        let partial = String::from_utf8_lossy(tail);
        let named = partial
            .split_once("\"revision\":")
            .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|digits| digits.parse::<Revision>().ok());
        tracing::warn!(
            bytes = tail.len(),
            revision = ?named,
            "{JOURNAL} ends in a partial record, skipped: a write interrupted by a crash before its \
             fsync returned (never acknowledged), or, if something else cut the file, an acknowledged \
             write that is lost"
        );
        if let Some(named) = named {
            revision = revision.max(named);
        }
    }
    Ok(Loaded {
        revision,
        objects,
        torn,
    })
}

/// One journal line: `CRC32 JSON`, or JSON alone (older versions).
fn parse_record(line: &[u8]) -> Result<Record, String> {
    let json = if line.first() == Some(&b'{') {
        line
    } else {
        let (sum, json) = (line.get(..8), line.get(9..));
        let (Some(sum), Some(json)) = (sum, json) else {
            return Err("too short for a checksum".into());
        };
        let expected = std::str::from_utf8(sum)
            .ok()
            .and_then(|s| u32::from_str_radix(s, 16).ok())
            .ok_or("no checksum")?;
        if crc32(json) != expected {
            return Err("checksum mismatch".into());
        }
        json
    };
    serde_json::from_slice(json).map_err(|e| e.to_string())
}

/// CRC-32 (IEEE), bit by bit: journal lines are short and fsync dominates.
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

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all())
}

/// Appends objects that no longer validate to `quarantine.jsonl`, each
/// with the reason, and syncs it.
fn quarantine(dir: &Path, objects: &[(DynConfig, String)]) -> Result<(), String> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(QUARANTINE))
        .map_err(|e| format!("cannot open {QUARANTINE}: {e}"))?;
    for (object, reason) in objects {
        let line = serde_json::json!({"key": object.key().to_string(), "reason": reason, "object": object});
        writeln!(file, "{line}").map_err(|e| format!("cannot write {QUARANTINE}: {e}"))?;
    }
    file.sync_all()
        .and_then(|()| sync_dir(dir))
        .map_err(|e| format!("cannot sync {QUARANTINE}: {e}"))
}

fn write_snapshot(dir: &Path, revision: Revision, objects: &[DynConfig]) -> Result<(), String> {
    let snapshot = SnapshotFile {
        revision,
        objects: objects.to_vec(),
    };
    let bytes = serde_json::to_vec(&snapshot).map_err(|e| e.to_string())?;
    let temporary = dir.join(format!("{SNAPSHOT}.tmp"));
    let written = File::create(&temporary)
        .and_then(|mut file| file.write_all(&bytes).and_then(|()| file.sync_all()))
        .and_then(|()| std::fs::rename(&temporary, dir.join(SNAPSHOT)))
        .and_then(|()| File::open(dir).and_then(|d| d.sync_all()));
    written.map_err(|e| format!("cannot write {SNAPSHOT}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilot_model::{ConfigStore, istio};

    fn rule(name: &str) -> DynConfig {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "config.istio.io/v1alpha2",
            "kind": "RouteRule",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"destination": {"name": "reviews"}, "route": [{"labels": {"version": "v1"}}]}
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn writes_survive_a_reopen_with_their_versions() {
        let dir = tempfile::tempdir().unwrap();
        let (kept, deleted) = {
            let store = open(dir.path(), istio::registry(), 100).unwrap();
            let kept = store.create(rule("kept")).await.unwrap();
            let mut changed = (*kept).clone();
            changed.meta.labels.insert("app".into(), "reviews".into());
            let kept = store.update(changed).await.unwrap();
            let deleted = store.create(rule("gone")).await.unwrap();
            store.delete(&deleted.key(), None).await.unwrap();
            (kept, deleted)
        };
        let store = open(dir.path(), istio::registry(), 100).unwrap();
        assert_eq!(store.get(&kept.key()).await.unwrap().as_deref(), Some(&*kept));
        assert_eq!(store.get(&deleted.key()).await.unwrap(), None);
        assert_eq!(store.revision(), 4);
        // New writes go on after the restored revision.
        let next = store.create(rule("next")).await.unwrap();
        assert_eq!(next.meta.resource_version.as_deref(), Some("5"));
        drop(store);
        let store = open(dir.path(), istio::registry(), 100).unwrap();
        assert_eq!(store.list("RouteRule", None).await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn the_journal_is_folded_into_snapshots_as_it_grows() {
        let dir = tempfile::tempdir().unwrap();
        let expected = {
            let store = open_with(dir.path(), istio::registry(), 100, 5).unwrap();
            for i in 0..12 {
                store.create(rule(&format!("r{i}"))).await.unwrap();
            }
            for i in 0..4 {
                store.delete(&rule(&format!("r{i}")).key(), None).await.unwrap();
            }
            // 16 writes, folded at 5, 10 and 15: one record left.
            let journal = std::fs::read_to_string(dir.path().join(JOURNAL)).unwrap();
            assert_eq!(journal.lines().count(), 1, "{journal:?}");
            let record = journal.split_once(' ').map(|(_, json)| json).unwrap_or_default();
            assert!(record.starts_with('{') && !journal.contains('\0'), "{journal:?}");
            store.list_now("RouteRule", None).unwrap()
        };
        let store = open_with(dir.path(), istio::registry(), 100, 5).unwrap();
        assert_eq!(store.list_now("RouteRule", None).unwrap(), expected);
        assert_eq!(store.revision(), 16);
    }

    #[test]
    fn a_directory_serves_one_server_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let first = open(dir.path(), istio::registry(), 100).unwrap();
        let error = open(dir.path(), istio::registry(), 100).err().unwrap();
        assert!(
            error.to_string().contains("in use by another pilot-discovery"),
            "{error}"
        );
        drop(first);
        open(dir.path(), istio::registry(), 100).unwrap();
    }

    #[tokio::test]
    async fn a_torn_last_line_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path(), istio::registry(), 100).unwrap();
            store.create(rule("a")).await.unwrap();
        }
        let mut journal = OpenOptions::new()
            .append(true)
            .open(dir.path().join(JOURNAL))
            .unwrap();
        // A create of "a" was recorded; now a torn record after it.
        journal.write_all(br#"{"revision":2,"put":{"apiV"#).unwrap();
        drop(journal);
        // The snapshot written at the last open holds nothing yet; the
        // journal holds "a" and the torn line.
        let store = open(dir.path(), istio::registry(), 100).unwrap();
        let names: Vec<String> = store
            .list("RouteRule", None)
            .await
            .unwrap()
            .iter()
            .map(|c| c.meta.name.clone())
            .collect();
        assert_eq!(names, ["a"]);
        // The partial record's revision is not handed out again.
        assert_eq!(store.revision(), 2);
        let next = store.create(rule("b")).await.unwrap();
        assert_eq!(next.meta.resource_version.as_deref(), Some("3"));
        // The journal as found is kept aside.
        let kept: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with("journal.jsonl.torn-"))
            .collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        let torn = std::fs::read_to_string(dir.path().join(&kept[0])).unwrap();
        assert!(torn.ends_with(r#"{"revision":2,"put":{"apiV"#), "{torn}");
    }

    #[tokio::test]
    async fn a_truncated_acknowledged_write_never_gives_its_revision_again() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path(), istio::registry(), 100).unwrap();
            store.create(rule("a")).await.unwrap();
            store.create(rule("b")).await.unwrap();
        }
        // Cut the last (acknowledged) record in half.
        let path = dir.path().join(JOURNAL);
        let journal = std::fs::read(&path).unwrap();
        let last_start = journal[..journal.len() - 1]
            .iter()
            .rposition(|b| *b == b'\n')
            .unwrap()
            + 1;
        let cut = last_start + (journal.len() - last_start) / 2;
        std::fs::write(&path, &journal[..cut]).unwrap();
        let store = open(dir.path(), istio::registry(), 100).unwrap();
        assert_eq!(store.list_now("RouteRule", None).unwrap().len(), 1);
        assert_eq!(store.revision(), 2, "revision 2 was handed out once");
        let next = store.create(rule("c")).await.unwrap();
        assert_eq!(next.meta.resource_version.as_deref(), Some("3"));
    }

    #[tokio::test]
    async fn a_flipped_byte_stops_the_start_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path(), istio::registry(), 100).unwrap();
            store.create(rule("a")).await.unwrap();
            store.create(rule("b")).await.unwrap();
        }
        let path = dir.path().join(JOURNAL);
        let mut journal = std::fs::read(&path).unwrap();
        // Inside the first record's JSON: "a" becomes "c".
        let at = journal.windows(10).position(|w| w == br#""name":"a""#).unwrap() + 8;
        journal[at] = b'c';
        std::fs::write(&path, &journal).unwrap();
        let snapshot = std::fs::read(dir.path().join(SNAPSHOT)).unwrap();
        let error = open(dir.path(), istio::registry(), 100)
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("line 1 is corrupt (checksum mismatch)"), "{error}");
        assert_eq!(std::fs::read(&path).unwrap(), journal);
        assert_eq!(std::fs::read(dir.path().join(SNAPSHOT)).unwrap(), snapshot);
    }

    #[tokio::test]
    async fn an_object_that_no_longer_validates_is_quarantined_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path(), istio::registry(), 100).unwrap();
            store.create(rule("good")).await.unwrap();
        }
        // Rules change (or the file is edited): one route weighs 30.
        let mut bad = serde_json::to_value(rule("bad")).unwrap();
        bad["spec"]["route"] = serde_json::json!([{"labels": {"version": "v1"}, "weight": 30}]);
        bad["metadata"]["resourceVersion"] = "2".into();
        let record = serde_json::to_vec(&serde_json::json!({"revision": 2, "put": bad})).unwrap();
        let mut journal = OpenOptions::new()
            .append(true)
            .open(dir.path().join(JOURNAL))
            .unwrap();
        journal
            .write_all(format!("{:08x} ", crc32(&record)).as_bytes())
            .unwrap();
        journal.write_all(&record).unwrap();
        journal.write_all(b"\n").unwrap();
        drop(journal);
        let store = open(dir.path(), istio::registry(), 100).unwrap();
        let names: Vec<String> = store
            .list_now("RouteRule", None)
            .unwrap()
            .iter()
            .map(|c| c.meta.name.clone())
            .collect();
        assert_eq!(names, ["good"]);
        assert_eq!(store.revision(), 2);
        let kept = std::fs::read_to_string(dir.path().join(QUARANTINE)).unwrap();
        assert!(
            kept.contains("RouteRule default/bad") && kept.contains("100"),
            "{kept}"
        );
    }

    #[test]
    fn crc32_is_the_ieee_one() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[tokio::test]
    async fn a_failed_journal_write_leaves_store_and_files_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), istio::registry(), 100).unwrap();
        store.create(rule("a")).await.unwrap();
        let before = std::fs::read(dir.path().join(JOURNAL)).unwrap();
        // Make the journal unwritable from under the store: a full device.
        {
            let journal = Journal {
                dir: dir.path().to_path_buf(),
                path: PathBuf::from("/dev/full"),
                compact_after: COMPACT_AFTER,
                state: Mutex::new(JournalState {
                    file: OpenOptions::new().write(true).open("/dev/full").unwrap(),
                    objects: BTreeMap::new(),
                    records: 0,
                }),
                _lock: None,
            };
            let failing = MemoryConfigStore::restore(
                istio::registry(),
                100,
                store
                    .list_now("RouteRule", None)
                    .unwrap()
                    .iter()
                    .map(|c| (**c).clone()),
                store.revision(),
                Arc::new(journal),
            );
            let error = failing.create(rule("b")).await.unwrap_err();
            assert!(error.to_string().contains("nothing was changed"), "{error}");
            assert_eq!(failing.list_now("RouteRule", None).unwrap().len(), 1);
            assert_eq!(failing.revision(), 1);
        }
        assert_eq!(std::fs::read(dir.path().join(JOURNAL)).unwrap(), before);
    }
}
