//! Object metadata shared by every kind.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::{ConfigKey, ConfigStatus};

/// The label that ties an object to one control-plane revision (Istio's
/// `istio.io/rev`): a namespace or pod to the revision that injects it, a
/// configuration object to the revision that serves it.
pub const REVISION_LABEL: &str = "istio.io/rev";

/// Whether an object with `labels` belongs to the control-plane
/// `revision` (`""` is the default revision), as Istio decides it: an object
/// without the [`REVISION_LABEL`] belongs to every revision; one with it, to
/// that revision only (`default` naming the default revision).
///
/// ```
/// use std::collections::BTreeMap;
/// use pilot_model::in_revision;
///
/// let labelled = |rev: &str| BTreeMap::from([("istio.io/rev".to_string(), rev.to_string())]);
/// assert!(in_revision(&BTreeMap::new(), "canary"));
/// assert!(in_revision(&labelled("canary"), "canary"));
/// assert!(!in_revision(&labelled("canary"), ""));
/// assert!(in_revision(&labelled("default"), ""));
/// ```
pub fn in_revision(labels: &BTreeMap<String, String>, revision: &str) -> bool {
    match labels.get(REVISION_LABEL) {
        None => true,
        Some(label) => label == revision_name(revision),
    }
}

/// The name a revision is labelled with: `default` for the default
/// revision (`""`).
pub fn revision_name(revision: &str) -> &str {
    if revision.is_empty() { "default" } else { revision }
}

/// One entry of `metadata.managedFields`, as Kubernetes writes it: the
/// fields one manager set with one kind of operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedFieldsEntry {
    /// The manager's name (`fieldManager`, or derived from the client's
    /// user agent).
    pub manager: String,
    /// `Apply` (server-side apply) or `Update` (any other write).
    pub operation: String,
    /// The `apiVersion` the fields were written in.
    pub api_version: String,
    /// When the entry last changed, RFC 3339 with whole seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// Always `FieldsV1`.
    pub fields_type: String,
    /// The owned fields, in the `FieldsV1` trie form (`{"f:spec":
    /// {"f:hosts": {}}}`).
    #[serde(rename = "fieldsV1")]
    pub fields_v1: serde_json::Value,
}

/// Metadata of a configuration object, as in Kubernetes' `ObjectMeta` plus
/// the type information (`kind`, `group`, `version`).
///
/// The resource version is set by the store on every write and is opaque to
/// callers: compare it only for equality, and hand it back on `update` or a
/// conditional `delete`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ConfigMeta {
    /// The kind's name, e.g. `RouteRule`.
    pub kind: String,
    /// The API group, e.g. `config.istio.io`. Filled from the kind's schema
    /// when empty.
    pub group: String,
    /// The API version, e.g. `v1alpha2`. Filled from the kind's schema when
    /// empty.
    pub version: String,
    /// The object's name, a DNS-1123 subdomain.
    pub name: String,
    /// The object's namespace, a DNS-1123 label.
    pub namespace: String,
    /// Identifying labels (Kubernetes label syntax).
    pub labels: BTreeMap<String, String>,
    /// Free-form annotations.
    pub annotations: BTreeMap<String, String>,
    /// The store's version of this object; `None` before it is stored.
    pub resource_version: Option<String>,
    /// When the store first created the object; set by the store.
    pub creation_timestamp: Option<SystemTime>,
    /// A value unique to this object over its life (Kubernetes' `uid`):
    /// set by the REST API on create and kept by every later write through
    /// it; `None` for an object written another way.
    pub uid: Option<String>,
    /// How many times the spec was changed (Kubernetes' `generation`): 1 on
    /// create through the REST API, one more on each write through it that
    /// changes the spec; metadata-only and status writes leave it.
    pub generation: Option<i64>,
    /// Which field manager owns which fields (Kubernetes' `managedFields`),
    /// kept by the REST API on every write through it (server-side apply
    /// and the other writes); empty for an object written another way.
    pub managed_fields: Vec<ManagedFieldsEntry>,
    /// How far the object has reached the proxies (the document's
    /// top-level `status`), written by pilot-discovery through
    /// `ConfigStore::update_status`. Stores ignore it in `create` and
    /// `update`: a user's write never sets or clears it.
    pub status: Option<ConfigStatus>,
}

impl ConfigMeta {
    /// Metadata for a new object of `kind` with the given namespace and name.
    pub fn new(kind: impl Into<String>, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ConfigMeta {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    /// The object's key.
    pub fn key(&self) -> ConfigKey {
        ConfigKey::new(&self.kind, &self.namespace, &self.name)
    }

    /// `group/version`, as written in a document's `apiVersion`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// True when `key` names this object.
    pub fn is(&self, key: &ConfigKey) -> bool {
        self.kind == key.kind && self.namespace == key.namespace && self.name == key.name
    }
}
