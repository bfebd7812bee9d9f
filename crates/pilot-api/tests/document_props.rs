//! Properties of the document reader: generated valid rules survive a round
//! trip through YAML; arbitrary input never panics.

use std::collections::BTreeMap;

use pilot_api::istio::{
    self, Abort, DestinationWeight, HttpFaultInjection, HttpTimeout, IstioService, MatchCondition,
    MatchRequest, RouteRule, SimpleTimeoutPolicy, StringMatch,
};
use pilot_api::primitives::Duration;
use pilot_model::{Config, document};
use proptest::prelude::*;

fn label() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,8}[a-z0-9]"
}

/// Weights for `n` routes that sum to 100.
fn weights(n: usize) -> impl Strategy<Value = Vec<i32>> {
    proptest::collection::vec(0..=100i32, n - 1).prop_map(move |cuts| {
        let mut cuts: Vec<i32> = cuts;
        cuts.sort();
        let mut weights = Vec::new();
        let mut previous = 0;
        for cut in cuts.into_iter().chain([100]) {
            weights.push(cut - previous);
            previous = cut;
        }
        weights
    })
}

fn route_rule() -> impl Strategy<Value = RouteRule> {
    let routes = (1usize..4).prop_flat_map(|n| (weights(n), proptest::collection::vec(label(), n)));
    (
        label(),
        0..10i32,
        routes,
        proptest::option::of(1u64..600_000),
        proptest::option::of((0.0..=100.0f64, 200..=599i32)),
        proptest::option::of(("[a-z][a-z0-9-]{0,10}", "[ -~]{1,20}")),
    )
        .prop_map(
            |(service, precedence, (weights, versions), timeout, abort, header)| RouteRule {
                destination: Some(IstioService {
                    name: service,
                    ..Default::default()
                }),
                precedence,
                route: weights
                    .into_iter()
                    .zip(versions)
                    .map(|(weight, version)| DestinationWeight {
                        labels: BTreeMap::from([("version".to_string(), version)]),
                        weight: Some(weight),
                        ..Default::default()
                    })
                    .collect(),
                http_req_timeout: timeout.map(|ms| HttpTimeout {
                    simple_timeout: Some(SimpleTimeoutPolicy {
                        timeout: Some(Duration::from_millis(ms)),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                http_fault: abort.map(|(percent, status)| HttpFaultInjection {
                    abort: Some(Abort {
                        percent,
                        http_status: Some(status),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                match_condition: header.map(|(name, value)| MatchCondition {
                    request: Some(MatchRequest {
                        headers: BTreeMap::from([(
                            name,
                            StringMatch {
                                exact: Some(value),
                                ..Default::default()
                            },
                        )]),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn valid_rules_round_trip_through_yaml(rules in proptest::collection::vec(route_rule(), 1..4)) {
        let registry = istio::registry();
        let objects: Vec<_> = rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                let mut config = Config::new("default", format!("rule-{i}"), rule.clone()).to_dyn().unwrap();
                config.meta.labels.insert("app".into(), "reviews".into());
                registry.prepare(config).unwrap()
            })
            .collect();
        let yaml = document::to_yaml(&objects);
        let parsed = document::parse("generated.yaml", &yaml, &registry);
        prop_assert!(parsed.is_ok(), "{}\n{}", parsed.unwrap_err(), yaml);
        let parsed = parsed.unwrap();
        prop_assert_eq!(&parsed, &objects);
        for (object, rule) in parsed.iter().zip(&rules) {
            let typed = Config::<RouteRule>::from_dyn(object).unwrap();
            prop_assert_eq!(&typed.spec, rule);
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in "[-:{}\\[\\]#&*!|>'\"%@ ,.?a-z0-9\n\t]{0,300}") {
        let _ = document::parse("fuzz.yaml", &text, &istio::registry());
    }

    #[test]
    fn mangled_documents_never_panic(cut in 0usize..400, insert in "[-:{}\\[\\]&*!|>'\"\n ]{0,5}") {
        let good = include_str!("../../../examples/bookinfo/route-rule-ratings-test-abort.yaml");
        let cut = cut.min(good.len());
        let cut = (0..=cut).rev().find(|i| good.is_char_boundary(*i)).unwrap_or(0);
        let text = format!("{}{}{}", &good[..cut], insert, &good[cut..]);
        let _ = document::parse("mangled.yaml", &text, &istio::registry());
    }
}
