//! The AUDIT and CUSTOM actions as Istio's authz builder generates them,
//! before the DENY and ALLOW filters:
//!
//! - AUDIT: one RBAC filter with Envoy's action LOG over the AUDIT rules
//!   (policies `ns[NS]-policy[NAME]-rule[I]`): a matching request is
//!   marked for audit (`access_log_hint` in the filter's dynamic metadata,
//!   the `logged` statistic) and always passes.
//! - CUSTOM, per extension provider its policies name: an RBAC filter whose
//!   shadow rules (action DENY, never enforced) are its CUSTOM rules, named
//!   `istio-ext-authz-PROVIDER-ns[NS]-policy[NAME]-rule[I]`, then the
//!   provider's ext_authz filter (`build/ext_authz.rs`), consulted only
//!   when the shadow rules matched. On a TCP port the network filters do
//!   the same for a gRPC provider; an HTTP provider has none there, as in
//!   Istio. A provider the mesh config does not have makes its policies'
//!   rules an enforced DENY (`...-deny-due-to-bad-CUSTOM-action`): the
//!   requests they match are denied, as Istio does.
//!
//! On a TCP port the AUDIT and CUSTOM rules lose their HTTP-only fields,
//! as DENY rules do (they match more, never less).

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::listener::v3::{Filter, filter};
use envoy_types::pb::envoy::config::rbac::v3::{Policy, rbac};
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac as HttpRbac;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac as NetworkRbac;
use envoy_types::pb::google::protobuf::Any;
use pilot_routing::ExtensionProviders;
use pilot_routing::authorization::{Action, Policy as AuthzPolicy};
use prost::{Message, Name};

use super::{HTTP_RBAC_FILTER, NETWORK_RBAC_FILTER, http_rbac, length_delimited, policy, rules_bytes};
use crate::build::ext_authz;

/// The JWT filter (RequestAuthentication): AUDIT, CUSTOM, DENY and ALLOW
/// come after it, as in Istio.
const JWT_AUTHN_FILTER: &str = "envoy.filters.http.jwt_authn";

/// What Istio appends to the policy names of CUSTOM rules whose provider
/// is missing.
const BAD_CUSTOM_SUFFIX: &str = "-deny-due-to-bad-CUSTOM-action";

/// Where the authorization filters go among `filters`: after the JWT
/// filter when there is one, else first.
pub(super) fn http_insertion_point(filters: &[HttpFilter]) -> usize {
    filters
        .iter()
        .rposition(|f| f.name == JWT_AUTHN_FILTER)
        .map_or(crate::build::listeners::front(filters), |i| i + 1)
}

/// The AUDIT rules of `applying` as Envoy policies; `None` when no AUDIT
/// policy applies.
fn audit(applying: &[&AuthzPolicy], tcp: bool) -> Option<BTreeMap<String, Policy>> {
    let mut found = None::<BTreeMap<String, Policy>>;
    for config in applying.iter().filter(|p| p.action == Action::Audit) {
        let policies = found.get_or_insert_default();
        for (index, rule) in config.rules.iter().enumerate() {
            policies.insert(
                format!("ns[{}]-policy[{}]-rule[{index}]", config.namespace, config.name),
                policy(rule, tcp),
            );
        }
    }
    found
}

/// The CUSTOM rules of `applying` by provider name, as Envoy policies.
fn custom(applying: &[&AuthzPolicy], tcp: bool) -> BTreeMap<String, BTreeMap<String, Policy>> {
    let mut by_provider: BTreeMap<String, BTreeMap<String, Policy>> = BTreeMap::new();
    for config in applying.iter().filter(|p| p.action == Action::Custom) {
        let provider = config.provider.clone().unwrap_or_default();
        let prefix = ext_authz::policy_prefix(&provider);
        let policies = by_provider.entry(provider).or_default();
        for (index, rule) in config.rules.iter().enumerate() {
            policies.insert(
                format!(
                    "{prefix}ns[{}]-policy[{}]-rule[{index}]",
                    config.namespace, config.name
                ),
                policy(rule, tcp),
            );
        }
    }
    by_provider
}

/// The policies of a missing provider, renamed as Istio does.
fn bad(policies: BTreeMap<String, Policy>) -> BTreeMap<String, Policy> {
    policies
        .into_iter()
        .map(|(name, policy)| (format!("{name}{BAD_CUSTOM_SUFFIX}"), policy))
        .collect()
}

/// The HTTP filters of the AUDIT and CUSTOM policies among `applying`,
/// in order.
pub(super) fn http_filters(applying: &[&AuthzPolicy], providers: &ExtensionProviders) -> Vec<HttpFilter> {
    let rbac = |config: Any| HttpFilter {
        name: HTTP_RBAC_FILTER.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(config)),
        ..Default::default()
    };
    let mut filters = Vec::new();
    if let Some(policies) = audit(applying, false) {
        filters.push(rbac(http_rbac(rbac::Action::Log, &policies)));
    }
    for (name, policies) in custom(applying, false) {
        let Some(config) = providers
            .get(&name)
            .and_then(|p| ext_authz::http_filter(p, HTTP_RBAC_FILTER))
        else {
            filters.push(rbac(http_rbac(rbac::Action::Deny, &bad(policies))));
            continue;
        };
        let mut shadow = length_delimited(2, &rules_bytes(rbac::Action::Deny, &policies));
        shadow.extend(
            HttpRbac {
                shadow_rules_stat_prefix: ext_authz::SHADOW_STAT_PREFIX.into(),
                ..Default::default()
            }
            .encode_to_vec(),
        );
        filters.push(rbac(Any {
            type_url: HttpRbac::type_url(),
            value: shadow,
        }));
        filters.push(HttpFilter {
            name: ext_authz::HTTP_EXT_AUTHZ_FILTER.into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(config)),
            ..Default::default()
        });
    }
    filters
}

/// The network filters of the AUDIT and CUSTOM policies among `applying`,
/// in order.
pub(super) fn network_filters(applying: &[&AuthzPolicy], providers: &ExtensionProviders) -> Vec<Filter> {
    let rbac = |config: Any| Filter {
        name: NETWORK_RBAC_FILTER.into(),
        config_type: Some(filter::ConfigType::TypedConfig(config)),
    };
    let network_rbac =
        |field: u32, action: rbac::Action, policies: &BTreeMap<String, Policy>, stat_prefix: &str| {
            let mut value = length_delimited(field, &rules_bytes(action, policies));
            value.extend(
                NetworkRbac {
                    stat_prefix: stat_prefix.into(),
                    shadow_rules_stat_prefix: if field == 2 {
                        ext_authz::SHADOW_STAT_PREFIX.into()
                    } else {
                        String::new()
                    },
                    ..Default::default()
                }
                .encode_to_vec(),
            );
            Any {
                type_url: NetworkRbac::type_url(),
                value,
            }
        };
    let mut filters = Vec::new();
    if let Some(policies) = audit(applying, true) {
        filters.push(rbac(network_rbac(1, rbac::Action::Log, &policies, "rbac_audit.")));
    }
    for (name, policies) in custom(applying, true) {
        let Some(provider) = providers.get(&name) else {
            filters.push(rbac(network_rbac(
                1,
                rbac::Action::Deny,
                &bad(policies),
                "rbac_deny.",
            )));
            continue;
        };
        // An HTTP provider has no network filter: nothing on TCP, as Istio.
        let Some(config) = ext_authz::network_filter(provider, NETWORK_RBAC_FILTER) else {
            continue;
        };
        filters.push(rbac(network_rbac(
            2,
            rbac::Action::Deny,
            &policies,
            "rbac_ext_authz.",
        )));
        filters.push(Filter {
            name: ext_authz::NETWORK_EXT_AUTHZ_FILTER.into(),
            config_type: Some(filter::ConfigType::TypedConfig(config)),
        });
    }
    filters
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_filters_go_after_the_jwt_filter_when_there_is_one() {
        let named = |names: &[&str]| -> Vec<HttpFilter> {
            names
                .iter()
                .map(|name| HttpFilter {
                    name: name.to_string(),
                    ..Default::default()
                })
                .collect()
        };
        let router = "envoy.filters.http.router";
        assert_eq!(
            http_insertion_point(&named(&["envoy.filters.http.fault", router])),
            0
        );
        assert_eq!(
            http_insertion_point(&named(&[JWT_AUTHN_FILTER, "envoy.filters.http.fault", router])),
            1
        );
    }
}
