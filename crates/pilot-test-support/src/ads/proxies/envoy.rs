//! One emulated proxy, as Envoy behaves. State of the world: it subscribes
//! to CDS and LDS (wildcard), to the EDS and RDS names those carry, and
//! ACKs every response with the full name list, as Envoy does. Delta: the
//! same subscriptions as deltas (new names subscribed, gone ones
//! unsubscribed), each response ACKed by nonce. It records when it sent
//! its ACK of each RDS and EDS version and the size of that EDS response
//! (the whole encoded `DiscoveryResponse` or `DeltaDiscoveryResponse`).
//!
//! A proxy whose stream fails or ends reconnects as Envoy does (jittered
//! exponential backoff, 500 ms to 30 s), counting why.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::Node;
use prost::Message;

use super::names::{NameList, cluster_set, name_changes, name_list};
use super::proxy_ip;
use super::wire::{DeltaResponse, Encoded, Response, eds_name, encoded_node, ready_endpoints, route_names};
use crate::ads::transport::GrpcStream;
use crate::ads::{CDS, EDS, LDS, RDS, sidecar_id};
use crate::measure::now_micros;

/// When a client ACKed its latest RDS version: (version, wall-clock µs).
#[derive(Default)]
pub(super) struct Acked {
    pub(super) version: AtomicU64,
    pub(super) at: AtomicU64,
    /// The same for EDS, with the bytes of the EDS responses received for
    /// that version.
    pub(super) eds_version: AtomicU64,
    pub(super) eds_at: AtomicU64,
    pub(super) eds_bytes: AtomicU64,
    /// Every response received, of any type.
    pub(super) responses: AtomicU64,
    /// The EDS responses among them.
    pub(super) eds_responses: AtomicU64,
    /// With a watched host (`--watch`): every EDS version ACKed and when
    /// (wall-clock µs), in order, for the staleness of each change.
    pub(super) eds_log: Option<std::sync::Mutex<Vec<(u64, u64)>>>,
    /// The watched host's assignments received with no ready endpoint.
    pub(super) watched_empty: AtomicU64,
    /// The fewest ready endpoints a watched host's assignment had
    /// (`u64::MAX` before the first).
    pub(super) watched_min: AtomicU64,
    /// When the current stream opened (wall-clock µs).
    pub(super) stream_at: AtomicU64,
    /// When the current stream had ACKed all four types (0 until then).
    pub(super) synced_at: AtomicU64,
}

/// The four types' bits, for a stream's ACKs so far.
fn type_bit(type_url: &str) -> u8 {
    [CDS, EDS, LDS, RDS]
        .iter()
        .position(|t| *t == type_url)
        .map_or(0, |at| 1 << at)
}

impl Acked {
    /// A stream opened now.
    fn opened(&self) {
        self.synced_at.store(0, Ordering::Release);
        self.stream_at.store(now_micros(), Ordering::Release);
    }

    /// The stream ACKed `type_url`; `acked` holds its types so far.
    fn acked_type(&self, acked: &mut u8, type_url: &str) {
        let before = *acked;
        *acked |= type_bit(type_url);
        if *acked == 0b1111 && before != 0b1111 {
            self.synced_at.store(now_micros(), Ordering::Release);
        }
    }
}

impl Acked {
    fn rds(&self, version: &str) {
        if let Ok(version) = version.parse::<u64>() {
            self.at.store(now_micros(), Ordering::Relaxed);
            self.version.store(version, Ordering::Release);
        }
    }

    fn eds(&self, version: &str, bytes: usize) {
        self.eds_responses.fetch_add(1, Ordering::Relaxed);
        if let Ok(version) = version.parse::<u64>() {
            // Several responses of one version (delta: a subscription's
            // answer and the push) add up.
            let before = self.eds_version.load(Ordering::Acquire);
            let total = if before == version {
                self.eds_bytes.load(Ordering::Relaxed) + bytes as u64
            } else {
                bytes as u64
            };
            self.eds_bytes.store(total, Ordering::Relaxed);
            let at = now_micros();
            if let Some(log) = &self.eds_log {
                log.lock().unwrap().push((version, at));
            }
            self.eds_at.store(at, Ordering::Relaxed);
            self.eds_version.store(version, Ordering::Release);
        }
    }
}

/// The bytes of responses all clients received, by type (CDS, EDS, LDS,
/// RDS; whole encoded messages).
pub(super) static RECEIVED: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

impl Acked {
    /// A client that logs its EDS ACKs and watches a host's assignments.
    pub(super) fn watching() -> Self {
        Acked {
            eds_log: Some(Default::default()),
            watched_min: AtomicU64::new(u64::MAX),
            ..Default::default()
        }
    }

    /// Counts the ready endpoints of `watch`'s assignments among
    /// `assignments`.
    fn watched<'a>(&self, watch: Option<&str>, assignments: impl Iterator<Item = &'a Bytes>) {
        let Some(host) = watch else { return };
        for ready in assignments.filter_map(|a| ready_endpoints(a, host)) {
            if ready == 0 {
                self.watched_empty.fetch_add(1, Ordering::Relaxed);
            }
            self.watched_min.fetch_min(ready as u64, Ordering::Relaxed);
        }
    }
}

fn received(type_url: &str, bytes: usize) {
    if let Some(at) = [CDS, EDS, LDS, RDS].iter().position(|t| *t == type_url) {
        RECEIVED[at].fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// Why clients' streams ended, and how often they reconnected.
#[derive(Default)]
pub(super) struct Reconnects {
    pub(super) total: AtomicU64,
    pub(super) reasons: std::sync::Mutex<BTreeMap<String, u64>>,
}

impl Reconnects {
    fn count(&self, reason: String) {
        *self.reasons.lock().unwrap().entry(reason).or_default() += 1;
    }
}

/// How the clients connect.
#[derive(Clone)]
pub(super) struct ClientSetup {
    /// The servers' ports, each with the request's field block encoded
    /// once ([`request_headers`](crate::ads::transport::request_headers)):
    /// a client connects to the first, and after a failure to another.
    pub(super) ports: Vec<(u16, Bytes)>,
    pub(super) namespaces: usize,
    pub(super) delta: bool,
    /// The host whose load assignments the clients check for ready
    /// endpoints (`--watch HOST`).
    pub(super) watch: Option<Arc<str>>,
}

/// One client, as Envoy behaves: runs a stream until it fails or ends,
/// then reconnects after a jittered exponential backoff.
pub(super) async fn client(setup: ClientSetup, index: usize, acked: Arc<Acked>, reconnects: Arc<Reconnects>) {
    let mut backoff = Duration::from_millis(500);
    let mut attempt = 0u64;
    loop {
        // The first host, then each in turn from one of the client's own.
        let at = if attempt == 0 {
            0
        } else {
            (index + attempt as usize) % setup.ports.len()
        };
        let (port, headers) = &setup.ports[at];
        let reason = if setup.delta {
            delta_stream(&setup, *port, headers, index, &acked).await
        } else {
            stream(&setup, *port, headers, index, &acked).await
        };
        reconnects.count(reason);
        reconnects.total.fetch_add(1, Ordering::Relaxed);
        attempt += 1;
        let jitter = ((index as u64)
            .wrapping_mul(2_654_435_761)
            .wrapping_add(attempt * 40_503))
            % 1000;
        tokio::time::sleep(backoff.mul_f64(jitter as f64 / 1000.0)).await;
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

fn node(setup: &ClientSetup, index: usize) -> Node {
    let namespace = if setup.namespaces <= 1 {
        "default".to_string()
    } else {
        format!("ns{}", index % setup.namespaces)
    };
    Node {
        id: sidecar_id(format_args!("client-{index}"), &namespace, proxy_ip(index)),
        ..Default::default()
    }
}

/// One state-of-the-world stream: subscribes, follows EDS/RDS names, ACKs
/// everything; returns why it ended.
async fn stream(setup: &ClientSetup, port: u16, headers: &Bytes, index: usize, acked: &Acked) -> String {
    let mut h2 = match GrpcStream::open_from(super::source_ip(index), port, headers).await {
        Ok(h2) => h2,
        Err(reason) => return reason.to_string(),
    };
    acked.opened();
    let mut types = 0u8;
    let node = encoded_node(2, &node(setup, index));
    // DiscoveryRequest: version_info 1, node 2, resource_names 3,
    // type_url 4, response_nonce 5.
    let request = |type_url: &str, names: Option<&Arc<NameList>>, version: &str, nonce: &str| {
        Encoded::default()
            .string(1, version)
            .fields(&node)
            .fields(&names.map(|n| n.encoded.clone()).unwrap_or_default())
            .string(4, type_url)
            .string(5, nonce)
    };
    h2.send(&request(CDS, None, "", "").0);
    h2.send(&request(LDS, None, "", "").0);
    let (mut eds, mut rds): (Option<Arc<NameList>>, Option<Arc<NameList>>) = Default::default();
    // Shared lists are equal when they are the same list.
    let same = |a: &Option<Arc<NameList>>, b: &Arc<NameList>| a.as_ref().is_some_and(|a| Arc::ptr_eq(a, b));
    loop {
        let message = match h2.message().await {
            Ok(Some(message)) => message,
            Ok(None) => return "ended by the server (OK)".into(),
            Err(reason) => return reason.to_string(),
        };
        let size = message.len();
        let response = match Response::decode(message) {
            Ok(response) => response,
            Err(error) => return format!("decode: {error}"),
        };
        received(&response.type_url, size);
        acked.responses.fetch_add(1, Ordering::Relaxed);
        let mut follow_up = None;
        if response.type_url == CDS {
            let names = name_list(response.resources.iter().filter_map(|a| eds_name(&a.value)));
            if !same(&eds, &names) {
                follow_up = Some(request(EDS, Some(&names), "", ""));
                eds = Some(names);
            }
        } else if response.type_url == LDS {
            let routes: Vec<String> = response
                .resources
                .iter()
                .flat_map(|a| route_names(&a.value))
                .collect();
            let names = name_list(routes.iter().map(String::as_str));
            if !same(&rds, &names) {
                follow_up = Some(request(RDS, Some(&names), "", ""));
                rds = Some(names);
            }
        }
        let names = if response.type_url == EDS {
            eds.as_ref()
        } else if response.type_url == RDS {
            rds.as_ref()
        } else {
            None
        };
        h2.send(&request(&response.type_url, names, &response.version_info, &response.nonce).0);
        acked.acked_type(&mut types, &response.type_url);
        if response.type_url == RDS {
            acked.rds(&response.version_info);
        }
        if response.type_url == EDS {
            acked.watched(
                setup.watch.as_deref(),
                response.resources.iter().map(|a| &a.value),
            );
            acked.eds(&response.version_info, size);
        }
        if let Some(follow_up) = follow_up {
            h2.send(&follow_up.0);
        }
    }
}

/// One delta stream: subscribes to CDS and LDS, then to the EDS and RDS
/// names those carry as they come and go; ACKs everything.
async fn delta_stream(
    setup: &ClientSetup,
    port: u16,
    headers: &Bytes,
    index: usize,
    acked: &Acked,
) -> String {
    let mut h2 = match GrpcStream::open_from(super::source_ip(index), port, headers).await {
        Ok(h2) => h2,
        Err(reason) => return reason.to_string(),
    };
    acked.opened();
    let mut types = 0u8;
    let node = encoded_node(1, &node(setup, index));
    // DeltaDiscoveryRequest: node 1, type_url 2, resource_names_subscribe
    // 3, resource_names_unsubscribe 4, response_nonce 6.
    let request = |type_url: &str, (subscribe, unsubscribe): (Bytes, Bytes), nonce: &str| {
        Encoded::default()
            .fields(&node)
            .string(2, type_url)
            .fields(&subscribe)
            .fields(&unsubscribe)
            .string(6, nonce)
    };
    let none = || (Bytes::new(), Bytes::new());
    h2.send(&request(CDS, none(), "").0);
    h2.send(&request(LDS, none(), "").0);
    // The clusters held (shared with every client holding the same), and
    // the route configurations each listener's managers use, by name.
    let mut clusters = cluster_set(BTreeMap::new());
    let mut listeners: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut eds, mut rds): (Option<Arc<NameList>>, Option<Arc<NameList>>) = Default::default();
    let same = |a: &Option<Arc<NameList>>, b: &Arc<NameList>| a.as_ref().is_some_and(|a| Arc::ptr_eq(a, b));
    loop {
        let message = match h2.message().await {
            Ok(Some(message)) => message,
            Ok(None) => return "ended by the server (OK)".into(),
            Err(reason) => return reason.to_string(),
        };
        let size = message.len();
        let response = match DeltaResponse::decode(message) {
            Ok(response) => response,
            Err(error) => return format!("decode: {error}"),
        };
        received(&response.type_url, size);
        acked.responses.fetch_add(1, Ordering::Relaxed);
        let mut follow_up = None;
        if response.type_url == CDS {
            // Each cluster's name and whether it uses EDS.
            let incoming: Vec<(&str, bool)> = response
                .resources
                .iter()
                .map(|r| {
                    let eds = r.resource.as_ref().is_some_and(|a| eds_name(&a.value).is_some());
                    (r.name(), eds)
                })
                .collect();
            let changed = !response.removed_resources.is_empty()
                || incoming
                    .iter()
                    .any(|(name, eds)| clusters.clusters.get(*name) != Some(eds));
            if changed {
                let mut next = clusters.clusters.clone();
                for name in &response.removed_resources {
                    next.remove(name);
                }
                for (name, eds) in incoming {
                    next.insert(name.to_owned(), eds);
                }
                clusters = cluster_set(next);
            }
            if !same(&eds, &clusters.eds) {
                let changes = name_changes(eds.as_deref(), &clusters.eds);
                eds = Some(Arc::clone(&clusters.eds));
                follow_up = Some(request(EDS, changes, ""));
            }
        } else if response.type_url == LDS {
            for name in &response.removed_resources {
                listeners.remove(name);
            }
            for r in &response.resources {
                let value = r.resource.as_ref().map(|a| a.value.clone()).unwrap_or_default();
                listeners.insert(r.name().to_owned(), route_names(&value));
            }
            let names = name_list(listeners.values().flatten().map(String::as_str));
            if !same(&rds, &names) {
                let changes = name_changes(rds.as_deref(), &names);
                rds = Some(names);
                follow_up = Some(request(RDS, changes, ""));
            }
        }
        h2.send(&request(&response.type_url, none(), &response.nonce).0);
        acked.acked_type(&mut types, &response.type_url);
        if response.type_url == RDS {
            acked.rds(&response.system_version_info);
        }
        if response.type_url == EDS {
            acked.watched(
                setup.watch.as_deref(),
                response
                    .resources
                    .iter()
                    .filter_map(|r| Some(&r.resource.as_ref()?.value)),
            );
            acked.eds(&response.system_version_info, size);
        }
        if let Some(follow_up) = follow_up {
            h2.send(&follow_up.0);
        }
    }
}
