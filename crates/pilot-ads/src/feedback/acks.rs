//! What each connected proxy was sent, ACKed and NACKed, per xDS type,
//! and what that means in pushes and in store revisions.

use std::collections::BTreeMap;

use pilot_model::{ConnectedProxy, ProxyDistribution, ProxyNack, WithheldObject};

use crate::xds_type::TYPES;

use super::push_revisions::PushRevisions;

/// A NACK: the version a proxy rejected and what it said.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Nack {
    /// The rejected version.
    pub version: String,
    /// Envoy's error message.
    pub message: String,
}

impl Nack {
    /// A NACK of `version` saying `message`.
    pub fn new(version: impl Into<String>, message: impl Into<String>) -> Self {
        Nack {
            version: version.into(),
            message: message.into(),
        }
    }
}

/// One type's state for one proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TypeStatus {
    /// The last version sent.
    pub sent: Option<String>,
    /// The last version the proxy ACKed: the version of the response whose
    /// nonce the ACK carries (what the proxy applied), for both protocols.
    pub acked: Option<String>,
    /// The last NACK, if the proxy rejected something since connecting.
    pub nack: Option<Nack>,
    /// The first version sent since the proxy last had this type in full
    /// (`None` while synced, or when not known): what it has of this type
    /// is from the pushes before it.
    pub pending_since: Option<String>,
}

impl TypeStatus {
    /// True when the proxy has ACKed what it was last sent.
    pub fn synced(&self) -> bool {
        self.sent.is_some() && self.sent == self.acked
    }

    /// Records that `version` was sent.
    pub fn record_sent(&mut self, version: &str) {
        if self.sent.is_none() || self.synced() {
            self.pending_since = Some(version.to_string());
        }
        self.sent = Some(version.to_string());
    }

    /// Records that the proxy ACKed `version`.
    pub fn record_acked(&mut self, version: &str) {
        self.acked = Some(version.to_string());
        // Synced, or an older response ACKed: which of the later ones came
        // first is not known.
        self.pending_since = None;
    }

    /// The first push not ACKed: the first sent since the proxy last had
    /// the type, or else the last sent.
    fn first_unacked(&self) -> Option<u64> {
        self.pending_since
            .as_deref()
            .or(self.sent.as_deref())?
            .parse()
            .ok()
    }
}

/// A connected proxy's feedback, per type (`CDS`, `EDS`, `LDS`, `RDS`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProxyStatus {
    /// The proxy's node id.
    pub node_id: String,
    /// The node it runs on, when it said (a ztunnel's `NODE_NAME`).
    pub node_name: Option<String>,
    /// True for an incremental (delta) stream, false for state of the world.
    pub incremental: bool,
    /// Per type.
    pub types: BTreeMap<&'static str, TypeStatus>,
    /// The last push whose configuration the stream has taken (and sent
    /// whatever it changed); `None` before the first.
    pub push: Option<u64>,
    /// The objects left out of the proxy's configuration because it
    /// rejected them, as of that push.
    pub withheld: Vec<WithheldObject>,
}

impl ProxyStatus {
    /// The types to show for it: those [`types_of`](crate::types_of) its
    /// node id, less scopes (SRDS) when none are on record (an edge proxy
    /// none of whose listeners takes its routes from scopes never asks
    /// for them).
    pub fn types_shown(&self) -> Vec<&'static str> {
        crate::types_of(&self.node_id)
            .iter()
            .copied()
            .filter(|t| *t != "SRDS" || self.types.contains_key(t))
            .collect()
    }

    /// A proxy connected to another replica, as that replica published it
    /// (its [`ConnectedProxy`] record), in the shape of this replica's own.
    /// Types this server does not know are left out; the push is unknown.
    pub fn from_record(record: ConnectedProxy) -> Self {
        ProxyStatus {
            types: record
                .types
                .into_iter()
                .filter_map(|(short, t)| {
                    let short = TYPES.iter().find(|name| **name == short)?;
                    Some((
                        *short,
                        TypeStatus {
                            sent: t.sent,
                            acked: t.acked,
                            nack: t.nack.map(|n| Nack {
                                version: n.version,
                                message: n.message,
                            }),
                            pending_since: None,
                        },
                    ))
                })
                .collect(),
            withheld: record.distribution.withheld,
            node_name: record.node_name,
            node_id: record.node_id,
            incremental: record.incremental,
            push: None,
        }
    }

    /// The last push the proxy has all of: the stream's push when every
    /// type it was sent is ACKed (and it has at least clusters and
    /// listeners; a ztunnel, addresses and authorizations), else the push
    /// before the oldest one it has not ACKed.
    pub fn acked_push(&self) -> Option<u64> {
        // An Envoy asks for clusters, then listeners (a gRPC client for
        // listeners first): until it has ACKed listeners (and clusters,
        // once asked for) it has not got its configuration.
        let acked = |t: &str| self.types.get(t).is_some_and(|s| s.acked.is_some());
        // A ztunnel asks for addresses and authorizations: it has its
        // configuration once it has ACKed both.
        let ztunnel = self.node_id.starts_with("ztunnel~");
        if ztunnel {
            if !acked("WDS") || !acked("WADS") {
                return None;
            }
        } else if !acked("LDS") || (self.types.contains_key("CDS") && !acked("CDS")) {
            return None;
        }
        let oldest_unacked = self
            .types
            .values()
            .filter(|t| !t.synced())
            .filter_map(TypeStatus::first_unacked)
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

    /// The first push of the current rejection's type the proxy has not
    /// taken since it last had that type (the push that brought what it
    /// refuses), if known.
    pub fn first_rejected_push(&self) -> Option<u64> {
        let (short, _, _) = self.current_nack()?;
        self.types.get(short)?.pending_since.as_deref()?.parse().ok()
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
                    first_revisions: self
                        .first_rejected_push()
                        .filter(|first| *first < push)
                        .and_then(|first| revisions.revision(first)),
                    type_: short.to_string(),
                    message: nack.message.clone(),
                })
            }),
            withheld: self.withheld.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use pilot_model::KindRevisions;

    use super::*;

    /// A type: its name, then the versions sent, ACKed and NACKed.
    type Row<'a> = (&'static str, Option<&'a str>, Option<&'a str>, Option<&'a str>);

    fn proxy(types: &[Row<'_>], push: u64) -> ProxyStatus {
        ProxyStatus {
            node_id: "n".into(),
            node_name: None,
            incremental: false,
            push: Some(push),
            withheld: Vec::new(),
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
                        pending_since: None,
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
    fn a_ztunnel_has_a_push_once_it_acked_addresses_and_authorizations() {
        let ztunnel = |types: &[Row<'_>]| ProxyStatus {
            node_id: "ztunnel~10.0.0.2~z.istio-system~istio-system.svc.cluster.local".into(),
            ..proxy(types, 4)
        };
        assert_eq!(ztunnel(&[("WDS", Some("4"), Some("4"), None)]).acked_push(), None);
        let synced = ztunnel(&[
            ("WDS", Some("4"), Some("4"), None),
            ("WADS", Some("2"), Some("2"), None),
        ]);
        assert_eq!(
            synced.acked_push(),
            Some(4),
            "no listeners asked for, none needed"
        );
        let nacked = ztunnel(&[
            ("WDS", Some("4"), Some("3"), Some("4")),
            ("WADS", Some("2"), Some("2"), None),
        ]);
        assert_eq!(nacked.current_nack().map(|(t, p, _)| (t, p)), Some(("WDS", 4)));
    }

    #[test]
    fn a_rejection_dates_from_the_first_push_refused_not_the_last() {
        use crate::xds_type::XdsType;
        let mut status = ProxyStatus {
            node_id: "n".into(),
            ..Default::default()
        };
        let mut send = |t: XdsType, version: &str, ack: bool| {
            let s = status.types.entry(t.short()).or_default();
            s.record_sent(version);
            if ack {
                s.record_acked(version);
            } else {
                s.nack = Some(Nack {
                    version: version.into(),
                    message: "bad regex".into(),
                });
            }
        };
        // Push 9 taken in full; push 10 brings a bad route, refused; push
        // 11 changes clusters only, taken; push 12 changes the same route
        // configuration (an innocent rule) and is refused again, since it
        // still holds the bad route.
        send(XdsType::Cluster, "9", true);
        send(XdsType::Listener, "9", true);
        send(XdsType::Route, "9", true);
        send(XdsType::Route, "10", false);
        send(XdsType::Cluster, "11", true);
        send(XdsType::Route, "12", false);
        status.push = Some(12);
        // The proxy has nothing of push 10 on: its routes are push 9's.
        assert_eq!(status.acked_push(), Some(9));
        assert_eq!(status.current_nack().map(|(t, p, _)| (t, p)), Some(("RDS", 12)));
        assert_eq!(status.first_rejected_push(), Some(10));
        let at = |r| -> KindRevisions { [("RouteRule".to_string(), r)].into_iter().collect() };
        let mut revisions = PushRevisions::default();
        for (push, revision) in [(9, 90), (10, 100), (11, 110), (12, 120)] {
            revisions.record(push, Arc::new(at(revision)));
        }
        let record = status.distribution(&revisions);
        assert_eq!(record.acked, Some(at(90)));
        let nack = record.nack.unwrap();
        assert_eq!((nack.revisions, nack.first_revisions), (at(120), Some(at(100))));
        // So the bad rule (revision 100) reads NACKED, the innocent one
        // (120) pending.
        let record = status.distribution(&revisions);
        let bad = pilot_model::distribution_status(
            "RouteRule",
            "100",
            std::slice::from_ref(&record),
            std::time::SystemTime::UNIX_EPOCH,
        );
        let innocent = pilot_model::distribution_status(
            "RouteRule",
            "120",
            &[record],
            std::time::SystemTime::UNIX_EPOCH,
        );
        assert_eq!(
            (bad.summary().as_str(), innocent.summary().as_str()),
            ("0/1 1 NACKED", "0/1")
        );
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
