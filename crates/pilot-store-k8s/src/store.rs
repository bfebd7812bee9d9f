//! [`KubeConfigStore`]: configuration objects as Kubernetes custom resources.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams, Preconditions};
use kube::{Client, Resource as _};
use pilot_model::{
    ConfigKey, ConfigStatus, ConfigStore, ConfigWatch, DynConfig, FieldError, KindRegistry, KindSchema,
    Revision, Snapshot, StoreError, WatchStream,
};

use crate::convert::{self, Failure, api_resource, to_config, to_object};
use crate::error::{self, KubeError};

/// A [`ConfigStore`] and [`ConfigWatch`] on the Kubernetes API: each kind is
/// a custom resource (see [`crds`](crate::crds)), each object a custom
/// object in the namespace of the same name.
///
/// - Writes are validated with the store's [`KindRegistry`] before any
///   request is sent; an invalid object never reaches the API server.
/// - The resource version is Kubernetes' `resourceVersion`. `create` is a
///   POST (409 AlreadyExists maps to [`StoreError::AlreadyExists`]); `update`
///   is a PUT carrying the caller's version (409 Conflict maps to
///   [`StoreError::Conflict`] with both versions, after reading the actual
///   one); `delete` sends the version as a precondition. 404 is
///   [`StoreError::NotFound`], 422 [`StoreError::Invalid`] with the server's
///   field paths.
/// - `snapshot` lists a kind; `watch` watches it from a resourceVersion with
///   bookmarks. A 410 Gone becomes [`StoreError::Compacted`], so the
///   Controller lists again and emits the deletes the gap hid.
/// - Resource versions are taken to be etcd revisions (decimal numbers),
///   as on every etcd-backed API server; anything else fails clearly.
/// - [`KubeConfigStore::new`] serves every namespace (needs cluster-wide
///   RBAC); [`KubeConfigStore::namespaced`] one namespace, where objects of
///   other namespaces do not exist and cannot be written.
///
/// Distribution status is the custom object's `status`, written through
/// the `status` subresource (the CRDs declare it) with the resourceVersion
/// it observed as precondition, and with the spec's `generation` beside it
/// (`observedGeneration`). Kubernetes moves an object's resourceVersion on
/// every status write; pilot does not let that show: while the spec is at
/// the generation the status was written for, the object's version for
/// pilot is the one the status observed. So a user's update or conditional
/// delete carrying that version still succeeds: on 409 the store reads the
/// object, and if its version for pilot is still the caller's (only status
/// was written since), sends the write again with the current
/// resourceVersion. Not covered: a label or annotation change by another
/// client after a status write (Kubernetes does not bump `generation` for
/// metadata), which such a retried write would overwrite.
///
/// `current_revision` is the highest resourceVersion this handle has
/// written: the Kubernetes API has no cheap way to ask for a revision that
/// every kind's watch is sure to reach (etcd's revision moves with every
/// Pod, Lease and Event in the cluster, while a watch of one kind only
/// reaches it through bookmarks, which an API server sends about once a
/// minute). So a Controller over this store reads its own writes at once,
/// and writes made elsewhere as they arrive.
#[derive(Clone)]
pub struct KubeConfigStore {
    inner: Arc<Inner>,
    create_namespaces: bool,
}

struct Inner {
    client: Client,
    registry: KindRegistry,
    namespace: Option<String>,
    written: AtomicU64,
}

impl KubeConfigStore {
    /// A store of the kinds in `registry` across every namespace.
    pub fn new(client: Client, registry: KindRegistry) -> Self {
        Self::build(client, registry, None)
    }

    /// A store of the kinds in `registry` in one namespace only.
    pub fn namespaced(client: Client, registry: KindRegistry, namespace: impl Into<String>) -> Self {
        Self::build(client, registry, Some(namespace.into()))
    }

    fn build(client: Client, registry: KindRegistry, namespace: Option<String>) -> Self {
        KubeConfigStore {
            inner: Arc::new(Inner {
                client,
                registry,
                namespace,
                written: AtomicU64::new(0),
            }),
            create_namespaces: false,
        }
    }

    /// With `true`, `create` makes a missing namespace first instead of
    /// failing (needs RBAC to create namespaces).
    pub fn create_missing_namespaces(mut self, create: bool) -> Self {
        self.create_namespaces = create;
        self
    }

    /// The namespace this store is limited to, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.inner.namespace.as_deref()
    }

    /// The Kubernetes client.
    pub fn client(&self) -> Client {
        self.inner.client.clone()
    }

    /// The kind's schema and its API in `namespace` (`None`: every namespace
    /// this store serves).
    pub(crate) fn api(
        &self,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<(Arc<KindSchema>, ApiResource, Api<DynamicObject>), StoreError> {
        let schema = self.inner.registry.schema(kind)?;
        let resource = api_resource(&schema);
        let client = self.inner.client.clone();
        // A cluster-scoped kind's objects are in no namespace: a store
        // limited to one namespace reads them too (as it needs its
        // GatewayClasses).
        let api = match namespace.or(self.namespace()) {
            Some(ns) if !schema.cluster_scoped => Api::namespaced_with(client, ns, &resource),
            _ => Api::all_with(client, &resource),
        };
        Ok((schema, resource, api))
    }

    /// True when this store serves `namespace` (every store serves the
    /// cluster-scoped objects, whose namespace is empty).
    fn serves(&self, namespace: &str) -> bool {
        namespace.is_empty() || self.namespace().is_none_or(|ns| ns == namespace)
    }

    fn outside(&self, config: &DynConfig) -> StoreError {
        StoreError::Invalid {
            key: config.key(),
            errors: vec![FieldError::new(
                "metadata.namespace",
                format!(
                    "this store serves namespace {:?} only",
                    self.namespace().unwrap_or_default()
                ),
            )],
        }
    }

    /// The stored object, and notes its version as written.
    fn written(&self, schema: &KindSchema, object: &DynamicObject) -> Result<Arc<DynConfig>, StoreError> {
        let config = to_config(schema, object).map_err(KubeError::NotPilotObject)?;
        let key = config.key().to_string();
        // The API server's version (a status write moves it, pilot's
        // version of the object may not have moved).
        let revision = convert::revision(object.metadata.resource_version.as_deref(), &key)?;
        self.inner.written.fetch_max(revision, Ordering::Relaxed);
        Ok(Arc::new(config))
    }

    /// The object as the API server holds it, or `None`.
    async fn raw(&self, key: &ConfigKey) -> Result<Option<DynamicObject>, StoreError> {
        let (_, resource, api) = self.api(&key.kind, Some(&key.namespace))?;
        match api.get_opt(&key.name).await {
            Ok(object) => Ok(object),
            Err(error) => match convert::failure(key, &resource, error) {
                Failure::Done(StoreError::NotFound { .. }) => Ok(None),
                Failure::Done(error) => Err(error),
                _ => Err(StoreError::unavailable(format!("reading {key}"))),
            },
        }
    }

    /// After a 409 on a write that carried `expected`: the resourceVersion
    /// to send again with when only status was written since (the object's
    /// version for pilot is still `expected`), else the error to return.
    async fn retry_version(
        &self,
        schema: &KindSchema,
        key: &ConfigKey,
        expected: &str,
        sent: Option<&str>,
    ) -> Result<String, StoreError> {
        let Some(current) = self.raw(key).await? else {
            return Err(StoreError::NotFound { key: key.clone() });
        };
        let actual = to_config(schema, &current)
            .map_err(StoreError::unavailable)?
            .meta
            .resource_version
            .unwrap_or_default();
        match current.metadata.resource_version {
            Some(raw) if actual == expected && Some(raw.as_str()) != sent => Ok(raw),
            _ => Err(StoreError::Conflict {
                key: key.clone(),
                expected: Some(expected.to_string()),
                actual,
            }),
        }
    }

    /// The error for a failed write of `key`: for a conflict, reads the
    /// actual version.
    async fn write_failed(
        &self,
        key: &ConfigKey,
        resource: &ApiResource,
        expected: Option<String>,
        error: kube::Error,
    ) -> StoreError {
        match convert::failure(key, resource, error) {
            Failure::Done(error) => error,
            Failure::NoNamespace => StoreError::Invalid {
                key: key.clone(),
                errors: vec![FieldError::new(
                    "metadata.namespace",
                    format!(
                        "namespace {:?} does not exist; create it first (or use create_missing_namespaces)",
                        key.namespace
                    ),
                )],
            },
            Failure::Conflict => match self.get(key).await {
                Ok(Some(current)) => StoreError::Conflict {
                    key: key.clone(),
                    expected,
                    actual: current.meta.resource_version.clone().unwrap_or_default(),
                },
                Ok(None) => StoreError::NotFound { key: key.clone() },
                Err(error) => error,
            },
        }
    }

    async fn create_namespace(&self, name: &str) -> Result<(), StoreError> {
        let namespaces: Api<Namespace> = Api::all(self.inner.client.clone());
        let mut namespace = Namespace::default();
        namespace.meta_mut().name = Some(name.to_string());
        match namespaces.create(&PostParams::default(), &namespace).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(error) => Err(error::unavailable(format!("creating namespace {name:?}"), error)),
        }
    }

    /// Lists a kind, with the list's revision, ordered by namespace and name.
    async fn list_at(
        &self,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<(Vec<Arc<DynConfig>>, Revision), StoreError> {
        let (schema, resource, api) = self.api(kind, namespace)?;
        let list = api.list(&ListParams::default()).await.map_err(|error| {
            match convert::failure(&ConfigKey::new(kind, "", ""), &resource, error) {
                Failure::Done(error) => error,
                _ => KubeError::Unexpected {
                    action: format!("listing {}.{}", resource.plural, resource.group),
                }
                .into(),
            }
        })?;
        let revision = convert::revision(
            list.metadata.resource_version.as_deref(),
            &format!("the list of {}", resource.plural),
        )?;
        let mut items = Vec::with_capacity(list.items.len());
        for object in &list.items {
            match to_config(&schema, object) {
                Ok(config) => items.push(Arc::new(config)),
                Err(reason) => tracing::warn!(%reason, "skipping a custom object that is not a pilot object"),
            }
        }
        // A namespace holds no cluster-scoped object.
        if let Some(namespace) = namespace.filter(|ns| schema.cluster_scoped && !ns.is_empty()) {
            items.retain(|c| c.meta.namespace == namespace);
        }
        items.sort_by(|a, b| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)));
        Ok((items, revision))
    }
}

#[async_trait]
impl ConfigStore for KubeConfigStore {
    fn registry(&self) -> &KindRegistry {
        &self.inner.registry
    }

    async fn get(&self, key: &ConfigKey) -> Result<Option<Arc<DynConfig>>, StoreError> {
        let (schema, resource, api) = self.api(&key.kind, Some(&key.namespace))?;
        if !self.serves(&key.namespace) {
            return Ok(None);
        }
        match api.get_opt(&key.name).await {
            Ok(None) => Ok(None),
            Ok(Some(object)) => to_config(&schema, &object)
                .map(|c| Some(Arc::new(c)))
                .map_err(|reason| KubeError::NotPilotObject(reason).into()),
            Err(error) => match convert::failure(key, &resource, error) {
                Failure::Done(StoreError::NotFound { .. }) => Ok(None),
                Failure::Done(error) => Err(error),
                _ => Err(KubeError::Unexpected {
                    action: format!("reading {key}"),
                }
                .into()),
            },
        }
    }

    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Arc<DynConfig>>, StoreError> {
        self.inner.registry.schema(kind)?;
        if namespace.is_some_and(|ns| !self.serves(ns)) {
            return Ok(Vec::new());
        }
        Ok(self.list_at(kind, namespace).await?.0)
    }

    async fn create(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        let config = self.inner.registry.prepare(config)?;
        if !self.serves(&config.meta.namespace) {
            return Err(self.outside(&config));
        }
        let key = config.key();
        let (schema, resource, api) = self.api(&key.kind, Some(&key.namespace))?;
        let mut object = to_object(&config);
        object.metadata.resource_version = None;
        let mut created = api.create(&PostParams::default(), &object).await;
        if let Err(kube::Error::Api(status)) = &created
            && status.code == 404
            && self.create_namespaces
            && status.details.as_ref().is_some_and(|d| d.kind == "namespaces")
        {
            self.create_namespace(&key.namespace).await?;
            created = api.create(&PostParams::default(), &object).await;
        }
        match created {
            Ok(object) => self.written(&schema, &object),
            Err(error) => Err(self.write_failed(&key, &resource, None, error).await),
        }
    }

    async fn update(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        let config = self.inner.registry.prepare(config)?;
        if !self.serves(&config.meta.namespace) {
            return Err(self.outside(&config));
        }
        let key = config.key();
        let Some(expected) = config.meta.resource_version.clone() else {
            // Kubernetes refuses unconditional updates of custom objects
            // (422); say what the caller needs instead.
            return Err(match self.get(&key).await? {
                Some(current) => StoreError::Conflict {
                    key,
                    expected: None,
                    actual: current.meta.resource_version.clone().unwrap_or_default(),
                },
                None => StoreError::NotFound { key },
            });
        };
        let (schema, resource, api) = self.api(&key.kind, Some(&key.namespace))?;
        if schema.has_transition_rules() {
            // The API server checks them too when the kind's CRD carries
            // them (the Gateway API's do); the object stored now is the
            // one the update replaces whenever the replace can succeed
            // (a status write in between changes no spec).
            if let Some(current) = self.get(&key).await? {
                schema.validate_update(&current, &config)?;
            }
        }
        let mut object = to_object(&config);
        // A few rounds at most: each retry follows a status write.
        for _ in 0..4 {
            match api.replace(&key.name, &PostParams::default(), &object).await {
                Ok(object) => return self.written(&schema, &object),
                Err(error) if is_conflict(&error) => {
                    let sent = object.metadata.resource_version.clone();
                    let version = self
                        .retry_version(&schema, &key, &expected, sent.as_deref())
                        .await?;
                    object.metadata.resource_version = Some(version);
                }
                Err(error) => return Err(self.write_failed(&key, &resource, Some(expected), error).await),
            }
        }
        Err(StoreError::unavailable(format!(
            "{key} kept changing (status writes) while being updated; try again"
        )))
    }

    async fn delete(&self, key: &ConfigKey, resource_version: Option<&str>) -> Result<(), StoreError> {
        let (schema, resource, api) = self.api(&key.kind, Some(&key.namespace))?;
        if !self.serves(&key.namespace) {
            return Err(StoreError::NotFound { key: key.clone() });
        }
        let mut precondition = resource_version.map(str::to_string);
        for _ in 0..4 {
            let mut params = DeleteParams::default();
            if let Some(version) = &precondition {
                params = params.preconditions(Preconditions {
                    resource_version: Some(version.clone()),
                    uid: None,
                });
            }
            match api.delete(&key.name, &params).await {
                Ok(either) => {
                    if let Some(object) = either.left() {
                        self.written(&schema, &object)?;
                    }
                    return Ok(());
                }
                Err(error) if is_conflict(&error) && resource_version.is_some() => {
                    let expected = resource_version.unwrap_or_default();
                    let version = self
                        .retry_version(&schema, key, expected, precondition.as_deref())
                        .await?;
                    precondition = Some(version);
                }
                Err(error) => {
                    return Err(self
                        .write_failed(key, &resource, resource_version.map(str::to_string), error)
                        .await);
                }
            }
        }
        Err(StoreError::unavailable(format!(
            "{key} kept changing (status writes) while being deleted; try again"
        )))
    }

    fn keeps_status(&self) -> bool {
        true
    }

    async fn update_status(
        &self,
        key: &ConfigKey,
        observed_version: &str,
        status: ConfigStatus,
    ) -> Result<(), StoreError> {
        let (schema, resource, api) = self.api(&key.kind, Some(&key.namespace))?;
        if !self.serves(&key.namespace) {
            return Err(StoreError::NotFound { key: key.clone() });
        }
        let Some(current) = self.raw(key).await? else {
            return Err(StoreError::NotFound { key: key.clone() });
        };
        let config = to_config(&schema, &current).map_err(StoreError::unavailable)?;
        let actual = config.meta.resource_version.clone().unwrap_or_default();
        if actual != observed_version {
            return Err(StoreError::Conflict {
                key: key.clone(),
                expected: Some(observed_version.to_string()),
                actual,
            });
        }
        let raw_version = current.metadata.resource_version.clone().unwrap_or_default();
        let generation = current.metadata.generation.unwrap_or(1);
        let mut status = status;
        // What pilot reads back is the version the caller observed.
        status.observed_version = observed_version.to_string();
        let digest = convert::metadata_digest(&current.metadata);
        let body = convert::status_object(&schema, key, &raw_version, generation, &digest, &status);
        match api.replace_status(&key.name, &PostParams::default(), &body).await {
            Ok(object) => self.written(&schema, &object).map(|_| ()),
            // Written in between: the next round sees what changed.
            Err(error) if is_conflict(&error) => Err(StoreError::Conflict {
                key: key.clone(),
                expected: Some(observed_version.to_string()),
                actual: raw_version,
            }),
            Err(error) => Err(self.write_failed(key, &resource, None, error).await),
        }
    }
}

/// A 409 Conflict (not AlreadyExists).
fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409 && status.reason != "AlreadyExists")
}

#[async_trait]
impl ConfigWatch for KubeConfigStore {
    async fn snapshot(&self, kind: &str) -> Result<Snapshot, StoreError> {
        let (items, revision) = self.list_at(kind, None).await?;
        Ok(Snapshot::new(revision, items))
    }

    async fn watch(&self, kind: &str, after: Revision) -> Result<WatchStream, StoreError> {
        let (schema, resource, api) = self.api(kind, None)?;
        crate::watch::watch(schema, resource, api, after).await
    }

    async fn current_revision(&self) -> Result<Revision, StoreError> {
        Ok(self.inner.written.load(Ordering::Relaxed))
    }
}
