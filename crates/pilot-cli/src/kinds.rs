//! Kinds by name, plural or short name, case-insensitively.

use std::sync::Arc;

use pilot_model::{KindRegistry, KindSchema};

/// The kind `name` refers to (its name, plural, short names
/// ([`KindRegistry::short_names`]), or `plural.group`), or a message listing
/// what is known.
pub(crate) fn resolve(registry: &KindRegistry, name: &str) -> Result<Arc<KindSchema>, String> {
    let wanted = name.to_ascii_lowercase();
    let found = registry
        .kinds()
        .into_iter()
        .filter_map(|k| registry.get(&k))
        .find(|schema| {
            let kind = schema.kind.to_ascii_lowercase();
            wanted == kind
                || wanted == schema.plural.to_ascii_lowercase()
                || registry.short_names(schema).contains(&wanted)
                || wanted == format!("{kind}.{}", schema.group)
                || wanted == format!("{}.{}", schema.plural, schema.group)
        });
    found.ok_or_else(|| {
        let known: Vec<String> = registry
            .kinds()
            .iter()
            .filter_map(|k| registry.get(k))
            .map(|s| {
                let mut names = vec![s.plural.clone()];
                names.extend(registry.short_names(&s));
                format!("{} ({})", s.kind.to_ascii_lowercase(), names.join(", "))
            })
            .collect();
        format!("unknown kind {name:?}; known kinds: {}", known.join(", "))
    })
}

/// How a kind is written in messages: `routerule`.
pub(crate) fn display(kind: &str) -> String {
    kind.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_plurals_and_short_names_in_any_case() {
        let registry = pilot_api::istio::registry();
        for name in [
            "RouteRule",
            "routerule",
            "ROUTERULES",
            "rr",
            "routerules.config.istio.io",
        ] {
            assert_eq!(resolve(&registry, name).unwrap().kind, "RouteRule", "{name}");
        }
        assert_eq!(resolve(&registry, "dp").unwrap().kind, "DestinationPolicy");
        let error = resolve(&registry, "routes").unwrap_err();
        assert!(error.contains("routerule (routerules, rr)"), "{error}");
    }

    #[test]
    fn networking_kinds_by_name_and_short_name() {
        let registry = pilot_api::default_registry();
        for (name, kind) in [
            ("vs", "VirtualService"),
            ("virtualservices.networking.istio.io", "VirtualService"),
            ("dr", "DestinationRule"),
            ("DestinationRules", "DestinationRule"),
            ("se", "ServiceEntry"),
            ("gw", "Gateway"),
            ("gateway", "Gateway"),
            ("we", "WorkloadEntry"),
            ("workloadentries", "WorkloadEntry"),
            ("sidecars", "Sidecar"),
            ("rr", "RouteRule"),
        ] {
            assert_eq!(resolve(&registry, name).unwrap().kind, kind, "{name}");
        }
        let error = resolve(&registry, "g").unwrap_err();
        assert!(error.contains("gateway (gateways, gw)"), "{error}");
    }
}
