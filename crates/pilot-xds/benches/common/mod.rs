//! Shared by the benches (this crate's, and by path pilot-ads's and
//! pilot-server's): the version-split rule they write.

use pilot_api::istio::{DestinationWeight, IstioService, RouteRule};
use pilot_model::Config;

/// A RouteRule named `name` sending `v1` percent of `service`'s traffic to
/// version v1 and the rest to v2.
pub(crate) fn split_rule(service: &str, name: &str, v1: i32) -> Config<RouteRule> {
    Config::new(
        "default",
        name,
        RouteRule {
            destination: Some(IstioService {
                name: service.to_string(),
                ..Default::default()
            }),
            route: [("v1", v1), ("v2", 100 - v1)]
                .iter()
                .map(|(version, weight)| DestinationWeight {
                    labels: [("version".to_string(), version.to_string())].into(),
                    weight: Some(*weight),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
    )
}
