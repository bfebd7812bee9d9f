//! The journal's record reader for fuzz targets and their corpus replay
//! (feature `fuzzing`). Not an API for anything else.

use super::record::{decode, encode, partial_revision};

/// Reads `bytes` as one journal segment, as [`open`](super::open) reads a
/// segment file: every complete line (up to a newline) is one record, a
/// tail without a newline is a partial record. Returns how many records
/// read, or why the first that does not read is corrupt.
///
/// Panics when a record that reads is not written back as a record that
/// reads the same (revision, and the object put or the key deleted), or
/// when writing it twice gives two different lines: what a reopened
/// store would restore is then not what was written.
pub fn segment(bytes: &[u8]) -> Result<usize, String> {
    let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |end| end + 1);
    let mut read = 0;
    for (number, line) in bytes[..complete].split_inclusive(|b| *b == b'\n').enumerate() {
        let line = &line[..line.len() - 1];
        if line.is_empty() {
            return Err(format!("line {}: an empty line", number + 1));
        }
        let (revision, change) = decode(line).map_err(|reason| format!("line {}: {reason}", number + 1))?;
        let written = match encode(revision, &change) {
            Ok(written) => written,
            Err(e) => panic!("line {}: a record that reads cannot be written: {e}", number + 1),
        };
        let Some(body) = written.strip_suffix(b"\n") else {
            panic!("line {}: a written record does not end in a newline", number + 1)
        };
        match decode(body) {
            Ok(again) => assert!(
                again == (revision, change.clone()),
                "line {}: the record written back reads differently: {again:?}, not {:?}",
                number + 1,
                (revision, change)
            ),
            Err(reason) => panic!(
                "line {}: the record written back does not read: {reason}",
                number + 1
            ),
        }
        let twice = encode(revision, &change).map_err(|e| e.to_string());
        assert!(
            twice.as_ref() == Ok(&written),
            "line {}: writing the same record twice gives two lines",
            number + 1
        );
        read += 1;
    }
    // A partial record names at most a revision; it never panics.
    let _ = partial_revision(&bytes[complete..]);
    Ok(read)
}
