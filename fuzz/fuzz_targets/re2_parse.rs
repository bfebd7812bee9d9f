//! A regular expression of a routing rule: RE2's verdict as Envoy reads it,
//! consistent with its program size.
//! The check: `pilot_fuzz_targets::re2_parse`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pilot_fuzz_targets::re2_parse(data));
