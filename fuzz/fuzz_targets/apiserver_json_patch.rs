//! A JSON patch sent to the REST API: refused, or an object that reads back
//! as answered and is accepted again as a replace.
//! The check: `pilot_fuzz_targets::apiserver_json_patch`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pilot_fuzz_targets::apiserver_json_patch(data));
