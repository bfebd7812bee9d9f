//! Validation on read: the objects a backend delivers that their kind's
//! validation refuses.
//!
//! Every write through a store is validated, but a backend another tool
//! can write (`etcdctl put`, `kubectl apply` on a CRD without a schema, a
//! validation rule made stricter by an upgrade) can still hold objects that
//! would be refused. The [`Controller`](crate::Controller) checks every
//! object it is given, from lists and from watches, with the same
//! [`KindSchema::validate`](pilot_model::KindSchema::validate) a write
//! passes. An object that fails is quarantined: kept out of the cache (so
//! nothing built from the cache, such as xDS, ever sees it), logged once
//! with its key and every field error, counted by kind, and listed here.
//! A value that is not an object at all ([`Undecodable`]: not JSON,
//! another object's body) is held the same way.
//! A later valid write of the key, a delete, or a relist without the key
//! releases it.

use std::collections::{BTreeMap, HashSet};
use std::sync::RwLock;

use pilot_model::{ConfigKey, DynConfig, FieldError, KindRegistry, StoreError, Undecodable};

/// One object held out of the cache because it fails its kind's validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// The object's key.
    pub key: ConfigKey,
    /// The resource version the backend delivered it at.
    pub resource_version: Option<String>,
    /// Every problem, each with its field path.
    pub errors: Vec<FieldError>,
    /// Whether the value decoded as an object at all.
    pub reason: QuarantineReason,
}

/// Why an object is quarantined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuarantineReason {
    /// An object of the kind that fails its validation.
    Invalid,
    /// A stored value that is not an object of the kind.
    Undecodable,
}

impl QuarantineReason {
    /// `Invalid` or `Undecodable`.
    pub fn as_str(self) -> &'static str {
        match self {
            QuarantineReason::Invalid => "Invalid",
            QuarantineReason::Undecodable => "Undecodable",
        }
    }
}

/// The objects a Controller holds out of its cache, and how many it has
/// refused since it started.
///
/// Per key: the entry is the key's latest delivered version, replaced when
/// the backend delivers a newer invalid version and removed when it
/// delivers a valid one, deletes the key, or lists the kind without it.
#[derive(Debug)]
pub struct Quarantine {
    registry: KindRegistry,
    max_object_bytes: Option<usize>,
    entries: RwLock<BTreeMap<ConfigKey, Quarantined>>,
    rejected: RwLock<BTreeMap<String, u64>>,
}

impl Quarantine {
    /// An empty quarantine that validates against `registry`.
    pub fn new(registry: KindRegistry) -> Self {
        Quarantine {
            registry,
            max_object_bytes: None,
            entries: RwLock::new(BTreeMap::new()),
            rejected: RwLock::new(BTreeMap::new()),
        }
    }

    /// Also refuses objects larger than `max` bytes as JSON (`None`: no
    /// limit), as an API with that body limit would.
    pub fn with_max_object_bytes(mut self, max: Option<usize>) -> Self {
        self.max_object_bytes = max;
        self
    }

    /// Validates `config` as a write would be (at one of the versions
    /// served: a store holds objects at the storage version, whatever the
    /// version they were written at, [`pilot_model::KindSchema::validate_stored`]):
    /// every field error, or an error for a kind the registry does not
    /// have, or for an object larger than the limit.
    pub fn check(&self, config: &DynConfig) -> Result<(), Vec<FieldError>> {
        if let Some(max) = self.max_object_bytes {
            let size = json_size(config);
            if size > max {
                return Err(vec![FieldError::new(
                    "",
                    format!("the object is {size} bytes as JSON, more than the {max} bytes the API accepts"),
                )]);
            }
        }
        let schema = match self.registry.schema(&config.meta.kind) {
            Ok(schema) => schema,
            Err(error) => return Err(vec![FieldError::new("kind", error.to_string())]),
        };
        match schema.validate_stored(config) {
            Ok(()) => Ok(()),
            Err(StoreError::Invalid { errors, .. }) => Err(errors),
            Err(other) => Err(vec![FieldError::new("", other.to_string())]),
        }
    }

    /// Every quarantined object, ordered by key.
    pub fn list(&self) -> Vec<Quarantined> {
        self.read().values().cloned().collect()
    }

    /// The quarantined object with `key`, if any.
    pub fn get(&self, key: &ConfigKey) -> Option<Quarantined> {
        self.read().get(key).cloned()
    }

    /// How many objects of each kind are quarantined now (kinds with none
    /// are left out).
    pub fn counts(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for key in self.read().keys() {
            *counts.entry(key.kind.clone()).or_insert(0) += 1;
        }
        counts
    }

    /// How many objects (each key at each version once) were refused,
    /// by kind, since this quarantine was made.
    pub fn rejected(&self) -> BTreeMap<String, u64> {
        self.rejected.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Checks an object the backend delivered: `true` if it may enter the
    /// cache (and releases its key from quarantine), `false` if it is
    /// quarantined. A version already quarantined is not logged or counted
    /// again (a relist delivers the same object again).
    pub(crate) fn admit(&self, config: &DynConfig) -> bool {
        let key = config.key();
        let errors = match self.check(config) {
            Ok(()) => {
                self.release(&key);
                return true;
            }
            Err(errors) => errors,
        };
        self.hold(Quarantined {
            key,
            resource_version: config.meta.resource_version.clone(),
            errors,
            reason: QuarantineReason::Invalid,
        });
        false
    }

    /// Holds a key whose stored value is not an object of its kind.
    pub(crate) fn hold_undecodable(&self, undecodable: &Undecodable) {
        self.hold(Quarantined {
            key: undecodable.key.clone(),
            resource_version: Some(undecodable.revision.to_string()),
            errors: vec![FieldError::new(
                "",
                format!(
                    "the stored value is not a {} object: {}",
                    undecodable.key.kind, undecodable.reason
                ),
            )],
            reason: QuarantineReason::Undecodable,
        });
    }

    /// Records `held`, logging and counting it unless that version of the
    /// key is already held.
    fn hold(&self, held: Quarantined) {
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        if entries
            .get(&held.key)
            .is_some_and(|e| e.resource_version == held.resource_version)
        {
            return;
        }
        let listed: Vec<String> = held.errors.iter().map(ToString::to_string).collect();
        tracing::error!(
            key = %held.key,
            version = held.resource_version.as_deref().unwrap_or(""),
            reason = held.reason.as_str(),
            errors = %listed.join("; "),
            "an object in the store fails validation: quarantined (not cached, not pushed, not served) until it is fixed or deleted in the store"
        );
        *self
            .rejected
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(held.key.kind.clone())
            .or_insert(0) += 1;
        entries.insert(held.key.clone(), held);
    }

    /// Forgets `key` (deleted, or delivered valid).
    pub(crate) fn release(&self, key: &ConfigKey) {
        // Most objects were never quarantined: a read lock answers that.
        if !self.read().contains_key(key) {
            return;
        }
        let removed = self
            .entries
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
        if removed.is_some() {
            tracing::info!(key = %key, "a quarantined object was fixed or deleted in the store: released");
        }
    }

    /// After a list of `kind`: forgets every key of the kind the list did
    /// not hold.
    pub(crate) fn retain_listed(&self, kind: &str, listed: &HashSet<ConfigKey>) {
        let gone: Vec<ConfigKey> = self
            .read()
            .keys()
            .filter(|k| k.kind == kind && !listed.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            self.release(&key);
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<ConfigKey, Quarantined>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner())
    }
}

/// The length of `config` as JSON as an operator would send it (without
/// the status, resource version and creation time the server adds),
/// counted without keeping the text.
fn json_size(config: &DynConfig) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail; a value that cannot be written
    // counts as what was written of it.
    let mut meta = config.meta.clone();
    meta.status = None;
    meta.resource_version = None;
    meta.creation_timestamp = None;
    let sent = pilot_model::Config {
        meta,
        spec: &config.spec,
    };
    let _ = serde_json::to_writer(&mut count, &sent);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilot_model::{ConfigMeta, KindSchema};

    fn quarantine() -> Quarantine {
        let registry = KindRegistry::new();
        registry
            .register_schema(KindSchema::new(
                "Note",
                "notes",
                "example.com",
                "v1",
                |spec, errors| {
                    if spec.get("text").and_then(|t| t.as_str()).is_none() {
                        errors.push("spec.text", "must be a string");
                    }
                },
            ))
            .unwrap();
        Quarantine::new(registry)
    }

    fn note(name: &str, version: &str, spec: serde_json::Value) -> DynConfig {
        let mut meta = ConfigMeta::new("Note", "default", name);
        meta.resource_version = Some(version.to_string());
        DynConfig { meta, spec }
    }

    #[test]
    fn an_invalid_object_is_held_once_per_version_and_released_by_a_valid_one() {
        let q = quarantine();
        let bad = note("n1", "3", serde_json::json!({"text": 7}));
        assert!(!q.admit(&bad));
        assert!(!q.admit(&bad), "the same version again (a relist)");
        assert_eq!(q.rejected().get("Note"), Some(&1));
        let held = q.get(&bad.key()).unwrap();
        assert_eq!(held.resource_version.as_deref(), Some("3"));
        assert_eq!(
            held.errors,
            vec![FieldError::new("spec.text", "must be a string")]
        );

        let worse = note("n1", "4", serde_json::json!({}));
        assert!(!q.admit(&worse));
        assert_eq!(q.rejected().get("Note"), Some(&2));
        assert_eq!(q.counts().get("Note"), Some(&1));

        assert!(q.admit(&note("n1", "5", serde_json::json!({"text": "ok"}))));
        assert!(q.list().is_empty());
        assert_eq!(q.rejected().get("Note"), Some(&2), "a counter never goes down");
    }

    #[test]
    fn an_undecodable_value_is_held_with_its_reason() {
        let q = quarantine();
        let key = ConfigKey::new("Note", "default", "junk");
        let undecodable = Undecodable {
            key: key.clone(),
            revision: 9,
            reason: "not a pilot object: expected value at line 1 column 1".into(),
        };
        q.hold_undecodable(&undecodable);
        q.hold_undecodable(&undecodable);
        let held = q.get(&key).unwrap();
        assert_eq!(held.reason, QuarantineReason::Undecodable);
        assert_eq!(held.resource_version.as_deref(), Some("9"));
        assert_eq!(
            held.errors[0].message,
            "the stored value is not a Note object: not a pilot object: expected value at line 1 column 1"
        );
        assert_eq!(q.rejected().get("Note"), Some(&1));
        q.release(&key);
        assert!(q.list().is_empty());
    }

    #[test]
    fn a_list_without_the_key_releases_it() {
        let q = quarantine();
        let bad = note("n1", "3", serde_json::json!({}));
        assert!(!q.admit(&bad));
        q.retain_listed("Note", &HashSet::from([bad.key()]));
        assert_eq!(q.list().len(), 1);
        q.retain_listed("Other", &HashSet::new());
        assert_eq!(q.list().len(), 1, "another kind's list leaves it");
        q.retain_listed("Note", &HashSet::new());
        assert!(q.list().is_empty());
    }

    #[test]
    fn an_unregistered_kind_is_refused_with_a_reason() {
        let q = quarantine();
        let mut other = note("x", "1", serde_json::json!({}));
        other.meta.kind = "Other".into();
        let errors = q.check(&other).unwrap_err();
        assert_eq!(errors[0].path, "kind");
        assert!(errors[0].message.contains("Other"), "{errors:?}");
    }
}
