//! What each subcommand does.

use std::time::SystemTime;

use http::{Method, StatusCode};
use pilot_model::{DynConfig, KindRegistry, KindSchema, document};
use serde_json::Value;

use crate::client::Client;
use crate::refusal::{describe, refused};
use crate::table::table;
use crate::{Cli, Command, Failure, Output, analyze_cmd, files, kinds, settings};
use pilot_analyze as analyze;

/// Runs the command line.
pub(crate) async fn run(cli: Cli) -> Result<(), Failure> {
    let registry = pilot_api::default_registry();
    let Cli {
        server,
        token,
        ca_file,
        namespace,
        command,
    } = cli;
    if let Command::KubeInject {
        files,
        mesh_config,
        revision,
    } = &command
    {
        return crate::inject::kube_inject(&files.files, mesh_config.as_deref(), revision.as_deref());
    }
    if let Command::Validate(args) = &command {
        let (objects, located) = analyze_cmd::read_located(
            &args.files,
            &registry,
            &namespace,
            "nothing was sent to the server",
        )?;
        println!("{} objects valid", objects.len());
        // What analysis finds offline, as warnings: never a failure here.
        for finding in analyze::analyze(&objects, None, "svc.cluster.local") {
            let finding = analyze::Finding {
                severity: analyze::Severity::Warning,
                ..finding
            };
            println!("{}", analyze_cmd::line(&finding, &located));
        }
        return Ok(());
    }
    if let Command::Convert(args) = &command
        && !args.from_server
    {
        if args.files.files.is_empty() {
            return Err(Failure::usage("convert: give files with -f, or --from-server"));
        }
        let objects = crate::convert::read(&args.files.files, &registry, &namespace)?;
        return crate::convert::write(&objects, args, crate::convert::file_ports(args)?);
    }
    if let Command::GrpcBootstrap(args) = &command {
        return crate::bootstrap::run(args, &namespace);
    }
    if let Command::Analyze {
        files: file_args,
        services,
        fail_on,
        domain,
        mesh_config,
    } = &command
        && !file_args.files.is_empty()
        && server.is_none()
    {
        let (objects, located) = analyze_cmd::read_located(
            &file_args.files,
            &registry,
            &namespace,
            "fix them before analyzing",
        )?;
        let services = services.as_deref().map(analyze_cmd::read_services).transpose()?;
        return analyze_cmd::report(
            &objects,
            services.as_ref(),
            domain,
            &located,
            *fail_on,
            mesh_config.as_deref(),
        );
    }
    if let Command::Describe(args) = &command {
        let offline = !args.files.files.is_empty() && server.is_none();
        let client = || connect(server, token, ca_file);
        return crate::describe_cmd::run(args, client, offline, &registry, &namespace).await;
    }
    let client = connect(server, token, ca_file)?;
    match command {
        Command::Validate(_)
        | Command::GrpcBootstrap(_)
        | Command::KubeInject { .. }
        | Command::Describe(_) => Ok(()),
        Command::Convert(args) => {
            let objects = analyze_cmd::server_objects(&client, &registry).await?;
            let ports = match args.services {
                Some(_) => crate::convert::file_ports(&args)?,
                None if args.to == crate::convert::Target::GatewayApi => {
                    crate::convert::service_ports(
                        &[analyze_cmd::get_json(&client, "/debug/registryz").await?],
                    )
                }
                None => Default::default(),
            };
            crate::convert::write(&objects, &args, ports)
        }
        Command::Analyze {
            files: file_args,
            services: _,
            fail_on,
            domain,
            mesh_config,
        } => {
            let (mut objects, services) = analyze_cmd::from_server(&client, &registry).await?;
            let mut located = Vec::new();
            if !file_args.files.is_empty() {
                // The files over the server's objects, as `apply` would leave them.
                let (files, sources) = analyze_cmd::read_located(
                    &file_args.files,
                    &registry,
                    &namespace,
                    "fix them before analyzing",
                )?;
                objects.extend(files);
                located = sources;
            }
            analyze_cmd::report(
                &objects,
                Some(&services),
                &domain,
                &located,
                fail_on,
                mesh_config.as_deref(),
            )
        }
        Command::Create(args) => {
            let objects = read_files(&args.files, &registry, &namespace)?;
            each(objects, |object| create(&client, &registry, object)).await
        }
        Command::Replace(args) => {
            let objects = read_files(&args.files, &registry, &namespace)?;
            each(objects, |object| replace(&client, &registry, object)).await
        }
        Command::Apply(args) => {
            let objects = read_files(&args.files, &registry, &namespace)?;
            each(objects, |object| apply(&client, &registry, object)).await
        }
        Command::Delete {
            files: file_args,
            names,
            ignore_not_found,
        } => {
            let targets: Vec<(std::sync::Arc<KindSchema>, String, String)> =
                match (file_args.files.is_empty(), names.split_first()) {
                    (false, None) => read_files(&file_args.files, &registry, &namespace)?
                        .into_iter()
                        .map(|o| Ok((schema(&registry, &o.meta.kind)?, o.meta.namespace, o.meta.name)))
                        .collect::<Result<_, Failure>>()?,
                    (true, Some((kind, names))) if !names.is_empty() => {
                        let schema = kinds::resolve(&registry, kind).map_err(Failure::usage)?;
                        names
                            .iter()
                            .map(|name| (schema.clone(), namespace.clone(), name.clone()))
                            .collect()
                    }
                    (true, Some((kind, _))) => {
                        return Err(Failure::usage(format!(
                            "delete {kind} needs at least one NAME (or use -f FILE)"
                        )));
                    }
                    _ => {
                        return Err(Failure::usage(
                            "delete needs -f FILE or KIND NAME..., not both and not neither",
                        ));
                    }
                };
            each(targets, |(schema, namespace, name)| {
                delete(&client, schema, namespace, name, ignore_not_found)
            })
            .await
        }
        Command::Get {
            kind,
            name,
            output,
            all_namespaces,
            selector,
        } => {
            let schema = kinds::resolve(&registry, &kind).map_err(Failure::usage)?;
            get(
                &client,
                &schema,
                &namespace,
                name,
                output,
                all_namespaces,
                selector,
            )
            .await
        }
        Command::ProxyStatus => proxy_status(&client).await,
        Command::ProxyConfig(crate::ProxyConfigCommand::Scope { proxy }) => {
            crate::proxy_config::scope(&client, &proxy).await
        }
        Command::ProxyConfig(crate::ProxyConfigCommand::Secret { proxy }) => {
            crate::proxy_secret::secret(&client, &proxy).await
        }
        Command::Quarantine => crate::quarantine::show(&client).await,
    }
}

fn connect(
    server: Option<String>,
    token: Option<String>,
    ca_file: Option<std::path::PathBuf>,
) -> Result<Client, Failure> {
    let path = settings::config_path();
    let file = match &path {
        Some(path) => settings::read_file(path)?,
        None => settings::FileSettings::default(),
    };
    let from_env = std::env::var("PILOT_SERVER").ok().filter(|s| !s.is_empty());
    let (url, origin) = if let Some(server) = server {
        (server, "--server".to_string())
    } else if let Some(server) = from_env {
        (server, "PILOT_SERVER".to_string())
    } else if let Some(server) = file.server {
        let origin = path.map(|p| p.display().to_string()).unwrap_or_default();
        (server, origin)
    } else {
        (settings::DEFAULT_SERVER.to_string(), "the default".to_string())
    };
    Client::new(
        &url,
        origin,
        token.or(file.token),
        ca_file.or(file.ca_file).as_deref(),
    )
}

fn read_files(paths: &[String], registry: &KindRegistry, namespace: &str) -> Result<Vec<DynConfig>, Failure> {
    files::read(paths, registry, namespace).map_err(|mut messages| {
        let count = messages.len();
        messages.push(format!(
            "{count} error{} found; nothing was sent to the server",
            if count == 1 { "" } else { "s" }
        ));
        Failure { code: 1, messages }
    })
}

/// Runs `step` on every item, going on after failures; fails at the end if
/// any failed.
async fn each<T, F, Fut>(items: Vec<T>, mut step: F) -> Result<(), Failure>
where
    F: FnMut(T) -> Fut,
    Fut: std::future::Future<Output = Result<(), Failure>>,
{
    let mut failed = Failure {
        code: 1,
        messages: Vec::new(),
    };
    for item in items {
        if let Err(failure) = step(item).await {
            if failure.code == 2 {
                return Err(failure);
            }
            failed.messages.extend(failure.messages);
        }
    }
    if failed.messages.is_empty() {
        Ok(())
    } else {
        Err(failed)
    }
}

fn schema(registry: &KindRegistry, kind: &str) -> Result<std::sync::Arc<KindSchema>, Failure> {
    registry
        .get(kind)
        .ok_or_else(|| Failure::usage(format!("unknown kind {kind}")))
}

/// A cluster-scoped kind's collection is under the kind whatever the
/// namespace asked for (its objects have none).
fn collection_path(schema: &KindSchema, namespace: Option<&str>) -> String {
    match namespace.filter(|_| !schema.cluster_scoped) {
        Some(namespace) => format!(
            "/apis/{}/{}/namespaces/{namespace}/{}",
            schema.group, schema.version, schema.plural
        ),
        None => format!("/apis/{}/{}/{}", schema.group, schema.version, schema.plural),
    }
}

fn object_path(schema: &KindSchema, namespace: &str, name: &str) -> String {
    format!("{}/{name}", collection_path(schema, Some(namespace)))
}

async fn create(client: &Client, registry: &KindRegistry, mut object: DynConfig) -> Result<(), Failure> {
    let schema = schema(registry, &object.meta.kind)?;
    object.meta.resource_version = None;
    let (kind, namespace, name) = (
        object.meta.kind.clone(),
        object.meta.namespace.clone(),
        object.meta.name.clone(),
    );
    let body = serde_json::to_vec(&object).map_err(|e| Failure::failed(e.to_string()))?;
    let (status, answer) = client
        .send(
            Method::POST,
            &collection_path(&schema, Some(&namespace)),
            Some(body),
        )
        .await?;
    if status == StatusCode::CREATED {
        println!("{}/{name} created", kinds::display(&kind));
        Ok(())
    } else {
        Err(refused(&kind, &namespace, &name, status, &answer, client))
    }
}

/// The stored object, `None` when missing.
async fn fetch(
    client: &Client,
    schema: &KindSchema,
    namespace: &str,
    name: &str,
) -> Result<Option<DynConfig>, Failure> {
    let (status, body) = client
        .send(Method::GET, &object_path(schema, namespace, name), None)
        .await?;
    match status {
        StatusCode::OK => serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| Failure::failed(format!("the server sent an unreadable object: {e}"))),
        StatusCode::NOT_FOUND => Ok(None),
        _ => Err(refused(&schema.kind, namespace, name, status, &body, client)),
    }
}

async fn put(client: &Client, schema: &KindSchema, object: &DynConfig) -> Result<(), Failure> {
    let (namespace, name) = (&object.meta.namespace, &object.meta.name);
    let body = serde_json::to_vec(object).map_err(|e| Failure::failed(e.to_string()))?;
    let (status, answer) = client
        .send(Method::PUT, &object_path(schema, namespace, name), Some(body))
        .await?;
    if status == StatusCode::OK {
        Ok(())
    } else {
        Err(refused(&schema.kind, namespace, name, status, &answer, client))
    }
}

async fn replace(client: &Client, registry: &KindRegistry, mut object: DynConfig) -> Result<(), Failure> {
    let schema = schema(registry, &object.meta.kind)?;
    if object.meta.resource_version.is_none() {
        match fetch(client, &schema, &object.meta.namespace, &object.meta.name).await? {
            Some(current) => object.meta.resource_version = current.meta.resource_version,
            None => {
                return Err(Failure::failed(format!(
                    "{} not found; use create or apply",
                    describe(&object.meta.kind, &object.meta.namespace, &object.meta.name)
                )));
            }
        }
    }
    put(client, &schema, &object).await?;
    println!(
        "{}/{} replaced",
        kinds::display(&object.meta.kind),
        object.meta.name
    );
    Ok(())
}

async fn apply(client: &Client, registry: &KindRegistry, mut object: DynConfig) -> Result<(), Failure> {
    let schema = schema(registry, &object.meta.kind)?;
    let kind = kinds::display(&object.meta.kind);
    match fetch(client, &schema, &object.meta.namespace, &object.meta.name).await? {
        None => create(client, registry, object).await,
        Some(current)
            if current.spec == object.spec
                && current.meta.labels == object.meta.labels
                && current.meta.annotations == object.meta.annotations =>
        {
            println!("{kind}/{} unchanged", object.meta.name);
            Ok(())
        }
        Some(current) => {
            object.meta.resource_version = current.meta.resource_version;
            put(client, &schema, &object).await?;
            println!("{kind}/{} configured", object.meta.name);
            Ok(())
        }
    }
}

async fn delete(
    client: &Client,
    schema: std::sync::Arc<KindSchema>,
    namespace: String,
    name: String,
    ignore_not_found: bool,
) -> Result<(), Failure> {
    let (status, body) = client
        .send(Method::DELETE, &object_path(&schema, &namespace, &name), None)
        .await?;
    match status {
        StatusCode::OK => {
            println!("{}/{name} deleted", kinds::display(&schema.kind));
            Ok(())
        }
        StatusCode::NOT_FOUND if ignore_not_found => Ok(()),
        StatusCode::NOT_FOUND => Err(Failure::failed(format!(
            "{} not found",
            describe(&schema.kind, &namespace, &name)
        ))),
        _ => Err(refused(&schema.kind, &namespace, &name, status, &body, client)),
    }
}

async fn get(
    client: &Client,
    schema: &KindSchema,
    namespace: &str,
    name: Option<String>,
    output: Output,
    all_namespaces: bool,
    selector: Option<String>,
) -> Result<(), Failure> {
    let objects = match &name {
        Some(name) => match fetch(client, schema, namespace, name).await? {
            Some(object) => vec![object],
            None => {
                return Err(Failure::failed(format!(
                    "{} not found",
                    describe(&schema.kind, namespace, name)
                )));
            }
        },
        None => {
            let mut path = collection_path(schema, (!all_namespaces).then_some(namespace));
            if let Some(selector) = &selector {
                path.push_str(&format!("?labelSelector={}", encode(selector)));
            }
            let (status, body) = client.send(Method::GET, &path, None).await?;
            if status != StatusCode::OK {
                return Err(refused(&schema.kind, namespace, "", status, &body, client));
            }
            let list: Value = serde_json::from_slice(&body)
                .map_err(|e| Failure::failed(format!("the server sent an unreadable list: {e}")))?;
            let items = list.get("items").cloned().unwrap_or(Value::Array(vec![]));
            serde_json::from_value(items)
                .map_err(|e| Failure::failed(format!("the server sent an unreadable list: {e}")))?
        }
    };
    match output {
        Output::Yaml => print!("{}", document::to_yaml(&objects)),
        Output::Json => {
            let value = match (&name, objects.as_slice()) {
                (Some(_), [object]) => serde_json::to_value(object),
                _ => serde_json::to_value(&objects)
                    .map(|items| serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items})),
            }
            .map_err(|e| Failure::failed(e.to_string()))?;
            println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
        }
        Output::Short if objects.is_empty() => {
            let place = if all_namespaces {
                "in any namespace".to_string()
            } else {
                format!("in namespace {namespace}")
            };
            eprintln!("No {} found {place}.", schema.plural);
        }
        Output::Short => {
            let mut rows = Vec::new();
            let mut header = vec!["NAME", "VERSION", "STATUS", "AGE"];
            if all_namespaces {
                header.insert(0, "NAMESPACE");
            }
            rows.push(header.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            for object in &objects {
                let mut row = vec![
                    object.meta.name.clone(),
                    object.meta.resource_version.clone().unwrap_or_default(),
                    status_column(object),
                    age(object.meta.creation_timestamp),
                ];
                if all_namespaces {
                    row.insert(0, object.meta.namespace.clone());
                }
                rows.push(row);
            }
            print!("{}", table(&rows));
        }
    }
    Ok(())
}

/// `acked/proxies` (and `N NACKED`, `N WITHHELD`, then the analysis
/// findings: `N ERRORS`, `N WARNINGS`) for the object's current version;
/// `-` before pilot-discovery has reported on that version.
fn status_column(object: &DynConfig) -> String {
    match &object.meta.status {
        Some(status) if object.meta.resource_version.as_deref() == Some(status.observed_version.as_str()) => {
            status.summary() + &analyze_cmd::findings_summary(status)
        }
        _ => "-".to_string(),
    }
}

async fn proxy_status(client: &Client) -> Result<(), Failure> {
    let (status, body) = client.send(Method::GET, "/debug/proxy-status", None).await?;
    if status != StatusCode::OK {
        return Err(refused("proxy-status", "default", "", status, &body, client));
    }
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| Failure::failed(format!("the server sent an unreadable proxy status: {e}")))?;
    let proxies = value
        .get("proxies")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if proxies.is_empty() {
        eprintln!("No proxies are connected to {}.", client.url);
        return Ok(());
    }
    // Envoy's types, then ztunnel's: a proxy is served one set or the
    // other, and shows `-` under the other's (and a sidecar under SRDS,
    // scopes being an edge proxy's).
    const TYPES: [&str; 7] = ["CDS", "EDS", "LDS", "RDS", "SRDS", "WDS", "WADS"];
    let mut rows = vec![
        [
            "NAME",
            "CDS",
            "EDS",
            "LDS",
            "RDS",
            "SRDS",
            "WDS",
            "WADS",
            "REPLICA",
            "RESTARTS",
            "LAST EXIT",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>(),
    ];
    let mut nacks = Vec::new();
    for proxy in &proxies {
        let node = proxy
            .get("node")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut row = vec![node.clone()];
        let connected = proxy.get("connected").and_then(Value::as_bool).unwrap_or(true);
        let ztunnel = node.starts_with("ztunnel~");
        let served = proxy.get("types").and_then(Value::as_object);
        for name in TYPES {
            // The server lists every type it serves a connected proxy.
            let unserved = connected && served.is_some_and(|types| !types.contains_key(name));
            if ztunnel != matches!(name, "WDS" | "WADS") || unserved {
                row.push("-".to_string());
                continue;
            }
            let entry = proxy.pointer(&format!("/types/{name}"));
            let state = entry
                .and_then(|e| e.get("state"))
                .and_then(Value::as_str)
                .unwrap_or(if connected { "NOT SENT" } else { "DISCONNECTED" });
            row.push(state.to_string());
            if let Some(nack) = entry.and_then(|e| e.get("nack")).filter(|n| !n.is_null())
                && state == "NACKED"
            {
                nacks.push(format!(
                    "{node} {name} rejected version {}: {}",
                    nack.get("version").and_then(Value::as_str).unwrap_or(""),
                    nack.get("message").and_then(Value::as_str).unwrap_or("")
                ));
            }
        }
        for object in proxy
            .get("withheld")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let field = |name: &str| object.get(name).and_then(Value::as_str).unwrap_or("");
            nacks.push(format!(
                "{node} is served without {} {}/{} (version {}): it rejected it ({}): {}",
                field("kind"),
                field("namespace"),
                field("name"),
                field("resourceVersion"),
                field("type"),
                field("message")
            ));
        }
        // The pilot-discovery replica serving it (istioctl's ISTIOD).
        row.push(
            proxy
                .get("replica")
                .and_then(Value::as_str)
                .filter(|_| connected)
                .unwrap_or("-")
                .to_string(),
        );
        let process = proxy.get("process");
        row.push(
            process
                .and_then(|p| p.get("restarts"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .to_string(),
        );
        row.push(
            process
                .and_then(|p| p.get("last_exit"))
                .and_then(Value::as_str)
                .unwrap_or("-")
                .to_string(),
        );
        rows.push(row);
    }
    print!("{}", table(&rows));
    for nack in nacks {
        println!("{nack}");
    }
    Ok(())
}

/// `5s`, `3m`, `2h`, `4d`.
fn age(created: Option<SystemTime>) -> String {
    let Some(seconds) = created
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .map(|d| d.as_secs())
    else {
        return "<unknown>".to_string();
    };
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// Percent-encodes a query value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_ages_read() {
        let rows = vec![
            vec!["NAME".to_string(), "VERSION".into()],
            vec!["reviews-default".to_string(), "41".into()],
        ];
        assert_eq!(table(&rows), "NAME              VERSION\nreviews-default   41\n");
        let minute_ago = SystemTime::now() - std::time::Duration::from_secs(600);
        assert_eq!(age(Some(minute_ago)), "10m");
        assert_eq!(encode("app=reviews,v!=1"), "app%3Dreviews%2Cv%21%3D1");
    }

    #[test]
    fn the_status_column_speaks_of_the_current_version_only() {
        let mut object: DynConfig = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.istio.io/v1alpha2", "kind": "RouteRule",
            "metadata": {"name": "r", "namespace": "default", "resourceVersion": "8"},
            "spec": {},
            "status": {"observedVersion": "8", "proxies": 40, "acked": 37, "nacked": 3,
                       "nacks": [{"type": "LDS", "message": "bad regex", "proxies": 3}],
                       "lastUpdate": "2026-11-23T18:00:00Z"}
        }))
        .unwrap();
        assert_eq!(status_column(&object), "37/40 3 NACKED");
        object.meta.resource_version = Some("9".into());
        assert_eq!(status_column(&object), "-");
        object.meta.status = None;
        assert_eq!(status_column(&object), "-");
    }
}
