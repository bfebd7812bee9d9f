//! Request bodies on the ADS port: gRPC framing and discovery requests,
//! cut into chunks where the input says.
//! The check: `pilot_fuzz_targets::ads_requests`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pilot_fuzz_targets::ads_requests(data));
