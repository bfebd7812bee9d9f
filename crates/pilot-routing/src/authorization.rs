//! AuthorizationPolicies compiled ([`AuthorizationPolicies`]): each
//! policy with the workloads it applies to, its action and its rules, the
//! rules' fields in the form generation turns into RBAC filters (ports
//! as numbers, `when` keys as the attribute they read, whether a rule
//! needs an HTTP request).
//!
//! A policy applies to the workloads of its namespace (of the mesh, in
//! the root namespace) its selector matches.

/// A JWT attribute a condition reads (`request.auth.*`).
pub use pilot_api::security::AuthAttribute;
use pilot_api::security::{self as api, AuthorizationPolicy};
use pilot_model::{Config, Labels};

use super::RoutingConfigs;

/// The authorization policies of a model, with the root namespace whose
/// policies apply to every namespace's workloads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthorizationPolicies {
    root_namespace: String,
    policies: Vec<Policy>,
}

/// One policy.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Policy {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The labels a workload must carry for it to apply; none: every
    /// workload of its namespace.
    pub selector: Option<Labels>,
    /// What a matching request gets.
    pub action: Action,
    /// Its rules, in order.
    pub rules: Vec<Rule>,
    /// The extension provider a CUSTOM policy delegates to
    /// (`provider.name`); `None` for the other actions.
    pub provider: Option<String>,
}

/// What a policy does with what its rules match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// Only what some ALLOW rule matches is allowed.
    Allow,
    /// What any DENY rule matches is denied.
    Deny,
    /// What any AUDIT rule matches is marked for audit (Envoy's RBAC
    /// action LOG); never decides.
    Audit,
    /// What any CUSTOM rule matches is decided by the policy's extension
    /// provider (`Policy::provider`).
    Custom,
}

/// One rule: who calls (`from`), what is called (`to`), and conditions
/// (`when`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Rule {
    /// The callers' sources, any of which matches; `None`: no `from`.
    pub from: Option<Vec<Source>>,
    /// The operations called, any of which matches; `None`: no `to`.
    pub to: Option<Vec<Operation>>,
    /// Conditions, all of which must hold.
    pub when: Vec<Condition>,
    /// Whether it has a field only an HTTP request has (an operation's
    /// hosts, methods or paths, a `when` on a request attribute).
    pub http_only: bool,
}

/// Who calls: every non-empty list must match.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Source {
    /// Peer identities (`td/ns/x/sa/y`).
    pub principals: Vec<String>,
    /// Peer identities that must not match.
    pub not_principals: Vec<String>,
    /// Peer namespaces.
    pub namespaces: Vec<String>,
    /// Peer namespaces that must not match.
    pub not_namespaces: Vec<String>,
    /// Peer addresses or CIDR blocks.
    pub ip_blocks: Vec<String>,
    /// Peer addresses that must not match.
    pub not_ip_blocks: Vec<String>,
    /// Original client addresses (X-Forwarded-For).
    pub remote_ip_blocks: Vec<String>,
    /// Original client addresses that must not match.
    pub not_remote_ip_blocks: Vec<String>,
    /// Peer service accounts, `namespace/name` (a bare name is read in
    /// the policy's namespace).
    pub service_accounts: Vec<String>,
    /// Peer service accounts that must not match.
    pub not_service_accounts: Vec<String>,
    /// Trust domains of the peer's identity.
    pub trust_domains: Vec<String>,
    /// Trust domains that must not match.
    pub not_trust_domains: Vec<String>,
    /// JWT principals, `iss/sub` (HTTP only).
    pub request_principals: Vec<String>,
    /// JWT principals that must not match.
    pub not_request_principals: Vec<String>,
}

/// What is called: every non-empty list must match.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Operation {
    /// Hosts (HTTP only).
    pub hosts: Vec<String>,
    /// Hosts that must not match.
    pub not_hosts: Vec<String>,
    /// Methods (HTTP only).
    pub methods: Vec<String>,
    /// Methods that must not match.
    pub not_methods: Vec<String>,
    /// Paths (HTTP only).
    pub paths: Vec<String>,
    /// Paths that must not match.
    pub not_paths: Vec<String>,
    /// Destination ports (a port that does not parse is 0).
    pub ports: Vec<u32>,
    /// Destination ports that must not match.
    pub not_ports: Vec<u32>,
}

/// A `when` condition: the attribute has one of `values` and none of
/// `not_values`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Condition {
    /// What it reads.
    pub attribute: Attribute,
    /// Values any of which must match.
    pub values: Vec<String>,
    /// Values none of which may match.
    pub not_values: Vec<String>,
    /// Whether only an HTTP request has the attribute.
    pub http_only: bool,
}

/// The attribute a condition reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Attribute {
    /// A request header (`request.headers[NAME]`), its name lowercased.
    Header(String),
    /// `source.ip`: the peer's address.
    SourceIp,
    /// `remote.ip`: the original client's address.
    RemoteIp,
    /// `source.namespace`: the peer's namespace.
    SourceNamespace,
    /// `source.principal`: the peer's identity.
    SourcePrincipal,
    /// `destination.ip`.
    DestinationIp,
    /// `destination.port`.
    DestinationPort,
    /// `connection.sni`: the server name the client asked for.
    ConnectionSni,
    /// `source.trustDomain`: the trust domain of the peer's identity.
    SourceTrustDomain,
    /// `experimental.envoy.filters.FILTER[KEY]`: a value another filter
    /// wrote in the request's dynamic metadata.
    FilterMetadata {
        /// The filter's name (`envoy.filters.FILTER`).
        filter: String,
        /// The path to the value in its metadata.
        path: Vec<String>,
    },
    /// `request.auth.*`: what the request's JWT says (HTTP only).
    Auth(AuthAttribute),
    /// A key validation refuses: matches nothing generated.
    Other(String),
}

impl AuthorizationPolicies {
    /// The authorization policies of `configs`, compiled.
    pub(crate) fn compile(configs: &RoutingConfigs) -> Self {
        AuthorizationPolicies {
            root_namespace: configs.root_namespace.clone(),
            policies: configs
                .authorization_policies
                .iter()
                .map(|c| Policy::of(c))
                .collect(),
        }
    }

    /// Every policy, in the order the objects came.
    pub fn policies(&self) -> &[Policy] {
        &self.policies
    }

    /// True when there is no policy.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// The policies that apply to a workload of `namespace` carrying
    /// `labels`: those of its namespace or of the root namespace whose
    /// selector, if any, it matches.
    pub fn applying<'a>(
        &'a self,
        namespace: &'a str,
        labels: &'a Labels,
    ) -> impl Iterator<Item = &'a Policy> {
        self.policies.iter().filter(move |p| {
            (p.namespace == self.root_namespace || p.namespace == namespace)
                && p.selector.as_ref().is_none_or(|s| s.is_subset_of(labels))
        })
    }
}

impl Policy {
    /// Why a proxy that sees connections and not requests (ztunnel, the
    /// node proxy of ambient mode) cannot enforce this policy as written,
    /// so that only a waypoint could: the fields of its rules it cannot
    /// read ([`Rule::l4_unsupported`]) and what becomes of the rules
    /// holding them, as istiod translates them for ztunnel. An ALLOW rule
    /// holding one is left out (less is allowed than asked); a DENY rule
    /// is kept without them (more is denied than asked), except that a
    /// `from`, `to` or `when` left with nothing ztunnel reads matches
    /// nothing there, and so does the rule (less is denied than asked).
    /// `None` when every field is one it reads, and for AUDIT and CUSTOM
    /// policies, which are not ztunnel's.
    pub fn needs_waypoint(&self) -> Option<String> {
        let mut fields = Vec::new();
        let mut inert = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            let found = rule.l4_unsupported(&format!("spec.rules[{i}]"));
            if !found.is_empty() && rule.matches_nothing_at_l4() {
                inert.push(format!("spec.rules[{i}]"));
            }
            fields.extend(found);
        }
        if fields.is_empty() {
            return None;
        }
        let effect = match self.action {
            Action::Allow => {
                "ztunnel leaves out the ALLOW rules holding them, so it allows less than asked".to_string()
            }
            Action::Deny if inert.is_empty() => {
                "ztunnel enforces the DENY rules without them, so it denies more than asked".to_string()
            }
            Action::Deny => format!(
                "ztunnel enforces the DENY rules without them, and {} match nothing there (every entry of a from, \
                 to or when is such a field), so it denies less than asked",
                inert.join(", ")
            ),
            Action::Audit | Action::Custom => return None,
        };
        Some(format!("{} ({effect})", fields.join(", ")))
    }

    fn of(config: &Config<AuthorizationPolicy>) -> Self {
        let spec = &config.spec;
        Policy {
            namespace: config.meta.namespace.clone(),
            name: config.meta.name.clone(),
            selector: api::WorkloadSelector::labels(spec.selector.as_ref()).map(|s| Labels(s.clone())),
            action: match spec.action {
                api::Action::Allow => Action::Allow,
                api::Action::Deny => Action::Deny,
                api::Action::Audit => Action::Audit,
                api::Action::Custom => Action::Custom,
            },
            rules: spec
                .rules
                .iter()
                .map(|rule| {
                    let mut rule = Rule::of(rule);
                    for sources in rule.from.iter_mut() {
                        for source in sources.iter_mut() {
                            *source = std::mem::take(source).in_namespace(&config.meta.namespace);
                        }
                    }
                    rule
                })
                .collect(),
            provider: (spec.action == api::Action::Custom)
                .then(|| spec.provider.as_ref().map(|p| p.name.clone()).unwrap_or_default()),
        }
    }
}

impl Rule {
    /// A rule of a policy, compiled.
    pub fn of(rule: &api::Rule) -> Self {
        Rule {
            from: rule.from.as_ref().map(|from| {
                from.iter()
                    .filter_map(|f| f.source.as_ref())
                    .map(Source::of)
                    .collect()
            }),
            to: rule.to.as_ref().map(|to| {
                to.iter()
                    .filter_map(|t| t.operation.as_ref())
                    .map(Operation::of)
                    .collect()
            }),
            when: rule.when.iter().map(Condition::of).collect(),
            http_only: !rule.http_only_fields("").is_empty(),
        }
    }
}

impl Rule {
    /// The field paths (under `at`, e.g. `spec.rules[0]`) of what a proxy
    /// that sees connections and not requests cannot match, as istiod
    /// counts them for ztunnel: an operation's hosts, methods and paths; a
    /// source's request principals and remote IP blocks (and, an
    /// extension of pilot's, its trust domains); a `when` on any key but
    /// `source.ip`, `source.namespace`, `source.principal`,
    /// `destination.ip` and `destination.port`. Each with its `not` form.
    pub fn l4_unsupported(&self, at: &str) -> Vec<String> {
        let mut found = Vec::new();
        for (j, source) in self.from.iter().flatten().enumerate() {
            for (field, values) in source.l4_unsupported() {
                if !values.is_empty() {
                    found.push(format!("{at}.from[{j}].source.{field}"));
                }
            }
        }
        for (j, operation) in self.to.iter().flatten().enumerate() {
            for (field, values) in operation.l4_unsupported() {
                if !values.is_empty() {
                    found.push(format!("{at}.to[{j}].operation.{field}"));
                }
            }
        }
        for (j, condition) in self.when.iter().enumerate() {
            if !condition.attribute.is_l4() {
                found.push(format!("{at}.when[{j}]"));
            }
        }
        found
    }

    /// Whether, once the fields [`l4_unsupported`](Self::l4_unsupported)
    /// names are left out, some part of the rule is left with nothing to
    /// match (a `from` whose every source, a `to` whose every operation,
    /// has only such fields; a `when` on such a key), so the rule matches
    /// nothing at a proxy that sees only connections.
    pub fn matches_nothing_at_l4(&self) -> bool {
        let from = self.from.as_deref().unwrap_or_default();
        let to = self.to.as_deref().unwrap_or_default();
        (!from.is_empty() && from.iter().all(|s| !s.has_l4()))
            || (!to.is_empty() && to.iter().all(|o| !o.has_l4()))
            || self.when.iter().any(|c| !c.attribute.is_l4())
    }
}

impl Source {
    /// Whether it has a field a proxy that sees only connections matches.
    pub fn has_l4(&self) -> bool {
        [
            &self.principals,
            &self.not_principals,
            &self.namespaces,
            &self.not_namespaces,
            &self.ip_blocks,
            &self.not_ip_blocks,
            &self.service_accounts,
            &self.not_service_accounts,
        ]
        .iter()
        .any(|values| !values.is_empty())
    }

    fn l4_unsupported(&self) -> [(&'static str, &Vec<String>); 6] {
        [
            ("requestPrincipals", &self.request_principals),
            ("notRequestPrincipals", &self.not_request_principals),
            ("remoteIpBlocks", &self.remote_ip_blocks),
            ("notRemoteIpBlocks", &self.not_remote_ip_blocks),
            ("trustDomains", &self.trust_domains),
            ("notTrustDomains", &self.not_trust_domains),
        ]
    }

    fn of(source: &api::Source) -> Self {
        Source {
            principals: source.principals.clone(),
            not_principals: source.not_principals.clone(),
            namespaces: source.namespaces.clone(),
            not_namespaces: source.not_namespaces.clone(),
            ip_blocks: source.ip_blocks.clone(),
            not_ip_blocks: source.not_ip_blocks.clone(),
            remote_ip_blocks: source.remote_ip_blocks.clone(),
            not_remote_ip_blocks: source.not_remote_ip_blocks.clone(),
            service_accounts: source.service_accounts.clone(),
            not_service_accounts: source.not_service_accounts.clone(),
            trust_domains: source.trust_domains.clone(),
            not_trust_domains: source.not_trust_domains.clone(),
            request_principals: source.request_principals.clone(),
            not_request_principals: source.not_request_principals.clone(),
        }
    }

    /// Bare service account names read in `namespace` (the policy's).
    fn in_namespace(mut self, namespace: &str) -> Self {
        for list in [&mut self.service_accounts, &mut self.not_service_accounts] {
            for account in list.iter_mut() {
                if !account.contains('/') {
                    *account = format!("{namespace}/{account}");
                }
            }
        }
        self
    }
}

impl Operation {
    /// Whether it has a field a proxy that sees only connections matches
    /// (its ports).
    pub fn has_l4(&self) -> bool {
        !self.ports.is_empty() || !self.not_ports.is_empty()
    }

    fn l4_unsupported(&self) -> [(&'static str, &Vec<String>); 6] {
        [
            ("hosts", &self.hosts),
            ("notHosts", &self.not_hosts),
            ("methods", &self.methods),
            ("notMethods", &self.not_methods),
            ("paths", &self.paths),
            ("notPaths", &self.not_paths),
        ]
    }

    fn of(operation: &api::Operation) -> Self {
        let ports = |ports: &[String]| ports.iter().map(|p| p.parse().unwrap_or(0)).collect();
        Operation {
            hosts: operation.hosts.clone(),
            not_hosts: operation.not_hosts.clone(),
            methods: operation.methods.clone(),
            not_methods: operation.not_methods.clone(),
            paths: operation.paths.clone(),
            not_paths: operation.not_paths.clone(),
            ports: ports(&operation.ports),
            not_ports: ports(&operation.not_ports),
        }
    }
}

impl Attribute {
    /// Whether a proxy that sees only connections (ztunnel) reads it:
    /// `source.ip`, `source.namespace`, `source.principal`,
    /// `destination.ip` and `destination.port`.
    pub fn is_l4(&self) -> bool {
        matches!(
            self,
            Attribute::SourceIp
                | Attribute::SourceNamespace
                | Attribute::SourcePrincipal
                | Attribute::DestinationIp
                | Attribute::DestinationPort
        )
    }
}

impl Condition {
    fn of(condition: &api::Condition) -> Self {
        let attribute = match (condition.header(), condition.key.as_str()) {
            (Some(name), _) => Attribute::Header(name.to_ascii_lowercase()),
            (None, "source.ip") => Attribute::SourceIp,
            (None, "remote.ip") => Attribute::RemoteIp,
            (None, "source.namespace") => Attribute::SourceNamespace,
            (None, "source.principal") => Attribute::SourcePrincipal,
            (None, "destination.ip") => Attribute::DestinationIp,
            (None, "destination.port") => Attribute::DestinationPort,
            (None, "connection.sni") => Attribute::ConnectionSni,
            (None, "source.trustDomain") => Attribute::SourceTrustDomain,
            (None, other) => match (AuthAttribute::parse(other), api::filter_metadata_key(other)) {
                (Ok(auth), _) => Attribute::Auth(auth),
                (_, Some((filter, path))) => Attribute::FilterMetadata { filter, path },
                _ => Attribute::Other(other.to_string()),
            },
        };
        Condition {
            attribute,
            values: condition.values.clone(),
            not_values: condition.not_values.clone(),
            http_only: condition.is_http_only(),
        }
    }
}
