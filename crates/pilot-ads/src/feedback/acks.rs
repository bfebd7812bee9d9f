//! What each connected proxy was sent, ACKed and NACKed, and the server's
//! counters (responses and NACKs by type, streams ended by reason). Every
//! record is made here, through [`Feedback`], by both protocols alike.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::xds_type::XdsType;

use std::sync::Arc;

use pilot_model::{KindRevisions, ProxyDistribution, ProxyNack};

/// The xDS types, in the order they are pushed.
pub const TYPES: [&str; 4] = ["CDS", "EDS", "LDS", "RDS"];

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

/// A NACK: the version a proxy rejected and what it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nack {
    /// The rejected version.
    pub version: String,
    /// Envoy's error message.
    pub message: String,
}

/// One type's state for one proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeStatus {
    /// The last version sent.
    pub sent: Option<String>,
    /// The last version the proxy ACKed: the version of the response whose
    /// nonce the ACK carries (what the proxy applied), for both protocols.
    pub acked: Option<String>,
    /// The last NACK, if the proxy rejected something since connecting.
    pub nack: Option<Nack>,
}

impl TypeStatus {
    /// True when the proxy has ACKed what it was last sent.
    pub fn synced(&self) -> bool {
        self.sent.is_some() && self.sent == self.acked
    }
}

/// A connected proxy's feedback, per type (`CDS`, `EDS`, `LDS`, `RDS`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyStatus {
    /// The proxy's node id.
    pub node_id: String,
    /// True for an incremental (delta) stream, false for state of the world.
    pub incremental: bool,
    /// Per type.
    pub types: BTreeMap<&'static str, TypeStatus>,
    /// The last push whose configuration the stream has taken (and sent
    /// whatever it changed); `None` before the first.
    pub push: Option<u64>,
}

impl ProxyStatus {
    /// The last push the proxy has all of: the stream's push when every
    /// type it was sent is ACKed (and it has at least clusters and
    /// listeners), else the push before the oldest one it has not ACKed.
    pub fn acked_push(&self) -> Option<u64> {
        // An Envoy asks for clusters, then listeners (a gRPC client for
        // listeners first): until it has ACKed listeners (and clusters,
        // once asked for) it has not got its configuration.
        let acked = |t: &str| self.types.get(t).is_some_and(|s| s.acked.is_some());
        if !acked("LDS") || (self.types.contains_key("CDS") && !acked("CDS")) {
            return None;
        }
        let oldest_unacked = self
            .types
            .values()
            .filter(|t| !t.synced())
            .filter_map(|t| t.sent.as_deref()?.parse::<u64>().ok())
            .min();
        match oldest_unacked {
            Some(version) => version.checked_sub(1).filter(|v| *v > 0),
            None => self.push,
        }
    }

    /// The proxy's current rejection: a type whose last response it
    /// NACKed, with the push that response belonged to.
    pub fn current_nack(&self) -> Option<(&'static str, u64, &Nack)> {
        self.types.iter().find_map(|(short, t)| {
            let nack = t.nack.as_ref()?;
            (t.sent.as_deref() == Some(nack.version.as_str()))
                .then(|| Some((*short, nack.version.parse().ok()?, nack)))?
        })
    }

    /// This record in store revisions, given which revision each push was
    /// built from (see [`PushRevisions`]).
    pub fn distribution(&self, revisions: &PushRevisions) -> ProxyDistribution {
        ProxyDistribution {
            node_id: self.node_id.clone(),
            acked: self.acked_push().and_then(|p| revisions.revision(p)),
            nack: self.current_nack().and_then(|(short, push, nack)| {
                Some(ProxyNack {
                    revisions: revisions.revision(push)?,
                    type_: short.to_string(),
                    message: nack.message.clone(),
                })
            }),
        }
    }
}

/// The store revision each recent push was built from (pushes are
/// numbered by the server; revisions are the store's, comparable across
/// replicas). Bounded: the oldest pushes are forgotten.
#[derive(Debug, Default)]
pub struct PushRevisions(BTreeMap<u64, Arc<KindRevisions>>);

impl PushRevisions {
    /// Pushes remembered.
    pub const CAPACITY: usize = 4096;

    /// Records that push `version` was built from `revision`.
    pub fn record(&mut self, version: u64, revision: Arc<KindRevisions>) {
        self.0.insert(version, revision);
        while self.0.len() > Self::CAPACITY {
            self.0.pop_first();
        }
    }

    /// The revision push `version` was built from: that of the latest
    /// push at or before it (a proxy holding push N holds what every push
    /// up to N carried). `None` for a push older than what is kept.
    pub fn revision(&self, version: u64) -> Option<KindRevisions> {
        self.0.range(..=version).next_back().map(|(_, r)| (**r).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushed_kinds_are_the_istio_routing_kinds() {
        use pilot_model::ConfigKind;
        use pilot_model::istio::{DestinationPolicy, EgressRule, IngressRule, RouteRule};
        assert_eq!(
            super::super::PUSHED_KINDS,
            [
                RouteRule::KIND,
                DestinationPolicy::KIND,
                EgressRule::KIND,
                IngressRule::KIND
            ]
        );
    }

    /// A type: its name, then the versions sent, ACKed and NACKed.
    type Row<'a> = (&'static str, Option<&'a str>, Option<&'a str>, Option<&'a str>);

    fn proxy(types: &[Row<'_>], push: u64) -> ProxyStatus {
        ProxyStatus {
            node_id: "n".into(),
            incremental: false,
            push: Some(push),
            types: types
                .iter()
                .map(|(t, sent, acked, nack)| {
                    let status = TypeStatus {
                        sent: sent.map(str::to_string),
                        acked: acked.map(str::to_string),
                        nack: nack.map(|v| Nack {
                            version: v.to_string(),
                            message: "bad".into(),
                        }),
                    };
                    (*t, status)
                })
                .collect(),
        }
    }

    #[test]
    fn a_synced_proxy_has_its_latest_push_and_a_pending_one_the_push_before() {
        let synced = proxy(
            &[
                ("CDS", Some("3"), Some("3"), None),
                ("LDS", Some("5"), Some("5"), None),
            ],
            7,
        );
        assert_eq!(synced.acked_push(), Some(7));
        let pending = proxy(
            &[
                ("CDS", Some("3"), Some("3"), None),
                ("LDS", Some("6"), Some("5"), None),
            ],
            7,
        );
        assert_eq!(pending.acked_push(), Some(5));
        assert_eq!(pending.current_nack(), None);
        let nacked = proxy(
            &[
                ("CDS", Some("3"), Some("3"), None),
                ("LDS", Some("6"), Some("5"), Some("6")),
            ],
            7,
        );
        assert_eq!(nacked.acked_push(), Some(5));
        assert_eq!(nacked.current_nack().map(|(t, p, _)| (t, p)), Some(("LDS", 6)));
        // An old NACK, ACKed since, is not current.
        let recovered = proxy(
            &[
                ("CDS", Some("3"), Some("3"), None),
                ("LDS", Some("8"), Some("8"), Some("6")),
            ],
            8,
        );
        assert_eq!(recovered.current_nack(), None);
        // Clusters ACKed, listeners not asked for yet or not ACKed yet:
        // nothing complete.
        let starting = proxy(&[("CDS", Some("3"), Some("3"), None)], 3);
        assert_eq!(starting.acked_push(), None);
        let starting = proxy(
            &[
                ("CDS", Some("3"), Some("3"), None),
                ("LDS", Some("3"), None, None),
            ],
            3,
        );
        assert_eq!(starting.acked_push(), None);
    }

    #[test]
    fn push_revisions_map_a_push_to_the_latest_recorded_at_or_before_it() {
        let at = |r| -> KindRevisions { [("RouteRule".to_string(), r)].into_iter().collect() };
        let mut revisions = PushRevisions::default();
        revisions.record(2, Arc::new(at(10)));
        revisions.record(5, Arc::new(at(40)));
        assert_eq!(revisions.revision(1), None);
        assert_eq!(revisions.revision(4), Some(at(10)));
        assert_eq!(revisions.revision(9), Some(at(40)));
        let status = proxy(
            &[
                ("CDS", Some("5"), Some("2"), Some("5")),
                ("LDS", Some("2"), Some("2"), None),
            ],
            5,
        );
        let record = status.distribution(&revisions);
        assert_eq!(record.acked, Some(at(10)));
        assert_eq!(
            record.nack.map(|n| (n.revisions, n.type_)),
            Some((at(40), "CDS".to_string()))
        );
    }
}

/// Why streams ended, since the server started (refusals are counted
/// apart, in [`RefusedStreams`](super::RefusedStreams)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamEnds {
    /// The proxy ended its side of the stream (a clean close).
    pub proxy_closed: u64,
    /// The proxy's side failed: the connection was reset or closed, or an
    /// HTTP/2 keepalive went unanswered.
    pub transport_error: u64,
    /// A request that was not a valid ADS request after the first.
    pub bad_request: u64,
    /// The response body was dropped before the stream ended (the
    /// connection went away while a response waited to be written).
    pub response_dropped: u64,
    /// The server shut down ([`XdsServer::close`](super::XdsServer::close)).
    pub server_closed: u64,
    /// The stream reached the maximum connection age and was told to
    /// reconnect.
    pub max_age: u64,
}

/// Why one stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndReason {
    ProxyClosed,
    TransportError,
    BadRequest,
    ResponseDropped,
    ServerClosed,
    MaxAge,
}

/// Every connected proxy's feedback and the server's counters.
#[derive(Default)]
pub(crate) struct Feedback {
    proxies: Mutex<BTreeMap<u64, ProxyStatus>>,
    /// NACKs received since the server started.
    nacks: AtomicU64,
    /// NACKs received, by type.
    rejects: TypeCounters,
    /// Responses handed to streams, by type.
    sent: TypeCounters,
    ends: [AtomicU64; 6],
}

impl Feedback {
    fn update(&self, id: u64, t: XdsType, f: impl FnOnce(&mut TypeStatus)) {
        let mut all = self.proxies.lock().unwrap_or_else(|p| p.into_inner());
        // A stream records only between its register and unregister.
        if let Some(proxy) = all.get_mut(&id) {
            f(proxy.types.entry(t.short()).or_default());
        }
    }

    /// A newly connected proxy, with no feedback yet.
    pub(crate) fn register(&self, id: u64, node_id: String, incremental: bool) {
        tracing::info!(node = %node_id, "proxy connected");
        self.proxies.lock().unwrap_or_else(|p| p.into_inner()).insert(
            id,
            ProxyStatus {
                node_id,
                incremental,
                types: BTreeMap::new(),
                push: None,
            },
        );
    }

    /// The stream has taken push `version` (and sent whatever it changed).
    pub(crate) fn taken(&self, id: u64, version: u64) {
        if let Some(proxy) = self
            .proxies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&id)
        {
            proxy.push = Some(version);
        }
    }

    /// Forgets a disconnected proxy, counting why its stream ended.
    pub(crate) fn unregister(&self, id: u64, reason: EndReason) {
        let gone = self.proxies.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        if let Some(gone) = gone {
            tracing::info!(node = %gone.node_id, ?reason, "proxy disconnected");
        }
        self.ends[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// `version` of `t` was handed to the stream.
    pub(crate) fn sent(&self, id: u64, t: XdsType, version: &str) {
        self.sent.add(t);
        self.update(id, t, |s| s.sent = Some(version.to_string()));
    }

    /// The proxy ACKed the response of `t` at `version`.
    pub(crate) fn acked(&self, id: u64, t: XdsType, version: &str) {
        self.update(id, t, |s| s.acked = Some(version.to_string()));
    }

    /// The proxy rejected the response of `t` at `version`.
    pub(crate) fn nacked(&self, id: u64, t: XdsType, version: &str, message: &str) {
        self.nacks.fetch_add(1, Ordering::Relaxed);
        self.rejects.add(t);
        self.update(id, t, |s| {
            s.nack = Some(Nack {
                version: version.to_string(),
                message: message.to_string(),
            })
        });
    }

    /// Every connected proxy's feedback.
    pub(crate) fn proxies(&self) -> Vec<ProxyStatus> {
        self.proxies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
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
        }
    }
}

#[cfg(test)]
mod feedback_tests {
    use super::*;

    #[test]
    fn records_only_registered_streams_and_counts_ends() {
        let feedback = Feedback::default();
        feedback.sent(7, XdsType::Cluster, "1");
        assert!(feedback.proxies().is_empty());
        feedback.register(7, "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local".into(), false);
        feedback.sent(7, XdsType::Cluster, "2");
        feedback.nacked(7, XdsType::Cluster, "2", "bad cluster");
        feedback.acked(7, XdsType::Route, "2");
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
}
