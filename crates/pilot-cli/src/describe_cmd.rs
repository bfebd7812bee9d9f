//! `pilotctl describe service HOST | workload NAME-OR-ADDRESS | proxy ID`:
//! what applies to one service, workload or connected proxy and what of
//! it lost, offline (`-f FILES --services FILE`) or against a server (its
//! objects, `/debug/registryz` and `/debug/proxy-status`), as text or
//! JSON. The computation is `pilot_analyze::describe`; this file fetches
//! and prints.
//!
//! Exit codes: 0 nothing wrong, 1 an operation failed (files, server),
//! 2 usage, 3 not found, 4 something does not work (an error-level
//! finding, a destination's missing subset, an object a proxy withheld).

use std::path::PathBuf;

use pilot_analyze::describe::{
    self, Description, Input, Instance, Proxy, Registry, RouteView, Service, Target, Withheld,
};
use pilot_model::KindRegistry;
use serde_json::Value;

use crate::analyze_cmd::get_json;
use crate::client::Client;
use crate::{Failure, OptionalFiles, analyze_cmd};

/// Exit code: not found.
pub(crate) const NOT_FOUND: u8 = 3;
/// Exit code: something does not work.
pub(crate) const PROBLEMS: u8 = 4;

/// `pilotctl describe` arguments.
#[derive(Debug, clap::Args)]
pub struct DescribeArgs {
    /// What to describe.
    #[arg(value_enum)]
    pub what: What,
    /// Its name: a service host (`reviews` or its full hostname), a
    /// workload (`reviews-v2`, a pod name, an address or address:port),
    /// a proxy (`<pod>.<namespace>` or its node id).
    pub name: String,
    /// The files to read (`-f`): offline, or over the server's objects
    /// with --server.
    #[command(flatten)]
    pub files: OptionalFiles,
    /// A services file (pilot-discovery's --services format) for the
    /// instances, ports and subsets offline.
    #[arg(long, value_name = "FILE")]
    pub services: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Format,
    /// The domain suffix that completes short service names.
    #[arg(long, default_value = "svc.cluster.local")]
    pub domain: String,
    /// pilot-discovery's mesh config file: CUSTOM AuthorizationPolicies
    /// are checked against its extensionProviders, as `analyze` does.
    #[arg(long, value_name = "FILE")]
    pub mesh_config: Option<PathBuf>,
}

/// What `describe` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum What {
    /// A service host.
    #[value(alias = "svc")]
    Service,
    /// A workload (pod).
    #[value(alias = "pod")]
    Workload,
    /// A connected proxy (needs a server).
    Proxy,
}

/// `describe -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Text for people.
    Text,
    /// JSON for scripts.
    Json,
}

/// Runs `describe`: offline when files are given without a server.
pub(crate) async fn run(
    args: &DescribeArgs,
    client: impl FnOnce() -> Result<Client, Failure>,
    offline: bool,
    registry: &KindRegistry,
    namespace: &str,
) -> Result<(), Failure> {
    let target = match args.what {
        What::Service => Target::Service {
            host: args.name.clone(),
            namespace: namespace.to_string(),
        },
        What::Workload => Target::Workload {
            name: args.name.clone(),
            namespace: namespace.to_string(),
        },
        What::Proxy => Target::Proxy {
            id: args.name.clone(),
        },
    };
    let (objects, services, proxies) = if offline {
        if args.what == What::Proxy {
            return Err(Failure::usage(
                "describe proxy needs a server (--server): proxies connect to one; offline, describe the workload",
            ));
        }
        let (objects, _) = analyze_cmd::read_located(
            &args.files.files,
            registry,
            namespace,
            "fix them before describing",
        )?;
        let services = args.services.as_deref().map(read_registry).transpose()?;
        (objects, services, None)
    } else {
        let client = client()?;
        let mut objects = analyze_cmd::server_objects(&client, registry).await?;
        if !args.files.files.is_empty() {
            let (files, _) = analyze_cmd::read_located(
                &args.files.files,
                registry,
                namespace,
                "fix them before describing",
            )?;
            objects.extend(files);
        }
        let services = registry_of("/debug/registryz", &get_json(&client, "/debug/registryz").await?)?;
        let proxies = proxies_of(&get_json(&client, "/debug/proxy-status").await?);
        (objects, Some(services), Some(proxies))
    };
    let mut extra = Vec::new();
    if let Some(path) = &args.mesh_config {
        let providers = pilot_api::mesh::ExtensionProviders::load(path).map_err(Failure::failed)?;
        let known = services.as_ref().map(Registry::services);
        pilot_analyze::custom::analyze(&objects, &providers, known.as_ref(), &mut extra);
    }
    let input = Input {
        objects: &objects,
        registry: services.as_ref(),
        proxies: proxies.as_deref(),
        domain: &args.domain,
        extra_findings: &extra,
    };
    let description = describe::describe(&input, &target).map_err(|error| match error {
        describe::DescribeError::NotFound { .. } => Failure {
            code: NOT_FOUND,
            messages: vec![format!("describe: {error}")],
        },
        describe::DescribeError::BadObject(_) => Failure::failed(format!("describe: {error}")),
    })?;
    match args.output {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&description).map_err(|e| Failure::failed(e.to_string()))?
        ),
        Format::Text => print!("{}", text(&description, offline && services.is_none())),
    }
    if description.problems {
        return Err(Failure {
            code: PROBLEMS,
            messages: vec![format!(
                "describe: {} {} has problems (exit {PROBLEMS}): see above",
                description.target.kind, description.target.name
            )],
        });
    }
    Ok(())
}

/// Reads a services file (pilot-discovery's --services format).
fn read_registry(path: &std::path::Path) -> Result<Registry, Failure> {
    let source = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| Failure::failed(format!("cannot read {source}: {e}")))?;
    let values = pilot_model::document::parse_values(&source, &text).map_err(|errors| Failure {
        code: 1,
        messages: errors.0.iter().map(|e| e.to_string()).collect(),
    })?;
    let mut registry = Registry::default();
    for value in values {
        registry.services.extend(registry_of(&source, &value)?.services);
    }
    Ok(registry)
}

/// `{services: [{hostname, ports: [{name, port, protocol}], instances:
/// [{address, port, labels}]}]}`.
fn registry_of(source: &str, value: &Value) -> Result<Registry, Failure> {
    let list = value
        .get("services")
        .and_then(Value::as_array)
        .ok_or_else(|| Failure::failed(format!("{source}: expected `services:`, a list of services")))?;
    let mut registry = Registry::default();
    for (i, service) in list.iter().enumerate() {
        let hostname = service
            .get("hostname")
            .and_then(Value::as_str)
            .ok_or_else(|| Failure::failed(format!("{source}: services[{i}].hostname: missing")))?;
        let text = |v: &Value, field: &str| v.get(field).and_then(Value::as_str).unwrap_or("").to_string();
        let number = |v: &Value, field: &str| {
            v.get(field)
                .and_then(Value::as_u64)
                .and_then(|n| u16::try_from(n).ok())
                .unwrap_or(0)
        };
        let items = |field: &str| {
            service
                .get(field)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        registry.services.insert(
            hostname.to_string(),
            Service {
                ports: items("ports")
                    .iter()
                    .map(|p| (number(p, "port"), text(p, "name"), text(p, "protocol")))
                    .collect(),
                instances: items("instances")
                    .iter()
                    .map(|instance| Instance {
                        address: text(instance, "address"),
                        node: instance.get("node").and_then(Value::as_str).map(str::to_string),
                        port: number(instance, "port"),
                        labels: instance
                            .get("labels")
                            .and_then(Value::as_object)
                            .map(|labels| {
                                labels
                                    .iter()
                                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                                    .collect()
                            })
                            .unwrap_or_default(),
                    })
                    .collect(),
            },
        );
    }
    Ok(registry)
}

/// The proxies of `/debug/proxy-status`.
fn proxies_of(value: &Value) -> Vec<Proxy> {
    let text = |v: &Value, field: &str| v.get(field).and_then(Value::as_str).unwrap_or("").to_string();
    value
        .get("proxies")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|proxy| {
            let types = proxy
                .get("types")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            Proxy {
                node: text(proxy, "node"),
                node_name: proxy.get("nodeName").and_then(Value::as_str).map(str::to_string),
                replica: text(proxy, "replica"),
                connected: proxy.get("connected").and_then(Value::as_bool).unwrap_or(true),
                types: types
                    .iter()
                    .map(|(name, t)| (name.clone(), text(t, "state")))
                    .collect(),
                nacks: types
                    .iter()
                    .filter(|(_, t)| text(t, "state") == "NACKED")
                    .filter_map(|(name, t)| {
                        Some((name.clone(), t.get("nack")?.get("message")?.as_str()?.to_string()))
                    })
                    .collect(),
                withheld: proxy
                    .get("withheld")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|w| Withheld {
                        object: describe::ObjectRef {
                            kind: text(w, "kind"),
                            namespace: text(w, "namespace"),
                            name: text(w, "name"),
                        },
                        resource_version: text(w, "resourceVersion"),
                        type_: text(w, "type"),
                        message: text(w, "message"),
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The description as text.
fn text(description: &Description, no_registry: bool) -> String {
    let mut out = String::new();
    let mut line = |indent: usize, text: String| {
        out.push_str(&" ".repeat(indent));
        out.push_str(&text);
        out.push('\n');
    };
    if description.target.kind == "proxy" {
        line(0, format!("Proxy {}", description.target.name));
    }
    if no_registry {
        line(
            2,
            "(offline without --services: no instances, ports or workloads known)".into(),
        );
    }
    for service in &description.services {
        line(0, format!("Service {}", service.host));
        if !service.ports.is_empty() || service.instances.is_some() {
            line(
                2,
                format!(
                    "ports: {}; instances: {}",
                    if service.ports.is_empty() {
                        "-".to_string()
                    } else {
                        service.ports.join(", ")
                    },
                    service
                        .instances
                        .map(|n| n.to_string())
                        .unwrap_or_else(|| "-".into())
                ),
            );
        }
        if service.virtual_services.is_empty() {
            line(2, "VirtualServices: none".into());
        } else {
            line(2, "VirtualServices, merged in this order:".into());
            for vs in &service.virtual_services {
                line(
                    4,
                    format!(
                        "{}{}",
                        vs.object,
                        if vs.mesh {
                            String::new()
                        } else {
                            format!(
                                " (gateways {} only: not used by sidecars)",
                                vs.gateways.join(", ")
                            )
                        }
                    ),
                );
            }
        }
        line(
            2,
            format!(
                "DestinationRule: {}",
                service
                    .destination_rule
                    .as_ref()
                    .map(|r| r.to_string())
                    .unwrap_or_else(|| "none".into())
            ),
        );
        for (kind, routes) in [
            ("HTTP", &service.http),
            ("TCP", &service.tcp),
            ("TLS", &service.tls),
        ] {
            if routes.is_empty() {
                continue;
            }
            line(2, format!("{kind} routes, first match wins:"));
            for route in routes {
                route_lines(route, &mut line);
            }
        }
    }
    for workload in &description.workloads {
        line(
            0,
            format!(
                "Workload {}.{}{}{}",
                workload.name,
                workload.namespace,
                if workload.address.is_empty() {
                    String::new()
                } else {
                    format!(" at {}", workload.address)
                },
                if workload.labels.is_empty() {
                    String::new()
                } else {
                    let pairs: Vec<String> =
                        workload.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    format!(" {{{}}}", pairs.join(","))
                }
            ),
        );
        if !workload.services.is_empty() {
            line(2, format!("backs: {}", workload.services.join(", ")));
        }
        match &workload.sidecar.object {
            Some(object) => {
                line(
                    2,
                    format!(
                        "Sidecar: {object} ({}), imports {}",
                        workload.sidecar.origin,
                        workload.sidecar.imports.join(", ")
                    ),
                );
                for host in &workload.sidecar.out_of_scope {
                    line(
                        4,
                        format!("out of scope: {host} (not imported: this proxy has no route to it)"),
                    );
                }
            }
            None => line(2, "Sidecar: none (every host visible in the namespace)".into()),
        }
        let mtls = &workload.mtls;
        line(
            2,
            format!(
                "inbound mTLS: {} from {}{}",
                serde_json::to_value(mtls.mode)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                match &mtls.policy {
                    Some(policy) => format!("{} {policy}", mtls.source),
                    None => "the default (no PeerAuthentication)".into(),
                },
                if mtls.overrides.is_empty() {
                    String::new()
                } else {
                    format!(", overriding {}", mtls.overrides.join("; "))
                }
            ),
        );
        for port in &mtls.ports {
            line(
                4,
                format!(
                    "port {}: {} from port-level {}",
                    port.port,
                    serde_json::to_value(port.mode)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    port.policy
                ),
            );
        }
        if workload.authorization.is_empty() {
            line(2, "AuthorizationPolicies: none (every request allowed)".into());
        } else {
            line(2, "AuthorizationPolicies:".into());
            for policy in &workload.authorization {
                line(
                    4,
                    format!(
                        "{} {} ({}, {} rule{}{})",
                        policy.action,
                        policy.object,
                        policy.scope,
                        policy.rules,
                        if policy.rules == 1 { "" } else { "s" },
                        policy
                            .provider
                            .as_ref()
                            .map(|p| format!(", provider {p}"))
                            .unwrap_or_default()
                    ),
                );
            }
        }
        for proxy in &workload.proxies {
            let states: Vec<String> = proxy.types.iter().map(|(t, s)| format!("{t} {s}")).collect();
            line(
                2,
                format!(
                    "proxy {} (replica {}{}): {}",
                    proxy.node,
                    if proxy.replica.is_empty() {
                        "-"
                    } else {
                        &proxy.replica
                    },
                    if proxy.connected { "" } else { ", disconnected" },
                    states.join(", ")
                ),
            );
            for (kind, message) in &proxy.nacks {
                line(4, format!("{kind} rejected: {message}"));
            }
            for withheld in &proxy.withheld {
                line(
                    4,
                    format!(
                        "withheld: {} version {} ({} rejected it: {})",
                        withheld.object, withheld.resource_version, withheld.type_, withheld.message
                    ),
                );
            }
        }
    }
    if !description.findings.is_empty() {
        line(0, "Findings:".into());
        for finding in &description.findings {
            line(
                2,
                format!(
                    "{} {} {} {}: {}",
                    finding.severity, finding.code, finding.object, finding.path, finding.message
                ),
            );
        }
    }
    for message in &description.validation_messages {
        line(0, format!("status: {message}"));
    }
    out
}

fn route_lines(route: &RouteView, line: &mut impl FnMut(usize, String)) {
    line(
        4,
        format!(
            "{}. {} {}{} [{}]",
            route.order,
            route.object,
            route.path,
            route.name.as_ref().map(|n| format!(" ({n})")).unwrap_or_default(),
            route.state.to_string().to_uppercase()
        ),
    );
    if !route.matches.is_empty() {
        line(7, format!("match: {}", route.matches.join(" | ")));
    }
    line(
        7,
        match route.state {
            describe::RouteState::Wins => format!("wins for {}", route.reason),
            _ => route.reason.clone(),
        },
    );
    for destination in &route.destinations {
        line(
            7,
            format!(
                "-> {}{}{} {}%{}{}",
                destination.host,
                destination
                    .subset
                    .as_ref()
                    .map(|s| format!(" subset {s}"))
                    .unwrap_or_default(),
                destination.port.map(|p| format!(" port {p}")).unwrap_or_default(),
                destination.weight,
                destination
                    .destination_rule
                    .as_ref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default(),
                destination
                    .problem
                    .as_ref()
                    .map(|p| format!(" PROBLEM: {p}"))
                    .unwrap_or_default()
            ),
        );
    }
}
