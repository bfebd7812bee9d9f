//! [`JournalError`]: why a data directory could not be opened or compacted.

use std::path::PathBuf;

use pilot_model::Revision;

/// Why a data directory could not be opened (or a compaction failed).
/// Every variant names the file concerned; none of them changed a file.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// A file operation failed.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done, e.g. `read it`.
        action: &'static str,
        /// The system's error.
        source: std::io::Error,
    },
    /// Another store (in this or another process) has the directory.
    #[error(
        "data directory {}: it is in use by another process or store (cannot lock its `lock` file: {source})",
        dir.display()
    )]
    InUse {
        /// The directory.
        dir: PathBuf,
        /// The lock's error.
        source: std::io::Error,
    },
    /// A complete journal record fails its checksum or does not parse: it
    /// may hold an acknowledged write, so the store does not start.
    #[error(
        "{}: the record at byte {offset} (line {line}) is corrupt ({reason}); nothing was changed. \
         It may hold acknowledged writes: inspect the file, then move it out of the directory to \
         start without it",
        file.display()
    )]
    Corrupt {
        /// The journal segment.
        file: PathBuf,
        /// The record's first byte in the file.
        offset: u64,
        /// The record's line number, from 1.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The snapshot does not parse.
    #[error("{}: the snapshot is unreadable ({reason}); nothing was changed", file.display())]
    Snapshot {
        /// The snapshot file.
        file: PathBuf,
        /// The parser's error.
        reason: String,
    },
    /// Journal records between the snapshot and the oldest segment are
    /// missing (a segment was removed by hand).
    #[error(
        "data directory {}: the snapshot ends at revision {snapshot} but the oldest journal segment \
         starts at {first}: the records in between are missing; nothing was changed",
        dir.display()
    )]
    Missing {
        /// The directory.
        dir: PathBuf,
        /// The snapshot's revision.
        snapshot: Revision,
        /// The first revision of the oldest segment.
        first: Revision,
    },
}

impl JournalError {
    pub(crate) fn io(path: impl Into<PathBuf>, action: &'static str) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| JournalError::Io { path, action, source }
    }
}
