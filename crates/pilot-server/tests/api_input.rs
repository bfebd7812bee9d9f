//! Malformed query parameters are 400 with a message, never taken for
//! something else.

mod common;

use common::{TestServer, rule, rules};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_versions_and_selectors_are_400() {
    let server = TestServer::start(&[]).await;
    let path = rules("default");
    let (code, _) = server.json("POST", &path, Some(&rule("r", "v1")));
    assert_eq!(code, 201);
    let (code, status) = server.json("DELETE", &format!("{path}/r?resourceVersion=abc"), None);
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"].as_str().unwrap().contains("\"abc\""),
        "{status}"
    );
    for selector in ["a=b=c", "a,,b"] {
        let (code, status) = server.json("GET", &format!("{path}?labelSelector={selector}"), None);
        assert_eq!(code, 400, "{selector}: {status}");
    }
    // Nothing was deleted by the refused request.
    let (code, _) = server.json("GET", &format!("{path}/r"), None);
    assert_eq!(code, 200);
    server.stop().await;
}
