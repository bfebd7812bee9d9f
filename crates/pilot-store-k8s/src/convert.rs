//! pilot objects as Kubernetes objects and back, resource versions as
//! revisions, and Kubernetes errors as [`StoreError`]s.

use std::time::{Duration, SystemTime};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, TypeMeta};
use pilot_model::{
    ConfigKey, ConfigMeta, ConfigStatus, DynConfig, FieldError, KindSchema, Revision, StoreError,
};

use crate::error::{self, KubeError};

/// The Kubernetes resource that stores a kind.
pub(crate) fn api_resource(schema: &KindSchema) -> ApiResource {
    ApiResource {
        group: schema.group.clone(),
        version: schema.version.clone(),
        api_version: format!("{}/{}", schema.group, schema.version),
        kind: schema.kind.clone(),
        plural: schema.plural.clone(),
    }
}

/// The custom resource for a (validated) pilot object.
pub(crate) fn to_object(config: &DynConfig) -> DynamicObject {
    let meta = &config.meta;
    let map = |m: &std::collections::BTreeMap<String, String>| (!m.is_empty()).then(|| m.clone());
    DynamicObject {
        types: Some(TypeMeta {
            api_version: meta.api_version(),
            kind: pilot_model::kind_name(&meta.kind).to_string(),
        }),
        metadata: ObjectMeta {
            name: Some(meta.name.clone()),
            // A cluster-scoped object's is empty: it has none.
            namespace: (!meta.namespace.is_empty()).then(|| meta.namespace.clone()),
            labels: map(&meta.labels),
            annotations: map(&meta.annotations),
            resource_version: meta.resource_version.clone(),
            managed_fields: managed_fields_out(&meta.managed_fields),
            ..ObjectMeta::default()
        },
        data: serde_json::json!({ "spec": config.spec }),
    }
}

/// pilot's managed fields as Kubernetes' (the same JSON form); none when
/// there are none, so that the server keeps its own.
fn managed_fields_out(
    entries: &[pilot_model::ManagedFieldsEntry],
) -> Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry>> {
    if entries.is_empty() {
        return None;
    }
    serde_json::to_value(entries)
        .ok()
        .and_then(|value| serde_json::from_value(value).ok())
}

/// The pilot object a custom resource holds. Fails (naming the object) when
/// it is not one: no name or namespace, or no `spec`.
pub(crate) fn to_config(schema: &KindSchema, object: &DynamicObject) -> Result<DynConfig, String> {
    let metadata = &object.metadata;
    let name = metadata.name.clone().unwrap_or_default();
    // A cluster-scoped kind's objects (a GatewayClass) have no namespace.
    let namespace = match schema.cluster_scoped {
        true => String::new(),
        false => metadata.namespace.clone().unwrap_or_default(),
    };
    let what = format!("{} {namespace}/{name}", schema.kind);
    if name.is_empty() {
        return Err(format!("{what}: a {} needs a name", schema.kind));
    }
    if namespace.is_empty() && !schema.cluster_scoped {
        return Err(format!("{what}: a {} needs a namespace", schema.kind));
    }
    let Some(spec) = object.data.get("spec") else {
        return Err(format!("{what} has no spec"));
    };
    let mut meta = ConfigMeta::new(&schema.id, namespace, name);
    meta.group = schema.group.clone();
    meta.version = schema.version.clone();
    meta.labels = metadata.labels.clone().unwrap_or_default();
    meta.annotations = metadata.annotations.clone().unwrap_or_default();
    meta.resource_version = metadata.resource_version.clone();
    // The server's own: uid, generation (moved by spec changes only, as
    // pilot's) and the field managers (pilot's, as written beside the
    // object, with any other client's).
    meta.uid = metadata.uid.clone();
    meta.generation = metadata.generation;
    meta.managed_fields = metadata
        .managed_fields
        .as_ref()
        .and_then(|entries| serde_json::to_value(entries).ok())
        .and_then(|value| serde_json::from_value(value).ok())
        .unwrap_or_default();
    if let Some((status, generation, digest)) = object.data.get("status").and_then(read_status) {
        // The status was written (through /status, guarded by the
        // resourceVersion it observed) while the spec was at this
        // generation and the labels and annotations had this digest: if
        // neither changed since, the object's version for pilot is still
        // the one the status observed, so a status write does not move
        // it. A label or annotation edit does not move `generation`, hence
        // the digest: after one, pilot's version is the resourceVersion
        // again, so a retried stale update conflicts instead of
        // overwriting the edit.
        if metadata.generation == Some(generation)
            && digest.as_deref() == Some(metadata_digest(metadata).as_str())
        {
            meta.resource_version = Some(status.observed_version.clone());
        }
        meta.status = Some(status);
    }
    meta.creation_timestamp = creation_time(metadata);
    Ok(DynConfig {
        meta,
        spec: spec.clone(),
    })
}

/// An object's `metadata.creationTimestamp` (whole seconds, as the API
/// server keeps it); `None` when absent or before the epoch.
pub(crate) fn creation_time(metadata: &ObjectMeta) -> Option<SystemTime> {
    let time = metadata.creation_timestamp.as_ref()?;
    let seconds = u64::try_from(time.0.as_second()).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

/// The status a custom object carries, with the `observedGeneration` and
/// `observedMetadata` (see [`metadata_digest`]; absent in statuses written
/// before it existed) pilot wrote beside it; `None` for anything else
/// (another writer's status is not pilot's).
pub(crate) fn read_status(value: &serde_json::Value) -> Option<(ConfigStatus, i64, Option<String>)> {
    let mut value = value.clone();
    let map = value.as_object_mut()?;
    let generation = map.remove("observedGeneration")?.as_i64()?;
    let digest = map
        .remove("observedMetadata")
        .and_then(|d| d.as_str().map(str::to_string));
    Some((serde_json::from_value(value).ok()?, generation, digest))
}

/// A digest of the labels and annotations (the metadata pilot's objects
/// carry, which Kubernetes changes without moving `generation`): FNV-1a
/// over their JSON (ordered maps), as 16 hex digits.
pub(crate) fn metadata_digest(metadata: &ObjectMeta) -> String {
    let empty = std::collections::BTreeMap::new();
    let labels = metadata.labels.as_ref().unwrap_or(&empty);
    let annotations = metadata.annotations.as_ref().unwrap_or(&empty);
    let text = serde_json::to_vec(&(labels, annotations)).unwrap_or_default();
    let hash = text.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// The body of a `/status` write: the object's name and current
/// resourceVersion (the precondition) and the status, with the generation
/// and the labels' and annotations' digest it was computed for.
pub(crate) fn status_object(
    schema: &KindSchema,
    key: &ConfigKey,
    resource_version: &str,
    generation: i64,
    metadata_digest: &str,
    status: &ConfigStatus,
) -> DynamicObject {
    let mut body = serde_json::to_value(status).unwrap_or_default();
    body["observedGeneration"] = generation.into();
    body["observedMetadata"] = metadata_digest.into();
    DynamicObject {
        types: Some(TypeMeta {
            api_version: format!("{}/{}", schema.group, schema.version),
            kind: schema.kind.clone(),
        }),
        metadata: ObjectMeta {
            name: Some(key.name.clone()),
            namespace: Some(key.namespace.clone()),
            resource_version: Some(resource_version.to_string()),
            ..ObjectMeta::default()
        },
        data: serde_json::json!({ "status": body }),
    }
}

/// A resourceVersion as a [`Revision`].
///
/// Kubernetes documents resource versions as opaque strings; every API
/// server backed by etcd (all conformant distributions) uses etcd's revision,
/// a decimal number that grows with every write. pilot's watch contract
/// needs ordered revisions, so this crate relies on that and says so when a
/// version is anything else.
pub(crate) fn revision(version: Option<&str>, of: &str) -> Result<Revision, StoreError> {
    let version = version.unwrap_or_default();
    version.parse().map_err(|_| {
        KubeError::NotARevision {
            version: version.to_string(),
            of: of.to_string(),
        }
        .into()
    })
}

/// What a failed request means for a store operation on `key`.
pub(crate) enum Failure {
    /// A StoreError that needs nothing more.
    Done(StoreError),
    /// 409 Conflict: the caller must read the actual version.
    Conflict,
    /// 404 for the namespace (creating in a namespace that does not exist).
    NoNamespace,
}

/// Maps a kube error for an operation on `key` in `resource`.
pub(crate) fn failure(key: &ConfigKey, resource: &ApiResource, error: kube::Error) -> Failure {
    let kube::Error::Api(status) = &error else {
        return Failure::Done(error::unavailable(action(key, resource), error));
    };
    let details = status.details.as_ref();
    let about_object = !key.name.is_empty() && details.is_some_and(|d| d.name == key.name);
    match (status.code, status.reason.as_str()) {
        (404, _) if details.is_some_and(|d| d.kind == "namespaces") => Failure::NoNamespace,
        (404, _) if about_object => Failure::Done(StoreError::NotFound { key: key.clone() }),
        (404, _) => Failure::Done(
            KubeError::NotServed {
                resource: format!("{}.{}/{}", resource.plural, resource.group, resource.version),
                message: status.message.clone(),
            }
            .into(),
        ),
        (409, "AlreadyExists") => Failure::Done(StoreError::AlreadyExists { key: key.clone() }),
        (409, _) => Failure::Conflict,
        (422, _) => {
            let causes = details.map(|d| d.causes.as_slice()).unwrap_or_default();
            let mut errors: Vec<FieldError> = causes
                .iter()
                .map(|cause| FieldError::new(cause.field.clone(), cause.message.clone()))
                .collect();
            if errors.is_empty() {
                errors.push(FieldError::new("", status.message.clone()));
            }
            Failure::Done(StoreError::Invalid {
                key: key.clone(),
                errors,
            })
        }
        _ => Failure::Done(error::unavailable(action(key, resource), error)),
    }
}

/// What a request on `key` was about, for error messages.
fn action(key: &ConfigKey, resource: &ApiResource) -> String {
    if key.name.is_empty() {
        format!("listing {}.{}", resource.plural, resource.group)
    } else {
        key.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> KindSchema {
        KindSchema::new(
            "RouteRule",
            "routerules",
            "config.istio.io",
            "v1alpha2",
            |_, _| {},
        )
    }

    #[test]
    fn objects_round_trip() {
        let mut config = DynConfig {
            meta: ConfigMeta::new("RouteRule", "default", "reviews"),
            spec: serde_json::json!({"destination": {"name": "reviews"}}),
        };
        config.meta.group = "config.istio.io".into();
        config.meta.version = "v1alpha2".into();
        config.meta.labels.insert("app".into(), "reviews".into());
        config.meta.resource_version = Some("7".into());
        let object = to_object(&config);
        let json = serde_json::to_value(&object).unwrap();
        assert_eq!(json["apiVersion"], "config.istio.io/v1alpha2");
        assert_eq!(json["kind"], "RouteRule");
        assert_eq!(json["metadata"]["resourceVersion"], "7");
        assert_eq!(json["spec"]["destination"]["name"], "reviews");
        assert_eq!(to_config(&schema(), &object).unwrap(), config);
    }

    #[test]
    fn server_metadata_and_managed_fields_come_from_the_custom_object() {
        let mut config = DynConfig {
            meta: ConfigMeta::new("RouteRule", "default", "reviews"),
            spec: serde_json::json!({}),
        };
        config.meta.managed_fields = vec![pilot_model::ManagedFieldsEntry {
            manager: "ci".into(),
            operation: "Apply".into(),
            api_version: "config.istio.io/v1alpha2".into(),
            time: Some("2026-01-01T00:00:00Z".into()),
            fields_type: "FieldsV1".into(),
            fields_v1: serde_json::json!({"f:spec": {"f:precedence": {}}}),
        }];
        let mut object = to_object(&config);
        let json = serde_json::to_value(&object).unwrap();
        assert_eq!(json["metadata"]["managedFields"][0]["manager"], "ci");
        assert_eq!(
            json["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:precedence"],
            serde_json::json!({})
        );
        object.metadata.uid = Some("0b6c0e7e-0000-4000-8000-000000000001".into());
        object.metadata.generation = Some(3);
        let back = to_config(&schema(), &object).unwrap();
        assert_eq!(
            back.meta.uid.as_deref(),
            Some("0b6c0e7e-0000-4000-8000-000000000001")
        );
        assert_eq!(back.meta.generation, Some(3));
        assert_eq!(back.meta.managed_fields, config.meta.managed_fields);
    }

    #[test]
    fn objects_that_are_not_pilot_objects_are_named() {
        let mut object = to_object(&DynConfig {
            meta: ConfigMeta::new("RouteRule", "default", "x"),
            spec: serde_json::json!({}),
        });
        object.data = serde_json::json!({"notspec": 1});
        assert_eq!(
            to_config(&schema(), &object).unwrap_err(),
            "RouteRule default/x has no spec"
        );
    }

    #[test]
    fn versions_must_be_numbers() {
        assert_eq!(revision(Some("42"), "x").unwrap(), 42);
        let err = revision(Some("abc"), "RouteRule default/x").unwrap_err();
        assert!(
            err.to_string().contains("\"abc\" of RouteRule default/x"),
            "{err}"
        );
    }

    fn status(value: serde_json::Value) -> kube::Error {
        kube::Error::Api(Box::new(serde_json::from_value(value).unwrap()))
    }

    #[test]
    fn kubernetes_failures_become_store_errors() {
        let key = ConfigKey::new("RouteRule", "default", "r");
        let resource = api_resource(&schema());
        let invalid = status(
            serde_json::json!({"code": 422, "reason": "Invalid", "message": "bad",
            "details": {"name": "r", "causes": [{"field": "spec.route[0].weight", "message": "must be <= 100"}]}}),
        );
        let Failure::Done(StoreError::Invalid { key: k, errors }) = failure(&key, &resource, invalid) else {
            panic!("422 is Invalid");
        };
        assert_eq!(k, key);
        assert_eq!(
            errors,
            [FieldError::new("spec.route[0].weight", "must be <= 100")]
        );

        let missing =
            status(serde_json::json!({"code": 404, "reason": "NotFound", "details": {"name": "r"}}));
        assert!(matches!(
            failure(&key, &resource, missing),
            Failure::Done(StoreError::NotFound { .. })
        ));
        let no_crd = status(
            serde_json::json!({"code": 404, "reason": "NotFound", "message": "the server could not find the requested resource"}),
        );
        let Failure::Done(err) = failure(&key, &resource, no_crd) else {
            panic!()
        };
        assert!(
            err.to_string().contains("routerules.config.istio.io/v1alpha2"),
            "{err}"
        );
        // Listing (no name) a resource that is not served is not "not found".
        let list_key = ConfigKey::new("RouteRule", "", "");
        let no_crd = status(serde_json::json!({"code": 404, "reason": "NotFound", "details": {}}));
        assert!(matches!(
            failure(&list_key, &resource, no_crd),
            Failure::Done(StoreError::Unavailable { .. })
        ));
        let exists =
            status(serde_json::json!({"code": 409, "reason": "AlreadyExists", "details": {"name": "r"}}));
        assert!(matches!(
            failure(&key, &resource, exists),
            Failure::Done(StoreError::AlreadyExists { .. })
        ));
        let conflict =
            status(serde_json::json!({"code": 409, "reason": "Conflict", "details": {"name": "r"}}));
        assert!(matches!(failure(&key, &resource, conflict), Failure::Conflict));
        let ns = status(
            serde_json::json!({"code": 404, "reason": "NotFound", "details": {"name": "default", "kind": "namespaces"}}),
        );
        assert!(matches!(failure(&key, &resource, ns), Failure::NoNamespace));
        let busy =
            status(serde_json::json!({"code": 429, "reason": "TooManyRequests", "message": "slow down"}));
        let Failure::Done(err) = failure(&key, &resource, busy) else {
            panic!()
        };
        assert_eq!(
            err.to_string(),
            "backend unavailable: the Kubernetes API refused: slow down (429 TooManyRequests, RouteRule default/r)"
        );
    }
}
