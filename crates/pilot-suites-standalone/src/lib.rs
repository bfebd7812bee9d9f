//! Test-only: `tests/suites.rs` runs every conformance suite of
//! `pilot_store::testing` on a store, a registry and memberships written
//! here, from a crate whose only dependencies are `pilot-model` and
//! `pilot-store` with its `testing` feature. If a suite's macro or trait
//! needed `async-trait`, `futures` or `tokio` in the caller's crate, this
//! crate would not build.
