//! `pilotctl kube-inject`: the sidecar added to workloads in files, offline,
//! by the same code as pilot-discovery's admission webhook (pilot-inject).

use std::io::Write as _;
use std::path::Path;

use pilot_inject::{Decision, InjectTemplate, inject_text};

use crate::Failure;

/// Injects every input and prints the result on stdout, what was done on
/// stderr. Any error in any input: every error on stderr (file:line:col),
/// nothing on stdout, exit code 1.
pub(crate) fn kube_inject(
    paths: &[String],
    mesh_config: Option<&Path>,
    revision: Option<&str>,
) -> Result<(), Failure> {
    let template = match mesh_config {
        Some(path) => InjectTemplate::load(path).map_err(|e| Failure::failed(e.to_string()))?,
        None => InjectTemplate::default(),
    }
    .with_revision(revision.unwrap_or_default());
    let sources = crate::files::sources(paths).map_err(Failure::failed)?;
    let mut outputs = Vec::new();
    let mut notes = Vec::new();
    let mut errors = Vec::new();
    for (source, text) in sources {
        match inject_text(&source, &text, &template) {
            Ok((out, reports)) => {
                outputs.push(out);
                for report in reports {
                    notes.push(match report.decision {
                        Decision::Injected => format!("injected {}", report.object),
                        Decision::Skipped(why) => format!("left {} alone: {why}", report.object),
                    });
                }
            }
            Err(error) => errors.push(error.to_string()),
        }
    }
    if !errors.is_empty() {
        return Err(Failure {
            code: 1,
            messages: errors,
        });
    }
    let mut stdout = std::io::stdout().lock();
    let yaml_separated = outputs.join("---\n");
    stdout
        .write_all(yaml_separated.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::failed(format!("cannot write the result: {e}")))?;
    for note in notes {
        eprintln!("{note}");
    }
    Ok(())
}
