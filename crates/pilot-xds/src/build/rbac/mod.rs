//! Authorization: the authorization policies that apply to a workload
//! (compiled, [`pilot_routing::AuthorizationPolicies`]), as Envoy's RBAC
//! filters on its inbound listeners.
//!
//! A policy applies to the workloads of its namespace (of the mesh, in
//! the root namespace, `istio-system` unless said otherwise) its selector
//! matches. On an HTTP port the HTTP
//! connection manager gets `envoy.filters.http.rbac` before its other
//! filters; on a TCP port the filter chain gets `envoy.filters.network.rbac`
//! before the TCP proxy. The DENY filter comes first (any matching rule
//! denies: 403 `RBAC: access denied`, or the connection closed), then the
//! ALLOW filter (a request must match one of its rules). With no DENY rule
//! there is no DENY filter; with no ALLOW policy applying there is no ALLOW
//! filter, so everything is allowed; an ALLOW policy without rules denies
//! everything it does not otherwise allow, and `rules: [{}]` allows all.
//!
//! AUDIT and CUSTOM policies have filters of their own before these
//! (`custom.rs`), and all of them go after the JWT filter when the
//! connection manager has one.
//!
//! Each rule is one Envoy policy named `ns[NS]-policy[NAME]-rule[I]`: its
//! permission is what is called (`to`, and the `when` conditions on the
//! call), its principal who calls (`from`, and the `when` conditions on
//! the caller). A principal `td/ns/x/sa/y` is the peer certificate's URI
//! SAN `spiffe://td/ns/x/sa/y`; a namespace is a regular expression on that
//! SAN; a value may start or end with `*`. On a TCP port, an ALLOW rule
//! with HTTP-only fields (`Rule::http_only_fields`) is skipped, and a DENY
//! rule is kept without them, as Istio does.

use std::collections::{BTreeMap, HashMap};

use envoy_types::pb::envoy::config::core::v3::CidrRange;
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, filter};
use envoy_types::pb::envoy::config::rbac::v3::{
    MetadataSource, Permission, Policy, Principal, Rbac, SourcedMetadata, permission, principal, rbac,
};
use envoy_types::pb::envoy::config::route::v3::{HeaderMatcher, header_matcher};
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac as HttpRbac;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac as NetworkRbac;
use envoy_types::pb::envoy::r#type::matcher::v3::{
    MetadataMatcher, PathMatcher, RegexMatcher, StringMatcher, ValueMatcher, metadata_matcher, path_matcher,
    string_matcher, value_matcher,
};
use envoy_types::pb::google::protobuf::{Any, UInt32Value};
use pilot_model::Labels;
use pilot_routing::authorization::{
    Action, Attribute, Condition, Operation, Policy as AuthzPolicy, Rule, Source,
};
use pilot_routing::request_authentication::JwtPolicy;
use pilot_routing::{AuthorizationPolicies, ExtensionProviders, RequestAuthentications};
use prost::{Message, Name};

use crate::{MeshConfig, Proxy};

mod custom;

/// The HTTP RBAC filter's name.
pub const HTTP_RBAC_FILTER: &str = "envoy.filters.http.rbac";
/// The network RBAC filter's name.
pub const NETWORK_RBAC_FILTER: &str = "envoy.filters.network.rbac";

const HTTP_CONNECTION_MANAGER: &str = "envoy.filters.network.http_connection_manager";
const SPIFFE: &str = "spiffe://";

/// The authorization policies of one push, for the inbound listeners of
/// one workload namespace.
pub(crate) struct Authorization<'a> {
    policies: &'a AuthorizationPolicies,
    /// The RequestAuthentications, whose `jwt_authn` filter goes before
    /// the RBAC filters (`build/jwt_authn.rs`).
    authentication: Option<&'a RequestAuthentications>,
    providers: &'a ExtensionProviders,
    namespace: &'a str,
    labels: &'a Labels,
}

impl<'a> Authorization<'a> {
    /// The policies of `mesh` as they apply to the workloads of `proxy`:
    /// in its namespace (the first label of its domain), with its labels
    /// and its instances' own (mesh-wide ones included); CUSTOM ones with
    /// the mesh's extension providers.
    pub(crate) fn new(mesh: &'a MeshConfig, proxy: &'a Proxy) -> Self {
        let namespace = proxy.domain.split('.').next().unwrap_or_default();
        Authorization {
            policies: mesh.model().authorization(),
            providers: mesh.extension_providers(),
            authentication: None,
            namespace,
            labels: &proxy.labels,
        }
    }

    /// With the JWT filter of `authentication` on HTTP listeners.
    pub(crate) fn with_authentication(mut self, authentication: &'a RequestAuthentications) -> Self {
        self.authentication = Some(authentication);
        self
    }

    /// The RequestAuthentications that apply to a workload carrying
    /// `labels` (and the proxy's).
    pub(crate) fn authentication_for(&self, labels: &Labels) -> Vec<&'a JwtPolicy> {
        let mut labels_of_workload = self.labels.clone();
        labels_of_workload.0.extend(labels.0.clone());
        match self.authentication {
            Some(authentication) => authentication.applying(self.namespace, &labels_of_workload),
            None => Vec::new(),
        }
    }

    /// The clusters of the remote JWKS of the RequestAuthentications that
    /// apply to the workloads of `own` (of the proxy, without instances).
    pub(crate) fn jwks_clusters(
        &self,
        own: &[pilot_model::ServiceInstance],
    ) -> Vec<envoy_types::pb::envoy::config::cluster::v3::Cluster> {
        let mut policies: Vec<&JwtPolicy> = own
            .iter()
            .flat_map(|instance| self.authentication_for(&instance.labels))
            .collect();
        if own.is_empty() {
            policies = self.authentication_for(&Labels::default());
        }
        crate::build::jwt_authn::clusters(policies)
    }

    /// Puts the RBAC filters of the policies that apply to a workload
    /// carrying `labels` into its inbound filter `chain` (an HTTP
    /// connection manager's, or a TCP proxy's), then, on HTTP, the JWT
    /// filter of the RequestAuthentications before them; nothing when
    /// none applies.
    pub(crate) fn secure(&self, chain: &mut FilterChain, labels: &Labels) {
        self.authorize(chain, labels);
        crate::build::jwt_authn::authenticate(chain, &self.authentication_for(labels));
    }

    fn authorize(&self, chain: &mut FilterChain, labels: &Labels) {
        let mut labels_of_workload = self.labels.clone();
        labels_of_workload.0.extend(labels.0.clone());
        let applying: Vec<&AuthzPolicy> = self
            .policies
            .applying(self.namespace, &labels_of_workload)
            .collect();
        if applying.is_empty() {
            return;
        }
        let Some(first) = chain.filters.first_mut() else {
            return;
        };
        if first.name == HTTP_CONNECTION_MANAGER {
            let Some(filter::ConfigType::TypedConfig(config)) = &mut first.config_type else {
                return;
            };
            let Ok(mut manager) = HttpConnectionManager::decode(config.value.as_slice()) else {
                return;
            };
            let mut filters = custom::http_filters(&applying, self.providers);
            filters.extend(
                rules(&applying, false)
                    .into_iter()
                    .map(|(action, policies)| HttpFilter {
                        name: HTTP_RBAC_FILTER.into(),
                        config_type: Some(http_filter::ConfigType::TypedConfig(http_rbac(action, &policies))),
                        ..Default::default()
                    }),
            );
            let at = custom::http_insertion_point(&manager.http_filters);
            manager.http_filters.splice(at..at, filters);
            config.value = manager.encode_to_vec();
        } else {
            let mut filters = custom::network_filters(&applying, self.providers);
            filters.extend(
                rules(&applying, true)
                    .into_iter()
                    .map(|(action, policies)| Filter {
                        name: NETWORK_RBAC_FILTER.into(),
                        config_type: Some(filter::ConfigType::TypedConfig(network_rbac(action, &policies))),
                    }),
            );
            chain.filters.splice(0..0, filters);
        }
    }
}

/// The Envoy policies of `applying`, DENY first then ALLOW, each with its
/// policies by name; an action no policy has is absent (but an ALLOW policy
/// whose rules all are skipped still makes an ALLOW filter, denying all).
pub(crate) fn rules(applying: &[&AuthzPolicy], tcp: bool) -> Vec<(rbac::Action, BTreeMap<String, Policy>)> {
    let mut deny = BTreeMap::new();
    let mut allow = None::<BTreeMap<String, Policy>>;
    for config in applying {
        let (ns, name) = (&config.namespace, &config.name);
        let target = match config.action {
            Action::Deny => &mut deny,
            Action::Allow => allow.get_or_insert_default(),
            // Their own filters, before these (`custom.rs`).
            _ => continue,
        };
        for (index, rule) in config.rules.iter().enumerate() {
            if tcp && rule.http_only && config.action == Action::Allow {
                continue;
            }
            target.insert(
                format!("ns[{ns}]-policy[{name}]-rule[{index}]"),
                policy(rule, tcp),
            );
        }
    }
    let mut out = Vec::new();
    if !deny.is_empty() {
        out.push((rbac::Action::Deny, deny));
    }
    if let Some(allow) = allow {
        out.push((rbac::Action::Allow, allow));
    }
    out
}

/// One rule as an Envoy policy; on `tcp`, without its HTTP-only fields.
pub(crate) fn policy(rule: &Rule, tcp: bool) -> Policy {
    let mut permissions = Vec::new();
    let mut principals = Vec::new();
    if let Some(to) = &rule.to {
        let entries: Vec<Permission> = to
            .iter()
            .map(|operation| all_rules(operation_rules(operation, tcp)))
            .collect();
        permissions.push(any_rule(entries));
    }
    if let Some(from) = &rule.from {
        let entries: Vec<Principal> = from
            .iter()
            .map(|source| all_ids(source_ids(source, tcp)))
            .collect();
        principals.push(any_id(entries));
    }
    for condition in &rule.when {
        if tcp && condition.http_only {
            continue;
        }
        match condition_match(condition) {
            Some(Match::Permission(p)) => permissions.push(p),
            Some(Match::Principal(p)) => principals.push(p),
            None => {}
        }
    }
    Policy {
        permissions: vec![all_rules(permissions)],
        principals: vec![all_ids(principals)],
        ..Default::default()
    }
}

/// The fields of an operation, each a rule (HTTP-only ones left out on `tcp`).
fn operation_rules(operation: &Operation, tcp: bool) -> Vec<Permission> {
    let mut rules = Vec::new();
    let mut field = |values: &[String], negate: bool, make: &dyn Fn(&str) -> Permission| {
        if values.is_empty() {
            return;
        }
        let matched = any_rule(values.iter().map(|v| make(v)).collect());
        rules.push(if negate { not_rule(matched) } else { matched });
    };
    if !tcp {
        field(&operation.hosts, false, &host);
        field(&operation.not_hosts, true, &host);
        field(&operation.methods, false, &method);
        field(&operation.not_methods, true, &method);
        field(&operation.paths, false, &path);
        field(&operation.not_paths, true, &path);
    }
    let mut ports = |values: &[u32], negate: bool| {
        if values.is_empty() {
            return;
        }
        let matched = any_rule(values.iter().map(|p| port_number(*p)).collect());
        rules.push(if negate { not_rule(matched) } else { matched });
    };
    ports(&operation.ports, false);
    ports(&operation.not_ports, true);
    rules
}

/// The fields of a source, each an identifier (the JWT principals, HTTP
/// only, left out on `tcp`).
fn source_ids(source: &Source, tcp: bool) -> Vec<Principal> {
    let mut ids = Vec::new();
    let mut field = |values: &[String], negate: bool, make: &dyn Fn(&str) -> Principal| {
        if values.is_empty() {
            return;
        }
        let matched = any_id(values.iter().map(|v| make(v)).collect());
        ids.push(if negate { not_id(matched) } else { matched });
    };
    field(&source.principals, false, &peer_principal);
    field(&source.not_principals, true, &peer_principal);
    field(&source.namespaces, false, &peer_namespace);
    field(&source.not_namespaces, true, &peer_namespace);
    field(&source.ip_blocks, false, &direct_ip);
    field(&source.not_ip_blocks, true, &direct_ip);
    field(&source.remote_ip_blocks, false, &remote_ip);
    field(&source.not_remote_ip_blocks, true, &remote_ip);
    field(&source.service_accounts, false, &peer_service_account);
    field(&source.not_service_accounts, true, &peer_service_account);
    field(&source.trust_domains, false, &peer_trust_domain);
    field(&source.not_trust_domains, true, &peer_trust_domain);
    if !tcp {
        field(&source.request_principals, false, &jwt::request_principal);
        field(&source.not_request_principals, true, &jwt::request_principal);
    }
    ids
}

enum Match {
    Permission(Permission),
    Principal(Principal),
}

/// A `when` condition: on the call (a permission) or on the caller (a
/// principal). Keys validation refuses give nothing.
fn condition_match(condition: &Condition) -> Option<Match> {
    fn both<T>(
        values: Vec<T>,
        not_values: Vec<T>,
        any: fn(Vec<T>) -> T,
        not: fn(T) -> T,
        all: fn(Vec<T>) -> T,
    ) -> T {
        let mut parts = Vec::new();
        if !values.is_empty() {
            parts.push(any(values));
        }
        if !not_values.is_empty() {
            parts.push(not(any(not_values)));
        }
        all(parts)
    }
    let ids = |make: &dyn Fn(&str) -> Principal| {
        Match::Principal(both(
            condition.values.iter().map(|v| make(v)).collect(),
            condition.not_values.iter().map(|v| make(v)).collect(),
            any_id,
            not_id,
            all_ids,
        ))
    };
    let rules = |make: &dyn Fn(&str) -> Permission| {
        Match::Permission(both(
            condition.values.iter().map(|v| make(v)).collect(),
            condition.not_values.iter().map(|v| make(v)).collect(),
            any_rule,
            not_rule,
            all_rules,
        ))
    };
    Some(match &condition.attribute {
        Attribute::Header(name) => ids(&|value| Principal {
            identifier: Some(principal::Identifier::Header(header(name, value, false))),
        }),
        Attribute::SourceIp => ids(&direct_ip),
        Attribute::RemoteIp => ids(&remote_ip),
        Attribute::SourceNamespace => ids(&peer_namespace),
        Attribute::SourcePrincipal => ids(&peer_principal),
        Attribute::DestinationIp => rules(&|value| Permission {
            rule: Some(permission::Rule::DestinationIp(cidr(value))),
        }),
        Attribute::DestinationPort => rules(&port),
        Attribute::Auth(attribute) => ids(&|value| jwt::condition(attribute, value)),
        Attribute::ConnectionSni => rules(&|value| Permission {
            rule: Some(permission::Rule::RequestedServerName(string_match(
                value, "", false,
            ))),
        }),
        Attribute::SourceTrustDomain => ids(&peer_trust_domain),
        Attribute::FilterMetadata { filter, path } => rules(&|value| Permission {
            rule: Some(permission::Rule::SourcedMetadata(SourcedMetadata {
                metadata_source: MetadataSource::Dynamic as i32,
                metadata_matcher: Some(MetadataMatcher {
                    filter: filter.clone(),
                    path: path
                        .iter()
                        .map(|key| metadata_matcher::PathSegment {
                            segment: Some(metadata_matcher::path_segment::Segment::Key(key.clone())),
                        })
                        .collect(),
                    value: Some(ValueMatcher {
                        match_pattern: Some(value_matcher::MatchPattern::StringMatch(string_match(
                            value, "", false,
                        ))),
                    }),
                    invert: false,
                }),
            })),
        }),
        _ => return None,
    })
}

fn host(value: &str) -> Permission {
    Permission {
        rule: Some(permission::Rule::Header(header(":authority", value, true))),
    }
}

fn method(value: &str) -> Permission {
    Permission {
        rule: Some(permission::Rule::Header(header(":method", value, false))),
    }
}

/// A path, without its query: exact, or with a leading or trailing `*`.
fn path(value: &str) -> Permission {
    Permission {
        rule: Some(permission::Rule::UrlPath(PathMatcher {
            rule: Some(path_matcher::Rule::Path(string_match(value, "", false))),
        })),
    }
}

fn port(value: &str) -> Permission {
    port_number(value.parse().unwrap_or(0))
}

fn port_number(port: u32) -> Permission {
    Permission {
        rule: Some(permission::Rule::DestinationPort(port)),
    }
}

/// A peer identity: the URI SAN `spiffe://` + `value`.
fn peer_principal(value: &str) -> Principal {
    authenticated(string_match(value, SPIFFE, false))
}

/// A peer service account `namespace/name`: the URI SAN
/// `spiffe://TRUST_DOMAIN/ns/NAMESPACE/sa/NAME`, any trust domain.
fn peer_service_account(value: &str) -> Principal {
    let (namespace, name) = value.split_once('/').unwrap_or(("", value));
    authenticated(regex(&format!(
        "spiffe://[^/]+/ns/{}/sa/{}",
        wildcard_regex(namespace),
        wildcard_regex(name)
    )))
}

/// A trust domain of the peer's identity: the URI SAN's authority, with a
/// leading or trailing `*` within it.
fn peer_trust_domain(value: &str) -> Principal {
    let domain = wildcard_regex(value).replace(".*", "[^/]*");
    authenticated(regex(&format!("spiffe://{domain}/.*")))
}

/// A peer namespace: `/ns/NAMESPACE/` in its URI SAN.
fn peer_namespace(value: &str) -> Principal {
    authenticated(regex(&format!(".*/ns/{}/.*", wildcard_regex(value))))
}

fn authenticated(name: StringMatcher) -> Principal {
    Principal {
        identifier: Some(principal::Identifier::Authenticated(principal::Authenticated {
            principal_name: Some(name),
        })),
    }
}

/// The downstream connection's address.
fn direct_ip(value: &str) -> Principal {
    Principal {
        identifier: Some(principal::Identifier::DirectRemoteIp(cidr(value))),
    }
}

/// The original client's address (X-Forwarded-For).
fn remote_ip(value: &str) -> Principal {
    Principal {
        identifier: Some(principal::Identifier::RemoteIp(cidr(value))),
    }
}

/// An IP (a /32 or /128) or a CIDR block.
fn cidr(value: &str) -> CidrRange {
    let (address, length) = match value.split_once('/') {
        Some((address, length)) => (address, length.parse().ok()),
        None => (value, None),
    };
    let full = if address.contains(':') { 128 } else { 32 };
    CidrRange {
        address_prefix: address.to_string(),
        prefix_len: Some(UInt32Value {
            value: length.unwrap_or(full),
        }),
    }
}

/// A header's value: present for `*`, else as [`string_match`].
fn header(name: &str, value: &str, ignore_case: bool) -> HeaderMatcher {
    let specifier = if value == "*" {
        header_matcher::HeaderMatchSpecifier::PresentMatch(true)
    } else {
        header_matcher::HeaderMatchSpecifier::StringMatch(string_match(value, "", ignore_case))
    };
    HeaderMatcher {
        name: name.to_string(),
        header_match_specifier: Some(specifier),
        ..Default::default()
    }
}

/// Istio's value match: `*` anything non-empty, `*x` suffix, `x*` prefix,
/// else exact; `prefix` is put before the value (not before a suffix).
fn string_match(value: &str, prefix: &str, ignore_case: bool) -> StringMatcher {
    let pattern = if value == "*" {
        return regex(".+");
    } else if let Some(suffix) = value.strip_prefix('*') {
        string_matcher::MatchPattern::Suffix(suffix.to_string())
    } else if let Some(start) = value.strip_suffix('*') {
        string_matcher::MatchPattern::Prefix(format!("{prefix}{start}"))
    } else {
        string_matcher::MatchPattern::Exact(format!("{prefix}{value}"))
    };
    StringMatcher {
        match_pattern: Some(pattern),
        ignore_case,
    }
}

fn regex(pattern: &str) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(string_matcher::MatchPattern::SafeRegex(RegexMatcher {
            regex: pattern.to_string(),
            ..Default::default()
        })),
        ignore_case: false,
    }
}

/// A value with a leading or trailing `*` as a regular expression
/// (anything else quoted).
fn wildcard_regex(value: &str) -> String {
    let quote = |s: &str| {
        s.chars().fold(String::new(), |mut out, c| {
            if r"\.+*?()|[]{}^$".contains(c) {
                out.push('\\');
            }
            out.push(c);
            out
        })
    };
    if value == "*" {
        ".*".into()
    } else if let Some(suffix) = value.strip_prefix('*') {
        format!(".*{}", quote(suffix))
    } else if let Some(start) = value.strip_suffix('*') {
        format!("{}.*", quote(start))
    } else {
        quote(value)
    }
}

fn any_rule(mut rules: Vec<Permission>) -> Permission {
    match rules.len() {
        1 => rules.remove(0),
        _ => Permission {
            rule: Some(permission::Rule::OrRules(permission::Set { rules })),
        },
    }
}

/// Every one of `rules`; none: any request.
fn all_rules(mut rules: Vec<Permission>) -> Permission {
    match rules.len() {
        0 => Permission {
            rule: Some(permission::Rule::Any(true)),
        },
        1 => rules.remove(0),
        _ => Permission {
            rule: Some(permission::Rule::AndRules(permission::Set { rules })),
        },
    }
}

fn not_rule(rule: Permission) -> Permission {
    Permission {
        rule: Some(permission::Rule::NotRule(Box::new(rule))),
    }
}

fn any_id(mut ids: Vec<Principal>) -> Principal {
    match ids.len() {
        1 => ids.remove(0),
        _ => Principal {
            identifier: Some(principal::Identifier::OrIds(principal::Set { ids })),
        },
    }
}

/// Every one of `ids`; none: any caller.
fn all_ids(mut ids: Vec<Principal>) -> Principal {
    match ids.len() {
        0 => Principal {
            identifier: Some(principal::Identifier::Any(true)),
        },
        1 => ids.remove(0),
        _ => Principal {
            identifier: Some(principal::Identifier::AndIds(principal::Set { ids })),
        },
    }
}

fn not_id(id: Principal) -> Principal {
    Principal {
        identifier: Some(principal::Identifier::NotId(Box::new(id))),
    }
}

/// The HTTP filter's configuration.
fn http_rbac(action: rbac::Action, policies: &BTreeMap<String, Policy>) -> Any {
    let mut value = length_delimited(1, &rules_bytes(action, policies));
    value.extend(HttpRbac::default().encode_to_vec());
    Any {
        type_url: HttpRbac::type_url(),
        value,
    }
}

/// The network filter's configuration; its statistics under
/// `tcp.rbac_deny.` or `tcp.rbac_allow.`.
fn network_rbac(action: rbac::Action, policies: &BTreeMap<String, Policy>) -> Any {
    let mut value = length_delimited(1, &rules_bytes(action, policies));
    let stat_prefix = match action {
        rbac::Action::Deny => "rbac_deny.",
        _ => "rbac_allow.",
    };
    value.extend(
        NetworkRbac {
            stat_prefix: stat_prefix.into(),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    Any {
        type_url: NetworkRbac::type_url(),
        value,
    }
}

/// `config.rbac.v3.RBAC` encoded with its policies in name order. The
/// generated type keeps them in a `HashMap`, whose order changes from one
/// map to the next; so each policy is encoded as a message of its own and
/// the encodings concatenated (protobuf merges them into one map), and
/// equal policies always give equal bytes.
fn rules_bytes(action: rbac::Action, policies: &BTreeMap<String, Policy>) -> Vec<u8> {
    let mut bytes = Rbac {
        action: action as i32,
        ..Default::default()
    }
    .encode_to_vec();
    for (name, policy) in policies {
        let one = Rbac {
            policies: HashMap::from([(name.clone(), policy.clone())]),
            ..Default::default()
        };
        bytes.extend(one.encode_to_vec());
    }
    bytes
}

/// Field `tag` of a message holding the encoded message `bytes`.
fn length_delimited(tag: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 6);
    prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, &mut out);
    prost::encoding::encode_varint(bytes.len() as u64, &mut out);
    out.extend_from_slice(bytes);
    out
}

mod jwt;
#[cfg(test)]
mod tests;
