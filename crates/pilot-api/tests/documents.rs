//! Document parsing: positions, every error of every document, unknown and
//! duplicate fields, unknown kinds, hostile input, directories, round trips.

use pilot_api::istio;
use pilot_model::document::*;

fn errors(text: &str) -> Vec<String> {
    match parse("rules.yaml", text, &istio::registry()) {
        Ok(_) => Vec::new(),
        Err(DocumentErrors(errors)) => errors.iter().map(ToString::to_string).collect(),
    }
}

const GOOD: &str = "\
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata:
  name: reviews-default
  namespace: default
  labels:
    app: reviews
spec:
  destination:
    name: reviews
  precedence: 1
  route:
  - labels:
      version: v1
";

#[test]
fn a_good_document_parses_to_a_validated_object() {
    let objects = parse("rules.yaml", GOOD, &istio::registry()).unwrap();
    assert_eq!(objects.len(), 1);
    let rule = &objects[0];
    assert_eq!(rule.key().to_string(), "RouteRule default/reviews-default");
    assert_eq!(rule.meta.group, "config.istio.io");
    assert_eq!(rule.meta.labels["app"], "reviews");
    assert_eq!(rule.spec["route"][0]["labels"]["version"], "v1");
}

#[test]
fn every_error_of_every_document_with_line_and_column() {
    let text = format!(
        "{GOOD}---\n\
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata:
  name: Bad_Name
spec:
  destination:
    name: reviews
  httpFault:
    abort:
      percent: 200
      httpStatus: 503
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata:
  name: reviews-cb
spec:
  destination:
    name: reviews
  circuitBreaker:
    simpleCb:
      maxConnections: -5
"
    );
    assert_eq!(
        errors(&text),
        [
            "rules.yaml:19:3 metadata.name: \"Bad_Name\" is not a DNS-1123 subdomain: dot-separated parts of lowercase letters, digits and '-', each starting and ending with a letter or digit",
            "rules.yaml:25:7 spec.httpFault.abort.percent: percent must be between 0 and 100, got 200",
            "rules.yaml:37:7 spec.circuitBreaker.simpleCb.maxConnections: must be 0 or more, got -5",
        ]
    );
    let Err(DocumentErrors(found)) = parse("rules.yaml", &text, &istio::registry()) else {
        panic!()
    };
    assert_eq!(found.iter().map(|e| e.document).collect::<Vec<_>>(), [2, 2, 3]);
}

#[test]
fn unknown_fields_are_named_with_a_suggestion() {
    let text = GOOD.replace("  precedence: 1", "  precedance: 1");
    assert_eq!(
        errors(&text),
        ["rules.yaml:11:3 spec.precedance: unknown field `precedance`; did you mean `precedence`?"]
    );
    let text = GOOD.replace("  namespace: default", "  nmespace: default");
    assert_eq!(
        errors(&text),
        ["rules.yaml:5:3 metadata.nmespace: unknown field `nmespace`; did you mean `namespace`?"]
    );
    let text = GOOD.replace("kind: RouteRule\n", "kind: RouteRule\nextra: {}\n");
    assert_eq!(
        errors(&text),
        [
            "rules.yaml:3:1 extra: unknown field `extra`; known fields: apiVersion, kind, metadata, spec, status"
        ]
    );
    // A status is read (pilotctl get -o yaml | pilotctl apply -f - works)
    // and checked like the rest.
    let text = GOOD.replace("kind: RouteRule\n", "kind: RouteRule\nstatus: {acked: 1}\n");
    assert_eq!(
        errors(&text),
        ["rules.yaml:3:1 status: missing field `observedVersion`"]
    );
}

#[test]
fn unknown_fields_and_rule_errors_are_reported_together() {
    let text = GOOD.replace("  precedence: 1", "  precedance: 1").replace(
        "  - labels:\n      version: v1\n",
        "  - labels:\n      version: v1\n    weight: 60\n  - labels:\n      version: v2\n    weight: 30\n",
    );
    assert_eq!(
        errors(&text),
        [
            "rules.yaml:11:3 spec.precedance: unknown field `precedance`; did you mean `precedence`?",
            "rules.yaml:18:5 spec.route[1].weight: weights must sum to 100, got 90",
        ]
    );
    // A mistyped value is dropped in repair, so the rules are not checked
    // against what is left (their errors would mislead).
    let text = text.replace("weight: 30", "weight: thirty");
    let found = errors(&text);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[1].contains("spec.route[1].weight: invalid type"),
        "{found:?}"
    );
}

#[test]
fn duplicate_keys_are_errors() {
    let text = GOOD.replace("  precedence: 1", "  precedence: 1\n  precedence: 2");
    assert_eq!(
        errors(&text),
        ["rules.yaml:12:3 spec.precedence: duplicate key `precedence`"]
    );
}

#[test]
fn unknown_kinds_list_the_registered_ones() {
    let text = GOOD.replace("kind: RouteRule", "kind: RoutRule");
    assert_eq!(
        errors(&text),
        [
            "rules.yaml:2:1 kind: unknown kind \"RoutRule\"; did you mean RouteRule? registered kinds: DestinationPolicy, EgressRule, IngressRule, RouteRule"
        ]
    );
}

#[test]
fn missing_and_mistyped_fields() {
    let text = "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata:\n  name: r\n";
    assert_eq!(errors(text), ["rules.yaml:1:1 missing field `spec`"]);
    let text = GOOD.replace("  precedence: 1", "  precedence: high");
    let found = errors(&text);
    assert_eq!(found.len(), 1);
    assert!(
        found[0].starts_with("rules.yaml:11:3 spec.precedence: invalid type: string \"high\""),
        "{found:?}"
    );
    assert_eq!(
        errors("- a\n- b\n"),
        ["rules.yaml:1:1 a document must be a mapping with apiVersion, kind, metadata and spec"]
    );
    let text = GOOD.replace("config.istio.io/v1alpha2", "config.istio.io/v1");
    assert!(errors(&text)[0].starts_with("rules.yaml:1:1 apiVersion: version \"v1\""));
}

#[test]
fn missing_namespace_defaults_and_json_is_read() {
    let json = r#"{"apiVersion": "config.istio.io/v1alpha2", "kind": "EgressRule",
  "metadata": {"name": "cnn"},
  "spec": {"destination": {"service": "*.cnn.com"}, "ports": [{"port": 80, "protocol": "http"}, {"port": 80, "protocol": "http"}]}}"#;
    assert_eq!(
        errors(json),
        ["rules.yaml:3:98 spec.ports[1].port: port 80 is listed twice"]
    );
    let json = json.replace(", {\"port\": 80, \"protocol\": \"http\"}]", "]");
    let objects = parse("cnn.json", &json, &istio::registry()).unwrap();
    assert_eq!(objects[0].meta.namespace, "default");
}

#[test]
fn syntax_errors_and_hostile_input_are_errors_not_panics() {
    let found = errors("apiVersion: v1\nkind: [RouteRule\n");
    assert_eq!(found.len(), 1);
    assert!(
        found[0].starts_with("rules.yaml:3:1 YAML syntax error"),
        "{found:?}"
    );
    // Deep flow nesting stops in the YAML parser, deep block nesting in ours.
    let found = errors(&"[".repeat(10_000));
    assert!(found[0].contains("recursion limit exceeded"), "{found:?}");
    let block: String = (0..100)
        .map(|depth| format!("{:width$}k{depth}:\n", "", width = depth * 2))
        .collect();
    let found = errors(&block);
    assert!(found[0].contains("nesting is deeper than 64 levels"), "{found:?}");
    let tiny = ParseOptions {
        limits: Limits {
            max_bytes: 10,
            ..Limits::default()
        },
        ..ParseOptions::default()
    };
    let err = parse_with("big.yaml", GOOD, &istio::registry(), &tiny).unwrap_err();
    assert!(err.to_string().contains("the limit is 10"));
    let tags = errors("!custom {a: 1}");
    assert!(tags[0].contains("tag"), "{tags:?}");
}

#[test]
fn round_trip_through_yaml() {
    let registry = istio::registry();
    let text = format!(
        "{GOOD}---\n{}",
        "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {name: tricky, annotations: {note: 'yes', empty: '', colon: 'a: b', num: '42', dash: '-x'}}\nspec:\n  destination: {name: reviews}\n  appendHeaders: {x-quote: \"it's \\\"quoted\\\"\\t\"}\n  httpReqTimeout: {simpleTimeout: {timeout: 1500ms}}\n"
    );
    let first = parse("in.yaml", &text, &registry).unwrap();
    let yaml = to_yaml(&first);
    let second = parse("out.yaml", &yaml, &registry).unwrap();
    assert_eq!(first, second, "{yaml}");
    assert_eq!(second[1].meta.annotations["num"], "42");
    assert!(
        yaml.contains("timeout: 1500ms"),
        "the document keeps what was written:\n{yaml}"
    );
}

#[test]
fn a_directory_of_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), GOOD).unwrap();
    std::fs::write(
        dir.path().join("b.json"),
        GOOD.replace("reviews-default", "second")
            .replace("  precedence: 1\n", ""),
    )
    .unwrap_or(());
    std::fs::write(dir.path().join("notes.txt"), "not config").unwrap();
    let found = read_dir(dir.path(), &istio::registry());
    let objects = found.unwrap();
    assert_eq!(objects.len(), 2);
    std::fs::write(
        dir.path().join("c.yml"),
        GOOD.replace("name: reviews\n", "name: Reviews\n"),
    )
    .unwrap();
    let err = read_dir(dir.path(), &istio::registry()).unwrap_err();
    assert_eq!(err.0.len(), 1);
    assert!(err.0[0].source.ends_with("c.yml"));
    assert_eq!((err.0[0].line, err.0[0].column), (10, 5));
}

#[test]
fn every_unknown_or_mistyped_field_is_reported_at_once() {
    let text = "\
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata:
  name: r
  lables: {a: b}
spec:
  destination:
    nme: reviews
  route:
  - labels: {version: v1}
    weight: 80
  - labels: {version: v2}
    wieght: 10
  precedence: high
";
    assert_eq!(
        errors(text),
        [
            "rules.yaml:5:3 metadata.lables: unknown field `lables`; did you mean `labels`?",
            "rules.yaml:8:5 spec.destination.nme: unknown field `nme`; did you mean `name`?",
            "rules.yaml:13:5 spec.route[1].wieght: unknown field `wieght`; did you mean `weight`?",
            "rules.yaml:14:3 spec.precedence: invalid type: string \"high\", expected i32",
        ]
    );
}
