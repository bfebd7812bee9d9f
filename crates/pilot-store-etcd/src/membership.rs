//! Several pilot-discovery replicas on one etcd: each replica's record and
//! the status writer's election ([`pilot_model::Membership`]).
//!
//! ```text
//! <prefix>/_replicas/<replica>          the replica's ReplicaRecord (JSON),
//!                                       under the replica's lease
//! <prefix>/_election/status-writer      the elected replica's name, under
//!                                       the same lease
//! ```
//!
//! Both keys live under one lease per replica (TTL `--replica-ttl`),
//! renewed every third of it: a replica killed with `kill -9` loses its
//! record and, if it was the writer, the election within the TTL, and
//! nobody has to delete anything. The names start with `_`, which no API
//! group does, so they are never taken for configuration objects: the
//! store reads and watches only `<prefix>/<group>/<kind>/` ranges.
//!
//! A record must stay readable at any size. etcd refuses a request over
//! `--max-request-bytes` (1.5 MiB by default) and its client a response
//! over 4 MiB, and a proxy's record is about 450 bytes of JSON (see the
//! test `a_record_of_a_typical_proxy_is_small`): one key holds about 3,000
//! proxies, and three such records overflow one read. So:
//!
//! - a record of up to [`INLINE_RECORD_BYTES`] is one key, whole, as every
//!   release wrote it (a replica of an older release reads it);
//! - a bigger one is **paged**: the proxies go to
//!   `<prefix>/_replica_pages/<replica>/<count>/<page>` (a proxy's page is a
//!   hash of its node id modulo the page count, so a proxy stays on its
//!   page while others come and go), each page about [`PAGE_BYTES`] and
//!   never over [`MAX_RECORD_BYTES`], all under the replica's lease; the
//!   record key holds the rest of the record and the page count
//!   (`proxyPages`). A publish writes only the pages that changed since
//!   the last one, then the record; the pages of an older count are
//!   deleted after the record stops naming them.
//! - `members` reads the records in bounded chunks at one revision, then
//!   lists each paged record's pages (keys only) and fetches the pages
//!   whose revision it has not parsed already: a replica that reads its
//!   peers every second re-reads only what changed.
//!
//! A reader never sees a proxy twice in one replica's record: a page key
//! names its page count, and the record names the count whose pages are
//! all written.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, DeleteOptions, GetOptions, KeyValue, PutOptions, Txn, TxnOp, TxnOpResponse,
};
use pilot_model::{ConnectedProxy, Membership, ReplicaRecord, StoreError};
use serde::{Deserialize, Serialize};

use crate::EtcdConfigStore;
use crate::error::unavailable_etcd;
use crate::status_lease::StatusLease;

/// The largest page, and the largest write of pages in one request
/// (etcd's default request limit, 1.5 MiB, less room for the keys and the
/// request's framing).
pub const MAX_RECORD_BYTES: usize = 1_500_000;

/// The largest record kept whole in one key (about 550 proxies); bigger
/// ones are paged.
pub const INLINE_RECORD_BYTES: usize = 256 * 1024;

/// The size a page of proxies is aimed at.
pub const PAGE_BYTES: usize = 256 * 1024;

/// The records read per request (each at most [`INLINE_RECORD_BYTES`] and
/// change when whole): well under the client's 4 MiB response limit.
const RECORDS_PER_READ: i64 = 8;

/// The most operations one publish request carries (etcd's default
/// `--max-txn-ops` is 128).
const OPS_PER_TXN: usize = 64;

/// What a paged record adds to the record key's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProxyPages {
    /// The page count: the pages are `<count>/<0..count>`.
    count: usize,
    /// The proxies on all pages.
    proxies: usize,
}

/// The record key's JSON: a [`ReplicaRecord`], with `proxyPages` when its
/// proxies are paged.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PagedField {
    #[serde(default)]
    proxy_pages: Option<ProxyPages>,
}

/// What this replica last published, so the next publish writes only what
/// changed: the lease it wrote under, the page count (0: inline) and each
/// page's bytes.
#[derive(Default)]
struct Published {
    lease: i64,
    count: usize,
    pages: Vec<Vec<u8>>,
}

/// A page read by `members`, at the revision it was last changed.
type PageCache = HashMap<Vec<u8>, (i64, Arc<Vec<ConnectedProxy>>)>;

/// The replicas of one control plane on one etcd: records under
/// `<prefix>/_replicas/`, the status writer at
/// `<prefix>/_election/status-writer`.
pub struct EtcdMembership {
    client: Client,
    replica: String,
    ttl: Duration,
    replicas_prefix: String,
    record_key: String,
    /// `<prefix>/_replica_pages/`.
    pages_root: String,
    election_key: String,
    lease: StatusLease,
    published: Mutex<Published>,
    read: Mutex<PageCache>,
}

impl EtcdMembership {
    /// The membership of replica `replica` on `store`'s etcd and prefix,
    /// with records living `ttl` (whole seconds, at least 1) after the last
    /// renewal.
    pub fn new(store: &EtcdConfigStore, replica: impl Into<String>, ttl: Duration) -> Self {
        let prefix = store.layout().prefix().to_string();
        Self::with_client(store.client(), &prefix, replica, ttl)
    }

    /// The same on an existing client and prefix.
    pub fn with_client(client: Client, prefix: &str, replica: impl Into<String>, ttl: Duration) -> Self {
        let prefix = prefix.trim_end_matches('/');
        let replica = replica.into();
        let seconds = i64::try_from(ttl.as_secs().max(1)).unwrap_or(i64::MAX);
        EtcdMembership {
            lease: StatusLease::with_ttl(client.clone(), seconds),
            client,
            ttl: Duration::from_secs(seconds.unsigned_abs()),
            replicas_prefix: format!("{prefix}/_replicas/"),
            record_key: format!("{prefix}/_replicas/{replica}"),
            pages_root: format!("{prefix}/_replica_pages/"),
            election_key: format!("{prefix}/_election/status-writer"),
            replica,
            published: Mutex::new(Published::default()),
            read: Mutex::new(HashMap::new()),
        }
    }

    /// `<prefix>/_replica_pages/<replica>/`: every page set of `replica`.
    fn pages_of(&self, replica: &str) -> String {
        format!("{}{replica}/", self.pages_root)
    }

    /// Runs `txn` under lease `lease`; a lease etcd no longer knows is
    /// forgotten, so the next call takes a new one.
    async fn txn(&self, lease: i64, txn: Txn) -> Result<etcd_client::TxnResponse, StoreError> {
        let mut client = self.client.clone();
        match client.txn(txn).await {
            Ok(response) => Ok(response),
            Err(error) => {
                if error.to_string().contains("lease not found") {
                    self.lease.lost(lease);
                }
                Err(unavailable_etcd(error))
            }
        }
    }

    /// Every key under `prefix` (values too unless `keys_only`), read in
    /// chunks of [`RECORDS_PER_READ`] at one revision (`at`, or the first
    /// chunk's): the revision and the keys, in key order.
    async fn range(
        &self,
        prefix: &str,
        at: Option<i64>,
        keys_only: bool,
    ) -> Result<(i64, Vec<KeyValue>), StoreError> {
        let end = prefix_end(prefix.as_bytes());
        let mut client = self.client.clone();
        let mut from = prefix.as_bytes().to_vec();
        let mut revision = at;
        let mut kvs = Vec::new();
        loop {
            let mut options = GetOptions::new()
                .with_range(end.clone())
                .with_limit(if keys_only { 0 } else { RECORDS_PER_READ });
            if keys_only {
                options = options.with_keys_only();
            }
            if let Some(revision) = revision {
                options = options.with_revision(revision);
            }
            let response = client
                .get(from.clone(), Some(options))
                .await
                .map_err(unavailable_etcd)?;
            let read_at = response.header().map_or(0, |h| h.revision());
            let revision = *revision.get_or_insert(read_at);
            let more = response.more();
            let mut response = response;
            kvs.extend(response.take_kvs());
            match kvs.last() {
                Some(last) if more => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => return Ok((revision, kvs)),
            }
        }
    }

    /// The proxies of `replica`'s paged record: every page of its current
    /// set at `revision`, from the cache when unchanged; the keys read are
    /// added to `seen`. Ordered by node id, as a record's proxies are.
    async fn read_pages(
        &self,
        replica: &str,
        pages: ProxyPages,
        revision: i64,
        seen: &mut Vec<Vec<u8>>,
    ) -> Result<Vec<ConnectedProxy>, StoreError> {
        let set = format!("{}{}/", self.pages_of(replica), pages.count);
        let (_, keys) = self.range(&set, Some(revision), true).await?;
        let mut proxies = Vec::with_capacity(pages.proxies);
        for key in keys {
            let cached = self
                .read
                .lock()
                .unwrap()
                .get(key.key())
                .filter(|(at, _)| *at == key.mod_revision())
                .map(|(_, page)| Arc::clone(page));
            let page = match cached {
                Some(page) => page,
                None => {
                    let mut client = self.client.clone();
                    let response = client
                        .get(key.key(), Some(GetOptions::new().with_revision(revision)))
                        .await
                        .map_err(unavailable_etcd)?;
                    let Some(kv) = response.kvs().first() else {
                        continue;
                    };
                    let page = match serde_json::from_slice::<Vec<ConnectedProxy>>(kv.value()) {
                        Ok(page) => Arc::new(page),
                        Err(error) => {
                            tracing::warn!(key = %String::from_utf8_lossy(kv.key()), %error, "a replica page that is not a list of proxies; ignored");
                            continue;
                        }
                    };
                    self.read
                        .lock()
                        .unwrap()
                        .insert(key.key().to_vec(), (kv.mod_revision(), Arc::clone(&page)));
                    page
                }
            };
            proxies.extend(page.iter().cloned());
            seen.push(key.key().to_vec());
        }
        proxies.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        Ok(proxies)
    }
}

/// The end of the range of keys starting with `prefix` (its last byte
/// below 0xff incremented, what follows dropped).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// A proxy's page among `count`: FNV-1a of its node id (stable across
/// processes and releases).
fn page_of(node_id: &str, count: usize) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in node_id.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash % count as u64) as usize
}

/// The page count for `total` bytes of proxies: the one published
/// (`current`) while its pages stay between a quarter and twice
/// [`PAGE_BYTES`] on average, else the power of two that aims at
/// [`PAGE_BYTES`].
fn page_count(current: usize, total: usize) -> usize {
    if current > 0 && total <= current * PAGE_BYTES * 2 && total * 4 >= current * PAGE_BYTES {
        return current;
    }
    total.div_ceil(PAGE_BYTES).next_power_of_two().max(2)
}

/// The page count and each page's JSON (a list of proxies) for `proxies`
/// (`encoded` is each one's JSON, `total` their sum); the count doubles
/// while a page would exceed [`MAX_RECORD_BYTES`].
fn paginate(
    proxies: &[ConnectedProxy],
    encoded: &[Vec<u8>],
    current: usize,
    total: usize,
) -> (usize, Vec<Vec<u8>>) {
    let mut count = page_count(current, total);
    loop {
        let mut pages: Vec<Vec<u8>> = vec![b"[".to_vec(); count];
        for (proxy, json) in proxies.iter().zip(encoded) {
            let page = &mut pages[page_of(&proxy.node_id, count)];
            if page.len() > 1 {
                page.push(b',');
            }
            page.extend_from_slice(json);
        }
        for page in &mut pages {
            page.push(b']');
        }
        if count >= proxies.len() || pages.iter().all(|p| p.len() <= MAX_RECORD_BYTES) {
            return (count, pages);
        }
        count *= 2;
    }
}

#[async_trait]
impl Membership for EtcdMembership {
    fn replica(&self) -> &str {
        &self.replica
    }

    fn ttl(&self) -> Duration {
        self.ttl
    }

    async fn publish(&self, record: &ReplicaRecord) -> Result<(), StoreError> {
        let encode_error =
            |e: serde_json::Error| StoreError::unavailable(format!("cannot encode the replica record: {e}"));
        let lease = self.lease.id().await?;
        let proxies = record
            .proxies
            .iter()
            .map(serde_json::to_vec)
            .collect::<Result<Vec<_>, _>>()
            .map_err(encode_error)?;
        let total: usize = proxies.iter().map(|p| p.len() + 1).sum();
        // What was published under this lease; nothing if the lease is new
        // (what an older one held is gone or going). Taken out, and put back
        // only once this publish succeeded: after a failure the next one
        // writes every page again.
        let before = std::mem::take(&mut *self.published.lock().unwrap());
        let before = if before.lease == lease {
            before
        } else {
            Published::default()
        };
        let put =
            |key: String, value: Vec<u8>| TxnOp::put(key, value, Some(PutOptions::new().with_lease(lease)));
        if total <= INLINE_RECORD_BYTES {
            let value = serde_json::to_vec(record).map_err(encode_error)?;
            let mut ops = vec![put(self.record_key.clone(), value)];
            if before.count > 0 {
                ops.push(TxnOp::delete(
                    self.pages_of(&self.replica),
                    Some(DeleteOptions::new().with_prefix()),
                ));
            }
            self.txn(lease, Txn::new().and_then(ops)).await?;
            *self.published.lock().unwrap() = Published {
                lease,
                count: 0,
                pages: Vec::new(),
            };
            return Ok(());
        }
        let (count, pages) = paginate(&record.proxies, &proxies, before.count, total);
        if let Some(page) = pages.iter().find(|p| p.len() > MAX_RECORD_BYTES) {
            return Err(StoreError::unavailable(format!(
                "replica {}'s record has a page of {} bytes, over etcd's request limit ({MAX_RECORD_BYTES} bytes)",
                self.replica,
                page.len()
            )));
        }
        let set = format!("{}{count}/", self.pages_of(&self.replica));
        // The changed pages, in requests of bounded size.
        let mut batch: Vec<TxnOp> = Vec::new();
        let mut bytes = 0;
        for (i, page) in pages.iter().enumerate() {
            if before.count == count && before.pages.get(i) == Some(page) {
                continue;
            }
            if !batch.is_empty() && (bytes + page.len() > MAX_RECORD_BYTES || batch.len() >= OPS_PER_TXN) {
                self.txn(lease, Txn::new().and_then(std::mem::take(&mut batch)))
                    .await?;
                bytes = 0;
            }
            bytes += page.len();
            batch.push(put(format!("{set}{i:05}"), page.clone()));
        }
        if !batch.is_empty() {
            self.txn(lease, Txn::new().and_then(batch)).await?;
        }
        // Then the record naming them, and the older set's pages gone.
        let mut header = serde_json::to_value(ReplicaRecord {
            replica: record.replica.clone(),
            rest_address: record.rest_address.clone(),
            xds_address: record.xds_address.clone(),
            proxies: Vec::new(),
            writer: record.writer,
            published: record.published,
        })
        .map_err(encode_error)?;
        header["proxyPages"] = serde_json::to_value(ProxyPages {
            count,
            proxies: record.proxies.len(),
        })
        .map_err(encode_error)?;
        let mut ops = vec![put(
            self.record_key.clone(),
            serde_json::to_vec(&header).map_err(encode_error)?,
        )];
        if before.count > 0 && before.count != count {
            ops.push(TxnOp::delete(
                format!("{}{}/", self.pages_of(&self.replica), before.count),
                Some(DeleteOptions::new().with_prefix()),
            ));
        }
        self.txn(lease, Txn::new().and_then(ops)).await?;
        *self.published.lock().unwrap() = Published { lease, count, pages };
        Ok(())
    }

    async fn members(&self) -> Result<Vec<ReplicaRecord>, StoreError> {
        let (revision, kvs) = self.range(&self.replicas_prefix, None, false).await?;
        let mut records = Vec::new();
        let mut seen: Vec<Vec<u8>> = Vec::new();
        for kv in &kvs {
            let parsed = serde_json::from_slice::<ReplicaRecord>(kv.value())
                .and_then(|record| Ok((record, serde_json::from_slice::<PagedField>(kv.value())?)));
            match parsed {
                Ok((
                    mut record,
                    PagedField {
                        proxy_pages: Some(pages),
                    },
                )) => {
                    record.proxies = self
                        .read_pages(&record.replica, pages, revision, &mut seen)
                        .await?;
                    records.push(record);
                }
                Ok((record, _)) => records.push(record),
                // Another version's record, or a hand-written key: named in
                // the log, left out of the sum.
                Err(error) => tracing::warn!(
                    key = %String::from_utf8_lossy(kv.key()),
                    %error,
                    "a replica record that is not a ReplicaRecord; ignored"
                ),
            }
        }
        // Pages no record names any more are forgotten.
        let seen: std::collections::HashSet<Vec<u8>> = seen.into_iter().collect();
        self.read.lock().unwrap().retain(|key, _| seen.contains(key));
        records.sort_by(|a, b| a.replica.cmp(&b.replica));
        Ok(records)
    }

    async fn campaign(&self) -> Result<bool, StoreError> {
        let lease = self.lease.id().await?;
        // Create the key if nobody holds it; otherwise read who does.
        let txn = Txn::new()
            .when([Compare::version(self.election_key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                self.election_key.clone(),
                self.replica.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )])
            .or_else([TxnOp::get(self.election_key.clone(), None)]);
        let response = self.txn(lease, txn).await?;
        if response.succeeded() {
            return Ok(true);
        }
        // Ours only if under this lease: a previous process of the same
        // name holds it until its own lease expires.
        Ok(response.op_responses().iter().any(|op| match op {
            TxnOpResponse::Get(get) => get
                .kvs()
                .iter()
                .any(|kv| kv.lease() == lease && kv.value() == self.replica.as_bytes()),
            _ => false,
        }))
    }

    async fn resign(&self) -> Result<(), StoreError> {
        // Revoking the lease deletes the record and, if ours, the election.
        self.lease.revoke().await
    }
}
