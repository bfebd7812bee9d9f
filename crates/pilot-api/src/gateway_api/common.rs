//! Types several Gateway API kinds share: references to parents, backends,
//! secrets and other objects, label selectors, and the parent references'
//! uniqueness rules. Defaults the CRDs apply are accessors
//! (`ParentReference::group`), the stored spec keeps what was written.

use std::collections::BTreeMap;

use pilot_model::FieldErrors;
use serde::{Deserialize, Serialize};

use super::GROUP;
use super::checks::{self, at, index};
use super::patterns;
#[cfg(feature = "schema")]
use super::shapes;

/// A route's reference to its parent (a Gateway, a listener of one, or
/// another kind that accepts routes).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["name"])))]
pub struct ParentReference {
    /// The parent's API group ([`ParentReference::group`] gives the
    /// default, `gateway.networking.k8s.io`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253), pattern(shapes::GROUP)))]
    pub group: Option<String>,
    /// The parent's kind ([`ParentReference::kind`] gives the default,
    /// `Gateway`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::KIND))
    )]
    pub kind: Option<String>,
    /// The parent's namespace; the route's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::NAMESPACE))
    )]
    pub namespace: Option<String>,
    /// The parent's name (required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: String,
    /// A section of the parent (a Gateway's listener name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 253), pattern(shapes::SUBDOMAIN))
    )]
    pub section_name: Option<String>,
    /// A port of the parent (a Gateway's listeners on that port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub port: Option<i32>,
}

impl ParentReference {
    /// The parent's group, `gateway.networking.k8s.io` when not written.
    pub fn group(&self) -> &str {
        self.group.as_deref().unwrap_or(GROUP)
    }

    /// The parent's kind, `Gateway` when not written.
    pub fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or("Gateway")
    }

    fn check(&self, errors: &mut FieldErrors, path: &str) {
        if let Some(group) = &self.group {
            checks::group(errors, &at(path, "group"), group);
        }
        if let Some(kind) = &self.kind {
            checks::kind(errors, &at(path, "kind"), kind);
        }
        if let Some(namespace) = &self.namespace {
            checks::namespace(errors, &at(path, "namespace"), namespace);
        }
        checks::object_name(errors, &at(path, "name"), &self.name);
        if let Some(section) = &self.section_name {
            checks::section_name(errors, &at(path, "sectionName"), section);
        }
        if let Some(port) = self.port {
            checks::port(errors, &at(path, "port"), port);
        }
    }

    fn same_parent(&self, other: &ParentReference) -> bool {
        let namespace = |p: &ParentReference| p.namespace.clone().unwrap_or_default();
        self.group() == other.group()
            && self.kind() == other.kind()
            && self.name == other.name
            && namespace(self) == namespace(other)
    }
}

/// Checks a route's `parentRefs` (at most 32): each reference, and the
/// CRDs' rules for several references to one parent: each says which
/// section or port it means (all or none of them naming a section, all or
/// none a port), and no two say the same.
pub(crate) fn check_parent_refs(errors: &mut FieldErrors, path: &str, refs: &[ParentReference]) {
    checks::items(errors, path, refs.len(), 0, 32);
    for (i, parent) in refs.iter().enumerate() {
        parent.check(errors, &index(path, i));
    }
    let section = |p: &ParentReference| p.section_name.clone().unwrap_or_default();
    let port = |p: &ParentReference| p.port.unwrap_or(0);
    let mut unspecific = false;
    let mut duplicate = false;
    for (i, p1) in refs.iter().enumerate() {
        for p2 in &refs[i + 1..] {
            if !p1.same_parent(p2) {
                continue;
            }
            if section(p1).is_empty() != section(p2).is_empty() || (port(p1) == 0) != (port(p2) == 0) {
                unspecific = true;
            }
            if section(p1) == section(p2) && port(p1) == port(p2) {
                duplicate = true;
            }
        }
    }
    if unspecific {
        errors.push(
            path,
            "references to the same parent must all name a sectionName or none, and all a port or none",
        );
    }
    if duplicate {
        errors.push(
            path,
            "two references to the same parent name the same sectionName and port: each must be distinct",
        );
    }
}

/// Checks a route's `hostnames` (at most 16 wildcard-capable hostnames).
pub(crate) fn check_hostnames(errors: &mut FieldErrors, path: &str, hosts: &[String], max: usize) {
    checks::items(errors, path, hosts.len(), 0, max);
    for (i, host) in hosts.iter().enumerate() {
        checks::hostname(errors, &index(path, i), host);
    }
}

/// Rule names are unique within a route.
pub(crate) fn check_rule_names<'a>(
    errors: &mut FieldErrors,
    path: &str,
    names: impl Iterator<Item = Option<&'a String>>,
) {
    let names: Vec<&String> = names.flatten().collect();
    let mut seen = std::collections::HashSet::new();
    if names.iter().any(|name| !seen.insert(*name)) {
        errors.push(
            path,
            "two rules have the same name: rule names must be unique within the route",
        );
    }
}

/// A reference to a backend (a Service unless `group`/`kind` say
/// otherwise).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["name"])))]
pub struct BackendObjectReference {
    /// The backend's group, the core group (`""`) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253), pattern(shapes::GROUP)))]
    pub group: Option<String>,
    /// The backend's kind, `Service` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::KIND))
    )]
    pub kind: Option<String>,
    /// The backend's name (required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: String,
    /// The backend's namespace; the route's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::NAMESPACE))
    )]
    pub namespace: Option<String>,
    /// The port (required for a Service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub port: Option<i32>,
}

impl BackendObjectReference {
    /// The backend's group, `""` (core) when not written.
    pub fn group(&self) -> &str {
        self.group.as_deref().unwrap_or("")
    }

    /// The backend's kind, `Service` when not written.
    pub fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or("Service")
    }

    pub(crate) fn check(&self, errors: &mut FieldErrors, path: &str) {
        check_backend(
            errors,
            path,
            (self.group.as_deref(), self.kind.as_deref(), &self.name),
            self.namespace.as_deref(),
            self.port,
        );
    }
}

/// A backend of a TCPRoute or TLSRoute rule: a backend reference with a
/// weight.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["name"])))]
pub struct BackendRef {
    /// The backend's group, the core group (`""`) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253), pattern(shapes::GROUP)))]
    pub group: Option<String>,
    /// The backend's kind, `Service` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::KIND))
    )]
    pub kind: Option<String>,
    /// The backend's name (required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: String,
    /// The backend's namespace; the route's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::NAMESPACE))
    )]
    pub namespace: Option<String>,
    /// The port (required for a Service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub port: Option<i32>,
    /// The share of requests, relative to the other backends'
    /// ([`BackendRef::weight`] gives the default, 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = 1000000)))]
    pub weight: Option<i32>,
}

impl BackendRef {
    /// The backend's group, `""` (core) when not written.
    pub fn group(&self) -> &str {
        self.group.as_deref().unwrap_or("")
    }

    /// The backend's kind, `Service` when not written.
    pub fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or("Service")
    }

    /// The weight, 1 when not written.
    pub fn weight(&self) -> i32 {
        self.weight.unwrap_or(1)
    }

    pub(crate) fn check(&self, errors: &mut FieldErrors, path: &str) {
        check_backend(
            errors,
            path,
            (self.group.as_deref(), self.kind.as_deref(), &self.name),
            self.namespace.as_deref(),
            self.port,
        );
        check_weight(errors, path, self.weight);
    }
}

/// Checks a list of weighted backends (`backendRefs`).
pub(crate) fn check_weight(errors: &mut FieldErrors, path: &str, weight: Option<i32>) {
    if let Some(weight) = weight {
        checks::range(errors, &at(path, "weight"), weight.into(), 0, 1_000_000);
    }
}

/// The fields of a backend reference, and the CRDs' rule that a Service
/// (core group, kind `Service`, the defaults) is referenced with a port.
pub(crate) fn check_backend(
    errors: &mut FieldErrors,
    path: &str,
    (group, kind, name): (Option<&str>, Option<&str>, &str),
    namespace: Option<&str>,
    port: Option<i32>,
) {
    if let Some(group) = group {
        checks::group(errors, &at(path, "group"), group);
    }
    if let Some(kind) = kind {
        checks::kind(errors, &at(path, "kind"), kind);
    }
    checks::object_name(errors, &at(path, "name"), name);
    if let Some(namespace) = namespace {
        checks::namespace(errors, &at(path, "namespace"), namespace);
    }
    if let Some(port) = port {
        checks::port(errors, &at(path, "port"), port);
    }
    if group.unwrap_or("").is_empty() && kind.unwrap_or("Service") == "Service" && port.is_none() {
        errors.push(path, "a reference to a Service must have a port");
    }
}

/// A reference to a Secret (or another kind holding a certificate).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["name"])))]
pub struct SecretObjectReference {
    /// The referent's group, the core group (`""`) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253), pattern(shapes::GROUP)))]
    pub group: Option<String>,
    /// The referent's kind, `Secret` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::KIND))
    )]
    pub kind: Option<String>,
    /// The referent's name (required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: String,
    /// The referent's namespace; the referrer's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::NAMESPACE))
    )]
    pub namespace: Option<String>,
}

impl SecretObjectReference {
    /// The referent's group, `""` (core) when not written.
    pub fn group(&self) -> &str {
        self.group.as_deref().unwrap_or("")
    }

    /// The referent's kind, `Secret` when not written.
    pub fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or("Secret")
    }

    pub(crate) fn check(&self, errors: &mut FieldErrors, path: &str) {
        if let Some(group) = &self.group {
            checks::group(errors, &at(path, "group"), group);
        }
        if let Some(kind) = &self.kind {
            checks::kind(errors, &at(path, "kind"), kind);
        }
        checks::object_name(errors, &at(path, "name"), &self.name);
        if let Some(namespace) = &self.namespace {
            checks::namespace(errors, &at(path, "namespace"), namespace);
        }
    }
}

/// A reference to an object by group, kind and name, in the referrer's
/// namespace unless `namespace` says otherwise (where the kind allows it).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["group", "kind", "name"])))]
pub struct ObjectReference {
    /// The referent's group (required; `""` is the core group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253), pattern(shapes::GROUP)))]
    pub group: Option<String>,
    /// The referent's kind (required).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::KIND))
    )]
    pub kind: String,
    /// The referent's name (required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: String,
    /// The referent's namespace; the referrer's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::NAMESPACE))
    )]
    pub namespace: Option<String>,
}

impl ObjectReference {
    pub(crate) fn check(&self, errors: &mut FieldErrors, path: &str) {
        check_group_kind_name(errors, path, self.group.as_deref(), &self.kind, &self.name);
        if let Some(namespace) = &self.namespace {
            checks::namespace(errors, &at(path, "namespace"), namespace);
        }
    }
}

/// A reference to an object in the referrer's namespace.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["group", "kind", "name"])))]
pub struct LocalObjectReference {
    /// The referent's group (required; `""` is the core group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253), pattern(shapes::GROUP)))]
    pub group: Option<String>,
    /// The referent's kind (required).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::KIND))
    )]
    pub kind: String,
    /// The referent's name (required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: String,
}

impl LocalObjectReference {
    pub(crate) fn check(&self, errors: &mut FieldErrors, path: &str) {
        check_group_kind_name(errors, path, self.group.as_deref(), &self.kind, &self.name);
    }
}

/// A required group (which may be `""`), kind and name.
pub(crate) fn check_group_kind_name(
    errors: &mut FieldErrors,
    path: &str,
    group: Option<&str>,
    kind: &str,
    name: &str,
) {
    match group {
        Some(group) => checks::group(errors, &at(path, "group"), group),
        None => errors.push(at(path, "group"), "is required (\"\" for the core group)"),
    }
    checks::kind(errors, &at(path, "kind"), kind);
    checks::object_name(errors, &at(path, "name"), name);
}

/// A Kubernetes label selector (`matchLabels` and `matchExpressions`).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Labels an object must have, with these values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// Requirements on an object's labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "atomic")))]
    pub match_expressions: Option<Vec<LabelSelectorRequirement>>,
}

/// One requirement of a label selector.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["key", "operator"])))]
pub struct LabelSelectorRequirement {
    /// The label's key (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist` (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// The values for `In` and `NotIn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "atomic")))]
    pub values: Option<Vec<String>>,
}

impl LabelSelector {
    /// The CRDs require `key` and `operator` of each expression and check
    /// nothing else of a selector.
    pub(crate) fn check(&self, errors: &mut FieldErrors, path: &str) {
        for (i, expression) in self.match_expressions.iter().flatten().enumerate() {
            let path = index(&at(path, "matchExpressions"), i);
            checks::required(errors, &at(&path, "key"), expression.key.as_ref());
            checks::required(errors, &at(&path, "operator"), expression.operator.as_ref());
        }
    }
}

/// Checks a map of Kubernetes labels or annotations for infrastructure:
/// at most `max` entries, keys shaped as label keys with a prefix under
/// 253 characters; label values shaped as label values.
pub(crate) fn check_labels(
    errors: &mut FieldErrors,
    path: &str,
    map: Option<&BTreeMap<String, String>>,
    max: usize,
    labels: bool,
) {
    let Some(map) = map else { return };
    let what = if labels { "label" } else { "annotation" };
    if map.len() > max {
        errors.push(
            path,
            format!("must have at most {max} entries, not {}", map.len()),
        );
    }
    if map.keys().any(|key| !patterns::is_qualified_key(key)) {
        errors.push(
            path,
            format!("every {what} key must be an optional DNS subdomain prefix and \"/\", then a name of up to 63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit"),
        );
    }
    if map
        .keys()
        .any(|key| key.split('/').next().unwrap_or_default().len() >= 253)
    {
        errors.push(
            path,
            format!("every {what} key's prefix must be shorter than 253 characters"),
        );
    }
    for (key, value) in map {
        let at_key = checks::key_path(path, key);
        if labels {
            checks::length(errors, &at_key, value, 0, 63);
            if !patterns::is_label_value(value) {
                errors.push(
                    at_key,
                    format!("{value:?} is not a label value: letters, digits, '-', '_' and '.', starting and ending with a letter or digit"),
                );
            }
        } else {
            checks::length(errors, &at_key, value, 0, 4096);
        }
    }
}
