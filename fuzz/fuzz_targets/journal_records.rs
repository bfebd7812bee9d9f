//! A segment of the file store's journal: records that read or are refused
//! as corrupt, and each record that reads is written back the same.
//! The check: `pilot_fuzz_targets::journal_records`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pilot_fuzz_targets::journal_records(data));
