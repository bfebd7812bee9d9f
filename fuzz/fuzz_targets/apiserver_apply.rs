//! A server-side apply configuration sent to the REST API: refused, a
//! conflict that force resolves, or an object that reads and replaces again.
//! The check: `pilot_fuzz_targets::apiserver_apply`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pilot_fuzz_targets::apiserver_apply(data));
