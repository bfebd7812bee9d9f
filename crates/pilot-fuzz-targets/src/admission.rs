//! The admission webhooks: `pilot_inject::admission::review`, as
//! pilot-discovery answers `POST /inject`, and
//! `pilot_apiserver::admission::validate_review`, as it answers
//! `POST /validate`.

use pilot_inject::InjectTemplate;
use pilot_inject::admission::{FailurePolicy, review};
use serde_json::{Value, json};

/// Answers `data` under both failure policies. Always a v1
/// `AdmissionReview` carrying the request's uid; `Ignore` always admits.
/// A JSON patch in the answer applies to the request's pod, and a review
/// of the patched pod admits it unchanged (a pod is never injected twice).
pub(crate) fn inject_admission_review(data: &[u8]) {
    let template = InjectTemplate::default();
    let request: Option<Value> = serde_json::from_slice(data).ok();
    let uid = request
        .as_ref()
        .and_then(|r| r.pointer("/request/uid"))
        .and_then(Value::as_str)
        .unwrap_or("");
    for policy in [FailurePolicy::Ignore, FailurePolicy::Fail] {
        let answer = review(data, &template, policy);
        let response = well_formed(&answer, uid);
        if policy == FailurePolicy::Ignore {
            assert!(response["allowed"] == true, "Ignore refused a review: {answer}");
        }
        let Some(patch) = response.get("patch") else {
            continue;
        };
        assert!(
            response["patchType"] == "JSONPatch",
            "a patch without its type: {answer}"
        );
        let Some(request) = &request else {
            panic!("a patch answers a body that is not JSON: {answer}")
        };
        let patched = apply(request, patch);
        let mut again = request.clone();
        again["request"]["object"] = patched;
        let body = again.to_string();
        let second = review(body.as_bytes(), &template, policy);
        let response = well_formed(&second, uid);
        assert!(
            response["allowed"] == true && response.get("patch").is_none(),
            "the injected pod is changed again: {second}"
        );
    }
}

/// The answer's `response`, after checking that the answer is a v1
/// `AdmissionReview` for `uid` that says whether it admits.
fn well_formed<'a>(answer: &'a Value, uid: &str) -> &'a Value {
    assert!(
        answer["apiVersion"] == "admission.k8s.io/v1" && answer["kind"] == "AdmissionReview",
        "not an AdmissionReview: {answer}"
    );
    let response = &answer["response"];
    assert!(
        response["uid"] == json!(uid),
        "the answer's uid is not {uid:?}: {answer}"
    );
    assert!(
        response["allowed"].is_boolean(),
        "the answer does not say allowed: {answer}"
    );
    response
}

/// The request's pod with the answer's `patch` (base64 of a JSON patch)
/// applied.
fn apply(request: &Value, patch: &Value) -> Value {
    let Some(encoded) = patch.as_str() else {
        panic!("the patch is not a string: {patch}")
    };
    let Some(decoded) = base64_decode(encoded) else {
        panic!("the patch is not base64: {encoded}")
    };
    let operations: json_patch::Patch = match serde_json::from_slice(&decoded) {
        Ok(operations) => operations,
        Err(e) => panic!(
            "the patch is not a JSON patch: {e}: {}",
            String::from_utf8_lossy(&decoded)
        ),
    };
    let mut pod = request["request"]["object"].clone();
    if let Err(e) = json_patch::patch(&mut pod, &operations) {
        panic!(
            "the patch does not apply to the pod: {e}: {}",
            String::from_utf8_lossy(&decoded)
        );
    }
    pod
}

/// Standard base64 with padding, the inverse of
/// `pilot_inject::admission::base64`; `None` for anything else.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let padding = chunk.iter().rev().take_while(|c| **c == b'=').count();
        if padding > 2 {
            return None;
        }
        let mut n = 0u32;
        for c in &chunk[..4 - padding] {
            n = (n << 6) | value(*c)?;
        }
        n <<= 6 * padding as u32;
        let group = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&group[..3 - padding]);
    }
    Some(out)
}

/// Answers `data` as pilot-discovery's `POST /validate` does
/// (`pilot_apiserver::admission::validate_review`, over pilot's kinds).
/// Always a v1 `AdmissionReview` that says whether it admits: with the
/// request's uid and HTTP 200 when the uid can be read, HTTP 400 and a
/// denial otherwise; a denial always says why; a dry run is judged as the
/// same request without it, and a DELETE is always admitted.
pub(crate) fn validate_admission_review(data: &[u8]) {
    use pilot_apiserver::admission::validate_review;
    let registry = pilot_api::default_registry();
    let answer = validate_review(&registry, data);
    let request: Option<Value> = serde_json::from_slice(data).ok();
    let uid = request
        .as_ref()
        .and_then(|r| r.pointer("/request/uid"))
        .and_then(Value::as_str)
        .filter(|uid| !uid.is_empty())
        .map(str::to_string);
    let response = well_formed(&answer.review, uid.as_deref().unwrap_or(""));
    assert!(
        (answer.code == 200) == uid.is_some(),
        "HTTP {} for a request whose uid is {uid:?}: {}",
        answer.code,
        answer.review
    );
    if response["allowed"] == false {
        assert!(
            response["status"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "a denial without a reason: {}",
            answer.review
        );
    }
    let Some(mut request) = request.filter(|_| uid.is_some()) else {
        return;
    };
    if request["request"]["operation"] == "DELETE"
        && request["apiVersion"] == "admission.k8s.io/v1"
        && request["kind"] == "AdmissionReview"
    {
        assert!(answer.allowed(), "a DELETE was denied: {}", answer.review);
    }
    if request["request"].is_object() {
        let dry_run = request["request"]["dryRun"] == true;
        request["request"]["dryRun"] = json!(!dry_run);
        let flipped = validate_review(&registry, request.to_string().as_bytes());
        assert!(
            flipped.review["response"] == answer.review["response"],
            "dryRun changed the answer: {} then {}",
            answer.review,
            flipped.review
        );
    }
}
