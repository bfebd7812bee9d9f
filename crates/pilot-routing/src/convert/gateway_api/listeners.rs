//! An Istio Gateway as a Gateway API Gateway of pilot's class: one
//! listener per server and host.
//!
//! - Protocols: `HTTP`, `HTTPS`, `TLS` and `TCP` are the Gateway API's;
//!   `GRPC`, `HTTP2` and `GRPC-WEB` are served as `HTTP` (a note: HTTP/2
//!   without TLS is the implementation's to allow); any other protocol's
//!   server is left out.
//! - Hosts: `*` is a listener without hostname, any other host its
//!   listener's hostname. The namespace before the `/` says which routes
//!   may attach: none or `*` every namespace's (`from: All`), `.` the
//!   Gateway's own (`Same`), a name that namespace's (`Selector` on the
//!   label `kubernetes.io/metadata.name`, which Kubernetes gives every
//!   namespace).
//! - TLS: `SIMPLE` with `credentialName` terminates with that Secret
//!   (`certificateRefs`), `PASSTHROUGH` (and a `TLS` server without
//!   `tls`) passes through (protocol `TLS`). Client certificates
//!   (`MUTUAL`, `OPTIONAL_MUTUAL`, `ISTIO_MUTUAL`) and certificates by file
//!   path are not converted: such a server is left out rather than served
//!   without the checks it had. `httpsRedirect`, `bind`, `defaultEndpoint`
//!   and TLS versions and ciphers are left out with a note.
//! - `selector`: a Gateway API Gateway is served by its class's proxies
//!   for it, not by the workloads the selector picked (a note).

use std::collections::{BTreeMap, BTreeSet};

use pilot_api::gateway_api::{
    AllowedRoutes, FromNamespaces, Gateway, LabelSelector, Listener, ListenerTlsConfig, RouteNamespaces,
    SecretObjectReference, TlsMode,
};
use pilot_api::networking::{Gateway as IstioGateway, Server, ServerTlsMode};
use pilot_model::Config;

use super::{GatewayApiOptions, Out, is_hostname, section_name};

/// The label Kubernetes gives every namespace, its name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The Gateway API Gateway of `gateway` (same namespace and name), none
/// when no server could be converted.
pub(super) fn gateway(
    gateway: &Config<IstioGateway>,
    options: &GatewayApiOptions,
    out: &mut Out,
) -> Option<Config<Gateway>> {
    let namespace = &gateway.meta.namespace;
    if !gateway.spec.selector.is_empty() {
        let labels: Vec<String> = gateway
            .spec
            .selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        out.note(
            "spec.selector",
            format!(
                "the proxies serving a Gateway API Gateway are its class's ({}), not the workloads labelled {}: \
                 left out",
                options.gateway_class,
                labels.join(",")
            ),
        );
    }
    let mut listeners: Vec<Listener> = Vec::new();
    let mut names = BTreeSet::new();
    // (port, hostname) already served: the Gateway API allows one listener
    // for each.
    let mut served: BTreeMap<(i32, Option<String>), String> = BTreeMap::new();
    for (s, server) in gateway.spec.servers.iter().enumerate() {
        let at = format!("spec.servers[{s}]");
        let Some((protocol, tls)) = protocol_and_tls(server, namespace, &at, out) else {
            continue;
        };
        let Some(port) = server.port.as_ref().and_then(|p| i32::try_from(p.number).ok()) else {
            continue;
        };
        if !server.bind.is_empty() {
            out.note(
                format!("{at}.bind"),
                "an address to bind to: left out (the listener takes every address)",
            );
        }
        if !server.default_endpoint.is_empty() {
            out.note(format!("{at}.defaultEndpoint"), "left out");
        }
        let base = section_name(if server.name.is_empty() {
            server.port.as_ref().map_or("", |p| p.name.as_str())
        } else {
            &server.name
        })
        .unwrap_or_else(|| format!("{}-{port}", protocol.to_ascii_lowercase()));
        // A TCP listener has no hostname: one listener, whoever may attach
        // to its first host.
        let tcp = protocol == "TCP";
        let hosts: &[String] = if tcp && server.hosts.len() > 1 {
            &server.hosts[..1]
        } else {
            &server.hosts
        };
        for (h, host) in hosts.iter().enumerate() {
            let (from, hostname) = match host.split_once('/') {
                Some((ns, hostname)) => (Some(ns), hostname),
                None => (None, host.as_str()),
            };
            if tcp && (hostname != "*" || server.hosts.len() > 1) {
                out.note(
                    format!("{at}.hosts"),
                    "a TCP listener has no hostname: it takes the port's every connection, and routes may \
                     attach from the first host's namespaces",
                );
            }
            let hostname = match hostname {
                _ if tcp => None,
                "*" => None,
                other if is_hostname(other) => Some(other.to_string()),
                other => {
                    out.note(
                        format!("{at}.hosts[{h}]"),
                        format!("{other:?} is not a Gateway API hostname: left out"),
                    );
                    continue;
                }
            };
            if let Some(other) = served.get(&(port, hostname.clone())) {
                out.note(
                    format!("{at}.hosts[{h}]"),
                    format!(
                        "port {port} already serves {} in listener {other}: a Gateway has one listener per \
                         port and hostname; left out",
                        hostname.as_deref().unwrap_or("every host")
                    ),
                );
                continue;
            }
            let namespaces = match from {
                None | Some("*") => RouteNamespaces {
                    from_written: Some(FromNamespaces::All),
                    selector: None,
                },
                Some(".") => RouteNamespaces {
                    from_written: Some(FromNamespaces::Same),
                    selector: None,
                },
                Some(ns) if ns == namespace => RouteNamespaces {
                    from_written: Some(FromNamespaces::Same),
                    selector: None,
                },
                Some(ns) => RouteNamespaces {
                    from_written: Some(FromNamespaces::Selector),
                    selector: Some(LabelSelector {
                        match_labels: Some(BTreeMap::from([(
                            NAMESPACE_NAME_LABEL.to_string(),
                            ns.to_string(),
                        )])),
                        match_expressions: None,
                    }),
                },
            };
            let mut name = if hosts.len() > 1 {
                format!("{base}-{}", h + 1)
            } else {
                base.clone()
            };
            let mut n = 1;
            while !names.insert(name.clone()) {
                n += 1;
                name = format!("{base}-{n}");
            }
            served.insert((port, hostname.clone()), name.clone());
            listeners.push(Listener {
                name,
                hostname,
                port: Some(port),
                protocol: protocol.to_string(),
                tls: tls.clone(),
                allowed_routes_written: Some(AllowedRoutes {
                    namespaces_written: Some(namespaces),
                    kinds: None,
                }),
            });
        }
    }
    if listeners.is_empty() {
        out.note(
            "spec.servers",
            "no server could be converted: no Gateway is written",
        );
        return None;
    }
    if listeners.len() > 64 {
        out.note("spec.servers", "more than 64 listeners: the first 64 are kept");
        listeners.truncate(64);
    }
    Some(Config::new(
        namespace.clone(),
        gateway.meta.name.clone(),
        Gateway {
            gateway_class_name: options.gateway_class.clone(),
            listeners,
            ..Default::default()
        },
    ))
}

/// The listener protocol and TLS of `server`; none (with a note) when it
/// cannot be served as it was.
fn protocol_and_tls(
    server: &Server,
    namespace: &str,
    at: &str,
    out: &mut Out,
) -> Option<(&'static str, Option<ListenerTlsConfig>)> {
    let protocol = server
        .port
        .as_ref()
        .map(|p| p.protocol.to_ascii_uppercase())
        .unwrap_or_default();
    let tls = server.tls.as_ref();
    if let Some(tls) = tls {
        if tls.https_redirect {
            out.note(
                format!("{at}.tls.httpsRedirect"),
                "a redirect to HTTPS is an HTTPRoute's RequestRedirect filter in the Gateway API: left out",
            );
        }
        if tls.min_protocol_version.is_some()
            || tls.max_protocol_version.is_some()
            || !tls.cipher_suites.is_empty()
        {
            out.note(
                format!("{at}.tls"),
                "TLS versions and cipher suites are the implementation's in the Gateway API: left out",
            );
        }
    }
    match protocol.as_str() {
        "HTTP" => Some(("HTTP", None)),
        "GRPC" | "HTTP2" | "GRPC-WEB" => {
            out.note(
                format!("{at}.port.protocol"),
                format!(
                    "{protocol} is served as an HTTP listener: whether it takes HTTP/2 without TLS is the \
                     implementation's"
                ),
            );
            Some(("HTTP", None))
        }
        "TCP" => Some(("TCP", None)),
        "HTTPS" | "TLS" => {
            let mode = tls.and_then(|t| t.mode).unwrap_or(ServerTlsMode::Passthrough);
            match mode {
                ServerTlsMode::Passthrough => {
                    if protocol == "HTTPS" {
                        out.note(
                            format!("{at}.port.protocol"),
                            "HTTPS passed through is a TLS listener in Passthrough mode: HTTPRoutes do not attach \
                             to it, TLSRoutes do",
                        );
                    }
                    Some((
                        "TLS",
                        Some(ListenerTlsConfig {
                            mode_written: Some(TlsMode::Passthrough),
                            ..Default::default()
                        }),
                    ))
                }
                ServerTlsMode::Simple => {
                    let tls = tls.expect("a mode other than passthrough is written");
                    let mut names: Vec<&String> = tls.credential_names.iter().collect();
                    if !tls.credential_name.is_empty() {
                        names.insert(0, &tls.credential_name);
                    }
                    if names.is_empty() {
                        out.note(
                            format!("{at}.tls"),
                            "certificates by file path have no equivalent (a listener names Secrets): the server \
                             is left out",
                        );
                        return None;
                    }
                    out.note(
                        format!("{at}.tls.credentialName"),
                        format!(
                            "Istio reads the Secret in the gateway workload's namespace; a certificateRef without \
                             a namespace names one in the Gateway's ({namespace}): make sure it is there"
                        ),
                    );
                    let refs = names
                        .into_iter()
                        .map(|name| SecretObjectReference {
                            name: name.strip_prefix("kubernetes://").unwrap_or(name).to_string(),
                            ..Default::default()
                        })
                        .collect();
                    Some((
                        if protocol == "HTTPS" { "HTTPS" } else { "TLS" },
                        Some(ListenerTlsConfig {
                            mode_written: Some(TlsMode::Terminate),
                            certificate_refs: Some(refs),
                            options: None,
                        }),
                    ))
                }
                ServerTlsMode::AutoPassthrough => {
                    out.note(
                        format!("{at}.tls.mode"),
                        "AUTO_PASSTHROUGH (SNI to a service without any route) has no equivalent: the server \
                         is left out",
                    );
                    None
                }
                other => {
                    out.note(
                        format!("{at}.tls.mode"),
                        format!(
                            "{other:?}: a listener that checks clients' certificates is not converted (it would \
                             let every client in): the server is left out"
                        ),
                    );
                    None
                }
            }
        }
        other => {
            out.note(
                format!("{at}.port.protocol"),
                format!("{other} has no Gateway API listener protocol: the server is left out"),
            );
            None
        }
    }
}
