//! The fake API server's storage: objects per resource, one global
//! revision counter, a bounded history of changes, and the open watches.

use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// A resource the fake serves: `/<prefix>/<group>/<version>/[namespaces/<ns>/]<plural>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resource {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub kind: String,
    pub namespaced: bool,
    /// The resource has the `status` subresource: status is written only
    /// through `/status`, and everything else only through the resource.
    pub status: bool,
}

impl Resource {
    pub(crate) fn new(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool) -> Self {
        Resource {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            kind: kind.into(),
            namespaced,
            status: false,
        }
    }

    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural.group` (or `plural` in the core group), as Status details name it.
    pub(crate) fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// (group, version, plural): how a request names a resource.
pub(crate) type ResourceId = (String, String, String);

/// A failed request, answered as a `Status` object.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Value,
}

impl Failure {
    pub(crate) fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Failure {
            code,
            reason,
            message: message.into(),
            details: Value::Null,
        }
    }

    fn about(mut self, resource: &Resource, name: &str) -> Self {
        self.details = json!({"name": name, "group": resource.group, "kind": resource.plural});
        self
    }

    pub(crate) fn not_found(resource: &Resource, name: &str) -> Self {
        Failure::new(
            404,
            "NotFound",
            format!("{} {name:?} not found", resource.qualified()),
        )
        .about(resource, name)
    }

    pub(crate) fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.message, "reason": self.reason, "code": self.code,
        });
        if !self.details.is_null() {
            status["details"] = self.details.clone();
        }
        status
    }
}

/// One change, kept for watches that resume after an older revision.
#[derive(Debug, Clone)]
struct Change {
    revision: u64,
    resource: ResourceId,
    namespace: String,
    kind: &'static str,
    object: Value,
}

/// A field selector (`fieldSelector`), as the API server takes one:
/// comma-separated requirements `field=value` (or `==`) and
/// `field!=value` on `metadata.name` and `metadata.namespace` of any
/// resource, and `type` of Secrets. Every field it takes is immutable, so
/// an object never moves in or out of a selection.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fields(Vec<(String, bool, String)>);

impl Fields {
    /// `text` for `resource`; a field the API server does not index is a
    /// 400, as it answers.
    pub(crate) fn parse(text: &str, resource: &Resource) -> Result<Fields, Failure> {
        let mut out = Vec::new();
        for requirement in text.split(',').filter(|r| !r.is_empty()) {
            let (field, equal, value) = if let Some((field, value)) = requirement.split_once("!=") {
                (field, false, value)
            } else if let Some((field, value)) = requirement.split_once("==") {
                (field, true, value)
            } else if let Some((field, value)) = requirement.split_once('=') {
                (field, true, value)
            } else {
                return Err(Failure::new(
                    400,
                    "BadRequest",
                    format!("invalid selector: '{text}'; can't understand '{requirement}'"),
                ));
            };
            let known = matches!(field, "metadata.name" | "metadata.namespace")
                || (field == "type" && resource.group.is_empty() && resource.plural == "secrets");
            if !known {
                return Err(Failure::new(
                    400,
                    "BadRequest",
                    format!("field label not supported: {field}"),
                ));
            }
            out.push((field.to_string(), equal, value.to_string()));
        }
        Ok(Fields(out))
    }

    /// Whether `object` meets every requirement.
    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let found = match field.as_str() {
                "metadata.name" => object["metadata"]["name"].as_str(),
                "metadata.namespace" => object["metadata"]["namespace"].as_str(),
                _ => object["type"].as_str(),
            }
            .unwrap_or_default();
            (found == value) == *equal
        })
    }
}

/// An open watch: which objects it follows and where its events go.
pub(crate) struct Watcher {
    pub resource: ResourceId,
    pub namespace: Option<String>,
    pub fields: Fields,
    pub bookmarks: bool,
    pub sender: mpsc::Sender<Bytes>,
}

pub(crate) struct State {
    pub revision: u64,
    /// Watches may resume after any revision >= this one.
    pub oldest: u64,
    pub history_limit: usize,
    pub resources: HashMap<ResourceId, Resource>,
    /// Objects by resource, then (namespace, name); the namespace of a
    /// cluster-scoped object is empty.
    pub objects: HashMap<ResourceId, BTreeMap<(String, String), Value>>,
    history: VecDeque<Change>,
    pub watchers: Vec<Watcher>,
    pub watches_refused: bool,
    pub writes_refused: bool,
    pub expired_answers: u64,
    /// Every distinct request asked so far (a set: a test's life long,
    /// bounded by the distinct attributes its programs use).
    pub requests: std::collections::BTreeSet<crate::record::ApiRequest>,
    next_uid: u64,
    /// Service-account tokens and TokenReview (`tokens.rs`).
    pub tokens: super::tokens::Tokens,
}

/// How many changes the fake keeps for resuming watches, by default.
pub const DEFAULT_HISTORY: usize = 10_000;

/// How many events an open watch may have queued before the fake closes it
/// (the real API server also drops watchers that cannot keep up).
pub const WATCH_BUFFER: usize = 1024;

impl State {
    pub(crate) fn new() -> Self {
        let mut state = State {
            revision: 1,
            oldest: 1,
            history_limit: DEFAULT_HISTORY,
            resources: HashMap::new(),
            objects: HashMap::new(),
            history: VecDeque::new(),
            watchers: Vec::new(),
            watches_refused: false,
            writes_refused: false,
            expired_answers: 0,
            requests: std::collections::BTreeSet::new(),
            next_uid: 0,
            tokens: super::tokens::Tokens::default(),
        };
        for resource in [
            Resource::new("", "v1", "namespaces", "Namespace", false),
            Resource::new("", "v1", "nodes", "Node", false),
            Resource::new("", "v1", "pods", "Pod", true),
            Resource::new("", "v1", "services", "Service", true),
            Resource::new("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true),
            Resource::new("", "v1", "configmaps", "ConfigMap", true),
            Resource::new("", "v1", "secrets", "Secret", true),
            Resource::new("coordination.k8s.io", "v1", "leases", "Lease", true),
            Resource::new(
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                "CustomResourceDefinition",
                false,
            ),
        ]
        .into_iter()
        .chain(super::admission::resources())
        {
            state.add_resource(resource);
        }
        let namespaces = state.resource(&id("", "v1", "namespaces")).expect("built in");
        for namespace in ["default", "kube-system"] {
            let object = json!({"metadata": {"name": namespace}});
            state.create(&namespaces, "", object).expect("fresh namespace");
        }
        state
    }

    /// A copy of the objects and resources for a dry run: writes to it
    /// are checked as real ones and then dropped; no watch sees them.
    pub(crate) fn scratch(&self) -> State {
        State {
            revision: self.revision,
            oldest: self.oldest,
            history_limit: self.history_limit,
            resources: self.resources.clone(),
            objects: self.objects.clone(),
            history: VecDeque::new(),
            watchers: Vec::new(),
            watches_refused: self.watches_refused,
            writes_refused: self.writes_refused,
            expired_answers: 0,
            next_uid: self.next_uid,
            requests: std::collections::BTreeSet::new(),
            tokens: super::tokens::Tokens::default(),
        }
    }

    fn add_resource(&mut self, resource: Resource) {
        let key = id(&resource.group, &resource.version, &resource.plural);
        self.objects.entry(key.clone()).or_default();
        self.resources.insert(key, resource);
    }

    pub(crate) fn resource(&self, key: &ResourceId) -> Option<Resource> {
        self.resources.get(key).cloned()
    }

    pub(crate) fn get(&self, resource: &Resource, namespace: &str, name: &str) -> Result<Value, Failure> {
        self.objects
            .get(&key_of(resource))
            .and_then(|objects| objects.get(&(namespace.to_string(), name.to_string())))
            .cloned()
            .ok_or_else(|| Failure::not_found(resource, name))
    }

    /// The objects of a resource (in one namespace or all), ordered by
    /// namespace and name, with the current revision.
    pub(crate) fn list(&self, resource: &Resource, namespace: Option<&str>) -> (Vec<Value>, u64) {
        let items = self
            .objects
            .get(&key_of(resource))
            .map(|objects| {
                objects
                    .iter()
                    .filter(|((ns, _), _)| namespace.is_none_or(|n| n == ns))
                    .map(|(_, object)| object.clone())
                    .collect()
            })
            .unwrap_or_default();
        (items, self.revision)
    }

    pub(crate) fn create(
        &mut self,
        resource: &Resource,
        namespace: &str,
        mut object: Value,
    ) -> Result<Value, Failure> {
        let name = checked_name(resource, &object)?;
        if resource.namespaced {
            let namespaces = self.resource(&id("", "v1", "namespaces")).expect("built in");
            if self.get(&namespaces, "", namespace).is_err() {
                return Err(Failure::not_found(&namespaces, namespace));
            }
        }
        let objects = self.objects.entry(key_of(resource)).or_default();
        if objects.contains_key(&(namespace.to_string(), name.clone())) {
            return Err(Failure::new(
                409,
                "AlreadyExists",
                format!("{} {name:?} already exists", resource.qualified()),
            )
            .about(resource, &name));
        }
        if resource.status
            && let Some(map) = object.as_object_mut()
        {
            // With the status subresource, a create's status is dropped.
            map.remove("status");
        }
        self.revision += 1;
        self.next_uid += 1;
        let meta = &mut object["metadata"];
        meta["uid"] = json!(format!("00000000-0000-0000-0000-{:012}", self.next_uid));
        meta["creationTimestamp"] = json!(now_rfc3339());
        meta["generation"] = json!(1);
        self.store(resource, namespace, &name, object, "ADDED")
    }

    pub(crate) fn replace(
        &mut self,
        resource: &Resource,
        namespace: &str,
        mut object: Value,
    ) -> Result<Value, Failure> {
        let name = checked_name(resource, &object)?;
        let current = self.get(resource, namespace, &name)?;
        let expected = object["metadata"]["resourceVersion"].as_str().unwrap_or_default();
        if expected.is_empty() {
            let mut failure = Failure::new(
                422,
                "Invalid",
                format!(
                    "{} {name:?} is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
                    resource.kind
                ),
            )
            .about(resource, &name);
            failure.details["causes"] = json!([{"reason": "FieldValueInvalid", "field": "metadata.resourceVersion",
                "message": "Invalid value: 0x0: must be specified for an update"}]);
            return Err(failure);
        }
        if expected != version_of(&current) {
            return Err(conflict(
                resource,
                &name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        if resource.status {
            // With the status subresource, the resource's PUT ignores
            // status: the stored one stays.
            match current.get("status") {
                Some(status) => object["status"] = status.clone(),
                None => {
                    if let Some(map) = object.as_object_mut() {
                        map.remove("status");
                    }
                }
            }
        }
        if content(&object) == content(&current) && object.get("status") == current.get("status") {
            // An update that changes nothing keeps the version.
            return Ok(current);
        }
        self.revision += 1;
        let spec_changed = without_metadata(&object) != without_metadata(&current);
        keep_server_fields(&current, &mut object, spec_changed);
        self.store(resource, namespace, &name, object, "MODIFIED")
    }

    /// A PUT to `/status`: only the status of `object` is taken (metadata
    /// and spec changes are ignored, as Kubernetes does), guarded by its
    /// resourceVersion when it carries one; `generation` does not move.
    pub(crate) fn replace_status(
        &mut self,
        resource: &Resource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, Failure> {
        let name = checked_name(resource, &object)?;
        let current = self.get(resource, namespace, &name)?;
        let expected = object["metadata"]["resourceVersion"].as_str().unwrap_or_default();
        if !expected.is_empty() && expected != version_of(&current) {
            return Err(conflict(
                resource,
                &name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        let mut updated = current.clone();
        match object.get("status") {
            Some(status) => updated["status"] = status.clone(),
            None => {
                if let Some(map) = updated.as_object_mut() {
                    map.remove("status");
                }
            }
        }
        if updated == current {
            return Ok(current);
        }
        self.revision += 1;
        self.store(resource, namespace, &name, updated, "MODIFIED")
    }

    /// Server-side apply, simplified: creates the object, or merges the
    /// applied fields into it (maps merged, everything else replaced).
    pub(crate) fn apply(
        &mut self,
        resource: &Resource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, Failure> {
        let name = checked_name(resource, &object)?;
        let Ok(current) = self.get(resource, namespace, &name) else {
            return self.create(resource, namespace, object);
        };
        let mut merged = current.clone();
        merge(&mut merged, object);
        merged["metadata"]["resourceVersion"] = json!(version_of(&current));
        self.replace(resource, namespace, merged)
    }

    pub(crate) fn delete(
        &mut self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        precondition: Option<&str>,
    ) -> Result<Value, Failure> {
        let current = self.get(resource, namespace, name)?;
        if let Some(expected) = precondition
            && expected != version_of(&current)
        {
            return Err(conflict(
                resource,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {expected}, ResourceVersion in object meta: {}",
                    version_of(&current)
                ),
            ));
        }
        if let Some(objects) = self.objects.get_mut(&key_of(resource)) {
            objects.remove(&(namespace.to_string(), name.to_string()));
        }
        self.revision += 1;
        let mut object = current;
        object["metadata"]["resourceVersion"] = json!(self.revision.to_string());
        self.record(resource, namespace, "DELETED", &object);
        Ok(object)
    }

    /// The changes a watch resuming after `after` must replay, or `None`
    /// when that history is gone.
    pub(crate) fn replay(
        &self,
        resource: &ResourceId,
        namespace: Option<&str>,
        fields: &Fields,
        after: u64,
    ) -> Option<Vec<Bytes>> {
        if after < self.oldest {
            return None;
        }
        Some(
            self.history
                .iter()
                .filter(|c| c.revision > after && &c.resource == resource)
                .filter(|c| namespace.is_none_or(|n| n == c.namespace) && fields.matches(&c.object))
                .map(|c| event_line(c.kind, &c.object))
                .collect(),
        )
    }

    /// Forgets every change so far: a watch resuming from before now gets
    /// 410 Gone.
    pub(crate) fn expire_history(&mut self) {
        self.history.clear();
        self.oldest = self.revision;
    }

    fn store(
        &mut self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        mut object: Value,
        kind: &'static str,
    ) -> Result<Value, Failure> {
        object["apiVersion"] = json!(resource.api_version());
        object["kind"] = json!(resource.kind);
        object["metadata"]["resourceVersion"] = json!(self.revision.to_string());
        if resource.namespaced {
            object["metadata"]["namespace"] = json!(namespace);
        }
        if key_of(resource) == id("apiextensions.k8s.io", "v1", "customresourcedefinitions") {
            self.serve_crd(&object)?;
            // The API server sets this once the resource is served (at
            // once here).
            object["status"] = json!({"conditions": [{"type": "Established", "status": "True"}],
                "acceptedNames": object["spec"]["names"].clone()});
        }
        self.objects
            .entry(key_of(resource))
            .or_default()
            .insert((namespace.to_string(), name.to_string()), object.clone());
        self.record(resource, namespace, kind, &object);
        Ok(object)
    }

    /// Serves the resource a CustomResourceDefinition defines (its served
    /// versions).
    fn serve_crd(&mut self, crd: &Value) -> Result<(), Failure> {
        let spec = &crd["spec"];
        let field = |path: &str, value: &Value| {
            value.as_str().map(str::to_string).ok_or_else(|| {
                Failure::new(
                    422,
                    "Invalid",
                    format!("CustomResourceDefinition is invalid: {path}: Required value"),
                )
            })
        };
        let group = field("spec.group", &spec["group"])?;
        let plural = field("spec.names.plural", &spec["names"]["plural"])?;
        let kind = field("spec.names.kind", &spec["names"]["kind"])?;
        let namespaced = spec["scope"] == "Namespaced";
        for version in spec["versions"].as_array().into_iter().flatten() {
            if version["served"] == true {
                let status = version["subresources"]["status"].is_object();
                let version = field("spec.versions[].name", &version["name"])?;
                let mut resource = Resource::new(&group, &version, &plural, &kind, namespaced);
                resource.status = status;
                self.add_resource(resource);
            }
        }
        Ok(())
    }

    /// Keeps the change for later watches and sends it to the open ones;
    /// the others get a bookmark at the new revision if they asked for
    /// bookmarks. A watch that cannot take an event is closed.
    fn record(&mut self, resource: &Resource, namespace: &str, kind: &'static str, object: &Value) {
        let change = Change {
            revision: self.revision,
            resource: key_of(resource),
            namespace: namespace.to_string(),
            kind,
            object: object.clone(),
        };
        let line = event_line(kind, object);
        let revision = self.revision;
        let resources = &self.resources;
        self.watchers.retain(|watcher| {
            let matches = watcher.resource == change.resource
                && watcher.namespace.as_deref().is_none_or(|n| n == change.namespace)
                && watcher.fields.matches(&change.object);
            let message = if matches {
                line.clone()
            } else if watcher.bookmarks
                && let Some(watched) = resources.get(&watcher.resource)
            {
                bookmark_line(watched, revision)
            } else {
                return !watcher.sender.is_closed();
            };
            watcher.sender.try_send(message).is_ok()
        });
        self.history.push_back(change);
        while self.history.len() > self.history_limit {
            if let Some(dropped) = self.history.pop_front() {
                self.oldest = dropped.revision;
            }
        }
    }
}

pub(crate) fn id(group: &str, version: &str, plural: &str) -> ResourceId {
    (group.to_string(), version.to_string(), plural.to_string())
}

fn key_of(resource: &Resource) -> ResourceId {
    id(&resource.group, &resource.version, &resource.plural)
}

pub(crate) fn version_of(object: &Value) -> &str {
    object["metadata"]["resourceVersion"].as_str().unwrap_or_default()
}

pub(crate) fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

fn bookmark_line(resource: &Resource, revision: u64) -> Bytes {
    event_line(
        "BOOKMARK",
        &json!({"apiVersion": resource.api_version(), "kind": resource.kind,
            "metadata": {"resourceVersion": revision.to_string()}}),
    )
}

fn conflict(resource: &Resource, name: &str, why: &str) -> Failure {
    Failure::new(
        409,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {} {name:?}: {why}",
            resource.qualified()
        ),
    )
    .about(resource, name)
}

/// The object's name, which must be a DNS-1123 subdomain (422 otherwise).
fn checked_name(resource: &Resource, object: &Value) -> Result<String, Failure> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if valid {
        return Ok(name.to_string());
    }
    let message = if name.is_empty() {
        "Required value: name or generateName is required".to_string()
    } else {
        format!(
            "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'"
        )
    };
    let mut failure = Failure::new(
        422,
        "Invalid",
        format!("{} {name:?} is invalid: metadata.name: {message}", resource.kind),
    )
    .about(resource, name);
    failure.details["causes"] =
        json!([{"reason": "FieldValueInvalid", "field": "metadata.name", "message": message}]);
    Err(failure)
}

/// What a client wrote: the object without the fields the server sets.
fn content(object: &Value) -> Value {
    let mut content = object.clone();
    if let Some(map) = content.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
        map.remove("status");
    }
    if let Some(meta) = content["metadata"].as_object_mut() {
        for field in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
            "managedFields",
        ] {
            meta.remove(field);
        }
    }
    content
}

/// The object's data (spec and the like) without metadata: a change there
/// bumps `generation`.
fn without_metadata(object: &Value) -> Value {
    let mut content = content(object);
    if let Some(map) = content.as_object_mut() {
        map.remove("metadata");
    }
    content
}

/// Copies what the server owns (uid, creation time, generation) from the
/// stored object; the generation grows when the spec changes.
fn keep_server_fields(current: &Value, object: &mut Value, spec_changed: bool) {
    let old = &current["metadata"];
    let meta = &mut object["metadata"];
    for field in ["uid", "creationTimestamp"] {
        meta[field] = old[field].clone();
    }
    let generation = old["generation"].as_u64().unwrap_or(1);
    meta["generation"] = json!(if spec_changed { generation + 1 } else { generation });
}

pub(crate) fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(target.entry(key).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch,
    }
}

fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    k8s_openapi::jiff::Timestamp::from_second(i64::try_from(now).unwrap_or(0))
        .map(|t| t.to_string())
        .unwrap_or_default()
}
