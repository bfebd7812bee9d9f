//! `pilotctl analyze`: offline on files, and against a real pilot-discovery
//! with its configuration and service registry.

mod common;

use common::{Discovery, pilotctl};

#[test]
fn offline_on_bookinfo_finds_the_shadowed_rule_at_its_line() {
    let run = pilotctl(None, &["analyze", "-f", "examples/bookinfo/"], &[], None);
    assert_eq!(run.code, 0, "warnings do not fail by default: {run:?}");
    assert!(
        run.stdout.lines().any(|l| l.starts_with(
            "examples/bookinfo/route-rule-reviews-timeout.yaml:10:3: warning PLT0104 RouteRule default/reviews-timeout spec.precedence: never reached: RouteRule default/reviews-default"
        )),
        "{run:?}"
    );
    assert!(run.stdout.contains("0 errors, 1 warning"), "{run:?}");
    let strict = pilotctl(
        None,
        &["analyze", "-f", "examples/bookinfo/", "--fail-on", "warning"],
        &[],
        None,
    );
    assert_eq!(strict.code, 1, "{strict:?}");
    // validate prints the same finding as a warning and succeeds.
    let validate = pilotctl(None, &["validate", "-f", "examples/bookinfo/"], &[], None);
    assert_eq!(validate.code, 0, "{validate:?}");
    assert!(validate.stdout.contains("warning PLT0104"), "{validate:?}");
}

#[test]
fn against_the_server_a_route_to_a_version_without_instances_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let services = dir.path().join("services.yaml");
    // reviews has no v3: reviews-test-v3 sends jason's requests nowhere.
    std::fs::write(
        &services,
        "services:\n\
         - hostname: reviews.default.svc.cluster.local\n  ports: [{name: http, port: 9080, protocol: HTTP}]\n  instances:\n  \
         - {address: 127.0.0.1, port: 20001, labels: {version: v1}}\n  - {address: 127.0.0.1, port: 20002, labels: {version: v2}}\n\
         - hostname: ratings.default.svc.cluster.local\n  ports: [{name: http, port: 9080, protocol: HTTP}]\n  instances:\n  \
         - {address: 127.0.0.1, port: 20003, labels: {version: v1}}\n",
    )
    .unwrap();
    let server = Discovery::start(&["--services", services.to_str().unwrap()]);
    let url = Some(server.url.as_str());
    let applied = pilotctl(url, &["apply", "-f", "examples/bookinfo/"], &[], None);
    assert_eq!(applied.code, 0, "{applied:?}");

    let run = pilotctl(url, &["analyze"], &[], None);
    assert_eq!(run.code, 1, "an error fails: {run:?}");
    for expected in [
        "error PLT0102 RouteRule default/reviews-test-v3 spec.route[0].labels: 100% of the traffic goes to the subset {version=v3} of reviews.default.svc.cluster.local, which has no instances",
        "error PLT0101 RouteRule default/details-default spec.destination: destination service details.default.svc.cluster.local does not exist in the service registry",
        "error PLT0101 IngressRule default/bookinfo-gateway spec.destination: destination service productpage.default.svc.cluster.local does not exist",
        "warning PLT0104 RouteRule default/reviews-timeout spec.precedence: never reached",
    ] {
        assert!(
            run.stdout.lines().any(|l| l.starts_with(expected)),
            "no line starting {expected:?} in {run:?}"
        );
    }
    assert!(run.stdout.contains("with the service registry"), "{run:?}");
    // A file given with --server is analyzed over the server's objects:
    // reviews-timeout, first and only for one user, shadows nothing and is
    // reachable.
    let fixed = dir.path().join("fixed.yaml");
    let original = std::fs::read_to_string(
        common::workspace().join("examples/bookinfo/route-rule-reviews-timeout.yaml"),
    )
    .unwrap();
    std::fs::write(
        &fixed,
        original.replace(
            "precedence: 1",
            "precedence: 2\n  match: {request: {headers: {end-user: {exact: tester}}}}",
        ),
    )
    .unwrap();
    let run = pilotctl(
        url,
        &["analyze", "-f", fixed.to_str().unwrap(), "--fail-on", "never"],
        &[],
        None,
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stdout.contains("PLT0104"), "{run:?}");
    assert!(run.stdout.contains("PLT0102"), "{run:?}");
    server.terminate();
}

#[test]
fn offline_peer_authentication_findings_name_the_line_and_the_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mtls.yaml");
    std::fs::write(
        &file,
        "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: mesh, namespace: istio-system}\n\
         spec: {mtls: {mode: DISABLE}}\n---\n\
         apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: mesh-again, namespace: istio-system}\n\
         spec: {mtls: {mode: STRICT}}\n---\n\
         apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: reviews, namespace: default}\n\
         spec:\n  host: reviews\n  trafficPolicy:\n    tls: {mode: ISTIO_MUTUAL}\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let run = pilotctl(None, &["analyze", "-f", path], &[], None);
    assert_eq!(run.code, 1, "an error fails: {run:?}");
    for expected in [
        format!(
            "{path}:17:11: error PLT0305 DestinationRule default/reviews spec.trafficPolicy.tls.mode: requests to reviews.default.svc.cluster.local fail: the client sends mutual TLS, and the server expects plaintext (PeerAuthentication DISABLE for its workloads in namespace default)"
        ),
        format!(
            "{path}:8:12: warning PLT0304 PeerAuthentication istio-system/mesh-again metadata.name: ignored for the mesh: PeerAuthentication istio-system/mesh applies there too"
        ),
    ] {
        assert!(
            run.stdout.lines().any(|l| l.starts_with(&expected)),
            "no line starting {expected:?} in {run:?}"
        );
    }
}

#[test]
fn offline_a_custom_provider_absent_from_the_mesh_config_is_an_error_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("custom.yaml");
    std::fs::write(
        &file,
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: ext, namespace: default}\n\
         spec:\n  action: CUSTOM\n  provider:\n    name: opa\n  rules: [{}]\n---\n\
         apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: known, namespace: default}\n\
         spec:\n  action: CUSTOM\n  provider:\n    name: authz\n  rules: [{}]\n",
    )
    .unwrap();
    let mesh = dir.path().join("mesh.yaml");
    std::fs::write(
        &mesh,
        "extensionProviders:\n- name: authz\n  envoyExtAuthzGrpc: {service: authz.foo.svc.cluster.local, port: 9000}\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let run = pilotctl(
        None,
        &["analyze", "-f", path, "--mesh-config", mesh.to_str().unwrap()],
        &[],
        None,
    );
    assert_eq!(run.code, 1, "an error fails: {run:?}");
    let expected = format!(
        "{path}:7:5: error PLT0312 AuthorizationPolicy default/ext spec.provider.name: extension provider \"opa\" is not in the mesh config's extensionProviders (it has authz): every request this policy's rules match is denied"
    );
    assert!(
        run.stdout.lines().any(|l| l == expected),
        "no line {expected:?} in {run:?}"
    );
    assert!(!run.stdout.contains("default/known"), "{run:?}");
    // Without the mesh config the check is not made.
    let run = pilotctl(None, &["analyze", "-f", path], &[], None);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stdout.contains("PLT0312"), "{run:?}");
    // A bad mesh config is refused naming its field.
    std::fs::write(
        &mesh,
        "extensionProviders:\n- name: authz\n  envoyExtAuthzGrpc: {service: authz, port: 0}\n",
    )
    .unwrap();
    let run = pilotctl(
        None,
        &["analyze", "-f", path, "--mesh-config", mesh.to_str().unwrap()],
        &[],
        None,
    );
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stderr
            .contains("extensionProviders[0].envoyExtAuthzGrpc.port"),
        "{run:?}"
    );
}

/// The issue's "tried as a new user" cases: a VirtualService bound only to
/// a Gateway that does not exist, and one whose second HTTP route follows
/// a catch-all. Both are accepted by the server; analyze reports both,
/// offline, with a services file and against the server.
const NO_EFFECT: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: bookinfo, namespace: default}
spec:
  hosts: [bookinfo.example.com]
  gateways: [bookinfo-gateway]
  http:
  - route: [{destination: {host: productpage}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
  - name: jason
    match: [{headers: {end-user: {exact: jason}}}]
    route: [{destination: {host: reviews}}]
"#;

/// NO_EFFECT fixed: the gateway defined, the catch-all last.
const FIXED: &str = r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: bookinfo-gateway, namespace: default}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [bookinfo.example.com]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - name: jason
    match: [{headers: {end-user: {exact: jason}}}]
    route: [{destination: {host: reviews}}]
  - route: [{destination: {host: reviews}}]
"#;

#[test]
fn a_missing_gateway_and_a_route_after_a_catch_all_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("no-effect.yaml");
    std::fs::write(&file, NO_EFFECT).unwrap();
    let path = file.to_str().unwrap();
    let gateway = format!(
        "{path}:6:14: error PLT0210 VirtualService default/bookinfo spec.gateways[0]: bound to the gateway default/bookinfo-gateway, which does not exist: this VirtualService applies nowhere"
    );
    let route = format!(
        "{path}:17:5: warning PLT0211 VirtualService default/reviews spec.http[1]: never matches: the earlier route spec.http[0] matches every request this route matches first"
    );
    let run = pilotctl(None, &["analyze", "-f", path], &[], None);
    assert_eq!(run.code, 1, "the missing gateway is an error: {run:?}");
    for expected in [&gateway, &route] {
        assert!(
            run.stdout.lines().any(|l| l.starts_with(expected.as_str())),
            "no line starting {expected:?} in {run:?}"
        );
    }
    assert!(run.stdout.contains("1 error, 1 warning"), "{run:?}");

    // With the registry: reviews and productpage are known, and
    // bookinfo's VirtualService is bound to a gateway (its host is the
    // gateway's business).
    let services = dir.path().join("services.yaml");
    std::fs::write(
        &services,
        "services:\n- hostname: reviews.default.svc.cluster.local\n  ports: [{name: http, port: 9080, protocol: HTTP}]\n  instances:\n  \
         - {address: 127.0.0.1, port: 20001, labels: {version: v1}}\n\
         - hostname: productpage.default.svc.cluster.local\n  ports: [{name: http, port: 9080, protocol: HTTP}]\n  instances:\n  \
         - {address: 127.0.0.1, port: 20002, labels: {version: v1}}\n",
    )
    .unwrap();
    let run = pilotctl(
        None,
        &["analyze", "-f", path, "--services", services.to_str().unwrap()],
        &[],
        None,
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.contains(" PLT0210 ") && run.stdout.contains(" PLT0211 "),
        "{run:?}"
    );
    assert!(!run.stdout.contains("PLT0212"), "{run:?}");
    assert!(run.stdout.contains("1 error, 1 warning"), "{run:?}");

    // The server accepts both, and analyze over its objects reports both.
    let server = Discovery::start(&["--services", services.to_str().unwrap()]);
    let url = Some(server.url.as_str());
    let applied = pilotctl(url, &["apply", "-f", path], &[], None);
    assert_eq!(applied.code, 0, "both are accepted: {applied:?}");
    let run = pilotctl(url, &["analyze"], &[], None);
    assert_eq!(run.code, 1, "{run:?}");
    for expected in [
        "error PLT0210 VirtualService default/bookinfo spec.gateways[0]: bound to the gateway default/bookinfo-gateway, which does not exist",
        "warning PLT0211 VirtualService default/reviews spec.http[1]: never matches",
    ] {
        assert!(
            run.stdout.lines().any(|l| l.starts_with(expected)),
            "no line starting {expected:?} in {run:?}"
        );
    }
    // The server writes the findings into the statuses: `pilotctl get`
    // tells these objects from ones no proxy has connected for yet.
    pilot_test_support::eventually("pilotctl get to count the findings", || {
        let table = pilotctl(url, &["get", "virtualservices"], &[], None);
        row(&table.stdout, "bookinfo").is_some_and(|r| r.contains(" 0/0 1 ERROR "))
            && row(&table.stdout, "reviews").is_some_and(|r| r.contains(" 0/0 1 WARNING "))
    });
    // Fixed: the gateway defined, the catch-all last.
    let fixed = dir.path().join("fixed.yaml");
    std::fs::write(&fixed, FIXED).unwrap();
    let applied = pilotctl(url, &["apply", "-f", fixed.to_str().unwrap()], &[], None);
    assert_eq!(applied.code, 0, "{applied:?}");
    let run = pilotctl(url, &["analyze"], &[], None);
    assert!(
        !run.stdout.contains("PLT0210") && !run.stdout.contains("PLT0211"),
        "{run:?}"
    );
    pilot_test_support::eventually("pilotctl get to show no findings once fixed", || {
        let table = pilotctl(url, &["get", "virtualservices"], &[], None);
        ["bookinfo", "reviews"].iter().all(|name| {
            row(&table.stdout, name).is_some_and(|r| {
                r.split_whitespace().nth(2) == Some("0/0") && !r.contains("ERROR") && !r.contains("WARNING")
            })
        })
    });
    server.terminate();
}

/// The row of `table` whose first column is `name`, its columns joined
/// by single spaces, with a space after the last.
fn row(table: &str, name: &str) -> Option<String> {
    table
        .lines()
        .find(|line| line.split_whitespace().next() == Some(name))
        .map(|line| format!("{} ", line.split_whitespace().collect::<Vec<_>>().join(" ")))
}

/// The Gateway API's own example, analyzed as a user would: the route
/// alone names a Gateway the files do not hold (an error at its line), and
/// with the Gateway's file beside it nothing is wrong.
#[test]
fn offline_a_gateway_api_route_without_its_gateway_is_an_error_at_its_line() {
    let Some(corpus) = pilot_test_support::corpus("gateway-api") else {
        return;
    };
    let route = corpus.join("gwapi_examples.standard.http-routing.foo-httproute.yaml");
    let gateway = corpus.join("gwapi_examples.standard.http-routing.gateway.yaml");
    let (route, gateway) = (route.to_str().unwrap(), gateway.to_str().unwrap());
    let run = pilotctl(None, &["analyze", "-f", route], &[], None);
    assert_eq!(run.code, 1, "the missing parent is an error: {run:?}");
    let expected = format!(
        "{route}:9:5: error PLT0401 HTTPRoute.gateway.networking.k8s.io default/foo-route spec.parentRefs[0]: no Gateway default/example-gateway exists"
    );
    assert!(
        run.stdout.lines().any(|l| l.starts_with(&expected)),
        "no line starting {expected:?} in {run:?}"
    );
    let run = pilotctl(None, &["analyze", "-f", route, "-f", gateway], &[], None);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("0 errors, 0 warnings"), "{run:?}");
}
