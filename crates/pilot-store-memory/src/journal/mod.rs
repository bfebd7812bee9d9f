//! A durable [`MemoryConfigStore`]: [`open`] a data directory and every
//! write is appended to a journal and fsynced before it is applied (and
//! acknowledged); reopening the directory restores every acknowledged
//! write with its resource version. Feature `journal`.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use pilot_model::{ConfigMeta, ConfigStore, DynConfig, KindRegistry, KindSchema};
//! use pilot_store_memory::journal::{self, JournalOptions};
//!
//! let registry = KindRegistry::new();
//! registry.register_schema(KindSchema::new("Note", "notes", "example.com", "v1", |_, _| {})).unwrap();
//! let dir = tempfile::tempdir().unwrap();
//! let note = DynConfig { meta: ConfigMeta::new("Note", "default", "n1"), spec: serde_json::json!({"text": "hi"}) };
//! let key = note.key();
//! {
//!     let store = journal::open(dir.path(), registry.clone(), JournalOptions::default()).unwrap();
//!     store.create(note).await.unwrap();
//! }
//! let store = journal::open(dir.path(), registry, JournalOptions::default()).unwrap();
//! let restored = store.get(&key).await.unwrap().unwrap();
//! assert_eq!(restored.meta.resource_version.as_deref(), Some("1"));
//! # });
//! ```
//!
//! # Files
//! - `snapshot.json`: `{"revision": N, "objects": [document, ...]}`, the
//!   state at revision N, replaced atomically (written beside as
//!   `snapshot.json.tmp`, fsynced, renamed, directory fsynced);
//! - `journal-<R, 20 digits>.jsonl`: a segment of writes from revision R
//!   on, one record a line: `CRC32 JSON`, the JSON being
//!   `{"revision": N, "put": document}` or
//!   `{"revision": N, "delete": {"kind", "namespace", "name"}}` (see
//!   `record.rs` for adding a record type). `journal.jsonl`, from versions
//!   before segments, is read as the oldest segment;
//! - `quarantine.jsonl`: objects that no longer validated at an open,
//!   each `{"key", "reason", "object"}`;
//! - `lock`: locked while a store has the directory (one at a time).
//!
//! Compaction folds closed segments into a new snapshot on a background
//! thread every [`JournalOptions::compact_after`] writes; writes go on in a
//! new segment meanwhile (the steps, and why a crash between any two loses
//! nothing, are in `writer.rs`).
//!
//! # Damage
//! At [`open`]:
//! - a partial last record (a crash mid-append, whose write was not
//!   acknowledged, unless something else cut the file) is skipped with a
//!   warning that says both; the segment as found is kept aside as
//!   `<segment>.torn-<unix time>`, then cut back to its complete records;
//!   the revision the partial record names is never handed out again;
//! - a complete record that fails its checksum or does not parse is
//!   corruption: [`JournalError::Corrupt`] names the file, byte offset and
//!   line, and no file is changed;
//! - a stored object that no longer validates is quarantined: logged with
//!   every error, left out of the store, appended to `quarantine.jsonl`,
//!   and listed by [`JournaledStore::quarantined`].
//!
//! Records are fuzzed: feature `fuzzing` exposes the record reader as
//! `journal::fuzzing::segment` for the fuzz target `journal_records`.

mod error;
mod files;
#[cfg(feature = "fuzzing")]
#[cfg_attr(docsrs, doc(cfg(feature = "fuzzing")))]
pub mod fuzzing;
mod load;
mod record;
mod store;
#[cfg(test)]
mod tests;
mod writer;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use pilot_model::{FieldError, KindRegistry, StoreError};
use pilot_store::DEFAULT_HISTORY;

pub use error::JournalError;
pub use store::{CompactionStatus, JournaledStore, Quarantined};

use crate::MemoryConfigStore;
use files::{LOCK, SNAPSHOT_TEMPORARY, append_quarantine, sync_dir};
use writer::{Journal, Start};

/// Writes kept in the active journal segment before it is folded into a
/// new snapshot, by default.
pub const COMPACT_AFTER: usize = 1000;

/// How [`open`] sets up the store.
#[derive(Debug, Clone)]
pub struct JournalOptions {
    /// Writes kept for watches to resume from ([`DEFAULT_HISTORY`]).
    pub history: usize,
    /// Writes after which the journal is folded into a new snapshot
    /// ([`COMPACT_AFTER`]).
    pub compact_after: usize,
    /// Compact under the store's write lock (the naive design): writes
    /// wait for the snapshot. Only for comparison (the
    /// `journal` benchmark); false by default.
    pub blocking_compaction: bool,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions {
            history: DEFAULT_HISTORY,
            compact_after: COMPACT_AFTER,
            blocking_compaction: false,
        }
    }
}

/// Opens (creating it if needed) the store persisted in `dir`: the last
/// snapshot with the journal replayed on top, stored objects validated
/// against `registry` (those that fail are quarantined). Older segments
/// are folded into a new snapshot in the background.
pub fn open(
    dir: &Path,
    registry: KindRegistry,
    options: JournalOptions,
) -> Result<JournaledStore, JournalError> {
    open_inner(dir, registry, options, None)
}

fn open_inner(
    dir: &Path,
    registry: KindRegistry,
    options: JournalOptions,
    crash: writer::CrashAt,
) -> Result<JournaledStore, JournalError> {
    std::fs::create_dir_all(dir).map_err(JournalError::io(dir, "create the directory"))?;
    let lock = File::create(dir.join(LOCK)).map_err(JournalError::io(dir.join(LOCK), "create it"))?;
    lock.try_lock().map_err(|e| JournalError::InUse {
        dir: dir.to_path_buf(),
        source: match e {
            std::fs::TryLockError::Error(e) => e,
            std::fs::TryLockError::WouldBlock => std::io::ErrorKind::WouldBlock.into(),
        },
    })?;
    sync_dir(dir).map_err(JournalError::io(dir, "sync the directory"))?;
    let loaded = load::load(dir, &registry)?;
    if let Some((path, complete)) = &loaded.torn {
        keep_torn_aside(path, *complete)?;
    }
    // A snapshot a crash left half-written is of no use.
    match std::fs::remove_file(dir.join(SNAPSHOT_TEMPORARY)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(JournalError::io(dir.join(SNAPSHOT_TEMPORARY), "remove it")(e));
        }
        _ => {}
    }
    let mut valid = BTreeMap::new();
    let mut quarantined = Vec::new();
    for (key, object) in loaded.objects {
        let checked = match registry.prepare((*object).clone()) {
            Ok(checked) => checked,
            Err(error) => {
                tracing::error!(key = %key, %error, "stored object no longer passes validation: quarantined (not served; kept in {})", files::QUARANTINE);
                let errors = match &error {
                    StoreError::Invalid { errors, .. } => errors.clone(),
                    other => vec![FieldError::new("", other.to_string())],
                };
                quarantined.push(Quarantined {
                    reason: error.to_string(),
                    key,
                    errors,
                    object,
                });
                continue;
            }
        };
        // Keep what was stored (version, creation time) with the filled-in
        // group and version; share the allocation when nothing changed.
        let object = if checked.meta.group == object.meta.group && checked.meta.version == object.meta.version
        {
            object
        } else {
            let mut filled = (*object).clone();
            filled.meta.group = checked.meta.group;
            filled.meta.version = checked.meta.version;
            Arc::new(filled)
        };
        valid.insert(key, object);
    }
    if !quarantined.is_empty() {
        let lines: Vec<serde_json::Value> = quarantined
            .iter()
            .map(|q| serde_json::json!({"key": q.key.to_string(), "reason": q.reason, "object": &*q.object}))
            .collect();
        append_quarantine(dir, &lines)
            .map_err(JournalError::io(dir.join(files::QUARANTINE), "append to it"))?;
    }
    let revision = loaded.revision;
    tracing::info!(dir = %dir.display(), revision, objects = valid.len(), quarantined = quarantined.len(), "restored the memory store");
    let journal = Arc::new(Journal::start(Start {
        dir: dir.to_path_buf(),
        lock,
        revision,
        objects: valid.clone(),
        compact_after: options.compact_after,
        blocking: options.blocking_compaction,
        crash,
    })?);
    // Fold what was replayed (and leave the quarantined out of the
    // snapshot) while the store serves.
    let replayed = loaded.segments.iter().any(|s| s.first != revision + 1);
    if replayed || !quarantined.is_empty() {
        journal.compact_now();
    }
    let store = MemoryConfigStore::restore(
        registry,
        options.history,
        valid.into_values(),
        revision,
        Arc::clone(&journal) as Arc<dyn crate::WriteAhead>,
    );
    Ok(JournaledStore::new(
        store,
        journal,
        dir.to_path_buf(),
        quarantined,
    ))
}

/// Keeps a copy of the torn segment as `<segment>.torn-<unix time>`, then
/// cuts the segment back to its complete records.
fn keep_torn_aside(path: &Path, complete: u64) -> Result<(), JournalError> {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let mut aside = path.as_os_str().to_owned();
    aside.push(format!(".torn-{seconds}"));
    let aside = std::path::PathBuf::from(aside);
    std::fs::copy(path, &aside)
        .and_then(|_| File::open(&aside).and_then(|f| f.sync_all()))
        .map_err(JournalError::io(
            &aside,
            "keep the torn journal segment aside as it",
        ))?;
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(complete).and_then(|()| f.sync_all()))
        .map_err(JournalError::io(path, "cut the partial record off"))?;
    if let Some(dir) = path.parent() {
        sync_dir(dir).map_err(JournalError::io(dir, "sync the directory"))?;
    }
    tracing::warn!(kept = %aside.display(), "the journal segment as found is kept aside for inspection");
    Ok(())
}
