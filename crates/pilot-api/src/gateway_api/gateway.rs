//! `Gateway`: a load balancer's listeners (port, protocol, hostname, TLS,
//! which routes may attach) and addresses, of one GatewayClass.

use std::collections::BTreeMap;

use pilot_model::FieldErrors;
use serde::{Deserialize, Serialize};

use super::checks::{self, at, index};
use super::common::{LabelSelector, SecretObjectReference};
use super::gateway_tls::GatewayTlsConfig;
use super::patterns;
#[cfg(feature = "schema")]
use super::shapes;

/// A Gateway: listeners and addresses served by an implementation of its
/// class.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["gatewayClassName", "listeners"])))]
pub struct Gateway {
    /// The GatewayClass (required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub gateway_class_name: String,
    /// The listeners (1 to 64, unique by name; required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 64), extend("x-kubernetes-list-type" = "map"), extend("x-kubernetes-list-map-keys" = ["name"])))]
    pub listeners: Vec<Listener>,
    /// Addresses requested for the Gateway (at most 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub addresses: Option<Vec<GatewayAddress>>,
    /// Labels, annotations and parameters for the resources the
    /// implementation creates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure: Option<GatewayInfrastructure>,
    /// Which ListenerSets may attach (experimental).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_listeners: Option<AllowedListeners>,
    /// TLS for the Gateway as a whole: client certificates to backends,
    /// validation of clients' certificates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<GatewayTlsConfig>,
    /// Whether routes using default Gateways attach (experimental).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_scope: Option<GatewayDefaultScope>,
}

/// One listener: a port, a protocol, an optional hostname and TLS.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["name", "port", "protocol"])))]
pub struct Listener {
    /// The listener's name, unique in the Gateway (required).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 253), pattern(shapes::SUBDOMAIN))
    )]
    pub name: String,
    /// The hostname matched (SNI or Host); every hostname when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 253), pattern(shapes::HOSTNAME))
    )]
    pub hostname: Option<String>,
    /// The port (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub port: Option<i32>,
    /// `HTTP`, `HTTPS`, `TLS`, `TCP`, `UDP` or a domain-prefixed
    /// implementation protocol (required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 255), pattern(r#"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9]+$"#)))]
    pub protocol: String,
    /// TLS for `HTTPS` and `TLS` listeners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ListenerTlsConfig>,
    /// Which routes may attach ([`Listener::allowed_routes`] gives the
    /// default: routes of the Gateway's namespace).
    #[serde(default, rename = "allowedRoutes", skip_serializing_if = "Option::is_none")]
    pub allowed_routes_written: Option<AllowedRoutes>,
}

impl Listener {
    /// Which routes may attach: as written, or routes of the Gateway's own
    /// namespace.
    pub fn allowed_routes(&self) -> AllowedRoutes {
        self.allowed_routes_written.clone().unwrap_or_default()
    }
}

/// TLS of a listener.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListenerTlsConfig {
    /// Terminate or pass through ([`ListenerTlsConfig::mode`] gives the
    /// default, `Terminate`).
    #[serde(default, rename = "mode", skip_serializing_if = "Option::is_none")]
    pub mode_written: Option<TlsMode>,
    /// The certificates served (at most 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "atomic")))]
    pub certificate_refs: Option<Vec<SecretObjectReference>>,
    /// Implementation-specific options (at most 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxProperties" = 16), extend("additionalProperties" = {"type": "string", "maxLength": 4096})))]
    pub options: Option<BTreeMap<String, String>>,
}

impl ListenerTlsConfig {
    /// The TLS mode, `Terminate` when not written.
    pub fn mode(&self) -> TlsMode {
        self.mode_written.unwrap_or(TlsMode::Terminate)
    }
}

/// What a listener does with TLS.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TlsMode {
    /// The listener ends TLS with its certificates.
    Terminate,
    /// The stream goes on encrypted, routed by SNI.
    Passthrough,
}

/// Which routes may attach to a listener.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllowedRoutes {
    /// From which namespaces ([`AllowedRoutes::namespaces`] gives the
    /// default: `Same`).
    #[serde(default, rename = "namespaces", skip_serializing_if = "Option::is_none")]
    pub namespaces_written: Option<RouteNamespaces>,
    /// Which kinds (at most 8); the protocol's kinds when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 8), extend("x-kubernetes-list-type" = "atomic")))]
    pub kinds: Option<Vec<RouteGroupKind>>,
}

impl AllowedRoutes {
    /// From which namespaces routes may attach: as written, or the
    /// Gateway's own.
    pub fn namespaces(&self) -> RouteNamespaces {
        self.namespaces_written.clone().unwrap_or_default()
    }
}

/// The namespaces routes may attach from.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteNamespaces {
    /// `All`, `Selector` or `Same` ([`RouteNamespaces::from`] gives the
    /// default, `Same`).
    #[serde(default, rename = "from", skip_serializing_if = "Option::is_none")]
    pub from_written: Option<FromNamespaces>,
    /// The namespaces' labels, for `Selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

impl RouteNamespaces {
    /// Where routes may come from, `Same` when not written.
    pub fn from(&self) -> FromNamespaces {
        self.from_written.unwrap_or(FromNamespaces::Same)
    }
}

/// Which namespaces.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FromNamespaces {
    /// Every namespace.
    All,
    /// Namespaces matching the selector.
    Selector,
    /// The Gateway's namespace only.
    Same,
    /// None (only for ListenerSets).
    None,
}

/// A kind of route, by group and kind.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["kind"])))]
pub struct RouteGroupKind {
    /// The route's group, `gateway.networking.k8s.io` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253), pattern(shapes::GROUP)))]
    pub group: Option<String>,
    /// The route's kind (required).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::KIND))
    )]
    pub kind: String,
}

impl RouteGroupKind {
    /// The route's group, `gateway.networking.k8s.io` when not written.
    pub fn group(&self) -> &str {
        self.group.as_deref().unwrap_or(super::GROUP)
    }
}

/// An address requested for the Gateway.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayAddress {
    /// `IPAddress`, `Hostname`, `NamedAddress` or a domain-prefixed type
    /// ([`GatewayAddress::address_type`] gives the default, `IPAddress`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253), pattern(r#"^Hostname|IPAddress|NamedAddress|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$"#)))]
    pub type_written: Option<String>,
    /// The address; the implementation chooses one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253)))]
    pub value: Option<String>,
}

impl GatewayAddress {
    /// The address's type, `IPAddress` when not written.
    pub fn address_type(&self) -> &str {
        self.type_written.as_deref().unwrap_or("IPAddress")
    }
}

/// Labels, annotations and parameters for the resources an implementation
/// creates for the Gateway.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayInfrastructure {
    /// Labels (at most 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxProperties" = 8), extend("additionalProperties" = {"type": "string", "maxLength": 63, "pattern": "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"})))]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations (at most 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxProperties" = 16), extend("additionalProperties" = {"type": "string", "maxLength": 4096})))]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Implementation-specific parameters in the Gateway's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters_ref: Option<super::common::LocalObjectReference>,
}

/// Which ListenerSets may attach to the Gateway.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllowedListeners {
    /// From which namespaces ([`AllowedListeners::namespaces`] gives the
    /// default: `None`).
    #[serde(default, rename = "namespaces", skip_serializing_if = "Option::is_none")]
    pub namespaces_written: Option<RouteNamespaces>,
}

impl AllowedListeners {
    /// From which namespaces ListenerSets may attach; none when not
    /// written.
    pub fn namespaces(&self) -> RouteNamespaces {
        self.namespaces_written.clone().unwrap_or(RouteNamespaces {
            from_written: Some(FromNamespaces::None),
            selector: None,
        })
    }
}

/// Whether routes that use default Gateways attach.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GatewayDefaultScope {
    /// Every such route.
    All,
    /// None.
    None,
}

pub(crate) fn validate(gw: &Gateway, errors: &mut FieldErrors) {
    checks::length(errors, "spec.gatewayClassName", &gw.gateway_class_name, 1, 253);
    check_listeners(errors, "spec.listeners", &gw.listeners);
    check_addresses(errors, "spec.addresses", checks::list(&gw.addresses));
    if let Some(infra) = &gw.infrastructure {
        let path = "spec.infrastructure";
        super::common::check_labels(errors, &at(path, "labels"), infra.labels.as_ref(), 8, true);
        super::common::check_labels(
            errors,
            &at(path, "annotations"),
            infra.annotations.as_ref(),
            16,
            false,
        );
        if let Some(params) = &infra.parameters_ref {
            params.check(errors, &at(path, "parametersRef"));
        }
    }
    if let Some(namespaces) = gw
        .allowed_listeners
        .as_ref()
        .and_then(|a| a.namespaces_written.as_ref())
        && let Some(selector) = &namespaces.selector
    {
        selector.check(errors, "spec.allowedListeners.namespaces.selector");
    }
    if let Some(tls) = &gw.tls {
        super::gateway_tls::check(errors, "spec.tls", tls);
    }
}

/// A rule the CRD states of each listener, true when broken.
type ListenerRule = fn(&Listener) -> bool;

fn check_listeners(errors: &mut FieldErrors, path: &str, listeners: &[Listener]) {
    checks::items(errors, path, listeners.len(), 1, 64);
    checks::unique_keys(errors, path, listeners, |l| l.name.as_str(), "listener name");
    for (i, listener) in listeners.iter().enumerate() {
        check_listener(errors, &index(path, i), listener);
    }
    let mut names = std::collections::HashSet::new();
    if listeners.iter().any(|l| !names.insert(l.name.as_str())) {
        errors.push(
            path,
            "two listeners have the same name: listener names must be unique within the Gateway",
        );
    }
    let rules: [(&str, ListenerRule); 4] = [
        (
            "must not have tls: its protocol (HTTP, TCP or UDP) has no TLS",
            |l| protocol_is(l, &["HTTP", "TCP", "UDP"]) && l.tls.is_some(),
        ),
        ("is HTTPS: its tls mode must be Terminate", |l| {
            l.protocol == "HTTPS" && l.tls.as_ref().is_some_and(|t| t.mode() != TlsMode::Terminate)
        }),
        ("is TLS: it needs tls with a mode", |l| {
            l.protocol == "TLS" && l.tls.is_none()
        }),
        (
            "must not have a hostname: its protocol (TCP or UDP) carries none",
            |l| protocol_is(l, &["TCP", "UDP"]) && has_hostname(l),
        ),
    ];
    for (message, broken) in rules {
        for (i, listener) in listeners.iter().enumerate().filter(|(_, l)| broken(l)) {
            errors.push(path, format!("listener {i} ({:?}) {message}", listener.name));
        }
    }
    let combination = |l: &Listener| (l.port, l.protocol.clone(), l.hostname.clone());
    let mut seen = std::collections::HashMap::new();
    for (i, listener) in listeners.iter().enumerate() {
        if let Some(first) = seen.insert(combination(listener), i) {
            errors.push(
                path,
                format!(
                    "listeners {first} and {i} have the same port, protocol and hostname: each combination must be unique"
                ),
            );
        }
    }
}

fn protocol_is(listener: &Listener, names: &[&str]) -> bool {
    names.contains(&listener.protocol.as_str())
}

fn has_hostname(listener: &Listener) -> bool {
    listener.hostname.as_deref().is_some_and(|h| !h.is_empty())
}

fn check_listener(errors: &mut FieldErrors, path: &str, listener: &Listener) {
    checks::section_name(errors, &at(path, "name"), &listener.name);
    if let Some(host) = &listener.hostname {
        checks::hostname(errors, &at(path, "hostname"), host);
    }
    match listener.port {
        Some(port) => checks::port(errors, &at(path, "port"), port),
        None => errors.push(at(path, "port"), "is required"),
    }
    let protocol = at(path, "protocol");
    checks::length(errors, &protocol, &listener.protocol, 1, 255);
    if !listener.protocol.is_empty() && !patterns::is_listener_protocol(&listener.protocol) {
        errors.push(
            protocol,
            format!(
                "{:?} is not a protocol: a name of letters, digits and inner dashes (HTTP, HTTPS, TLS, TCP, UDP) or a domain-prefixed one (example.com/proto)",
                listener.protocol
            ),
        );
    }
    if let Some(tls) = &listener.tls {
        let path = at(path, "tls");
        let refs = at(&path, "certificateRefs");
        checks::items(errors, &refs, checks::list(&tls.certificate_refs).len(), 0, 64);
        for (i, reference) in checks::list(&tls.certificate_refs).iter().enumerate() {
            reference.check(errors, &index(&refs, i));
        }
        checks::options(errors, &at(&path, "options"), tls.options.as_ref(), 16);
        if tls.mode() == TlsMode::Terminate
            && checks::list(&tls.certificate_refs).is_empty()
            && tls.options.as_ref().is_none_or(BTreeMap::is_empty)
        {
            errors.push(path, "mode Terminate needs certificateRefs or options");
        }
    }
    if let Some(allowed) = &listener.allowed_routes_written {
        let path = at(path, "allowedRoutes");
        if let Some(selector) = allowed
            .namespaces_written
            .as_ref()
            .and_then(|n| n.selector.as_ref())
        {
            selector.check(errors, &at(&path, "namespaces.selector"));
        }
        if allowed.namespaces_written.as_ref().and_then(|n| n.from_written) == Some(FromNamespaces::None) {
            errors.push(
                at(&path, "namespaces.from"),
                "must be All, Selector or Same (None is for ListenerSets)",
            );
        }
        let kinds = at(&path, "kinds");
        checks::items(errors, &kinds, checks::list(&allowed.kinds).len(), 0, 8);
        for (i, kind) in checks::list(&allowed.kinds).iter().enumerate() {
            let path = index(&kinds, i);
            if let Some(group) = &kind.group {
                checks::group(errors, &at(&path, "group"), group);
            }
            checks::kind(errors, &at(&path, "kind"), &kind.kind);
        }
    }
}

fn check_addresses(errors: &mut FieldErrors, path: &str, addresses: &[GatewayAddress]) {
    checks::items(errors, path, addresses.len(), 0, 16);
    for (i, address) in addresses.iter().enumerate() {
        let path = index(path, i);
        let kind = address.address_type();
        if let Some(written) = &address.type_written {
            let at_type = at(&path, "type");
            checks::length(errors, &at_type, written, 1, 253);
            if !written.is_empty() && !patterns::is_address_type(written) {
                errors.push(
                    at_type,
                    format!("{written:?} is not an address type: IPAddress, Hostname, NamedAddress or a domain-prefixed type"),
                );
            }
        }
        let Some(value) = &address.value else { continue };
        let at_value = at(&path, "value");
        checks::length(errors, &at_value, value, 0, 253);
        if kind == "IPAddress" && !patterns::is_ip(value) {
            errors.push(
                at_value,
                format!("{value:?} is not an IP address (the address's type is IPAddress)"),
            );
        } else if kind == "Hostname" && !value.is_empty() && !patterns::is_hostname(value) {
            errors.push(
                &path,
                format!("{value:?} is not a hostname (the address's type is Hostname): lower-case DNS labels joined by dots, optionally behind \"*.\""),
            );
        }
    }
    for kind in ["IPAddress", "Hostname"] {
        let values: Vec<&str> = addresses
            .iter()
            .filter(|a| a.address_type() == kind)
            .filter_map(|a| a.value.as_deref())
            .collect();
        let mut seen = std::collections::HashSet::new();
        if let Some(value) = values.iter().find(|v| !seen.insert(**v)) {
            errors.push(
                path,
                format!("{kind} {value:?} is listed twice: {kind} values must be unique"),
            );
        }
    }
}
