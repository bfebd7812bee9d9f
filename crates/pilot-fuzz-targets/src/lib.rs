//! The fuzz targets' checks: one function per parser that takes bytes
//! from a socket or a user, with the property it checks beyond "no
//! panic".
//!
//! Each function is the whole body of one cargo-fuzz target in `fuzz/`
//! (`fuzz/fuzz_targets/<name>.rs` is `fuzz_target!(|data: &[u8]|
//! pilot_fuzz_targets::<name>(data));`) and of the replay of that
//! target's corpus, `fuzz/corpus/<name>/`, as an ordinary test
//! (`tests/corpus.rs`): what the fuzzer runs in CI and what
//! `cargo nextest run --workspace` replays are the same call. A function
//! panics when its input breaks the property it checks: that is the crash
//! the fuzzer reports, and the input, added to the corpus, the regression
//! test.
//!
//! [`TARGETS`] lists them; the corpus test fails for a target of
//! `fuzz/Cargo.toml` missing from it, or without a corpus. How to run and
//! add one: `docs/guide/testing.md`.
//!
//! ```
//! // Any bytes: an answer or a refusal, never a panic.
//! pilot_fuzz_targets::re2_parse(b"(a|b)*c{2,3}");
//! pilot_fuzz_targets::inject_admission_review(b"not json");
//! pilot_fuzz_targets::validate_admission_review(b"not json");
//! pilot_fuzz_targets::journal_records(b"0badf00d {\"revision\":1}\n");
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod admission;
mod ads;
mod apiserver;
mod csr;
mod documents;
mod journal;
mod re2;

/// One fuzz target: its name (the `[[bin]]` of `fuzz/Cargo.toml` and the
/// directory of its corpus) and its check.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// The target's name: `fuzz/fuzz_targets/<name>.rs`,
    /// `fuzz/corpus/<name>/`.
    pub name: &'static str,
    /// The check the target and the corpus replay run on each input.
    pub run: fn(&[u8]),
}

/// Declares each target's function (the one-line body of its fuzz target)
/// and lists it in [`TARGETS`].
macro_rules! targets {
    ($($(#[doc = $doc:literal])* $name:ident => $check:path;)*) => {
        $(
            $(#[doc = $doc])*
            pub fn $name(data: &[u8]) {
                $check(data)
            }
        )*

        /// Every fuzz target, by name.
        pub const TARGETS: &[Target] = &[$(Target { name: stringify!($name), run: $name }),*];
    };
}

targets! {
    /// A YAML or JSON file of configuration (`pilotctl create -f`, the
    /// REST API's bodies, the file backend): objects or errors; whatever
    /// parses is written as YAML and reads back the same objects.
    parse_documents => documents::parse_documents;
    /// A certificate signing request as the CA's gRPC service receives it
    /// (PEM, or DER put in PEM): what parses is signed for the identity it
    /// asks (or another of the trust domain), and the issued chain
    /// verifies, names that identity and certifies the request's own key;
    /// a request for another identity is refused.
    ca_csr => csr::ca_csr;
    /// A regular expression as routing rules carry it: RE2's verdict as
    /// Envoy reads it, and the program size agrees with the verdict.
    re2_parse => re2::re2_parse;
    /// A JSON merge patch sent to the REST API on a stored VirtualService:
    /// a patch the API accepts gives an object that a read returns as
    /// answered and that a replace with that object accepts again.
    apiserver_merge_patch => apiserver::merge_patch;
    /// A JSON patch (RFC 6902) sent to the REST API: as for the merge
    /// patch.
    apiserver_json_patch => apiserver::json_patch;
    /// A server-side apply configuration (YAML) sent to the REST API by a
    /// second field manager: a conflict is resolved by `force`, and what
    /// is applied reads and replaces again.
    apiserver_apply => apiserver::apply;
    /// An `AdmissionReview` sent to the injection webhook: always a review
    /// back with the request's uid; a JSON patch it answers applies to the
    /// pod, and the patched pod is not injected twice.
    inject_admission_review => admission::inject_admission_review;
    /// An `AdmissionReview` sent to the validating webhook: always a review
    /// back (with the request's uid when it has one, HTTP 400 otherwise),
    /// a denial says why, a dry run is judged as the same request without
    /// it, and a DELETE is admitted.
    validate_admission_review => admission::validate_admission_review;
    /// A segment of the file store's journal: every complete record reads
    /// or is refused as corrupt, and a record that reads is written back as
    /// the same record.
    journal_records => journal::journal_records;
    /// Request bodies on the ADS port, cut into chunks where the input
    /// says: the gRPC deframer under a request budget, then the
    /// state-of-the-world and delta request decoders; decoded or refused,
    /// never a panic.
    ads_requests => ads::ads_requests;
}
