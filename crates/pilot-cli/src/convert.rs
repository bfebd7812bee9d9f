//! `pilotctl convert`: v1alpha2 RouteRules, DestinationPolicies,
//! EgressRules and IngressRules (from files, directories, stdin or the
//! server) to `networking.istio.io/v1` objects, or (`--to gateway-api`)
//! VirtualServices and Gateways (and the v1alpha2 kinds, through v1) to
//! the Kubernetes Gateway API's HTTPRoutes, Gateways and GatewayClass; as
//! YAML on stdout or one file per object in a directory. Each construct
//! with no exact equivalent is reported on stderr as `note: KIND
//! NAMESPACE/NAME: PATH: what was done` (and, for the Gateway API, in the
//! converted object's `convert.pilot.io/notes` annotation); `--strict`
//! writes nothing and exits 3 when there is any. Documents of the first
//! istioctl (`type: route-rule`) are read as the v1alpha2 objects they
//! became, with a warning, and converted too. The conversions themselves
//! are `pilot_routing::convert` and `pilot_routing::convert::gateway_api`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use pilot_model::document::{self, DocumentError, ParseOptions};
use pilot_model::{DynConfig, KindRegistry};
use pilot_routing::RoutingConfigs;
use pilot_routing::convert;
use pilot_routing::convert::gateway_api::{self, GatewayApiOptions};
use serde_json::Value;

use crate::{Failure, OptionalFiles, files};

/// `pilotctl convert`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// The files to read (`-f`).
    #[command(flatten)]
    pub files: OptionalFiles,
    /// Convert the server's objects instead of files.
    #[arg(long, conflicts_with = "files")]
    pub from_server: bool,
    /// Write one file per object (`KIND-NAMESPACE-NAME.yaml`) into this
    /// directory instead of YAML documents on stdout.
    #[arg(short = 'o', long = "output-dir", value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// The domain suffix that completes short service names.
    #[arg(long, default_value = "svc.cluster.local")]
    pub domain: String,
    /// What to convert to: `v1` (the v1alpha2 routing kinds to
    /// networking.istio.io/v1) or `gateway-api` (VirtualServices and
    /// Gateways to gateway.networking.k8s.io/v1).
    #[arg(long, value_enum, default_value = "v1")]
    pub to: Target,
    /// With --to gateway-api: the GatewayClass of the converted Gateways
    /// (written once, with pilot's controllerName).
    #[arg(long, default_value = gateway_api::DEFAULT_GATEWAY_CLASS, value_name = "NAME")]
    pub gateway_class: String,
    /// With --to gateway-api: a services file (pilot-discovery's
    /// --services format) giving the Services' ports, for destinations
    /// that name none (with --from-server, the server's registry).
    #[arg(long, value_name = "FILE")]
    pub services: Option<PathBuf>,
    /// Write nothing and exit 3 if anything would not be converted
    /// exactly (any note).
    #[arg(long)]
    pub strict: bool,
}

/// `convert --to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// networking.istio.io/v1, from the v1alpha2 routing kinds.
    V1,
    /// The Kubernetes Gateway API, from VirtualServices and Gateways.
    GatewayApi,
}

/// The exit code of `convert --strict` when something would not be
/// converted exactly.
const NOT_EXACT: u8 = 3;

/// Converts `objects` and writes the result as `args` asks; the notes go
/// to stderr. `ports` are the Services' ports by hostname (for
/// `--to gateway-api`).
pub(crate) fn write(
    objects: &[DynConfig],
    args: &ConvertArgs,
    ports: BTreeMap<String, Vec<u16>>,
) -> Result<(), Failure> {
    // An object named twice is the last one, as `apply` would leave it.
    let mut last: Vec<DynConfig> = Vec::new();
    for object in objects {
        last.retain(|o| o.meta.key() != object.meta.key());
        last.push(object.clone());
    }
    let objects = last.as_slice();
    if args.to == Target::GatewayApi {
        return write_gateway_api(objects, args, ports);
    }
    let mut configs = RoutingConfigs::from_configs(objects).map_err(|e| Failure::failed(e.to_string()))?;
    configs.domain_suffix.clone_from(&args.domain);
    let mut conversion = convert::convert(&configs).map_err(|e| Failure::failed(e.to_string()))?;
    let routing = ["RouteRule", "DestinationPolicy", "EgressRule", "IngressRule"];
    conversion.objects.extend(
        objects
            .iter()
            .filter(|o| !routing.contains(&o.meta.kind.as_str()))
            .cloned(),
    );
    for note in &conversion.notes {
        eprintln!("note: {note}");
    }
    refuse_if_strict(args, conversion.notes.len())?;
    match &args.output_dir {
        None => print!("{}", document::to_yaml(&conversion.objects)),
        Some(dir) => write_dir(dir, &conversion.objects)?,
    }
    eprintln!(
        "{} objects converted to {} ({} note{})",
        objects
            .iter()
            .filter(|o| routing.contains(&o.meta.kind.as_str()))
            .count(),
        conversion.objects.len(),
        conversion.notes.len(),
        if conversion.notes.len() == 1 { "" } else { "s" }
    );
    Ok(())
}

/// `--to gateway-api`.
fn write_gateway_api(
    objects: &[DynConfig],
    args: &ConvertArgs,
    service_ports: BTreeMap<String, Vec<u16>>,
) -> Result<(), Failure> {
    let mut options = GatewayApiOptions::default();
    options.domain_suffix.clone_from(&args.domain);
    options.gateway_class.clone_from(&args.gateway_class);
    options.service_ports = service_ports;
    let conversion =
        gateway_api::to_gateway_api(objects, &options).map_err(|e| Failure::failed(e.to_string()))?;
    for note in &conversion.notes {
        eprintln!("note: {note}");
    }
    refuse_if_strict(args, conversion.notes.len())?;
    match &args.output_dir {
        None => print!("{}", document::to_yaml(&conversion.objects)),
        Some(dir) => write_dir(dir, &conversion.objects)?,
    }
    // The objects converted, and which of them a note names; a note on an
    // object that is not among them names the v1 form of a v1alpha2 rule,
    // which leaves the rule's exactness unknown here.
    let kinds = [
        "VirtualService",
        "Gateway",
        "RouteRule",
        "DestinationPolicy",
        "EgressRule",
        "IngressRule",
    ];
    let sources: BTreeSet<(&str, &str, &str)> = objects
        .iter()
        .filter(|o| kinds.contains(&o.meta.kind.as_str()))
        .map(|o| {
            (
                o.meta.kind.as_str(),
                o.meta.namespace.as_str(),
                o.meta.name.as_str(),
            )
        })
        .collect();
    let named: BTreeSet<(&str, &str, &str)> = conversion
        .notes
        .iter()
        .map(|n| (n.kind.as_str(), n.namespace.as_str(), n.name.as_str()))
        .collect();
    let notes = format!(
        "{} note{}",
        conversion.notes.len(),
        if conversion.notes.len() == 1 { "" } else { "s" }
    );
    let written = conversion.objects.len();
    if named.is_subset(&sources) {
        eprintln!(
            "{} objects converted to {written} ({} exact, {} with notes; {notes})",
            sources.len(),
            sources.len() - named.len(),
            named.len(),
        );
    } else {
        eprintln!("{} objects converted to {written} ({notes})", sources.len());
    }
    Ok(())
}

/// With `--strict`, a failure (exit 3) when there are notes.
fn refuse_if_strict(args: &ConvertArgs, notes: usize) -> Result<(), Failure> {
    if args.strict && notes > 0 {
        return Err(Failure {
            code: NOT_EXACT,
            messages: vec![format!(
                "{notes} construct{} would not be converted exactly: nothing written (--strict)",
                if notes == 1 { "" } else { "s" }
            )],
        });
    }
    Ok(())
}

/// The ports of the services of a services file or of the server's
/// `/debug/registryz` (`{services: [{hostname, ports: [{port}]}]}`), by
/// hostname.
pub(crate) fn service_ports(values: &[Value]) -> BTreeMap<String, Vec<u16>> {
    let mut ports = BTreeMap::new();
    for service in values
        .iter()
        .filter_map(|v| v.get("services").and_then(Value::as_array))
        .flatten()
    {
        let Some(hostname) = service.get("hostname").and_then(Value::as_str) else {
            continue;
        };
        let numbers: Vec<u16> = service
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| u16::try_from(p.get("port")?.as_u64()?).ok())
            .collect();
        ports.insert(hostname.to_string(), numbers);
    }
    ports
}

/// The Services' ports of `--services FILE`, if given.
pub(crate) fn file_ports(args: &ConvertArgs) -> Result<BTreeMap<String, Vec<u16>>, Failure> {
    let Some(path) = &args.services else {
        return Ok(BTreeMap::new());
    };
    let source = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| Failure::failed(format!("cannot read {source}: {e}")))?;
    let values = document::parse_values(&source, &text).map_err(|errors| Failure {
        code: 1,
        messages: errors.0.iter().map(|e| e.to_string()).collect(),
    })?;
    Ok(service_ports(&values))
}

/// The objects of `paths`, with documents of the first istioctl read as
/// the v1alpha2 objects they became (each with a warning).
pub(crate) fn read(
    paths: &[String],
    registry: &KindRegistry,
    namespace: &str,
) -> Result<Vec<DynConfig>, Failure> {
    let options = ParseOptions {
        default_namespace: namespace.to_string(),
        earlier_versions: document::ISTIO_EARLIER_VERSIONS.map(String::from).to_vec(),
        ..Default::default()
    };
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    for (source, text) in files::sources(paths).map_err(Failure::failed)? {
        match read_source(&source, &text, registry, &options) {
            Ok(mut found) => objects.append(&mut found),
            Err(mut found) => errors.append(&mut found),
        }
    }
    if !errors.is_empty() {
        let count = errors.len();
        errors.push(format!(
            "{count} error{} found; nothing was converted",
            if count == 1 { "" } else { "s" }
        ));
        return Err(Failure {
            code: 1,
            messages: errors,
        });
    }
    if objects.is_empty() {
        return Err(Failure::failed(format!(
            "no objects found in {}",
            paths.join(", ")
        )));
    }
    Ok(objects)
}

fn read_source(
    source: &str,
    text: &str,
    registry: &KindRegistry,
    options: &ParseOptions,
) -> Result<Vec<DynConfig>, Vec<String>> {
    let messages = |errors: &[DocumentError]| errors.iter().map(DocumentError::to_string).collect::<Vec<_>>();
    let errors = match document::parse_reporting(source, text, registry, options) {
        Ok(parsed) => {
            for warning in &parsed.warnings {
                eprintln!("warning: {warning}");
            }
            return Ok(parsed.configs);
        }
        Err(errors) => errors,
    };
    // Documents of the first istioctl are refused by the parser: read
    // them here, and the others again without them.
    let values = document::parse_values(source, text).map_err(|e| messages(&e.0))?;
    let old: Vec<bool> = values
        .iter()
        .map(|v| document::first_cli_document(v).is_some())
        .collect();
    let others: Vec<DocumentError> = errors
        .0
        .into_iter()
        .filter(|e| !old.get(e.document.saturating_sub(1)).copied().unwrap_or(false))
        .collect();
    if !others.is_empty() {
        return Err(messages(&others));
    }
    let mut objects = Vec::new();
    let mut problems = Vec::new();
    let mut rest = String::new();
    for (index, value) in values.iter().enumerate() {
        match document::first_cli_document(value) {
            Some(first) => match convert::from_first_cli(&first, &options.default_namespace) {
                Ok(object) => {
                    eprintln!(
                        "warning: {source}: document {}: `type: {}` (the first istioctl's format) read as {} {}",
                        index + 1,
                        first.type_name,
                        object.meta.kind,
                        object.meta.name
                    );
                    match registry.prepare(object) {
                        Ok(object) => objects.push(object),
                        Err(e) => problems.push(format!("{source}: document {}: {e}", index + 1)),
                    }
                }
                Err(e) => problems.push(format!("{source}: document {}: {e}", index + 1)),
            },
            None => {
                if !rest.is_empty() {
                    rest.push_str("---\n");
                }
                rest.push_str(&document::to_yaml_value(value));
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    if !rest.is_empty() {
        let parsed =
            document::parse_reporting(source, &rest, registry, options).map_err(|e| messages(&e.0))?;
        objects.extend(parsed.configs);
    }
    Ok(objects)
}

fn write_dir(dir: &Path, objects: &[DynConfig]) -> Result<(), Failure> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::failed(format!("cannot create {}: {e}", dir.display())))?;
    for object in objects {
        let file = dir.join(format!(
            "{}-{}-{}.yaml",
            object.meta.kind.to_ascii_lowercase(),
            object.meta.namespace,
            object.meta.name
        ));
        std::fs::write(&file, document::to_yaml(std::slice::from_ref(object)))
            .map_err(|e| Failure::failed(format!("cannot write {}: {e}", file.display())))?;
        eprintln!("wrote {}", file.display());
    }
    Ok(())
}
