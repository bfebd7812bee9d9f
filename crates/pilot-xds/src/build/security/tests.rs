//! Identities and the namespaces of hostnames.

use pilot_routing::RoutingConfigs;

use super::{MeshTls, namespace_of};

#[test]
fn identities_and_namespaces() {
    let model = RoutingConfigs::default().compile();
    let tls = MeshTls::new(model.peer_authentication(), super::DEFAULT_TRUST_DOMAIN);
    assert_eq!(
        tls.spiffe_id("default", "reviews"),
        "spiffe://cluster.local/ns/default/sa/reviews"
    );
    assert_eq!(namespace_of("reviews.default.svc.cluster.local"), "default");
    assert_eq!(namespace_of("reviews"), "");
}
