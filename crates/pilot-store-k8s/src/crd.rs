//! One CustomResourceDefinition per registered kind, and installing them.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use pilot_model::{KindRegistry, KindSchema, StoreError};
use serde_json::json;

use crate::error::{self, KubeError};

/// The field manager pilot applies its CRDs as.
pub const FIELD_MANAGER: &str = "pilot";

/// The CRD of every kind in `registry`, ordered by kind.
///
/// ```
/// let crds = pilot_store_k8s::crds(&pilot_api::istio::registry());
/// let names: Vec<_> = crds.iter().filter_map(|c| c.metadata.name.as_deref()).collect();
/// assert_eq!(names, [
///     "destinationpolicies.config.istio.io", "egressrules.config.istio.io",
///     "ingressrules.config.istio.io", "routerules.config.istio.io",
/// ]);
/// ```
pub fn crds(registry: &KindRegistry) -> Vec<CustomResourceDefinition> {
    crds_where(registry, false)
}

/// The CRDs of the kinds of `registry` another project defines
/// ([`KindSchema::defined_elsewhere`]: the Gateway API's), as pilot would
/// write them: what [`install_crds`] creates where one is missing, and
/// what stands in for the project's own in a test cluster. A cluster
/// should have the project's (the Gateway API's release manifests).
pub fn crds_defined_elsewhere(registry: &KindRegistry) -> Vec<CustomResourceDefinition> {
    crds_where(registry, true)
}

fn crds_where(registry: &KindRegistry, defined_elsewhere: bool) -> Vec<CustomResourceDefinition> {
    registry
        .kinds()
        .iter()
        .filter_map(|k| registry.get(k))
        .filter(|schema| schema.defined_elsewhere == defined_elsewhere)
        .map(|schema| crd_with(&schema, registry.short_names(&schema)))
        .collect()
}

/// The CRD of one kind: `<plural>.<group>`, namespaced, stored at the
/// kind's storage version and served at every version it serves
/// ([`KindSchema::versions`], one schema: the API server converts between
/// them by `apiVersion` only, `conversion: None`), with the structural form of the kind's OpenAPI
/// schema ([`KindSchema::openapi_schema`], derived from the Rust types for
/// the Istio kinds), or, for a kind without one, a `spec` object that keeps
/// unknown fields. Either way pilot validates every write itself. The
/// `status` subresource holds pilot's distribution status.
pub fn crd(schema: &KindSchema) -> CustomResourceDefinition {
    // A qualified kind is another API's: its short names are its own.
    let short = if schema.short_names.is_empty() && !schema.is_qualified() {
        vec![short_name(&schema.kind)]
    } else {
        schema.short_names.clone()
    };
    crd_with(schema, short)
}

/// Applies the CRD of every kind in `registry` pilot defines ([`crds`]:
/// server-side apply, field manager [`FIELD_MANAGER`], forced), creating
/// or updating them; creates the CRD of a kind another project defines
/// ([`crds_defined_elsewhere`]) only where it is missing, never changing
/// one that is there (the project's own); then waits until the API server
/// reports each one `Established` (serving its resource), for at most
/// [`ESTABLISH_TIMEOUT`].
pub async fn install_crds(client: Client, registry: &KindRegistry) -> Result<(), StoreError> {
    let api: Api<CustomResourceDefinition> = Api::all(client);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::new();
    for crd in crds(registry) {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .map_err(|e| error::unavailable(format!("applying CustomResourceDefinition {name}"), e))?;
        names.push(name);
    }
    for crd in crds_defined_elsewhere(registry) {
        let name = crd.metadata.name.clone().unwrap_or_default();
        match api.create(&kube::api::PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(response)) if response.code == 409 => {}
            Err(e) => {
                return Err(error::unavailable(
                    format!("creating CustomResourceDefinition {name}"),
                    e,
                ));
            }
        }
        names.push(name);
    }
    let deadline = tokio::time::Instant::now() + ESTABLISH_TIMEOUT;
    for name in names {
        loop {
            let crd = api
                .get(&name)
                .await
                .map_err(|e| error::unavailable(format!("reading CustomResourceDefinition {name}"), e))?;
            if established(&crd) {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(KubeError::NotEstablished {
                    name,
                    waited: ESTABLISH_TIMEOUT,
                }
                .into());
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// How long [`install_crds`] waits for the API server to serve the CRDs.
pub const ESTABLISH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

fn established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

fn crd_with(schema: &KindSchema, short_names: Vec<String>) -> CustomResourceDefinition {
    // Each version's spec schema (versions may bound lists differently).
    let spec_at = |version: &str| {
        let mut spec = match schema.openapi_schema_at(version) {
            Some(openapi) => crate::schema::structural(openapi),
            None => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        };
        spec["description"] = json!(format!(
            "The {} spec; pilot validates it on every write.",
            schema.kind
        ));
        spec
    };
    let versions: Vec<serde_json::Value> = schema
        .versions
        .iter()
        .map(|version| {
            let spec = spec_at(version);
            json!({
                "name": version,
                "served": true,
                "storage": *version == schema.version,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "spec": spec,
                        "status": {
                            "type": "object",
                            "description": "Distribution status, conditions (Reconciled) and analysis findings (validationMessages), written by pilot-discovery through the status subresource.",
                            "x-kubernetes-preserve-unknown-fields": true,
                        },
                    },
                }},
                // Status is written through /status only, and a write
                // there changes nothing else (and the reverse).
                "subresources": {"status": {}},
            })
        })
        .collect();
    let value = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": format!("{}.{}", schema.plural, schema.group),
            "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER},
        },
        "spec": {
            "group": schema.group,
            "scope": if schema.cluster_scoped { "Cluster" } else { "Namespaced" },
            "names": {
                "kind": schema.kind,
                "listKind": format!("{}List", schema.kind),
                "plural": schema.plural,
                "singular": schema.kind.to_lowercase(),
                "shortNames": short_names,
                "categories": std::iter::once(FIELD_MANAGER).chain(schema.categories.iter().map(String::as_str)).collect::<Vec<_>>(),
            },
            "versions": versions,
        },
    });
    // The shape above is fixed; only names and versions vary, as strings.
    serde_json::from_value(value).expect("a CustomResourceDefinition built from a kind is well formed")
}

/// The initials of a CamelCase kind, lowercased: `RouteRule` -> `rr`.
fn short_name(kind: &str) -> String {
    kind.chars()
        .filter(char::is_ascii_uppercase)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_rule_crd() {
        let registry = pilot_api::istio::registry();
        let crd = crd(&registry.schema("RouteRule").unwrap());
        let json = serde_json::to_value(&crd).unwrap();
        assert_eq!(json["metadata"]["name"], "routerules.config.istio.io");
        assert_eq!(json["spec"]["scope"], "Namespaced");
        assert_eq!(json["spec"]["names"]["kind"], "RouteRule");
        assert_eq!(json["spec"]["names"]["shortNames"], json!(["rr"]));
        assert_eq!(json["spec"]["versions"][0]["name"], "v1alpha2");
        let spec = &json["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let fields: Vec<&str> = spec["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        for field in [
            "destination",
            "precedence",
            "match",
            "route",
            "httpReqTimeout",
            "httpFault",
        ] {
            assert!(fields.contains(&field), "{field} is not in {fields:?}");
        }
        assert_eq!(
            spec["properties"]["route"]["items"]["properties"]["weight"]["type"],
            "integer"
        );
        assert_eq!(spec["properties"]["httpReqTimeout"]["nullable"], true);
        assert_eq!(json["spec"]["versions"][0]["subresources"], json!({"status": {}}));
    }

    #[test]
    fn kinds_without_a_schema_keep_unknown_fields() {
        let crds = crds(&pilot_store::testing::registry());
        let json = serde_json::to_value(&crds[0]).unwrap();
        assert_eq!(json["metadata"]["name"], "mockconfigs.test.pilot.io");
        let spec = &json["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(json["spec"]["names"]["shortNames"], json!(["mc"]));
    }

    #[test]
    fn networking_crds_serve_three_versions_and_store_v1() {
        let registry = pilot_api::default_registry();
        let crds = crds(&registry);
        let vs = crds
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some("virtualservices.networking.istio.io"))
            .unwrap();
        let json = serde_json::to_value(vs).unwrap();
        assert_eq!(json["spec"]["names"]["shortNames"], json!(["vs"]));
        let versions: Vec<(&str, bool, bool)> = json["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["name"].as_str().unwrap(),
                    v["served"].as_bool().unwrap(),
                    v["storage"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            versions,
            [
                ("v1", true, true),
                ("v1beta1", true, false),
                ("v1alpha3", true, false)
            ]
        );
        let gateway = crds
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some("gateways.networking.istio.io"))
            .unwrap();
        assert_eq!(gateway.spec.names.short_names, Some(vec!["gw".to_string()]));
    }

    /// Each version carries its own spec schema: a TLSRoute's rules are
    /// bounded to one at v1 and sixteen at v1alpha2, its hostnames
    /// required at v1 only.
    #[test]
    fn versions_whose_schemas_differ_each_carry_their_own() {
        let registry = pilot_api::gateway_api::registry();
        let crd = crd(&registry.schema("TLSRoute.gateway.networking.k8s.io").unwrap());
        let json = serde_json::to_value(&crd).unwrap();
        let spec = |name: &str| {
            json["spec"]["versions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == name)
                .map(|v| v["schema"]["openAPIV3Schema"]["properties"]["spec"].clone())
                .unwrap_or_else(|| panic!("no version {name} in {json}"))
        };
        let (v1, v1alpha2) = (spec("v1"), spec("v1alpha2"));
        assert_eq!(v1["properties"]["rules"]["maxItems"], 1, "{v1}");
        assert_eq!(v1["required"], json!(["hostnames", "rules"]), "{v1}");
        assert_eq!(v1alpha2["properties"]["rules"]["maxItems"], 16, "{v1alpha2}");
        assert_eq!(v1alpha2["required"], json!(["rules"]), "{v1alpha2}");
    }
}
