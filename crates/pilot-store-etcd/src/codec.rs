//! Keys and values: where an object lives in etcd and how it is written.

use pilot_model::{ConfigKey, ConfigStatus, DynConfig, KindRegistry, StoreError};

/// Key layout: `<prefix>/<group>/<kind>/<namespace>/<name>` (the kind's
/// name, not its id: the group is in the key already), and the
/// object's distribution status beside it at `<that key>/status` (names
/// and namespaces hold no `/`, so neither can be taken for the other).
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    prefix: String,
}

impl Layout {
    pub(crate) fn new(prefix: &str) -> Self {
        Layout {
            prefix: prefix.trim_end_matches('/').to_string(),
        }
    }

    /// The store's prefix, without a trailing `/`.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The key of one object.
    pub(crate) fn key(&self, registry: &KindRegistry, key: &ConfigKey) -> Result<String, StoreError> {
        Ok(format!(
            "{}{}/{}",
            self.kind_prefix(registry, &key.kind)?,
            key.namespace,
            key.name
        ))
    }

    /// The key of one object's status.
    pub(crate) fn status_key(&self, registry: &KindRegistry, key: &ConfigKey) -> Result<String, StoreError> {
        Ok(format!("{}/status", self.key(registry, key)?))
    }

    /// The prefix of every object of a kind (ends with `/`).
    pub(crate) fn kind_prefix(&self, registry: &KindRegistry, kind: &str) -> Result<String, StoreError> {
        let schema = registry.schema(kind)?;
        Ok(format!("{}/{}/{}/", self.prefix, schema.group, schema.kind))
    }

    /// The prefix of a kind's objects in one namespace, or in all.
    pub(crate) fn list_prefix(
        &self,
        registry: &KindRegistry,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<String, StoreError> {
        let prefix = self.kind_prefix(registry, kind)?;
        Ok(match namespace {
            Some(ns) => format!("{prefix}{ns}/"),
            None => prefix,
        })
    }

    /// The object key named by an etcd key under a kind's prefix.
    pub(crate) fn parse(&self, kind_prefix: &str, kind: &str, key: &[u8]) -> Option<ConfigKey> {
        let key = std::str::from_utf8(key).ok()?;
        let (namespace, name) = key.strip_prefix(kind_prefix)?.split_once('/')?;
        (!name.contains('/')).then(|| ConfigKey::new(kind, namespace, name))
    }

    /// The object whose status an etcd key under a kind's prefix holds.
    pub(crate) fn parse_status(&self, kind_prefix: &str, kind: &str, key: &[u8]) -> Option<ConfigKey> {
        let key = std::str::from_utf8(key).ok()?;
        let (namespace, rest) = key.strip_prefix(kind_prefix)?.split_once('/')?;
        let name = rest.strip_suffix("/status")?;
        (!name.contains('/')).then(|| ConfigKey::new(kind, namespace, name))
    }
}

/// A status as stored at its status key (its JSON form).
pub(crate) fn encode_status(status: &ConfigStatus) -> Vec<u8> {
    serde_json::to_vec(status).unwrap_or_default()
}

/// Reads a stored status.
pub(crate) fn decode_status(value: &[u8]) -> Result<ConfigStatus, String> {
    serde_json::from_slice(value).map_err(|e| format!("not a status: {e}"))
}

/// The stored form: the document `pilotctl` reads, without the resource
/// version (that is the key's `mod_revision`) and without status (kept at
/// its own key).
pub(crate) fn encode(config: &DynConfig) -> Result<Vec<u8>, StoreError> {
    let mut config = config.clone();
    config.meta.resource_version = None;
    config.meta.status = None;
    serde_json::to_vec(&config).map_err(|e| StoreError::Invalid {
        key: config.key(),
        errors: vec![pilot_model::FieldError::new("", e.to_string())],
    })
}

/// Reads a stored object, checking that it is the object its key names.
pub(crate) fn decode(expected: &ConfigKey, value: &[u8], mod_revision: i64) -> Result<DynConfig, String> {
    let mut config: DynConfig =
        serde_json::from_slice(value).map_err(|e| format!("not a pilot object: {e}"))?;
    // The document writes the kind's name; the key names it by its id.
    if pilot_model::kind_name(&expected.kind) == config.meta.kind {
        config.meta.kind = expected.kind.clone();
    }
    if !config.meta.is(expected) {
        return Err(format!(
            "the body is {}, not the object its key names",
            config.key()
        ));
    }
    config.meta.resource_version = Some(mod_revision.to_string());
    Ok(config)
}

/// The end of the range of keys starting with `prefix`.
pub(crate) fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilot_model::{ConfigMeta, KindSchema};

    #[test]
    fn layout_and_round_trip() {
        let registry = KindRegistry::new();
        registry
            .register_schema(KindSchema::new(
                "RouteRule",
                "routerules",
                "config.istio.io",
                "v1alpha2",
                |_, _| {},
            ))
            .unwrap();
        let layout = Layout::new("/pilot/config/");
        let key = ConfigKey::new("RouteRule", "default", "reviews");
        assert_eq!(
            layout.key(&registry, &key).unwrap(),
            "/pilot/config/config.istio.io/RouteRule/default/reviews"
        );
        let prefix = layout.kind_prefix(&registry, "RouteRule").unwrap();
        assert_eq!(
            layout.parse(
                &prefix,
                "RouteRule",
                b"/pilot/config/config.istio.io/RouteRule/default/reviews"
            ),
            Some(key.clone())
        );
        assert_eq!(
            layout.parse(
                &prefix,
                "RouteRule",
                b"/pilot/config/config.istio.io/RouteRule/default"
            ),
            None
        );
        let status_key = layout.status_key(&registry, &key).unwrap();
        assert_eq!(
            status_key,
            "/pilot/config/config.istio.io/RouteRule/default/reviews/status"
        );
        assert_eq!(layout.parse(&prefix, "RouteRule", status_key.as_bytes()), None);
        assert_eq!(
            layout.parse_status(&prefix, "RouteRule", status_key.as_bytes()),
            Some(key.clone())
        );
        assert_eq!(
            layout.parse_status(
                &prefix,
                "RouteRule",
                b"/pilot/config/config.istio.io/RouteRule/default/reviews"
            ),
            None
        );
        assert!(layout.key(&registry, &ConfigKey::new("Nope", "a", "b")).is_err());

        let config = DynConfig {
            meta: ConfigMeta::new("RouteRule", "default", "reviews"),
            spec: serde_json::json!({"a": 1}),
        };
        let body = encode(&config).unwrap();
        let back = decode(&key, &body, 42).unwrap();
        assert_eq!(back.meta.resource_version.as_deref(), Some("42"));
        assert!(decode(&ConfigKey::new("RouteRule", "default", "other"), &body, 1).is_err());
        assert!(decode(&key, b"{not json", 1).is_err());
        assert_eq!(prefix_end("/a/"), b"/a0");
    }
}
