//! Istio's own networking samples (the corpus `istio-samples/networking`
//! at `../shared/corpora/`, sources in its SOURCE file) are accepted; the
//! documents written for these tests (`tests/data/networking-invalid`) are
//! refused, naming the field path and line:column of every problem.

use std::path::Path;

use pilot_api::networking;
use pilot_model::document;
use pilot_test_support::{corpus, corpus_files};

/// The YAML files of `dir`, by name, with their text.
fn data(dir: &Path) -> Vec<(String, String)> {
    corpus_files(dir, &[".yaml"])
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), text)
        })
        .collect()
}

#[test]
fn istio_samples_are_accepted() {
    let Some(dir) = corpus("istio-samples/networking/valid") else {
        return;
    };
    let registry = networking::registry();
    let files = data(&dir);
    assert!(files.len() >= 20, "{} sample files", files.len());
    let mut objects = 0;
    for (name, text) in &files {
        match document::parse(name, text, &registry) {
            Ok(found) => objects += found.len(),
            Err(errors) => panic!("{name}: {errors}"),
        }
    }
    assert!(objects >= 38, "{objects} objects");
}

#[test]
fn proto_field_names_are_read_and_lower_camel_written() {
    let spec = serde_json::json!({
        "hosts": ["reviews"],
        "export_to": ["."],
        "http": [{
            "match": [{"source_labels": {"app": "a"}, "ignore_uri_case": true}],
            "route": [{"destination": {"host": "reviews", "subset": "v1"}}],
            "cors_policy": {"allow_origins": [{"exact": "https://a.example"}]},
            "retries": {"attempts": 2, "per_try_timeout": "1s", "retry_on": "5xx"}
        }]
    });
    let vs: networking::VirtualService = serde_json::from_value(spec).unwrap();
    assert_eq!(vs.http[0].matches[0].source_labels["app"], "a");
    let written = serde_json::to_value(&vs).unwrap();
    assert_eq!(written["exportTo"], serde_json::json!(["."]));
    assert_eq!(written["http"][0]["match"][0]["ignoreUriCase"], true);
    assert_eq!(written["http"][0]["retries"]["perTryTimeout"], "1s");
    assert!(written.to_string().find('_').is_none(), "{written}");
}

/// The `# expect:` paths of each document of `text`.
fn expectations(text: &str) -> Vec<Vec<String>> {
    text.split("\n---")
        .map(|doc| {
            let mut paths: Vec<String> = doc
                .lines()
                .filter_map(|l| l.strip_prefix("# expect:"))
                .flat_map(|l| l.split_whitespace().map(str::to_string))
                .collect();
            paths.sort();
            paths
        })
        .collect()
}

#[test]
fn refused_documents_name_every_path_with_line_and_column() {
    let registry = networking::registry();
    let files = data(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/networking-invalid"));
    assert_eq!(files.len(), 6);
    let mut failures = Vec::new();
    for (name, text) in &files {
        let expected = expectations(text);
        let Err(errors) = document::parse(name, text, &registry) else {
            panic!("{name}: accepted");
        };
        for (i, want) in expected.iter().enumerate() {
            let mut got: Vec<String> = errors
                .0
                .iter()
                .filter(|e| e.document == i + 1)
                .map(|e| e.path.clone())
                .collect();
            got.sort();
            got.dedup();
            let shown: Vec<String> = errors
                .0
                .iter()
                .filter(|e| e.document == i + 1)
                .map(|e| e.to_string())
                .collect();
            if &got != want {
                failures.push(format!(
                    "{name} document {}: expected {want:?}, got:\n{}",
                    i + 1,
                    shown.join("\n")
                ));
            }
        }
        for error in &errors.0 {
            assert!(error.line > 1 && error.column >= 1, "{error}");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A Sidecar egress listener on a Unix domain socket that is not HTTP
/// forwards to one host port: importing two hosts is refused at the
/// `hosts` field of the listener, with its line and column in YAML, and
/// with the object's key when written without YAML.
#[test]
fn a_tcp_socket_listener_importing_two_hosts_is_refused_where_its_hosts_are() {
    let text = "\
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: socket, namespace: bookinfo}
spec:
  egress:
  - port: {number: 0, protocol: TCP}
    bind: unix:///var/run/db.sock
    hosts: [./mysqldb.bookinfo.svc.cluster.local, ./mongodb.bookinfo.svc.cluster.local]
";
    let Err(errors) = document::parse("sidecar.yaml", text, &networking::registry()) else {
        panic!("accepted");
    };
    assert_eq!(errors.0.len(), 1, "{errors}");
    let error = &errors.0[0];
    assert_eq!(error.path, "spec.egress[0].hosts");
    assert_eq!((error.line, error.column), (8, 5), "{error}");
    let shown = error.to_string();
    assert!(shown.contains("sidecar.yaml:8:5"), "{shown}");
    assert!(shown.contains("exactly one host, not 2"), "{shown}");

    // The same object written through the API (no YAML): the key names it.
    let one = text.replace(", ./mongodb.bookinfo.svc.cluster.local", "");
    let mut config = document::parse("sidecar.yaml", &one, &networking::registry())
        .unwrap()
        .remove(0);
    config.spec["egress"][0]["hosts"] = serde_json::json!(["./*"]);
    let refused = networking::registry()
        .schema("Sidecar")
        .unwrap()
        .validate(&config)
        .unwrap_err()
        .to_string();
    assert!(
        refused.starts_with("Sidecar bookinfo/socket is invalid: spec.egress[0].hosts[0]"),
        "{refused}"
    );
}
