//! What a Sidecar egress listener on a Unix domain socket (`bind:
//! unix:///path`, port 0) of a protocol other than HTTP may import,
//! beyond Istio's `ValidateSidecar` (which accepts it and leaves the
//! proxy without a listener): such a listener forwards every connection
//! to one host port, since a socket has no port to tell several apart, so
//! it names exactly one host, without wildcards. Whether that host has
//! one port is the registry's to say, not the Sidecar's: a host with
//! several still gets no listener.

use super::checks::{at, index};
use super::sidecar::{EgressHost, EgressListener};
use pilot_model::{FieldErrors, Protocol};

/// Checks the hosts of `listener`, at `path` (`spec.egress[i]`), when it
/// is bound to a Unix domain socket with a protocol other than HTTP.
pub(super) fn socket_hosts(path: &str, listener: &EgressListener, errors: &mut FieldErrors) {
    let Some(port) = &listener.port else {
        return;
    };
    // Read as generation reads it: an unset protocol is HTTP when one of
    // the hosts' ports is, so only a given one is known here.
    if port.number != 0 || port.protocol.is_empty() {
        return;
    }
    if Protocol::from_port_name(&port.protocol.replace('_', "")).is_http() {
        return;
    }
    let protocol = port.protocol.to_ascii_uppercase();
    if listener.hosts.len() > 1 {
        errors.push(
            at(path, "hosts"),
            format!(
                "sidecar: a unix domain socket listener of protocol {protocol} forwards to one host port, so it must import exactly one host, not {}",
                listener.hosts.len()
            ),
        );
        return;
    }
    for (j, host) in listener.hosts.iter().enumerate() {
        let Ok(parsed) = EgressHost::parse(host) else {
            // Its own error is reported with the other hosts'.
            continue;
        };
        if parsed.host.contains('*') || parsed.exclude {
            errors.push(
                index(&at(path, "hosts"), j),
                format!(
                    "sidecar: a unix domain socket listener of protocol {protocol} forwards to one host port, so it must name one host, not {host:?}"
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::sidecar::Sidecar;
    use pilot_model::FieldErrors;

    fn errors_of(egress: serde_json::Value) -> Vec<(String, String)> {
        let sidecar: Sidecar = serde_json::from_value(serde_json::json!({ "egress": egress })).unwrap();
        let mut errors = FieldErrors::default();
        super::super::validate_sidecar::sidecar(&sidecar, &mut errors);
        errors
            .iter()
            .map(|e| (e.path.clone(), e.message.clone()))
            .collect()
    }

    #[test]
    fn a_socket_that_is_not_http_imports_one_named_host() {
        let socket = |protocol: &str, hosts: serde_json::Value| serde_json::json!([{"port": {"number": 0, "protocol": protocol}, "bind": "unix:///var/run/a.sock", "hosts": hosts}]);
        // One host, named: a listener forwarding to it.
        assert_eq!(
            errors_of(socket("TCP", serde_json::json!(["./mysql.a.svc.cluster.local"]))),
            []
        );
        assert_eq!(
            errors_of(socket("MONGO", serde_json::json!(["*/db.example.com"]))),
            []
        );
        // HTTP (or gRPC) routes by host name: any hosts.
        assert_eq!(errors_of(socket("HTTP", serde_json::json!(["./*", "b/*"]))), []);
        assert_eq!(errors_of(socket("GRPC", serde_json::json!(["./*"]))), []);
        let two = errors_of(socket(
            "TCP",
            serde_json::json!(["./a.a.svc.cluster.local", "./b.a.svc.cluster.local"]),
        ));
        assert_eq!(two.len(), 1, "{two:?}");
        assert_eq!(two[0].0, "spec.egress[0].hosts");
        assert!(two[0].1.contains("exactly one host, not 2"), "{two:?}");
        for wildcard in ["./*", "*/*.example.com", "~/db.example.com"] {
            let errors = errors_of(socket("tls", serde_json::json!([wildcard])));
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert_eq!(errors[0].0, "spec.egress[0].hosts[0]");
            assert!(
                errors[0].1.contains("protocol TLS forwards to one host port"),
                "{errors:?}"
            );
        }
    }
}
