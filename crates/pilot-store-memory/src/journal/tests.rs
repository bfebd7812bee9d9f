//! The journal's recovery: reopen, torn tail, corruption, quarantine, and
//! a crash at every step of a compaction.

use std::io::Write;
use std::path::Path;

use pilot_model::{ConfigStore, DynConfig, KindRegistry, KindSchema, Revision};

use super::files::{LEGACY_JOURNAL, QUARANTINE, SNAPSHOT, SNAPSHOT_TEMPORARY, segment_name, segments};
use super::record::crc32;
use super::writer::CrashPoint;
use super::*;

/// A kind whose `weight`, if present, must be 100.
fn registry() -> KindRegistry {
    let registry = KindRegistry::new();
    registry
        .register_schema(KindSchema::new(
            "Rule",
            "rules",
            "example.com",
            "v1",
            |spec, errors| {
                if let Some(weight) = spec.get("weight")
                    && weight != 100
                {
                    errors.push("spec.weight", format!("weights must sum to 100, got {weight}"));
                }
            },
        ))
        .unwrap();
    registry
}

fn rule(name: &str) -> DynConfig {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "example.com/v1",
        "kind": "Rule",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"destination": "reviews"}
    }))
    .unwrap()
}

fn options(compact_after: usize) -> JournalOptions {
    JournalOptions {
        compact_after,
        ..JournalOptions::default()
    }
}

fn reopen(dir: &Path) -> JournaledStore {
    let store = open(dir, registry(), options(COMPACT_AFTER)).unwrap();
    store.wait_for_compaction();
    store
}

fn names(store: &JournaledStore) -> Vec<String> {
    store
        .list_now("Rule", None)
        .unwrap()
        .iter()
        .map(|c| c.meta.name.clone())
        .collect()
}

/// The active (last) segment's path.
fn active_segment(dir: &Path) -> std::path::PathBuf {
    segments(dir).unwrap().pop().unwrap().path
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn writes_survive_a_reopen_with_their_versions() {
    let dir = tempfile::tempdir().unwrap();
    let (kept, deleted) = {
        let store = open(dir.path(), registry(), options(COMPACT_AFTER)).unwrap();
        let kept = store.create(rule("kept")).await.unwrap();
        let mut changed = (*kept).clone();
        changed.meta.labels.insert("app".into(), "reviews".into());
        let kept = store.update(changed).await.unwrap();
        let deleted = store.create(rule("gone")).await.unwrap();
        store.delete(&deleted.key(), None).await.unwrap();
        (kept, deleted)
    };
    let store = reopen(dir.path());
    assert_eq!(store.get(&kept.key()).await.unwrap().as_deref(), Some(&*kept));
    assert_eq!(store.get(&deleted.key()).await.unwrap(), None);
    assert_eq!(store.revision(), 4);
    let next = store.create(rule("next")).await.unwrap();
    assert_eq!(next.meta.resource_version.as_deref(), Some("5"));
    drop(store);
    let store = reopen(dir.path());
    assert_eq!(names(&store), ["kept", "next"]);
    // The reopen folded the replayed segment into the snapshot.
    assert_eq!(
        file_names(dir.path()),
        ["journal-00000000000000000006.jsonl", "lock", "snapshot.json"]
    );
}

#[tokio::test]
async fn the_journal_is_folded_into_snapshots_as_it_grows() {
    let dir = tempfile::tempdir().unwrap();
    let expected = {
        let store = open(dir.path(), registry(), options(5)).unwrap();
        for i in 0..12 {
            store.create(rule(&format!("r{i}"))).await.unwrap();
            // One compaction at a time: let each finish, so the folds
            // happen at 5 and 10.
            store.wait_for_compaction();
        }
        for i in 0..4 {
            store.delete(&rule(&format!("r{i}")).key(), None).await.unwrap();
            store.wait_for_compaction();
        }
        assert_eq!(store.wait_for_compaction().completed, 3);
        // Folded at 5, 10 and 15: one record in the active segment.
        let active = std::fs::read_to_string(active_segment(dir.path())).unwrap();
        assert_eq!(active.lines().count(), 1, "{active:?}");
        assert_eq!(segments(dir.path()).unwrap().len(), 1);
        store.list_now("Rule", None).unwrap()
    };
    let store = reopen(dir.path());
    assert_eq!(store.list_now("Rule", None).unwrap(), expected);
    assert_eq!(store.revision(), 16);
}

#[test]
fn a_directory_serves_one_store_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path(), registry(), options(COMPACT_AFTER)).unwrap();
    let error = open(dir.path(), registry(), options(COMPACT_AFTER))
        .err()
        .unwrap();
    assert!(matches!(error, JournalError::InUse { .. }), "{error}");
    assert!(error.to_string().contains("in use by another"), "{error}");
    drop(first);
    open(dir.path(), registry(), options(COMPACT_AFTER)).unwrap();
}

#[tokio::test]
async fn a_torn_last_record_is_skipped_kept_aside_and_its_revision_not_reused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path(), registry(), options(COMPACT_AFTER)).unwrap();
        store.create(rule("a")).await.unwrap();
    }
    let active = active_segment(dir.path());
    let mut journal = std::fs::OpenOptions::new().append(true).open(&active).unwrap();
    journal
        .write_all(br#"0badf00d {"revision":2,"put":{"apiV"#)
        .unwrap();
    drop(journal);
    let store = reopen(dir.path());
    assert_eq!(names(&store), ["a"]);
    assert_eq!(store.revision(), 2, "the partial record's revision is spent");
    let next = store.create(rule("b")).await.unwrap();
    assert_eq!(next.meta.resource_version.as_deref(), Some("3"));
    let kept: Vec<String> = file_names(dir.path())
        .into_iter()
        .filter(|n| n.contains(".torn-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let torn = std::fs::read_to_string(dir.path().join(&kept[0])).unwrap();
    assert!(torn.ends_with(r#"{"revision":2,"put":{"apiV"#), "{torn}");
    drop(store);
    // And again: nothing torn now, both writes there.
    let store = reopen(dir.path());
    assert_eq!(names(&store), ["a", "b"]);
    assert_eq!(store.revision(), 3);
}

#[tokio::test]
async fn a_flipped_byte_stops_the_open_names_file_and_offset_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path(), registry(), options(COMPACT_AFTER)).unwrap();
        store.create(rule("a")).await.unwrap();
        store.create(rule("b")).await.unwrap();
    }
    let path = active_segment(dir.path());
    let mut journal = std::fs::read(&path).unwrap();
    let second = journal.iter().position(|b| *b == b'\n').unwrap() + 1;
    let at = second
        + journal[second..]
            .windows(10)
            .position(|w| w == br#""name":"b""#)
            .unwrap()
        + 8;
    journal[at] = b'c';
    std::fs::write(&path, &journal).unwrap();
    let before: Vec<(String, Vec<u8>)> = file_names(dir.path())
        .into_iter()
        .map(|n| (n.clone(), std::fs::read(dir.path().join(n)).unwrap()))
        .collect();
    let error = open(dir.path(), registry(), options(COMPACT_AFTER))
        .err()
        .unwrap();
    let JournalError::Corrupt {
        file,
        offset,
        line,
        reason,
    } = &error
    else {
        panic!("{error}")
    };
    assert_eq!(
        (file, *offset, *line, reason.as_str()),
        (&path, second as u64, 2, "checksum mismatch")
    );
    let message = error.to_string();
    assert!(message.contains(&format!("byte {second} (line 2)")), "{message}");
    let after: Vec<(String, Vec<u8>)> = file_names(dir.path())
        .into_iter()
        .map(|n| (n.clone(), std::fs::read(dir.path().join(n)).unwrap()))
        .collect();
    assert_eq!(before, after);
}

#[tokio::test]
async fn an_object_that_no_longer_validates_is_quarantined_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path(), registry(), options(COMPACT_AFTER)).unwrap();
        store.create(rule("good")).await.unwrap();
    }
    let mut bad = serde_json::to_value(rule("bad")).unwrap();
    bad["spec"]["weight"] = 30.into();
    bad["metadata"]["resourceVersion"] = "2".into();
    let record = serde_json::to_vec(&serde_json::json!({"revision": 2, "put": bad})).unwrap();
    let mut journal = std::fs::OpenOptions::new()
        .append(true)
        .open(active_segment(dir.path()))
        .unwrap();
    writeln!(
        journal,
        "{:08x} {}",
        crc32(&record),
        String::from_utf8(record).unwrap()
    )
    .unwrap();
    drop(journal);
    let store = reopen(dir.path());
    assert_eq!(names(&store), ["good"]);
    assert_eq!(store.revision(), 2);
    let [quarantined] = store.quarantined() else {
        panic!("{:?}", store.quarantined())
    };
    assert_eq!(quarantined.key.to_string(), "Rule default/bad");
    assert_eq!(quarantined.errors[0].path, "spec.weight");
    let kept = std::fs::read_to_string(dir.path().join(QUARANTINE)).unwrap();
    assert!(
        kept.contains("Rule default/bad") && kept.contains("got 30"),
        "{kept}"
    );
    drop(store);
    // Left out of the new snapshot: the next open has nothing to quarantine.
    let store = reopen(dir.path());
    assert!(store.quarantined().is_empty());
    assert_eq!(names(&store), ["good"]);
}

#[tokio::test]
async fn a_journal_from_before_segments_is_read_and_folded() {
    let dir = tempfile::tempdir().unwrap();
    let mut legacy = String::new();
    for (revision, name) in [(1, "a"), (2, "b")] {
        let mut object = serde_json::to_value(rule(name)).unwrap();
        object["metadata"]["resourceVersion"] = revision.to_string().into();
        let json = serde_json::json!({"revision": revision, "put": object}).to_string();
        // The first without a checksum (older still), the second with.
        if revision == 1 {
            legacy.push_str(&format!("{json}\n"));
        } else {
            legacy.push_str(&format!("{:08x} {json}\n", crc32(json.as_bytes())));
        }
    }
    std::fs::write(dir.path().join(LEGACY_JOURNAL), legacy).unwrap();
    std::fs::write(dir.path().join(SNAPSHOT), r#"{"revision":0,"objects":[]}"#).unwrap();
    let store = reopen(dir.path());
    assert_eq!(names(&store), ["a", "b"]);
    assert_eq!(store.revision(), 2);
    assert!(!dir.path().join(LEGACY_JOURNAL).exists());
}

#[test]
fn a_missing_segment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(SNAPSHOT), r#"{"revision":3,"objects":[]}"#).unwrap();
    std::fs::write(dir.path().join(segment_name(9)), "").unwrap();
    let error = open(dir.path(), registry(), options(COMPACT_AFTER))
        .err()
        .unwrap();
    assert!(
        matches!(
            error,
            JournalError::Missing {
                snapshot: 3,
                first: 9,
                ..
            }
        ),
        "{error}"
    );
}

/// Writes `count` rules named `prefix-i` (acknowledged once this returns).
async fn write_rules(store: &JournaledStore, prefix: &str, count: usize) -> Vec<String> {
    let mut written = Vec::new();
    for i in 0..count {
        let name = format!("{prefix}-{i}");
        store.create(rule(&name)).await.unwrap();
        written.push(name);
    }
    written
}

/// Crashes a compaction at `point` while writes go on, then reopens: every
/// acknowledged write is there, revisions go on after the last one.
async fn crash_at(point: CrashPoint) {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = {
        let store = open(dir.path(), registry(), options(COMPACT_AFTER)).unwrap();
        let before = write_rules(&store, "before", 5).await;
        store.wait_for_compaction();
        before
    };
    {
        let store = open_inner(dir.path(), registry(), options(4), Some(point)).unwrap();
        // The open's own compaction (of the segment above) stops at `point`.
        let status = store.wait_for_compaction();
        assert_eq!(status.last_error.as_deref(), Some("crash (test)"));
        expected.extend(write_rules(&store, "during", 3).await);
        // The fourth write rotates again: that compaction stops too.
        expected.extend(write_rules(&store, "after", 2).await);
        store.wait_for_compaction();
    }
    let left = file_names(dir.path());
    match point {
        CrashPoint::Rotated => assert!(!left.iter().any(|n| n == SNAPSHOT), "{left:?}"),
        CrashPoint::SnapshotHalfWritten | CrashPoint::SnapshotWritten => {
            assert!(left.iter().any(|n| n == SNAPSHOT_TEMPORARY), "{left:?}")
        }
        CrashPoint::SnapshotInstalled => assert!(left.iter().any(|n| n == SNAPSHOT), "{left:?}"),
    }
    assert!(segments(dir.path()).unwrap().len() >= 2, "{left:?}");
    let store = reopen(dir.path());
    expected.sort();
    assert_eq!(names(&store), expected, "{point:?}, files {left:?}");
    assert_eq!(store.revision(), 10);
    let next = store.create(rule("next")).await.unwrap();
    assert_eq!(next.meta.resource_version.as_deref(), Some("11"));
    drop(store);
    // The recovery's own compaction cleaned up.
    assert_eq!(
        file_names(dir.path()),
        [
            "journal-00000000000000000011.jsonl".to_string(),
            "lock".into(),
            "snapshot.json".into()
        ]
    );
    let store = reopen(dir.path());
    assert_eq!(store.revision(), 11);
    assert_eq!(names(&store).len(), 11);
}

#[tokio::test]
async fn a_crash_after_the_rotation_loses_nothing() {
    crash_at(CrashPoint::Rotated).await;
}

#[tokio::test]
async fn a_crash_halfway_through_the_snapshot_loses_nothing() {
    crash_at(CrashPoint::SnapshotHalfWritten).await;
}

#[tokio::test]
async fn a_crash_before_the_snapshot_is_renamed_loses_nothing() {
    crash_at(CrashPoint::SnapshotWritten).await;
}

#[tokio::test]
async fn a_crash_before_old_segments_are_removed_loses_nothing() {
    crash_at(CrashPoint::SnapshotInstalled).await;
}

#[tokio::test]
async fn a_failed_journal_write_leaves_store_and_files_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), registry(), options(COMPACT_AFTER)).unwrap();
    store.create(rule("a")).await.unwrap();
    let active = active_segment(dir.path());
    let before = std::fs::read(&active).unwrap();
    // A full device under the store: swap the active segment for /dev/full.
    store.journal().replace_active_file(
        std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap(),
        "/dev/full".into(),
    );
    let error = store.create(rule("b")).await.unwrap_err();
    assert!(error.to_string().contains("nothing was changed"), "{error}");
    assert_eq!(names(&store), ["a"]);
    assert_eq!(store.revision(), 1);
    drop(store);
    assert_eq!(std::fs::read(&active).unwrap(), before);
    let store = reopen(dir.path());
    assert_eq!(names(&store), ["a"]);
    let revision: Revision = store.revision();
    assert_eq!(revision, 1);
}

#[tokio::test]
async fn objects_of_a_kind_now_cluster_scoped_are_read_without_their_namespace() {
    // Records a pilot wrote while the kind was namespaced (GatewayClasses
    // were): each object is restored without its namespace, and a delete
    // recorded then deletes it.
    let dir = tempfile::tempdir().unwrap();
    let registry = KindRegistry::new();
    registry
        .register_schema(
            KindSchema::new("Class", "classes", "example.com", "v1", |_, _| {}).with_cluster_scope(),
        )
        .unwrap();
    let class = |namespace: &str, name: &str, revision: u64| {
        serde_json::json!({
            "apiVersion": "example.com/v1", "kind": "Class",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": revision.to_string()},
            "spec": {"controller": "example.com/c"},
        })
    };
    let mut lines = String::new();
    for record in [
        serde_json::json!({"revision": 1, "put": class("default", "gone", 1)}),
        serde_json::json!({"revision": 2, "put": class("edge", "kept", 2)}),
        serde_json::json!({"revision": 3, "delete": {"kind": "Class", "namespace": "default", "name": "gone"}}),
    ] {
        let json = record.to_string();
        lines.push_str(&format!("{:08x} {json}\n", crc32(json.as_bytes())));
    }
    std::fs::write(dir.path().join(segment_name(1)), lines).unwrap();
    let store = open(dir.path(), registry, options(COMPACT_AFTER)).unwrap();
    let restored = store.list_now("Class", None).unwrap();
    let keys: Vec<String> = restored.iter().map(|c| c.key().to_string()).collect();
    assert_eq!(keys, ["Class kept"]);
    let kept = store
        .get(&pilot_model::ConfigKey::new("Class", "", "kept"))
        .await
        .unwrap()
        .expect("read at its cluster-scoped key");
    assert_eq!(kept.meta.resource_version.as_deref(), Some("2"));
}
