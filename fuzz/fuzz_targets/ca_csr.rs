//! A certificate signing request as the CA receives it: refused, or signed
//! for the identity it asks with a chain that verifies and certifies its key.
//! The check: `pilot_fuzz_targets::ca_csr`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pilot_fuzz_targets::ca_csr(data));
