//! Reading and writing configuration documents: streams of YAML documents
//! (`---` separated) or JSON, Kubernetes-style (`apiVersion`, `kind`,
//! `metadata`, `spec`), with every error placed at its line and column.
//!
//! ```
//! use pilot_model::{KindRegistry, KindSchema, document};
//!
//! let registry = KindRegistry::new();
//! let quota = KindSchema::new("Quota", "quotas", "example.com", "v1", |spec, errors| {
//!     if spec.get("limit").and_then(|v| v.as_u64()).is_none_or(|limit| limit > 100) {
//!         errors.push("spec.limit", "must be an integer from 0 to 100");
//!     }
//! });
//! registry.register_schema(quota).unwrap();
//!
//! let text = "\
//! apiVersion: example.com/v1
//! kind: Quota
//! metadata:
//!   name: q
//! spec:
//!   limit: 250
//! ";
//! let errors = document::parse("quotas.yaml", text, &registry).unwrap_err();
//! assert_eq!(errors.to_string(), "quotas.yaml:6:3 spec.limit: must be an integer from 0 to 100");
//! ```

mod emit;
mod first_cli;
mod tree;

use std::fmt;
use std::path::Path;

pub use emit::{to_yaml, to_yaml_value};
pub use first_cli::{FIRST_CLI_TYPES, FirstCliDocument, first_cli_document};
pub use tree::{Limits, Position};

use crate::config::decode_all;
use crate::{DynConfig, KindRegistry, StoreError};

/// One problem in a document, placed precisely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentError {
    /// The file (or other source) name.
    pub source: String,
    /// The 1-based index of the document in the source.
    pub document: usize,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// The field path, e.g. `spec.route[1].weight` (empty for the document
    /// as a whole).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for DocumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{} ", self.source, self.line, self.column)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// Every problem found in one or more documents, in source order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentErrors(pub Vec<DocumentError>);

impl fmt::Display for DocumentErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            error.fmt(f)?;
        }
        Ok(())
    }
}

impl std::error::Error for DocumentErrors {}

/// How documents are read.
#[derive(Debug, Clone)]
pub struct ParseOptions {
    /// Bounds on input size, nesting and alias expansion.
    pub limits: Limits,
    /// The namespace given to objects that name none (as `kubectl` does).
    pub default_namespace: String,
    /// Earlier `apiVersion`s (`group/version`) read as the version their
    /// kind is served at, each with a warning (none by default: an API
    /// serves only its versions). pilotctl reads
    /// [`ISTIO_EARLIER_VERSIONS`], as Istio's istioctl ignored the version.
    pub earlier_versions: Vec<String>,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            limits: Limits::default(),
            default_namespace: "default".to_string(),
            earlier_versions: Vec::new(),
        }
    }
}

/// The versions of the routing kinds Istio's istioctl read alike (it
/// ignored `apiVersion`), besides the served `config.istio.io/v1alpha2`.
pub const ISTIO_EARLIER_VERSIONS: [&str; 2] = ["config.istio.io/v1alpha1", "config.istio.io/v1beta1"];

/// What [`parse_reporting`] read: the objects, and the warnings about how
/// (each placed like an error).
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    /// The valid objects, in source order.
    pub configs: Vec<DynConfig>,
    /// Things read otherwise than written (an earlier version read as the
    /// served one).
    pub warnings: Vec<DocumentError>,
}

/// Parses and validates every document in `text` against `registry`. Either
/// every object is good, or every problem of every document is returned.
/// Objects are at their kind's storage version, but those written at a
/// version with rules of its own ([`KindSchema::has_version_rules`](crate::KindSchema::has_version_rules)),
/// which keep it: a store given one checks it by those rules.
pub fn parse(source: &str, text: &str, registry: &KindRegistry) -> Result<Vec<DynConfig>, DocumentErrors> {
    parse_with(source, text, registry, &ParseOptions::default())
}

/// [`parse`] with explicit options.
pub fn parse_with(
    source: &str,
    text: &str,
    registry: &KindRegistry,
    options: &ParseOptions,
) -> Result<Vec<DynConfig>, DocumentErrors> {
    parse_reporting(source, text, registry, options).map(|parsed| parsed.configs)
}

/// [`parse_with`], with the warnings: what was read otherwise than
/// written (see [`ParseOptions::earlier_versions`]) and what a kind
/// accepts but will not do ([`crate::FieldErrors::warn`]), each at its
/// line and column.
///
/// ```
/// use pilot_model::{KindRegistry, KindSchema, document};
/// let registry = KindRegistry::new();
/// registry.register_schema(KindSchema::new("RouteRule", "routerules", "config.istio.io", "v1alpha2", |_, _| {})).unwrap();
/// let text = "apiVersion: config.istio.io/v1alpha1\nkind: RouteRule\nmetadata: {name: r}\nspec:\n  destination: {name: reviews}\n";
/// let options = document::ParseOptions {
///     earlier_versions: document::ISTIO_EARLIER_VERSIONS.map(String::from).to_vec(),
///     ..Default::default()
/// };
/// let parsed = document::parse_reporting("r.yaml", text, &registry, &options).unwrap();
/// assert_eq!(parsed.configs[0].meta.version, "v1alpha2");
/// assert!(parsed.warnings[0].to_string().starts_with("r.yaml:1:1 apiVersion: config.istio.io/v1alpha1 read as config.istio.io/v1alpha2"));
/// ```
pub fn parse_reporting(
    source: &str,
    text: &str,
    registry: &KindRegistry,
    options: &ParseOptions,
) -> Result<Parsed, DocumentErrors> {
    let (documents, fatal) = tree::parse(text, &options.limits, false);
    let mut configs = Vec::new();
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    // Positions are recorded only on a second pass, when something is wrong.
    let mut located: Option<Vec<tree::ParsedDocument>> = None;
    for (index, document) in documents.iter().enumerate() {
        let mut report = |position: tree::Position, path: String, message: String| {
            errors.push(DocumentError {
                source: source.to_string(),
                document: index + 1,
                line: position.line,
                column: position.column,
                path,
                message,
            })
        };
        let mut read_as = None;
        match read_document(document, registry, options, &mut read_as) {
            Ok(Some(config)) if document.problems.is_empty() => {
                // What the kind accepts but will not do, at its place.
                for warning in registry.warnings(&config) {
                    let with_positions =
                        located.get_or_insert_with(|| tree::parse(text, &options.limits, true).0);
                    let position = locate(with_positions.get(index).unwrap_or(document), &warning.path);
                    warnings.push(DocumentError {
                        source: source.to_string(),
                        document: index + 1,
                        line: position.line,
                        column: position.column,
                        path: warning.path,
                        message: warning.message,
                    });
                }
                configs.push(config);
            }
            Ok(_) => {}
            Err(problems) => {
                let with_positions =
                    located.get_or_insert_with(|| tree::parse(text, &options.limits, true).0);
                let document = with_positions.get(index).unwrap_or(document);
                for (path, message) in problems {
                    report(locate(document, &path), path, message);
                }
            }
        }
        for (position, path, message) in &document.problems {
            report(*position, path.clone(), message.clone());
        }
        if let Some(message) = read_as {
            let with_positions = located.get_or_insert_with(|| tree::parse(text, &options.limits, true).0);
            let position = locate(with_positions.get(index).unwrap_or(document), "apiVersion");
            warnings.push(DocumentError {
                source: source.to_string(),
                document: index + 1,
                line: position.line,
                column: position.column,
                path: "apiVersion".to_string(),
                message,
            });
        }
    }
    if let Some(fatal) = fatal {
        errors.push(DocumentError {
            source: source.to_string(),
            document: fatal.document,
            line: fatal.position.line,
            column: fatal.position.column,
            path: String::new(),
            message: fatal.message,
        });
    }
    errors.sort_by_key(|e| (e.document, e.line, e.column));
    warnings.sort_by_key(|w| (w.document, w.line, w.column));
    if errors.is_empty() {
        Ok(Parsed { configs, warnings })
    } else {
        Err(DocumentErrors(errors))
    }
}

/// Reads every document in `text` as plain JSON values, without a schema
/// (for files that are not configuration objects, such as a list of
/// services). Structural problems (syntax, duplicate keys, limits) are
/// reported with their line and column.
///
/// ```
/// let values = pilot_model::document::parse_values("s.yaml", "a: 1\n---\nb: [x]\n").unwrap();
/// assert_eq!(values, vec![serde_json::json!({"a": 1}), serde_json::json!({"b": ["x"]})]);
/// let error = pilot_model::document::parse_values("s.yaml", "a: 1\na: 2\n").unwrap_err();
/// assert!(error.to_string().starts_with("s.yaml:2:1"), "{error}");
/// ```
pub fn parse_values(source: &str, text: &str) -> Result<Vec<serde_json::Value>, DocumentErrors> {
    let (documents, fatal) = tree::parse(text, &Limits::default(), false);
    let mut errors = Vec::new();
    let mut values = Vec::new();
    for (index, document) in documents.into_iter().enumerate() {
        for (position, path, message) in document.problems {
            errors.push(DocumentError {
                source: source.to_string(),
                document: index + 1,
                line: position.line,
                column: position.column,
                path,
                message,
            });
        }
        values.extend(document.value);
    }
    if let Some(fatal) = fatal {
        errors.push(DocumentError {
            source: source.to_string(),
            document: fatal.document,
            line: fatal.position.line,
            column: fatal.position.column,
            path: String::new(),
            message: fatal.message,
        });
    }
    if errors.is_empty() {
        Ok(values)
    } else {
        Err(DocumentErrors(errors))
    }
}

/// The configuration files of `dir` (`.yaml`, `.yml`, `.json`; not its
/// subdirectories), in name order: what [`read_dir`] reads, and what
/// `pilotctl -f DIR` reads.
pub fn files_in(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Reads every `.yaml`, `.yml` and `.json` file in `dir` (not its
/// subdirectories), in name order. Errors name each file.
pub fn read_dir(dir: &Path, registry: &KindRegistry) -> Result<Vec<DynConfig>, DocumentErrors> {
    let io_error = |path: &Path, e: std::io::Error| {
        DocumentErrors(vec![DocumentError {
            source: path.display().to_string(),
            document: 0,
            line: 0,
            column: 0,
            path: String::new(),
            message: e.to_string(),
        }])
    };
    let files = files_in(dir).map_err(|e| io_error(dir, e))?;
    let mut configs = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| io_error(&file, e))?;
        match parse(&file.display().to_string(), &text, registry) {
            Ok(mut found) => configs.append(&mut found),
            Err(DocumentErrors(mut found)) => errors.append(&mut found),
        }
    }
    if errors.is_empty() {
        Ok(configs)
    } else {
        Err(DocumentErrors(errors))
    }
}

/// One document to a validated object, `None` for an empty document, or
/// every problem as (path, message).
fn read_document(
    document: &tree::ParsedDocument,
    registry: &KindRegistry,
    options: &ParseOptions,
    read_as: &mut Option<String>,
) -> Result<Option<DynConfig>, Vec<(String, String)>> {
    let Some(value) = &document.value else {
        return Ok(None);
    };
    if let Some(first_cli) = first_cli_document(value) {
        return Err(vec![("type".into(), first_cli.refusal())]);
    }
    if !value.is_object() {
        return Err(vec![(
            String::new(),
            "a document must be a mapping with apiVersion, kind, metadata and spec".into(),
        )]);
    }
    if let Some(kind) = value.get("kind").and_then(|k| k.as_str())
        && !registry.has_name(kind)
    {
        let known = registry.kinds();
        let hint = match crate::config::closest(kind, &known) {
            Some(best) => format!("; did you mean {best}?"),
            None => String::new(),
        };
        return Err(vec![(
            "kind".into(),
            format!(
                "unknown kind {kind:?}{hint} registered kinds: {}",
                known.join(", ")
            ),
        )]);
    }
    // Problems with the envelope (metadata, apiVersion) do not hide the
    // spec's: the envelope is repaired for the check and both are reported.
    let (config, found) = decode_all::<DynConfig>("", value);
    let mut problems: Vec<(String, String)> = found.into_iter().map(|e| (e.path, e.message)).collect();
    let Some(mut config) = config else {
        return Err(problems);
    };
    if config.meta.namespace.is_empty() {
        config.meta.namespace = options.default_namespace.clone();
    }
    let written = format!("{}/{}", config.meta.group, config.meta.version);
    if options.earlier_versions.contains(&written)
        && let Some(schema) = registry.resolve(&config.meta.kind, &config.meta.group)
        && schema.group == config.meta.group
    {
        config.meta.version = schema.version.clone();
        *read_as = Some(format!(
            "{written} read as {}/{} (the version {} is served at; Istio's istioctl read every version alike)",
            schema.group, schema.version, schema.kind
        ));
    }
    let written = config.meta.version.clone();
    match registry.prepare(config) {
        Ok(mut config) if problems.is_empty() => {
            // A version with rules of its own stays written: whoever
            // writes the object on (pilotctl to the API, a store) checks
            // it by that version's rules, and stores it at the storage
            // version.
            if registry
                .resolve(&config.meta.kind, &config.meta.group)
                .is_some_and(|schema| schema.has_version_rules(&written))
            {
                config.meta.version = written;
            }
            return Ok(Some(config));
        }
        Ok(_) => {}
        Err(StoreError::Invalid { errors, .. }) => {
            problems.extend(errors.into_iter().map(|e| (e.path, e.message)))
        }
        Err(other) => problems.push((String::new(), other.to_string())),
    }
    Err(problems)
}

/// Where the field at `path` (`.spec.containers[0].ports`, the form of
/// [`FieldError`](crate::FieldError) paths) is in the `document`-th (from 0)
/// document of `text`: its line and column, or those of its nearest present
/// ancestor. For tools that check documents after [`parse_values`]
/// (pilotctl kube-inject) and report their own errors at a position.
///
/// ```
/// let text = "a: 1\n---\nspec:\n  containers:\n  - name: x\n";
/// let at = pilot_model::document::locate_path(text, 1, ".spec.containers[0].name").unwrap();
/// assert_eq!((at.line, at.column), (5, 5));
/// ```
pub fn locate_path(text: &str, document: usize, path: &str) -> Option<Position> {
    let (documents, _) = tree::parse(text, &Limits::default(), true);
    documents.get(document).map(|d| locate(d, path))
}

/// Where `path` is in the document: the field itself, or its nearest
/// ancestor that is present (for a missing field), or the document start.
/// Where the fields of the objects in one text are, for findings about
/// objects that parsed fine (e.g. `pilotctl analyze`).
///
/// ```
/// let text = "kind: RouteRule\nmetadata:\n  name: a\nspec:\n  precedence: 2\n";
/// let locator = pilot_model::document::Locator::new(text);
/// assert_eq!(locator.find("RouteRule", "a", "spec.precedence"), Some((5, 3)));
/// assert_eq!(locator.find("RouteRule", "b", "spec"), None);
/// ```
#[derive(Debug)]
pub struct Locator {
    documents: Vec<tree::ParsedDocument>,
}

impl Locator {
    /// Reads the positions of every field in `text`.
    pub fn new(text: &str) -> Self {
        Locator {
            documents: tree::parse(text, &Limits::default(), true).0,
        }
    }

    /// The line and column of `path` (as errors print it, e.g.
    /// `spec.route[0].labels`) in the document holding the `kind` named
    /// `name`, or of its nearest parent that is there. `kind` is a kind's
    /// name or id ([`KindSchema::id`](crate::KindSchema::id)): a qualified
    /// id (`Gateway.gateway.networking.k8s.io`) finds a document of that
    /// name whose `apiVersion` is of that group.
    pub fn find(&self, kind: &str, name: &str, path: &str) -> Option<(usize, usize)> {
        let (kind, group) = match kind.split_once('.') {
            Some((kind, group)) => (kind, Some(group)),
            None => (kind, None),
        };
        let document = self.documents.iter().find(|d| {
            d.value.as_ref().is_some_and(|v| {
                let text = |pointer: &str| v.pointer(pointer).and_then(serde_json::Value::as_str);
                text("/kind") == Some(kind)
                    && text("/metadata/name") == Some(name)
                    && group.is_none_or(|group| {
                        text("/apiVersion")
                            .is_some_and(|api| api.rsplit_once('/').is_some_and(|(g, _)| g == group))
                    })
            })
        })?;
        let position = locate(document, path);
        Some((position.line, position.column))
    }
}

fn locate(document: &tree::ParsedDocument, path: &str) -> tree::Position {
    let mut segments = tree::segments(path);
    loop {
        if let Some(position) = document.positions.get(&segments) {
            return *position;
        }
        if segments.pop().is_none() {
            return document.start;
        }
    }
}
