//! The proxies the tests connect: their node ids, and waiting on one's
//! feedback as the server records it.

use std::time::Duration;

use pilot_ads::{ProxyStatus, XdsServer};
use pilot_test_support::PATIENCE;
use pilot_test_support::ads::sidecar_id;

/// The node id of a sidecar `client` at `ip` in `namespace`.
pub(crate) fn node_id(namespace: &str, ip: &str) -> String {
    sidecar_id("client", namespace, ip)
}

/// Waits until the feedback of the proxy `node_id` satisfies `check`;
/// returns it.
pub(crate) async fn wait_proxy(
    server: &XdsServer,
    node_id: &str,
    check: impl Fn(&ProxyStatus) -> bool,
) -> ProxyStatus {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let found = server.status().into_iter().find(|p| p.node_id == node_id);
        if let Some(status) = found.filter(|s| check(s)) {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{node_id}: {:?}",
            server.status()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
