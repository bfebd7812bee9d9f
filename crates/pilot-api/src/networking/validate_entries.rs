//! [`ServiceEntry`], [`WorkloadEntry`] and [`Gateway`] validation as
//! Istio's (`ValidateServiceEntry`, `validateWorkloadEntry`,
//! `ValidateGateway`), every error with its field path.

use std::collections::BTreeSet;

use super::checks::{
    at, check_export_to, check_labels, check_port, check_port_name, check_subnet, fqdn, index, is_http,
    is_ip, is_tls, key, partial_wildcard, protocol, wildcard_domain,
};
use super::gateway::{Gateway, Server, ServerTlsMode, ServerTlsSettings};
use super::service_entry::{Resolution, ServiceEntry};
use super::workload_entry::WorkloadEntry;
use pilot_model::{FieldErrors, dns1123_label};

const UNIX_PREFIX: &str = "unix://";

pub(crate) fn service_entry(se: &ServiceEntry, errors: &mut FieldErrors) {
    let resolution = se.resolution.unwrap_or(Resolution::None);
    if se.workload_selector.is_some() && !se.endpoints.is_empty() {
        errors.push(
            "spec",
            "only one of WorkloadSelector or Endpoints is allowed in Service Entry",
        );
    }
    if let Some(selector) = &se.workload_selector {
        check_labels("spec.workloadSelector.labels", &selector.labels, errors);
    }
    if se.hosts.is_empty() {
        errors.push("spec.hosts", "service entry must have at least one host");
    }
    for (i, host) in se.hosts.iter().enumerate() {
        let path = index("spec.hosts", i);
        if host == "*" {
            errors.push(path, format!("invalid host {host}"));
        } else if let Err(message) = wildcard_domain(host) {
            errors.push(path, message);
        } else if let Err(message) = partial_wildcard(host) {
            errors.push(path, message);
        }
    }
    let mut cidr_found = false;
    for (i, address) in se.addresses.iter().enumerate() {
        cidr_found |= address.contains('/');
        check_subnet(&index("spec.addresses", i), address, errors);
    }
    if cidr_found && !matches!(resolution, Resolution::None | Resolution::Static) {
        errors.push(
            "spec.addresses",
            "CIDR addresses are allowed only for NONE/STATIC resolution types",
        );
    }
    let mut names = BTreeSet::new();
    let mut numbers = BTreeSet::new();
    for (i, port) in se.ports.iter().enumerate() {
        let path = index("spec.ports", i);
        if !names.insert(port.name.as_str()) {
            errors.push(
                at(&path, "name"),
                format!("service entry port name {:?} already defined", port.name),
            );
        }
        if !numbers.insert(port.number) {
            errors.push(
                at(&path, "number"),
                format!("service entry port {} already defined", port.number),
            );
        }
        if let Some(target) = port.target_port {
            check_port(&at(&path, "targetPort"), target, errors);
        }
        check_port_name(&at(&path, "name"), &port.name, errors);
        if !port.protocol.is_empty() && protocol(&port.protocol).is_none() {
            errors.push(
                at(&path, "protocol"),
                format!("unsupported protocol: {}", port.protocol),
            );
        }
        check_port(&at(&path, "number"), port.number, errors);
    }
    match resolution {
        Resolution::None => {
            if !se.endpoints.is_empty() {
                errors.push(
                    "spec.endpoints",
                    "no endpoints should be provided for resolution type none",
                );
            }
        }
        Resolution::Static => {
            for (i, endpoint) in se.endpoints.iter().enumerate() {
                workload_entry_at(&index("spec.endpoints", i), endpoint, Some(&names), false, errors);
            }
        }
        Resolution::Dns | Resolution::DnsRoundRobin => {
            if se.endpoints.is_empty()
                && let Some((i, message)) = se
                    .hosts
                    .iter()
                    .enumerate()
                    .find_map(|(i, h)| fqdn(h).err().map(|m| (i, m)))
            {
                errors.push(
                    index("spec.hosts", i),
                    format!(
                        "hosts must be FQDN or contain only prefix wildcards if no endpoints are provided for resolution mode {}: {message}",
                        resolution_name(resolution)
                    ),
                );
            }
            if resolution == Resolution::DnsRoundRobin && se.endpoints.len() > 1 {
                errors.push(
                    "spec.endpoints",
                    "there must only be 0 or 1 endpoint for resolution mode DNS_ROUND_ROBIN",
                );
            }
            for (i, endpoint) in se.endpoints.iter().enumerate() {
                let path = index("spec.endpoints", i);
                if !is_ip(&endpoint.address) && fqdn(&endpoint.address).is_err() {
                    errors.push(
                        at(&path, "address"),
                        format!(
                            "endpoint address {:?} is not a valid FQDN or an IP address",
                            endpoint.address
                        ),
                    );
                }
                check_labels(&at(&path, "labels"), &endpoint.labels, errors);
                endpoint_ports(&path, endpoint, Some(&names), errors);
            }
        }
        Resolution::DynamicDns => {
            crate::primitives::not_supported(errors, "spec.resolution", "resolution DYNAMIC_DNS");
        }
    }
    if resolution != Resolution::None && se.hosts.len() > 1 {
        let opaque = se.ports.iter().position(|p| {
            let protocol = protocol(&p.protocol).unwrap_or_else(|| "TCP".into());
            !is_http(&protocol) && !is_tls(&protocol)
        });
        if let Some(i) = opaque {
            errors.push(
                index("spec.ports", i),
                "multiple hosts provided with non-HTTP, non-TLS ports",
            );
        }
    }
    check_export_to("spec.exportTo", &se.export_to, true, errors);
}

fn resolution_name(resolution: Resolution) -> &'static str {
    match resolution {
        Resolution::None => "NONE",
        Resolution::Static => "STATIC",
        Resolution::Dns => "DNS",
        Resolution::DnsRoundRobin => "DNS_ROUND_ROBIN",
        Resolution::DynamicDns => "DYNAMIC_DNS",
    }
}

pub(crate) fn workload_entry(we: &WorkloadEntry, errors: &mut FieldErrors) {
    workload_entry_at("spec", we, None, true, errors);
}

/// Istio's `validateWorkloadEntry` at `path`: an address (IP, `unix://`
/// path, or with `allow_fqdn` a DNS name), ports by DNS-1123 name (of the
/// service entry's, when given), labels.
fn workload_entry_at(
    path: &str,
    we: &WorkloadEntry,
    service_ports: Option<&BTreeSet<&str>>,
    allow_fqdn: bool,
    errors: &mut FieldErrors,
) {
    let address = &we.address;
    if address.is_empty() {
        if we.network.is_empty() {
            errors.push(at(path, "address"), "address is required");
        }
    } else if let Some(socket) = address.strip_prefix(UNIX_PREFIX) {
        if socket.is_empty() {
            errors.push(at(path, "address"), "unix address must not be empty");
        } else if !socket.starts_with('@') && (!socket.starts_with('/') || socket.ends_with('/')) {
            errors.push(
                at(path, "address"),
                format!("{socket} is not an absolute path to a file"),
            );
        }
        if !we.ports.is_empty() {
            errors.push(
                at(path, "ports"),
                format!("unix endpoint {address} must not include ports"),
            );
        }
        if service_ports.is_some_and(|p| p.len() != 1) {
            errors.push(
                at(path, "address"),
                "exactly 1 service port required for unix endpoints",
            );
        }
    } else if !is_ip(address) {
        if !allow_fqdn {
            errors.push(
                at(path, "address"),
                format!("endpoint address {address:?} is not a valid IP address"),
            );
        } else if fqdn(address).is_err() {
            errors.push(
                at(path, "address"),
                format!("endpoint address {address:?} is not a valid FQDN or an IP address"),
            );
        }
    }
    endpoint_ports(path, we, service_ports, errors);
    check_labels(&at(path, "labels"), &we.labels, errors);
    if let Some(weight) = we.weight
        && weight > 128
    {
        // Envoy's LbEndpoint load_balancing_weight: 1 up to 128 per
        // locality is what Envoy documents; higher overflows totals.
        errors.push(at(path, "weight"), format!("weight {weight} is larger than 128"));
    }
    if !we.service_account.is_empty()
        && dns1123_label(&we.service_account).is_err()
        && pilot_model::dns1123_subdomain(&we.service_account).is_err()
    {
        errors.push(
            at(path, "serviceAccount"),
            format!("invalid service account name {:?}", we.service_account),
        );
    }
}

fn endpoint_ports(
    path: &str,
    we: &WorkloadEntry,
    service_ports: Option<&BTreeSet<&str>>,
    errors: &mut FieldErrors,
) {
    for (name, port) in &we.ports {
        let pp = key(&at(path, "ports"), name);
        if service_ports.is_some_and(|p| !p.contains(name.as_str())) {
            errors.push(
                &pp,
                format!("endpoint port {port} is not defined by the service entry"),
            );
        }
        check_port_name(&pp, name, errors);
        check_port(&pp, *port, errors);
    }
}

pub(crate) fn gateway(gw: &Gateway, errors: &mut FieldErrors) {
    if gw.servers.is_empty() {
        errors.push("spec.servers", "gateway must have at least one server");
    }
    let mut port_names = BTreeSet::new();
    let mut server_names = BTreeSet::new();
    for (i, server) in gw.servers.iter().enumerate() {
        let path = index("spec.servers", i);
        server_checks(&path, server, errors);
        if let Some(port) = &server.port
            && !port_names.insert(port.name.as_str())
        {
            errors.push(
                at(&path, "port.name"),
                format!(
                    "port names in servers must be unique: duplicate name {}",
                    port.name
                ),
            );
        }
        if !server.name.is_empty() && !server_names.insert(server.name.as_str()) {
            errors.push(
                at(&path, "name"),
                format!("server names must be unique: duplicate name {}", server.name),
            );
        }
    }
    check_labels("spec.selector", &gw.selector, errors);
}

fn server_checks(path: &str, server: &Server, errors: &mut FieldErrors) {
    if server.hosts.is_empty() {
        errors.push(at(path, "hosts"), "server config must contain at least one host");
    }
    for (i, host) in server.hosts.iter().enumerate() {
        gateway_host(&index(&at(path, "hosts"), i), host, errors);
    }
    let mut port_ok = false;
    match &server.port {
        None => errors.push(at(path, "port"), "port is required"),
        Some(port) => {
            let pp = at(path, "port");
            let known = protocol(&port.protocol);
            if known.is_none() {
                errors.push(
                    at(&pp, "protocol"),
                    format!(
                        "invalid protocol {:?}, supported protocols are HTTP, HTTP2, GRPC, GRPC-WEB, MONGO, REDIS, MYSQL, TCP",
                        port.protocol
                    ),
                );
            }
            if port.number > 0 || !server.bind.starts_with(UNIX_PREFIX) {
                check_port(&at(&pp, "number"), port.number, errors);
            }
            if port.target_port.is_some_and(|t| t > 0) {
                errors.push(at(&pp, "targetPort"), "targetPort has no impact on Gateways");
            }
            if port.name.is_empty() {
                errors.push(at(&pp, "name"), "port name must be set");
            }
            port_ok = known.is_some() && (1..=65535).contains(&port.number) && !port.name.is_empty();
        }
    }
    if let Some(socket) = server.bind.strip_prefix(UNIX_PREFIX) {
        if !socket.starts_with('@') && (!socket.starts_with('/') || socket.ends_with('/')) {
            errors.push(
                at(path, "bind"),
                format!("{socket} is not an absolute path to a file"),
            );
        }
        if server.port.as_ref().is_some_and(|p| p.number != 0) {
            errors.push(
                at(path, "port.number"),
                "port number must be 0 for unix domain socket",
            );
        }
    } else if !server.bind.is_empty() && !is_ip(&server.bind) {
        errors.push(
            at(path, "bind"),
            format!("{:?} is not a valid IP address", server.bind),
        );
    }
    if let Some(tls) = &server.tls {
        server_tls(&at(path, "tls"), tls, errors);
    }
    if !server.default_endpoint.is_empty() {
        crate::primitives::not_supported(errors, &at(path, "defaultEndpoint"), "defaultEndpoint");
    }
    if port_ok && let Some(port) = &server.port {
        let protocol = protocol(&port.protocol).unwrap_or_default();
        if is_tls(&protocol) && server.tls.is_none() {
            errors.push(
                at(path, "tls"),
                "server must have TLS settings for HTTPS/TLS protocols",
            );
        } else if !is_tls(&protocol)
            && let Some(tls) = &server.tls
        {
            if is_http(&protocol) {
                let passthrough = matches!(tls.mode, None | Some(ServerTlsMode::Passthrough));
                if !passthrough
                    || !tls.ca_certificates.is_empty()
                    || !tls.private_key.is_empty()
                    || !tls.server_certificate.is_empty()
                {
                    errors.push(
                        at(path, "tls"),
                        "server cannot have TLS settings for plain text HTTP ports",
                    );
                }
            } else {
                errors.push(
                    at(path, "tls"),
                    "server cannot have TLS settings for non HTTPS/TLS ports",
                );
            }
        }
    }
}

/// Istio's `ValidateNamespaceSlashWildcardHostname` for gateways: `host`
/// or `namespace/host`, namespace `*`, `.` or a DNS-1123 label, host a
/// fully qualified name (or `*`), wildcards only as the first label, or an
/// IP address.
fn gateway_host(path: &str, host: &str, errors: &mut FieldErrors) {
    let name = match host.split_once('/') {
        None => host,
        Some((namespace, name)) => {
            if namespace.is_empty() || name.is_empty() {
                errors.push(path, "config namespace and dnsName in host entry cannot be empty");
            }
            if namespace != "*"
                && namespace != "."
                && !namespace.is_empty()
                && dns1123_label(namespace).is_err()
            {
                errors.push(path, format!("invalid namespace value {namespace:?} in gateway"));
            }
            name
        }
    };
    if name.is_empty() {
        return;
    }
    if name != "*" && !name.contains('.') {
        errors.push(path, "short names (non FQDN) are not allowed");
    }
    if let Err(message) = wildcard_domain(name)
        && !is_ip(name)
    {
        errors.push(path, message);
    }
    if let Err(message) = partial_wildcard(name) {
        errors.push(path, message);
    }
}

/// Istio's `validateTLSOptions` for a gateway server (and a Sidecar's
/// ingress listener).
pub(crate) fn server_tls(path: &str, tls: &ServerTlsSettings, errors: &mut FieldErrors) {
    let mode = tls.mode.unwrap_or(ServerTlsMode::Passthrough);
    if mode == ServerTlsMode::IstioMutual {
        for (field, given) in [
            ("serverCertificate", !tls.server_certificate.is_empty()),
            ("privateKey", !tls.private_key.is_empty()),
            ("caCertificates", !tls.ca_certificates.is_empty()),
            ("tlsCertificates", !tls.tls_certificates.is_empty()),
            ("credentialName", !tls.credential_name.is_empty()),
            ("credentialNames", !tls.credential_names.is_empty()),
        ] {
            if given {
                errors.push(
                    at(path, field),
                    format!("ISTIO_MUTUAL TLS cannot have associated {field}"),
                );
            }
        }
        return;
    }
    let sources = [
        !tls.server_certificate.is_empty() && !tls.private_key.is_empty(),
        !tls.credential_name.is_empty(),
        !tls.credential_names.is_empty(),
        !tls.tls_certificates.is_empty(),
    ]
    .iter()
    .filter(|s| **s)
    .count();
    if sources > 1 {
        errors.push(
            path,
            "only one of credential_name, credential_names, server_certificate/private_key, tls_certificates should be specified",
        );
    }
    let terminating = matches!(
        mode,
        ServerTlsMode::Simple | ServerTlsMode::Mutual | ServerTlsMode::OptionalMutual
    );
    if terminating && (!tls.credential_name.is_empty() || !tls.credential_names.is_empty()) {
        return;
    }
    if terminating {
        let prefix = if mode == ServerTlsMode::Simple {
            "SIMPLE TLS"
        } else {
            "MUTUAL TLS"
        };
        if mode != ServerTlsMode::Simple && tls.ca_certificates.is_empty() {
            errors.push(
                at(path, "caCertificates"),
                format!("{prefix} requires a client CA bundle"),
            );
        }
        if tls.tls_certificates.is_empty() {
            if tls.server_certificate.is_empty() {
                errors.push(
                    at(path, "serverCertificate"),
                    format!("{prefix} requires a server certificate"),
                );
            }
            if tls.private_key.is_empty() {
                errors.push(at(path, "privateKey"), format!("{prefix} requires a private key"));
            }
        }
        for (i, cert) in tls.tls_certificates.iter().enumerate() {
            let cp = index(&at(path, "tlsCertificates"), i);
            if cert.server_certificate.is_empty() {
                errors.push(
                    at(&cp, "serverCertificate"),
                    format!("{prefix} requires a server certificate"),
                );
            }
            if cert.private_key.is_empty() {
                errors.push(at(&cp, "privateKey"), format!("{prefix} requires a private key"));
            }
        }
    }
    if !tls.ca_crl.is_empty() {
        if !tls.credential_name.is_empty() {
            errors.push(
                at(path, "caCrl"),
                "CRL is not supported with credentialName. CRL has to be specified in the credential",
            );
        }
        if mode == ServerTlsMode::Simple {
            errors.push(at(path, "caCrl"), "CRL is not supported with SIMPLE TLS");
        }
    }
    if let (Some(min), Some(max)) = (tls.min_protocol_version, tls.max_protocol_version)
        && (min as u8) > (max as u8)
        && max != super::gateway::TlsProtocol::TlsAuto
    {
        errors.push(
            at(path, "minProtocolVersion"),
            "the minimum TLS version is above the maximum",
        );
    }
}
