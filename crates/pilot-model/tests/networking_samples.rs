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
