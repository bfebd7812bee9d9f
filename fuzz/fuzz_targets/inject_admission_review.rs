//! An AdmissionReview sent to the injection webhook: a review back with its
//! uid, and a patch that applies and is not applied twice.
//! The check: `pilot_fuzz_targets::inject_admission_review`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pilot_fuzz_targets::inject_admission_review(data));
