//! [`Sidecar`] validation as Istio's `ValidateSidecar`: the selector's
//! labels, ingress listeners (port, protocol, bind, default endpoint),
//! egress listeners (one catch-all, last; unique port numbers, whatever
//! the bind, and unique unix sockets; hosts as
//! `namespace/dnsName`; beyond Istio, one host for a socket that is not
//! HTTP, `validate_sidecar_socket.rs`), the outbound traffic policy; every
//! error with its field path.

use std::collections::BTreeSet;

use super::checks::{
    at, check_destination, check_labels, check_port, check_port_name, index, is_ip, is_tls, protocol,
    wildcard_domain,
};
use super::gateway::{ServerTlsMode, ServerTlsSettings};
use super::sidecar::{CaptureMode, EgressHost, NamespaceSelector, OutboundMode, Sidecar, SidecarPort};
use pilot_model::{FieldErrors, dns1123_label};

const UNIX_PREFIX: &str = "unix://";

pub(crate) fn sidecar(sidecar: &Sidecar, errors: &mut FieldErrors) {
    if let Some(selector) = &sidecar.workload_selector {
        let path = "spec.workloadSelector.labels";
        if selector.labels.is_empty() {
            errors.push(path, "sidecar: workloadSelector cannot have empty labels");
        }
        check_labels(path, &selector.labels, errors);
    }
    if sidecar.egress.is_empty()
        && sidecar.ingress.is_empty()
        && sidecar.outbound_traffic_policy.is_none()
        && sidecar.inbound_connection_pool.is_none()
    {
        errors.push("spec", "sidecar: empty configuration provided");
    }
    ingress(sidecar, errors);
    egress(sidecar, errors);
    if let Some(pool) = &sidecar.inbound_connection_pool {
        super::validate_destination_rule::connection_pool("spec.inboundConnectionPool", pool, errors);
    }
    if let Some(policy) = &sidecar.outbound_traffic_policy
        && let Some(proxy) = &policy.egress_proxy
    {
        let path = "spec.outboundTrafficPolicy.egressProxy";
        if policy.mode != OutboundMode::AllowAny {
            errors.push(
                path,
                "sidecar: egress_proxy must be set only with ALLOW_ANY outbound_traffic_policy mode",
            );
        }
        check_destination(path, proxy, errors);
        if proxy.port.is_none() {
            errors.push(at(path, "port"), "sidecar: egress_proxy must have a port");
        }
    }
}

fn ingress(sidecar: &Sidecar, errors: &mut FieldErrors) {
    let mut ports = BTreeSet::new();
    for (i, listener) in sidecar.ingress.iter().enumerate() {
        let path = index("spec.ingress", i);
        let Some(port) = &listener.port else {
            errors.push(
                at(&path, "port"),
                "sidecar: port is required for ingress listeners",
            );
            continue;
        };
        check_port(&at(&path, "port.number"), port.number, errors);
        check_protocol(&at(&path, "port.protocol"), port, true, errors);
        if !port.name.is_empty() {
            check_port_name(&at(&path, "port.name"), &port.name, errors);
        }
        if !listener.bind.is_empty() && !is_ip(&listener.bind) {
            errors.push(
                at(&path, "bind"),
                format!(
                    "sidecar: ingress bind {} is not a valid IP address",
                    listener.bind
                ),
            );
        }
        if !ports.insert(port.number) {
            errors.push(
                at(&path, "port.number"),
                "sidecar: ports on IP bound listeners must be unique",
            );
        }
        if !listener.default_endpoint.is_empty() {
            default_endpoint(&at(&path, "defaultEndpoint"), &listener.default_endpoint, errors);
        }
        if let Some(tls) = &listener.tls {
            ingress_tls(&at(&path, "tls"), tls, port, errors);
        }
        if let Some(pool) = &listener.connection_pool {
            super::validate_destination_rule::connection_pool(&at(&path, "connectionPool"), pool, errors);
        }
    }
}

/// Istio's checks of an ingress listener's `tls`: no client SANs, no
/// HTTPS redirect, no secrets (certificates are files on the proxy), no
/// `ISTIO_MUTUAL` or `AUTO_PASSTHROUGH`, an `HTTPS` or `TLS` port, and the
/// gateway's checks of the certificate fields.
fn ingress_tls(path: &str, tls: &ServerTlsSettings, port: &SidecarPort, errors: &mut FieldErrors) {
    if !tls.subject_alt_names.is_empty() {
        errors.push(
            at(path, "subjectAltNames"),
            "sidecar: subjectAltNames is not supported in ingress tls",
        );
    }
    if tls.https_redirect {
        errors.push(
            at(path, "httpsRedirect"),
            "sidecar: httpsRedirect is not supported",
        );
    }
    for (field, given) in [
        ("credentialName", !tls.credential_name.is_empty()),
        ("credentialNames", !tls.credential_names.is_empty()),
        ("caCertCredentialName", !tls.ca_cert_credential_name.is_empty()),
        ("tlsCertificates", !tls.tls_certificates.is_empty()),
    ] {
        if given {
            errors.push(
                at(path, field),
                format!("sidecar: {field} is not currently supported"),
            );
        }
    }
    if let Some(mode @ (ServerTlsMode::IstioMutual | ServerTlsMode::AutoPassthrough)) = tls.mode {
        let name = if mode == ServerTlsMode::IstioMutual {
            "ISTIO_MUTUAL"
        } else {
            "AUTO_PASSTHROUGH"
        };
        errors.push(
            at(path, "mode"),
            format!("configuration is invalid: cannot set mode to {name} in sidecar ingress tls"),
        );
    }
    if !is_tls(&port.protocol.to_ascii_uppercase()) {
        errors.push(path, "server cannot have TLS settings for non HTTPS/TLS ports");
    }
    super::validate_entries::server_tls(path, tls, errors);
}

fn default_endpoint(path: &str, endpoint: &str, errors: &mut FieldErrors) {
    if let Some(socket) = endpoint.strip_prefix(UNIX_PREFIX) {
        if socket.is_empty() {
            errors.push(path, "unix socket path must not be empty");
        }
        return;
    }
    let Some((host, port)) = endpoint.rsplit_once(':') else {
        errors.push(
            path,
            format!("sidecar: defaultEndpoint {endpoint:?} is not host:port"),
        );
        return;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if !matches!(host, "" | "127.0.0.1" | "0.0.0.0" | "::1" | "::") {
        errors.push(
            path,
            "sidecar: defaultEndpoint must be of form 127.0.0.1:<port>, 0.0.0.0:<port>, [::1]:port, [::]:port, unix://filepath, or unset",
        );
    }
    match port.parse::<u32>() {
        Ok(port) => check_port(path, port, errors),
        Err(_) => errors.push(
            path,
            format!("sidecar: defaultEndpoint port {port:?} is not a number"),
        ),
    }
}

fn egress(sidecar: &Sidecar, errors: &mut FieldErrors) {
    // As Istio: a port number once among the egress listeners with a
    // port, whatever their binds; a unix socket (port 0) once.
    let mut ports = BTreeSet::new();
    let mut sockets = BTreeSet::new();
    let mut catch_all = false;
    let last = sidecar.egress.len().saturating_sub(1);
    for (i, listener) in sidecar.egress.iter().enumerate() {
        let path = index("spec.egress", i);
        match &listener.port {
            None if catch_all => {
                errors.push(
                    &path,
                    "sidecar: egress can have only one listener with empty port",
                );
                continue;
            }
            None if i == last => catch_all = true,
            None => errors.push(
                &path,
                "sidecar: the egress listener with empty port should be the last listener in the list",
            ),
            Some(port) => {
                if port.target_port.is_some_and(|p| p > 0) {
                    errors.push(
                        at(&path, "port.targetPort"),
                        "targetPort has no impact on Sidecars",
                    );
                }
                egress_port(&path, port, &listener.bind, listener.capture_mode, errors);
                if port.number == 0 {
                    if !sockets.insert(listener.bind.clone()) {
                        errors.push(
                            at(&path, "bind"),
                            "sidecar: unix domain socket values for listeners must be unique",
                        );
                    }
                } else if !ports.insert(port.number) {
                    errors.push(
                        at(&path, "port.number"),
                        "sidecar: ports on IP bound listeners must be unique",
                    );
                }
            }
        }
        if listener.hosts.is_empty() {
            errors.push(
                at(&path, "hosts"),
                "sidecar: egress listener must contain at least one host",
            );
        }
        for (j, host) in listener.hosts.iter().enumerate() {
            egress_host(&index(&at(&path, "hosts"), j), host, errors);
        }
        super::validate_sidecar_socket::socket_hosts(&path, listener, errors);
    }
}

fn egress_port(
    path: &str,
    port: &SidecarPort,
    bind: &str,
    capture: Option<CaptureMode>,
    errors: &mut FieldErrors,
) {
    if !port.name.is_empty() {
        check_port_name(&at(path, "port.name"), &port.name, errors);
    }
    if port.number == 0 {
        check_protocol(&at(path, "port.protocol"), port, false, errors);
        match bind.strip_prefix(UNIX_PREFIX) {
            None => errors.push(
                at(path, "bind"),
                "sidecar: ports with number 0 must be bound to a unix domain socket (unix://)",
            ),
            Some(socket) => unix_address(&at(path, "bind"), socket, errors),
        }
        if matches!(capture, Some(CaptureMode::Iptables)) {
            errors.push(
                at(path, "captureMode"),
                "sidecar: captureMode must be DEFAULT/NONE for unix domain socket listeners",
            );
        }
        return;
    }
    check_protocol(&at(path, "port.protocol"), port, false, errors);
    check_port(&at(path, "port.number"), port.number, errors);
    if !bind.is_empty() && !is_ip(bind) {
        errors.push(
            at(path, "bind"),
            format!("sidecar: egress bind {bind} is not a valid IP address"),
        );
    }
}

/// Istio's `ValidateUnixAddress`: an absolute path to a file, or an
/// abstract socket (`@name`).
fn unix_address(path: &str, socket: &str, errors: &mut FieldErrors) {
    if socket.is_empty() {
        errors.push(path, "unix address must not be empty");
    } else if !socket.starts_with('@') && (!socket.starts_with('/') || socket.ends_with('/')) {
        errors.push(path, format!("{socket} is not an absolute path to a file"));
    }
}

fn check_protocol(path: &str, port: &SidecarPort, required: bool, errors: &mut FieldErrors) {
    if port.protocol.is_empty() {
        if required {
            errors.push(path, "sidecar: protocol is required");
        }
    } else if protocol(&port.protocol).is_none() {
        errors.push(path, format!("sidecar: unsupported protocol {}", port.protocol));
    }
}

/// Istio's `validateNamespaceSlashWildcardHostname` for sidecars.
fn egress_host(path: &str, host: &str, errors: &mut FieldErrors) {
    let parsed = match EgressHost::parse(host) {
        Ok(parsed) => parsed,
        Err(message) => {
            errors.push(path, message);
            return;
        }
    };
    if let NamespaceSelector::Named(namespace) = &parsed.namespace
        && dns1123_label(namespace).is_err()
    {
        errors.push(path, format!("invalid namespace value {namespace:?} in sidecar"));
    }
    if parsed.host != "*"
        && let Err(message) = wildcard_domain(&parsed.host)
    {
        errors.push(path, message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors_of(spec: serde_json::Value) -> Vec<(String, String)> {
        let sidecar: Sidecar = serde_json::from_value(spec).unwrap();
        let mut errors = FieldErrors::default();
        super::sidecar(&sidecar, &mut errors);
        errors
            .iter()
            .map(|e| (e.path.clone(), e.message.clone()))
            .collect()
    }

    #[test]
    fn a_valid_sidecar_has_no_errors() {
        let spec = serde_json::json!({
            "workloadSelector": {"labels": {"app": "reviews"}},
            "ingress": [{"port": {"number": 9080, "protocol": "HTTP", "name": "http"}, "defaultEndpoint": "127.0.0.1:8080"}],
            "egress": [
                {"port": {"number": 3306, "protocol": "MYSQL"}, "bind": "127.0.0.1", "hosts": ["*/mysql.example.com"]},
                {"hosts": ["./*", "istio-system/*", "~/*", "prod/*.example.com"]}
            ],
            "outboundTrafficPolicy": {"mode": "REGISTRY_ONLY"}
        });
        assert_eq!(errors_of(spec), []);
    }

    #[test]
    fn listener_ports_binds_and_pools_are_checked_as_istio_does() {
        let errors = errors_of(serde_json::json!({
            "ingress": [
                {"port": {"number": 9080, "protocol": "HTTP"}, "defaultEndpoint": "10.0.0.1:8080"},
                {"port": {"number": 9081, "protocol": "HTTP"}, "defaultEndpoint": "127.0.0.1:x"}
            ],
            "egress": [
                {"port": {"number": 80, "protocol": "HTTP", "targetPort": 8080}, "hosts": ["./*"]},
                {"port": {"number": 81, "protocol": "HTTP"}, "bind": "unix:///tmp/s", "hosts": ["./*"]},
                {"port": {"number": 0, "protocol": "HTTP"}, "bind": "unix:///tmp/s", "captureMode": "IPTABLES", "hosts": ["./*"]},
                {"port": {"number": 0, "protocol": "HTTP"}, "bind": "127.0.0.1", "hosts": ["./*"]},
                {"port": {"number": 82, "protocol": "HTTP"}, "bind": "127.0.0.1", "hosts": ["./*"]},
                {"port": {"number": 82, "protocol": "HTTP"}, "bind": "127.0.0.1", "hosts": ["./*"]}
            ],
            "inboundConnectionPool": {"tcp": {"maxConnections": -1}}
        }));
        let at = |path: &str| {
            errors
                .iter()
                .filter(|(p, _)| p == path)
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
        };
        assert!(
            at("spec.ingress[0].defaultEndpoint")[0].contains("127.0.0.1:<port>"),
            "{errors:?}"
        );
        assert!(
            at("spec.ingress[1].defaultEndpoint")[0].contains("not a number"),
            "{errors:?}"
        );
        assert_eq!(
            at("spec.egress[0].port.targetPort"),
            ["targetPort has no impact on Sidecars"]
        );
        assert!(
            at("spec.egress[1].bind")[0].contains("not a valid IP address"),
            "{errors:?}"
        );
        assert!(
            at("spec.egress[2].captureMode")[0].contains("DEFAULT/NONE"),
            "{errors:?}"
        );
        assert!(
            at("spec.egress[3].bind")[0].contains("unix domain socket"),
            "{errors:?}"
        );
        assert_eq!(at("spec.egress[4].port.number"), Vec::<&str>::new());
        assert_eq!(
            at("spec.egress[5].port.number"),
            ["sidecar: ports on IP bound listeners must be unique"]
        );
        assert_eq!(
            at("spec.inboundConnectionPool.tcp.maxConnections"),
            ["max connections must be non-negative"]
        );
    }

    /// Istio keys egress port uniqueness on the number alone: one port on
    /// two binds is refused too, the second listener's number named.
    #[test]
    fn egress_ports_are_unique_whatever_their_binds() {
        let listener = |number: u32, bind: &str| serde_json::json!({"port": {"number": number, "protocol": "TCP"}, "bind": bind, "hosts": ["./*"]});
        let errors = errors_of(serde_json::json!({
            "egress": [
                listener(5432, "127.0.0.1"),
                listener(5432, "127.0.0.2"),
                listener(5433, ""),
                listener(5433, "127.0.0.1"),
                listener(5434, "127.0.0.1")
            ]
        }));
        let unique = "sidecar: ports on IP bound listeners must be unique".to_string();
        assert_eq!(
            errors,
            [
                ("spec.egress[1].port.number".to_string(), unique.clone()),
                ("spec.egress[3].port.number".to_string(), unique)
            ]
        );
    }

    #[test]
    fn ingress_tls_and_pools_are_checked_as_istio_does() {
        let errors = errors_of(serde_json::json!({
            "ingress": [
                {"port": {"number": 9443, "protocol": "HTTPS"},
                 "tls": {"mode": "SIMPLE", "serverCertificate": "/c.pem", "privateKey": "/k.pem"},
                 "connectionPool": {"tcp": {"maxConnections": 5}}},
                {"port": {"number": 9444, "protocol": "HTTPS"},
                 "tls": {"mode": "MUTUAL", "serverCertificate": "/c.pem", "privateKey": "/k.pem"}},
                {"port": {"number": 9445, "protocol": "HTTP"},
                 "tls": {"mode": "ISTIO_MUTUAL", "credentialName": "secret", "subjectAltNames": ["a"], "httpsRedirect": true}},
                {"port": {"number": 9446, "protocol": "TLS"}, "tls": {"mode": "SIMPLE"},
                 "connectionPool": {"tcp": {"maxConnections": -1}}}
            ]
        }));
        let at = |path: &str| {
            errors
                .iter()
                .filter(|(p, _)| p == path)
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
        };
        assert!(
            !errors.iter().any(|(p, _)| p.starts_with("spec.ingress[0]")),
            "{errors:?}"
        );
        assert_eq!(
            at("spec.ingress[1].tls.caCertificates"),
            ["MUTUAL TLS requires a client CA bundle"]
        );
        assert_eq!(
            at("spec.ingress[2].tls.mode"),
            ["configuration is invalid: cannot set mode to ISTIO_MUTUAL in sidecar ingress tls"]
        );
        assert_eq!(
            at("spec.ingress[2].tls.credentialName"),
            [
                "sidecar: credentialName is not currently supported",
                "ISTIO_MUTUAL TLS cannot have associated credentialName"
            ]
        );
        assert_eq!(
            at("spec.ingress[2].tls.subjectAltNames"),
            ["sidecar: subjectAltNames is not supported in ingress tls"]
        );
        assert_eq!(
            at("spec.ingress[2].tls.httpsRedirect"),
            ["sidecar: httpsRedirect is not supported"]
        );
        assert_eq!(
            at("spec.ingress[2].tls"),
            ["server cannot have TLS settings for non HTTPS/TLS ports"]
        );
        assert_eq!(
            at("spec.ingress[3].tls.serverCertificate"),
            ["SIMPLE TLS requires a server certificate"]
        );
        assert_eq!(
            at("spec.ingress[3].tls.privateKey"),
            ["SIMPLE TLS requires a private key"]
        );
        assert_eq!(
            at("spec.ingress[3].connectionPool.tcp.maxConnections"),
            ["max connections must be non-negative"]
        );
    }

    #[test]
    fn unix_socket_egress_listeners_are_checked_as_istio_does() {
        let errors = errors_of(serde_json::json!({
            "egress": [
                {"port": {"number": 0, "protocol": "HTTP"}, "bind": "unix:///var/run/a.sock", "captureMode": "NONE", "hosts": ["./*"]},
                {"port": {"number": 0, "protocol": "HTTP"}, "bind": "unix://@abstract", "hosts": ["./*"]},
                {"port": {"number": 0, "protocol": "HTTP"}, "bind": "unix://relative.sock", "hosts": ["./*"]},
                {"port": {"number": 0, "protocol": "HTTP"}, "bind": "unix:///var/run/", "hosts": ["./*"]},
                {"port": {"number": 0, "protocol": "NOPE"}, "bind": "unix:///var/run/b.sock", "hosts": ["./*"]},
                {"port": {"number": 0, "protocol": "HTTP"}, "bind": "unix:///var/run/a.sock", "hosts": ["./*"]}
            ]
        }));
        let at = |path: &str| {
            errors
                .iter()
                .filter(|(p, _)| p == path)
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
        };
        for ok in ["spec.egress[0]", "spec.egress[1]"] {
            assert!(!errors.iter().any(|(p, _)| p.starts_with(ok)), "{ok}: {errors:?}");
        }
        assert_eq!(
            at("spec.egress[2].bind"),
            ["relative.sock is not an absolute path to a file"]
        );
        assert_eq!(
            at("spec.egress[3].bind"),
            ["/var/run/ is not an absolute path to a file"]
        );
        assert_eq!(
            at("spec.egress[4].port.protocol"),
            ["sidecar: unsupported protocol NOPE"]
        );
        assert_eq!(
            at("spec.egress[5].bind"),
            ["sidecar: unix domain socket values for listeners must be unique"]
        );
    }

    #[test]
    fn errors_name_their_field() {
        let errors = errors_of(serde_json::json!({
            "workloadSelector": {},
            "ingress": [{"port": {"number": 0, "protocol": "NOPE"}}, {"bind": "x"}],
            "egress": [
                {"hosts": ["*/*"]},
                {"port": {"number": 80}, "hosts": ["bad", "-x-/foo", "./a..b"]},
                {"hosts": []}
            ],
            "outboundTrafficPolicy": {"mode": "REGISTRY_ONLY", "egressProxy": {"host": "proxy"}}
        }));
        let paths: Vec<&str> = errors.iter().map(|(p, _)| p.as_str()).collect();
        for expected in [
            "spec.workloadSelector.labels",
            "spec.ingress[0].port.number",
            "spec.ingress[0].port.protocol",
            "spec.ingress[1].port",
            "spec.egress[0]",
            "spec.egress[1].hosts[0]",
            "spec.egress[1].hosts[1]",
            "spec.egress[1].hosts[2]",
            "spec.egress[2].hosts",
            "spec.outboundTrafficPolicy.egressProxy",
            "spec.outboundTrafficPolicy.egressProxy.port",
        ] {
            assert!(paths.contains(&expected), "{expected} not in {errors:?}");
        }
        assert_eq!(
            errors_of(serde_json::json!({}))[0].1,
            "sidecar: empty configuration provided"
        );
    }
}
