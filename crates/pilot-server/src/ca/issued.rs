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
//! workloads, not with time.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::SystemTime;

use pilot_ca::Issued;
use serde_json::{Value, json};

/// The latest certificate per identity and requesting address.
#[derive(Debug, Default)]
pub(crate) struct IssuedCertificates {
    latest: Mutex<BTreeMap<(String, Option<IpAddr>), Record>>,
}

/// One issued certificate.
#[derive(Debug, Clone)]
struct Record {
    not_after: SystemTime,
    issued_at: SystemTime,
    caller: String,
    peer: Option<SocketAddr>,
}

impl IssuedCertificates {
    /// Records `issued`, requested by `caller` from `peer`.
    pub(crate) fn record(&self, issued: &Issued, caller: &str, peer: Option<SocketAddr>) {
        let record = Record {
            not_after: issued.not_after,
            issued_at: SystemTime::now(),
            caller: caller.to_string(),
            peer,
        };
        let key = (issued.identity.to_string(), peer.map(|p| p.ip()));
        self.latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, record);
    }

    /// The certificates requested from `ip` (every one when `None`) for
    /// identities of `namespace` (any when `None`), as JSON, newest first.
    pub(crate) fn to_json(&self, ip: Option<IpAddr>, namespace: Option<&str>) -> Vec<Value> {
        let latest = self
            .latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut found: Vec<(&String, &Record)> = latest
            .iter()
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
