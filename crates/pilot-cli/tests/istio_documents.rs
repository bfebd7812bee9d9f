//! Files written for Istio's istioctl of the v1alpha1 era, read by
//! pilotctl as istioctl read them: any apiVersion of the routing kinds
//! (read as v1alpha2, with a warning naming the version used), fields by
//! their proto names (stored by their JSON names); the first istioctl's
//! `type:`/`name:`/`spec:` format named as such. The REST API still
//! serves only v1alpha2.

mod common;

use common::{Discovery, pilotctl};

const EARLIER: &str = "\
apiVersion: config.istio.io/v1alpha1
kind: RouteRule
metadata:
  name: reviews-retry
spec:
  destination:
    name: reviews
  http_req_retries:
    simple_retry:
      attempts: 3
      per_try_timeout: 2s
---
apiVersion: config.istio.io/v1beta1
kind: EgressRule
metadata:
  name: bar
spec:
  destination:
    service: '*-bar.foo.com'
  ports:
  - port: 80
    protocol: http
";

const FIRST_CLI: &str = "\
type: route-rule
name: reviews-default
spec:
  destination: reviews.default.svc.cluster.local
  precedence: 1
  route:
  - tags:
      version: v1
";

#[test]
fn earlier_versions_and_proto_names_are_read_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("istio.yaml");
    std::fs::write(&file, EARLIER).unwrap();
    let path = file.to_str().unwrap();
    let validated = pilotctl(None, &["validate", "-f", path], &[], None);
    assert_eq!(validated.code, 0, "{validated:?}");
    let warnings: Vec<&str> = validated.stderr.lines().collect();
    assert_eq!(warnings.len(), 2, "{validated:?}");
    assert!(
        warnings[0].starts_with(&format!(
            "warning: {path}:1:1 apiVersion: config.istio.io/v1alpha1 read as config.istio.io/v1alpha2"
        )),
        "{validated:?}"
    );
    assert!(
        warnings[1].starts_with(&format!(
            "warning: {path}:13:1 apiVersion: config.istio.io/v1beta1 read as config.istio.io/v1alpha2"
        )),
        "{validated:?}"
    );

    let server = Discovery::start(&[]);
    let applied = pilotctl(Some(&server.url), &["apply", "-f", path], &[], None);
    assert_eq!(applied.code, 0, "{applied:?}");
    let (code, body) =
        server.get("/apis/config.istio.io/v1alpha2/namespaces/default/routerules/reviews-retry");
    assert_eq!(code, 200, "{body}");
    let stored: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(stored["apiVersion"], "config.istio.io/v1alpha2");
    assert_eq!(
        stored["spec"]["httpReqRetries"],
        serde_json::json!({"simpleRetry": {"attempts": 3, "perTryTimeout": "2s"}}),
        "{body}"
    );
    let (code, _) = server.get("/apis/config.istio.io/v1alpha2/namespaces/default/egressrules/bar");
    assert_eq!(code, 200);
    // The REST API serves v1alpha2 only.
    let (code, _) = server.get("/apis/config.istio.io/v1alpha1/namespaces/default/routerules/reviews-retry");
    assert_eq!(code, 404);
    let posted = pilot_test_support::http::request(
        ([127, 0, 0, 1], server.port).into(),
        "POST",
        "/apis/config.istio.io/v1alpha2/namespaces/default/routerules",
        &[("content-type", "application/json")],
        serde_json::json!({
            "apiVersion": "config.istio.io/v1alpha1",
            "kind": "RouteRule",
            "metadata": {"name": "posted", "namespace": "default"},
            "spec": {"destination": {"name": "reviews"}},
        })
        .to_string()
        .as_bytes(),
    )
    .unwrap();
    assert!(posted.code >= 400, "{}", posted.text());
    assert!(posted.text().contains("v1alpha1"), "{}", posted.text());
}

#[test]
fn the_first_istioctl_format_is_one_clear_error() {
    let run = pilotctl(None, &["validate", "-f", "-"], &[], Some(FIRST_CLI));
    assert_eq!(run.code, 1, "{run:?}");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{run:?}");
    assert!(
        lines[0].starts_with("<stdin>:1:1 type: `type: route-rule` with `name` and `spec` is the document format of Istio's first istioctl (0.1)"),
        "{run:?}"
    );
    assert!(
        lines[0].contains("`kind: RouteRule`, `metadata: {name: reviews-default}`"),
        "{run:?}"
    );
}
