//! Outbound route configurations assembled from encoded pieces shared
//! between proxy classes.
//!
//! A route configuration is the same for every class except for each
//! virtual host's `domains` (the short name is relative to the proxy's
//! namespace) and for which source-matched rules apply. So the routes of a
//! virtual host are encoded once per push for each (host, port, applied
//! rules) and every class concatenates them behind its own name and
//! domains: a new class costs its domains, not a mesh's routes. The result
//! is byte for byte the encoding of [`routes::route_configuration`]
//! (protobuf allows a message to be written field by field, and prost
//! writes fields in tag order, as this does).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use envoy_types::pb::google::protobuf::BoolValue;
use pilot_model::{Service, ServiceInstance};
use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

use crate::names::route_config_name;
use crate::{MeshConfig, MeshIndex, Proxy, routes};

/// `RouteConfiguration.name`, `.virtual_hosts`, `.validate_clusters`.
const CONFIG_NAME: u32 = 1;
const CONFIG_VIRTUAL_HOSTS: u32 = 2;
const CONFIG_VALIDATE_CLUSTERS: u32 = 7;
/// `VirtualHost.name`, `.domains`, `.routes`.
const HOST_NAME: u32 = 1;
const HOST_DOMAINS: u32 = 2;
const HOST_ROUTES: u32 = 3;

/// Which of a host's rules (in [`MeshIndex::rules_for`] order) apply.
type Applied = Vec<bool>;

/// A virtual host's routes are the same for every class with the same
/// hostname, port and applied rules.
type HostKey = (Arc<str>, u16, Applied);

/// The encoded `VirtualHost.routes` of every (hostname, port, applied
/// rules) a push has needed so far, shared by its classes.
#[derive(Default)]
pub(crate) struct VirtualHostRoutes {
    encoded: Mutex<HashMap<HostKey, Bytes>>,
}

impl VirtualHostRoutes {
    /// How many distinct virtual hosts' routes were encoded.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.encoded.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn get_or_encode(
        &self,
        service: &Service,
        port: u16,
        applied: Applied,
        encode: impl FnOnce() -> Bytes,
    ) -> Bytes {
        let key = (Arc::<str>::from(service.hostname.as_str()), port, applied);
        if let Some(found) = self.encoded.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return found.clone();
        }
        // Encoded without the lock: two classes racing encode the same
        // bytes, and the first one stored wins.
        let bytes = encode();
        self.encoded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key)
            .or_insert(bytes)
            .clone()
    }
}

/// The encoding of `routes::route_configuration(port, services, mesh,
/// proxy, own, index)`, taking each virtual host's routes from `shared`.
pub(crate) fn route_configuration(
    port: u16,
    services: &[Arc<Service>],
    mesh: &MeshConfig,
    proxy: &Proxy,
    own: &[ServiceInstance],
    index: &MeshIndex<'_>,
    shared: &VirtualHostRoutes,
) -> Bytes {
    let mut out = BytesMut::new();
    prost::encoding::string::encode(CONFIG_NAME, &route_config_name(port), &mut out);
    let mut used_domains = BTreeSet::new();
    for service in services {
        let Some(service_port) = service.port_by_number(port).filter(|p| p.protocol.is_http()) else {
            continue;
        };
        let domains: Vec<String> = routes::domains(service, port, proxy)
            .into_iter()
            .filter(|d| used_domains.insert(d.clone()))
            .collect();
        if domains.is_empty() {
            continue;
        }
        let rules = index.rules_for(&service.hostname);
        let applied: Applied = rules
            .iter()
            .map(|rule| routes::applies_to(rule, mesh, own, proxy))
            .collect();
        let encoded_routes = shared.get_or_encode(service, port, applied.clone(), || {
            let applying = rules.iter().zip(&applied).filter(|(_, a)| **a).map(|(r, _)| *r);
            let mut buffer = BytesMut::new();
            for route in routes::virtual_host_routes(service, service_port.port, port, applying, mesh) {
                prost::encoding::message::encode(HOST_ROUTES, &route, &mut buffer);
            }
            buffer.freeze()
        });
        let name = format!("{}:{port}", service.hostname);
        let len = prost::encoding::string::encoded_len(HOST_NAME, &name)
            + prost::encoding::string::encoded_len_repeated(HOST_DOMAINS, &domains)
            + encoded_routes.len();
        encode_key(CONFIG_VIRTUAL_HOSTS, WireType::LengthDelimited, &mut out);
        encode_varint(len as u64, &mut out);
        out.reserve(len + encoded_len_varint(len as u64));
        prost::encoding::string::encode(HOST_NAME, &name, &mut out);
        prost::encoding::string::encode_repeated(HOST_DOMAINS, &domains, &mut out);
        out.put_slice(&encoded_routes);
    }
    let validate = BoolValue { value: false };
    encode_key(CONFIG_VALIDATE_CLUSTERS, WireType::LengthDelimited, &mut out);
    encode_varint(validate.encoded_len() as u64, &mut out);
    validate.encode_raw(&mut out);
    out.freeze()
}
