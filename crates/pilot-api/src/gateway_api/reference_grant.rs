//! `ReferenceGrant`: lets objects of other namespaces reference objects
//! of this one.

use pilot_model::FieldErrors;
use serde::{Deserialize, Serialize};

use super::checks::{self, at, index};
#[cfg(feature = "schema")]
use super::shapes;

/// The kinds and namespaces allowed to reference the kinds listed in
/// `to`, in the grant's namespace.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["from", "to"])))]
pub struct ReferenceGrant {
    /// Who may reference (1 to 16 entries, required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub from: Vec<ReferenceGrantFrom>,
    /// What may be referenced (1 to 16 entries, required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub to: Vec<ReferenceGrantTo>,
}

/// A kind in a namespace allowed to reference.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["group", "kind", "namespace"])))]
pub struct ReferenceGrantFrom {
    /// The referrers' group (required; `""` is the core group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253), pattern(shapes::GROUP)))]
    pub group: Option<String>,
    /// The referrers' kind (required).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::KIND))
    )]
    pub kind: String,
    /// The referrers' namespace (required).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::NAMESPACE))
    )]
    pub namespace: String,
}

/// A kind (or one object of it) that may be referenced.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["group", "kind"])))]
pub struct ReferenceGrantTo {
    /// The referents' group (required; `""` is the core group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253), pattern(shapes::GROUP)))]
    pub group: Option<String>,
    /// The referents' kind (required).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::KIND))
    )]
    pub kind: String,
    /// One referent's name; every object of the kind when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: Option<String>,
}

pub(crate) fn validate(grant: &ReferenceGrant, errors: &mut FieldErrors) {
    checks::items(errors, "spec.from", grant.from.len(), 1, 16);
    for (i, from) in grant.from.iter().enumerate() {
        let path = index("spec.from", i);
        group_kind(errors, &path, from.group.as_deref(), &from.kind);
        checks::namespace(errors, &at(&path, "namespace"), &from.namespace);
    }
    checks::items(errors, "spec.to", grant.to.len(), 1, 16);
    for (i, to) in grant.to.iter().enumerate() {
        let path = index("spec.to", i);
        group_kind(errors, &path, to.group.as_deref(), &to.kind);
        if let Some(name) = &to.name {
            checks::object_name(errors, &at(&path, "name"), name);
        }
    }
}

fn group_kind(errors: &mut FieldErrors, path: &str, group: Option<&str>, kind: &str) {
    match group {
        Some(group) => checks::group(errors, &at(path, "group"), group),
        None => errors.push(at(path, "group"), "is required (\"\" for the core group)"),
    }
    checks::kind(errors, &at(path, "kind"), kind);
}
