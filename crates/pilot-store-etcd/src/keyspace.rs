//! [`Keyspace`]: one store's keys in etcd, shared by the store and its
//! watches: the client, where each kind's objects and statuses live, how an
//! object is read at a revision, and the count of keys whose values are not
//! objects.

use std::sync::atomic::{AtomicU64, Ordering};

use etcd_client::{Client, GetOptions, Txn, TxnOp, TxnOpResponse};
use pilot_model::{ConfigKey, DynConfig, KindRegistry, StoreError};

use crate::codec::{Layout, decode, decode_status};
use crate::error::{self, Endpoints, EtcdError};

/// A store's connection and key layout.
pub(crate) struct Keyspace {
    pub(crate) client: Client,
    /// Named in error messages ("etcd at ... is unreachable").
    pub(crate) endpoints: Endpoints,
    pub(crate) layout: Layout,
    pub(crate) registry: KindRegistry,
    pub(crate) bad_objects: AtomicU64,
}

impl Keyspace {
    /// A failed read as a [`StoreError`] naming this store's etcd.
    pub(crate) fn unavailable(&self, error: etcd_client::Error) -> StoreError {
        error::unavailable(&self.endpoints, error)
    }

    /// This store's etcd, for error messages.
    pub(crate) fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    pub(crate) fn key(&self, key: &ConfigKey) -> Result<String, StoreError> {
        self.layout.key(&self.registry, key)
    }

    pub(crate) fn status_key(&self, key: &ConfigKey) -> Result<String, StoreError> {
        self.layout.status_key(&self.registry, key)
    }

    /// `key`'s object as of `revision` (0: now) with its status, or `None`.
    pub(crate) async fn get_at(
        &self,
        key: &ConfigKey,
        revision: i64,
    ) -> Result<Option<DynConfig>, StoreError> {
        let etcd_key = self.key(key)?;
        let options = || (revision > 0).then(|| GetOptions::new().with_revision(revision));
        let txn = Txn::new().and_then([
            TxnOp::get(etcd_key.clone(), options()),
            TxnOp::get(self.status_key(key)?, options()),
        ]);
        let mut client = self.client.clone();
        let response = client.txn(txn).await.map_err(|e| self.unavailable(e))?;
        let mut gets = response.op_responses().into_iter().filter_map(|r| match r {
            TxnOpResponse::Get(get) => Some(get),
            _ => None,
        });
        let (Some(object), status) = (gets.next(), gets.next()) else {
            return Err(StoreError::unavailable(
                "etcd answered a read without its results",
            ));
        };
        let Some(kv) = object.kvs().first() else {
            return Ok(None);
        };
        let mut config = match decode(key, kv.value(), kv.mod_revision()) {
            Ok(config) => config,
            Err(reason) => {
                self.report_bad(kv.key(), &reason);
                return Err(EtcdError::BadObject {
                    key: etcd_key,
                    reason,
                }
                .into());
            }
        };
        if let Some(kv) = status.as_ref().and_then(|s| s.kvs().first()) {
            match decode_status(kv.value()) {
                Ok(status) => config.meta.status = Some(status),
                Err(reason) => self.report_bad(kv.key(), &reason),
            }
        }
        Ok(Some(config))
    }

    pub(crate) fn report_bad(&self, key: &[u8], reason: &str) {
        self.bad_objects.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(key = %String::from_utf8_lossy(key), reason, "skipping a bad object in etcd");
    }
}
