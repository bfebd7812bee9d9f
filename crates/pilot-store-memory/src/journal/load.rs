//! Reading a data directory: the snapshot, then every journal segment's
//! records after it, in revision order. Reading changes no file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pilot_model::{ConfigKey, DynConfig, KindRegistry, Revision};
use serde::Deserialize;

use super::error::JournalError;
use super::files::{SNAPSHOT, Segment, segments};
use super::record::{Change, decode, partial_revision};

/// What a data directory holds.
pub(crate) struct Loaded {
    /// The last revision handed out (also by a record cut short).
    pub(crate) revision: Revision,
    pub(crate) objects: BTreeMap<ConfigKey, Arc<DynConfig>>,
    /// The segments read, oldest first.
    pub(crate) segments: Vec<Segment>,
    /// The last segment ends in a partial record: its path and the length
    /// of its complete records.
    pub(crate) torn: Option<(PathBuf, u64)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotIn {
    revision: Revision,
    objects: Vec<DynConfig>,
}

/// The snapshot's objects with the journal replayed on top.
/// Objects are keyed by their kind's id in `registry` (documents write the
/// kind's name: [`KindRegistry::identify`]).
pub(crate) fn load(dir: &Path, registry: &KindRegistry) -> Result<Loaded, JournalError> {
    let mut revision = 0;
    let mut objects = BTreeMap::new();
    let snapshot_path = dir.join(SNAPSHOT);
    match std::fs::read(&snapshot_path) {
        Ok(bytes) => {
            // Decoded from the text in one go, then the text is dropped.
            let snapshot: SnapshotIn =
                serde_json::from_slice(&bytes).map_err(|e| JournalError::Snapshot {
                    file: snapshot_path.clone(),
                    reason: e.to_string(),
                })?;
            revision = snapshot.revision;
            for mut object in snapshot.objects {
                registry.identify(&mut object);
                objects.insert(object.key(), Arc::new(object));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(JournalError::io(snapshot_path, "read the snapshot")(e)),
    }
    let segments = segments(dir).map_err(JournalError::io(dir, "list the directory"))?;
    if let Some(oldest) = segments.first()
        && oldest.first > revision + 1
    {
        return Err(JournalError::Missing {
            dir: dir.to_path_buf(),
            snapshot: revision,
            first: oldest.first,
        });
    }
    let mut torn = None;
    for (index, segment) in segments.iter().enumerate() {
        let last = index + 1 == segments.len();
        // A segment's name is a revision handed out (or about to be).
        revision = revision.max(segment.first.saturating_sub(1));
        let bytes = std::fs::read(&segment.path).map_err(JournalError::io(&segment.path, "read it"))?;
        let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |end| end + 1);
        let mut offset = 0usize;
        for (number, line) in bytes[..complete].split_inclusive(|b| *b == b'\n').enumerate() {
            let at = offset;
            offset += line.len();
            let line = &line[..line.len() - 1];
            let corrupt = |reason: String| JournalError::Corrupt {
                file: segment.path.clone(),
                offset: at as u64,
                line: number + 1,
                reason,
            };
            if line.is_empty() {
                return Err(corrupt("an empty line".into()));
            }
            let (at_revision, change) = decode(line).map_err(corrupt)?;
            if at_revision <= revision {
                // Already in the snapshot (a compaction that had not yet
                // removed this segment).
                continue;
            }
            revision = at_revision;
            match change {
                Change::Put(mut object) => {
                    if let Some(config) = Arc::get_mut(&mut object) {
                        registry.identify(config);
                    }
                    objects.insert(object.key(), object);
                }
                Change::Delete(key) => {
                    objects.remove(&registry.scoped_key(key));
                }
            }
        }
        let tail = &bytes[complete..];
        if tail.is_empty() {
            continue;
        }
        if !last {
            // Only the segment being appended to can end mid-record.
            return Err(JournalError::Corrupt {
                file: segment.path.clone(),
                offset: complete as u64,
                line: bytes[..complete].iter().filter(|b| **b == b'\n').count() + 1,
                reason: "a partial record at the end of a segment that is not the last".into(),
            });
        }
        let named = partial_revision(tail);
        tracing::warn!(
            file = %segment.path.display(),
            offset = complete,
            bytes = tail.len(),
            revision = ?named,
            "the journal ends in a partial record, skipped: a write interrupted by a crash before its \
             fsync returned (never acknowledged), or, if something else cut the file, an acknowledged \
             write that is lost"
        );
        // The revision it was written at, if it got that far: never
        // handed out again.
        if let Some(named) = named {
            revision = revision.max(named);
        }
        torn = Some((segment.path.clone(), complete as u64));
    }
    Ok(Loaded {
        revision,
        objects,
        segments,
        torn,
    })
}
