//! An AdmissionReview sent to the validating webhook: a review back with
//! its uid (400 without one), a denial with its reason, a dry run judged
//! as the request without it.
//! The check: `pilot_fuzz_targets::validate_admission_review`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pilot_fuzz_targets::validate_admission_review(data));
