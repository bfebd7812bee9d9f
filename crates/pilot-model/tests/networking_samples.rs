//! Istio's own networking samples (tests/data/networking, sources in its
//! SOURCE file) are accepted; rejected documents name the field path and
//! line:column of every problem.

use std::path::Path;

use pilot_model::{document, networking};

fn data(dir: &str) -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/networking")
        .join(dir);
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), text)
        })
        .collect();
    files.sort();
    files
}

#[test]
fn istio_samples_are_accepted() {
    let registry = networking::registry();
    let files = data("valid");
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
    let files = data("invalid");
    assert_eq!(files.len(), 5);
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
