//! `pilotctl convert`: v1alpha2 RouteRules, DestinationPolicies,
//! EgressRules and IngressRules (from files, directories, stdin or the
//! server) to `networking.istio.io/v1` objects, as YAML on stdout or one
//! file per object in a directory. Each construct with no exact v1
//! equivalent is reported on stderr as `note: KIND NAMESPACE/NAME: PATH:
//! what was done`. Documents of the first istioctl (`type: route-rule`)
//! are read as the v1alpha2 objects they became, with a warning, and
//! converted too. The conversion itself is `pilot_routing::convert`.

use std::path::{Path, PathBuf};

use pilot_model::document::{self, DocumentError, ParseOptions};
use pilot_model::{DynConfig, KindRegistry};
use pilot_routing::RoutingConfigs;
use pilot_routing::convert;

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
}

/// Converts `objects` and writes the result as `args` asks; the notes go
/// to stderr.
pub(crate) fn write(objects: &[DynConfig], args: &ConvertArgs) -> Result<(), Failure> {
    // An object named twice is the last one, as `apply` would leave it.
    let mut last: Vec<DynConfig> = Vec::new();
    for object in objects {
        last.retain(|o| o.meta.key() != object.meta.key());
        last.push(object.clone());
    }
    let objects = last.as_slice();
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
