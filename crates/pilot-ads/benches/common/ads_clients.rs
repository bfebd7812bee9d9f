//! The ADS bench's clients, run in a child process (the bench binary
//! itself, `--clients N --port P [--namespaces K] [--delta]`), shared by
//! the `ads` bench of pilot-ads and the `status` bench of pilot-server
//! (which includes this file by path).
//!
//! Each client is a sidecar with its own IP (`client_ip`), in namespace
//! `ns{i % K}` (`default` when K is 1). State of the world: it subscribes
//! to CDS and LDS (wildcard), to the EDS and RDS names those carry, and
//! ACKs every response with the full name list, as Envoy does. Delta: the
//! same subscriptions as deltas (new names subscribed, gone ones
//! unsubscribed), each response ACKed by nonce. It decodes only what it
//! needs (names, and enough to count a response's bytes). A client records
//! when it sent its ACK of each RDS and EDS version and the size of that
//! EDS response (the whole encoded `DiscoveryResponse` or
//! `DeltaDiscoveryResponse`); the parent asks for those times over stdin.
//!
//! A client whose stream fails or ends reconnects as Envoy does (jittered
//! exponential backoff, 500 ms to 30 s), counting why.
//!
//! The clients speak HTTP/2 through a lean client of their own
//! (`h2_stream.rs`, on pilot-h2's frames and HPACK): the same frames Envoy
//! sends, at a fraction of a general-purpose client's cost, so that the
//! clients' process keeps up with 10,000 streams on the server's machine.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::Node;
use prost::Message;
use tokio::sync::mpsc;

#[path = "h2_stream.rs"]
mod h2_stream;
use h2_stream::GrpcStream;

pub const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
pub const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
const PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const DELTA_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

/// What a client decodes of a `DiscoveryResponse` (every field the server
/// sends, so `encoded_len` is the message's size; resources not copied).
#[derive(Clone, PartialEq, Message)]
pub struct Response {
    #[prost(string, tag = "1")]
    version_info: String,
    #[prost(message, repeated, tag = "2")]
    resources: Vec<AnyValue>,
    #[prost(string, tag = "4")]
    type_url: String,
    #[prost(string, tag = "5")]
    nonce: String,
}

/// What a client decodes of a `DeltaDiscoveryResponse` (every field the
/// server sends).
#[derive(Clone, PartialEq, Message)]
pub struct DeltaResponse {
    #[prost(string, tag = "1")]
    system_version_info: String,
    #[prost(message, repeated, tag = "2")]
    resources: Vec<DeltaResource>,
    #[prost(string, tag = "4")]
    type_url: String,
    #[prost(string, tag = "5")]
    nonce: String,
    #[prost(string, repeated, tag = "6")]
    removed_resources: Vec<String>,
}

/// `envoy.service.discovery.v3.Resource`: version, the resource, name.
#[derive(Clone, PartialEq, Message)]
pub struct DeltaResource {
    #[prost(string, tag = "1")]
    version: String,
    #[prost(message, optional, tag = "2")]
    resource: Option<AnyValue>,
    /// Read in place (a string on the wire).
    #[prost(bytes = "bytes", tag = "3")]
    name: Bytes,
}

impl DeltaResource {
    fn name(&self) -> &str {
        std::str::from_utf8(&self.name).unwrap_or_default()
    }
}

/// `google.protobuf.Any`, not copied.
#[derive(Clone, PartialEq, Message)]
pub struct AnyValue {
    #[prost(bytes = "bytes", tag = "1")]
    type_url: Bytes,
    #[prost(bytes = "bytes", tag = "2")]
    value: Bytes,
}

/// A cluster's name and whether it uses EDS (`Cluster` fields 1 and 3).
#[derive(Clone, PartialEq, Message)]
struct ClusterName {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "3")]
    eds_cluster_config: Option<Present>,
}

/// A message whose content does not matter, only its presence.
#[derive(Clone, PartialEq, Message)]
struct Present {}

/// `Listener.filter_chains` (3) → `FilterChain.filters` (3) →
/// `Filter.typed_config` (4) → `HttpConnectionManager.rds` (3) →
/// `Rds.route_config_name` (2).
#[derive(Clone, PartialEq, Message)]
struct ListenerRoutes {
    #[prost(message, repeated, tag = "3")]
    filter_chains: Vec<ChainFilters>,
}
#[derive(Clone, PartialEq, Message)]
struct ChainFilters {
    #[prost(message, repeated, tag = "3")]
    filters: Vec<FilterConfig>,
}
#[derive(Clone, PartialEq, Message)]
struct FilterConfig {
    #[prost(message, optional, tag = "4")]
    typed_config: Option<AnyValue>,
}
#[derive(Clone, PartialEq, Message)]
struct ManagerRds {
    #[prost(message, optional, tag = "3")]
    rds: Option<RdsName>,
}
#[derive(Clone, PartialEq, Message)]
struct RdsName {
    #[prost(string, tag = "2")]
    route_config_name: String,
}

/// The EDS name a cluster carries (its own, when it uses EDS), read in
/// place (`Cluster` field 1, `name`, and field 3, `eds_cluster_config`):
/// 4,000 clusters per CDS response, each client.
fn eds_name(mut cluster: &[u8]) -> Option<&str> {
    use prost::encoding::decode_varint;
    let (mut name, mut eds) = (None, false);
    while !cluster.is_empty() {
        let key = decode_varint(&mut cluster).ok()?;
        match key & 7 {
            0 => {
                decode_varint(&mut cluster).ok()?;
            }
            1 => cluster = cluster.get(8..)?,
            2 => {
                let len = usize::try_from(decode_varint(&mut cluster).ok()?).ok()?;
                let (field, rest) = cluster.split_at_checked(len)?;
                cluster = rest;
                match key >> 3 {
                    1 => name = Some(std::str::from_utf8(field).ok()?),
                    3 => eds = true,
                    _ => {}
                }
            }
            5 => cluster = cluster.get(4..)?,
            _ => return None,
        }
    }
    if eds { name } else { None }
}

/// The route configuration names a listener's connection managers use.
fn route_names(value: &Bytes) -> Vec<String> {
    ListenerRoutes::decode(value.clone())
        .map(|l| {
            l.filter_chains
                .into_iter()
                .flat_map(|c| c.filters)
                .filter_map(|f| ManagerRds::decode(f.typed_config?.value).ok()?.rds)
                .map(|rds| rds.route_config_name)
                .collect()
        })
        .unwrap_or_default()
}

/// A sorted list of resource names with its encoding as a request's
/// `resource_names` (state of the world) or `resource_names_subscribe`
/// (delta): field 3, repeated in both. Held once for every client that
/// lists the same names: 2,000 sidecars' copies of 4,000 names would make
/// the clients' process, not the server, what the bench measures.
struct NameList {
    names: Vec<String>,
    encoded: Bytes,
}

/// The distinct values clients hold (one per distinct subscription: a few
/// per namespace), shared while any client holds them, found by a hash of
/// their content: 10,000 clients over 500 namespaces each looking through
/// every held list would make the lookup the clients' largest cost.
type Interned<T> = std::sync::Mutex<BTreeMap<u64, Vec<std::sync::Weak<T>>>>;

/// The held value `same` as `key` (whose content hashes to `hash`), or a
/// new one `make` builds from it.
fn intern<T, K>(
    table: &Interned<T>,
    hash: u64,
    key: K,
    same: impl Fn(&T, &K) -> bool,
    make: impl FnOnce(K) -> T,
) -> Arc<T> {
    let mut held = table.lock().unwrap();
    let bucket = held.entry(hash).or_default();
    bucket.retain(|value| value.strong_count() > 0);
    if let Some(found) = bucket
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .find(|v| same(v, &key))
    {
        return found;
    }
    let value = Arc::new(make(key));
    bucket.push(Arc::downgrade(&value));
    value
}

/// A hash of `value` (the same in every client of the process).
fn content_hash(value: &impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(value)
}

static NAME_LISTS: Interned<NameList> = std::sync::Mutex::new(BTreeMap::new());

/// `names` as repeated string field `tag`.
fn encode_names<'a>(tag: u32, names: impl Iterator<Item = &'a str>) -> Bytes {
    let mut encoded = bytes::BytesMut::new();
    for name in names {
        prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, &mut encoded);
        prost::encoding::encode_varint(name.len() as u64, &mut encoded);
        bytes::BufMut::put_slice(&mut encoded, name.as_bytes());
    }
    encoded.freeze()
}

/// The shared list of `names`, sorted and without repeats.
fn name_list<'a>(names: impl Iterator<Item = &'a str>) -> Arc<NameList> {
    let mut names: Vec<&str> = names.collect();
    names.sort_unstable();
    names.dedup();
    intern(
        &NAME_LISTS,
        content_hash(&names),
        names,
        |list, names| {
            list.names.len() == names.len() && list.names.iter().map(String::as_str).eq(names.iter().copied())
        },
        |names| NameList {
            names: names.iter().map(|n| n.to_string()).collect(),
            encoded: encode_names(3, names.iter().copied()),
        },
    )
}

/// What a delta client subscribes to on top of `before` to hold `after`,
/// and what it unsubscribes from (fields 3 and 4 of a
/// `DeltaDiscoveryRequest`).
fn name_changes(before: Option<&NameList>, after: &NameList) -> (Bytes, Bytes) {
    let Some(before) = before else {
        return (after.encoded.clone(), Bytes::new());
    };
    let (mut added, mut gone) = (Vec::new(), Vec::new());
    let (mut old, mut new) = (before.names.iter().peekable(), after.names.iter().peekable());
    loop {
        match (old.peek(), new.peek()) {
            (Some(o), Some(n)) if o == n => {
                old.next();
                new.next();
            }
            (Some(o), Some(n)) if o < n => gone.push(old.next().unwrap().as_str()),
            (_, Some(_)) => added.push(new.next().unwrap().as_str()),
            (Some(_), None) => gone.push(old.next().unwrap().as_str()),
            (None, None) => break,
        }
    }
    (
        encode_names(3, added.into_iter()),
        encode_names(4, gone.into_iter()),
    )
}

/// The clusters a delta client holds, by name, with whether each uses EDS,
/// and the EDS names that makes it subscribe to; shared by every client
/// holding the same clusters.
struct ClusterSet {
    clusters: BTreeMap<String, bool>,
    eds: Arc<NameList>,
}

static CLUSTER_SETS: Interned<ClusterSet> = std::sync::Mutex::new(BTreeMap::new());

fn cluster_set(clusters: BTreeMap<String, bool>) -> Arc<ClusterSet> {
    intern(
        &CLUSTER_SETS,
        content_hash(&clusters),
        clusters,
        |set, clusters| set.clusters == *clusters,
        |clusters| ClusterSet {
            eds: name_list(
                clusters
                    .iter()
                    .filter(|(_, eds)| **eds)
                    .map(|(name, _)| name.as_str()),
            ),
            clusters,
        },
    )
}

/// A request as its encoded fields, in field order: the node and name
/// lists already encoded, shared by every request of a client and the
/// names by every client listing them. The same bytes prost would write
/// for a `DiscoveryRequest` or `DeltaDiscoveryRequest`, sent as they are.
#[derive(Debug, Clone, Default)]
struct Encoded(Vec<Bytes>);

impl Encoded {
    /// Adds string field `tag` (left out when empty, as prost does).
    fn string(self, tag: u32, value: &str) -> Self {
        if value.is_empty() {
            return self;
        }
        self.fields(&encode_names(tag, std::iter::once(value)))
    }

    /// Adds already encoded fields.
    fn fields(mut self, encoded: &Bytes) -> Self {
        if !encoded.is_empty() {
            self.0.push(encoded.clone());
        }
        self
    }
}

/// `node` encoded as field `tag` (2 in `DiscoveryRequest`, 1 in
/// `DeltaDiscoveryRequest`).
fn encoded_node(tag: u32, node: &Node) -> Bytes {
    let mut encoded = bytes::BytesMut::new();
    prost::encoding::message::encode(tag, node, &mut encoded);
    encoded.freeze()
}

pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Client `index`'s IP.
pub fn client_ip(index: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + index as u32))
}

/// When a client ACKed its latest RDS version: (version, wall-clock µs).
#[derive(Default)]
struct Acked {
    version: AtomicU64,
    at: AtomicU64,
    /// The same for EDS, with the bytes of the EDS responses received for
    /// that version.
    eds_version: AtomicU64,
    eds_at: AtomicU64,
    eds_bytes: AtomicU64,
    /// Every response received, of any type.
    responses: AtomicU64,
    /// The EDS responses among them.
    eds_responses: AtomicU64,
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
            self.eds_at.store(now_micros(), Ordering::Relaxed);
            self.eds_version.store(version, Ordering::Release);
        }
    }
}

/// The bytes of responses all clients received, by type (CDS, EDS, LDS,
/// RDS; whole encoded messages).
static RECEIVED: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

fn received(type_url: &str, bytes: usize) {
    if let Some(at) = [CDS, EDS, LDS, RDS].iter().position(|t| *t == type_url) {
        RECEIVED[at].fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// Why clients' streams ended, and how often they reconnected.
#[derive(Default)]
struct Reconnects {
    total: AtomicU64,
    reasons: std::sync::Mutex<BTreeMap<String, u64>>,
}

impl Reconnects {
    fn count(&self, reason: String) {
        *self.reasons.lock().unwrap().entry(reason).or_default() += 1;
    }
}

/// How the clients connect.
#[derive(Clone)]
struct ClientSetup {
    port: u16,
    namespaces: usize,
    delta: bool,
    /// The request's field block, encoded once (`h2_stream.rs`).
    headers: Bytes,
}

/// One client, as Envoy behaves: runs a stream until it fails or ends,
/// then reconnects after a jittered exponential backoff.
async fn client(setup: ClientSetup, index: usize, acked: Arc<Acked>, reconnects: Arc<Reconnects>) {
    let mut backoff = Duration::from_millis(500);
    let mut attempt = 0u64;
    loop {
        let reason = if setup.delta {
            delta_stream(&setup, index, &acked).await
        } else {
            stream(&setup, index, &acked).await
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
        id: format!(
            "sidecar~{}~client-{index}.{namespace}~{namespace}.svc.cluster.local",
            client_ip(index)
        ),
        ..Default::default()
    }
}

/// One state-of-the-world stream: subscribes, follows EDS/RDS names, ACKs
/// everything; returns why it ended.
async fn stream(setup: &ClientSetup, index: usize, acked: &Acked) -> String {
    let mut h2 = match GrpcStream::open(setup.port, &setup.headers).await {
        Ok(h2) => h2,
        Err(reason) => return reason,
    };
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
            Err(reason) => return reason,
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
        if response.type_url == RDS {
            acked.rds(&response.version_info);
        }
        if response.type_url == EDS {
            acked.eds(&response.version_info, size);
        }
        if let Some(follow_up) = follow_up {
            h2.send(&follow_up.0);
        }
    }
}

/// One delta stream: subscribes to CDS and LDS, then to the EDS and RDS
/// names those carry as they come and go; ACKs everything.
async fn delta_stream(setup: &ClientSetup, index: usize, acked: &Acked) -> String {
    let mut h2 = match GrpcStream::open(setup.port, &setup.headers).await {
        Ok(h2) => h2,
        Err(reason) => return reason,
    };
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
            Err(reason) => return reason,
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
        if response.type_url == RDS {
            acked.rds(&response.system_version_info);
        }
        if response.type_url == EDS {
            acked.eds(&response.system_version_info, size);
        }
        if let Some(follow_up) = follow_up {
            h2.send(&follow_up.0);
        }
    }
}

/// The allocator options of the clients' processes on a jemalloc build:
/// its defaults, not the server's tuning (`.cargo/config.toml`).
pub const CLIENTS_MALLOC_CONF: &str = "dirty_decay_ms:10000";

/// The child process's arguments, if this process is one.
pub fn child_args(args: &[String]) -> Option<(usize, u16, usize, bool)> {
    let at = args.iter().position(|a| a == "--clients")?;
    let clients = args[at + 1].parse().expect("a client count");
    let port = args
        .iter()
        .position(|a| a == "--port")
        .and_then(|at| args[at + 1].parse().ok())
        .expect("a port");
    let namespaces = args
        .iter()
        .position(|a| a == "--namespaces")
        .and_then(|at| args[at + 1].parse().ok())
        .unwrap_or(1);
    Some((clients, port, namespaces, args.iter().any(|a| a == "--delta")))
}

/// The child process: runs `clients` clients against `port`, and answers
/// `wait VERSION START_US` on stdin with every client's time from START to
/// its ACK of RDS at VERSION or later (µs, one line), once all have;
/// `eds VERSION START_US` likewise for EDS, each time followed by
/// `/BYTES` (the EDS responses of that version), either followed by the
/// clients to wait for (comma-separated indices; all without);
/// `responses` with every client's count of responses received so far,
/// `responses eds` of EDS responses; `cpu` with the process's
/// CPU time (ms); `received` with the bytes of responses each client
/// received so far (the mean); `reconnects` with the reconnections, their
/// reasons and the bytes received by type.
pub fn clients_main(clients: usize, port: u16, namespaces: usize, delta: bool) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let setup = ClientSetup {
        port,
        namespaces,
        delta,
        headers: h2_stream::request_headers(port, if delta { DELTA_PATH } else { PATH }),
    };
    let acked: Vec<Arc<Acked>> = (0..clients).map(|_| Arc::default()).collect();
    let reconnects = Arc::new(Reconnects::default());
    runtime.block_on(async {
        for (i, a) in acked.iter().enumerate() {
            tokio::spawn(client(setup.clone(), i, Arc::clone(a), Arc::clone(&reconnects)));
        }
        let (lines_tx, mut lines) = mpsc::channel::<String>(1);
        std::thread::spawn(move || {
            for line in BufReader::new(std::io::stdin()).lines() {
                let Ok(line) = line else { break };
                if lines_tx.blocking_send(line).is_err() {
                    break;
                }
            }
        });
        while let Some(line) = lines.recv().await {
            if line == "cpu" {
                println!("{}", cpu_time().as_millis());
                let _ = std::io::stdout().flush();
                continue;
            }
            if line == "responses" || line == "responses eds" {
                let counter = |a: &Acked| {
                    if line == "responses" {
                        a.responses.load(Ordering::Relaxed)
                    } else {
                        a.eds_responses.load(Ordering::Relaxed)
                    }
                };
                let counts: Vec<String> = acked.iter().map(|a| counter(a).to_string()).collect();
                println!("{}", counts.join(" "));
                let _ = std::io::stdout().flush();
                continue;
            }
            if line == "received" {
                let total: u64 = RECEIVED.iter().map(|r| r.load(Ordering::Relaxed)).sum();
                println!("{}", total / clients.max(1) as u64);
                let _ = std::io::stdout().flush();
                continue;
            }
            if line == "reconnects" {
                let reasons = reconnects.reasons.lock().unwrap().clone();
                let reasons: Vec<String> = reasons.iter().map(|(r, n)| format!("{n}x {r}")).collect();
                let kb = |at: usize| RECEIVED[at].load(Ordering::Relaxed) as f64 / 1024.0 / clients as f64;
                println!(
                    "received per client CDS {:.0} KB, EDS {:.0} KB, LDS {:.0} KB, RDS {:.0} KB; {} reconnects; {}",
                    kb(0),
                    kb(1),
                    kb(2),
                    kb(3),
                    reconnects.total.load(Ordering::Relaxed),
                    if reasons.is_empty() {
                        "none".to_string()
                    } else {
                        reasons.join("; ")
                    }
                );
                let _ = std::io::stdout().flush();
                continue;
            }
            let eds = line.starts_with("eds");
            let mut words = line.split_whitespace().skip(1);
            let (Some(version), Some(start)) = (
                words.next().and_then(|w| w.parse::<u64>().ok()),
                words.next().and_then(|w| w.parse::<u64>().ok()),
            ) else {
                return;
            };
            // An optional third word: the clients to wait for (indices,
            // comma-separated); every client without it.
            let only: Option<Vec<usize>> = words
                .next()
                .map(|w| w.split(',').filter_map(|i| i.parse().ok()).collect());
            let waited: Vec<&Arc<Acked>> = match &only {
                Some(only) => only.iter().filter_map(|&i| acked.get(i)).collect(),
                None => acked.iter().collect(),
            };
            let seen = |a: &Acked| {
                if eds {
                    a.eds_version.load(Ordering::Acquire)
                } else {
                    a.version.load(Ordering::Acquire)
                }
            };
            while waited.iter().any(|a| seen(a) < version) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let times: Vec<String> = waited
                .iter()
                .map(|a| {
                    if eds {
                        format!(
                            "{}/{}",
                            a.eds_at.load(Ordering::Relaxed).saturating_sub(start),
                            a.eds_bytes.load(Ordering::Relaxed)
                        )
                    } else {
                        a.at.load(Ordering::Relaxed).saturating_sub(start).to_string()
                    }
                })
                .collect();
            println!("{}", times.join(" "));
            let _ = std::io::stdout().flush();
        }
    });
}

/// The clients' process, seen from the parent.
pub struct Clients {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Clients {
    /// Starts `clients` clients of this same binary against `port`.
    pub fn start(clients: usize, port: u16, namespaces: usize, delta: bool) -> Self {
        let mut command = std::process::Command::new(std::env::current_exe().expect("own path"));
        command.args([
            "--clients",
            &clients.to_string(),
            "--port",
            &port.to_string(),
            "--namespaces",
            &namespaces.to_string(),
        ]);
        if delta {
            command.arg("--delta");
        }
        // The clients keep jemalloc's default decay (on a jemalloc build)
        // whatever the server's is: the storm's figures depend on both.
        let mut child = command
            .env("_RJEM_MALLOC_CONF", CLIENTS_MALLOC_CONF)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the clients");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Clients { child, stdin, stdout }
    }

    /// Every client's time from `start` (µs since the epoch) to its ACK of
    /// RDS at `version` or later, sorted.
    pub fn wait_acked(&mut self, version: u64, start: u64) -> Vec<Duration> {
        self.ask("wait", version, start).0
    }

    /// [`ask`](Self::ask) of the clients `only` (indices) alone.
    pub fn ask_by(&mut self, what: &str, version: u64, start: u64, only: &[usize]) -> (Vec<Duration>, f64) {
        let only: Vec<String> = only.iter().map(usize::to_string).collect();
        self.ask_line(&format!("{what} {version} {start} {}", only.join(",")))
    }

    /// Every client's count of responses received so far (any type), by
    /// index.
    pub fn responses(&mut self) -> Vec<u64> {
        self.count("responses")
    }

    /// Every client's count of EDS responses received so far, by index.
    pub fn eds_responses(&mut self) -> Vec<u64> {
        self.count("responses eds")
    }

    /// The per-client counts the clients answer `question` with.
    fn count(&mut self, question: &str) -> Vec<u64> {
        writeln!(self.stdin, "{question}").expect("clients alive");
        self.stdin.flush().expect("clients alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("clients answer");
        line.split_whitespace()
            .map(|w| w.parse().expect("a number"))
            .collect()
    }

    /// Sends `what VERSION START` and reads the sorted times and the mean
    /// of the bytes (EDS) that follow them.
    pub fn ask(&mut self, what: &str, version: u64, start: u64) -> (Vec<Duration>, f64) {
        self.ask_line(&format!("{what} {version} {start}"))
    }

    /// Sends `line` and reads the sorted times and the mean of the bytes
    /// (EDS) that follow them.
    fn ask_line(&mut self, line: &str) -> (Vec<Duration>, f64) {
        writeln!(self.stdin, "{line}").expect("clients alive");
        self.stdin.flush().expect("clients alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("clients answer");
        let mut bytes = 0u64;
        let mut times: Vec<Duration> = line
            .split_whitespace()
            .map(|w| {
                let (time, size) = w.split_once('/').unwrap_or((w, "0"));
                bytes += size.parse::<u64>().expect("a number");
                Duration::from_micros(time.parse().expect("a number"))
            })
            .collect();
        assert!(!times.is_empty(), "the clients process ended");
        times.sort();
        let mean = bytes as f64 / times.len() as f64;
        (times, mean)
    }

    /// The clients' process's CPU time so far (user + system).
    pub fn cpu(&mut self) -> Duration {
        writeln!(self.stdin, "cpu").expect("clients alive");
        self.stdin.flush().expect("clients alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("clients answer");
        Duration::from_millis(line.trim().parse().expect("milliseconds"))
    }

    /// The bytes of responses each client received so far (the mean of
    /// whole encoded messages).
    pub fn received(&mut self) -> u64 {
        writeln!(self.stdin, "received").expect("clients alive");
        self.stdin.flush().expect("clients alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("clients answer");
        line.trim().parse().expect("bytes")
    }

    /// The clients' reconnections and why, one line.
    pub fn reconnects(&mut self) -> String {
        writeln!(self.stdin, "reconnects").expect("clients alive");
        self.stdin.flush().expect("clients alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("clients answer");
        line.trim().to_string()
    }

    /// Ends the clients' process.
    pub fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

/// This process's CPU time so far (user + system, every thread), from
/// `/proc/self/stat` (clock ticks of 10 ms).
pub fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command (in parentheses, which may hold spaces):
    // utime and stime are the 14th and 15th fields overall.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // State is the 3rd field overall, index 0 here; utime is index 11.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// How long this process's threads have waited for a CPU while runnable
/// (the run queue's delay, `/proc/self/task/*/schedstat`; threads gone
/// since are not counted). Far more than the CPU time used means other
/// work on the machine took the cores: the figures then measure the
/// scheduler (under autogroup scheduling, `nice` alone does not help
/// against another session's builds).
pub fn cpu_wait() -> Duration {
    let tasks = std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten();
    let nanos: u64 = tasks
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

pub fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}
