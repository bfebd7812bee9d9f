//! The `ads` bench's scoped mesh (`--scoped K`): `--services` services
//! spread over the clients' `--namespaces` (`svc-{s}` lives in namespace
//! `ns{s % namespaces}`, with four instances and a 50/50 RouteRule of its
//! namespace), and in every namespace a default Sidecar importing its own
//! namespace (`./*`) plus K services of other namespaces, so each proxy
//! sees about `services / namespaces + K` services. Two hosts are special:
//! `svc-1` (the shared host) is imported by every namespace, and `svc-0`
//! (the narrow host) by 1% of the namespaces (its own included), so by 1%
//! of the proxies. `svc-2` is a typical service: seen by its own
//! namespace and the one other namespace importing it (when the sizes
//! divide).
//!
//! One run, one process, baselines first:
//! 1. the same mesh without any Sidecar, with `--baseline-clients`
//!    clients (default 20): the bytes each receives at connect, unscoped;
//! 2. the scoped mesh with all the clients: the connect storm, the bytes
//!    per client, the server's RSS (and, on jemalloc, its allocated,
//!    active and resident heap) before and after they connected;
//! 3. a rule change of the narrow host: which clients were sent anything
//!    (counted by the clients, and the responses the server sent), those
//!    clients' ACK times, the server's CPU;
//! 4. a rule change of the shared host (an all-proxy push): the same;
//! 5. one endpoint added to the shared host: every client's EDS ACK;
//! 6. one endpoint added to the typical service: which clients were sent
//!    EDS (counted by the clients), and those clients' EDS ACK times;
//! 7. the loopback floor for the storm's bytes (`floor.rs`).
//!
//! Each push also gives when the server published it: from its first
//! change reaching the push pipeline to the snapshot sessions are woken
//! with (the debounce, `XdsOptions::debounce_quiet` and `debounce_max`,
//! and the rules' compilation included).
//!
//! With `--churn`, after step 6 the shared host (then given 100 instances)
//! rolls under churn (`churn.rs`), with its own table.
//!
//! Each figure is printed with the load average when it was taken. With
//! `--storm-only`, steps 3 to 6 are left out (to profile the storm).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "churn.rs"]
mod churn;

use crate::serving::Serving;
use pilot_ads::XdsOptions;
use pilot_model::{ConfigKey, ConfigStore, DynConfig, Labels, Port, Protocol, Service};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::ads::proxies::Proxies;
use pilot_test_support::measure::{cpu_wait, now_micros, percentile, rss_mb};

/// The host imported by 1% of the proxies.
const NARROW: usize = 0;
/// The host imported by every proxy.
const SHARED: usize = 1;
/// A typical service: seen by its namespace and the namespace importing it.
const TYPICAL: usize = 2;

/// The scoped mesh's shape.
pub(crate) struct Layout {
    pub services: usize,
    pub namespaces: usize,
    /// Services of other namespaces each namespace's Sidecar imports.
    pub imports: usize,
    /// The namespaces that see the narrow host.
    narrow: BTreeSet<usize>,
    /// The churn scenario (`--churn`, `churn.rs`) after the other steps;
    /// the shared host then has `churn::SHARED_INSTANCES` instances.
    pub churn: bool,
}

impl Layout {
    pub(crate) fn new(services: usize, namespaces: usize, imports: usize) -> Self {
        assert!(namespaces >= 2, "--scoped needs --namespaces 2 or more");
        let mut layout = Layout {
            services,
            namespaces,
            imports,
            narrow: BTreeSet::new(),
            churn: false,
        };
        // Its own namespace, those importing it anyway, then more until
        // they are 1% of the namespaces.
        let share = namespaces.div_ceil(100);
        layout.narrow = (0..namespaces).filter(|&n| layout.sees(n, NARROW)).collect();
        let mut n = 1;
        while layout.narrow.len() < share && n < namespaces {
            layout.narrow.insert(n);
            n += 1;
        }
        layout
    }

    fn namespace(&self, service: usize) -> usize {
        service % self.namespaces
    }

    fn host(&self, service: usize) -> String {
        format!("svc-{service}.ns{}.svc.cluster.local", self.namespace(service))
    }

    /// The services of other namespaces namespace `n` imports: K spread
    /// over the mesh (each service imported by one namespace when the
    /// sizes divide), the shared host, the narrow host for a few.
    fn imported(&self, n: usize) -> BTreeSet<usize> {
        let mut imported: BTreeSet<usize> = (0..self.imports)
            .map(|j| (n * self.imports + j + self.services / 2) % self.services)
            .chain([SHARED])
            .chain(self.narrow.contains(&n).then_some(NARROW))
            .collect();
        imported.retain(|&s| self.namespace(s) != n);
        imported
    }

    fn sees(&self, n: usize, service: usize) -> bool {
        self.namespace(service) == n || self.imported(n).contains(&service)
    }

    /// The clients (of `clients`, client `i` in namespace `ns{i % N}`)
    /// that see `service`.
    fn clients_seeing(&self, clients: usize, service: usize) -> Vec<usize> {
        (0..clients)
            .filter(|i| self.sees(i % self.namespaces, service))
            .collect()
    }

    /// Namespace `n`'s default Sidecar.
    fn sidecar(&self, n: usize) -> DynConfig {
        let hosts: Vec<String> = std::iter::once("\"./*\"".to_string())
            .chain(
                self.imported(n)
                    .into_iter()
                    .map(|s| format!("\"ns{}/{}\"", self.namespace(s), self.host(s))),
            )
            .collect();
        let yaml = format!(
            "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: ns{n}}}\nspec:\n  egress: [{{hosts: [{}]}}]\n",
            hosts.join(", ")
        );
        let mut objects = pilot_model::document::parse("sidecar.yaml", &yaml, &pilot_api::default_registry())
            .expect("a valid Sidecar");
        objects.remove(0)
    }

    /// Service `service`'s split rule (`v1` percent to v1), in its
    /// namespace.
    fn split(&self, service: usize, v1: i32) -> DynConfig {
        let name = format!("svc-{service}");
        let mut rule = crate::common::split_rule(&name, &format!("{name}-split"), v1);
        rule.meta.namespace = format!("ns{}", self.namespace(service));
        rule.to_dyn().expect("serializes")
    }

    /// Service `service`'s HTTPRoute (the Gateway API in the mesh: its
    /// parent is the Service), which sets the header `x-split` to
    /// `value` on the requests it sends to the Service.
    fn route(&self, service: usize, value: i32) -> DynConfig {
        let yaml = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: svc-{service}-route, namespace: ns{}}}\n\
             spec:\n  parentRefs:\n  - {{group: \"\", kind: Service, name: svc-{service}, port: 9080}}\n  rules:\n  \
             - filters:\n    - type: RequestHeaderModifier\n      requestHeaderModifier: {{set: [{{name: x-split, value: \"{value}\"}}]}}\n    \
             backendRefs:\n    - {{name: svc-{service}, port: 9080}}\n",
            self.namespace(service)
        );
        let mut objects = pilot_model::document::parse("route.yaml", &yaml, &pilot_api::default_registry())
            .expect("a valid HTTPRoute");
        objects.remove(0)
    }

    /// Service `service`'s VirtualService, which sets the header
    /// `x-split-vs` to `value` on the requests it routes to the Service:
    /// the same change as [`Layout::route`]'s, written as Istio's kind.
    fn virtual_service(&self, service: usize, value: i32) -> DynConfig {
        let host = self.host(service);
        let yaml = format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: svc-{service}-vs, namespace: ns{}}}\n\
             spec:\n  hosts: [{host}]\n  http:\n  - headers: {{request: {{set: {{x-split-vs: \"{value}\"}}}}}}\n    \
             route: [{{destination: {{host: {host}}}}}]\n",
            self.namespace(service)
        );
        let mut objects = pilot_model::document::parse("vs.yaml", &yaml, &pilot_api::default_registry())
            .expect("a valid VirtualService");
        objects.remove(0)
    }

    /// An HTTPRoute attached to the Gateway API Gateway `edge` (no client
    /// is a router serving it), routing `edge.example.com` to service
    /// `service` with the header `x-edge` set to `value`.
    fn edge_route(&self, service: usize, value: i32) -> DynConfig {
        let yaml = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: edge-route, namespace: ns0}}\n\
             spec:\n  parentRefs: [{{name: edge}}]\n  hostnames: [edge.example.com]\n  rules:\n  \
             - filters:\n    - type: RequestHeaderModifier\n      requestHeaderModifier: {{set: [{{name: x-edge, value: \"{value}\"}}]}}\n    \
             backendRefs:\n    - {{name: svc-{service}, namespace: ns{}, port: 9080}}\n",
            self.namespace(service)
        );
        let mut objects = pilot_model::document::parse("edge.yaml", &yaml, &pilot_api::default_registry())
            .expect("a valid HTTPRoute");
        objects.remove(0)
    }

    /// The GatewayClass of pilot's controller and its Gateway `edge`
    /// (ns0), which the edge route attaches to, and a ReferenceGrant
    /// letting ns0's routes send to every namespace's Services.
    fn edge_gateway(&self) -> Vec<DynConfig> {
        let mut yaml = String::from(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: pilot}\n\
             spec: {controllerName: pilot.io/gateway-controller}\n---\n\
             apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: ns0}\n\
             spec:\n  gatewayClassName: pilot\n  listeners: [{name: http, protocol: HTTP, port: 80}]\n",
        );
        let target = self.namespace(NARROW);
        if target != 0 {
            yaml.push_str(&format!(
                "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: from-edge, namespace: ns{target}}}\n\
                 spec:\n  from: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: ns0}}]\n  to: [{{group: \"\", kind: Service}}]\n"
            ));
        }
        pilot_model::document::parse("gateway.yaml", &yaml, &pilot_api::default_registry())
            .expect("a valid Gateway")
    }

    /// The services with their instances and rules (and the narrow host's
    /// HTTPRoute and VirtualService, a Gateway and a route bound to it),
    /// and the Sidecars when `scoped`.
    async fn populate(&self, registry: &MemoryServiceRegistry, store: &MemoryConfigStore, scoped: bool) {
        for s in 0..self.services {
            let host = self.host(s);
            registry.add_service(Service::new(&host, vec![Port::new("http", 9080, Protocol::Http)]));
            for i in 0..4u32 {
                let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (s as u32) * 4 + i));
                let labels = Labels::from_pairs([("version", if i < 2 { "v1" } else { "v2" })]);
                registry.add_endpoints(&host, ip, labels).expect("service exists");
            }
            if self.churn && s == SHARED {
                for i in 4..churn::SHARED_INSTANCES {
                    let labels = Labels::from_pairs([("version", if i % 2 == 0 { "v1" } else { "v2" })]);
                    registry
                        .add_endpoints(&host, churn::shared_ip(i), labels)
                        .expect("service exists");
                }
            }
            store.create(self.split(s, 50)).await.expect("create");
        }
        store.create(self.route(NARROW, 50)).await.expect("create");
        store
            .create(self.virtual_service(NARROW, 50))
            .await
            .expect("create");
        for object in self.edge_gateway() {
            store.create(object).await.expect("create");
        }
        store.create(self.edge_route(NARROW, 50)).await.expect("create");
        if scoped {
            for n in 0..self.namespaces {
                store.create(self.sidecar(n)).await.expect("create");
            }
        }
    }
}

/// The load average over the last minute.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

/// A server on the mesh, serving on a free loopback port.
struct Running {
    serving: Serving,
    store: MemoryConfigStore,
    registry: Arc<MemoryServiceRegistry>,
}

async fn start(layout: &Layout, scoped: bool) -> Running {
    let store = MemoryConfigStore::new(pilot_api::default_registry());
    let registry = MemoryServiceRegistry::new();
    layout.populate(&registry, &store, scoped).await;
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    controller.wait_synced().await;
    let registry = Arc::new(registry);
    let serving = Serving::start(
        controller,
        Arc::clone(&registry) as Arc<dyn pilot_model::ServiceDiscovery>,
        XdsOptions::default(),
    )
    .await;
    Running {
        serving,
        store,
        registry,
    }
}

impl Running {
    async fn shut(self) {
        self.serving.stop().await;
    }

    /// Rewrites service `service`'s split rule to `v1` percent; returns
    /// the version that push will carry.
    async fn write(&self, layout: &Layout, service: usize, v1: i32) -> u64 {
        let key = ConfigKey::new(
            "RouteRule",
            format!("ns{}", layout.namespace(service)),
            format!("svc-{service}-split"),
        );
        let current = self.store.get(&key).await.unwrap().expect("the rule exists");
        let mut next = layout.split(service, v1);
        next.meta.resource_version = current.meta.resource_version.clone();
        let version = self.serving.server.version().unwrap() + 1;
        self.store.update(next).await.expect("update");
        version
    }

    /// Rewrites the HTTPRoute attached to the Gateway to send to
    /// `service` with `value`; returns the version that push will carry.
    async fn write_edge_route(&self, layout: &Layout, service: usize, value: i32) -> u64 {
        let key = ConfigKey::new("HTTPRoute.gateway.networking.k8s.io", "ns0", "edge-route");
        let current = self
            .store
            .get(&key)
            .await
            .unwrap()
            .expect("the edge route exists");
        let mut next = layout.edge_route(service, value);
        next.meta.resource_version = current.meta.resource_version.clone();
        let version = self.serving.server.version().unwrap() + 1;
        self.store.update(next).await.expect("update");
        version
    }

    /// Rewrites service `service`'s HTTPRoute (or, with `istio`, its
    /// VirtualService) to set `value`; returns the version that push will
    /// carry.
    async fn write_route(&self, layout: &Layout, service: usize, value: i32, istio: bool) -> u64 {
        let (kind, name) = if istio {
            ("VirtualService", format!("svc-{service}-vs"))
        } else {
            (
                "HTTPRoute.gateway.networking.k8s.io",
                format!("svc-{service}-route"),
            )
        };
        let key = ConfigKey::new(kind, format!("ns{}", layout.namespace(service)), name);
        let current = self.store.get(&key).await.unwrap().expect("the route exists");
        let mut next = if istio {
            layout.virtual_service(service, value)
        } else {
            layout.route(service, value)
        };
        next.meta.resource_version = current.meta.resource_version.clone();
        let version = self.serving.server.version().unwrap() + 1;
        self.store.update(next).await.expect("update");
        version
    }

    /// The responses the server has sent, every type.
    fn sent(&self) -> u64 {
        self.serving.server.sent_by_type().iter().map(|(_, n)| n).sum()
    }
}

/// A change the bench pushes.
#[derive(Clone, Copy)]
enum Change {
    /// The service's split rule rewritten to this percentage to v1.
    Rule(i32),
    /// The service's HTTPRoute rewritten to set this header value.
    Route(i32),
    /// The service's VirtualService rewritten to set this header value.
    VirtualService(i32),
    /// The route attached to the Gateway rewritten to send to the service
    /// with this header value (no client is served the Gateway).
    Edge(i32),
    /// A `version=v1` instance at this address added to the service.
    Endpoint(Ipv4Addr),
}

/// What one change cost: the clients sent anything and those sent EDS
/// (counted by the clients), the responses the server sent, the
/// waited-for clients' ACK times (RDS for a rule, EDS for an endpoint)
/// and the mean bytes of EDS they received for it, the server's CPU until
/// the last of them, when the push was published, the load then.
struct Push {
    reached: Vec<usize>,
    eds: Vec<usize>,
    sent: u64,
    times: Vec<Duration>,
    eds_bytes: f64,
    cpu: Duration,
    /// The server's CPU to the end of the second after (the push's whole
    /// work, when no client waits for it).
    cpu_settled: Duration,
    published: Option<Duration>,
    load: String,
}

/// The clients whose count grew from `before` to `after`.
fn grown(before: &[u64], after: &[u64]) -> Vec<usize> {
    before
        .iter()
        .zip(after)
        .enumerate()
        .filter(|(_, (b, a))| a > b)
        .map(|(i, _)| i)
        .collect()
}

/// Makes `change` to `service` and waits for the clients `expected` to
/// ACK it; then, after a second for stragglers, counts who was sent
/// anything, and EDS.
async fn push(
    running: &Running,
    child: &mut Proxies,
    layout: &Layout,
    service: usize,
    change: Change,
    expected: &[usize],
) -> Push {
    let before = tokio::task::block_in_place(|| (child.responses(), child.eds_responses()));
    let sent = running.sent();
    let mut pushes = running.serving.server.subscribe_pushes();
    let cpu_start = crate::cpu_time();
    let cpu = cpu_start;
    let start = now_micros();
    let (version, acked) = match change {
        Change::Rule(v1) => (running.write(layout, service, v1).await, "wait"),
        Change::Route(value) => (running.write_route(layout, service, value, false).await, "wait"),
        Change::VirtualService(value) => (running.write_route(layout, service, value, true).await, "wait"),
        Change::Edge(value) => (running.write_edge_route(layout, service, value).await, "wait"),
        Change::Endpoint(ip) => {
            let version = running.serving.server.version().unwrap() + 1;
            running
                .registry
                .add_endpoints(
                    &layout.host(service),
                    IpAddr::V4(ip),
                    Labels::from_pairs([("version", "v1")]),
                )
                .expect("service exists");
            (version, "eds")
        }
    };
    // No client to wait for (a change none is served): the push's own
    // end is waited for below.
    let (times, eds_bytes) = if expected.is_empty() {
        (Vec::new(), 0.0)
    } else {
        tokio::task::block_in_place(|| child.ask_by(acked, version, start, expected))
    };
    let cpu = crate::cpu_time().saturating_sub(cpu);
    let load = load();
    let mut published = None;
    while let Some(info) = pushes.next().await {
        if info.version >= version {
            published = info.latency;
            break;
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cpu_settled = crate::cpu_time().saturating_sub(cpu_start);
    let after = tokio::task::block_in_place(|| (child.responses(), child.eds_responses()));
    Push {
        reached: grown(&before.0, &after.0),
        eds: grown(&before.1, &after.1),
        sent: running.sent() - sent,
        times,
        eds_bytes,
        cpu,
        cpu_settled,
        published,
        load,
    }
}

/// The p50 / p99 / max of sorted `times`.
fn percentiles(times: &[Duration]) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    format!(
        "{:.0} / {:.0} / {:.0} ms",
        ms(percentile(times, 0.5)),
        ms(percentile(times, 0.99)),
        ms(*times.last().unwrap())
    )
}

/// The bench's run on the scoped mesh with `clients` clients (see the
/// module's doc); prints its table.
pub(crate) async fn run(clients: usize, layout: Layout, baseline_clients: usize, storm_only: bool) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let kb = |b: f64| b / 1024.0;
    // 1. The same mesh unscoped: bytes per client at connect.
    let unscoped = start(&layout, false).await;
    let started = Instant::now();
    let start_us = now_micros();
    let mut child = Proxies::start(baseline_clients, unscoped.serving.port, layout.namespaces, false);
    tokio::task::block_in_place(|| child.wait_acked(1, start_us));
    let unscoped_storm = started.elapsed();
    let unscoped_bytes = tokio::task::block_in_place(|| child.received()) as f64;
    let unscoped_load = load();
    child.stop();
    unscoped.shut().await;

    // 2. The scoped mesh: the storm.
    let running = start(&layout, true).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_before = rss_mb();
    let heap_before = crate::heap_stats();
    let cpu = crate::cpu_time();
    let waited = cpu_wait();
    let started = Instant::now();
    let start_us = now_micros();
    let mut child = if layout.churn {
        Proxies::start_watching(
            clients,
            running.serving.port,
            layout.namespaces,
            false,
            &layout.host(SHARED),
        )
    } else {
        Proxies::start(clients, running.serving.port, layout.namespaces, false)
    };
    let watching = running.serving.server.clone();
    let progress = tokio::spawn(async move {
        let started = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            eprintln!(
                "  {:>4.0} s: {} streams open; ended: {:?}; RSS {:.0} MB",
                started.elapsed().as_secs_f64(),
                watching.status().len(),
                watching.stream_ends(),
                rss_mb()
            );
        }
    });
    let initial = tokio::task::block_in_place(|| child.wait_acked(1, start_us));
    progress.abort();
    let storm = started.elapsed();
    let storm_cpu = crate::cpu_time().saturating_sub(cpu);
    let storm_wait = cpu_wait().saturating_sub(waited);
    let storm_load = load();
    let clients_cpu = tokio::task::block_in_place(|| child.cpu());
    let scoped_bytes = tokio::task::block_in_place(|| child.received());
    // Right after the last client synced the server is still reading
    // the last ACKs (its CPU busy to the end of the storm): what it holds
    // per proxy is read once it is idle (under 5 ms of CPU in 100 ms, 3 s
    // at most), with the figure of that instant beside it.
    let rss_synced = rss_mb();
    let quiet = Instant::now();
    loop {
        let cpu = crate::cpu_time();
        tokio::time::sleep(Duration::from_millis(100)).await;
        if crate::cpu_time().saturating_sub(cpu) < Duration::from_millis(5)
            || quiet.elapsed() > Duration::from_secs(3)
        {
            break;
        }
    }
    let quiet = quiet.elapsed();
    let rss_connected = rss_mb();
    let heap_connected = crate::heap_stats();
    let rss_load = load();
    let storm_line = |floor: &crate::floor::Floor, floor_wait: Duration, floor_load: &str| {
        format!(
            "| connect storm, all synced (p50 / p99 / max ACK {}); server CPU {:.1} s (waited for a CPU {:.1} s), clients' CPU {:.1} s | {:.1} s | loopback floor {:.2} s (server CPU {:.2} s, waited {:.2} s; clients' {:.2} s; load {floor_load}) | {:.2}x | within 2x | {storm_load} |",
            percentiles(&initial),
            ms(storm_cpu) / 1e3,
            storm_wait.as_secs_f64(),
            clients_cpu.as_secs_f64(),
            storm.as_secs_f64(),
            floor.wall.as_secs_f64(),
            floor.server_cpu.as_secs_f64(),
            floor_wait.as_secs_f64(),
            floor.clients_cpu.as_secs_f64(),
            storm.as_secs_f64() / floor.wall.as_secs_f64(),
        )
    };
    if storm_only {
        let reconnects = tokio::task::block_in_place(|| child.reconnects());
        child.stop();
        running.shut().await;
        let waited = cpu_wait();
        let floor = crate::floor::run(clients, scoped_bytes as usize, crate::cpu_time).await;
        let floor_wait = cpu_wait().saturating_sub(waited);
        println!("{}", storm_line(&floor, floor_wait, &load()));
        println!("| clients: {reconnects} | | | | | |");
        return;
    }

    // 3. and 4. The narrow push, then the all-proxy push.
    let narrow_expected = layout.clients_seeing(clients, NARROW);
    let narrow = push(
        &running,
        &mut child,
        &layout,
        NARROW,
        Change::Rule(80),
        &narrow_expected,
    )
    .await;
    let everyone: Vec<usize> = (0..clients).collect();
    let shared_expected = layout.clients_seeing(clients, SHARED);
    assert_eq!(shared_expected, everyone, "every client sees the shared host");
    let shared = push(&running, &mut child, &layout, SHARED, Change::Rule(80), &everyone).await;
    // 4b. The narrow host's HTTPRoute (GAMMA) changed: the same audience
    // as its rule's change.
    let gamma = push(
        &running,
        &mut child,
        &layout,
        NARROW,
        Change::Route(80),
        &narrow_expected,
    )
    .await;
    let istio = push(
        &running,
        &mut child,
        &layout,
        NARROW,
        Change::VirtualService(80),
        &narrow_expected,
    )
    .await;
    // 4c. The route attached to the Gateway changed: no client is a router
    // it selects, so none is sent anything, and no sidecar's class is
    // generated again.
    let edge = push(&running, &mut child, &layout, NARROW, Change::Edge(80), &[]).await;

    // 5. and 6. One endpoint added to the shared host, then to a typical
    // service.
    let shared_endpoint = Change::Endpoint(Ipv4Addr::new(10, 255, 0, 1));
    let endpoint = push(&running, &mut child, &layout, SHARED, shared_endpoint, &everyone).await;
    let typical_expected = layout.clients_seeing(clients, TYPICAL);
    let typical_endpoint = Change::Endpoint(Ipv4Addr::new(10, 255, 0, 2));
    let typical = push(
        &running,
        &mut child,
        &layout,
        TYPICAL,
        typical_endpoint,
        &typical_expected,
    )
    .await;
    // The rolling restart of the shared host, under churn elsewhere.
    if layout.churn {
        churn::run(&running, &mut child, &layout, clients).await;
    }
    let reconnects = tokio::task::block_in_place(|| child.reconnects());
    let ends = running.serving.server.stream_ends();
    child.stop();
    running.shut().await;

    // 7. The floor for the storm's bytes.
    let waited = cpu_wait();
    let floor = crate::floor::run(clients, scoped_bytes as usize, crate::cpu_time).await;
    let floor_wait = cpu_wait().saturating_sub(waited);
    let floor_load = load();
    // 8. h2's floor for the memory per proxy.
    let h2_floor = crate::h2_floor::run(clients, 0).await;
    // ... and of connections that carried what the proxies were sent.
    let h2_floor_sent = crate::h2_floor::run(clients, scoped_bytes as usize).await;

    let share = |set: &[usize]| 100.0 * set.len() as f64 / clients as f64;
    let p = percentiles;
    let exact = |reached: &[usize], expected: &[usize]| {
        if reached == expected {
            "exactly those".to_string()
        } else {
            let reached: BTreeSet<usize> = reached.iter().copied().collect();
            let expected: BTreeSet<usize> = expected.iter().copied().collect();
            format!(
                "NOT those: {} unexpected, {} missed",
                reached.difference(&expected).count(),
                expected.difference(&reached).count()
            )
        }
    };
    println!(
        "\nScoped mesh: {} services, {clients} clients over {} namespaces, Sidecars importing `./*` + {} other services (each proxy sees {} services)\n",
        layout.services,
        layout.namespaces,
        layout.imports,
        layout.services / layout.namespaces + layout.imported(layout.namespaces - 1).len(),
    );
    println!("| what | figure | baseline (same run) | ratio | target | load average |");
    println!("| --- | --- | --- | --- | --- | --- |");
    println!(
        "| bytes per client at connect | {:.1} KB | unscoped, same mesh ({baseline_clients} clients): {:.1} KB (load {unscoped_load}; its storm {:.1} s) | {:.2}% | ≤ 5% | {storm_load} |",
        kb(scoped_bytes as f64),
        kb(unscoped_bytes),
        unscoped_storm.as_secs_f64(),
        100.0 * scoped_bytes as f64 / unscoped_bytes,
    );
    println!("{}", storm_line(&floor, floor_wait, &floor_load));
    println!(
        "| server RSS per connected client, once the server is idle ({:.1} s after the storm) | {:.1} KB ({rss_before:.0} → {rss_connected:.0} MB) | right after the last client synced: {:.1} KB | — | < 20 KB | {rss_load} |",
        quiet.as_secs_f64(),
        (rss_connected - rss_before) * 1024.0 / clients as f64,
        (rss_synced - rss_before) * 1024.0 / clients as f64,
    );
    println!(
        "| pilot's overhead per connected client above h2's floor (RSS) | {:.1} KB | h2's floor: the same {clients} idle connections, one open stream each, on a bare hyper server: {:.1} KB | {:.2}x | ≤ 10 KB | {} |",
        (rss_connected - rss_before) * 1024.0 / clients as f64 - h2_floor.rss_kb,
        h2_floor.rss_kb,
        ((rss_connected - rss_before) * 1024.0 / clients as f64) / h2_floor.rss_kb,
        load(),
    );
    println!(
        "| the same, above h2's floor for connections that carried the proxies' bytes (RSS) | {:.1} KB | h2's floor, each stream first sent one {:.1} KB message its client reads: {:.1} KB | {:.2}x | — | {} |",
        (rss_connected - rss_before) * 1024.0 / clients as f64 - h2_floor_sent.rss_kb,
        kb(scoped_bytes as f64),
        h2_floor_sent.rss_kb,
        ((rss_connected - rss_before) * 1024.0 / clients as f64) / h2_floor_sent.rss_kb,
        load(),
    );
    if let (Some(before), Some(connected)) = (heap_before, heap_connected) {
        let per_client = |i: usize| (connected[i] as f64 - before[i] as f64) / 1024.0 / clients as f64;
        println!(
            "| the same, jemalloc: allocated / active / resident per connected client | {:.1} / {:.1} / {:.1} KB | {} | — | — | {rss_load} |",
            per_client(0),
            per_client(1),
            per_client(2),
            h2_floor.heap_kb.map_or_else(
                || "—".to_string(),
                |[a, b, c]| format!("h2's floor: {a:.1} / {b:.1} / {c:.1} KB")
            ),
        );
    }
    println!(
        "| rule change of a host seen by {:.1}% of the clients: clients sent anything | {} ({}); server sent {} responses | {} expected | — | exactly those | {} |",
        share(&narrow_expected),
        narrow.reached.len(),
        exact(&narrow.reached, &narrow_expected),
        narrow.sent,
        narrow_expected.len(),
        narrow.load,
    );
    let published = |push: &Push| {
        push.published
            .map_or("—".to_string(), |d| format!("{:.0} ms", ms(d)))
    };
    println!(
        "| the same: those ACKed, p50 / p99 / max (push published after {}) | {} | all-proxy push {} (published after {}) | — | p99 < 100 ms | {} |",
        published(&narrow),
        p(&narrow.times),
        p(&shared.times),
        published(&shared),
        narrow.load,
    );
    println!(
        "| the same: server CPU | {:.1} ms | all-proxy push {:.1} ms ({} clients sent anything, {}; server sent {} responses; load {}) | {:.2}x of 1% of it | ≤ 3x of 1% | {} |",
        ms(narrow.cpu),
        ms(shared.cpu),
        shared.reached.len(),
        exact(&shared.reached, &everyone),
        shared.sent,
        shared.load,
        ms(narrow.cpu) / (ms(shared.cpu) * 0.01),
        narrow.load,
    );
    println!(
        "| the same host's HTTPRoute (Gateway API, parent the Service) changed: clients sent anything | {} ({}); server sent {} responses | {} expected | — | exactly those | {} |",
        gamma.reached.len(),
        exact(&gamma.reached, &narrow_expected),
        gamma.sent,
        narrow_expected.len(),
        gamma.load,
    );
    println!(
        "| the same: those ACKed, p50 / p99 / max (push published after {}) | {} | the same change written as a VirtualService: {} ({} clients sent anything, {}) | — | p99 < 100 ms | {} |",
        published(&gamma),
        p(&gamma.times),
        p(&istio.times),
        istio.reached.len(),
        exact(&istio.reached, &narrow_expected),
        gamma.load,
    );
    println!(
        "| the same: server CPU | {:.1} ms | the same change written as a VirtualService: {:.1} ms | {:.2}x | ≤ 3x | {} |",
        ms(gamma.cpu),
        ms(istio.cpu),
        ms(gamma.cpu) / ms(istio.cpu),
        gamma.load,
    );
    println!(
        "| an HTTPRoute attached to a Gateway (no client serves it) changed: clients sent anything | {} ({}); server sent {} responses; server CPU to a second after {:.1} ms (push published after {}) | none expected; the narrow rule's change, CPU to a second after: {:.1} ms | {:.2}x | none | {} |",
        edge.reached.len(),
        exact(&edge.reached, &[]),
        edge.sent,
        ms(edge.cpu_settled),
        published(&edge),
        ms(narrow.cpu_settled),
        ms(edge.cpu_settled) / ms(narrow.cpu_settled),
        edge.load,
    );
    for (what, push, expected) in [
        ("the shared host (every client)", &endpoint, &everyone),
        ("a typical service (`svc-2`)", &typical, &typical_expected),
    ] {
        println!(
            "| one endpoint added to {what}: clients sent EDS | {} ({}); {} sent anything; server sent {} responses | {} expected | — | exactly those | {} |",
            push.eds.len(),
            exact(&push.eds, expected),
            push.reached.len(),
            push.sent,
            expected.len(),
            push.load,
        );
        println!(
            "| the same: those EDS ACKed, p50 / p99 / max (push published after {}; {:.2} KB of EDS per client); server CPU {:.0} ms | {} | — | — | p99 < 100 ms | {} |",
            published(push),
            kb(push.eds_bytes),
            ms(push.cpu),
            p(&push.times),
            push.load,
        );
    }
    println!("| clients: {reconnects}; server: streams ended {ends:?} | | | | | |");
}
