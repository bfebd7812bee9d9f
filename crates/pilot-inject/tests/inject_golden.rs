//! kube-inject's output for every workload kind, pinned in `tests/golden/`
//! (`NAME.in.*` in, `NAME.out.*` out; `UPDATE_GOLDEN=1` rewrites the outputs
//! after a deliberate change: review the diff), re-injection as a no-op, and
//! the webhook's JSONPatch applied to a pod giving kube-inject's pod.

use std::path::{Path, PathBuf};

use pilot_inject::admission::{FailurePolicy, review};
use pilot_inject::{InjectTemplate, inject_text};
use serde_json::{Value, json};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn inputs() -> Vec<PathBuf> {
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().contains(".in."))
        .collect();
    inputs.sort();
    inputs
}

#[test]
fn every_workload_kind_matches_its_golden_output() {
    let template = InjectTemplate::default();
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut kinds = Vec::new();
    let mut mismatched = Vec::new();
    for input in inputs() {
        let text = std::fs::read_to_string(&input).unwrap();
        let (out, reports) = inject_text(&input.display().to_string(), &text, &template).unwrap();
        kinds.extend(
            reports
                .iter()
                .map(|r| r.object.split(' ').next().unwrap().to_string()),
        );
        let expected_path = PathBuf::from(input.to_string_lossy().replace(".in.", ".out."));
        if update {
            std::fs::write(&expected_path, &out).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path)
            .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", expected_path.display()));
        if expected != out {
            mismatched.push(format!("{}:\n{out}", expected_path.display()));
        }
    }
    assert!(
        mismatched.is_empty(),
        "outputs differ from the golden files:\n{}",
        mismatched.join("\n")
    );
    for kind in [
        "Pod",
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "ReplicaSet",
        "Job",
        "CronJob",
    ] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "no golden input injects a {kind}"
        );
    }
}

#[test]
fn injecting_the_output_again_changes_nothing() {
    let template = InjectTemplate::default();
    for input in inputs() {
        let text = std::fs::read_to_string(&input).unwrap();
        let source = input.display().to_string();
        let (once, _) = inject_text(&source, &text, &template).unwrap();
        let (twice, reports) = inject_text(&source, &once, &template).unwrap();
        assert_eq!(once, twice, "{source}: re-injection changed the output");
        assert!(
            reports
                .iter()
                .all(|r| r.decision != pilot_inject::Decision::Injected),
            "{source}: {reports:?}"
        );
    }
}

#[test]
fn skipped_objects_are_reported_with_their_reason() {
    let text = std::fs::read_to_string(golden_dir().join("mixed.in.yaml")).unwrap();
    let (_, reports) = inject_text("mixed.in.yaml", &text, &InjectTemplate::default()).unwrap();
    let shown: Vec<String> = reports
        .iter()
        .map(|r| format!("{}: {:?}", r.object, r.decision))
        .collect();
    assert_eq!(
        shown,
        [
            "Pod opted-out: Skipped(\"sidecar.istio.io/inject is false\")",
            "Pod host-network: Skipped(\"the pod uses the host's network\")",
            "Pod meshed: Injected",
        ]
    );
}

#[test]
fn the_webhook_patch_gives_kube_injects_pod() {
    let template = InjectTemplate::default();
    let pods = [
        std::fs::read_to_string(golden_dir().join("pod.in.yaml")).unwrap(),
        // Without annotations or volumes: the patch adds the whole fields.
        "apiVersion: v1\nkind: Pod\nmetadata: {name: bare}\nspec:\n  containers: [{name: a, image: a}]\n".into(),
        // With annotations and init containers: the patch appends.
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: full\n  annotations: {team: x}\nspec:\n  initContainers: [{name: i, image: i}]\n  containers: [{name: a, image: a}]\n  volumes: [{name: v, emptyDir: {}}]\n".into(),
    ];
    for text in pods {
        let pod = pilot_model::document::parse_values("pod", &text)
            .unwrap()
            .remove(0);
        let (injected, _) = inject_text("pod", &pod.to_string(), &template).unwrap();
        let injected: Value = serde_json::from_str(&injected).unwrap();
        let request = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": "default",
                "operation": "CREATE",
                "object": pod,
            },
        });
        let response = review(request.to_string().as_bytes(), &template, FailurePolicy::Fail);
        let response = &response["response"];
        assert_eq!(response["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!(response["allowed"], true);
        assert_eq!(response["patchType"], "JSONPatch");
        let patch: Value = serde_json::from_slice(&decode64(response["patch"].as_str().unwrap())).unwrap();
        let mut patched = pod.clone();
        apply_patch(&mut patched, &patch);
        assert_eq!(patched, injected, "patch {patch:#}");

        // The injected pod, reviewed again: admitted without a patch.
        let mut again = request.clone();
        again["request"]["object"] = injected;
        let response = review(again.to_string().as_bytes(), &template, FailurePolicy::Fail);
        assert_eq!(response["response"]["allowed"], true);
        assert!(response["response"].get("patch").is_none());
    }
}

#[test]
fn a_pod_that_cannot_be_injected_follows_the_failure_policy() {
    let request = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "object": {"metadata": {"annotations": {"traffic.sidecar.istio.io/excludeOutboundPorts": "x"}},
                       "spec": {"containers": [{"name": "a", "image": "a"}]}},
        },
    });
    let template = InjectTemplate::default();
    let fail = review(request.to_string().as_bytes(), &template, FailurePolicy::Fail);
    assert_eq!(fail["response"]["allowed"], false);
    let message = fail["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("excludeOutboundPorts") && message.contains("\"x\""),
        "{message}"
    );
    let ignore = review(request.to_string().as_bytes(), &template, FailurePolicy::Ignore);
    assert_eq!(ignore["response"]["allowed"], true);
    assert!(ignore["response"].get("patch").is_none());
    assert!(
        ignore["response"]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("excludeOutboundPorts")
    );
}

/// RFC 6902 `add` (the only operation the webhook emits), written from the
/// RFC: `-` appends to an array, a member is added or replaced.
fn apply_patch(doc: &mut Value, patch: &Value) {
    for op in patch.as_array().unwrap() {
        assert_eq!(op["op"], "add", "{op}");
        let path = op["path"].as_str().unwrap();
        let mut tokens: Vec<String> = path
            .split('/')
            .skip(1)
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect();
        let last = tokens.pop().unwrap();
        let mut target = &mut *doc;
        for token in &tokens {
            target = match target {
                Value::Array(items) => &mut items[token.parse::<usize>().unwrap()],
                other => other
                    .get_mut(token.as_str())
                    .unwrap_or_else(|| panic!("{path}: no {token}")),
            };
        }
        match target {
            Value::Array(items) if last == "-" => items.push(op["value"].clone()),
            Value::Array(items) => items.insert(last.parse().unwrap(), op["value"].clone()),
            Value::Object(map) => {
                map.insert(last, op["value"].clone());
            }
            other => panic!("{path}: cannot add into {other}"),
        }
    }
}

fn decode64(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut buffer = 0u32;
    let mut bits = 0;
    for c in text.bytes().filter(|c| *c != b'=') {
        buffer = (buffer << 6) | ALPHABET.iter().position(|a| *a == c).unwrap() as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    out
}
