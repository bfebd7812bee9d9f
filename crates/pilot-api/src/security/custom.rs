//! The checks Istio's validation (`ValidateAuthorizationPolicy`) makes on
//! the CUSTOM and AUDIT actions: a CUSTOM policy needs rules (`rules: [{}]`
//! matches every request) and `provider.name`, and its rules may not use
//! what the external authorizer is consulted before (peer identities,
//! namespaces, service accounts, JWT principals and `request.auth.*`); a
//! `provider` is only for CUSTOM. AUDIT policies take the same rules as ALLOW and DENY ones.

use pilot_model::FieldErrors;

use super::authorization_policy::{Action, AuthorizationPolicy};

/// The `when` keys a CUSTOM rule may not use, as Istio.
fn refused_with_custom(key: &str) -> bool {
    matches!(key, "source.namespace" | "source.principal") || key.starts_with("request.auth.")
}

/// Records the CUSTOM and provider errors of `policy`.
pub(super) fn validate(policy: &AuthorizationPolicy, errors: &mut FieldErrors) {
    if policy.action != Action::Custom {
        if policy.provider.is_some() {
            errors.push(
                "spec.provider",
                format!(
                    "a provider is only for the CUSTOM action, found {}",
                    format!("{:?}", policy.action).to_uppercase()
                ),
            );
        }
        return;
    }
    if policy.rules.is_empty() {
        errors.push(
            "spec.rules",
            "CUSTOM action without `rules` is meaningless as it will never be triggered; add an empty rule `{}` to trigger it for every request",
        );
    } else if policy.provider.as_ref().is_none_or(|p| p.name.is_empty()) {
        errors.push("spec.provider.name", "`provider.name` must not be empty");
    }
    for (index, rule) in policy.rules.iter().enumerate() {
        for (entry, from) in rule.from.iter().flatten().enumerate() {
            let Some(source) = &from.source else { continue };
            for (field, values) in [
                ("namespaces", &source.namespaces),
                ("notNamespaces", &source.not_namespaces),
                ("serviceAccounts", &source.service_accounts),
                ("notServiceAccounts", &source.not_service_accounts),
                ("principals", &source.principals),
                ("notPrincipals", &source.not_principals),
                ("requestPrincipals", &source.request_principals),
                ("notRequestPrincipals", &source.not_request_principals),
            ] {
                if !values.is_empty() {
                    errors.push(
                        format!("{}.source.{field}", super::from_entry(index, entry)),
                        format!("`{field}` is currently not supported with CUSTOM action"),
                    );
                }
            }
        }
        for (entry, condition) in rule.when.iter().enumerate() {
            if refused_with_custom(&condition.key) {
                errors.push(
                    format!("spec.rules[{index}].when[{entry}].key"),
                    format!("{} is currently not supported with CUSTOM action", condition.key),
                );
            }
        }
    }
}
