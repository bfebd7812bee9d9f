//! HTTP routes of the routing model: what a request matches, where it goes
//! and what is done to it on the way.

use std::collections::BTreeMap;
use std::time::Duration;

use pilot_model::Labels;

use super::HashKey;

/// The gateway name that stands for every sidecar of the mesh.
pub const MESH_GATEWAY: &str = "mesh";

/// One HTTP route of a host: the first route whose matches admit a request
/// takes it.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct HttpRoute {
    /// The route's name (`namespace/name` of the object it comes from).
    pub name: String,
    /// Any one of these admits a request; none: every request.
    pub matches: Vec<HttpMatch>,
    /// Where an admitted request goes.
    pub action: HttpAction,
    /// Path and authority rewritten before forwarding.
    pub rewrite: Option<Rewrite>,
    /// How long the whole request may take.
    pub timeout: Option<Duration>,
    /// Retries of failed attempts.
    pub retries: Option<Retries>,
    /// Faults injected.
    pub fault: Option<Fault>,
    /// Copies of each request sent elsewhere (responses ignored), each to
    /// its destination.
    pub mirrors: Vec<Mirror>,
    /// Cross-origin resource sharing.
    pub cors: Option<Cors>,
    /// Headers added, set and removed.
    pub headers: Headers,
    /// Whether websocket upgrades are allowed.
    pub websocket: bool,
    /// The status answered for what is sent to a destination with no
    /// cluster (a service the registry does not hold): 404 or 500; none:
    /// 503.
    pub no_cluster_status: Option<u32>,
    /// What a consistent hash of its destinations hashes (their traffic
    /// policy's, when every destination has the same).
    pub hash: Option<HashKey>,
    /// Requests of one session go to the endpoint the session's first was
    /// sent to (a Gateway API rule's `sessionPersistence`).
    pub session: Option<StickySession>,
}

/// How a route keeps a session on one endpoint: the proxy names the
/// endpoint it chose in a cookie or a header of its answer, and sends a
/// request carrying it to that endpoint while it is there (else it
/// chooses again, and names the new one).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StickySession {
    /// A cookie the proxy sets.
    Cookie {
        /// The cookie's name.
        name: String,
        /// The cookie's `Path`.
        path: String,
        /// How long the session lasts (the cookie's `Max-Age`, and its
        /// value's expiry, which the proxy checks); none: until the
        /// browser session ends.
        ttl: Option<Duration>,
    },
    /// A header the proxy sets on answers and reads on requests.
    Header {
        /// The header's name.
        name: String,
    },
}

/// What a route does with a request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HttpAction {
    /// Forward to these destinations by weight; none: the whole service of
    /// the host the route belongs to.
    Route(Vec<WeightedDestination>),
    /// Answer with a redirect.
    Redirect(Redirect),
    /// Answer directly.
    DirectResponse(DirectResponse),
}

impl Default for HttpAction {
    fn default() -> Self {
        HttpAction::Route(Vec::new())
    }
}

/// A destination: a service, a subset of it, a port of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct RouteDestination {
    /// The service's hostname; empty for a reference that names no service
    /// (what is sent there is answered the route's
    /// [`no_cluster_status`](HttpRoute::no_cluster_status)).
    pub host: String,
    /// The subset, by the labels its instances carry (empty: every
    /// instance). Its name is the [`Subset`](super::Subset)'s.
    pub subset: Labels,
    /// The service port (none: the port the request came in on).
    pub port: Option<u16>,
}

impl RouteDestination {
    /// The whole of `host`, or the subset selected by `subset`.
    pub fn new(host: impl Into<String>, subset: Labels) -> Self {
        RouteDestination {
            host: host.into(),
            subset,
            port: None,
        }
    }
}

/// A destination and its share of the traffic.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct WeightedDestination {
    /// Where.
    pub destination: RouteDestination,
    /// Its weight relative to the route's other destinations (never 0:
    /// destinations without traffic are left out).
    pub weight: u32,
    /// Headers added, set and removed on the requests sent to this
    /// destination and on their responses (after the route's own).
    pub headers: Headers,
}

impl WeightedDestination {
    /// `destination` with `weight`.
    pub fn new(destination: RouteDestination, weight: u32) -> Self {
        WeightedDestination {
            destination,
            weight,
            headers: Headers::default(),
        }
    }
}

/// How a string is matched.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StringMatch {
    /// Equal to this.
    Exact(String),
    /// Starting with this.
    Prefix(String),
    /// Matching this RE2 regular expression in full.
    Regex(String),
    /// A path equal to this or continuing it with `/` (the Gateway API's
    /// `PathPrefix`: `/v2` takes `/v2` and `/v2/x`, not `/v2x`); never
    /// ends with `/` unless it is `/`.
    PathPrefix(String),
}

/// What an HTTP request must be like, all conditions at once.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct HttpMatch {
    /// The path.
    pub uri: Option<StringMatch>,
    /// The `:scheme` pseudo-header.
    pub scheme: Option<StringMatch>,
    /// The `:method` pseudo-header.
    pub method: Option<StringMatch>,
    /// The `:authority` pseudo-header.
    pub authority: Option<StringMatch>,
    /// Request headers by (lower-case) name.
    pub headers: BTreeMap<String, StringMatch>,
    /// Query parameters by name.
    pub query_params: BTreeMap<String, StringMatch>,
    /// Headers that must not match.
    pub without_headers: BTreeMap<String, StringMatch>,
    /// The port the request came in on.
    pub port: Option<u16>,
    /// The source: a proxy running an instance carrying these labels (or
    /// itself labelled with them).
    pub source_labels: Labels,
    /// The source: a proxy running an instance of this service (with
    /// [`source_labels`](Self::source_labels)), as v1alpha2 route rules name it.
    pub source_service: Option<String>,
    /// The source: a proxy in this namespace.
    pub source_namespace: Option<String>,
    /// The gateways the match applies to (empty: the route's own).
    pub gateways: Vec<String>,
}

impl HttpMatch {
    /// Whether the match names its source (so proxies differ by it).
    pub fn has_source(&self) -> bool {
        self.source_service.is_some() || !self.source_labels.is_empty() || self.source_namespace.is_some()
    }
}

/// A redirect.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Redirect {
    /// The new path.
    pub uri: Option<String>,
    /// The new authority.
    pub authority: Option<String>,
    /// The status code (none: 301).
    pub code: Option<u32>,
    /// The new scheme (`https`).
    pub scheme: Option<String>,
    /// The new port.
    pub port: Option<u16>,
    /// Whether the port follows the scheme's default (80 for http, 443
    /// for https) when [`port`](Self::port) is none; otherwise the
    /// request's port is kept.
    pub port_from_scheme: bool,
    /// Replaces the matched path prefix (instead of [`uri`](Self::uri)).
    pub prefix: Option<String>,
}

/// A response sent without forwarding.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct DirectResponse {
    /// The status code.
    pub status: u32,
    /// The body, if any.
    pub body: Option<String>,
}

/// Rewrites applied before forwarding.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Rewrite {
    /// Replaces the matched path prefix.
    pub uri: Option<String>,
    /// Replaces the authority.
    pub authority: Option<String>,
    /// Replaces what of the path matches a regular expression (RE2):
    /// `(pattern, substitution)`, the substitution with `\1`-style groups.
    pub uri_regex: Option<(String, String)>,
}

/// Retries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Retries {
    /// How many retries.
    pub attempts: u32,
    /// The timeout of each attempt.
    pub per_try_timeout: Option<Duration>,
    /// The conditions retried, Envoy's `retry_on` (none:
    /// [`Retries::DEFAULT_RETRY_ON`]).
    pub retry_on: Option<String>,
    /// The response status codes retried (`retriable-status-codes` in
    /// `retry_on`): the Gateway API's `retry.codes`.
    pub status_codes: Vec<u32>,
    /// The wait before a retry (Envoy's back-off base interval); none:
    /// Envoy's (25 ms).
    pub backoff: Option<Duration>,
}

impl Retries {
    /// What is retried unless said otherwise.
    pub const DEFAULT_RETRY_ON: &'static str = "5xx,connect-failure,refused-stream";
}

/// Faults injected into requests.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Fault {
    /// Delays.
    pub delay: Option<FaultDelay>,
    /// Aborts.
    pub abort: Option<FaultAbort>,
}

/// A fixed delay before forwarding.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct FaultDelay {
    /// The share of requests delayed, in percent.
    pub percent: f64,
    /// The delay.
    pub fixed: Option<Duration>,
}

/// Requests answered with an error instead of being forwarded.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct FaultAbort {
    /// The share of requests aborted, in percent.
    pub percent: f64,
    /// The HTTP status returned.
    pub http_status: Option<u32>,
}

/// Requests copied to another destination.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Mirror {
    /// Where the copies go.
    pub destination: RouteDestination,
    /// The share of requests copied, in percent (none: all).
    pub percent: Option<f64>,
}

/// Cross-origin resource sharing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Cors {
    /// Origins allowed.
    pub allow_origins: Vec<StringMatch>,
    /// Methods allowed.
    pub allow_methods: Vec<String>,
    /// Headers allowed.
    pub allow_headers: Vec<String>,
    /// Headers exposed.
    pub expose_headers: Vec<String>,
    /// How long a preflight answer may be cached.
    pub max_age: Option<Duration>,
    /// Whether credentials are allowed.
    pub allow_credentials: Option<bool>,
}

/// Header manipulation of requests and responses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Headers {
    /// On requests, before forwarding.
    pub request: HeaderOperations,
    /// On responses.
    pub response: HeaderOperations,
}

impl Headers {
    /// Whether nothing is done to any header.
    pub fn is_empty(&self) -> bool {
        self.request.is_empty() && self.response.is_empty()
    }
}

/// Headers added, set and removed, in this order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HeaderOperations {
    /// Appended to any value already there.
    pub add: Vec<(String, String)>,
    /// Replacing any value already there.
    pub set: Vec<(String, String)>,
    /// Removed.
    pub remove: Vec<String>,
}

impl HeaderOperations {
    /// Whether nothing is done.
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.set.is_empty() && self.remove.is_empty()
    }
}
