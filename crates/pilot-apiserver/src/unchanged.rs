//! Writes that change nothing, as kube-apiserver treats them: an update,
//! patch or server-side apply whose result is the stored object is not
//! written. The stored object is answered as it is (same
//! `resourceVersion`, `generation` and `managedFields`, their times
//! included), and no event, push or status write follows: `kubectl apply
//! --server-side` run twice leaves the object as the first run stored it.

use pilot_model::{DynConfig, ManagedFieldsEntry};

/// True when writing `new` (prepared for the store, with its uid,
/// generation and managed fields set as the write would store them) over
/// `stored` would change nothing a reader can see but the times of the
/// managed fields; `new` must carry `stored`'s resource version (a write
/// at another version is the store's conflict to report).
pub(crate) fn unchanged(new: &DynConfig, stored: &DynConfig) -> bool {
    let (a, b) = (&new.meta, &stored.meta);
    a.resource_version.is_some()
        && a.resource_version == b.resource_version
        && a.kind == b.kind
        && a.namespace == b.namespace
        && a.name == b.name
        && a.labels == b.labels
        && a.annotations == b.annotations
        && a.uid == b.uid
        && a.generation == b.generation
        && same_owners(&a.managed_fields, &b.managed_fields)
        && new.spec == stored.spec
}

/// The same entries in the same order, whatever their times.
fn same_owners(a: &[ManagedFieldsEntry], b: &[ManagedFieldsEntry]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.manager == y.manager
                && x.operation == y.operation
                && x.api_version == y.api_version
                && x.fields_type == y.fields_type
                && x.fields_v1 == y.fields_v1
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilot_model::ConfigMeta;

    fn entry(time: &str) -> ManagedFieldsEntry {
        serde_json::from_value(serde_json::json!({
            "manager": "kubectl", "operation": "Apply", "apiVersion": "config.istio.io/v1alpha2",
            "time": time, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:precedence": {}}},
        }))
        .unwrap()
    }

    fn object(precedence: u32, time: &str) -> DynConfig {
        let mut meta = ConfigMeta::new("RouteRule", "default", "r");
        meta.resource_version = Some("7".into());
        meta.uid = Some("u".into());
        meta.generation = Some(1);
        meta.managed_fields = vec![entry(time)];
        DynConfig {
            meta,
            spec: serde_json::json!({"precedence": precedence}),
        }
    }

    #[test]
    fn only_the_times_of_managed_fields_may_differ() {
        let stored = object(1, "2026-01-01T00:00:00Z");
        assert!(unchanged(&object(1, "2026-01-02T00:00:00Z"), &stored));
        assert!(!unchanged(&object(2, "2026-01-01T00:00:00Z"), &stored));
        let mut labelled = object(1, "2026-01-01T00:00:00Z");
        labelled.meta.labels.insert("a".into(), "b".into());
        assert!(!unchanged(&labelled, &stored));
        let mut shared = object(1, "2026-01-01T00:00:00Z");
        shared.meta.managed_fields.push(entry("2026-01-01T00:00:00Z"));
        assert!(!unchanged(&shared, &stored));
        let mut stale = object(1, "2026-01-01T00:00:00Z");
        stale.meta.resource_version = Some("6".into());
        assert!(!unchanged(&stale, &stored));
    }
}
