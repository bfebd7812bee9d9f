//! Sidecar assembly: a sidecar's listeners from the leaf builders
//! (`build/`).
//!
//! - `outbound.rs`: its outbound listeners (per HTTP port, per TCP service
//!   port) and, with capture, the virtual listener.
//! - `inbound.rs`: the inbound listeners of its own instances, with
//!   authorization and mutual TLS.
//! - Its Sidecar's own listeners, within its scope: which hosts each
//!   carries (`layout.rs`), egress listeners with a port (`egress.rs`) or
//!   on a Unix domain socket (`unix.rs`), and ingress listeners in place
//!   of the inbound ones (`ingress.rs`).

pub(crate) mod egress;
pub(crate) mod inbound;
pub(crate) mod ingress;
pub(crate) mod layout;
pub(crate) mod outbound;
pub(crate) mod unix;
