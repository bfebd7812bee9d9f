//! The security.istio.io/v1 kinds over the REST API: a PeerAuthentication
//! and an AuthorizationPolicy are stored and read back; an invalid policy
//! is refused with its field paths, and the store stays unchanged.

mod common;

use common::TestServer;
use serde_json::json;

const BASE: &str = "/apis/security.istio.io/v1/namespaces/default";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_authentication_and_authorization_policy_are_served_and_validated() {
    let server = TestServer::start(&[]).await;
    let strict = json!({
        "apiVersion": "security.istio.io/v1",
        "kind": "PeerAuthentication",
        "metadata": {"name": "default", "namespace": "default"},
        "spec": {"mtls": {"mode": "STRICT"}},
    });
    let (code, created) = server.json("POST", &format!("{BASE}/peerauthentications"), Some(&strict));
    assert_eq!(code, 201, "{created}");
    let (code, read) = server.json("GET", &format!("{BASE}/peerauthentications/default"), None);
    assert_eq!(code, 200, "{read}");
    assert_eq!(read["spec"]["mtls"]["mode"], "STRICT");

    let policy = json!({
        "apiVersion": "security.istio.io/v1",
        "kind": "AuthorizationPolicy",
        "metadata": {"name": "reviews-viewer", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "reviews"}},
            "action": "ALLOW",
            "rules": [{
                "from": [{"source": {"principals": ["cluster.local/ns/default/sa/bookinfo-productpage"]}}],
                "to": [{"operation": {"methods": ["GET"], "paths": ["/reviews/*"]}}],
            }],
        },
    });
    let (code, created) = server.json("POST", &format!("{BASE}/authorizationpolicies"), Some(&policy));
    assert_eq!(code, 201, "{created}");

    let mut bad = policy.clone();
    bad["metadata"]["name"] = json!("bad");
    bad["spec"]["rules"][0]["to"][0]["operation"]["ports"] = json!(["http"]);
    bad["spec"]["rules"][0]["when"] = json!([{"key": "source.color", "values": ["blue"]}]);
    let (code, status) = server.json("POST", &format!("{BASE}/authorizationpolicies"), Some(&bad));
    assert_eq!(code, 422, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("spec.rules[0].to[0].operation.ports[0]"),
        "{message}"
    );
    assert!(message.contains("spec.rules[0].when[0].key"), "{message}");
    let (code, _) = server.json("GET", &format!("{BASE}/authorizationpolicies/bad"), None);
    assert_eq!(code, 404, "a refused write leaves nothing");
    server.stop().await;
}
