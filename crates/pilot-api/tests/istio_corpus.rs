//! Istio's own configuration of the v1alpha1 era (bookinfo samples for
//! Kubernetes and Consul, pilot's test data and integration-test rules,
//! the first istioctl's samples), read as pilotctl reads files: every
//! document is accepted, accepted with the warning [`WARNED`] lists, or
//! rejected for a reason in [`REJECTED`] that is something pilot
//! deliberately does not support. The files are the
//! corpus `istio-samples/v1alpha1-era` at `../shared/corpora/`; where each
//! comes from: its `SOURCE`.

use std::collections::BTreeMap;

use pilot_api::istio;
use pilot_model::document::{self, ISTIO_EARLIER_VERSIONS, ParseOptions};
use pilot_test_support::corpus;

/// The values Istio's integration tests rendered the templated rules with
/// (`pilot/test/integration/routingToEgress.go`: the redirect from a
/// wildcard egress host).
const TEMPLATE_VALUES: [(&str, &str); 4] = [
    ("{{.service}}", "*.httpbin.org"),
    ("{{.from}}", "/post"),
    ("{{.to}}", "/get"),
    ("{{.authority}}", "httpbin.org"),
];

/// The first istioctl's format.
const FIRST_CLI: &str = "the first istioctl's type/name/spec format: its specs are of Istio's first routing API \
    (destination as a hostname, tags for labels), which Istio's istioctl did not read from 0.2 on either; \
    refused with one error naming the format";
/// A sample Istio's own validation refused.
const ISTIO_TOO: &str = "Istio's validation refused it too (a source given by labels alone: \
    ValidateIstioService wants a name or a service); the sample was fixed in 0.4";
/// Load balancing for an original-destination cluster.
const ORIGINAL_DST_LB: &str = "a load-balancing policy for a wildcard egress host: Envoy reaches it at the \
    original destination and takes no balancing policy there; Istio dropped it silently \
    (policy.go skips ORIGINAL_DST clusters), pilot drops it and says so";

/// Documents pilot rejects: (file, document from 1, a fragment of the
/// error, why pilot does not support it).
const REJECTED: &[(&str, usize, &str, &str)] = &[
    (
        "0.1.6-bookinfo-destination-ratings-test-delay.yaml",
        1,
        "document format of Istio's first istioctl",
        FIRST_CLI,
    ),
    (
        "0.1.6-bookinfo-loadbalancing-policy-reviews.yaml",
        1,
        "document format of Istio's first istioctl",
        FIRST_CLI,
    ),
    (
        "0.1.6-bookinfo-route-rule-all-v1.yaml",
        1,
        "document format of Istio's first istioctl",
        FIRST_CLI,
    ),
    (
        "0.1.6-bookinfo-route-rule-all-v1.yaml",
        2,
        "document format of Istio's first istioctl",
        FIRST_CLI,
    ),
    (
        "0.1.6-bookinfo-route-rule-all-v1.yaml",
        3,
        "document format of Istio's first istioctl",
        FIRST_CLI,
    ),
    (
        "0.1.6-bookinfo-route-rule-all-v1.yaml",
        4,
        "document format of Istio's first istioctl",
        FIRST_CLI,
    ),
    (
        "0.1.6-bookinfo-route-rule-delay.yaml",
        1,
        "document format of Istio's first istioctl",
        FIRST_CLI,
    ),
    (
        "0.1.6-bookinfo-route-rule-reviews-50-v3.yaml",
        1,
        "document format of Istio's first istioctl",
        FIRST_CLI,
    ),
    (
        "0.1.6-bookinfo-route-rule-reviews-test-v2.yaml",
        1,
        "document format of Istio's first istioctl",
        FIRST_CLI,
    ),
    (
        "0.1.6-bookinfo-route-rule-reviews-v2-v3.yaml",
        1,
        "document format of Istio's first istioctl",
        FIRST_CLI,
    ),
    (
        "0.1.6-bookinfo-route-rule-reviews-v3.yaml",
        1,
        "document format of Istio's first istioctl",
        FIRST_CLI,
    ),
    (
        "0.3.0-kube-route-rule-all-v1.yaml",
        2,
        "spec.match.source: a service reference needs a name",
        ISTIO_TOO,
    ),
    (
        "0.3.0-kube-route-rule-all-v1.yaml",
        3,
        "spec.match.source: a service reference needs a name",
        ISTIO_TOO,
    ),
    (
        "0.3.0-kube-route-rule-all-v1.yaml",
        4,
        "spec.match.source: a service reference needs a name",
        ISTIO_TOO,
    ),
    (
        "0.3.0-kube-route-rule-all-v1.yaml",
        5,
        "spec.match.source: a service reference needs a name",
        ISTIO_TOO,
    ),
    (
        "0.3.0-kube-route-rule-all-v1.yaml",
        6,
        "spec.match.source: a service reference needs a name",
        ISTIO_TOO,
    ),
];

/// Documents pilot accepts with a warning: (file, document from 1, a
/// fragment of the warning, why).
const WARNED: &[(&str, usize, &str, &str)] = &[(
    "0.3.0-testdata-egress-rule-cb-policy.yaml",
    1,
    "spec.loadBalancing: ignored, as Istio 0.3 ignored it",
    ORIGINAL_DST_LB,
)];

#[test]
fn istio_corpus_is_read_as_istio_read_it() {
    let Some(dir) = corpus("istio-samples/v1alpha1-era") else {
        return;
    };
    let sources = std::fs::read_to_string(dir.join("SOURCE")).unwrap();
    let registry = istio::registry();
    let options = ParseOptions {
        earlier_versions: ISTIO_EARLIER_VERSIONS.map(String::from).to_vec(),
        ..Default::default()
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name != "SOURCE")
        .collect();
    files.sort();
    let mut accepted = 0;
    let mut rejected: BTreeMap<(String, usize), String> = BTreeMap::new();
    let mut surprises = Vec::new();
    for file in &files {
        assert!(
            sources
                .lines()
                .any(|line| line.split('\t').next() == Some(file.as_str())),
            "{file} has no line in SOURCE"
        );
        let mut text = std::fs::read_to_string(dir.join(file)).unwrap();
        for (placeholder, value) in TEMPLATE_VALUES {
            text = text.replace(placeholder, value);
        }
        let documents = document::parse_values(file, &text).unwrap().len();
        let (errors, warnings) = match document::parse_reporting(file, &text, &registry, &options) {
            Ok(parsed) => (Vec::new(), parsed.warnings),
            Err(errors) => (errors.0, Vec::new()),
        };
        for index in 1..=documents {
            let found: Vec<String> = errors
                .iter()
                .filter(|e| e.document == index)
                .map(ToString::to_string)
                .collect();
            // What the kinds warn of (not the versions read as others).
            let warned: Vec<String> = warnings
                .iter()
                .filter(|w| w.document == index && w.path != "apiVersion")
                .map(ToString::to_string)
                .collect();
            match WARNED.iter().find(|(f, i, _, _)| f == file && *i == index) {
                Some((_, _, fragment, _)) if !warned.iter().any(|w| w.contains(fragment)) => surprises.push(
                    format!("{file} #{index}: expected a warning {fragment:?}, got {warned:#?}"),
                ),
                None if !warned.is_empty() => surprises.push(format!("{file} #{index}: warned {warned:#?}")),
                _ => {}
            }
            let expected = REJECTED.iter().find(|(f, i, _, _)| f == file && *i == index);
            match (found.is_empty(), expected) {
                (true, None) => accepted += 1,
                (false, Some((_, _, fragment, _))) if found.iter().any(|e| e.contains(fragment)) => {
                    rejected.insert((file.clone(), index), found.join("\n"));
                }
                (_, expected) => {
                    surprises.push(format!("{file} #{index}: expected {expected:?}, got {found:#?}"))
                }
            }
        }
    }
    assert!(surprises.is_empty(), "{}", surprises.join("\n"));
    assert_eq!(rejected.len(), REJECTED.len());
    println!(
        "{} files; {accepted} documents accepted, {} rejected",
        files.len(),
        rejected.len()
    );
}
