//! The mutating admission webhook's logic: an `AdmissionReview` (v1) in, an
//! `AdmissionReview` with a JSONPatch out, by the same [`inject_pod`] as
//! `pilotctl kube-inject`.
//!
//! Namespaces opt in through the `MutatingWebhookConfiguration`'s
//! `namespaceSelector` (see `examples/inject/`); pods opt out with
//! `sidecar.istio.io/inject: "false"`. A review that cannot be read, or a
//! pod that cannot be injected, is answered by the failure policy: `Ignore`
//! admits it unchanged with a warning, `Fail` refuses it with the reason.

use serde_json::{Value, json};

use crate::pod::{Decision, STATUS_ANNOTATION, inject_pod};
use crate::template::InjectTemplate;

/// What to do with a review that cannot be read or a pod that cannot be
/// injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// Admit it unchanged, with a warning.
    #[default]
    Ignore,
    /// Refuse it, with the reason.
    Fail,
}

/// Answers one `AdmissionReview` request body (never panics: any input
/// gets a review back).
pub fn review(body: &[u8], template: &InjectTemplate, policy: FailurePolicy) -> Value {
    let request: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(e) => return refused("", policy, format!("the body is not JSON: {e}")),
    };
    let uid = request
        .pointer("/request/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if request.get("apiVersion").and_then(Value::as_str) != Some("admission.k8s.io/v1")
        || request.get("kind").and_then(Value::as_str) != Some("AdmissionReview")
    {
        return refused(
            &uid,
            policy,
            "expected apiVersion admission.k8s.io/v1, kind AdmissionReview".into(),
        );
    }
    if uid.is_empty() {
        return refused(&uid, policy, ".request.uid is missing".into());
    }
    let kind = request
        .pointer("/request/kind/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let operation = request
        .pointer("/request/operation")
        .and_then(Value::as_str)
        .unwrap_or("");
    if kind != "Pod" || operation != "CREATE" {
        return allowed(&uid, None, Vec::new());
    }
    let Some(original) = request.pointer("/request/object").filter(|o| o.is_object()) else {
        return refused(&uid, policy, ".request.object is missing or not a Pod".into());
    };
    let mut pod = original.clone();
    match inject_pod(&mut pod, template) {
        Ok(Decision::Injected) => allowed(&uid, Some(patch(original, &pod)), Vec::new()),
        Ok(Decision::Skipped(_)) => allowed(&uid, None, Vec::new()),
        Err((path, message)) => refused(&uid, policy, format!("sidecar injection: {path}: {message}")),
    }
}

/// The JSONPatch (RFC 6902) from `original` to `injected`: the added init
/// container, sidecar and volumes appended, the status annotation added.
pub fn patch(original: &Value, injected: &Value) -> Value {
    let mut ops = Vec::new();
    for field in ["initContainers", "containers", "volumes"] {
        let before = original
            .pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array);
        let after = injected
            .pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array);
        let (Some(after), before) = (after, before) else {
            continue;
        };
        match before {
            Some(before) => {
                for item in &after[before.len()..] {
                    ops.push(json!({"op": "add", "path": format!("/spec/{field}/-"), "value": item}));
                }
            }
            None => ops.push(json!({"op": "add", "path": format!("/spec/{field}"), "value": after})),
        }
    }
    let status = injected
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(STATUS_ANNOTATION));
    if let Some(status) = status {
        if original
            .pointer("/metadata/annotations")
            .is_some_and(Value::is_object)
        {
            let key = STATUS_ANNOTATION.replace('~', "~0").replace('/', "~1");
            ops.push(json!({"op": "add", "path": format!("/metadata/annotations/{key}"), "value": status}));
        } else if original.get("metadata").is_some_and(Value::is_object) {
            ops.push(
                json!({"op": "add", "path": "/metadata/annotations", "value": {STATUS_ANNOTATION: status}}),
            );
        } else {
            ops.push(json!({"op": "add", "path": "/metadata", "value": {"annotations": {STATUS_ANNOTATION: status}}}));
        }
    }
    Value::Array(ops)
}

fn allowed(uid: &str, patch: Option<Value>, warnings: Vec<String>) -> Value {
    let mut response = json!({"uid": uid, "allowed": true});
    if let Some(patch) = patch {
        response["patchType"] = json!("JSONPatch");
        response["patch"] = json!(base64(patch.to_string().as_bytes()));
    }
    if !warnings.is_empty() {
        response["warnings"] = json!(warnings);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

fn refused(uid: &str, policy: FailurePolicy, message: String) -> Value {
    match policy {
        FailurePolicy::Ignore => allowed(
            uid,
            None,
            vec![format!(
                "pilot sidecar injector: {message}; admitted without a sidecar"
            )],
        ),
        FailurePolicy::Fail => json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {
                "uid": uid,
                "allowed": false,
                "status": {"code": 400, "message": format!("pilot sidecar injector: {message}")},
            },
        }),
    }
}

/// Standard base64 with padding (the `patch` field's encoding).
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expected);
        }
    }

    #[test]
    fn malformed_reviews_follow_the_failure_policy() {
        let t = InjectTemplate::default();
        let r = review(b"not json", &t, FailurePolicy::Ignore);
        assert_eq!(r["response"]["allowed"], true);
        assert!(
            r["response"]["warnings"][0]
                .as_str()
                .unwrap()
                .contains("not JSON")
        );
        let r = review(
            b"{\"apiVersion\":\"admission.k8s.io/v1beta1\"}",
            &t,
            FailurePolicy::Fail,
        );
        assert_eq!(r["response"]["allowed"], false);
        assert_eq!(r["response"]["status"]["code"], 400);
    }
}
