//! What the certificate service issued, for `GET /debug/certificates`
//! and `pilotctl proxy-config secret`: the latest certificate of each
//! identity for each requesting address ([`IssuedCertificates`]).
//!
//! A proxy's certificates are those its agent requested: the agent and
//! its Envoy share the pod's address, and the proxy's node id carries it
//! (`sidecar~IP~pod.namespace~...`), so a proxy's are the certificates
//! requested from its address for identities of its namespace. Each
//! replica knows what it issued itself; the list holds one entry per
//! identity and address (a rotation replaces it), so it grows with the
//! workloads, not with time. It is bounded all the same, since a
//! namespace credential may ask for any number of identities: expired
//! records are dropped, and past `--ca-issued-records-max` the oldest
//! issued goes first. An identity is at most 2,048 bytes (the SPIFFE
//! limit), so the record and `/debug/certificates` stay within about
//! the cap times 2.5 KB.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::SystemTime;

use pilot_ca::Issued;
use serde_json::{Value, json};

/// The latest certificate per identity and requesting address, at most
/// `max` of them.
#[derive(Debug)]
pub(crate) struct IssuedCertificates {
    inner: Mutex<Inner>,
    max: usize,
}

/// A record's key: the identity and the requesting address.
type Key = (String, Option<IpAddr>);

#[derive(Debug, Default)]
struct Inner {
    latest: HashMap<Key, Record>,
    /// The keys by the order they were issued in (oldest first).
    by_age: BTreeMap<u64, Key>,
    /// The next record's number.
    next: u64,
    /// The earliest expiry among the records: no sweep before it.
    earliest_expiry: Option<SystemTime>,
}

/// One issued certificate.
#[derive(Debug, Clone)]
struct Record {
    not_after: SystemTime,
    issued_at: SystemTime,
    caller: String,
    peer: Option<SocketAddr>,
    /// Its place in `by_age`.
    number: u64,
}

impl IssuedCertificates {
    /// A record of at most `max` certificates (at least one).
    pub(crate) fn new(max: usize) -> Self {
        IssuedCertificates {
            inner: Mutex::new(Inner::default()),
            max: max.max(1),
        }
    }

    /// Records `issued`, requested by `caller` from `peer`; drops the
    /// expired records, then the oldest while over the cap.
    pub(crate) fn record(&self, issued: &Issued, caller: &str, peer: Option<SocketAddr>) {
        let now = SystemTime::now();
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let number = inner.next;
        inner.next += 1;
        let record = Record {
            not_after: issued.not_after,
            issued_at: now,
            caller: caller.to_string(),
            peer,
            number,
        };
        let key = (issued.identity.to_string(), peer.map(|p| p.ip()));
        inner.by_age.insert(number, key.clone());
        if let Some(replaced) = inner.latest.insert(key, record) {
            inner.by_age.remove(&replaced.number);
        }
        inner.earliest_expiry = Some(match inner.earliest_expiry {
            Some(earliest) => earliest.min(issued.not_after),
            None => issued.not_after,
        });
        if inner.earliest_expiry.is_some_and(|earliest| earliest <= now) {
            inner.sweep_expired(now);
        }
        while inner.latest.len() > self.max {
            let Some((_, oldest)) = inner.by_age.pop_first() else {
                break;
            };
            inner.latest.remove(&oldest);
        }
    }

    /// How many records are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner).latest.len()
    }

    /// The certificates requested from `ip` (every one when `None`) for
    /// identities of `namespace` (any when `None`), as JSON, newest first.
    pub(crate) fn to_json(&self, ip: Option<IpAddr>, namespace: Option<&str>) -> Vec<Value> {
        let now = SystemTime::now();
        let inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut found: Vec<(&String, &Record)> = inner
            .latest
            .iter()
            .filter(|(_, record)| record.not_after > now)
            .filter(|((_, peer), _)| ip.is_none() || *peer == ip)
            .filter(|((identity, _), _)| {
                namespace.is_none_or(|ns| identity.contains(&format!("/ns/{ns}/sa/")))
            })
            .map(|((identity, _), record)| (identity, record))
            .collect();
        found.sort_by(|a, b| b.1.issued_at.cmp(&a.1.issued_at).then(a.0.cmp(b.0)));
        let time = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
        found
            .into_iter()
            .map(|(identity, record)| {
                json!({
                    "identity": identity,
                    "notAfter": time(record.not_after),
                    "issuedAt": time(record.issued_at),
                    "caller": record.caller,
                    "peer": record.peer.map(|p| p.to_string()),
                })
            })
            .collect()
    }
}

impl Inner {
    /// Drops every record expired at `now`.
    fn sweep_expired(&mut self, now: SystemTime) {
        let Inner { latest, by_age, .. } = self;
        latest.retain(|_, record| {
            let live = record.not_after > now;
            if !live {
                by_age.remove(&record.number);
            }
            live
        });
        self.earliest_expiry = self.latest.values().map(|record| record.not_after).min();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn issued(account: &str, ttl: Duration) -> Issued {
        Issued {
            cert_chain: Vec::new(),
            not_after: SystemTime::now() + ttl,
            identity: pilot_ca::SpiffeId::new("cluster.local", "default", account).unwrap(),
        }
    }

    #[test]
    fn the_record_keeps_at_most_its_cap_dropping_the_oldest_and_the_expired() {
        let record = IssuedCertificates::new(3);
        let hour = Duration::from_secs(3600);
        for account in ["a", "b", "c", "d"] {
            record.record(&issued(account, hour), "token t", None);
        }
        let shown = |record: &IssuedCertificates| -> Vec<String> {
            let mut ids: Vec<String> = record
                .to_json(None, None)
                .iter()
                .map(|v| v["identity"].as_str().unwrap().rsplit('/').next().unwrap().to_string())
                .collect();
            ids.sort();
            ids
        };
        assert_eq!(shown(&record), ["b", "c", "d"], "the oldest went first");
        // Renewing b makes it the newest: c is the oldest now.
        record.record(&issued("b", hour), "token t", None);
        record.record(&issued("e", hour), "token t", None);
        assert_eq!(shown(&record), ["b", "d", "e"]);
        // An expired record is neither shown nor kept.
        record.record(&issued("gone", Duration::ZERO), "token t", None);
        assert!(!shown(&record).contains(&"gone".to_string()));
        record.record(&issued("f", hour), "token t", None);
        assert_eq!(record.len(), 3);
        assert_eq!(shown(&record), ["b", "e", "f"], "the expired one was dropped");
    }
}
