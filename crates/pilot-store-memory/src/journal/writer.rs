//! The journal of a running store: appends each write to the active
//! segment (fsynced, under the store's write lock), and folds segments into
//! a snapshot on a compaction thread while writes go on.
//!
//! Compaction, step by step (a crash after any step recovers every
//! acknowledged write, see the module tests):
//! 1. under the write lock: open a new segment at the next revision, hand
//!    the closed segments' changes (shared `Arc`s, no copies) to the
//!    compaction thread; writes now go to the new segment;
//! 2. on the thread, no lock held: apply those changes to its own view of
//!    the last snapshot, which is now the state at the rotation's
//!    revision, and stream it into `snapshot.json.tmp`, fsynced;
//! 3. rename it over `snapshot.json`, fsync the directory;
//! 4. remove the segments whose records are all in the snapshot, fsync the
//!    directory.
//!
//! Only one compaction runs at a time: while one does, the active segment
//! grows past the threshold, and the next rotation waits for it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use pilot_model::{ConfigKey, DynConfig, Revision, StoreError};

use super::error::JournalError;
use super::files::{open_segment, segments, sync_dir, write_snapshot};
use super::record::{Change, encode};
use crate::{PendingWrite, WriteAhead};

/// A step of a compaction after which a test stops it, leaving the files
/// as a crash there would.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CrashPoint {
    /// After the rotation, before any snapshot byte.
    Rotated,
    /// Halfway through writing the temporary snapshot.
    SnapshotHalfWritten,
    /// The temporary snapshot synced, not renamed.
    SnapshotWritten,
    /// The snapshot installed, old segments not yet removed.
    SnapshotInstalled,
}

/// Where a test stops compactions (never, outside tests).
#[cfg(test)]
pub(crate) type CrashAt = Option<CrashPoint>;
/// Where a test stops compactions (never, outside tests).
#[cfg(not(test))]
pub(crate) type CrashAt = Option<std::convert::Infallible>;

/// A compaction for the thread: the state at `revision` is its view plus
/// `changes`.
struct Job {
    revision: Revision,
    changes: Vec<Change>,
}

/// Whether a compaction runs, and how the last one ended.
#[derive(Default)]
pub(crate) struct Progress {
    state: Mutex<ProgressState>,
    idle: Condvar,
}

#[derive(Default)]
struct ProgressState {
    running: bool,
    completed: u64,
    last_error: Option<String>,
}

impl Progress {
    fn lock(&self) -> MutexGuard<'_, ProgressState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn finish(&self, result: Result<(), String>) {
        let mut state = self.lock();
        state.running = false;
        match result {
            Ok(()) => {
                state.completed += 1;
                state.last_error = None;
            }
            Err(error) => state.last_error = Some(error),
        }
        self.idle.notify_all();
    }

    /// True while a compaction runs.
    pub(crate) fn running(&self) -> bool {
        self.lock().running
    }

    /// Blocks until no compaction runs; the number completed so far and
    /// the last one's error, if it failed.
    pub(crate) fn wait_idle(&self) -> (u64, Option<String>) {
        let mut state = self.lock();
        while state.running {
            state = self.idle.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        (state.completed, state.last_error.clone())
    }
}

/// The segment being appended to, and the changes not yet handed to the
/// compaction thread.
struct Active {
    file: File,
    path: PathBuf,
    /// Revision of the last record (or of the state at open).
    revision: Revision,
    /// Changes since the last rotation, oldest first.
    changes: Vec<Change>,
}

/// The [`WriteAhead`] of a journaled store.
pub(crate) struct Journal {
    dir: PathBuf,
    compact_after: usize,
    blocking: bool,
    active: Mutex<Active>,
    progress: Arc<Progress>,
    jobs: Mutex<Option<Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Held (locked) while the store lives.
    _lock: File,
}

/// How a [`Journal`] starts.
pub(crate) struct Start {
    pub(crate) dir: PathBuf,
    pub(crate) lock: File,
    pub(crate) revision: Revision,
    /// The state at `revision`: the compaction thread's first view.
    pub(crate) objects: BTreeMap<ConfigKey, Arc<DynConfig>>,
    pub(crate) compact_after: usize,
    pub(crate) blocking: bool,
    pub(crate) crash: CrashAt,
}

impl Journal {
    /// Opens the segment at `start.revision + 1` and starts the compaction
    /// thread.
    pub(crate) fn start(start: Start) -> Result<Journal, JournalError> {
        let (file, path) = open_segment(&start.dir, start.revision + 1)
            .map_err(JournalError::io(&start.dir, "create a journal segment"))?;
        let (jobs, receiver) = std::sync::mpsc::channel();
        let progress = Arc::new(Progress::default());
        let thread = {
            let dir = start.dir.clone();
            let progress = Arc::clone(&progress);
            let base = start.objects;
            let crash = start.crash;
            std::thread::Builder::new()
                .name("journal-compaction".into())
                .spawn(move || compaction_thread(&dir, base, receiver, &progress, crash))
                .map_err(JournalError::io(&start.dir, "start the compaction thread"))?
        };
        Ok(Journal {
            dir: start.dir,
            compact_after: start.compact_after.max(1),
            blocking: start.blocking,
            active: Mutex::new(Active {
                file,
                path,
                revision: start.revision,
                changes: Vec::new(),
            }),
            progress,
            jobs: Mutex::new(Some(jobs)),
            thread: Mutex::new(Some(thread)),
            _lock: start.lock,
        })
    }

    /// Swaps the active segment's file (a test's full device).
    #[cfg(test)]
    pub(crate) fn replace_active_file(&self, file: File, path: PathBuf) {
        let mut active = self.lock_active();
        active.file = file;
        active.path = path;
    }

    pub(crate) fn progress(&self) -> &Progress {
        &self.progress
    }

    /// Starts a compaction of everything written so far, unless one runs
    /// or there is nothing to fold. True if one was started.
    pub(crate) fn compact_now(&self) -> bool {
        let mut active = self.lock_active();
        self.rotate(&mut active, true)
    }

    fn lock_active(&self) -> MutexGuard<'_, Active> {
        self.active.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Steps 1 of a compaction (module docs), if none runs. `forced` also
    /// rotates a segment below the threshold, or an empty one (to fold
    /// older segments after an open).
    fn rotate(&self, active: &mut Active, forced: bool) -> bool {
        if !forced && active.changes.len() < self.compact_after {
            return false;
        }
        {
            let mut progress = self.progress.lock();
            if progress.running {
                return false;
            }
            progress.running = true;
        }
        let next = active.revision + 1;
        match open_segment(&self.dir, next) {
            Ok((file, path)) => {
                active.file = file;
                active.path = path;
            }
            Err(error) => {
                tracing::warn!(%error, dir = %self.dir.display(), "cannot open a new journal segment; the journal is compacted later");
                self.progress.finish(Err(error.to_string()));
                return false;
            }
        }
        let job = Job {
            revision: active.revision,
            changes: std::mem::take(&mut active.changes),
        };
        let unsent = match &*self.jobs.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(jobs) => jobs.send(job).err().map(|e| e.0),
            None => Some(job),
        };
        if let Some(job) = unsent {
            // Keep the changes for a later try: a snapshot without them
            // would lose writes once their segment is removed.
            active.changes = job.changes;
            self.progress
                .finish(Err("the compaction thread has stopped".into()));
            return false;
        }
        if self.blocking {
            // The naive design, for comparison: writes wait.
            self.progress.wait_idle();
        }
        true
    }

    fn failed(&self, path: &Path, error: std::io::Error) -> StoreError {
        StoreError::unavailable(format!(
            "cannot write the journal {}: {error}; nothing was changed",
            path.display()
        ))
    }
}

impl WriteAhead for Journal {
    fn record(&self, write: PendingWrite<'_>) -> Result<(), StoreError> {
        let (revision, change) = match write {
            PendingWrite::Put { revision, config } => (revision, Change::Put(Arc::clone(config))),
            PendingWrite::Delete { revision, key } => (revision, Change::Delete(key.clone())),
        };
        let line = encode(revision, &change).map_err(StoreError::unavailable)?;
        // Writes reach us one at a time under the store's write lock; this
        // lock guards the file against compact_now, never across an await.
        let mut active = self.lock_active();
        let active = &mut *active;
        let before = active
            .file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| self.failed(&active.path, e))?;
        let written = active
            .file
            .write_all(&line)
            .and_then(|()| active.file.sync_data());
        if let Err(error) = written {
            // Leave the file as it was, so a restart does not replay a
            // write the caller was told had failed.
            let _ = active.file.set_len(before).and_then(|()| active.file.sync_data());
            return Err(self.failed(&active.path, error));
        }
        // Durable; the store applies it next.
        active.revision = revision;
        active.changes.push(change);
        self.rotate(active, false);
        Ok(())
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        // Closing the channel ends the thread after the compaction it runs.
        drop(self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(thread) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = thread.join();
        }
    }
}

/// Steps 2 to 4 of each compaction (module docs), one job at a time.
fn compaction_thread(
    dir: &Path,
    mut base: BTreeMap<ConfigKey, Arc<DynConfig>>,
    jobs: Receiver<Job>,
    progress: &Progress,
    crash: CrashAt,
) {
    for job in jobs {
        for change in job.changes {
            match change {
                Change::Put(config) => {
                    base.insert(config.key(), config);
                }
                Change::Delete(key) => {
                    base.remove(&key);
                }
            }
        }
        let started = std::time::Instant::now();
        // A panic while writing (the view is only read) fails this
        // compaction, not the thread: the segments stay, the next one tries
        // again.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            compact(dir, job.revision, &base, crash)
        }))
        .unwrap_or_else(|_| Err("the compaction panicked".into()));
        match &result {
            Ok(()) => tracing::debug!(
                revision = job.revision,
                objects = base.len(),
                elapsed = ?started.elapsed(),
                "journal folded into a snapshot"
            ),
            Err(error) => {
                tracing::warn!(%error, dir = %dir.display(), "journal not compacted; the segments stay until the next try")
            }
        }
        progress.finish(result);
    }
}

/// Writes the snapshot at `revision`, installs it, removes the segments it
/// covers.
fn compact(
    dir: &Path,
    revision: Revision,
    objects: &BTreeMap<ConfigKey, Arc<DynConfig>>,
    crash: CrashAt,
) -> Result<(), String> {
    #[cfg(not(test))]
    let _ = crash;
    #[cfg(test)]
    if crash == Some(CrashPoint::Rotated) {
        return Err("crash (test)".into());
    }
    #[cfg(test)]
    if let Some(point @ (CrashPoint::SnapshotHalfWritten | CrashPoint::SnapshotWritten)) = crash {
        return crash_while_writing(dir, revision, objects, point);
    }
    write_snapshot(dir, revision, objects).map_err(|e| format!("cannot write the snapshot: {e}"))?;
    #[cfg(test)]
    if crash == Some(CrashPoint::SnapshotInstalled) {
        return Err("crash (test)".into());
    }
    remove_covered(dir, revision).map_err(|e| format!("cannot remove folded journal segments: {e}"))
}

/// Removes every segment whose records are all at or below `revision`
/// (those followed by a segment starting at or below `revision + 1`).
fn remove_covered(dir: &Path, revision: Revision) -> std::io::Result<()> {
    let all = segments(dir)?;
    let mut removed = false;
    for pair in all.windows(2) {
        if pair[1].first <= revision + 1 {
            std::fs::remove_file(&pair[0].path)?;
            removed = true;
        }
    }
    if removed {
        sync_dir(dir)?;
    }
    Ok(())
}

#[cfg(test)]
fn crash_while_writing(
    dir: &Path,
    revision: Revision,
    objects: &BTreeMap<ConfigKey, Arc<DynConfig>>,
    point: CrashPoint,
) -> Result<(), String> {
    use super::files::{SNAPSHOT, SNAPSHOT_TEMPORARY};
    // Write it whole beside, then put the old one back and leave the new
    // one as the temporary file the crash would have left.
    let old = std::fs::read(dir.join(SNAPSHOT)).ok();
    write_snapshot(dir, revision, objects).map_err(|e| e.to_string())?;
    let new = std::fs::read(dir.join(SNAPSHOT)).map_err(|e| e.to_string())?;
    match old {
        Some(old) => std::fs::write(dir.join(SNAPSHOT), old),
        None => std::fs::remove_file(dir.join(SNAPSHOT)),
    }
    .map_err(|e| e.to_string())?;
    let left = if point == CrashPoint::SnapshotHalfWritten {
        &new[..new.len() / 2]
    } else {
        &new[..]
    };
    std::fs::write(dir.join(SNAPSHOT_TEMPORARY), left).map_err(|e| e.to_string())?;
    Err("crash (test)".into())
}
