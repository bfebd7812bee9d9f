//! Where every record of the feedback is made, by both protocols alike:
//! each connected proxy's ACK/NACK record, and the server's counters
//! (responses and NACKs by type, streams ended by reason).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64 as KeptVersion;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::acks::{Nack, ProxyStatus, TypeStatus};
use super::stream_ends::{EndReason, StreamEnds};
use crate::xds_type::{TYPES, XdsType};

/// A counter per xDS type (index in [`TYPES`]).
#[derive(Debug, Default)]
pub(crate) struct TypeCounters([AtomicU64; TYPES.len()]);

impl TypeCounters {
    /// Adds one for `t`.
    pub(crate) fn add(&self, t: XdsType) {
        self.0[t.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Every type with its count.
    pub(crate) fn get(&self) -> [(&'static str, u64); TYPES.len()] {
        std::array::from_fn(|i| (TYPES[i], self.0[i].load(Ordering::Relaxed)))
    }
}

/// A connected proxy's record, compact (one per connected proxy): the
/// versions are push numbers, as sessions send them, and become a
/// [`ProxyStatus`] when read.
struct Record {
    node_id: Box<str>,
    /// The node it runs on, when it said (a ztunnel).
    node_name: Option<Box<str>>,
    incremental: bool,
    /// By type ([`XdsType::index`]); `None` until something is recorded.
    types: [Option<TypeRecord>; TYPES.len()],
    /// The last push the stream has taken.
    push: Option<u64>,
    /// The objects left out of its configuration.
    withheld: Vec<pilot_model::WithheldObject>,
    /// While its stream is parked (`push/parked.rs`): the latest push that
    /// kept its class, which the stream has then taken too.
    kept: Option<Arc<KeptVersion>>,
}

/// One type's record: [`TypeStatus`] with numbers for versions.
#[derive(Default)]
struct TypeRecord {
    sent: Option<u64>,
    acked: Option<u64>,
    pending_since: Option<u64>,
    nack: Option<Box<(u64, Box<str>)>>,
}

impl TypeRecord {
    /// As [`TypeStatus::record_sent`].
    fn record_sent(&mut self, version: u64) {
        let synced = self.sent.is_some() && self.sent == self.acked;
        if self.sent.is_none() || synced {
            self.pending_since = Some(version);
        }
        self.sent = Some(version);
    }

    /// As [`TypeStatus::record_acked`].
    fn record_acked(&mut self, version: u64) {
        self.acked = Some(version);
        self.pending_since = None;
    }

    fn status(&self) -> TypeStatus {
        let text = |v: Option<u64>| v.map(|v| v.to_string());
        TypeStatus {
            sent: text(self.sent),
            acked: text(self.acked),
            nack: self
                .nack
                .as_ref()
                .map(|nack| Nack::new(nack.0.to_string(), &*nack.1)),
            pending_since: text(self.pending_since),
        }
    }
}

impl Record {
    fn status(&self) -> ProxyStatus {
        ProxyStatus {
            node_id: self.node_id.to_string(),
            node_name: self.node_name.as_deref().map(str::to_string),
            incremental: self.incremental,
            types: self
                .types
                .iter()
                .zip(TYPES)
                .filter_map(|(record, short)| Some((short, record.as_ref()?.status())))
                .collect(),
            push: self.push,
            withheld: self.withheld.clone(),
        }
    }
}

/// Every connected proxy's feedback and the server's counters.
#[derive(Default)]
pub(crate) struct Feedback {
    proxies: Mutex<BTreeMap<u64, Record>>,
    /// NACKs received since the server started.
    nacks: AtomicU64,
    /// NACKs received, by type.
    rejects: TypeCounters,
    /// Responses handed to streams, by type.
    sent: TypeCounters,
    ends: [AtomicU64; 7],
    /// Changes to the records so far: any of the methods below that
    /// changes them counts one.
    changes: AtomicU64,
}

impl Feedback {
    /// Changes to the records so far (a parked stream's kept version moves
    /// without one: that comes with a push).
    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    fn changed(&self) {
        self.changes.fetch_add(1, Ordering::Release);
    }

    fn update(&self, id: u64, t: XdsType, f: impl FnOnce(&mut TypeRecord)) {
        self.changed();
        let mut all = self.proxies.lock().unwrap_or_else(|p| p.into_inner());
        // A stream records only between its register and unregister.
        if let Some(proxy) = all.get_mut(&id) {
            f(proxy.types[t.index()].get_or_insert_with(TypeRecord::default));
        }
    }

    /// A newly connected proxy, with no feedback yet.
    pub(crate) fn register(&self, id: u64, node_id: String, incremental: bool) {
        self.changed();
        tracing::info!(node = %node_id, "proxy connected");
        self.proxies.lock().unwrap_or_else(|p| p.into_inner()).insert(
            id,
            Record {
                node_id: node_id.into_boxed_str(),
                node_name: None,
                incremental,
                types: Default::default(),
                push: None,
                withheld: Vec::new(),
                kept: None,
            },
        );
    }

    /// The stream has taken push `version` (and sent whatever it changed).
    pub(crate) fn taken(&self, id: u64, version: u64) {
        self.changed();
        if let Some(proxy) = self
            .proxies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&id)
        {
            proxy.push = Some(version);
            proxy.kept = None;
        }
    }

    /// The stream parked on its class: until it takes a push again, it is
    /// at the latest push that kept the class (`kept`).
    pub(crate) fn parked(&self, id: u64, kept: Arc<KeptVersion>) {
        self.changed();
        if let Some(proxy) = self
            .proxies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&id)
        {
            proxy.kept = Some(kept);
        }
    }

    /// The objects left out of the proxy's configuration (as of the push
    /// it takes next).
    pub(crate) fn withheld(&self, id: u64, withheld: Vec<pilot_model::WithheldObject>) {
        self.changed();
        if let Some(proxy) = self
            .proxies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&id)
        {
            proxy.withheld = withheld;
        }
    }

    /// Forgets a disconnected proxy, counting why its stream ended.
    pub(crate) fn unregister(&self, id: u64, reason: EndReason) {
        self.changed();
        let gone = self.proxies.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        if let Some(gone) = gone {
            tracing::info!(node = %gone.node_id, ?reason, "proxy disconnected");
        }
        self.ends[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The proxy of stream `id` runs on node `node` (a ztunnel says so).
    pub(crate) fn node(&self, id: u64, node: &str) {
        self.changed();
        if let Some(proxy) = self
            .proxies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&id)
        {
            proxy.node_name = Some(node.into());
        }
    }

    /// `version` (a push) of `t` was handed to the stream.
    pub(crate) fn sent(&self, id: u64, t: XdsType, version: u64) {
        self.sent.add(t);
        self.update(id, t, |s| s.record_sent(version));
    }

    /// The proxy ACKed the response of `t` at `version`.
    pub(crate) fn acked(&self, id: u64, t: XdsType, version: u64) {
        self.update(id, t, |s| s.record_acked(version));
    }

    /// The proxy rejected the response of `t` at `version`.
    pub(crate) fn nacked(&self, id: u64, t: XdsType, version: u64, message: &str) {
        self.nacks.fetch_add(1, Ordering::Relaxed);
        self.rejects.add(t);
        self.update(id, t, |s| s.nack = Some(Box::new((version, message.into()))));
    }

    /// Every connected proxy's feedback.
    pub(crate) fn proxies(&self) -> Vec<ProxyStatus> {
        self.proxies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .map(|proxy| {
                let mut status = proxy.status();
                if let Some(kept) = &proxy.kept {
                    let kept = kept.load(Ordering::Acquire);
                    status.push = Some(status.push.map_or(kept, |push| push.max(kept)));
                }
                status
            })
            .collect()
    }

    /// NACKs since the server started.
    pub(crate) fn nacks_total(&self) -> u64 {
        self.nacks.load(Ordering::Relaxed)
    }

    /// NACKs by type.
    pub(crate) fn nacks_by_type(&self) -> [(&'static str, u64); TYPES.len()] {
        self.rejects.get()
    }

    /// Responses sent by type.
    pub(crate) fn sent_by_type(&self) -> [(&'static str, u64); TYPES.len()] {
        self.sent.get()
    }

    /// Streams ended, by reason.
    pub(crate) fn stream_ends(&self) -> StreamEnds {
        let get = |reason: EndReason| self.ends[reason as usize].load(Ordering::Relaxed);
        StreamEnds {
            proxy_closed: get(EndReason::ProxyClosed),
            transport_error: get(EndReason::TransportError),
            bad_request: get(EndReason::BadRequest),
            response_dropped: get(EndReason::ResponseDropped),
            server_closed: get(EndReason::ServerClosed),
            max_age: get(EndReason::MaxAge),
            write_timeout: get(EndReason::WriteTimeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_only_registered_streams_and_counts_ends() {
        let feedback = Feedback::default();
        feedback.sent(7, XdsType::Cluster, 1);
        assert!(feedback.proxies().is_empty());
        feedback.register(7, "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local".into(), false);
        feedback.sent(7, XdsType::Cluster, 2);
        feedback.nacked(7, XdsType::Cluster, 2, "bad cluster");
        feedback.acked(7, XdsType::Route, 2);
        let status = &feedback.proxies()[0];
        assert!(!status.types["CDS"].synced());
        assert_eq!(status.types["CDS"].nack.as_ref().unwrap().message, "bad cluster");
        assert_eq!(status.types["RDS"].acked.as_deref(), Some("2"));
        assert_eq!(feedback.nacks_total(), 1);
        assert_eq!(feedback.sent_by_type()[0], ("CDS", 2));
        feedback.unregister(7, EndReason::MaxAge);
        assert!(feedback.proxies().is_empty());
        assert_eq!(feedback.stream_ends().max_age, 1);
    }

    #[test]
    fn a_parked_proxy_is_at_its_class_push_until_it_takes_one_itself() {
        let feedback = Feedback::default();
        feedback.register(8, "sidecar~10.0.0.2~a.ns~ns.svc.cluster.local".into(), false);
        feedback.taken(8, 3);
        let class = Arc::new(KeptVersion::new(3));
        feedback.parked(8, Arc::clone(&class));
        class.store(5, Ordering::Release);
        assert_eq!(feedback.proxies()[0].push, Some(5), "kept with its class");
        feedback.taken(8, 6);
        class.store(9, Ordering::Release);
        assert_eq!(
            feedback.proxies()[0].push,
            Some(6),
            "woken, no longer its class's"
        );
    }
}
