//! `-f`: files, directories and `-` (stdin), YAML or JSON, many documents,
//! validated locally with every error placed at its file, line and column.
//! The routing kinds' earlier versions (`config.istio.io/v1alpha1`,
//! `v1beta1`) are read as `v1alpha2` with a warning.

use std::io::Read;
use std::path::{Path, PathBuf};

use pilot_model::document::{self, DocumentError, Locator, ParseOptions};
use pilot_model::{DynConfig, KindRegistry};

/// Objects, and where each source (by name) places its fields.
pub(crate) type Located = (Vec<DynConfig>, Vec<(String, Locator)>);

/// Every object in `paths`, or every problem in all of them.
pub(crate) fn read(
    paths: &[String],
    registry: &KindRegistry,
    namespace: &str,
) -> Result<Vec<DynConfig>, Vec<String>> {
    read_inner(paths, registry, namespace, false).map(|(objects, _)| objects)
}

/// [`read`], with where each source's fields are (for findings about
/// objects that are valid one by one).
pub(crate) fn read_located(
    paths: &[String],
    registry: &KindRegistry,
    namespace: &str,
) -> Result<Located, Vec<String>> {
    read_inner(paths, registry, namespace, true)
}

fn read_inner(
    paths: &[String],
    registry: &KindRegistry,
    namespace: &str,
    locate: bool,
) -> Result<Located, Vec<String>> {
    // Istio's istioctl ignored apiVersion: its users' files say v1alpha1
    // or v1beta1 as often as v1alpha2. They are read, with a warning.
    let options = ParseOptions {
        default_namespace: namespace.to_string(),
        earlier_versions: document::ISTIO_EARLIER_VERSIONS.map(String::from).to_vec(),
        ..Default::default()
    };
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    let mut sources_read = Vec::new();
    for (source, text) in sources(paths).map_err(|e| vec![e])? {
        match document::parse_reporting(&source, &text, registry, &options) {
            Ok(mut found) => {
                for warning in &found.warnings {
                    eprintln!("warning: {warning}");
                }
                objects.append(&mut found.configs)
            }
            Err(found) => errors.extend(found.0.iter().map(DocumentError::to_string)),
        }
        sources_read.push((source, text));
    }
    if errors.is_empty() {
        if objects.is_empty() {
            return Err(vec![format!("no objects found in {}", paths.join(", "))]);
        }
        // Positions cost a second parse: only for the analysis.
        let located = sources_read
            .into_iter()
            .filter(|_| locate)
            .map(|(source, text)| {
                let locator = Locator::new(&text);
                (source, locator)
            })
            .collect();
        Ok((objects, located))
    } else {
        Err(errors)
    }
}

/// (name, text) of every input: a file, each `.yaml`/`.yml`/`.json` file of
/// a directory in name order, or stdin.
pub(crate) fn sources(paths: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for path in paths {
        if path == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| format!("cannot read stdin: {e}"))?;
            out.push(("<stdin>".to_string(), text));
            continue;
        }
        let path = Path::new(path);
        let files: Vec<PathBuf> = if path.is_dir() {
            document::files_in(path).map_err(|e| format!("cannot read directory {}: {e}", path.display()))?
        } else {
            vec![path.to_path_buf()]
        };
        for file in files {
            let text =
                std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            out.push((file.display().to_string(), text));
        }
    }
    Ok(out)
}
