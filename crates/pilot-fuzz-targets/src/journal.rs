//! The file store's journal: `pilot_store_memory::journal::fuzzing`.

/// Reads `data` as a journal segment; the check is in
/// `pilot_store_memory::journal::fuzzing::segment`.
pub(crate) fn journal_records(data: &[u8]) {
    // Corrupt records are refused (an error, as `open` reports it): the
    // property is that what reads is written back the same.
    let _ = pilot_store_memory::journal::fuzzing::segment(data);
}

#[cfg(test)]
mod tests {
    use pilot_store_memory::journal::fuzzing::segment;

    fn corpus(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/../../fuzz/corpus/journal_records/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn the_corpus_reaches_records_that_read_and_corrupt_ones() {
        assert_eq!(segment(&corpus("segment.jsonl")), Ok(3));
        assert_eq!(segment(&corpus("torn-tail.jsonl")), Ok(1));
        assert_eq!(segment(&corpus("before-checksums.jsonl")), Ok(1));
        // An integer no integer type holds reads as the nearest f64, and
        // is written back as a number that reads as that same f64.
        assert_eq!(segment(&corpus("huge-integer.jsonl")), Ok(1));
        for corrupt in [
            "checksum-mismatch.jsonl",
            "unknown-type.jsonl",
            "both-put-and-delete.jsonl",
            "dotted-kind.jsonl",
        ] {
            assert!(segment(&corpus(corrupt)).is_err(), "{corrupt} reads");
        }
    }
}
