//! The console at `/ui` over HTTP (its pages in a real browser are
//! pilot-system-tests' tests/console.rs): behind the REST port's tokens
//! (none: 401; a read-only token: the pages; an xDS token: refused, as for
//! the rest of the REST API), only `GET`, a strict Content-Security-Policy
//! on every answer, everything from an object escaped, 404 pages for what
//! is not there, and no console with `--no-ui`.

use pilot_test_support::Discovery;
use pilot_test_support::http::{Answer, request};

const RW: &str = "console-rw-token-0123456789abcdef";
const RO: &str = "console-ro-token-0123456789abcdef";
const XDS: &str = "console-xds-token-0123456789abcdef";

/// A rule whose header match is markup: the console must show it as text.
const RULE: &str = r#"{"apiVersion": "config.istio.io/v1alpha2", "kind": "RouteRule",
  "metadata": {"name": "reviews-markup", "namespace": "default"},
  "spec": {"destination": {"name": "reviews"}, "precedence": 2,
    "match": {"request": {"headers": {"x-user": {"exact": "<img src=x onerror=alert(1)>\"'&"}}}},
    "route": [{"labels": {"version": "v1"}}]}}"#;

fn call(server: &Discovery, method: &str, path: &str, token: Option<&str>, body: &str) -> Answer {
    let authorization = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(value) = &authorization {
        headers.push(("authorization", value.as_str()));
    }
    request(
        ([127, 0, 0, 1], server.port).into(),
        method,
        path,
        &headers,
        body.as_bytes(),
    )
    .expect("an answer")
}

fn header<'a>(answer: &'a Answer, name: &str) -> Option<&'a str> {
    answer.head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

#[test]
fn the_console_is_behind_the_rest_tokens_and_escapes_what_objects_say() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        format!("{RW} rw admin\n{RO} ro viewer\n{XDS} xds agent\n"),
    )
    .unwrap();
    let server = Discovery::start(&["--token-file", tokens.to_str().unwrap()]);
    let created = call(
        &server,
        "POST",
        "/apis/config.istio.io/v1alpha2/namespaces/default/routerules",
        Some(RW),
        RULE,
    );
    assert_eq!(created.code, 201, "{}", created.text());

    // Without a token, or with an xDS one: refused, as the REST API is.
    for token in [None, Some(XDS)] {
        for path in [
            "/ui",
            "/ui/style.css",
            "/ui/objects/RouteRule/default/reviews-markup",
        ] {
            let answer = call(&server, "GET", path, token, "");
            assert!(
                matches!(answer.code, 401 | 403),
                "{path} with {token:?}: {}",
                answer.code
            );
        }
    }

    // A read-only token reads every page.
    let overview = call(&server, "GET", "/ui", Some(RO), "");
    assert_eq!(overview.code, 200, "{}", overview.text());
    assert!(header(&overview, "content-type").is_some_and(|v| v.starts_with("text/html")));
    let csp = header(&overview, "content-security-policy").unwrap_or_default();
    assert!(
        csp.contains("default-src 'none'") && !csp.contains("script-src"),
        "{csp}"
    );
    assert!(!overview.text().contains("<script"), "{}", overview.text());
    assert!(overview.text().contains("reviews-markup"), "{}", overview.text());
    let style = call(&server, "GET", "/ui/style.css", Some(RO), "");
    assert_eq!(style.code, 200);
    assert!(header(&style, "content-type").is_some_and(|v| v.starts_with("text/css")));

    // What the object says is shown as text, never as markup.
    let object = call(
        &server,
        "GET",
        "/ui/objects/RouteRule/default/reviews-markup",
        Some(RO),
        "",
    );
    assert_eq!(object.code, 200, "{}", object.text());
    let text = object.text();
    assert!(!text.contains("<img"), "{text}");
    assert!(text.contains("&lt;img src=x onerror=alert(1)&gt;"), "{text}");
    let service = call(
        &server,
        "GET",
        "/ui/services/reviews.default.svc.cluster.local",
        Some(RO),
        "",
    );
    assert_eq!(service.code, 200, "{}", service.text());
    assert!(!service.text().contains("<img"), "{}", service.text());
    assert!(
        service.text().contains("<svg class=\"routes\""),
        "{}",
        service.text()
    );

    // What is not there: a 404 page, still under the policy.
    for path in [
        "/ui/objects/RouteRule/default/nothing",
        "/ui/services/nothing.default.svc.cluster.local",
        "/ui/proxies/sidecar~10.0.0.1~nothing.default~default.svc.cluster.local",
        "/ui/elsewhere",
    ] {
        let answer = call(&server, "GET", path, Some(RO), "");
        assert_eq!(answer.code, 404, "{path}: {}", answer.text());
        assert!(header(&answer, "content-security-policy").is_some(), "{path}");
        assert!(answer.text().contains("Not found"), "{path}: {}", answer.text());
    }

    // Documented beside the server's other routes.
    let document = call(&server, "GET", "/openapi.json", Some(RO), "");
    let document: serde_json::Value = serde_json::from_slice(&document.body).expect("the OpenAPI document");
    for path in [
        "/ui",
        "/ui/objects/{kind}/{namespace}/{name}",
        "/ui/services/{host}",
        "/ui/proxies/{id}",
    ] {
        assert!(document["paths"].get(path).is_some(), "{path} is not documented");
    }

    // Read-only: nothing but GET (and HEAD).
    let posted = call(&server, "POST", "/ui", Some(RW), "");
    assert_eq!(posted.code, 405, "{}", posted.text());
    server.terminate();
}

#[test]
fn no_ui_turns_the_console_off() {
    let server = Discovery::start(&["--no-ui"]);
    let (code, _) = server.get("/ui");
    assert_eq!(code, 404);
    let (code, _) = server.get("/ui/style.css");
    assert_eq!(code, 404);
    // The rest of the server is as it was.
    let (code, _) = server.get("/debug/proxy-status");
    assert_eq!(code, 200);
    server.terminate();
    let server = Discovery::start(&[]);
    let (code, body) = server.get("/ui");
    assert_eq!(code, 200, "{body}");
    server.terminate();
}
