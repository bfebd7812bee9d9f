//! The validating admission webhook's logic: an `AdmissionReview`
//! (`admission.k8s.io/v1`) in, an `AdmissionReview` out with the request's
//! `uid`, each object of a registered kind decoded and validated by the
//! same code as the REST API's create and replace (`body.rs`, strict field
//! validation), so the webhook refuses what the API refuses, with the same
//! message: the object, the field path and the reason.
//!
//! What is allowed without a look, as Istio's validation webhook does:
//! `DELETE` and `CONNECT`, and kinds the registry does not hold. A dry run
//! (`request.dryRun`) is validated as any other request. A denial carries
//! the REST API's status: 422 `Invalid` (400 `BadRequest` for an unknown
//! field or a body of another kind). Istio's webhook answers without a
//! code, which the Kubernetes API server turns into 403; pilot keeps the
//! REST API's code so that kubectl reports an invalid object the same way
//! whichever way it came.
//!
//! A body that is not an `AdmissionReview` is denied with the reason, never
//! answered 500: with the `uid` readable the answer is a normal review
//! (HTTP 200) that refuses; without one (the API server cannot match the
//! answer to its request) it is HTTP 400 with the same review body, which
//! the API server treats as a failed call and its failure policy decides.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pilot_model::{DynConfig, KindRegistry};
use serde_json::{Value, json};

use crate::ApiError;
use crate::body;
use crate::options::FieldValidation;

/// The answer to one review request: the HTTP status (200, or 400 when the
/// request's `uid` cannot be read) and an `AdmissionReview` body.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReviewAnswer {
    /// The HTTP status of the answer.
    pub code: StatusCode,
    /// The `AdmissionReview` answered.
    pub review: Value,
}

impl ReviewAnswer {
    /// Whether the review admits the object.
    pub fn allowed(&self) -> bool {
        self.review["response"]["allowed"] == true
    }
}

impl IntoResponse for ReviewAnswer {
    fn into_response(self) -> Response {
        (self.code, Json(self.review)).into_response()
    }
}

/// Validates the object of one `AdmissionReview` request body against the
/// kinds of `registry` (never panics: any input gets an answer).
///
/// ```
/// let registry = pilot_api::default_registry();
/// let review = br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
///   "request": {"uid": "1", "operation": "CREATE", "namespace": "default", "name": "bad",
///     "kind": {"group": "networking.istio.io", "version": "v1", "kind": "VirtualService"},
///     "object": {"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
///       "metadata": {"name": "bad", "namespace": "default"},
///       "spec": {"hosts": ["foo.ba!r"], "http": [{"route": [{"destination": {"host": "foo"}}]}]}}}}"#;
/// let answer = pilot_apiserver::admission::validate_review(&registry, review);
/// assert!(!answer.allowed());
/// assert_eq!(answer.review["response"]["uid"], "1");
/// let message = answer.review["response"]["status"]["message"].as_str().unwrap();
/// assert!(message.contains("default/bad") && message.contains("spec.hosts[0]"), "{message}");
/// ```
pub fn validate_review(registry: &KindRegistry, body: &[u8]) -> ReviewAnswer {
    let review: Value = match serde_json::from_slice(body) {
        Ok(review) => review,
        Err(e) => {
            return unreadable(format!(
                "cannot decode the AdmissionReview: the body is not JSON: {e}"
            ));
        }
    };
    let Some(uid) = review
        .pointer("/request/uid")
        .and_then(Value::as_str)
        .filter(|uid| !uid.is_empty())
    else {
        return unreadable(
            "cannot decode the AdmissionReview: request.uid is missing (the API server sends one with every review)"
                .into(),
        );
    };
    if review.get("apiVersion").and_then(Value::as_str) != Some("admission.k8s.io/v1")
        || review.get("kind").and_then(Value::as_str) != Some("AdmissionReview")
    {
        return denied(
            uid,
            &ApiError::bad_request(format!(
                "cannot decode the AdmissionReview: expected apiVersion admission.k8s.io/v1 and kind AdmissionReview, found {} {}",
                review.get("apiVersion").unwrap_or(&Value::Null),
                review.get("kind").unwrap_or(&Value::Null)
            )),
        );
    }
    let request = &review["request"];
    let text = |pointer: &str| {
        request
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    if matches!(text("/operation"), "DELETE" | "CONNECT") {
        return allowed(uid, &[]);
    }
    let (group, kind) = (text("/kind/group"), text("/kind/kind"));
    let Some(schema) = registry
        .resolve(kind, group)
        .filter(|schema| schema.group == group)
    else {
        // Not a kind pilot serves: not pilot's to judge.
        return allowed(uid, &[]);
    };
    let Some(object) = request.get("object").filter(|o| o.is_object()) else {
        return denied(
            uid,
            &ApiError::bad_request(format!(
                "cannot decode the AdmissionReview: request.object is missing or not an object (operation {:?})",
                text("/operation")
            )),
        );
    };
    // The API server sends an object in the request's namespace and name
    // (a create with `generateName` has no name yet): the object's own say
    // what the messages name.
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
        .or(Some(text("/namespace")).filter(|ns| !ns.is_empty()))
        .unwrap_or("default");
    let mut warnings = Vec::new();
    match body::decode_in(
        registry,
        &schema,
        namespace,
        None,
        object.clone(),
        None,
        FieldValidation::Strict,
        &mut warnings,
    ) {
        Ok(config) => {
            // An update is also checked against the object it replaces:
            // the kind's transition rules (an immutable field).
            let old_spec = request
                .pointer("/oldObject/spec")
                .filter(|_| text("/operation") == "UPDATE" && schema.has_transition_rules());
            if let Some(old_spec) = old_spec {
                let old = DynConfig {
                    meta: config.meta.clone(),
                    spec: old_spec.clone(),
                };
                if let Err(error) = schema.validate_update(&old, &config) {
                    return denied(uid, &ApiError::from_store(error, None).for_resource(&schema));
                }
            }
            allowed(uid, &warnings)
        }
        Err(mut error) => {
            // A refusal before validation (an unknown field, another kind)
            // does not name the object in the REST API, whose URL does: the
            // review's answer names it.
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .or(Some(text("/name")))
                .unwrap_or_default();
            let key = format!("{kind} {namespace}/{name}");
            if !error.message.contains(&key) {
                error.message = format!("{key}: {}", error.message);
            }
            denied(uid, &error.for_resource(&schema))
        }
    }
}

/// An allowing answer; `warnings` (what the object asks for that will not
/// happen) go in the response's `warnings`, which kubectl prints.
fn allowed(uid: &str, warnings: &[String]) -> ReviewAnswer {
    let mut response = json!({"uid": uid, "allowed": true});
    if !warnings.is_empty() {
        response["warnings"] = json!(warnings);
    }
    ReviewAnswer {
        code: StatusCode::OK,
        review: json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": response,
        }),
    }
}

fn denied(uid: &str, error: &ApiError) -> ReviewAnswer {
    let mut status = json!({
        "status": "Failure", "code": error.code.as_u16(), "reason": error.reason, "message": error.message,
    });
    if !error.details.is_null() {
        status["details"] = error.details.clone();
    }
    ReviewAnswer {
        code: StatusCode::OK,
        review: json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": false, "status": status},
        }),
    }
}

/// A request whose `uid` cannot be read: 400, with a review that says why.
fn unreadable(message: String) -> ReviewAnswer {
    ReviewAnswer {
        code: StatusCode::BAD_REQUEST,
        ..denied("", &ApiError::bad_request(message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(operation: &str, kind: Value, object: Value) -> Vec<u8> {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "operation": operation, "namespace": "default",
                "kind": kind, "object": object}})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn deletes_and_unknown_kinds_are_allowed() {
        let registry = pilot_api::default_registry();
        let vs = json!({"group": "networking.istio.io", "version": "v1", "kind": "VirtualService"});
        let answer = validate_review(&registry, &review("DELETE", vs, Value::Null));
        assert!(answer.allowed());
        let pod = json!({"group": "", "version": "v1", "kind": "Pod"});
        let answer = validate_review(&registry, &review("CREATE", pod, json!({"spec": 1})));
        assert!(answer.allowed());
        assert_eq!(answer.review["response"]["uid"], "u-1");
    }

    #[test]
    fn what_will_not_happen_is_allowed_with_warnings_kubectl_prints() {
        let registry = pilot_api::default_registry();
        let dr = json!({"group": "networking.istio.io", "version": "v1", "kind": "DestinationRule"});
        let object = json!({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": "reviews", "namespace": "default"},
            "spec": {"host": "reviews", "trafficPolicy": {"loadBalancer": {
                "localityLbSetting": {"failover": [{"from": "us-east", "to": "us-west"}]}}}}});
        let answer = validate_review(&registry, &review("CREATE", dr.clone(), object));
        assert!(answer.allowed());
        let warnings = answer.review["response"]["warnings"].as_array().unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0]
                .as_str()
                .unwrap()
                .starts_with("spec.trafficPolicy.loadBalancer.localityLbSetting: not applied"),
            "{warnings:?}"
        );
        // Nothing to say: no warnings at all.
        let plain = json!({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": "reviews", "namespace": "default"}, "spec": {"host": "reviews"}});
        let answer = validate_review(&registry, &review("CREATE", dr, plain));
        assert!(answer.allowed());
        assert!(answer.review["response"].get("warnings").is_none());
    }

    #[test]
    fn an_update_is_checked_against_the_object_it_replaces() {
        let registry = pilot_api::default_registry();
        let class = |controller: &str| {
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                "metadata": {"name": "edge", "namespace": "default"},
                "spec": {"controllerName": controller}})
        };
        let kind = json!({"group": "gateway.networking.k8s.io", "version": "v1", "kind": "GatewayClass"});
        let update = |old: &str, new: &str| {
            let mut review: Value =
                serde_json::from_slice(&review("UPDATE", kind.clone(), class(new))).unwrap();
            review["request"]["oldObject"] = class(old);
            validate_review(&registry, &serde_json::to_vec(&review).unwrap())
        };
        assert!(update("example.com/a", "example.com/a").allowed());
        let answer = update("example.com/a", "example.com/b");
        assert!(!answer.allowed());
        let status = &answer.review["response"]["status"];
        assert_eq!(status["code"], 422, "{status}");
        assert_eq!(
            status["details"]["causes"][0]["field"], "spec.controllerName",
            "{status}"
        );
        assert!(
            status["message"].as_str().unwrap().contains("Value is immutable"),
            "{status}"
        );
        // A create has no object before it: any controller.
        let answer = validate_review(&registry, &review("CREATE", kind.clone(), class("example.com/b")));
        assert!(answer.allowed());
    }

    #[test]
    fn unreadable_reviews_are_denied_with_the_reason() {
        let registry = pilot_api::default_registry();
        let answer = validate_review(&registry, b"{not json");
        assert_eq!(answer.code, StatusCode::BAD_REQUEST);
        assert!(!answer.allowed());
        let message = answer.review["response"]["status"]["message"].as_str().unwrap();
        assert!(message.contains("not JSON"), "{message}");
        let answer = validate_review(
            &registry,
            br#"{"apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"x"}}"#,
        );
        assert_eq!(answer.code, StatusCode::OK);
        assert!(!answer.allowed());
        assert_eq!(answer.review["response"]["uid"], "x");
        let vs = json!({"group": "networking.istio.io", "version": "v1", "kind": "VirtualService"});
        let answer = validate_review(&registry, &review("CREATE", vs, json!("text")));
        assert!(!answer.allowed());
        assert_eq!(answer.review["response"]["status"]["code"], 400);
    }
}
