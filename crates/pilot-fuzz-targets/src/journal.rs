//! The file store's journal: `pilot_store_memory::journal::fuzzing`.

/// Reads `data` as a journal segment; the check is in
/// `pilot_store_memory::journal::fuzzing::segment`.
pub(crate) fn journal_records(data: &[u8]) {
    // Corrupt records are refused (an error, as `open` reports it): the
    // property is that what reads is written back the same.
    let _ = pilot_store_memory::journal::fuzzing::segment(data);
}
