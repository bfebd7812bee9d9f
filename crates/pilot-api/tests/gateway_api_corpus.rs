//! The Kubernetes Gateway API's own documents (the corpus `gateway-api`
//! at `../shared/corpora/`: its examples, its conformance tests' manifests,
//! its invalid examples and documents that each break one CEL rule of its
//! CRDs) read as pilotctl and the REST API read files: every document the
//! CRDs accept is accepted, every one they refuse (`invalid_*`,
//! `invalid-cel_*`) is refused with an error at the field the broken rule
//! is about ([`REFUSED_AT`]). Where pilot still differs,
//! [`ACCEPTED_UPSTREAM_REFUSED_HERE`] says why; an entry goes as soon as
//! the difference does (the test fails on a stale entry).

use pilot_model::document::{self, ParseOptions};
use pilot_test_support::{corpus, corpus_files};

/// Documents the CRDs accept that pilot refuses: (file, document from 1, a
/// fragment of the error, why).
const ACCEPTED_UPSTREAM_REFUSED_HERE: &[(&str, usize, &str, &str)] = &[];

/// The upstream rule each refused document breaks (its first comment, or
/// the file upstream's `hack/invalid-examples/` holds it in), checked
/// against the errors pilot gives, one of which names exactly this field:
/// (file name, the field path as the API server names it: a CEL rule's
/// place, or the field a schema constraint is on).
const REFUSED_AT: &[(&str, &str)] = &[
    (
        "invalid-cel_backendtlspolicy.both-ca-sources.yaml",
        "spec.validation",
    ),
    (
        "invalid-cel_backendtlspolicy.duplicate-targetrefs.yaml",
        "spec.targetRefs",
    ),
    (
        "invalid-cel_backendtlspolicy.no-ca-source.yaml",
        "spec.validation",
    ),
    (
        "invalid-cel_backendtlspolicy.san-hostname-missing.yaml",
        "spec.validation.subjectAltNames[0]",
    ),
    (
        "invalid-cel_gateway.address-ip-with-port.yaml",
        "spec.addresses[0].value",
    ),
    ("invalid-cel_gateway.duplicate-addresses.yaml", "spec.addresses"),
    (
        "invalid-cel_gateway.https-terminate-without-certs.yaml",
        "spec.listeners[0].tls",
    ),
    (
        "invalid-cel_gateway.listener-port-protocol-hostname-not-unique.yaml",
        "spec.listeners",
    ),
    (
        "invalid-cel_gateway.tls-protocol-without-mode.yaml",
        "spec.listeners",
    ),
    (
        "invalid-cel_grpcroute.exact-method-with-regex.yaml",
        "spec.rules[0].matches[0].method",
    ),
    (
        "invalid-cel_grpcroute.filter-repeated.yaml",
        "spec.rules[0].filters",
    ),
    (
        "invalid-cel_grpcroute.filter-wrong-field.yaml",
        "spec.rules[0].filters[0]",
    ),
    (
        "invalid-cel_grpcroute.method-match-empty.yaml",
        "spec.rules[0].matches[0].method",
    ),
    (
        "invalid-cel_httproute.backendref-urlrewrite-prefix-regex-match.yaml",
        "spec.rules[0]",
    ),
    (
        "invalid-cel_httproute.backendrequest-longer-than-request.yaml",
        "spec.rules[0].timeouts",
    ),
    (
        "invalid-cel_httproute.cors-origin-with-path.yaml",
        "spec.rules[0].filters[0].cors.allowOrigins[0]",
    ),
    (
        "invalid-cel_httproute.cors-wildcard-with-origins.yaml",
        "spec.rules[0].filters[0].cors.allowOrigins",
    ),
    (
        "invalid-cel_httproute.duplicate-parentrefs.yaml",
        "spec.parentRefs",
    ),
    ("invalid-cel_httproute.duplicate-rule-name.yaml", "spec.rules"),
    (
        "invalid-cel_httproute.mirror-percent-and-fraction.yaml",
        "spec.rules[0].filters[0].requestMirror",
    ),
    (
        "invalid-cel_httproute.path-dot-segment.yaml",
        "spec.rules[0].matches[0].path",
    ),
    (
        "invalid-cel_httproute.path-ends-dot.yaml",
        "spec.rules[0].matches[0].path",
    ),
    (
        "invalid-cel_httproute.path-not-absolute.yaml",
        "spec.rules[0].matches[0].path",
    ),
    (
        "invalid-cel_httproute.redirect-prefix-two-matches.yaml",
        "spec.rules[0]",
    ),
    (
        "invalid-cel_httproute.replacefullpath-missing.yaml",
        "spec.rules[0].filters[0].urlRewrite.path",
    ),
    (
        "invalid-cel_httproute.replacefullpath-wrong-type.yaml",
        "spec.rules[0].filters[0].urlRewrite.path",
    ),
    (
        "invalid-cel_httproute.rewrite-and-redirect.yaml",
        "spec.rules[0].filters",
    ),
    (
        "invalid-cel_httproute.timeout-unit.yaml",
        "spec.rules[0].timeouts.request",
    ),
    ("invalid-cel_httproute.too-many-matches.yaml", "spec.rules"),
    (
        "invalid-cel_httproute.urlrewrite-prefix-with-exact-match.yaml",
        "spec.rules[0]",
    ),
    (
        "invalid-cel_httproute.urlrewrite-repeated.yaml",
        "spec.rules[0].filters",
    ),
    (
        "invalid_experimental.httproute.invalid-filter-externalauth-bad-http-path.yaml",
        "spec.rules[0].filters[0].externalAuth.http.path",
    ),
    (
        "invalid_experimental.httproute.invalid-filter-externalauth-empty.yaml",
        "spec.rules[0].filters[0]",
    ),
    (
        "invalid_experimental.httproute.invalid-filter-externalauth-no-protocol.yaml",
        "spec.rules[0].filters[0].externalAuth.protocol",
    ),
    (
        "invalid_experimental.httproute.invalid-header-value.yaml",
        "spec.rules[0].filters[0].responseHeaderModifier.add[0].value",
    ),
    (
        "invalid_standard.gateway.duplicate-listeners.yaml",
        "spec.listeners[1]",
    ),
    ("invalid_standard.gateway.hostname-tcp.yaml", "spec.listeners"),
    ("invalid_standard.gateway.hostname-udp.yaml", "spec.listeners"),
    (
        "invalid_standard.gateway.invalid-addresses.yaml",
        "spec.addresses[0].value",
    ),
    (
        "invalid_standard.gateway.invalid-listener-name.yaml",
        "spec.listeners[0].name",
    ),
    (
        "invalid_standard.gateway.invalid-listener-port.yaml",
        "spec.listeners[0].port",
    ),
    ("invalid_standard.gateway.invalid-tls-mode.yaml", "spec.listeners"),
    ("invalid_standard.gateway.tlsconfig-tcp.yaml", "spec.listeners"),
    (
        "invalid_standard.gatewayclass.invalid-controller.yaml",
        "spec.controllerName",
    ),
    (
        "invalid_standard.httproute.duplicate-header-match.yaml",
        "spec.rules[0].matches[0].headers[1]",
    ),
    (
        "invalid_standard.httproute.duplicate-query-match.yaml",
        "spec.rules[0].matches[0].queryParams[1]",
    ),
    (
        "invalid_standard.httproute.httproute-portless-backend.yaml",
        "spec.rules[0].backendRefs[0]",
    ),
    (
        "invalid_standard.httproute.httproute-portless-service.yaml",
        "spec.rules[0].backendRefs[0]",
    ),
    (
        "invalid_standard.httproute.invalid-backend-group.yaml",
        "spec.rules[0].backendRefs[0].group",
    ),
    (
        "invalid_standard.httproute.invalid-backend-kind.yaml",
        "spec.rules[0].backendRefs[0].kind",
    ),
    (
        "invalid_standard.httproute.invalid-backend-port.yaml",
        "spec.rules[0].backendRefs[0].port",
    ),
    (
        "invalid_standard.httproute.invalid-filter-duplicate-header.yaml",
        "spec.rules[0].filters[0].requestHeaderModifier.remove[1]",
    ),
    (
        "invalid_standard.httproute.invalid-filter-duplicate.yaml",
        "spec.rules[0].filters",
    ),
    (
        "invalid_standard.httproute.invalid-filter-empty.yaml",
        "spec.rules[0].filters[0]",
    ),
    (
        "invalid_standard.httproute.invalid-filter-wrong-field.yaml",
        "spec.rules[0].filters[0]",
    ),
    (
        "invalid_standard.httproute.invalid-header-name.yaml",
        "spec.rules[0].matches[0].headers[0].name",
    ),
    (
        "invalid_standard.httproute.invalid-hostname.yaml",
        "spec.hostnames[0]",
    ),
    (
        "invalid_standard.httproute.invalid-httpredirect-hostname.yaml",
        "spec.rules[0].filters[0].requestRedirect.hostname",
    ),
    (
        "invalid_standard.httproute.invalid-method.yaml",
        "spec.rules[0].matches[0].method",
    ),
    (
        "invalid_standard.httproute.invalid-path-alphanum-specialchars-mix.yaml",
        "spec.rules[0].matches[0].path",
    ),
    (
        "invalid_standard.httproute.invalid-path-specialchars.yaml",
        "spec.rules[0].matches[0].path",
    ),
    (
        "invalid_standard.httproute.invalid-request-redirect-with-backendref.yaml",
        "spec.rules[0]",
    ),
    ("invalid_standard.referencegrant.missing-from.yaml", "spec.from"),
    (
        "invalid_standard.referencegrant.missing-ns.yaml",
        "spec.from[0].namespace",
    ),
    ("invalid_standard.referencegrant.missing-to.yaml", "spec.to"),
    (
        "invalid_standard.tlsroute.invalid-hostname.yaml",
        "spec.hostnames[0]",
    ),
    ("invalid_standard.tlsroute.no-hostname.yaml", "spec.hostnames"),
];

#[test]
fn gateway_api_corpus_is_read_as_the_crds_read_it() {
    let Some(dir) = corpus("gateway-api") else {
        return;
    };
    let registry = pilot_api::default_registry();
    let options = ParseOptions::default();
    let mut surprises = Vec::new();
    let (mut accepted, mut refused, mut foreign) = (0, 0, 0);
    let mut known = Vec::new();
    let mut refused_files = Vec::new();
    for file in corpus_files(&dir, &[".yaml", ".yml"]) {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        let values = document::parse_values(&name, &text).unwrap();
        let errors = match document::parse_reporting(&name, &text, &registry, &options) {
            Ok(_) => Vec::new(),
            Err(errors) => errors.0,
        };
        let invalid = name.starts_with("invalid_") || name.starts_with("invalid-cel_");
        for (index, value) in values.iter().enumerate() {
            let index = index + 1;
            let kind = value["kind"].as_str().unwrap_or_default();
            let group = value["apiVersion"]
                .as_str()
                .and_then(|v| v.split_once('/'))
                .map(|(g, _)| g)
                .unwrap_or_default();
            if registry
                .resolve(kind, group)
                .is_none_or(|schema| schema.group != group)
            {
                foreign += 1;
                continue;
            }
            let found: Vec<_> = errors.iter().filter(|e| e.document == index).collect();
            let rendered = || {
                found
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            let gap = ACCEPTED_UPSTREAM_REFUSED_HERE
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
                    "{name} #{index} ({kind}): the CRDs accept it, pilot refuses it: {}",
                    rendered()
                )),
                (false, true, Some(_)) => surprises.push(format!(
                    "{name} #{index}: accepted now; remove it from ACCEPTED_UPSTREAM_REFUSED_HERE"
                )),
                (true, true, _) => surprises.push(format!(
                    "{name} #{index} ({kind}): the CRDs refuse it, pilot accepts it"
                )),
                (true, false, _) => {
                    for error in &found {
                        if error.line == 0 || error.column == 0 {
                            surprises.push(format!("{name} #{index}: no place in {error}"));
                        }
                    }
                    match REFUSED_AT.iter().find(|(f, _)| *f == name) {
                        Some((_, at)) if !found.iter().any(|e| e.path == *at) => {
                            surprises.push(format!(
                                "{name} #{index}: refused, but not at {at:?}: {}",
                                rendered()
                            ));
                        }
                        Some(_) => {}
                        None => surprises.push(format!("{name} #{index}: not in REFUSED_AT: {}", rendered())),
                    }
                    refused_files.push(name.clone());
                    refused += 1;
                }
            }
        }
    }
    for (file, _) in REFUSED_AT {
        if !refused_files.iter().any(|f| f == file) {
            surprises.push(format!(
                "{file}: in REFUSED_AT but not refused (or not in the corpus)"
            ));
        }
    }
    assert!(
        surprises.is_empty(),
        "{} surprises:\n{}",
        surprises.len(),
        surprises.join("\n")
    );
    assert_eq!(known.len(), ACCEPTED_UPSTREAM_REFUSED_HERE.len(), "{known:?}");
    assert!(
        accepted > 250 && refused > 60,
        "accepted {accepted}, refused {refused}"
    );
    println!(
        "accepted {accepted}, refused {refused}, other kinds {foreign}, known differences {}",
        known.len()
    );
}

/// A refused document's error, as pilotctl prints it, says where in the
/// file (`file:line:col`) and which field.
#[test]
fn a_refused_document_s_error_names_its_line_column_and_field() {
    let Some(dir) = corpus("gateway-api") else {
        return;
    };
    let name = "invalid_standard.httproute.invalid-backend-port.yaml";
    let text = std::fs::read_to_string(dir.join(name)).unwrap();
    let registry = pilot_api::default_registry();
    let errors = document::parse_reporting(name, &text, &registry, &ParseOptions::default())
        .unwrap_err()
        .0;
    let rendered: Vec<String> = errors.iter().map(ToString::to_string).collect();
    // `port: 800080` is on line 9, its key at column 7.
    assert_eq!(
        rendered,
        [format!(
            "{name}:9:7 spec.rules[0].backendRefs[0].port: must be between 1 and 65535, not 800080"
        )]
    );
}

/// Every spec of the corpus the CRDs accept reads into its Rust type and
/// writes back as it was written: no field lost, none added, defaults not
/// filled in.
#[test]
fn accepted_specs_round_trip_through_their_types() {
    use pilot_api::gateway_api::*;
    fn again<T: serde::Serialize + serde::de::DeserializeOwned>(
        spec: &serde_json::Value,
    ) -> serde_json::Value {
        let typed: T = serde_json::from_value(spec.clone()).unwrap();
        serde_json::to_value(typed).unwrap()
    }
    let Some(dir) = corpus("gateway-api") else {
        return;
    };
    let mut differences = Vec::new();
    let mut checked = 0;
    for file in corpus_files(&dir, &[".yaml", ".yml"]) {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("invalid") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (index, value) in document::parse_values(&name, &text).unwrap().iter().enumerate() {
            let spec = &value["spec"];
            let written = match value["kind"].as_str().unwrap_or_default() {
                "GatewayClass" => again::<GatewayClass>(spec),
                "Gateway" => again::<Gateway>(spec),
                "HTTPRoute" => again::<HttpRoute>(spec),
                "GRPCRoute" => again::<GrpcRoute>(spec),
                "ReferenceGrant" => again::<ReferenceGrant>(spec),
                "BackendTLSPolicy" => again::<BackendTlsPolicy>(spec),
                "TLSRoute" => again::<TlsRoute>(spec),
                "TCPRoute" => again::<TcpRoute>(spec),
                _ => continue,
            };
            checked += 1;
            if &written != spec {
                differences.push(format!("{name} #{}: {spec}\n  became {written}", index + 1));
            }
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    assert!(checked > 250, "{checked}");
}
