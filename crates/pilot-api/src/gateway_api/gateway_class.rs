//! `GatewayClass`: a kind of Gateway, the controller that implements it
//! and its parameters.

use pilot_model::FieldErrors;
use serde::{Deserialize, Serialize};

use super::checks::{self, at};
use super::patterns;
#[cfg(feature = "schema")]
use super::shapes;

/// A class of Gateways, implemented by one controller.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["controllerName"])))]
pub struct GatewayClass {
    /// The controller, as a domain-prefixed path such as
    /// `example.net/gateway-controller` (required; immutable).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253), pattern(r#"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$"#)))]
    pub controller_name: String,
    /// Implementation-specific parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters_ref: Option<ParametersReference>,
    /// A description for people (at most 64 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64)))]
    pub description: Option<String>,
}

/// A reference to an object holding a class's parameters.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["group", "kind", "name"])))]
pub struct ParametersReference {
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
    /// The referent's namespace, for a namespaced kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::NAMESPACE))
    )]
    pub namespace: Option<String>,
}

/// The CRD's transition rule: `controllerName` is immutable (its
/// controller owns the class's Gateways; another cannot take them over).
pub(crate) fn validate_update(class: &GatewayClass, old: &GatewayClass, errors: &mut FieldErrors) {
    if class.controller_name != old.controller_name {
        errors.push(
            "spec.controllerName",
            format!(
                "Value is immutable: {:?} cannot become {:?}; delete the GatewayClass and create it again",
                old.controller_name, class.controller_name
            ),
        );
    }
}

pub(crate) fn validate(class: &GatewayClass, errors: &mut FieldErrors) {
    let path = "spec.controllerName";
    checks::length(errors, path, &class.controller_name, 1, 253);
    if !class.controller_name.is_empty() && !patterns::is_domain_prefixed_path(&class.controller_name) {
        errors.push(
            path,
            format!(
                "{:?} is not a controller name: a domain, \"/\" and a path, such as example.net/gateway-controller",
                class.controller_name
            ),
        );
    }
    if let Some(params) = &class.parameters_ref {
        let path = "spec.parametersRef";
        super::common::check_group_kind_name(
            errors,
            path,
            params.group.as_deref(),
            &params.kind,
            &params.name,
        );
        if let Some(namespace) = &params.namespace {
            checks::namespace(errors, &at(path, "namespace"), namespace);
        }
    }
    if let Some(description) = &class.description {
        checks::length(errors, "spec.description", description, 0, 64);
    }
}
