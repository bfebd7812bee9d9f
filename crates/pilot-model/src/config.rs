//! Configuration objects: metadata plus a typed or untyped spec, and their
//! document form.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{ConfigKey, ConfigKind, ConfigMeta, ConfigStatus, FieldError, ManagedFieldsEntry, StoreError};

/// A configuration object: metadata and a spec of type `S`.
///
/// Typed code uses `Config<RouteRule>`; code that handles kinds known only at
/// run time uses [`DynConfig`], whose spec is a JSON value. Both serialize to
/// the same document form that `pilotctl` reads:
///
/// ```
/// use pilot_model::DynConfig;
/// let doc = serde_json::json!({
///     "apiVersion": "example.com/v1",
///     "kind": "Greeting",
///     "metadata": {"name": "hello", "namespace": "default", "labels": {"app": "web"}},
///     "spec": {"text": "hi"}
/// });
/// let config: DynConfig = serde_json::from_value(doc.clone()).unwrap();
/// assert_eq!(config.meta.group, "example.com");
/// assert_eq!(config.spec["text"], "hi");
/// assert_eq!(serde_json::to_value(&config).unwrap(), doc);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Config<S> {
    /// Identity, labels, annotations and the store's version.
    pub meta: ConfigMeta,
    /// The kind-specific content.
    pub spec: S,
}

/// A configuration object whose spec is untyped JSON.
pub type DynConfig = Config<serde_json::Value>;

impl<S> Config<S> {
    /// The object's key.
    pub fn key(&self) -> ConfigKey {
        self.meta.key()
    }
}

impl<K: ConfigKind> Config<K> {
    /// A new typed object of kind `K`; group and version come from `K`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, spec: K) -> Self {
        let mut meta = ConfigMeta::new(K::id(), namespace, name);
        meta.group = K::GROUP.to_string();
        meta.version = K::VERSION.to_string();
        Config { meta, spec }
    }

    /// The untyped form of this object.
    pub fn to_dyn(&self) -> Result<DynConfig, StoreError> {
        let spec = serde_json::to_value(&self.spec).map_err(|e| StoreError::Invalid {
            key: self.key(),
            errors: vec![FieldError::new("spec", e.to_string())],
        })?;
        Ok(Config {
            meta: self.meta.clone(),
            spec,
        })
    }

    /// The typed form of an untyped object of kind `K`. The error names the
    /// field that did not fit.
    pub fn from_dyn(config: &DynConfig) -> Result<Self, StoreError> {
        let named = config.meta.kind == K::id()
            || (config.meta.kind == K::KIND
                && (config.meta.group.is_empty() || config.meta.group == K::GROUP));
        if !named {
            return Err(StoreError::Invalid {
                key: config.key(),
                errors: vec![FieldError::new(
                    "kind",
                    format!("expected {}, found {}", K::KIND, config.meta.kind),
                )],
            });
        }
        let spec = decode_spec::<K>(&config.spec).map_err(|error| StoreError::Invalid {
            key: config.key(),
            errors: vec![error],
        })?;
        Ok(Config {
            meta: config.meta.clone(),
            spec,
        })
    }
}

/// Decodes a spec, naming the failing field as `spec.<path>`.
pub(crate) fn decode_spec<T: DeserializeOwned>(spec: &serde_json::Value) -> Result<T, FieldError> {
    decode_at("spec", spec)
}

/// Decodes `value`, naming the failing field below `root` in pilot's path
/// form (`spec.route[1].weight`, `metadata.labels[app.kubernetes.io/name]`).
/// An unknown field is named in the path itself, with the closest known
/// field suggested.
pub(crate) fn decode_at<T: DeserializeOwned>(root: &str, value: &serde_json::Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let mut path = root.to_string();
        for segment in e.path().iter() {
            match segment {
                serde_path_to_error::Segment::Seq { index } => path.push_str(&format!("[{index}]")),
                serde_path_to_error::Segment::Map { key } => push_key(&mut path, key),
                serde_path_to_error::Segment::Enum { variant } => push_key(&mut path, variant),
                serde_path_to_error::Segment::Unknown => {}
            }
        }
        let mut message = e.into_inner().to_string();
        if let Some((proto, both)) = crate::proto_names::duplicate_spellings(&message) {
            // Placed at the proto spelling; the message names both.
            push_key(&mut path, &proto);
            message = both;
        }
        if let Some((field, expected)) = unknown_field(&message) {
            let mut with_field = String::new();
            push_key(&mut with_field, &field);
            if !path.ends_with(&with_field) {
                path.push_str(&with_field);
            }
            message = match closest(&field, &expected) {
                Some(best) => format!("unknown field `{field}`; did you mean `{best}`?"),
                None if expected.is_empty() => format!("unknown field `{field}`; this object has no fields"),
                None => format!("unknown field `{field}`; known fields: {}", expected.join(", ")),
            };
        }
        FieldError::new(path, message)
    })
}

/// Decodes `value` like [`decode_at`], but on failure goes on: it removes
/// each offending field and decodes again, so that every unknown or
/// mistyped field is reported at once (up to 32). Returns the errors and,
/// when the input could be repaired that way, what the rest decoded to.
pub(crate) fn decode_all<T: DeserializeOwned>(
    root: &str,
    value: &serde_json::Value,
) -> (Option<T>, Vec<FieldError>) {
    if value.is_array() {
        // serde reads a struct from a sequence by position: refused, so a
        // list never stands in for an object.
        return (None, vec![FieldError::new(root, NOT_A_LIST)]);
    }
    let mut current = std::borrow::Cow::Borrowed(value);
    let mut found = Vec::new();
    for _ in 0..32 {
        match decode_at::<T>(root, &current) {
            Ok(decoded) => return (Some(decoded), found),
            Err(error) => {
                let mut below_root = segments(&error.path);
                below_root.drain(..segments(root).len().min(below_root.len()));
                let removed =
                    !error.message.starts_with("missing field") && remove(current.to_mut(), &below_root);
                found.push(error);
                if !removed {
                    return (None, found);
                }
            }
        }
    }
    (None, found)
}

/// The message for a list written where an object belongs.
const NOT_A_LIST: &str = "must be an object (a mapping of field names to values), not a list";

/// Records each place where `written` has a list and `canonical` (what
/// `written` decoded to, serialized again) has an object: serde reads a
/// struct from a sequence by position, which no client means. Keys written
/// with their proto names are matched to their JSON names.
pub(crate) fn lists_for_objects(
    path: &str,
    written: &serde_json::Value,
    canonical: &serde_json::Value,
) -> Vec<FieldError> {
    let mut found = Vec::new();
    walk_lists(&mut path.to_string(), written, canonical, &mut found);
    found
}

fn walk_lists(
    path: &mut String,
    written: &serde_json::Value,
    canonical: &serde_json::Value,
    found: &mut Vec<FieldError>,
) {
    use serde_json::Value;
    match (written, canonical) {
        (Value::Array(_), Value::Object(_)) => found.push(FieldError::new(path.clone(), NOT_A_LIST)),
        (Value::Object(written), Value::Object(canonical)) => {
            for (key, value) in written {
                let Some(decoded) = canonical
                    .get(key)
                    .or_else(|| canonical.get(&crate::proto_names::camel_case(key)))
                else {
                    continue;
                };
                let len = path.len();
                push_key(path, key);
                walk_lists(path, value, decoded, found);
                path.truncate(len);
            }
        }
        (Value::Array(written), Value::Array(canonical)) => {
            for (i, (value, decoded)) in written.iter().zip(canonical).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk_lists(path, value, decoded, found);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// Removes the element at `segments` from `value`; false if there is none.
fn remove(value: &mut serde_json::Value, segments: &[String]) -> bool {
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut node = value;
    for segment in parents {
        node = match node {
            serde_json::Value::Object(map) => match map.get_mut(segment) {
                Some(next) => next,
                None => return false,
            },
            serde_json::Value::Array(items) => {
                match segment.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                    Some(next) => next,
                    None => return false,
                }
            }
            _ => return false,
        };
    }
    match node {
        serde_json::Value::Object(map) => map.remove(last).is_some(),
        serde_json::Value::Array(items) => match last.parse::<usize>() {
            // Replace rather than remove, so later indices keep their meaning.
            Ok(i) if i < items.len() => {
                let replaced = std::mem::take(&mut items[i]);
                !replaced.is_null()
            }
            _ => false,
        },
        _ => false,
    }
}

/// Splits a path in pilot's form into segments: `a.b[c.d][0]` is
/// `[a, b, c.d, 0]`.
pub(crate) fn segments(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
            }
            '[' => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
                let inner: String = chars.by_ref().take_while(|c| *c != ']').collect();
                out.push(inner);
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Appends a map key to a path: `.key` for plain identifiers, `[key]` for
/// keys with dots, slashes or other punctuation.
pub fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    } else {
        path.push('[');
        path.push_str(key);
        path.push(']');
    }
}

/// Splits serde's "unknown field `x`, expected one of `a`, `b`" (or
/// "expected `a`", or "there are no fields") into the field and the
/// expected ones.
fn unknown_field(message: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    let expected = rest.split('`').skip(1).step_by(2).map(str::to_string).collect();
    Some((field.to_string(), expected))
}

/// The candidate closest to `word` by edit distance, if close enough to be a
/// plausible typo.
pub(crate) fn closest<'a>(word: &str, candidates: &'a [String]) -> Option<&'a str> {
    let best = candidates.iter().min_by_key(|c| edit_distance(word, c))?;
    let distance = edit_distance(word, best);
    let limit = (word.len().max(best.len()) / 3).max(2);
    (distance <= limit && distance < word.len().max(1)).then_some(best.as_str())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DocumentRef<'a, S> {
    api_version: String,
    kind: &'a str,
    metadata: ObjectMetaRef<'a>,
    spec: &'a S,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'a ConfigStatus>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ObjectMetaRef<'a> {
    name: &'a str,
    // A cluster-scoped object's is empty: written as none.
    #[serde(skip_serializing_if = "str::is_empty")]
    namespace: &'a str,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    labels: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    creation_timestamp: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<i64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    managed_fields: &'a [ManagedFieldsEntry],
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Document<S> {
    #[serde(default)]
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: S,
    #[serde(default)]
    status: Option<ConfigStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ObjectMeta {
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    creation_timestamp: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    managed_fields: Vec<ManagedFieldsEntry>,
}

impl<S: Serialize> Serialize for Config<S> {
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        let meta = &self.meta;
        DocumentRef {
            api_version: meta.api_version(),
            kind: crate::kind_name(&meta.kind),
            metadata: ObjectMetaRef {
                name: &meta.name,
                namespace: &meta.namespace,
                labels: &meta.labels,
                annotations: &meta.annotations,
                resource_version: meta.resource_version.as_deref(),
                creation_timestamp: meta.creation_timestamp.map(format_timestamp),
                uid: meta.uid.as_deref(),
                generation: meta.generation,
                managed_fields: &meta.managed_fields,
            },
            spec: &self.spec,
            status: meta.status.as_ref(),
        }
        .serialize(serializer)
    }
}

impl<'de, S: Deserialize<'de>> Deserialize<'de> for Config<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let doc = Document::<S>::deserialize(deserializer)?;
        let (group, version) = match doc.api_version.rsplit_once('/') {
            Some((group, version)) => (group.to_string(), version.to_string()),
            None => (String::new(), doc.api_version),
        };
        let creation_timestamp = doc
            .metadata
            .creation_timestamp
            .as_deref()
            .map(parse_timestamp)
            .transpose()
            .map_err(serde::de::Error::custom)?;
        Ok(Config {
            meta: ConfigMeta {
                kind: doc.kind,
                group,
                version,
                name: doc.metadata.name,
                namespace: doc.metadata.namespace,
                labels: doc.metadata.labels,
                annotations: doc.metadata.annotations,
                resource_version: doc.metadata.resource_version,
                creation_timestamp,
                uid: doc.metadata.uid,
                generation: doc.metadata.generation,
                managed_fields: doc.metadata.managed_fields,
                status: doc.status,
            },
            spec: doc.spec,
        })
    }
}

/// RFC 3339 with whole seconds, as Kubernetes writes `creationTimestamp`.
fn format_timestamp(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

fn parse_timestamp(text: &str) -> Result<SystemTime, String> {
    humantime::parse_rfc3339_weak(text)
        .map_err(|e| format!("metadata.creationTimestamp {text:?} is not an RFC 3339 time: {e}"))
}

/// Writes a time as [`format_timestamp`] does (serde `serialize_with`).
pub(crate) fn serialize_time<Ser: Serializer>(
    time: &SystemTime,
    serializer: Ser,
) -> Result<Ser::Ok, Ser::Error> {
    serializer.serialize_str(&format_timestamp(*time))
}

/// Reads an RFC 3339 time (serde `deserialize_with`).
pub(crate) fn deserialize_time<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SystemTime, D::Error> {
    let text = String::deserialize(deserializer)?;
    humantime::parse_rfc3339_weak(&text)
        .map_err(|e| serde::de::Error::custom(format!("{text:?} is not an RFC 3339 time: {e}")))
}

/// The current time truncated to whole seconds, so that a timestamp survives a
/// round trip through the document form unchanged.
pub fn now_seconds() -> SystemTime {
    let now = SystemTime::now();
    let secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_round_trip_keeps_everything() {
        let mut meta = ConfigMeta::new("Greeting", "prod", "hello");
        meta.group = "example.com".into();
        meta.version = "v1".into();
        meta.labels.insert("app".into(), "web".into());
        meta.annotations.insert("note".into(), "x".into());
        meta.resource_version = Some("42".into());
        meta.creation_timestamp = Some(now_seconds());
        let config = DynConfig {
            meta,
            spec: serde_json::json!({"text": "hi"}),
        };
        let text = serde_json::to_string(&config).unwrap();
        let back: DynConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(back, config);
    }

    #[test]
    fn unknown_fields_are_named_in_the_path_with_a_suggestion() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        #[allow(dead_code, reason = "the fields are read by deserialization only")]
        struct Route {
            weight: u32,
            #[serde(default)]
            labels: BTreeMap<String, u32>,
        }
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code, reason = "the fields are read by deserialization only")]
        struct Spec {
            route: Vec<Route>,
        }
        let value = serde_json::json!({"route": [{"weight": 1}, {"wieght": 2}]});
        let err = decode_at::<Spec>("spec", &value).unwrap_err();
        assert_eq!(err.path, "spec.route[1].wieght");
        assert_eq!(err.message, "unknown field `wieght`; did you mean `weight`?");
        let value = serde_json::json!({"route": [{"weight": 1, "labels": {"app.io/name": "x"}}]});
        let err = decode_at::<Spec>("spec", &value).unwrap_err();
        assert_eq!(err.path, "spec.route[0].labels[app.io/name]");
        let err = decode_at::<Spec>("spec", &serde_json::json!({"zzz": 1})).unwrap_err();
        assert_eq!(err.message, "unknown field `zzz`; known fields: route");
    }

    #[test]
    fn unknown_metadata_field_is_rejected_with_its_name() {
        let err = serde_json::from_value::<DynConfig>(serde_json::json!({
            "apiVersion": "v1", "kind": "K",
            "metadata": {"name": "a", "nmespace": "x"}, "spec": {}
        }))
        .unwrap_err();
        assert!(err.to_string().contains("nmespace"), "{err}");
    }
}
