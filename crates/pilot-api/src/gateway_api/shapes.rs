//! The patterns the Gateway API's CRDs give its common string types, for
//! the OpenAPI schemas pilot publishes of its kinds (each checked by the
//! kinds' validation too, `patterns.rs`).

/// An API group: empty (the core group) or a DNS subdomain.
pub(crate) const GROUP: &str = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// A kind: a letter, then letters, digits and dashes, not ending in a dash.
pub(crate) const KIND: &str = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$";

/// A namespace: a DNS label.
pub(crate) const NAMESPACE: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// A DNS subdomain: a section name, a rule name, a precise hostname.
pub(crate) const SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// A hostname, its first label possibly the wildcard `*`.
pub(crate) const HOSTNAME: &str = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// An HTTP header name (an RFC 7230 token).
pub(crate) const HEADER_NAME: &str = r"^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$";

/// An HTTP header value: visible characters, single spaces or tabs between.
pub(crate) const HEADER_VALUE: &str = r"^[!-~]+([\t ]?[!-~]+)*$";

/// A Gateway API duration: up to four numbers of at most five digits, each
/// with its unit (`h`, `m`, `s`, `ms`).
pub(crate) const DURATION: &str = r"^([0-9]{1,5}(h|m|s|ms)){1,4}$";
