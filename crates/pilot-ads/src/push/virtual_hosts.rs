//! Outbound route configurations assembled from encoded virtual hosts
//! shared between proxy classes and kept from push to push.
//!
//! A route configuration is the same for every class except for each
//! virtual host's `domains` (the short name only for proxies in the
//! service's namespace) and for which source-matched rules apply. So each
//! virtual host is encoded once per (host, port, address, short name or
//! not, applied rules, digest of those rules) and every class concatenates
//! the encoded virtual hosts: a new class costs a lookup per virtual host,
//! not a mesh's routes. The digest of the host's rules is part of the key,
//! so the next push takes every virtual host whose rules and service did
//! not change from this one, as encoded, and encodes only the others: a
//! rule change costs the virtual hosts of the hosts it touches. The result
//! is byte for byte the encoding of
//! [`route_configuration`](pilot_xds::serving::route_configuration)
//! (protobuf allows a message to be written field by field, and prost
//! writes fields in tag order, as this does).

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::{BufMut, Bytes, BytesMut};
use envoy_types::pb::google::protobuf::BoolValue;
use pilot_model::{Service, ServiceInstance};
use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint};

use pilot_routing::{HashKey, RoutingModel};
use pilot_xds::serving::{admitted, domains, virtual_host_routes};
use pilot_xds::{Proxy, route_config_name};

/// `RouteConfiguration.name`, `.virtual_hosts`, `.validate_clusters`.
const CONFIG_NAME: u32 = 1;
const CONFIG_VIRTUAL_HOSTS: u32 = 2;
const CONFIG_VALIDATE_CLUSTERS: u32 = 7;
const CONFIG_IGNORE_PORT_IN_HOST_MATCHING: u32 = 14;
/// `VirtualHost.name`, `.domains`, `.routes`.
const HOST_NAME: u32 = 1;
const HOST_DOMAINS: u32 = 2;
const HOST_ROUTES: u32 = 3;

/// What an encoded virtual host depends on.
#[derive(Clone, PartialEq, Eq, Hash)]
struct HostKey {
    hostname: Arc<str>,
    port: u16,
    /// The service's address (one of its domains).
    address: Option<IpAddr>,
    /// Whether the proxy is in the service's namespace (short name).
    short: bool,
    /// Which of the matches of the host's routes (in order) admit the
    /// proxy.
    applied: Vec<bool>,
    /// A digest of the host's routes.
    rules: u64,
    /// What the default route hashes (the service's consistent hash).
    hash: Option<HashKey>,
}

/// One virtual host, encoded.
struct EncodedHost {
    domains: Vec<String>,
    /// `VirtualHost.routes`, encoded.
    routes: Bytes,
    /// The whole `RouteConfiguration.virtual_hosts` entry.
    entry: Bytes,
}

/// The encoded virtual hosts of one push, shared by its classes, with
/// those of the push before to take from.
#[derive(Default)]
pub(crate) struct VirtualHosts {
    encoded: Mutex<HashMap<HostKey, Arc<EncodedHost>>>,
    previous: Arc<HashMap<HostKey, Arc<EncodedHost>>>,
    /// The digest of each host's rules at this push.
    digests: OnceLock<HashMap<String, u64>>,
    /// Virtual hosts encoded (not taken from this push or the one before).
    pub(crate) built: AtomicUsize,
}

impl VirtualHosts {
    /// This push's cache, taking from `before` (the previous push's)
    /// whatever the keys still match. A push that encoded no virtual host
    /// (endpoints moved, every class kept its routes) hands on what it
    /// was handed, shared, not copied.
    pub(crate) fn after(before: &VirtualHosts) -> Self {
        let encoded = before.encoded.lock().unwrap_or_else(|p| p.into_inner());
        VirtualHosts {
            previous: if encoded.is_empty() {
                Arc::clone(&before.previous)
            } else {
                Arc::new(encoded.clone())
            },
            ..Default::default()
        }
    }

    /// How many distinct virtual hosts this push has.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.encoded.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn digest(&self, hostname: &str, model: &RoutingModel) -> u64 {
        let digests = self.digests.get_or_init(|| {
            model
                .hosts()
                .map(|(host, routes)| {
                    let mut hasher = DefaultHasher::new();
                    for route in &routes.http {
                        format!("{route:?}").hash(&mut hasher);
                    }
                    (host.to_string(), hasher.finish())
                })
                .collect()
        });
        digests.get(hostname).copied().unwrap_or_default()
    }

    fn get_or_encode(&self, key: HostKey, encode: impl FnOnce() -> EncodedHost) -> Arc<EncodedHost> {
        if let Some(found) = self.encoded.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Arc::clone(found);
        }
        // Encoded without the lock: two classes racing encode the same
        // bytes, and the first one stored wins.
        let host = match self.previous.get(&key) {
            Some(kept) => Arc::clone(kept),
            None => {
                self.built.fetch_add(1, Ordering::Relaxed);
                Arc::new(encode())
            }
        };
        Arc::clone(
            self.encoded
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(key)
                .or_insert(host),
        )
    }
}

/// The encoding of `pilot_xds::serving::route_configuration(port, services,
/// model, proxy, own)`, its virtual hosts taken from `shared`.
pub(crate) fn route_configuration(
    port: u16,
    services: &[Arc<Service>],
    model: &RoutingModel,
    proxy: &Proxy,
    own: &[ServiceInstance],
    shared: &VirtualHosts,
) -> Bytes {
    let mut out = BytesMut::new();
    prost::encoding::string::encode(CONFIG_NAME, &route_config_name(port), &mut out);
    let proxy_namespace = proxy.domain.split('.').next().unwrap_or_default();
    let mut hosts = Vec::new();
    for service in services {
        let Some(service_port) = service.port_by_number(port).filter(|p| p.protocol.is_http()) else {
            continue;
        };
        let routes = model.http_routes(&service.hostname);
        let applied = admitted(routes, own, proxy);
        let key = HostKey {
            hostname: Arc::from(service.hostname.as_str()),
            port,
            address: service.address,
            short: service.hostname.split('.').nth(1) == Some(proxy_namespace),
            applied,
            rules: if routes.is_empty() {
                0
            } else {
                shared.digest(&service.hostname, model)
            },
            hash: model.default_hash(&service.hostname, port).cloned(),
        };
        let host = shared.get_or_encode(key.clone(), || {
            let mut encoded_routes = BytesMut::new();
            for route in virtual_host_routes(
                service,
                service_port.port,
                port,
                routes,
                &key.applied,
                key.hash.as_ref(),
            ) {
                prost::encoding::message::encode(HOST_ROUTES, &route, &mut encoded_routes);
            }
            let encoded_routes = encoded_routes.freeze();
            let name = format!("{}:{port}", service.hostname);
            let domains = domains(service, proxy);
            let mut entry = BytesMut::new();
            virtual_host(&name, &domains, &encoded_routes, &mut entry);
            EncodedHost {
                domains,
                routes: encoded_routes,
                entry: entry.freeze(),
            }
        });
        hosts.push((service, host));
    }
    let mut used_domains: HashSet<&str> = HashSet::new();
    for (service, host) in &hosts {
        if host.domains.iter().all(|d| !used_domains.contains(d.as_str())) {
            used_domains.extend(host.domains.iter().map(String::as_str));
            out.put_slice(&host.entry);
            continue;
        }
        // A domain an earlier virtual host took (two services sharing an
        // address, say): this class's own encoding, without it.
        let domains: Vec<String> = host
            .domains
            .iter()
            .filter(|d| used_domains.insert(d.as_str()))
            .cloned()
            .collect();
        if domains.is_empty() {
            continue;
        }
        virtual_host(
            &format!("{}:{port}", service.hostname),
            &domains,
            &host.routes,
            &mut out,
        );
    }
    let validate = BoolValue { value: false };
    encode_key(CONFIG_VALIDATE_CLUSTERS, WireType::LengthDelimited, &mut out);
    encode_varint(validate.encoded_len() as u64, &mut out);
    validate.encode_raw(&mut out);
    encode_key(CONFIG_IGNORE_PORT_IN_HOST_MATCHING, WireType::Varint, &mut out);
    encode_varint(1, &mut out);
    out.freeze()
}

/// Appends a `RouteConfiguration.virtual_hosts` entry.
fn virtual_host(name: &str, domains: &[String], routes: &[u8], out: &mut BytesMut) {
    let name = name.to_string();
    let len = prost::encoding::string::encoded_len(HOST_NAME, &name)
        + prost::encoding::string::encoded_len_repeated(HOST_DOMAINS, domains)
        + routes.len();
    encode_key(CONFIG_VIRTUAL_HOSTS, WireType::LengthDelimited, out);
    encode_varint(len as u64, out);
    prost::encoding::string::encode(HOST_NAME, &name, out);
    prost::encoding::string::encode_repeated(HOST_DOMAINS, domains, out);
    out.put_slice(routes);
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
    use pilot_api::istio;
    use pilot_model::{Port, Protocol, document};
    use pilot_xds::MeshConfig;

    use super::*;
    use pilot_xds::serving::route_configuration as decoded;

    fn service(host: &str, address: &str) -> Arc<Service> {
        let mut service = Service::new(host, vec![Port::new("http", 80, Protocol::Http)]);
        service.address = Some(address.parse().unwrap());
        Arc::new(service)
    }

    #[test]
    fn equals_the_route_configuration_it_stands_for_also_when_domains_collide() {
        let text = r#"
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: split, namespace: a}
spec:
  destination: {name: one}
  route: [{labels: {version: v1}, weight: 70}, {labels: {version: v2}, weight: 30}]
"#;
        let configs = document::parse("rules.yaml", text, &istio::registry()).unwrap();
        let mesh = MeshConfig::from_configs(&configs).unwrap();
        let model = mesh.model();
        // `two` shares `one`'s address: its address domains are taken.
        let services = vec![
            service("one.a.svc.cluster.local", "10.1.0.1"),
            service("two.a.svc.cluster.local", "10.1.0.1"),
            service("three.b.svc.cluster.local", "10.1.0.3"),
        ];
        let shared = VirtualHosts::default();
        for node in [
            "sidecar~10.9.0.1~c.a~a.svc.cluster.local",
            "sidecar~10.9.0.2~c.b~b.svc.cluster.local",
            "sidecar~10.9.0.3~d.a~a.svc.cluster.local",
        ] {
            let proxy = Proxy::from_node_id(node).unwrap();
            let encoded = route_configuration(80, &services, model, &proxy, &[], &shared);
            let expected = decoded(80, &services, model, &proxy, &[]);
            assert_eq!(
                RouteConfiguration::decode(encoded.clone()).unwrap(),
                expected,
                "{node}"
            );
            assert_eq!(encoded.to_vec(), expected.encode_to_vec(), "{node}: same bytes");
            assert!(
                !expected.virtual_hosts[1]
                    .domains
                    .contains(&"10.1.0.1".to_string()),
                "the collision is exercised"
            );
        }
        // Namespace a's two proxies share every virtual host; b has its own.
        assert_eq!(shared.built.load(Ordering::Relaxed), 6);
    }
}
