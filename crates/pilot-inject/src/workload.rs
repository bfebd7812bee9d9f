//! Workloads and files: where each kind keeps its pod template, and whole
//! YAML or JSON inputs with many documents.

use serde_json::Value;

use crate::pod::{Decision, inject_pod};
use crate::{InjectError, InjectTemplate};

/// What happened to one object of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// `Kind namespace/name`.
    pub object: String,
    /// Injected, or skipped with the reason.
    pub decision: Decision,
}

/// A problem with one object, before a file position is added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectProblem {
    /// `Kind namespace/name`.
    pub object: String,
    /// The field path from the document's root (`.spec.template.spec.containers`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// Injects every pod template of `object` (a workload, or a `List` of them);
/// other kinds pass unchanged. `path` is the object's own path in its
/// document (empty at the root), for error paths. On error, `object` is
/// unchanged.
pub fn inject_object(object: &mut Value, template: &InjectTemplate) -> Result<Vec<Report>, ObjectProblem> {
    let mut copy = object.clone();
    let mut reports = Vec::new();
    inject_into(&mut copy, "", template, &mut reports)?;
    *object = copy;
    Ok(reports)
}

fn inject_into(
    object: &mut Value,
    path: &str,
    template: &InjectTemplate,
    reports: &mut Vec<Report>,
) -> Result<(), ObjectProblem> {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let name = describe(object);
    let problem = |sub: &str, message: String| ObjectProblem {
        object: name.clone(),
        path: format!("{path}{sub}"),
        message,
    };
    if !object.is_object() {
        return Err(problem("", "must be an object with apiVersion and kind".into()));
    }
    let pointer = match kind.as_str() {
        "List" | "PodList" | "DeploymentList" => {
            let Some(items) = object.get_mut("items") else {
                return Ok(());
            };
            let Some(items) = items.as_array_mut() else {
                return Err(problem(".items", "must be a list of objects".into()));
            };
            for (i, item) in items.iter_mut().enumerate() {
                inject_into(item, &format!("{path}.items[{i}]"), template, reports)?;
            }
            return Ok(());
        }
        "Pod" => "",
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" | "ReplicationController" => {
            "/spec/template"
        }
        "CronJob" => "/spec/jobTemplate/spec/template",
        "" => return Err(problem(".kind", "missing: every object needs a kind".into())),
        _ => return Ok(()),
    };
    let dotted = pointer.replace('/', ".");
    let Some(pod) = object.pointer_mut(pointer).filter(|p| p.is_object()) else {
        return Err(problem(
            &dotted,
            format!("missing: a {kind} needs a pod template here"),
        ));
    };
    let decision =
        inject_pod(pod, template).map_err(|(sub, message)| problem(&format!("{dotted}{sub}"), message))?;
    reports.push(Report {
        object: name,
        decision,
    });
    Ok(())
}

/// `Kind namespace/name` of an object (what is known of it).
fn describe(object: &Value) -> String {
    let text = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or("");
    let kind = match text("/kind") {
        "" => "object",
        k => k,
    };
    let name = match text("/metadata/name") {
        "" => text("/metadata/generateName"),
        n => n,
    };
    match text("/metadata/namespace") {
        "" => format!("{kind} {name}"),
        ns => format!("{kind} {ns}/{name}"),
    }
}

/// Injects every document of a YAML (or JSON) file and renders the result
/// in the input's format: JSON stays JSON, YAML documents are written back
/// as YAML separated by `---`. Any error (a parse error, a bad workload)
/// fails the whole input with its file:line:col; nothing is half-written.
pub fn inject_text(
    source: &str,
    text: &str,
    template: &InjectTemplate,
) -> Result<(String, Vec<Report>), InjectError> {
    let mut values = pilot_model::document::parse_values(source, text)?;
    let mut reports = Vec::new();
    for (index, value) in values.iter_mut().enumerate() {
        let done = inject_object(value, template).map_err(|p| {
            let location = pilot_model::document::locate_path(text, index, &p.path)
                .map(|at| format!("{source}:{}:{}: ", at.line, at.column))
                .unwrap_or_else(|| format!("{source}: "));
            InjectError::Invalid {
                location,
                object: p.object,
                path: p.path,
                message: p.message,
            }
        })?;
        reports.extend(done);
    }
    let json = text.trim_start().starts_with(['{', '[']);
    let mut out = String::new();
    for (i, value) in values.iter().enumerate() {
        if json {
            out.push_str(&serde_json::to_string_pretty(value).expect("JSON values serialize"));
            out.push('\n');
        } else {
            if i > 0 {
                out.push_str("---\n");
            }
            out.push_str(&pilot_model::document::to_yaml_value(value));
        }
    }
    Ok((out, reports))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file_line_column_object_and_path() {
        let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  template:\n    metadata:\n      annotations:\n        traffic.sidecar.istio.io/excludeInboundPorts: \"80,http\"\n    spec:\n      containers: [{name: web, image: web}]\n";
        let err = inject_text("web.yaml", text, &InjectTemplate::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("web.yaml:8:9: Deployment shop/web: .spec.template.metadata.annotations[traffic.sidecar.istio.io/excludeInboundPorts]: \"http\" is not a port"),
            "{err}"
        );
    }

    #[test]
    fn a_deployment_without_a_template_is_an_error_at_its_spec() {
        let text = "kind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 1\n";
        let err = inject_text("d.yaml", text, &InjectTemplate::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("d.yaml:3:1: Deployment web: .spec.template: missing"),
            "{err}"
        );
    }
}
