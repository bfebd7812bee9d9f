//! Any bytes given to the document reader give objects or errors, never a
//! panic, a hang or unbounded memory; what parses survives a YAML round trip.
//! The check: `pilot_fuzz_targets::parse_documents`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pilot_fuzz_targets::parse_documents(data));
