//! `ServiceEntry` and `WorkloadEntry` as a service registry: the
//! configuration kinds that add services the platform does not know
//! (external APIs, VMs), followed from a [`Controller`]'s cache and served
//! as one more registry among the others in an aggregate.
//!
//! Each host of a ServiceEntry becomes a [`Service`] with the entry's
//! ports, its first address (a VIP) and its location; how a proxy finds
//! its endpoints follows `resolution`, as Istio's conversion does:
//!
//! - `NONE`: [`ServiceResolution::Passthrough`], the connection's original
//!   destination;
//! - `STATIC`: the endpoints' addresses as the service's instances (sent
//!   over EDS, with their labels, weights, localities and service
//!   accounts);
//! - `DNS`: [`ServiceResolution::Dns`] over the endpoints' addresses, or
//!   the host itself when there are none (Envoy's `STRICT_DNS`);
//! - `DNS_ROUND_ROBIN`: the same as [`ServiceResolution::DnsRoundRobin`]
//!   (`LOGICAL_DNS`).
//!
//! With a `workloadSelector`, the endpoints are the WorkloadEntries of the
//! entry's namespace whose labels carry the selector's. Of two entries
//! with one host, the first by namespace and name has it (the aggregate
//! already gives a platform registry's service precedence).
//!
//! Each WorkloadEntry, and each endpoint written inline in a ServiceEntry,
//! is a [`Workload`] (`workloads.rs`), shared by the instances it backs;
//! the ones that back no instance (a WorkloadEntry no `STATIC` entry
//! selects, the endpoints of a `DNS` entry) are listed
//! ([`ServiceDiscovery::workloads`](pilot_model::ServiceDiscovery::workloads)).
//!
//! The entries are configuration, but they reach proxies as registry
//! changes: a write to either kind changes this registry, whose events
//! start a push like any registry's.
//!
//! ```
//! use pilot_api::networking::ServiceEntry;
//! use pilot_model::{Config, ServiceResolution, document};
//! use pilot_api::default_registry;
//! use pilot_store::service_entries::desired_state;
//!
//! let text = r#"
//! apiVersion: networking.istio.io/v1
//! kind: ServiceEntry
//! metadata: {name: api, namespace: default}
//! spec:
//!   hosts: [api.example.com]
//!   ports: [{number: 443, name: https, protocol: TLS}]
//!   resolution: DNS
//! "#;
//! let objects = document::parse("entry.yaml", text, &default_registry()).unwrap();
//! let entry = Config::<ServiceEntry>::from_dyn(&objects[0]).unwrap();
//! let desired = desired_state(&[entry], &[]);
//! let api = &desired.services["api.example.com"];
//! let ServiceResolution::Dns(names) = &api.service.resolution else { panic!() };
//! assert_eq!(names[0].address, "api.example.com");
//! assert!(api.service.mesh_external);
//! ```

mod workloads;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, Weak};

use futures::{FutureExt, StreamExt};
use pilot_api::networking::{Location, Resolution, ServiceEntry, ServicePort, WorkloadEntry};
use pilot_model::{
    Config, ConfigKind, DnsEndpoint, Labels, NetworkEndpoint, Port, Protocol, Service, ServiceInstance,
    ServiceResolution, Workload,
};

use crate::{Controller, DesiredService, DesiredState, FollowedRegistry, Notification, RegistryWriter};

/// A registry of the ServiceEntries and WorkloadEntries in `controller`'s
/// cache, kept up to date as they change (a task that lives as long as
/// the registry). It syncs once the Controller has; a Controller that does
/// not watch the kinds gives an empty, synced registry. Must be called
/// inside a Tokio runtime.
pub fn service_entry_registry(controller: &Arc<Controller>) -> FollowedRegistry {
    let weak = Arc::downgrade(controller);
    let events = controller.subscribe_all();
    FollowedRegistry::spawn(move |writer| follow(weak, events, writer))
}

/// What the registry holds for `entries` and `workloads`: each entry's
/// hosts as services, with their instances, and the workloads that back
/// none listed.
pub fn desired_state(entries: &[Config<ServiceEntry>], workloads: &[Config<WorkloadEntry>]) -> DesiredState {
    let mut ordered: Vec<&Config<ServiceEntry>> = entries.iter().collect();
    ordered.sort_by(|a, b| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)));
    let mut desired = DesiredState::new();
    // One Arc per WorkloadEntry, whichever entries select it.
    let mut listed: BTreeMap<String, Arc<Workload>> = workloads
        .iter()
        .map(|w| {
            let workload = workloads::workload_entry(w);
            (workload.uid.clone(), workload)
        })
        .collect();
    let mut attached = BTreeSet::new();
    for entry in ordered {
        let endpoints = endpoints_of(entry, workloads, &listed);
        let mut has_a_host = false;
        for host in &entry.spec.hosts {
            if desired.services.contains_key(host) {
                tracing::debug!(%host, entry = %entry.meta.name, "host already taken by an earlier service entry");
                continue;
            }
            has_a_host = true;
            let specs: Vec<WorkloadEntry> = endpoints.iter().map(|(e, _)| e.clone()).collect();
            let mut service = service_of(host, &entry.spec, &specs);
            service.created = entry.meta.creation_timestamp;
            let mut wanted = DesiredService::new(service);
            if entry.spec.resolution == Some(Resolution::Static) {
                wanted.instances = instances_of(&wanted.service, &entry.spec.ports, &endpoints);
                attached.extend(
                    wanted
                        .instances
                        .iter()
                        .filter_map(|i| Some(i.workload.as_ref()?.uid.clone())),
                );
            }
            desired.services.insert(host.clone(), wanted);
        }
        // The endpoints of an entry whose hosts were all taken reach no
        // proxy (as istiod drops them); its inline ones are no workloads.
        if has_a_host && entry.spec.workload_selector.is_none() {
            listed.extend(
                endpoints
                    .iter()
                    .filter_map(|(_, w)| Some((w.as_ref()?.uid.clone(), Arc::clone(w.as_ref()?)))),
            );
        }
    }
    listed.retain(|uid, _| !attached.contains(uid));
    desired.workloads = listed;
    desired
}

/// Follows the Controller: a full state once it has synced, then a new
/// one after every batch of changes to either kind.
async fn follow(
    controller: Weak<Controller>,
    mut events: futures::stream::BoxStream<'static, Notification<Arc<pilot_model::DynConfig>>>,
    writer: RegistryWriter,
) {
    let Some(synced) = controller.upgrade().map(|c| async move { c.wait_synced().await }) else {
        return;
    };
    synced.await;
    loop {
        let Some(current) = controller.upgrade() else {
            return;
        };
        writer.apply(read(&current));
        drop(current);
        // Wait for a change to one of the kinds, then take every
        // notification already queued: one apply per batch.
        loop {
            match events.next().await {
                None => return,
                Some(notification) if touches(&notification) => break,
                Some(_) => {}
            }
        }
        while let Some(Some(_)) = events.next().now_or_never() {}
    }
}

fn touches(notification: &Notification<Arc<pilot_model::DynConfig>>) -> bool {
    match notification {
        Notification::Event(event) => {
            let kind = event.object().meta.kind.as_str();
            kind == ServiceEntry::KIND || kind == WorkloadEntry::KIND
        }
        // Missed events may have been ours: read again.
        Notification::Lagged { .. } => true,
    }
}

/// The desired state of the Controller's cache now.
fn read(controller: &Controller) -> DesiredState {
    let entries = typed::<ServiceEntry>(controller);
    let workloads = typed::<WorkloadEntry>(controller);
    desired_state(&entries, &workloads)
}

fn typed<K: ConfigKind>(controller: &Controller) -> Vec<Config<K>> {
    // A Controller that does not watch the kind holds none of it.
    let Ok(objects) = controller.list_cached(&K::id(), None) else {
        return Vec::new();
    };
    objects
        .iter()
        .filter_map(|object| match Config::<K>::from_dyn(object) {
            Ok(config) => Some(config),
            Err(error) => {
                tracing::warn!(%error, "skipping an object that does not decode as its kind");
                None
            }
        })
        .collect()
}

/// An endpoint and the workload it is (none for a `unix://` one).
type Endpoint = (WorkloadEntry, Option<Arc<Workload>>);

/// The entry's endpoints with their workloads: the selected
/// WorkloadEntries of its namespace (by namespace and name; their
/// workloads from `by_uid`), else its own.
fn endpoints_of(
    entry: &Config<ServiceEntry>,
    workloads: &[Config<WorkloadEntry>],
    by_uid: &BTreeMap<String, Arc<Workload>>,
) -> Vec<Endpoint> {
    let Some(selector) = &entry.spec.workload_selector else {
        return entry
            .spec
            .endpoints
            .iter()
            .map(|e| (e.clone(), workloads::inline_endpoint(entry, e)))
            .collect();
    };
    let selector = Labels(selector.labels.clone());
    let mut selected: Vec<&Config<WorkloadEntry>> = workloads
        .iter()
        .filter(|w| w.meta.namespace == entry.meta.namespace)
        .filter(|w| selector.is_subset_of(&Labels(w.spec.labels.clone())))
        .collect();
    selected.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));
    selected
        .into_iter()
        .map(|w| {
            let uid = pilot_model::workload_uid(
                pilot_model::DEFAULT_CLUSTER_ID,
                pilot_model::WorkloadKind::WorkloadEntry,
                &w.meta.namespace,
                &w.meta.name,
            );
            (w.spec.clone(), by_uid.get(&uid).cloned())
        })
        .collect()
}

fn service_of(host: &str, entry: &ServiceEntry, endpoints: &[WorkloadEntry]) -> Service {
    let ports = entry
        .ports
        .iter()
        .filter_map(|p| {
            let number = u16::try_from(p.number).ok()?;
            Some(Port::new(p.name.clone(), number, protocol(&p.protocol, &p.name)))
        })
        .collect();
    let mut service = Service::new(host, ports);
    service.address = entry.addresses.iter().find_map(|a| vip(a));
    service.mesh_external = entry.location != Some(Location::MeshInternal);
    service.service_accounts = entry.subject_alt_names.clone();
    let dns = || -> Vec<DnsEndpoint> {
        if endpoints.is_empty() {
            return vec![DnsEndpoint::new(host)];
        }
        endpoints
            .iter()
            .filter(|e| !e.address.starts_with("unix://"))
            .map(|e| {
                let mut target = DnsEndpoint::new(e.address.clone());
                target.ports = entry
                    .ports
                    .iter()
                    .filter_map(|p| Some((p.name.clone(), u16::try_from(target_port(p, e)).ok()?)))
                    .collect();
                target.labels = Labels(e.labels.clone());
                target.weight = e.weight;
                target
            })
            .collect()
    };
    service.resolution = match entry.resolution.unwrap_or(Resolution::None) {
        Resolution::None => ServiceResolution::Passthrough,
        Resolution::Static => ServiceResolution::Instances,
        Resolution::Dns => ServiceResolution::Dns(dns()),
        // Validation refuses DYNAMIC_DNS; the nearest is round robin.
        Resolution::DnsRoundRobin | Resolution::DynamicDns => ServiceResolution::DnsRoundRobin(dns()),
    };
    service
}

/// The instances of a `STATIC` entry: every endpoint with an IP address,
/// on every service port, each with the endpoint's workload.
fn instances_of(
    service: &Arc<Service>,
    ports: &[ServicePort],
    endpoints: &[Endpoint],
) -> Vec<ServiceInstance> {
    let mut instances = Vec::new();
    for (endpoint, workload) in endpoints {
        let Ok(address) = endpoint.address.parse::<IpAddr>() else {
            tracing::debug!(address = %endpoint.address, host = %service.hostname, "a STATIC endpoint needs an IP address");
            continue;
        };
        for port in ports {
            let (Some(service_port), Ok(number)) = (
                service.port(&port.name),
                u16::try_from(target_port(port, endpoint)),
            ) else {
                continue;
            };
            let mut instance = ServiceInstance::new(
                Arc::clone(service),
                NetworkEndpoint::new(address, number, service_port.clone()),
                Labels(endpoint.labels.clone()),
            )
            .with_weight(endpoint.weight)
            .with_service_account(
                (!endpoint.service_account.is_empty()).then(|| endpoint.service_account.clone()),
            )
            .with_availability_zone((!endpoint.locality.is_empty()).then(|| endpoint.locality.clone()));
            // Not `with_workload`: an endpoint naming no account keeps
            // none on its instances (the workload's is `default`).
            instance.workload = workload.clone();
            instances.push(instance);
        }
    }
    instances
}

/// The port an endpoint serves a service port on: its own mapping, else
/// the port's target port, else the port's number.
fn target_port(port: &ServicePort, endpoint: &WorkloadEntry) -> u32 {
    endpoint
        .ports
        .get(&port.name)
        .copied()
        .or(port.target_port)
        .unwrap_or(port.number)
}

/// A ServiceEntry port's protocol; the port name's prefix when absent.
fn protocol(protocol: &str, name: &str) -> Protocol {
    match protocol.to_ascii_uppercase().as_str() {
        "HTTP" => Protocol::Http,
        "HTTP2" => Protocol::Http2,
        "GRPC" | "GRPC-WEB" => Protocol::Grpc,
        // TLS is passed through as opaque bytes, as HTTPS is.
        "HTTPS" | "TLS" => Protocol::Https,
        "MONGO" => Protocol::Mongo,
        "REDIS" => Protocol::Redis,
        "UDP" => Protocol::Udp,
        "" => Protocol::from_port_name(name),
        _ => Protocol::Tcp,
    }
}

/// An address usable as a service VIP: an IP, or a single-address CIDR
/// block.
fn vip(address: &str) -> Option<IpAddr> {
    match address.split_once('/') {
        None => address.parse().ok(),
        Some((ip, bits)) => {
            let ip: IpAddr = ip.parse().ok()?;
            let full = if ip.is_ipv4() { "32" } else { "128" };
            (bits == full).then_some(ip)
        }
    }
}

#[cfg(test)]
mod tests;
