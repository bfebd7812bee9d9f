//! The files of a data directory: their names, and writing them durably.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pilot_model::{ConfigKey, DynConfig, Revision};
use serde::Serialize;
use serde::ser::Serializer;

/// The last snapshot: `{"revision": N, "objects": [document, ...]}`.
pub(crate) const SNAPSHOT: &str = "snapshot.json";
/// A snapshot being written, renamed over [`SNAPSHOT`] once synced.
pub(crate) const SNAPSHOT_TEMPORARY: &str = "snapshot.json.tmp";
/// The one journal of versions before segments; read as the first segment.
pub(crate) const LEGACY_JOURNAL: &str = "journal.jsonl";
/// Held locked while a store uses the directory.
pub(crate) const LOCK: &str = "lock";
/// Objects that no longer validated at load, one JSON line each.
pub(crate) const QUARANTINE: &str = "quarantine.jsonl";

/// The name of the journal segment whose first record is `first`:
/// `journal-<first, 20 digits>.jsonl`, so names sort as revisions do.
pub(crate) fn segment_name(first: Revision) -> String {
    format!("journal-{first:020}.jsonl")
}

/// A journal segment: records from revision `first` on (at most up to the
/// next segment's `first`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) first: Revision,
    pub(crate) path: PathBuf,
}

/// The directory's journal segments, oldest first (the legacy journal,
/// if any, first of all).
pub(crate) fn segments(dir: &Path) -> std::io::Result<Vec<Segment>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let first = if name == LEGACY_JOURNAL {
            0
        } else if let Some(first) = name
            .strip_prefix("journal-")
            .and_then(|rest| rest.strip_suffix(".jsonl"))
            .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse::<Revision>().ok())
        {
            first
        } else {
            continue;
        };
        found.push(Segment {
            first,
            path: entry.path(),
        });
    }
    found.sort_by_key(|s| (s.first, s.path.clone()));
    Ok(found)
}

/// Makes the directory's entries (created, renamed, removed files) durable.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all())
}

/// Creates (or opens, empty or cut back to its complete records) the
/// segment starting at `first`, for appending, and syncs the directory.
pub(crate) fn open_segment(dir: &Path, first: Revision) -> std::io::Result<(File, PathBuf)> {
    let path = dir.join(segment_name(first));
    let file = OpenOptions::new().create(true).append(true).open(&path)?;
    file.sync_all()?;
    sync_dir(dir)?;
    Ok((file, path))
}

/// Writes the snapshot of `objects` at `revision`: streamed into
/// [`SNAPSHOT_TEMPORARY`], synced, renamed over [`SNAPSHOT`], directory
/// synced. A crash at any point leaves either the old snapshot or the new
/// one (and perhaps a temporary file, removed at the next open).
pub(crate) fn write_snapshot(
    dir: &Path,
    revision: Revision,
    objects: &BTreeMap<ConfigKey, Arc<DynConfig>>,
) -> std::io::Result<()> {
    struct Objects<'a>(&'a BTreeMap<ConfigKey, Arc<DynConfig>>);
    impl Serialize for Objects<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.collect_seq(self.0.values().map(|config| &**config))
        }
    }
    #[derive(Serialize)]
    struct SnapshotOut<'a> {
        revision: Revision,
        objects: Objects<'a>,
    }
    let temporary = dir.join(SNAPSHOT_TEMPORARY);
    let file = File::create(&temporary)?;
    let mut writer = BufWriter::with_capacity(1 << 20, file);
    serde_json::to_writer(
        &mut writer,
        &SnapshotOut {
            revision,
            objects: Objects(objects),
        },
    )?;
    let file = writer.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary, dir.join(SNAPSHOT))?;
    sync_dir(dir)
}

/// Appends `lines` to [`QUARANTINE`] and syncs it (and the directory).
pub(crate) fn append_quarantine(dir: &Path, lines: &[serde_json::Value]) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(QUARANTINE))?;
    for line in lines {
        writeln!(file, "{line}")?;
    }
    file.sync_all()?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_sort_by_first_revision_after_the_legacy_journal() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            segment_name(120),
            segment_name(7),
            LEGACY_JOURNAL.to_string(),
            "journal-00000000000000000007.jsonl.torn-1700000000".to_string(),
            SNAPSHOT.to_string(),
            "journal-x.jsonl".to_string(),
        ] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let firsts: Vec<Revision> = segments(dir.path()).unwrap().iter().map(|s| s.first).collect();
        assert_eq!(firsts, [0, 7, 120]);
    }
}
