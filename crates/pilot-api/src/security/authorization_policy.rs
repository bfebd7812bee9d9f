//! `AuthorizationPolicy`: who may call the selected workloads. Envoy's
//! RBAC filter evaluates them: AUDIT policies mark what they match for
//! the access log, CUSTOM policies hand what they match to their extension
//! provider (the mesh config's `extensionProviders`, Envoy's ext_authz
//! filter), then DENY policies (any match denies), then ALLOW policies
//! (when any selects the workload, a request must match one of their
//! rules; when none does, everything is allowed).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{GROUP, VERSION, WorkloadSelector};
use crate::primitives::cidr;
use pilot_model::{ConfigKind, FieldErrors};

/// Access control for the selected workloads.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthorizationPolicy {
    /// The workloads it applies to; none: every workload of the namespace
    /// (of the mesh, in the root namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<WorkloadSelector>,
    /// What a matching request gets.
    #[serde(default)]
    pub action: Action,
    /// A request matches the policy when it matches any rule. An ALLOW
    /// policy without rules allows nothing; a DENY policy must have rules
    /// (Istio refuses one without: it would never deny).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
    /// The external authorizer of a CUSTOM policy: an extension provider
    /// of the mesh config (`extensionProviders`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<Provider>,
}

/// The external authorizer a CUSTOM policy delegates to (Istio's
/// `AuthorizationPolicy.ExtensionProvider`).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Provider {
    /// The name of an extension provider of the mesh config.
    #[serde(default)]
    pub name: String,
}

/// What a matching request gets.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Action {
    /// Allowed.
    #[default]
    Allow,
    /// Denied (403, `RBAC: access denied`).
    Deny,
    /// Logged: Envoy's RBAC filter with action LOG marks the matching
    /// requests for audit (`access_log_hint` in its dynamic metadata and
    /// its `logged` statistic); it never decides.
    Audit,
    /// Decided by the external authorizer `provider` names, consulted for
    /// the matching requests only, before DENY and ALLOW policies.
    Custom,
}

/// One rule: every part given must match (`from`, `to`, `when`); within
/// `from` and `to`, any entry.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    /// Who calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Vec<From>>,
    /// What is called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Vec<To>>,
    /// Further conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<Condition>,
}

/// A `from` entry.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct From {
    /// The caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
}

/// A `to` entry.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct To {
    /// The call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Operation>,
}

/// The caller: every field given must match (any value of a list; none
/// of a `not` list).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Source {
    /// Peer identities, `<trust-domain>/ns/<ns>/sa/<sa>` (mutual TLS);
    /// `*` and prefix or suffix `*` allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub principals: Vec<String>,
    /// Identities that must not match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_principals: Vec<String>,
    /// JWT principals, `<iss>/<sub>` of a token a RequestAuthentication
    /// accepted; `*` and prefix or suffix `*` allowed (`*`: any token).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_principals: Vec<String>,
    /// JWT principals that must not match (a request without a token
    /// has none, and matches).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_request_principals: Vec<String>,
    /// The peer's namespaces (mutual TLS).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Namespaces that must not match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_namespaces: Vec<String>,
    /// The peer's address: IPs or CIDR blocks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_blocks: Vec<String>,
    /// Addresses that must not match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_ip_blocks: Vec<String>,
    /// The original client's address (X-Forwarded-For): IPs or CIDRs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remote_ip_blocks: Vec<String>,
    /// Original addresses that must not match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_remote_ip_blocks: Vec<String>,
    /// The peer's service accounts, `namespace/name` or `name` (in the
    /// policy's namespace), any trust domain (mutual TLS); not with
    /// `namespaces` or `principals`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<String>,
    /// Service accounts that must not match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_service_accounts: Vec<String>,
    /// The trust domains of the peer's identity (mutual TLS); `*` and
    /// prefix or suffix `*` allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trust_domains: Vec<String>,
    /// Trust domains that must not match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_trust_domains: Vec<String>,
}

/// The call: every field given must match.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Operation {
    /// Host or authority headers; `*` prefix or suffix allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Hosts that must not match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_hosts: Vec<String>,
    /// Destination ports, as strings (`"9080"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<String>,
    /// Ports that must not match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_ports: Vec<String>,
    /// HTTP methods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// Methods that must not match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_methods: Vec<String>,
    /// Paths; `*` prefix or suffix allowed (`/reviews/*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Paths that must not match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_paths: Vec<String>,
}

/// A `when` condition: the attribute `key` has one of `values` and none
/// of `notValues`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    /// The attribute: one of [`WHEN_KEYS`], `request.headers[NAME]`, or
    /// a JWT attribute (`request.auth.principal`, `.audiences`,
    /// `.presenter`, `.claims[NAME]`, nested `.claims[A][B]`).
    pub key: String,
    /// Values any of which must match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Values none of which may match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_values: Vec<String>,
}

/// The `when` keys supported beside `request.headers[NAME]`.
pub const WHEN_KEYS: [&str; 8] = [
    "source.ip",
    "remote.ip",
    "source.namespace",
    "source.principal",
    "source.trustDomain",
    "destination.ip",
    "destination.port",
    "connection.sni",
];

/// The prefix of Istio's `experimental.envoy.filters.FILTER[KEY]` keys: a
/// value of the dynamic metadata another filter of the same request wrote.
pub const FILTER_METADATA_KEY: &str = "experimental.envoy.filters.";

/// A `when` key `experimental.envoy.filters.FILTER[KEY]` read: the filter
/// (`envoy.filters.FILTER`) and the metadata path (`KEY`, further `[..]`
/// nesting).
///
/// ```
/// use pilot_api::security::filter_metadata_key;
/// assert_eq!(
///     filter_metadata_key("experimental.envoy.filters.network.mysql_proxy[db.table][op]"),
///     Some(("envoy.filters.network.mysql_proxy".to_string(), vec!["db.table".to_string(), "op".to_string()]))
/// );
/// assert_eq!(filter_metadata_key("experimental.envoy.filters.a.b"), None);
/// ```
pub fn filter_metadata_key(key: &str) -> Option<(String, Vec<String>)> {
    let rest = key.strip_prefix(FILTER_METADATA_KEY)?;
    let (filter, path) = rest.split_once('[')?;
    let path = path.strip_suffix(']')?;
    let segments: Vec<String> = path.split("][").map(str::to_string).collect();
    if filter.is_empty() || segments.iter().any(|s| s.is_empty() || s.contains(['[', ']'])) {
        return None;
    }
    Some((format!("envoy.filters.{filter}"), segments))
}

impl AuthorizationPolicy {
    /// Whether this policy, kept in `namespace`, applies to a workload of
    /// `workload_namespace` carrying `labels`: same namespace (or the
    /// mesh's `root_namespace`, usually
    /// `istio-system`, pilot-routing's `DEFAULT_ROOT_NAMESPACE`), and the
    /// selector, if any, matches.
    pub fn applies_to(
        &self,
        namespace: &str,
        root_namespace: &str,
        workload_namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> bool {
        (namespace == root_namespace || namespace == workload_namespace)
            && self.selector.as_ref().is_none_or(|s| s.matches(labels))
    }
}

impl Rule {
    /// The fields of this rule only an HTTP request has (`from.source`
    /// request principals, `to.operation` hosts, methods, paths and their
    /// `not` lists; `when` on `request.*`), as field paths under `at`
    /// (`spec.rules[i]`). A TCP connection never matches them: on a TCP
    /// port an ALLOW rule using them is skipped, and a DENY rule is kept
    /// without them (so it denies more, never less), as Istio does.
    pub fn http_only_fields(&self, at: &str) -> Vec<String> {
        let mut found = Vec::new();
        for (entry, from) in self.from.iter().flatten().enumerate() {
            let Some(source) = &from.source else { continue };
            for (field, values) in [
                ("requestPrincipals", &source.request_principals),
                ("notRequestPrincipals", &source.not_request_principals),
            ] {
                if !values.is_empty() {
                    found.push(format!("{at}.from[{entry}].source.{field}"));
                }
            }
        }
        for (entry, to) in self.to.iter().flatten().enumerate() {
            let Some(operation) = &to.operation else { continue };
            for (field, values) in operation.http_only() {
                if !values.is_empty() {
                    found.push(format!("{at}.to[{entry}].operation.{field}"));
                }
            }
        }
        for (entry, condition) in self.when.iter().enumerate() {
            if condition.is_http_only() {
                found.push(format!("{at}.when[{entry}]"));
            }
        }
        found
    }
}

impl Operation {
    /// The HTTP-only lists, by field name.
    pub fn http_only(&self) -> [(&'static str, &Vec<String>); 6] {
        [
            ("hosts", &self.hosts),
            ("notHosts", &self.not_hosts),
            ("methods", &self.methods),
            ("notMethods", &self.not_methods),
            ("paths", &self.paths),
            ("notPaths", &self.not_paths),
        ]
    }
}

impl Condition {
    /// The header a `request.headers[NAME]` condition reads.
    pub fn header(&self) -> Option<&str> {
        self.key
            .strip_prefix("request.headers[")
            .and_then(|k| k.strip_suffix(']'))
    }

    /// Whether only an HTTP request has the attribute.
    pub fn is_http_only(&self) -> bool {
        self.header().is_some() || self.key.starts_with("request.")
    }
}

/// The field path of `rules[rule].from[entry]`.
pub fn from_entry(rule: usize, entry: usize) -> String {
    format!("spec.rules[{rule}].from[{entry}]")
}

/// The field path of `rules[rule].to[entry]`.
pub fn to_entry(rule: usize, entry: usize) -> String {
    format!("spec.rules[{rule}].to[{entry}]")
}

impl ConfigKind for AuthorizationPolicy {
    const KIND: &'static str = "AuthorizationPolicy";
    const PLURAL: &'static str = "authorizationpolicies";
    const GROUP: &'static str = GROUP;
    const VERSION: &'static str = VERSION;
    const SERVED_VERSIONS: &'static [&'static str] = &["v1beta1"];
    const SHORT_NAMES: &'static [&'static str] = &["ap"];

    #[cfg(feature = "schema")]
    fn openapi_schema() -> Option<serde_json::Value> {
        Some(crate::primitives::openapi_schema::<Self>())
    }

    fn validate(&self, errors: &mut FieldErrors) {
        if let Some(selector) = &self.selector {
            selector.validate(errors, "spec.selector");
        }
        if self.action == Action::Deny && self.rules.is_empty() {
            errors.push(
                "spec.rules",
                "a DENY policy without rules is meaningless: it would never deny; add the rules it denies",
            );
        }
        crate::security::custom::validate(self, errors);
        for (index, rule) in self.rules.iter().enumerate() {
            validate_rule(errors, index, rule);
        }
    }
}

fn validate_rule(errors: &mut FieldErrors, index: usize, rule: &Rule) {
    let at = format!("spec.rules[{index}]");
    if let Some(from) = &rule.from {
        if from.is_empty() {
            errors.push(
                format!("{at}.from"),
                "`from` must not be empty; omit it to match any caller",
            );
        }
        for (entry, from) in from.iter().enumerate() {
            let path = format!("{}.source", from_entry(index, entry));
            match &from.source {
                None => errors.push(path, "`from.source` must be given"),
                Some(source) => validate_source(errors, &path, source),
            }
        }
    }
    if let Some(to) = &rule.to {
        if to.is_empty() {
            errors.push(
                format!("{at}.to"),
                "`to` must not be empty; omit it to match any call",
            );
        }
        for (entry, to) in to.iter().enumerate() {
            let path = format!("{}.operation", to_entry(index, entry));
            match &to.operation {
                None => errors.push(path, "`to.operation` must be given"),
                Some(operation) => validate_operation(errors, &path, operation),
            }
        }
    }
    for (entry, condition) in rule.when.iter().enumerate() {
        validate_condition(errors, &format!("{at}.when[{entry}]"), condition);
    }
}

fn validate_source(errors: &mut FieldErrors, path: &str, source: &Source) {
    let lists: [(&str, &Vec<String>); 10] = [
        ("principals", &source.principals),
        ("notPrincipals", &source.not_principals),
        ("requestPrincipals", &source.request_principals),
        ("notRequestPrincipals", &source.not_request_principals),
        ("namespaces", &source.namespaces),
        ("notNamespaces", &source.not_namespaces),
        ("ipBlocks", &source.ip_blocks),
        ("notIpBlocks", &source.not_ip_blocks),
        ("remoteIpBlocks", &source.remote_ip_blocks),
        ("notRemoteIpBlocks", &source.not_remote_ip_blocks),
    ];
    let identities: [(&str, &Vec<String>); 4] = [
        ("serviceAccounts", &source.service_accounts),
        ("notServiceAccounts", &source.not_service_accounts),
        ("trustDomains", &source.trust_domains),
        ("notTrustDomains", &source.not_trust_domains),
    ];
    if lists
        .iter()
        .chain(&identities)
        .all(|(_, values)| values.is_empty())
    {
        errors.push(path, "`from.source` must not be empty");
    }
    // Istio's rule: service accounts name identities whole.
    let accounts = !source.service_accounts.is_empty() || !source.not_service_accounts.is_empty();
    let others = !source.principals.is_empty()
        || !source.not_principals.is_empty()
        || !source.namespaces.is_empty()
        || !source.not_namespaces.is_empty();
    if accounts && others {
        errors.push(path, "cannot set serviceAccounts with namespaces or principals");
    }
    for (field, values) in identities {
        check_values(errors, &format!("{path}.{field}"), values);
        if field.ends_with("erviceAccounts") {
            for (i, value) in values.iter().enumerate() {
                let parts: Vec<&str> = value.split('/').collect();
                let valid = parts.len() <= 2
                    && parts
                        .iter()
                        .all(|p| !p.is_empty() && pilot_model::dns1123_subdomain(p).is_ok());
                if !valid {
                    errors.push(
                        format!("{path}.{field}[{i}]"),
                        format!(
                            "service account {value:?} must be NAME or NAMESPACE/NAME, without wildcards"
                        ),
                    );
                }
            }
        }
    }
    for (field, values) in lists {
        check_values(errors, &format!("{path}.{field}"), values);
        if field.contains("pBlocks") || field.contains("IpBlocks") {
            for (i, value) in values.iter().enumerate() {
                if let Err(message) = cidr(value) {
                    errors.push(format!("{path}.{field}[{i}]"), message);
                }
            }
        }
    }
}

fn validate_operation(errors: &mut FieldErrors, path: &str, operation: &Operation) {
    let lists: [(&str, &Vec<String>); 8] = [
        ("hosts", &operation.hosts),
        ("notHosts", &operation.not_hosts),
        ("ports", &operation.ports),
        ("notPorts", &operation.not_ports),
        ("methods", &operation.methods),
        ("notMethods", &operation.not_methods),
        ("paths", &operation.paths),
        ("notPaths", &operation.not_paths),
    ];
    if lists.iter().all(|(_, values)| values.is_empty()) {
        errors.push(path, "`to.operation` must not be empty");
    }
    for (field, values) in lists {
        check_values(errors, &format!("{path}.{field}"), values);
    }
    for (field, ports) in [("ports", &operation.ports), ("notPorts", &operation.not_ports)] {
        for (i, port) in ports.iter().enumerate() {
            if !matches!(port.parse::<u32>(), Ok(1..=65_535)) {
                errors.push(
                    format!("{path}.{field}[{i}]"),
                    format!("port {port:?} is not a number in 1..65535"),
                );
            }
        }
    }
    for (field, paths) in [("paths", &operation.paths), ("notPaths", &operation.not_paths)] {
        for (i, value) in paths.iter().enumerate() {
            if value != "*" && !value.starts_with('/') && !value.starts_with('*') {
                errors.push(
                    format!("{path}.{field}[{i}]"),
                    format!("path {value:?} must start with `/` (or be `*`, `*suffix`)"),
                );
            } else if value.contains(['{', '}']) {
                // Istio's path templates need Envoy's uri_template matcher
                // in RBAC, which the Envoy pilot is tested with aborts on
                // (even in --mode validate): matching one literally would
                // allow or deny other requests than meant.
                crate::primitives::not_supported(
                    errors,
                    &format!("{path}.{field}[{i}]"),
                    &format!("the path template {value:?} ({{*}}, {{**}})"),
                );
            }
        }
    }
}

fn validate_condition(errors: &mut FieldErrors, path: &str, condition: &Condition) {
    let key = condition.key.as_str();
    if key.is_empty() {
        errors.push(format!("{path}.key"), "`key` must not be empty");
    } else if let Some(header) = key
        .strip_prefix("request.headers[")
        .and_then(|k| k.strip_suffix(']'))
    {
        if header.is_empty() {
            errors.push(format!("{path}.key"), "request.headers[] needs a header name");
        }
    } else if key.starts_with("request.auth.") {
        if let Err(message) = super::jwt_keys::check_key(key) {
            errors.push(format!("{path}.key"), message);
        }
    } else if key.starts_with(FILTER_METADATA_KEY) {
        if filter_metadata_key(key).is_none() {
            errors.push(
                format!("{path}.key"),
                format!("{key:?} must be experimental.envoy.filters.FILTER[KEY]"),
            );
        }
    } else if !WHEN_KEYS.contains(&key) {
        errors.push(
            format!("{path}.key"),
            format!(
                "unknown attribute {key:?}; one of request.headers[NAME], {}",
                WHEN_KEYS.join(", ")
            ),
        );
    }
    if condition.values.is_empty() && condition.not_values.is_empty() {
        errors.push(
            path,
            format!("at least one of `values` or `notValues` must be set for key {key:?}"),
        );
    }
    check_values(errors, &format!("{path}.values"), &condition.values);
    check_values(errors, &format!("{path}.notValues"), &condition.not_values);
    if key == "destination.port" {
        for (field, values) in [
            ("values", &condition.values),
            ("notValues", &condition.not_values),
        ] {
            for (i, value) in values.iter().enumerate() {
                if !matches!(value.parse::<u32>(), Ok(1..=65_535)) {
                    errors.push(
                        format!("{path}.{field}[{i}]"),
                        format!("port {value:?} is not a number in 1..65535"),
                    );
                }
            }
        }
    }
    if matches!(key, "source.ip" | "remote.ip" | "destination.ip") {
        for (field, values) in [
            ("values", &condition.values),
            ("notValues", &condition.not_values),
        ] {
            for (i, value) in values.iter().enumerate() {
                if let Err(message) = cidr(value) {
                    errors.push(format!("{path}.{field}[{i}]"), message);
                }
            }
        }
    }
}

/// Empty strings are refused, as Istio does.
fn check_values(errors: &mut FieldErrors, path: &str, values: &[String]) {
    for (i, value) in values.iter().enumerate() {
        if value.is_empty() {
            errors.push(format!("{path}[{i}]"), "an empty value is not allowed");
        }
    }
}
