//! One journal record: `CRC32 JSON\n`, the checksum (8 hex digits, IEEE)
//! of the JSON `{"revision": N, "<type>": payload}`.
//!
//! The record's type is the name of its one payload field (`put`,
//! `delete`); a reader that meets a type it does not know refuses the
//! journal as corrupt rather than skip a write. Adding a type (e.g. an
//! object's status) is one variant in [`Change`], one arm where it is
//! encoded ([`encode`]) and one where it is applied (`load.rs`).

use std::sync::Arc;

use pilot_model::{ConfigKey, DynConfig, Revision};
use serde::{Deserialize, Serialize};

/// What one record changes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Change {
    /// The object is stored (created or replaced).
    Put(Arc<DynConfig>),
    /// The object with this key is deleted.
    Delete(ConfigKey),
}

/// A record as written: borrows the object, so nothing is copied.
#[derive(Serialize)]
struct RecordOut<'a> {
    revision: Revision,
    #[serde(skip_serializing_if = "Option::is_none")]
    put: Option<&'a DynConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delete: Option<&'a ConfigKey>,
}

/// A record as read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordIn {
    revision: Revision,
    #[serde(default)]
    put: Option<DynConfig>,
    #[serde(default)]
    delete: Option<ConfigKey>,
}

/// The line (with its newline) that records `change` at `revision`.
pub(crate) fn encode(revision: Revision, change: &Change) -> Result<Vec<u8>, serde_json::Error> {
    let record = match change {
        Change::Put(config) => RecordOut {
            revision,
            put: Some(config),
            delete: None,
        },
        Change::Delete(key) => RecordOut {
            revision,
            put: None,
            delete: Some(key),
        },
    };
    let json = serde_json::to_vec(&record)?;
    let mut line = Vec::with_capacity(json.len() + 10);
    line.extend_from_slice(format!("{:08x} ", crc32(&json)).as_bytes());
    line.extend_from_slice(&json);
    line.push(b'\n');
    Ok(line)
}

/// One line (without its newline): `CRC32 JSON`, or JSON alone (journals
/// written before checksums).
pub(crate) fn decode(line: &[u8]) -> Result<(Revision, Change), String> {
    let json = if line.first() == Some(&b'{') {
        line
    } else {
        let (Some(sum), Some(json)) = (line.get(..8), line.get(9..)) else {
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
    let record: RecordIn = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    let change = match (record.put, record.delete) {
        // A put is written with the kind's name (its group is in
        // `apiVersion`), which has no dots: one with a dot was not written
        // by `encode`.
        (Some(config), None) if config.meta.kind.contains('.') => {
            return Err(format!("put: kind {:?} is not a kind name", config.meta.kind));
        }
        (Some(config), None) => Change::Put(Arc::new(config)),
        (None, Some(key)) => Change::Delete(key),
        _ => return Err("neither or both of put and delete".into()),
    };
    Ok((record.revision, change))
}

/// The revision a partial record names, if it got that far.
pub(crate) fn partial_revision(tail: &[u8]) -> Option<Revision> {
    let partial = String::from_utf8_lossy(tail);
    partial
        .split_once("\"revision\":")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse::<Revision>().ok())
}

/// CRC-32 (IEEE), bit by bit: records are short and fsync dominates.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
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

#[cfg(test)]
mod tests {
    use super::*;
    use pilot_model::ConfigMeta;

    #[test]
    fn crc32_is_the_ieee_one() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn records_round_trip_and_checksums_catch_a_flipped_byte() {
        let config = Arc::new(DynConfig {
            meta: ConfigMeta::new("K", "ns", "a"),
            spec: serde_json::json!({"x": 1}),
        });
        let line = encode(7, &Change::Put(Arc::clone(&config))).unwrap();
        assert!(line.ends_with(b"\n"));
        let body = &line[..line.len() - 1];
        assert_eq!(decode(body).unwrap(), (7, Change::Put(config.clone())));
        let mut flipped = body.to_vec();
        let at = flipped.len() - 3;
        flipped[at] ^= 0x01;
        assert_eq!(decode(&flipped).unwrap_err(), "checksum mismatch");
        let delete = encode(8, &Change::Delete(config.key())).unwrap();
        assert_eq!(
            decode(&delete[..delete.len() - 1]).unwrap(),
            (8, Change::Delete(config.key()))
        );
        // Journals from before checksums: JSON alone.
        assert_eq!(decode(&line[9..line.len() - 1]).unwrap().0, 7);
        // A type this version does not know is refused, not skipped.
        let unknown = br#"{"revision":9,"status":{"phase":"ok"}}"#;
        assert!(decode(unknown).is_err());
        assert_eq!(
            partial_revision(br#"0badf00d {"revision":12,"put":{"me"#),
            Some(12)
        );
    }
}
