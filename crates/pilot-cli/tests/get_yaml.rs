//! `pilotctl get -o yaml` read back by another YAML reader: PyYAML (the
//! YAML 1.1 reader of the Kubernetes Python client, from .tools/kubectl)
//! takes every string as the string it was, including `yes`, `off`, `~`,
//! `"80"` and dates, and reads the same objects as `-o json` gives.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::{Discovery, pilotctl, workspace};
use serde_json::{Value, json};

const OBJECT: &str = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: quoted
  namespace: default
  labels: {enabled: "yes", port: "80", mode: "off", version: "1.10", short: "n"}
  annotations: {note: "~", empty: "null", when: "2001-12-14", hex: "0x1F", time: "1:30", ip: "127.0.0.1"}
spec:
  hosts: [reviews]
  http:
  - match: [{headers: {x-canary: {exact: "yes"}, x-flag: {exact: "On"}, x-port: {exact: "8080"}}}]
    route: [{destination: {host: reviews}}]
"#;

/// The Python of .tools/kubectl, which has PyYAML (the Kubernetes client
/// needs it).
fn python() -> PathBuf {
    let path = workspace().join(".tools/kubectl/bin/python");
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-deps (it installs PyPI's kubernetes, with PyYAML, there)",
        path.display()
    );
    path
}

/// `text` read by PyYAML's safe loader, every document, as JSON.
fn pyyaml(text: &str) -> Value {
    let mut child = Command::new(python())
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(sys.stdin)), default=repr))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("python printed JSON")
}

#[test]
fn strings_that_yaml_1_1_would_retype_read_back_as_strings() {
    let server = Discovery::start(&[]);
    let applied = pilotctl(Some(&server.url), &["apply", "-f", "-"], &[], Some(OBJECT));
    assert_eq!(applied.code, 0, "{applied:?}");

    let yaml = pilotctl(
        Some(&server.url),
        &["get", "vs", "quoted", "-o", "yaml"],
        &[],
        None,
    );
    assert_eq!(yaml.code, 0, "{yaml:?}");
    let read = pyyaml(&yaml.stdout);
    let object = &read[0];
    assert_eq!(
        object["metadata"]["labels"],
        json!({"enabled": "yes", "port": "80", "mode": "off", "version": "1.10", "short": "n"}),
        "{}",
        yaml.stdout
    );
    assert_eq!(
        object["metadata"]["annotations"],
        json!({"note": "~", "empty": "null", "when": "2001-12-14", "hex": "0x1F", "time": "1:30", "ip": "127.0.0.1"}),
        "{}",
        yaml.stdout
    );
    assert_eq!(
        object["spec"]["http"][0]["match"][0]["headers"],
        json!({"x-canary": {"exact": "yes"}, "x-flag": {"exact": "On"}, "x-port": {"exact": "8080"}}),
        "{}",
        yaml.stdout
    );

    // The whole object as PyYAML reads it is the object -o json gives
    // (but for its status, which the status writer may update between the
    // two reads).
    let as_json = pilotctl(
        Some(&server.url),
        &["get", "vs", "quoted", "-o", "json"],
        &[],
        None,
    );
    assert_eq!(as_json.code, 0, "{as_json:?}");
    let json: Value = serde_json::from_str(&as_json.stdout).unwrap();
    let mut json = json.get("items").and_then(|i| i.get(0)).unwrap_or(&json).clone();
    let mut object = object.clone();
    for value in [&mut json, &mut object] {
        if let Some(map) = value.as_object_mut() {
            map.remove("status");
        }
    }
    assert_eq!(object, json, "{}", yaml.stdout);

    // And pilotctl reads its own output back to the same object.
    let replaced = pilotctl(
        Some(&server.url),
        &["replace", "-f", "-"],
        &[],
        Some(&yaml.stdout),
    );
    assert_eq!(replaced.code, 0, "{replaced:?}");
    server.terminate();
}
