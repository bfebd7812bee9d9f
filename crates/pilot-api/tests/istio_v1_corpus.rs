//! Istio's configuration of today (the corpus `istio-v1` at
//! `../shared/corpora/`: its samples, its API reference's examples, its
//! validation test data, and documents that each break one rule of Istio's
//! validation) read as pilotctl and the REST API read files: every
//! document Istio accepts is accepted, every one it refuses (`invalid_*`)
//! is refused with an error that names the field. Where pilot still
//! differs, [`ACCEPTED_BY_ISTIO_REFUSED_HERE`] says why; an entry goes as
//! soon as the difference does (the test fails on a stale entry).

use pilot_model::document::{self, ParseOptions};
use pilot_test_support::{corpus, corpus_files};

/// Documents Istio accepts that pilot refuses: (file, document from 1, a
/// fragment of the error, why).
const ACCEPTED_BY_ISTIO_REFUSED_HERE: &[(&str, usize, &str, &str)] = &[
    (
        "istio_pkg.config.validation.testdata.crds.authz-valid.yaml",
        1,
        "spec.rules[0].to[0].operation.notPaths[4]: the path template \"/not-path/template/{*}\"",
        "path templates ({*}, {**}) need Envoy's uri_template matcher in RBAC, which the Envoy \
         pilot is tested with (1.40) aborts on, even in --mode validate; matched literally they \
         would allow or deny other requests than meant",
    ),
    (
        "istio_tests.testdata.networking.ingress-gateway.configs.yaml",
        1,
        "metadata.name: \"BACKEND\" is not a DNS-1123 subdomain",
        "an object name in upper case: pilot serves its objects through a Kubernetes-style API \
     (kubectl, CRDs), whose names are lower case; Kubernetes refuses this name too (Istio's \
     test reads it from a file)",
    ),
];

/// The upstream rule each refused document breaks (Istio's
/// `pkg/config/validation`), checked against the error pilot gives: (file
/// name, the field pilot's error names).
const REFUSED_AT: &[(&str, &str)] = &[
    ("invalid_any-unknown-spec-field.yaml", "spec."),
    ("invalid_any-unknown-top-level-field.yaml", ""),
    (
        "invalid_ap-bad-ip-block.yaml",
        "spec.rules[0].from[0].source.ipBlocks[0]",
    ),
    ("invalid_ap-custom-without-provider.yaml", "spec."),
    ("invalid_ap-deny-without-rules.yaml", "spec.rules"),
    ("invalid_ap-empty-source.yaml", "spec.rules[0].from[0].source"),
    ("invalid_ap-provider-without-custom.yaml", "spec."),
    (
        "invalid_ap-service-accounts-with-namespaces.yaml",
        "spec.rules[0].from[0].source",
    ),
    ("invalid_ap-when-without-values.yaml", "spec.rules[0].when[0]"),
    ("invalid_dr-duplicate-subset-names.yaml", "spec.subsets[1].name"),
    (
        "invalid_dr-empty-connection-pool.yaml",
        "spec.trafficPolicy.connectionPool",
    ),
    ("invalid_dr-missing-host.yaml", "spec.host"),
    ("invalid_dr-missing-subset-name.yaml", "spec.subsets[0].name"),
    (
        "invalid_dr-warmup-minimum-percent.yaml",
        "spec.trafficPolicy.loadBalancer.warmup",
    ),
];

#[test]
fn istio_v1_corpus_is_read_as_istio_reads_it() {
    let Some(dir) = corpus("istio-v1") else {
        return;
    };
    let registry = pilot_api::default_registry();
    let options = ParseOptions::default();
    let mut surprises = Vec::new();
    let (mut accepted, mut refused, mut foreign) = (0, 0, 0);
    let mut known = Vec::new();
    for file in corpus_files(&dir, &[".yaml", ".yml"]) {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        let values = document::parse_values(&name, &text).unwrap();
        let errors = match document::parse_reporting(&name, &text, &registry, &options) {
            Ok(_) => Vec::new(),
            Err(errors) => errors.0,
        };
        let invalid = name.starts_with("invalid_");
        for (index, value) in values.iter().enumerate() {
            let index = index + 1;
            let kind = value["kind"].as_str().unwrap_or_default();
            let group = value["apiVersion"]
                .as_str()
                .and_then(|v| v.split_once('/'))
                .map(|(g, _)| g)
                .unwrap_or_default();
            if registry.get(kind).is_none_or(|schema| schema.group != group) {
                foreign += 1;
                continue;
            }
            let found: Vec<_> = errors.iter().filter(|e| e.document == index).collect();
            let gap = ACCEPTED_BY_ISTIO_REFUSED_HERE
                .iter()
                .find(|(f, i, _, _)| *f == name && *i == index);
            match (invalid, found.is_empty(), gap) {
                (false, true, None) => accepted += 1,
                (false, false, Some((_, _, fragment, _)))
                    if found.iter().any(|e| e.to_string().contains(fragment)) =>
                {
                    known.push((name.clone(), index));
                }
                (false, false, _) => surprises.push(format!(
                    "{name} #{index} ({kind}): Istio accepts it, pilot refuses it: {}",
                    found
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                )),
                (false, true, Some(_)) => surprises.push(format!(
                    "{name} #{index}: accepted now; remove it from ACCEPTED_BY_ISTIO_REFUSED_HERE"
                )),
                (true, true, _) => surprises.push(format!(
                    "{name} #{index} ({kind}): Istio refuses it, pilot accepts it"
                )),
                (true, false, _) => {
                    // Every error names the place (line and column) and,
                    // where the upstream rule is about a field, that field.
                    for error in &found {
                        if error.line == 0 || error.column == 0 {
                            surprises.push(format!("{name} #{index}: no place in {error}"));
                        }
                    }
                    if let Some((_, at)) = REFUSED_AT.iter().find(|(f, _)| *f == name)
                        && !found.iter().any(|e| e.path.starts_with(at))
                    {
                        surprises.push(format!(
                            "{name} #{index}: refused, but not at {at:?}: {}",
                            found
                                .iter()
                                .map(ToString::to_string)
                                .collect::<Vec<_>>()
                                .join("; ")
                        ));
                    }
                    refused += 1;
                }
            }
        }
    }
    assert!(
        surprises.is_empty(),
        "{} surprises:\n{}",
        surprises.len(),
        surprises.join("\n")
    );
    assert_eq!(known.len(), ACCEPTED_BY_ISTIO_REFUSED_HERE.len(), "{known:?}");
    assert!(
        accepted > 100 && refused > 50,
        "accepted {accepted}, refused {refused}"
    );
    println!(
        "accepted {accepted}, refused {refused}, other kinds {foreign}, known gaps {}",
        known.len()
    );
}
