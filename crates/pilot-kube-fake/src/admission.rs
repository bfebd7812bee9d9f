//! The fake API server's dynamic admission: before a create, update or
//! delete is made, the `MutatingWebhookConfiguration`s and then the
//! `ValidatingWebhookConfiguration`s (`admissionregistration.k8s.io/v1`)
//! whose webhooks match the request are called with an `AdmissionReview`
//! v1, as the Kubernetes API server calls them
//! (<https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/>):
//!
//! - a webhook matches by its `rules` (`operations`, `apiGroups`,
//!   `apiVersions`, `resources` with `*`, `*/*` and `plural/status`,
//!   `scope`), its `namespaceSelector` (the labels of the object's
//!   namespace; of a Namespace, its own) and `objectSelector` (the labels
//!   of the object, or of the old object on delete), each with
//!   `matchLabels` and `matchExpressions`;
//! - mutating webhooks run first, in the order of their configurations'
//!   names and then of the webhooks; a `JSONPatch` they return is applied
//!   to the object the later webhooks see and that is stored;
//! - a denial answers the client with the webhook's status: its code (403
//!   when it gives none below 400), its reason and details, and the message
//!   `admission webhook "NAME" denied the request: MSG`;
//! - a webhook that cannot be called (no answer within `timeoutSeconds`,
//!   default 10, a TLS or HTTP error, an answer that is not a review of this
//!   request) is skipped under `failurePolicy: Ignore` and fails the request
//!   500 `InternalError` under `Fail` (the default), naming the webhook and
//!   the error;
//! - a dry run (`dryRun=All`) is refused 400 by a webhook whose
//!   `sideEffects` is not `None` or `NoneOnDryRun`, and `dryRun: true` is in
//!   the review otherwise;
//! - requests for the webhook configurations themselves are never sent to
//!   webhooks (so a broken webhook cannot lock its own configuration away).
//!
//! Webhooks are called at `clientConfig.url` over HTTPS, verified with
//! `clientConfig.caBundle` (see `webhook_call.rs`); a `clientConfig.service`
//! cannot be resolved by the fake (it has no Services' endpoints to reach)
//! and counts as a call that failed. `matchPolicy`, `matchConditions` and
//! `reinvocationPolicy` are not implemented (a webhook is called for the
//! exact version it names, once).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::Method;
use serde_json::{Value, json};

use super::serve::{object_in, target};
use super::state::{Failure, Resource, State, id, merge};
use super::webhook_call::call;

const GROUP: &str = "admissionregistration.k8s.io";

/// The webhook configurations' resources, served by the fake as built-ins.
pub(crate) fn resources() -> [Resource; 2] {
    [
        Resource::new(
            GROUP,
            "v1",
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
            false,
        ),
        Resource::new(
            GROUP,
            "v1",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
            false,
        ),
    ]
}

/// What a request asks for, as a webhook's rules see it.
struct Attributes {
    operation: &'static str,
    resource: Resource,
    sub_resource: &'static str,
    namespace: String,
    name: String,
    object: Option<Value>,
    old_object: Option<Value>,
    dry_run: bool,
}

/// One webhook of a configuration, with what is needed to call it.
struct Hook {
    configuration: String,
    mutating: bool,
    webhook: Value,
}

/// Runs the admission webhooks for a write: the body to write (the
/// object the mutating webhooks patched, or `body` as it came), or the
/// failure to answer. A request admission does not concern (a read, a
/// write the state will refuse anyway, a webhook configuration) passes
/// unchanged, for the state to answer.
pub(crate) async fn admit(
    state: &Arc<Mutex<State>>,
    method: &Method,
    path: &str,
    content_type: &str,
    dry_run: bool,
    body: Bytes,
) -> Result<Bytes, Failure> {
    let Some((mut attributes, hooks, namespace_labels)) =
        gather(state, method, path, content_type, dry_run, &body)
    else {
        return Ok(body);
    };
    let matching: Vec<Hook> = hooks
        .into_iter()
        .filter(|hook| matches(&hook.webhook, &attributes, &namespace_labels))
        .collect();
    if matching.is_empty() {
        return Ok(body);
    }
    let mut mutated = false;
    for hook in &matching {
        let name = hook.webhook["name"].as_str().unwrap_or_default().to_string();
        if dry_run
            && !matches!(
                hook.webhook["sideEffects"].as_str(),
                Some("None" | "NoneOnDryRun")
            )
        {
            return Err(Failure::new(
                400,
                "BadRequest",
                format!("admission webhook {name:?} does not support dry run"),
            ));
        }
        let uid = uid();
        let review = review(&uid, &attributes);
        let response = match call(&hook.webhook, &review, &uid).await {
            Ok(response) => response,
            Err(error) if hook.webhook["failurePolicy"] == "Ignore" => {
                eprintln!(
                    "pilot-kube-fake: webhook {name:?} of {:?} failed and is ignored (failurePolicy Ignore): {error}",
                    hook.configuration
                );
                continue;
            }
            Err(error) => {
                return Err(Failure::new(
                    500,
                    "InternalError",
                    format!("Internal error occurred: failed calling webhook {name:?}: {error}"),
                ));
            }
        };
        if response["allowed"] != true {
            return Err(denial(&name, &response["status"]));
        }
        if hook.mutating
            && let Some(patch) = response["patch"].as_str()
            && let Some(object) = attributes.object.as_mut()
        {
            apply_patch(&name, object, patch, &response["patchType"])?;
            mutated = true;
        }
    }
    match (&attributes.object, mutated) {
        (Some(object), true) => Ok(Bytes::from(serde_json::to_vec(object).unwrap_or_default())),
        _ => Ok(body),
    }
}

/// Whether the request is a dry run: `dryRun=All` in the query, or in a
/// delete's `DeleteOptions`; 400 for another value.
pub(crate) fn dry_run(method: &Method, query: Option<&str>, body: &[u8]) -> Result<bool, Failure> {
    let in_options = (method == Method::DELETE)
        .then(|| serde_json::from_slice::<Value>(body).ok())
        .flatten()
        .and_then(|options| {
            options["dryRun"]
                .as_array()?
                .first()?
                .as_str()
                .map(str::to_string)
        });
    match query.or(in_options.as_deref()) {
        None => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(Failure::new(
            400,
            "BadRequest",
            format!("Invalid value: {other:?}: supported values: \"All\" (dryRun)"),
        )),
    }
}

/// Under the lock: the request's attributes, the webhooks configured
/// (mutating first) and the labels of the object's namespace; `None`
/// when admission does not concern the request.
fn gather(
    state: &Arc<Mutex<State>>,
    method: &Method,
    path: &str,
    content_type: &str,
    dry_run: bool,
    body: &[u8],
) -> Option<(Attributes, Vec<Hook>, Value)> {
    let state = state.lock().unwrap_or_else(|p| p.into_inner());
    // Authorization comes before admission: a refused write calls nothing.
    if state.writes_refused {
        return None;
    }
    let target = target(&state, path).ok()?;
    if target.resource.group == GROUP {
        return None;
    }
    let namespace = target.namespace.clone().unwrap_or_default();
    let current = |name: &str| state.get(&target.resource, &namespace, name).ok();
    let (operation, object, old_object) = match (method, target.name.as_deref()) {
        (&Method::POST, None) => ("CREATE", Some(object_in(body, &target).ok()?), None),
        (&Method::PUT, Some(name)) => (
            "UPDATE",
            Some(object_in(body, &target).ok()?),
            Some(current(name)?),
        ),
        (&Method::PATCH, Some(name)) if content_type.starts_with("application/apply-patch") => {
            let applied = object_in(body, &target).ok()?;
            match current(name) {
                Some(old) => {
                    let mut merged = old.clone();
                    merge(&mut merged, applied);
                    ("UPDATE", Some(merged), Some(old))
                }
                None => ("CREATE", Some(applied), None),
            }
        }
        (&Method::DELETE, Some(name)) => ("DELETE", None, Some(current(name)?)),
        _ => return None,
    };
    let name = target
        .name
        .clone()
        .or_else(|| {
            object
                .as_ref()
                .and_then(|o| o["metadata"]["name"].as_str().map(str::to_string))
        })
        .unwrap_or_default();
    let mut hooks = Vec::new();
    for (plural, mutating) in [
        ("mutatingwebhookconfigurations", true),
        ("validatingwebhookconfigurations", false),
    ] {
        let Some(resource) = state.resource(&id(GROUP, "v1", plural)) else {
            continue;
        };
        // Listed by name: the order the API server calls them in.
        for configuration in state.list(&resource, None).0 {
            let configuration_name = configuration["metadata"]["name"].as_str().unwrap_or_default();
            for webhook in configuration["webhooks"].as_array().into_iter().flatten() {
                hooks.push(Hook {
                    configuration: configuration_name.to_string(),
                    mutating,
                    webhook: webhook.clone(),
                });
            }
        }
    }
    if hooks.is_empty() {
        return None;
    }
    let namespace_labels = if target.resource.kind == "Namespace" && target.resource.group.is_empty() {
        object
            .as_ref()
            .or(old_object.as_ref())
            .map(|o| o["metadata"]["labels"].clone())
            .unwrap_or(Value::Null)
    } else if target.resource.namespaced {
        state
            .resource(&id("", "v1", "namespaces"))
            .and_then(|namespaces| state.get(&namespaces, "", &namespace).ok())
            .map(|ns| ns["metadata"]["labels"].clone())
            .unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let attributes = Attributes {
        operation,
        sub_resource: if target.status { "status" } else { "" },
        resource: target.resource,
        namespace,
        name,
        object,
        old_object,
        dry_run,
    };
    Some((attributes, hooks, namespace_labels))
}

/// Whether `webhook` is to be called for the request.
fn matches(webhook: &Value, request: &Attributes, namespace_labels: &Value) -> bool {
    let resource = &request.resource;
    let with_sub = if request.sub_resource.is_empty() {
        resource.plural.clone()
    } else {
        format!("{}/{}", resource.plural, request.sub_resource)
    };
    let listed = |list: &Value, value: &str| {
        list.as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .any(|item| item == "*" || item == value)
    };
    let resource_listed = |list: &Value| {
        list.as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .any(|item| {
                item == with_sub
                    || (request.sub_resource.is_empty() && item == "*")
                    || item == "*/*"
                    || item
                        .split_once('/')
                        .is_some_and(|(r, s)| r == "*" && s == request.sub_resource)
                    || item.split_once('/').is_some_and(|(r, s)| {
                        r == resource.plural && s == "*" && !request.sub_resource.is_empty()
                    })
            })
    };
    let rule_matches = webhook["rules"].as_array().into_iter().flatten().any(|rule| {
        let scope = rule["scope"].as_str().unwrap_or("*");
        let scope_ok = match scope {
            "Cluster" => !resource.namespaced,
            "Namespaced" => resource.namespaced,
            _ => true,
        };
        scope_ok
            && listed(&rule["operations"], request.operation)
            && listed(&rule["apiGroups"], &resource.group)
            && listed(&rule["apiVersions"], &resource.version)
            && resource_listed(&rule["resources"])
    });
    if !rule_matches {
        return false;
    }
    let namespaced_or_namespace =
        resource.namespaced || (resource.group.is_empty() && resource.kind == "Namespace");
    if namespaced_or_namespace && !selects(&webhook["namespaceSelector"], namespace_labels) {
        return false;
    }
    let labels = request
        .object
        .as_ref()
        .or(request.old_object.as_ref())
        .map(|o| o["metadata"]["labels"].clone())
        .unwrap_or(Value::Null);
    selects(&webhook["objectSelector"], &labels)
}

/// Whether a label selector (absent: everything) selects `labels`.
pub(crate) fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |key: &str| labels.get(key).and_then(Value::as_str);
    let match_labels = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(key, value)| label(key) == value.as_str());
    let expressions = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|expression| {
            let key = expression["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = expression["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match expression["operator"].as_str().unwrap_or_default() {
                "In" => label(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                _ => false,
            }
        });
    match_labels && expressions
}

/// The `AdmissionReview` sent for the request.
fn review(uid: &str, request: &Attributes) -> Value {
    let resource = &request.resource;
    let options_kind = match request.operation {
        "CREATE" => "CreateOptions",
        "UPDATE" => "UpdateOptions",
        _ => "DeleteOptions",
    };
    let mut options = json!({"apiVersion": "meta.k8s.io/v1", "kind": options_kind});
    if request.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    let kind = json!({"group": resource.group, "version": resource.version, "kind": resource.kind});
    let gvr = json!({"group": resource.group, "version": resource.version, "resource": resource.plural});
    let mut body = json!({
        "uid": uid,
        "kind": kind, "resource": gvr,
        "requestKind": kind, "requestResource": gvr,
        "name": request.name,
        "operation": request.operation,
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": request.object.clone().unwrap_or(Value::Null),
        "oldObject": request.old_object.clone().unwrap_or(Value::Null),
        "dryRun": request.dry_run,
        "options": options,
    });
    if !request.sub_resource.is_empty() {
        body["subResource"] = json!(request.sub_resource);
        body["requestSubResource"] = json!(request.sub_resource);
    }
    if resource.namespaced {
        body["namespace"] = json!(request.namespace);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body})
}

/// A webhook's refusal as the API server answers it.
fn denial(webhook: &str, status: &Value) -> Failure {
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(403);
    let denied_by = format!("admission webhook {webhook:?} denied the request");
    let message = match (status["message"].as_str(), status["reason"].as_str()) {
        (Some(message), _) if !message.is_empty() => format!("{denied_by}: {message}"),
        (_, Some(reason)) if !reason.is_empty() => format!("{denied_by}: {reason}"),
        _ => format!("{denied_by} without explanation"),
    };
    let mut failure = Failure::new(
        code,
        reason(status["reason"].as_str().unwrap_or_default()),
        message,
    );
    if status["details"].is_object() {
        failure.details = status["details"].clone();
    }
    failure
}

/// Kubernetes' `StatusReason` named by a webhook's status ("" for one it
/// does not define, as the API server passes it on unchanged).
fn reason(reason: &str) -> &'static str {
    const REASONS: &[&str] = &[
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    ];
    REASONS.iter().find(|r| **r == reason).copied().unwrap_or("")
}

/// Applies a mutating webhook's base64 JSONPatch to `object`.
fn apply_patch(webhook: &str, object: &mut Value, patch: &str, patch_type: &Value) -> Result<(), Failure> {
    let failed = |why: String| {
        Failure::new(
            500,
            "InternalError",
            format!("Internal error occurred: webhook {webhook:?}: {why}"),
        )
    };
    if patch_type != "JSONPatch" {
        return Err(failed(format!(
            "unsupported patchType {patch_type}; expected JSONPatch"
        )));
    }
    let bytes =
        super::webhook_call::base64_decode(patch).ok_or_else(|| failed("the patch is not base64".into()))?;
    let operations: json_patch::Patch =
        serde_json::from_slice(&bytes).map_err(|e| failed(format!("the patch is not a JSONPatch: {e}")))?;
    json_patch::patch(object, &operations).map_err(|e| failed(format!("the patch does not apply: {e}")))
}

/// A fresh request uid.
fn uid() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let pid = u64::from(std::process::id());
    format!(
        "{:08x}-{:04x}-4000-8000-{n:012x}",
        pid & 0xffff_ffff,
        (pid >> 32) & 0xffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_labels_and_expressions() {
        let labels = json!({"istio-injection": "enabled", "team": "a"});
        assert!(selects(&Value::Null, &labels));
        assert!(selects(&json!({"matchLabels": {"team": "a"}}), &labels));
        assert!(!selects(&json!({"matchLabels": {"team": "b"}}), &labels));
        assert!(selects(
            &json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "c"]}]}),
            &labels
        ));
        assert!(!selects(
            &json!({"matchExpressions": [{"key": "istio-injection", "operator": "DoesNotExist"}]}),
            &labels
        ));
        assert!(selects(
            &json!({"matchExpressions": [{"key": "x", "operator": "NotIn", "values": ["y"]}]}),
            &Value::Null
        ));
    }

    #[test]
    fn rules_match_groups_versions_resources_operations_and_scope() {
        let resource = Resource::new(
            "networking.istio.io",
            "v1",
            "virtualservices",
            "VirtualService",
            true,
        );
        let request = Attributes {
            operation: "CREATE",
            resource,
            sub_resource: "",
            namespace: "default".into(),
            name: "x".into(),
            object: Some(json!({"metadata": {"name": "x"}})),
            old_object: None,
            dry_run: false,
        };
        let hook = |rule: Value| json!({"name": "h", "rules": [rule]});
        let all = json!({"operations": ["CREATE", "UPDATE"], "apiGroups": ["networking.istio.io"],
            "apiVersions": ["*"], "resources": ["*"]});
        assert!(matches(&hook(all.clone()), &request, &Value::Null));
        let mut other_group = all.clone();
        other_group["apiGroups"] = json!(["security.istio.io"]);
        assert!(!matches(&hook(other_group), &request, &Value::Null));
        let mut deletes = all.clone();
        deletes["operations"] = json!(["DELETE"]);
        assert!(!matches(&hook(deletes), &request, &Value::Null));
        let mut cluster = all.clone();
        cluster["scope"] = json!("Cluster");
        assert!(!matches(&hook(cluster), &request, &Value::Null));
        let mut status_only = all.clone();
        status_only["resources"] = json!(["virtualservices/status"]);
        assert!(!matches(&hook(status_only), &request, &Value::Null));
        let mut selected = hook(all);
        selected["namespaceSelector"] = json!({"matchLabels": {"istio-injection": "enabled"}});
        assert!(!matches(&selected, &request, &Value::Null));
        assert!(matches(
            &selected,
            &request,
            &json!({"istio-injection": "enabled"})
        ));
    }

    #[test]
    fn denials_carry_the_webhooks_status_as_the_api_server_does() {
        let failure = denial(
            "v.pilot",
            &json!({"code": 422, "reason": "Invalid", "message": "spec.hosts: bad"}),
        );
        assert_eq!((failure.code, failure.reason), (422, "Invalid"));
        assert_eq!(
            failure.message,
            "admission webhook \"v.pilot\" denied the request: spec.hosts: bad"
        );
        let failure = denial("v.pilot", &json!({"message": "no"}));
        assert_eq!(failure.code, 403);
        let failure = denial("v.pilot", &Value::Null);
        assert!(failure.message.ends_with("without explanation"));
    }
}
