//! [`EtcdConfigStore`]: configuration objects in etcd.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp, TxnOpResponse};
use pilot_model::{
    ConfigKey, ConfigStatus, ConfigStore, ConfigWatch, DynConfig, KindRegistry, Revision, Snapshot,
    StoreError, Undecodable, WatchStream, now_seconds,
};
use tokio::sync::watch;

use crate::EtcdOptions;
use crate::codec::{Layout, decode, decode_status, encode, encode_status, prefix_end};
use crate::error::{self, Endpoints};
use crate::keyspace::Keyspace;
use crate::status_lease::StatusLease;

/// A [`ConfigStore`] and [`ConfigWatch`] on etcd v3.
///
/// - Each object is one key, `<prefix>/<group>/<kind>/<namespace>/<name>`
///   (prefix default `/pilot/config`), whose value is the object's JSON
///   document without its resource version, so
///   `etcdctl get --prefix /pilot/config` shows readable objects.
/// - The resource version is the key's `mod_revision`. Create is a
///   transaction guarded by `create_revision == 0`; update and conditional
///   delete by `mod_revision == version`. A failed guard reads the key in the
///   same transaction and answers AlreadyExists, NotFound or Conflict with
///   the actual version: never a silent overwrite.
/// - `list` reads a kind (or one namespace of it) at one revision, in pages.
/// - `watch` follows a kind's prefix from a revision with progress
///   notifications; a compacted start reports [`StoreError::Compacted`] so the
///   Controller relists.
/// - A key under the prefix whose value is not a valid object (written
///   around pilot) is logged with its key, counted
///   ([`EtcdConfigStore::bad_objects`]) and skipped by `list`; `snapshot`
///   and `watch` report it as [`Undecodable`] (a Controller quarantines
///   it, and drops what it had cached of the key); `get` of it fails
///   naming the key.
/// - An object's distribution status is its own key beside it,
///   `<object key>/status` (JSON), put only if the object's `mod_revision`
///   is still the observed version, under this store's lease (granted on
///   the first status write and kept alive while the store lives: the
///   status of a replica that died goes away with its lease). A user's
///   create, update or delete removes the status key in the same
///   transaction (it was about the old version). So status never moves the
///   object's resource version. Reads join the two: `get` in one
///   transaction, lists at one revision, and the watch turns a status
///   key's change into a `Put` of the object (read at that revision) with
///   its new status.
///
/// Cloning gives another handle on the same connection.
#[derive(Clone)]
pub struct EtcdConfigStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// The connection and where keys live, shared with the watches.
    keys: Arc<Keyspace>,
    page_size: i64,
    /// Bumped by `current_revision`: every live watch then asks etcd for a
    /// progress notification, so caches catch up with writes to other kinds.
    nudge: watch::Sender<u64>,
    /// The lease status keys are written under.
    status_lease: StatusLease,
}

impl EtcdConfigStore {
    /// Connects to etcd with `options`, for the kinds in `registry`.
    pub async fn connect(options: &EtcdOptions, registry: KindRegistry) -> Result<Self, StoreError> {
        let client = options.connect().await?;
        Ok(Self::build(
            client,
            Endpoints::new(&options.endpoints),
            &options.prefix,
            registry,
            options.page_size,
        ))
    }

    /// A store on an existing client, under `prefix`.
    /// Its errors say "etcd" rather than "etcd at `<endpoints>`".
    pub fn with_client(client: Client, prefix: &str, registry: KindRegistry, page_size: i64) -> Self {
        Self::build(client, Endpoints::default(), prefix, registry, page_size)
    }

    fn build(
        client: Client,
        endpoints: Endpoints,
        prefix: &str,
        registry: KindRegistry,
        page_size: i64,
    ) -> Self {
        let client_for_lease = client.clone();
        EtcdConfigStore {
            inner: Arc::new(Inner {
                keys: Arc::new(Keyspace {
                    client,
                    endpoints,
                    layout: Layout::new(prefix),
                    registry,
                    bad_objects: AtomicU64::new(0),
                }),
                page_size: page_size.max(1),
                nudge: watch::channel(0).0,
                status_lease: StatusLease::new(client_for_lease),
            }),
        }
    }

    /// How many keys under the prefix held something that is not a valid
    /// object, each time one was read.
    pub fn bad_objects(&self) -> u64 {
        self.inner.keys.bad_objects.load(Ordering::Relaxed)
    }

    /// The etcd client, for operations pilot does not wrap.
    pub fn client(&self) -> Client {
        self.inner.keys.client.clone()
    }

    fn write_failed(&self, error: etcd_client::Error) -> StoreError {
        error::write_failed(&self.inner.keys.endpoints, error)
    }

    /// Where this store's keys live.
    pub(crate) fn layout(&self) -> &Layout {
        &self.inner.keys.layout
    }

    /// The lease this store writes status under (for tests and tools).
    pub async fn status_lease_id(&self) -> Result<i64, StoreError> {
        self.inner.status_lease.id().await
    }

    /// Every object under `prefix` at one revision, in pages; returns them
    /// with the keys whose values are not objects, and that revision.
    async fn range(&self, kind: &str, prefix: &str) -> Result<Snapshot, StoreError> {
        let kind_prefix = self
            .inner
            .keys
            .layout
            .kind_prefix(&self.inner.keys.registry, kind)?;
        let end = prefix_end(prefix);
        let mut client = self.inner.keys.client.clone();
        let mut items = Vec::new();
        let mut undecodable = Vec::new();
        let mut statuses = std::collections::HashMap::new();
        let mut start = prefix.as_bytes().to_vec();
        let mut revision = 0;
        loop {
            let mut options = GetOptions::new()
                .with_range(end.clone())
                .with_limit(self.inner.page_size);
            if revision > 0 {
                options = options.with_revision(revision);
            }
            let page = client
                .get(start.clone(), Some(options))
                .await
                .map_err(|e| self.inner.keys.unavailable(e))?;
            if revision == 0 {
                revision = page.header().map(|h| h.revision()).unwrap_or_default();
            }
            for kv in page.kvs() {
                if let Some(key) = self.inner.keys.layout.parse_status(&kind_prefix, kind, kv.key()) {
                    match decode_status(kv.value()) {
                        Ok(status) => {
                            statuses.insert(key, status);
                        }
                        Err(reason) => self.inner.keys.report_bad(kv.key(), &reason),
                    }
                    continue;
                }
                let Some(key) = self.inner.keys.layout.parse(&kind_prefix, kind, kv.key()) else {
                    self.inner.keys.report_bad(
                        kv.key(),
                        "the key is not <prefix>/<group>/<kind>/<namespace>/<name>",
                    );
                    continue;
                };
                match decode(&key, kv.value(), kv.mod_revision()) {
                    Ok(config) => items.push(config),
                    Err(reason) => {
                        self.inner.keys.report_bad(kv.key(), &reason);
                        undecodable.push(Undecodable {
                            key,
                            revision: u64::try_from(kv.mod_revision()).unwrap_or_default(),
                            reason,
                        });
                    }
                }
            }
            match page.kvs().last() {
                Some(last) if page.more() => {
                    start = last.key().to_vec();
                    start.push(0);
                }
                _ => break,
            }
        }
        let items = items
            .into_iter()
            .map(|mut config: DynConfig| {
                config.meta.status = statuses.remove(&config.key());
                Arc::new(config)
            })
            .collect();
        Ok(Snapshot {
            revision: u64::try_from(revision).unwrap_or_default(),
            items,
            undecodable,
        })
    }

    /// Reads `key` after a failed guard: NotFound, or Conflict with the
    /// actual version.
    fn guard_failed(key: &ConfigKey, expected: Option<String>, responses: Vec<TxnOpResponse>) -> StoreError {
        let actual = responses.into_iter().find_map(|r| match r {
            TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.mod_revision()),
            _ => None,
        });
        match actual {
            None => StoreError::NotFound { key: key.clone() },
            Some(actual) => StoreError::Conflict {
                key: key.clone(),
                expected,
                actual: actual.to_string(),
            },
        }
    }
}

#[async_trait]
impl ConfigStore for EtcdConfigStore {
    fn registry(&self) -> &KindRegistry {
        &self.inner.keys.registry
    }

    async fn get(&self, key: &ConfigKey) -> Result<Option<Arc<DynConfig>>, StoreError> {
        Ok(self.inner.keys.get_at(key, 0).await?.map(Arc::new))
    }

    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Arc<DynConfig>>, StoreError> {
        let prefix = self
            .inner
            .keys
            .layout
            .list_prefix(&self.inner.keys.registry, kind, namespace)?;
        Ok(self.range(kind, &prefix).await?.items)
    }

    async fn create(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        let mut config = self.inner.keys.registry.prepare(config)?;
        let key = config.key();
        let etcd_key = self.inner.keys.key(&key)?;
        config.meta.creation_timestamp = Some(now_seconds());
        config.meta.status = None;
        let txn = Txn::new()
            .when([Compare::create_revision(etcd_key.clone(), CompareOp::Equal, 0)])
            .and_then([
                TxnOp::put(etcd_key, encode(&config)?, None),
                TxnOp::delete(self.inner.keys.status_key(&key)?, None),
            ]);
        let mut client = self.inner.keys.client.clone();
        let response = client.txn(txn).await.map_err(|e| self.write_failed(e))?;
        if !response.succeeded() {
            return Err(StoreError::AlreadyExists { key });
        }
        let revision = response.header().map(|h| h.revision()).unwrap_or_default();
        config.meta.resource_version = Some(revision.to_string());
        Ok(Arc::new(config))
    }

    async fn update(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        let mut config = self.inner.keys.registry.prepare(config)?;
        let key = config.key();
        let etcd_key = self.inner.keys.key(&key)?;
        let expected = config.meta.resource_version.clone();
        // A version that is not a revision can never match: etcd answers
        // with the actual one below.
        let revision = expected
            .as_deref()
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(-1);
        let rules = self.inner.keys.registry.has_transition_rules(&key.kind);
        if (config.meta.creation_timestamp.is_none() || rules)
            && let Some(current) = self.get(&key).await?
        {
            // Keep the stored creation time; objects read from the store carry it.
            if config.meta.creation_timestamp.is_none() {
                config.meta.creation_timestamp = current.meta.creation_timestamp;
            }
            // The version the update replaces (the transaction below
            // writes only over it): what its kind's transition rules
            // compare with. Another version fails the transaction.
            if rules && current.meta.resource_version == expected {
                self.inner.keys.registry.check_update(&current, &config)?;
            }
        }
        let txn = Txn::new()
            .when([Compare::mod_revision(
                etcd_key.clone(),
                CompareOp::Equal,
                revision,
            )])
            .and_then([
                TxnOp::put(etcd_key.clone(), encode(&config)?, None),
                // The status was about the version this write replaces.
                TxnOp::delete(self.inner.keys.status_key(&key)?, None),
            ])
            .or_else([TxnOp::get(etcd_key, None)]);
        let mut client = self.inner.keys.client.clone();
        let response = client.txn(txn).await.map_err(|e| self.write_failed(e))?;
        if !response.succeeded() {
            return Err(Self::guard_failed(&key, expected, response.op_responses()));
        }
        let revision = response.header().map(|h| h.revision()).unwrap_or_default();
        config.meta.resource_version = Some(revision.to_string());
        config.meta.status = None;
        Ok(Arc::new(config))
    }

    async fn delete(&self, key: &ConfigKey, resource_version: Option<&str>) -> Result<(), StoreError> {
        let etcd_key = self.inner.keys.key(key)?;
        let guard = match resource_version {
            Some(version) => Compare::mod_revision(
                etcd_key.clone(),
                CompareOp::Equal,
                version.parse::<i64>().unwrap_or(-1),
            ),
            None => Compare::create_revision(etcd_key.clone(), CompareOp::Greater, 0),
        };
        let txn = Txn::new()
            .when([guard])
            .and_then([
                TxnOp::delete(etcd_key.clone(), None),
                TxnOp::delete(self.inner.keys.status_key(key)?, None),
            ])
            .or_else([TxnOp::get(etcd_key, None)]);
        let mut client = self.inner.keys.client.clone();
        let response = client.txn(txn).await.map_err(|e| self.write_failed(e))?;
        if !response.succeeded() {
            return Err(Self::guard_failed(
                key,
                resource_version.map(str::to_string),
                response.op_responses(),
            ));
        }
        Ok(())
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
        let etcd_key = self.inner.keys.key(key)?;
        let lease = self.inner.status_lease.id().await?;
        let txn = Txn::new()
            .when([Compare::mod_revision(
                etcd_key.clone(),
                CompareOp::Equal,
                observed_version.parse::<i64>().unwrap_or(-1),
            )])
            .and_then([TxnOp::put(
                self.inner.keys.status_key(key)?,
                encode_status(&status),
                Some(etcd_client::PutOptions::new().with_lease(lease)),
            )])
            .or_else([TxnOp::get(etcd_key, None)]);
        let mut client = self.inner.keys.client.clone();
        let response = match client.txn(txn).await {
            Ok(response) => response,
            Err(error) => {
                if error.to_string().contains("lease not found") {
                    self.inner.status_lease.lost(lease);
                }
                return Err(self.write_failed(error));
            }
        };
        if !response.succeeded() {
            return Err(Self::guard_failed(
                key,
                Some(observed_version.to_string()),
                response.op_responses(),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl ConfigWatch for EtcdConfigStore {
    async fn snapshot(&self, kind: &str) -> Result<Snapshot, StoreError> {
        let prefix = self
            .inner
            .keys
            .layout
            .kind_prefix(&self.inner.keys.registry, kind)?;
        self.range(kind, &prefix).await
    }

    async fn watch(&self, kind: &str, after: Revision) -> Result<WatchStream, StoreError> {
        let prefix = self
            .inner
            .keys
            .layout
            .kind_prefix(&self.inner.keys.registry, kind)?;
        crate::watch::watch(
            Arc::clone(&self.inner.keys),
            self.inner.keys.client.clone(),
            kind,
            prefix,
            after,
            self.inner.nudge.subscribe(),
        )
        .await
    }

    async fn current_revision(&self) -> Result<Revision, StoreError> {
        let mut client = self.inner.keys.client.clone();
        let response = client
            .get("\0", Some(GetOptions::new().with_count_only()))
            .await
            .map_err(|e| self.inner.keys.unavailable(e))?;
        let revision = response.header().map(|h| h.revision()).unwrap_or_default();
        self.inner.nudge.send_modify(|n| *n += 1);
        Ok(u64::try_from(revision).unwrap_or_default())
    }
}
