//! Distribution status: how far an object has reached the proxies that
//! should have it (Istio's `Reconciled` condition, "N/M proxies up to
//! date"), and the per-proxy records it is computed from.
//!
//! The records ([`ProxyDistribution`]) speak in store revisions, not in a
//! server's push numbers, so records from several pilot-discovery replicas
//! (each numbering its own pushes) can be put side by side: the status of
//! an object is [`distribution_status`] over the records of every live
//! replica's proxies.
//!
//! Replicas of two releases read each other's records and statuses during
//! a rolling upgrade: unknown fields are ignored, and fields added after a
//! record's first release are optional (`tests/records_across_versions.rs` checks both).

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::Revision;
use crate::conditions::{
    Condition, GatewayStatusAddress, ListenerStatus, PolicyAncestorStatus, RouteParentStatus,
    ValidationMessage,
};

/// Per kind, the store revision a push holds every write of that kind up
/// to (a Controller's cache catches up kind by kind).
pub type KindRevisions = BTreeMap<String, Revision>;

/// At most this many distinct NACK messages are kept in a status.
pub const MAX_NACK_MESSAGES: usize = 5;

/// A NACK message is cut to this many characters in a status.
pub const MAX_NACK_MESSAGE_LEN: usize = 512;

/// An object's distribution status, written back to the store beside the
/// object (the document's top-level `status`).
///
/// ```
/// use pilot_model::{ConfigStatus, ProxyDistribution, distribution_status};
/// let at = |revision| Some([("RouteRule".to_string(), revision)].into_iter().collect());
/// let proxies = [
///     ProxyDistribution { node_id: "a".into(), acked: at(7), nack: None, withheld: vec![] },
///     ProxyDistribution { node_id: "b".into(), acked: at(3), nack: None, withheld: vec![] },
/// ];
/// let status = distribution_status("RouteRule", "5", &proxies, std::time::SystemTime::UNIX_EPOCH);
/// assert_eq!((status.proxies, status.acked, status.nacked), (2, 1, 0));
/// assert_eq!(status.summary(), "1/2");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigStatus {
    /// The object's `resourceVersion` the counts refer to.
    pub observed_version: String,
    /// The connected proxies that should have the object.
    pub proxies: u64,
    /// How many of them ACKed a push containing the object (at its
    /// observed version or later).
    pub acked: u64,
    /// How many rejected (NACKed) a push containing it and have not ACKed
    /// one since, and are still sent it.
    pub nacked: u64,
    /// How many rejected it and are served without it: the object's
    /// contribution is left out of their configuration so that the other
    /// objects' changes reach them (until the object changes).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub withheld: u64,
    /// The messages of the proxies that rejected it (NACKed or withheld),
    /// deduplicated (at most
    /// [`MAX_NACK_MESSAGES`], each cut to [`MAX_NACK_MESSAGE_LEN`]
    /// characters), the most common first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nacks: Vec<NackSummary>,
    /// When the counts were taken (RFC 3339).
    #[serde(
        serialize_with = "crate::config::serialize_time",
        deserialize_with = "crate::config::deserialize_time"
    )]
    pub last_update: SystemTime,
    /// The object's conditions (`Reconciled`), set by the status writer
    /// when it is given findings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Analysis findings about the object (`pilotctl analyze`'s codes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validation_messages: Vec<ValidationMessage>,
    /// A Gateway API route's status for each parent it names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<RouteParentStatus>,
    /// A Gateway API Gateway's listeners' status.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<ListenerStatus>,
    /// A Gateway API Gateway's addresses (where its proxies are reached).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<GatewayStatusAddress>,
    /// A Gateway API policy's status for each ancestor (a
    /// BackendTLSPolicy's Gateways).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ancestors: Vec<PolicyAncestorStatus>,
}

/// One distinct NACK message and how many proxies sent it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NackSummary {
    /// The xDS type rejected (`CDS`, `EDS`, `LDS`, `RDS`).
    #[serde(rename = "type")]
    pub type_: String,
    /// The proxy's error message.
    pub message: String,
    /// How many proxies sent it.
    pub proxies: u64,
}

impl ConfigStatus {
    /// `acked/proxies`, followed by ` N NACKED` when some proxies
    /// rejected the object and are still sent it, and ` N WITHHELD` when
    /// some rejected it and are served without it: what `pilotctl get`
    /// shows.
    pub fn summary(&self) -> String {
        let mut summary = format!("{}/{}", self.acked, self.proxies);
        if self.nacked > 0 {
            summary.push_str(&format!(" {} NACKED", self.nacked));
        }
        if self.withheld > 0 {
            summary.push_str(&format!(" {} WITHHELD", self.withheld));
        }
        summary
    }

    /// True when both say the same thing about distribution (the time
    /// they were taken aside): a writer need not write `other` over
    /// `self`.
    pub fn same_counts(&self, other: &ConfigStatus) -> bool {
        self.observed_version == other.observed_version
            && self.proxies == other.proxies
            && self.acked == other.acked
            && self.nacked == other.nacked
            && self.withheld == other.withheld
            && self.nacks == other.nacks
    }

    /// True when both say the same thing, counts, conditions (their
    /// transition times aside) and validation messages: a writer need not
    /// write `other` over `self`.
    pub fn same_as(&self, other: &ConfigStatus) -> bool {
        self.same_counts(other)
            && crate::conditions::same_conditions(&self.conditions, &other.conditions)
            && self.validation_messages == other.validation_messages
            && crate::conditions::same_parts(&self.listeners, &other.listeners, &self.parents, &other.parents)
            && crate::conditions::same_each(&self.ancestors, &other.ancestors, PolicyAncestorStatus::same)
            && self.addresses == other.addresses
    }
}

/// What one connected proxy has of the store's configuration, in store
/// revisions (comparable across replicas).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxyDistribution {
    /// The proxy's node id.
    pub node_id: String,
    /// What the proxy has all of: it ACKed every type of a push that held,
    /// per kind, every write up to these revisions. `None` before its
    /// first complete ACK.
    pub acked: Option<KindRevisions>,
    /// The proxy's current rejection: a push it NACKed and has not ACKed
    /// anything newer since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nack: Option<ProxyNack>,
    /// The objects left out of the proxy's configuration because it
    /// rejected them (each at the version it rejected).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<WithheldObject>,
}

/// An object left out of a proxy's configuration: the proxy rejected a
/// push that brought it, so it is served the configuration without it
/// until the object changes (a new version is tried again) or goes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WithheldObject {
    /// The object's kind.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The version the proxy rejected (a store revision).
    pub resource_version: String,
    /// The xDS type the proxy rejected (`CDS`, `EDS`, `LDS`, `RDS`).
    #[serde(rename = "type")]
    pub type_: String,
    /// The proxy's error message.
    pub message: String,
}

/// A rejected push.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxyNack {
    /// Per kind, the revisions the rejected push was built from.
    pub revisions: KindRevisions,
    /// Per kind, the revisions of the first push of this type the proxy
    /// rejected since it last had the type: the writes up to these are
    /// what it refused; a write after them only came in a response that
    /// still carried the refused content, and is not blamed. `None` when
    /// not known (the rejected push itself is then the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_revisions: Option<KindRevisions>,
    /// The xDS type rejected.
    #[serde(rename = "type")]
    pub type_: String,
    /// The proxy's error message.
    pub message: String,
}

/// The status of an object of `kind` at `observed_version` given what each proxy
/// that should have it has (`proxies`: one record per proxy; the caller
/// chooses which proxies should have the object).
///
/// A proxy counts as ACKed when it has every type of a push built from a
/// revision at or after the object's; otherwise as NACKed when the first
/// push of its current rejection was built from such a revision (the
/// object is among the writes the proxy refused; a write after that first
/// rejected push is not blamed, it waits behind the refused content);
/// otherwise it is still pending. A proxy that withholds the object at
/// `observed_version` (it rejected it and is served without it, see
/// [`WithheldObject`]) counts as withheld, whatever it ACKed since: an
/// object version is one store revision, so kind and version name it. An
/// object whose version is not a revision (not a number) counts nobody as
/// ACKed.
pub fn distribution_status(
    kind: &str,
    observed_version: &str,
    proxies: &[ProxyDistribution],
    now: SystemTime,
) -> ConfigStatus {
    let revision = observed_version.parse::<Revision>().ok();
    let mut acked = 0;
    let mut nacked = 0;
    let mut withheld = 0;
    let mut messages: BTreeMap<(String, String), u64> = BTreeMap::new();
    for proxy in proxies {
        if let Some(left_out) = proxy
            .withheld
            .iter()
            .find(|w| w.kind == kind && w.resource_version == observed_version)
        {
            withheld += 1;
            let message = truncate(&left_out.message, MAX_NACK_MESSAGE_LEN);
            *messages.entry((left_out.type_.clone(), message)).or_default() += 1;
            continue;
        }
        let Some(revision) = revision else { continue };
        let holds = |revisions: &KindRevisions| revisions.get(kind).is_some_and(|r| *r >= revision);
        if proxy.acked.as_ref().is_some_and(holds) {
            acked += 1;
        } else if let Some(nack) = proxy
            .nack
            .as_ref()
            .filter(|n| holds(n.first_revisions.as_ref().unwrap_or(&n.revisions)))
        {
            nacked += 1;
            let message = truncate(&nack.message, MAX_NACK_MESSAGE_LEN);
            *messages.entry((nack.type_.clone(), message)).or_default() += 1;
        }
    }
    let mut nacks: Vec<NackSummary> = messages
        .into_iter()
        .map(|((type_, message), proxies)| NackSummary {
            type_,
            message,
            proxies,
        })
        .collect();
    // Most common first; ties in type and message order (stable output).
    nacks.sort_by(|a, b| b.proxies.cmp(&a.proxies).then_with(|| a.cmp(b)));
    nacks.truncate(MAX_NACK_MESSAGES);
    ConfigStatus {
        observed_version: observed_version.to_string(),
        proxies: proxies.len() as u64,
        acked,
        nacked,
        withheld,
        nacks,
        last_update: now,
        conditions: Vec::new(),
        validation_messages: Vec::new(),
        parents: Vec::new(),
        listeners: Vec::new(),
        addresses: Vec::new(),
        ancestors: Vec::new(),
    }
}

/// Many objects' [`distribution_status`] over one set of proxies: the
/// proxies' ACKed revisions sorted once per kind, so an object's status
/// costs a binary search (plus the few proxies with a rejection or a
/// withheld object), not a pass over every proxy. The status writer counts
/// every routing object over every proxy each round: at 10,000 proxies and
/// 1,000 objects, 10 million record reads became 1,000 searches.
///
/// ```
/// use std::time::SystemTime;
/// use pilot_model::{DistributionIndex, ProxyDistribution, distribution_status};
/// let proxy = |id: &str, revision: u64| ProxyDistribution {
///     node_id: id.into(),
///     acked: Some([("RouteRule".to_string(), revision)].into_iter().collect()),
///     nack: None,
///     withheld: Vec::new(),
/// };
/// let proxies = [proxy("a", 7), proxy("b", 9), proxy("c", 12)];
/// let index = DistributionIndex::new(&proxies);
/// let now = SystemTime::UNIX_EPOCH;
/// assert_eq!(index.status("RouteRule", "9", now).summary(), "2/3");
/// assert_eq!(index.status("RouteRule", "9", now), distribution_status("RouteRule", "9", &proxies, now));
/// ```
#[derive(Debug)]
pub struct DistributionIndex {
    /// Every proxy.
    proxies: u64,
    /// Per kind, the ACKed revisions of the proxies with neither a
    /// rejection nor a withheld object, sorted.
    acked: HashMap<String, Vec<Revision>>,
    /// The proxies with a rejection or a withheld object.
    others: Vec<ProxyDistribution>,
}

impl DistributionIndex {
    /// The index of `proxies` (the proxies every object counted with it
    /// concerns).
    pub fn new(proxies: &[ProxyDistribution]) -> Self {
        let mut acked: HashMap<String, Vec<Revision>> = HashMap::new();
        let mut others = Vec::new();
        for proxy in proxies {
            if proxy.nack.is_some() || !proxy.withheld.is_empty() {
                others.push(proxy.clone());
                continue;
            }
            for (kind, revision) in proxy.acked.iter().flatten() {
                match acked.get_mut(kind.as_str()) {
                    Some(revisions) => revisions.push(*revision),
                    None => {
                        acked.insert(kind.clone(), vec![*revision]);
                    }
                }
            }
        }
        for revisions in acked.values_mut() {
            revisions.sort_unstable();
        }
        DistributionIndex {
            proxies: proxies.len() as u64,
            acked,
            others,
        }
    }

    /// What [`distribution_status`] says of an object of `kind` at
    /// `observed_version` over the indexed proxies.
    pub fn status(&self, kind: &str, observed_version: &str, now: SystemTime) -> ConfigStatus {
        let mut status = distribution_status(kind, observed_version, &self.others, now);
        if let (Ok(revision), Some(revisions)) = (observed_version.parse::<Revision>(), self.acked.get(kind))
        {
            let below = revisions.partition_point(|r| *r < revision);
            status.acked += (revisions.len() - below) as u64;
        }
        status.proxies = self.proxies;
        status
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(revision: Revision) -> KindRevisions {
        [("K".to_string(), revision), ("Other".to_string(), 1)]
            .into_iter()
            .collect()
    }

    fn proxy(id: &str, acked: Option<Revision>, nack: Option<(Revision, &str)>) -> ProxyDistribution {
        ProxyDistribution {
            node_id: id.into(),
            acked: acked.map(at),
            nack: nack.map(|(revision, message)| ProxyNack {
                revisions: at(revision),
                first_revisions: None,
                type_: "LDS".into(),
                message: message.into(),
            }),
            withheld: Vec::new(),
        }
    }

    #[test]
    fn the_index_counts_as_a_pass_over_every_proxy_does() {
        // Proxies of every shape (nothing ACKed yet, ACKed at revisions
        // around the objects', rejections blamed or not, withheld
        // objects, kinds missing), a pseudo-random mix, against objects of
        // two kinds at revisions around theirs and a version that is no
        // revision.
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut proxies = Vec::new();
        for i in 0..400 {
            let mut p = proxy(&format!("p{i}"), None, None);
            p.acked = match next(4) {
                0 => None,
                1 => Some([("Other".to_string(), 20)].into_iter().collect()),
                _ => Some(at(5 + next(10))),
            };
            if next(5) == 0 {
                p.nack = Some(ProxyNack {
                    revisions: at(8 + next(6)),
                    first_revisions: (next(2) == 0).then(|| at(7 + next(6))),
                    type_: ["LDS", "RDS"][next(2) as usize].into(),
                    message: format!("bad {}", next(3)),
                });
            }
            if next(8) == 0 {
                p.withheld.push(WithheldObject {
                    kind: "K".into(),
                    namespace: "default".into(),
                    name: "x".into(),
                    resource_version: (5 + next(10)).to_string(),
                    type_: "RDS".into(),
                    message: "rejected".into(),
                });
            }
            proxies.push(p);
        }
        let now = SystemTime::UNIX_EPOCH;
        for count in [0, 1, 7, 400] {
            let index = DistributionIndex::new(&proxies[..count]);
            for kind in ["K", "Other", "Missing"] {
                for version in ["4", "5", "9", "12", "14", "15", "20", "21", "not-a-revision"] {
                    assert_eq!(
                        index.status(kind, version, now),
                        distribution_status(kind, version, &proxies[..count], now),
                        "{count} proxies, {kind} at {version}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_write_after_the_first_rejected_push_is_not_blamed() {
        // The proxy has revision 9; it refused the push of revision 10 (the
        // bad object) and again that of 12 (an innocent write on the same
        // resource, which still carried the bad content).
        let mut refusing = proxy("a", Some(9), Some((12, "bad regex")));
        if let Some(nack) = refusing.nack.as_mut() {
            nack.first_revisions = Some(at(10));
        }
        let bad = distribution_status("K", "10", std::slice::from_ref(&refusing), SystemTime::UNIX_EPOCH);
        assert_eq!(bad.summary(), "0/1 1 NACKED");
        let innocent = distribution_status("K", "12", &[refusing], SystemTime::UNIX_EPOCH);
        assert_eq!(innocent.summary(), "0/1");
        assert!(innocent.nacks.is_empty());
    }

    #[test]
    fn a_proxy_withholding_the_object_at_its_version_counts_as_withheld() {
        // The proxy refused revision 10, is served without it and has
        // ACKed revision 12 since (another rule's change).
        let mut withholding = proxy("a", Some(12), None);
        withholding.withheld.push(WithheldObject {
            kind: "K".into(),
            namespace: "default".into(),
            name: "bad".into(),
            resource_version: "10".into(),
            type_: "RDS".into(),
            message: "bad regex".into(),
        });
        let proxies = [withholding, proxy("b", Some(12), None)];
        let bad = distribution_status("K", "10", &proxies, SystemTime::UNIX_EPOCH);
        assert_eq!((bad.acked, bad.nacked, bad.withheld), (1, 0, 1));
        assert_eq!(bad.summary(), "1/2 1 WITHHELD");
        assert_eq!(bad.nacks[0].message, "bad regex");
        assert_eq!(bad.nacks[0].type_, "RDS");
        // Its next version is not withheld (it is tried again), nor is the
        // innocent write.
        let fixed = distribution_status("K", "12", &proxies, SystemTime::UNIX_EPOCH);
        assert_eq!(fixed.summary(), "2/2");
        // Another kind at the same number is not this object.
        let other = distribution_status("Other", "10", &proxies, SystemTime::UNIX_EPOCH);
        assert_eq!(other.withheld, 0);
        let json = serde_json::to_value(&bad).unwrap();
        assert_eq!(json["withheld"], 1);
        assert!(serde_json::to_value(&fixed).unwrap().get("withheld").is_none());
    }

    #[test]
    fn acked_wins_over_an_older_or_newer_nack_and_pending_is_neither() {
        let proxies = [
            proxy("a", Some(10), None),
            // Rejected a later push, but has this object from an earlier one.
            proxy("b", Some(10), Some((12, "bad regex"))),
            proxy("c", Some(4), Some((12, "bad regex"))),
            proxy("d", Some(4), None),
            proxy("e", None, Some((3, "too old to matter"))),
        ];
        let status = distribution_status("K", "10", &proxies, SystemTime::UNIX_EPOCH);
        assert_eq!((status.proxies, status.acked, status.nacked), (5, 2, 1));
        assert_eq!(status.summary(), "2/5 1 NACKED");
        assert_eq!(status.nacks.len(), 1);
        assert_eq!(status.nacks[0].message, "bad regex");
        assert_eq!(status.nacks[0].proxies, 1);
    }

    #[test]
    fn messages_are_deduplicated_bounded_and_cut() {
        let long = "x".repeat(MAX_NACK_MESSAGE_LEN + 100);
        let mut proxies: Vec<_> = (0..10)
            .map(|i| proxy(&format!("p{i}"), None, Some((5, &format!("error {i}")))))
            .collect();
        proxies.push(proxy("same1", None, Some((5, "error 3"))));
        proxies.push(proxy("long", None, Some((5, &long))));
        let status = distribution_status("K", "5", &proxies, SystemTime::UNIX_EPOCH);
        assert_eq!(status.nacked, 12);
        assert_eq!(status.nacks.len(), MAX_NACK_MESSAGES);
        assert_eq!(status.nacks[0].message, "error 3");
        assert_eq!(status.nacks[0].proxies, 2);
        let status = distribution_status("K", "5", &proxies[11..], SystemTime::UNIX_EPOCH);
        assert_eq!(status.nacks[0].message.chars().count(), MAX_NACK_MESSAGE_LEN + 3);
    }

    #[test]
    fn revisions_of_another_kind_do_not_count() {
        let status = distribution_status(
            "Other",
            "5",
            &[proxy("a", Some(100), None)],
            SystemTime::UNIX_EPOCH,
        );
        assert_eq!((status.proxies, status.acked), (1, 0));
    }

    #[test]
    fn a_version_that_is_not_a_revision_counts_nobody() {
        let status = distribution_status("K", "abc", &[proxy("a", Some(100), None)], SystemTime::UNIX_EPOCH);
        assert_eq!((status.proxies, status.acked), (1, 0));
    }

    #[test]
    fn status_round_trips_through_json() {
        let status = distribution_status(
            "K",
            "7",
            &[proxy("a", None, Some((9, "no")))],
            crate::now_seconds(),
        );
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["observedVersion"], "7");
        assert_eq!(json["nacks"][0]["type"], "LDS");
        assert!(json["lastUpdate"].as_str().unwrap().ends_with('Z'));
        let back: ConfigStatus = serde_json::from_value(json).unwrap();
        assert_eq!(back, status);
    }
}
