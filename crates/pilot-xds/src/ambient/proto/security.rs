//! The messages of Istio's `istio.security` package as ztunnel consumes
//! them over delta xDS (type [`AUTHORIZATION_TYPE`]): one
//! [`Authorization`] per policy, its rules a list of OR-ed [`Rule`]s,
//! each an AND of [`Clause`]s, each an OR of [`Match`]es.
//!
//! Written here with prost's derives; the field names and numbers are the
//! interface, those of the package's published `authorization.proto`
//! (ztunnel's `proto/authorization.proto`). The `extensions` fields
//! (`Authorization` 7, `Match` 13: `istio.workload.Extension`, opaque
//! additions for other consumers) are not defined: pilot sets none, and a
//! decoder skips what it does not know.

/// The type URL of [`Authorization`] resources.
pub const AUTHORIZATION_TYPE: &str = "type.googleapis.com/istio.security.Authorization";

/// One policy as ztunnel enforces it: its connections are matched
/// against the rules, and a match gets the action.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct Authorization {
    /// The policy's name.
    #[prost(string, tag = "1")]
    pub name: ::prost::alloc::string::String,
    /// The policy's namespace (for [`Scope::Namespace`], the namespace
    /// whose workloads it applies to).
    #[prost(string, tag = "2")]
    pub namespace: ::prost::alloc::string::String,
    /// Which workloads it applies to.
    #[prost(enumeration = "Scope", tag = "3")]
    pub scope: i32,
    /// What a matching connection gets.
    #[prost(enumeration = "Action", tag = "4")]
    pub action: i32,
    /// The rules, any of which matches (none: the policy matches nothing).
    #[prost(message, repeated, tag = "5")]
    pub rules: ::prost::alloc::vec::Vec<Rule>,
    /// A dry-run policy is not enforced; its matches are logged.
    #[prost(bool, tag = "6")]
    pub dry_run: bool,
}

/// One rule: all of its clauses must match (the `from`, `to` and each
/// `when` of the policy's rule).
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct Rule {
    /// Its clauses, all of which must match.
    #[prost(message, repeated, tag = "1")]
    pub clauses: ::prost::alloc::vec::Vec<Clause>,
}

/// One clause: any of its matches must match. A clause without matches
/// matches; ztunnel skips an empty [`Match`], so a clause whose every
/// match is empty matches nothing.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct Clause {
    /// Its matches, any of which must match (tag 1, a match behaviour,
    /// is reserved upstream).
    #[prost(message, repeated, tag = "2")]
    pub matches: ::prost::alloc::vec::Vec<Match>,
}

/// One match: every list given must match (any value of a positive
/// list, no value of a `not_` list).
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct Match {
    /// The peer identity's namespace.
    #[prost(message, repeated, tag = "1")]
    pub namespaces: ::prost::alloc::vec::Vec<StringMatch>,
    /// Namespaces that must not match.
    #[prost(message, repeated, tag = "2")]
    pub not_namespaces: ::prost::alloc::vec::Vec<StringMatch>,
    /// The peer identity's service account.
    #[prost(message, repeated, tag = "11")]
    pub service_accounts: ::prost::alloc::vec::Vec<ServiceAccountMatch>,
    /// Service accounts that must not match.
    #[prost(message, repeated, tag = "12")]
    pub not_service_accounts: ::prost::alloc::vec::Vec<ServiceAccountMatch>,
    /// The peer identity, `<trust domain>/ns/<ns>/sa/<sa>` (without
    /// `spiffe://`).
    #[prost(message, repeated, tag = "3")]
    pub principals: ::prost::alloc::vec::Vec<StringMatch>,
    /// Identities that must not match; `not_principals` of
    /// [`StringMatch::presence`] matches a peer without identity
    /// (plaintext).
    #[prost(message, repeated, tag = "4")]
    pub not_principals: ::prost::alloc::vec::Vec<StringMatch>,
    /// The peer's address.
    #[prost(message, repeated, tag = "5")]
    pub source_ips: ::prost::alloc::vec::Vec<Address>,
    /// Peer addresses that must not match.
    #[prost(message, repeated, tag = "6")]
    pub not_source_ips: ::prost::alloc::vec::Vec<Address>,
    /// The address the connection is for.
    #[prost(message, repeated, tag = "7")]
    pub destination_ips: ::prost::alloc::vec::Vec<Address>,
    /// Destination addresses that must not match.
    #[prost(message, repeated, tag = "8")]
    pub not_destination_ips: ::prost::alloc::vec::Vec<Address>,
    /// The port the connection is for.
    #[prost(uint32, repeated, tag = "9")]
    pub destination_ports: ::prost::alloc::vec::Vec<u32>,
    /// Destination ports that must not match.
    #[prost(uint32, repeated, tag = "10")]
    pub not_destination_ports: ::prost::alloc::vec::Vec<u32>,
}

/// An address or CIDR block.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct Address {
    /// The address: 4 bytes (IPv4) or 16 (IPv6), network order.
    #[prost(bytes = "vec", tag = "1")]
    pub address: ::prost::alloc::vec::Vec<u8>,
    /// The prefix length (32 or 128 for a single address).
    #[prost(uint32, tag = "2")]
    pub length: u32,
}

/// A service account: its namespace and name.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct ServiceAccountMatch {
    /// Its namespace.
    #[prost(string, tag = "1")]
    pub namespace: ::prost::alloc::string::String,
    /// Its name (`serviceAccount` in the proto).
    #[prost(string, tag = "2")]
    pub service_account: ::prost::alloc::string::String,
}

/// A string matcher.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct StringMatch {
    /// How it matches.
    #[prost(oneof = "string_match::MatchType", tags = "1, 2, 3, 4")]
    pub match_type: ::core::option::Option<string_match::MatchType>,
}

/// The kinds of [`StringMatch`].
pub mod string_match {
    /// How a [`StringMatch`](super::StringMatch) matches.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Oneof)]
    pub enum MatchType {
        /// The whole string.
        #[prost(string, tag = "1")]
        Exact(::prost::alloc::string::String),
        /// Its start.
        #[prost(string, tag = "2")]
        Prefix(::prost::alloc::string::String),
        /// Its end.
        #[prost(string, tag = "3")]
        Suffix(::prost::alloc::string::String),
        /// Any non-empty string (`google.protobuf.Empty`).
        #[prost(message, tag = "4")]
        Presence(()),
    }
}

impl StringMatch {
    /// Matches exactly `value`.
    pub fn exact(value: impl Into<String>) -> Self {
        Self::of(string_match::MatchType::Exact(value.into()))
    }

    /// Matches what starts with `value`.
    pub fn prefix(value: impl Into<String>) -> Self {
        Self::of(string_match::MatchType::Prefix(value.into()))
    }

    /// Matches what ends with `value`.
    pub fn suffix(value: impl Into<String>) -> Self {
        Self::of(string_match::MatchType::Suffix(value.into()))
    }

    /// Matches any non-empty value.
    pub fn presence() -> Self {
        Self::of(string_match::MatchType::Presence(()))
    }

    fn of(match_type: string_match::MatchType) -> Self {
        StringMatch {
            match_type: Some(match_type),
        }
    }
}

/// Which workloads an [`Authorization`] applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum Scope {
    /// Every workload of the mesh.
    Global = 0,
    /// Every workload of its namespace.
    Namespace = 1,
    /// The workloads that name it (a Workload's `authorization_policies`).
    WorkloadSelector = 2,
}

/// What a connection an [`Authorization`] matches gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum Action {
    /// Allowed (when any ALLOW policy applies, only what one matches is).
    Allow = 0,
    /// Denied.
    Deny = 1,
}
