//! `pilotctl analyze` and the analysis `pilotctl validate` adds: where the
//! objects and services come from, and how findings are printed.

use std::path::Path;

use http::{Method, StatusCode};
use pilot_model::document::Locator;
use pilot_model::{DynConfig, KindRegistry, document};
use serde_json::Value;

use crate::client::Client;
use crate::{FailOn, Failure, files};
use pilot_analyze::{self as analyze, Finding, Services, Severity};

/// Prints `finding`, placed at its file, line and column when it came from
/// one of `located`.
pub(crate) fn line(finding: &Finding, located: &[(String, Locator)]) -> String {
    // The last file that defines the object is the one that counts.
    let place = located.iter().rev().find_map(|(source, locator)| {
        locator
            .find(&finding.kind, &finding.name, &finding.path)
            .map(|(line, column)| format!("{source}:{line}:{column}: "))
    });
    format!(
        "{}{} {} {} {}/{} {}: {}",
        place.unwrap_or_default(),
        finding.severity,
        finding.code,
        finding.kind,
        finding.namespace,
        finding.name,
        finding.path,
        finding.message
    )
}

/// The findings a status carries (`validationMessages`), counted for
/// `pilotctl get`: ` 1 ERROR`, ` 2 WARNINGS`, or nothing.
pub(crate) fn findings_summary(status: &pilot_model::ConfigStatus) -> String {
    let errors = status.validation_messages.iter().filter(|m| m.is_error()).count();
    let warnings = status.validation_messages.len() - errors;
    let mut out = String::new();
    for (count, word) in [(errors, "ERROR"), (warnings, "WARNING")] {
        if count > 0 {
            out.push_str(&format!(" {count} {word}{}", if count == 1 { "" } else { "S" }));
        }
    }
    out
}

/// Reads a services file (`services: [{hostname, instances: [{labels}]}]`,
/// as pilot-discovery's --services).
pub(crate) fn read_services(path: &Path) -> Result<Services, Failure> {
    let source = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| Failure::failed(format!("cannot read {source}: {e}")))?;
    let values = document::parse_values(&source, &text).map_err(|errors| Failure {
        code: 1,
        messages: errors.0.iter().map(|e| e.to_string()).collect(),
    })?;
    let mut services = Services::default();
    for value in values {
        add_services(&source, &value, &mut services)?;
    }
    Ok(services)
}

/// Adds `{services: [{hostname, instances: [{labels}]}]}` to `services`.
fn add_services(source: &str, value: &Value, services: &mut Services) -> Result<(), Failure> {
    let list = value
        .get("services")
        .and_then(Value::as_array)
        .ok_or_else(|| Failure::failed(format!("{source}: expected `services:`, a list of services")))?;
    for (i, service) in list.iter().enumerate() {
        let hostname = service
            .get("hostname")
            .and_then(Value::as_str)
            .ok_or_else(|| Failure::failed(format!("{source}: services[{i}].hostname: missing")))?;
        let instances = service
            .get("instances")
            .and_then(Value::as_array)
            .map(|instances| {
                instances
                    .iter()
                    .map(|instance| {
                        instance
                            .get("labels")
                            .and_then(Value::as_object)
                            .map(|labels| {
                                labels
                                    .iter()
                                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                                    .collect()
                            })
                            .unwrap_or_default()
                    })
                    .collect()
            })
            .unwrap_or_default();
        services.hosts.insert(hostname.to_string(), instances);
    }
    Ok(())
}

/// Every object of every kind on the server, its service registry
/// (`/debug/registryz`) and the namespaces of its connected proxies
/// (`/debug/proxy-status`).
pub(crate) async fn from_server(
    client: &Client,
    registry: &KindRegistry,
) -> Result<(Vec<DynConfig>, Services), Failure> {
    let objects = server_objects(client, registry).await?;
    let mut services = Services::default();
    add_services(
        "/debug/registryz",
        &get_json(client, "/debug/registryz").await?,
        &mut services,
    )?;
    let proxies = get_json(client, "/debug/proxy-status").await?;
    services.proxy_namespaces = Some(
        proxies
            .get("proxies")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|p| p.get("connected").and_then(Value::as_bool).unwrap_or(true))
            .filter_map(|p| analyze::node_namespace(p.get("node")?.as_str()?))
            .collect(),
    );
    Ok((objects, services))
}

/// Every object of every kind on the server.
pub(crate) async fn server_objects(
    client: &Client,
    registry: &KindRegistry,
) -> Result<Vec<DynConfig>, Failure> {
    let mut objects = Vec::new();
    for kind in registry.kinds() {
        let Some(schema) = registry.get(&kind) else {
            continue;
        };
        let path = format!("/apis/{}/{}/{}", schema.group, schema.version, schema.plural);
        let list = get_json(client, &path).await?;
        let items = list.get("items").cloned().unwrap_or(Value::Array(vec![]));
        let mut items: Vec<DynConfig> = serde_json::from_value(items).map_err(|e| {
            Failure::failed(format!("the server sent an unreadable {} list: {e}", schema.kind))
        })?;
        for item in &mut items {
            registry.identify(item);
        }
        objects.append(&mut items);
    }
    Ok(objects)
}

/// GET `path` as JSON; a failure names the path and the answer.
pub(crate) async fn get_json(client: &Client, path: &str) -> Result<Value, Failure> {
    let (status, body) = client.send(Method::GET, path, None).await?;
    if status != StatusCode::OK {
        return Err(Failure::failed(format!(
            "GET {path}: the server answered {status}: {}",
            String::from_utf8_lossy(&body).trim()
        )));
    }
    serde_json::from_slice(&body).map_err(|e| Failure::failed(format!("GET {path}: unreadable answer: {e}")))
}

/// Analyzes, prints every finding and a summary, and fails per `fail_on`.
pub(crate) fn report(
    objects: &[DynConfig],
    services: Option<&Services>,
    domain: &str,
    located: &[(String, Locator)],
    fail_on: FailOn,
    mesh_config: Option<&Path>,
) -> Result<(), Failure> {
    let mut findings = analyze::analyze(objects, services, domain);
    if let Some(path) = mesh_config {
        let providers = pilot_api::mesh::ExtensionProviders::load(path).map_err(Failure::failed)?;
        analyze::custom::analyze(objects, &providers, services, &mut findings);
    }
    for finding in &findings {
        println!("{}", line(finding, located));
    }
    let errors = findings.iter().filter(|f| f.severity == Severity::Error).count();
    let warnings = findings.len() - errors;
    println!(
        "{} objects analyzed{}: {errors} error{}, {warnings} warning{}",
        objects.len(),
        if services.is_some() {
            " with the service registry"
        } else {
            " offline (no service registry: pass --services FILE or analyze the server)"
        },
        if errors == 1 { "" } else { "s" },
        if warnings == 1 { "" } else { "s" },
    );
    let failing = match fail_on {
        FailOn::Error => errors,
        FailOn::Warning => findings.len(),
        FailOn::Never => 0,
    };
    if failing > 0 {
        return Err(Failure::failed(format!(
            "analyze: {failing} finding{} at or above --fail-on {}",
            if failing == 1 { "" } else { "s" },
            match fail_on {
                FailOn::Error => "error",
                FailOn::Warning => "warning",
                FailOn::Never => "never",
            }
        )));
    }
    Ok(())
}

/// The objects of `paths` with a locator per source; on errors, `after`
/// ends the list of them ("nothing was sent to the server").
pub(crate) fn read_located(
    paths: &[String],
    registry: &KindRegistry,
    namespace: &str,
    after: &str,
) -> Result<files::Located, Failure> {
    files::read_located(paths, registry, namespace).map_err(|mut messages| {
        let count = messages.len();
        messages.push(format!(
            "{count} error{} found; {after}",
            if count == 1 { "" } else { "s" }
        ));
        Failure { code: 1, messages }
    })
}
