//! The security.istio.io kinds over REST: PeerAuthentication,
//! RequestAuthentication and AuthorizationPolicy are served at v1 and
//! v1beta1, listed by discovery
//! with their short names, described by OpenAPI, and a spec that is not an
//! object is refused with its field path.

mod common;

use common::TestServer;
use serde_json::{Value, json};

fn peer_authentication(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "security.istio.io/v1",
        "kind": "PeerAuthentication",
        "metadata": {"name": name},
        "spec": spec,
    })
}

const PATH: &str = "/apis/security.istio.io/v1/namespaces/default/peerauthentications";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_kinds_are_served() {
    let server = TestServer::start(&[]).await;

    let (code, created) = server.json(
        "POST",
        PATH,
        Some(&peer_authentication(
            "strict",
            json!({"mtls": {"mode": "STRICT"}}),
        )),
    );
    assert_eq!(code, 201, "{created}");
    let (code, got) = server.json(
        "GET",
        "/apis/security.istio.io/v1beta1/namespaces/default/peerauthentications/strict",
        None,
    );
    assert_eq!(code, 200, "{got}");
    assert_eq!(got["apiVersion"], "security.istio.io/v1beta1");
    assert_eq!(got["spec"]["mtls"]["mode"], "STRICT");

    let policy = json!({
        "apiVersion": "security.istio.io/v1",
        "kind": "AuthorizationPolicy",
        "metadata": {"name": "reviews"},
        "spec": {
            "selector": {"matchLabels": {"app": "reviews"}},
            "rules": [{"from": [{"source": {"principals": ["cluster.local/ns/default/sa/productpage"]}}]}],
        },
    });
    let (code, created) = server.json(
        "POST",
        "/apis/security.istio.io/v1/namespaces/default/authorizationpolicies",
        Some(&policy),
    );
    assert_eq!(code, 201, "{created}");

    let request_authentication = json!({
        "apiVersion": "security.istio.io/v1beta1",
        "kind": "RequestAuthentication",
        "metadata": {"name": "jwt"},
        "spec": {
            "selector": {"matchLabels": {"app": "reviews"}},
            "jwtRules": [{"issuer": "https://issuer.test", "jwksUri": "https://issuer.test/jwks.json"}],
        },
    });
    let (code, created) = server.json(
        "POST",
        "/apis/security.istio.io/v1beta1/namespaces/default/requestauthentications",
        Some(&request_authentication),
    );
    assert_eq!(code, 201, "{created}");
    let mut bad = request_authentication.clone();
    bad["metadata"]["name"] = json!("bad");
    bad["spec"]["jwtRules"][0]["jwksUri"] = json!("ftp://issuer.test/jwks.json");
    let (code, status) = server.json(
        "POST",
        "/apis/security.istio.io/v1/namespaces/default/requestauthentications",
        Some(&bad),
    );
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["details"]["causes"][0]["field"], "spec.jwtRules[0].jwksUri",
        "{status}"
    );

    let (code, resources) = server.json("GET", "/apis/security.istio.io/v1", None);
    assert_eq!(code, 200, "{resources}");
    let mut short: Vec<(String, String)> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["shortNames"][0].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    short.sort();
    assert_eq!(
        short,
        [
            ("authorizationpolicies", "ap"),
            ("peerauthentications", "pa"),
            ("requestauthentications", "ra")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let (code, document) = server.json("GET", "/openapi/v3/apis/security.istio.io/v1", None);
    assert_eq!(code, 200, "{document}");
    assert!(
        document["components"]["schemas"]
            .get("io.istio.security.v1.PeerAuthentication")
            .is_some(),
        "{document}"
    );

    // serde would read a struct from a list by position: refused, and the
    // store keeps what it had.
    for (name, spec, field) in [
        ("listed", json!([{"mode": "STRICT"}]), "spec"),
        ("nested", json!({"mtls": ["STRICT"]}), "spec.mtls"),
    ] {
        let (code, status) = server.json("POST", PATH, Some(&peer_authentication(name, spec)));
        assert_eq!(code, 422, "{status}");
        let causes = status["details"]["causes"].as_array().unwrap();
        assert_eq!(causes[0]["field"], field, "{status}");
        assert!(
            causes[0]["message"].as_str().unwrap().contains("not a list"),
            "{status}"
        );
    }
    let (code, list) = server.json("GET", PATH, None);
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");

    server.stop().await;
}
