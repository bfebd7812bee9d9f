use std::time::{Duration, SystemTime};

use pilot_model::{DynConfig, document};

use super::super::{
    HttpAction, HttpRoute, Mirror, Redirect, Retries, Rewrite, RouteDestination, RoutingConfigs,
    RoutingModel, StickySession, StringMatch, WeightedDestination,
};

const ECHO: &str = "echo.mesh.svc.cluster.local";

fn objects(text: &str) -> Vec<DynConfig> {
    document::parse("routes.yaml", text, &pilot_api::default_registry()).unwrap()
}

fn configs(text: &str) -> RoutingConfigs {
    RoutingConfigs::from_configs(&objects(text)).unwrap()
}

fn compile(text: &str) -> RoutingModel {
    configs(text).compile()
}

/// The names of the routes, without the trailing ones answering 404 what
/// no rule matches.
fn names(routes: &[HttpRoute]) -> Vec<&str> {
    routes
        .iter()
        .map(|r| r.name.as_str())
        .filter(|name| *name != super::NO_MATCH)
        .collect()
}

fn to(host: &str, port: u16, weight: u32) -> WeightedDestination {
    let mut destination = RouteDestination::new(host, Default::default());
    destination.port = Some(port);
    WeightedDestination::new(destination, weight)
}

fn route(name: &str, namespace: &str, parent: &str, rules: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n  parentRefs: [{parent}]\n  rules:\n{rules}---\n"
    )
}

const TO_ECHO: &str = r#"{group: "", kind: Service, name: echo, namespace: mesh}"#;

#[test]
fn kinds_are_typed_by_their_qualified_id() {
    let text = route(
        "r",
        "mesh",
        TO_ECHO,
        "  - backendRefs: [{name: v1, port: 8080}]\n",
    );
    let objects = objects(&text);
    assert_eq!(objects[0].meta.kind, "HTTPRoute.gateway.networking.k8s.io");
    let configs = RoutingConfigs::from_configs(&objects).unwrap();
    assert_eq!(configs.http_routes.len(), 1);
    let reused = RoutingConfigs::from_configs_reusing(&objects, &configs).unwrap();
    assert_eq!(reused.http_routes.len(), 1);
}

#[test]
fn a_simple_route_forwards_every_request_of_the_service_to_its_backend() {
    let model = compile(&route(
        "simple",
        "mesh",
        TO_ECHO,
        "  - backendRefs: [{name: v1, port: 8080}]\n",
    ));
    let routes = model.http_routes(ECHO);
    assert_eq!(names(routes), ["mesh/simple/0"]);
    assert_eq!(
        routes[0].matches[0].uri,
        Some(StringMatch::PathPrefix("/".into()))
    );
    assert_eq!(routes[0].matches[0].port, None);
    assert_eq!(routes[0].matches[0].source_namespace, None);
    assert_eq!(
        routes[0].action,
        HttpAction::Route(vec![to("v1.mesh.svc.cluster.local", 8080, 1)])
    );
    assert!(!model.restricts_visibility());
}

#[test]
fn what_no_rule_matches_is_answered_404_on_the_ports_the_routes_apply_to() {
    let text = [
        route(
            "ported",
            "mesh",
            "{group: \"\", kind: Service, name: echo, port: 80}",
            "  - matches: [{path: {type: Exact, value: /a}}]\n    backendRefs: [{name: v1, port: 80}]\n",
        ),
        route(
            "also",
            "mesh",
            "{group: \"\", kind: Service, name: echo, port: 80}",
            "  - matches: [{path: {type: Exact, value: /b}}]\n    backendRefs: [{name: v1, port: 80}]\n",
        ),
    ]
    .concat();
    let model = compile(&text);
    let routes = model.http_routes(ECHO);
    let last = routes.last().unwrap();
    assert_eq!(routes.len(), 3, "one 404 for the port: {routes:?}");
    assert_eq!(last.name, super::NO_MATCH);
    assert_eq!(last.matches[0].port, Some(80));
    assert_eq!(last.matches[0].uri, None);
    let HttpAction::DirectResponse(response) = &last.action else {
        panic!("{last:?}")
    };
    assert_eq!(response.status, 404);
}

#[test]
fn a_route_attached_to_a_gateway_routes_nothing_for_the_mesh() {
    let model = compile(&route(
        "edge",
        "mesh",
        "{name: gw}",
        "  - backendRefs: [{name: echo, port: 80}]\n",
    ));
    assert_eq!(model.hosts().count(), 0);
}

#[test]
fn consumer_routes_apply_only_in_their_namespace_and_replace_producer_routes_there() {
    let text = [
        route(
            "producer",
            "mesh",
            "{group: \"\", kind: Service, name: echo}",
            "  - backendRefs: [{name: v1, port: 8080}]\n",
        ),
        route(
            "consumer",
            "client",
            TO_ECHO,
            "  - matches: [{path: {type: Exact, value: /only}}]\n    backendRefs: [{name: v2, namespace: mesh, port: 8080}]\n",
        ),
    ]
    .concat();
    let configs = configs(&text);
    assert!(
        configs.restricts_visibility(),
        "each namespace has a view of its own"
    );
    // The consumer's namespace sees its route alone: the producer's
    // catch-all does not take the other paths.
    let client = configs.visible_to("client").compile();
    let routes = client.http_routes(ECHO);
    assert_eq!(names(routes), ["client/consumer/0"]);
    assert_eq!(
        routes[0].action,
        HttpAction::Route(vec![to("v2.mesh.svc.cluster.local", 8080, 1)])
    );
    assert_eq!(routes[0].matches[0].source_namespace, None);
    // Every other namespace, the producer's included, sees the producer's.
    for namespace in ["mesh", "elsewhere"] {
        let view = configs.visible_to(namespace).compile();
        assert_eq!(names(view.http_routes(ECHO)), ["mesh/producer/0"], "{namespace}");
    }
    // The whole mesh's model keeps both, the consumer's first and
    // restricted to its namespace.
    let whole = configs.compile();
    let routes = whole.http_routes(ECHO);
    assert_eq!(names(routes), ["client/consumer/0", "mesh/producer/0"]);
    assert_eq!(routes[0].matches[0].source_namespace.as_deref(), Some("client"));
}

#[test]
fn a_consumer_route_of_one_service_leaves_the_producer_routes_of_another() {
    let text = [
        route(
            "producer",
            "mesh",
            "{group: \"\", kind: Service, name: other}",
            "  - backendRefs: [{name: other, port: 80}]\n",
        ),
        route(
            "consumer",
            "client",
            TO_ECHO,
            "  - backendRefs: [{name: echo, namespace: mesh, port: 80}]\n",
        ),
    ]
    .concat();
    let view = configs(&text).visible_to("client").compile();
    assert_eq!(names(view.http_routes(ECHO)), ["client/consumer/0"]);
    assert_eq!(
        names(view.http_routes("other.mesh.svc.cluster.local")),
        ["mesh/producer/0"]
    );
}

#[test]
fn a_parent_port_restricts_the_route_to_that_service_port() {
    let model = compile(&route(
        "ported",
        "mesh",
        "{group: \"\", kind: Service, name: echo, port: 80}",
        "  - backendRefs: [{name: echo, port: 80}]\n",
    ));
    assert_eq!(model.http_routes(ECHO)[0].matches[0].port, Some(80));
}

#[test]
fn matches_are_ordered_by_the_gateway_api_precedence_across_routes() {
    let text = [
        route(
            "b",
            "mesh",
            TO_ECHO,
            concat!(
                "  - name: prefix-short\n    matches: [{path: {type: PathPrefix, value: /a}}]\n    backendRefs: [{name: v1, port: 80}]\n",
                "  - name: prefix-long\n    matches: [{path: {type: PathPrefix, value: /a/b/}}]\n    backendRefs: [{name: v1, port: 80}]\n",
                "  - name: catch-all\n    backendRefs: [{name: v1, port: 80}]\n",
                "  - name: one-header\n    matches: [{headers: [{name: x, value: '1'}]}]\n    backendRefs: [{name: v1, port: 80}]\n",
            ),
        ),
        route(
            "a",
            "mesh",
            TO_ECHO,
            concat!(
                "  - name: exact\n    matches: [{path: {type: Exact, value: /a}}]\n    backendRefs: [{name: v1, port: 80}]\n",
                "  - name: two-headers\n    matches: [{headers: [{name: x, value: '1'}, {name: y, value: '2'}]}]\n    backendRefs: [{name: v1, port: 80}]\n",
                "  - name: method\n    matches: [{method: GET}]\n    backendRefs: [{name: v1, port: 80}]\n",
                "  - name: query\n    matches: [{headers: [{name: x, value: '1'}], queryParams: [{name: q, value: v}]}]\n    backendRefs: [{name: v1, port: 80}]\n",
                "  - name: regex\n    matches: [{path: {type: RegularExpression, value: /r.*}}]\n    backendRefs: [{name: v1, port: 80}]\n",
            ),
        ),
        route(
            "c-older",
            "mesh",
            TO_ECHO,
            "  - name: catch-all\n    backendRefs: [{name: v1, port: 80}]\n",
        ),
    ]
    .concat();
    let mut objects = objects(&text);
    let epoch = SystemTime::UNIX_EPOCH;
    for object in &mut objects {
        object.meta.creation_timestamp = Some(match object.meta.name.as_str() {
            "c-older" => epoch + Duration::from_secs(1),
            _ => epoch + Duration::from_secs(2),
        });
    }
    let model = RoutingConfigs::from_configs(&objects).unwrap().compile();
    assert_eq!(
        names(model.http_routes(ECHO)),
        [
            "mesh/a/exact",
            "mesh/a/regex",
            "mesh/b/prefix-long",
            "mesh/b/prefix-short",
            // Every path: a method first, then the most headers, then the
            // most query parameters, then the oldest route, then by name.
            "mesh/a/method",
            "mesh/a/two-headers",
            "mesh/a/query",
            "mesh/b/one-header",
            "mesh/c-older/catch-all",
            "mesh/b/catch-all",
        ]
    );
    let long = &model.http_routes(ECHO)[2];
    assert_eq!(long.matches[0].uri, Some(StringMatch::PathPrefix("/a/b".into())));
}

#[test]
fn each_match_of_a_rule_is_a_route_of_its_own() {
    let model = compile(&route(
        "m",
        "mesh",
        TO_ECHO,
        concat!(
            "  - matches: [{path: {type: PathPrefix, value: /}}, {headers: [{name: Version, value: one}]}]\n    backendRefs: [{name: v1, port: 8080}]\n",
            "  - matches: [{path: {type: PathPrefix, value: /v2}}, {headers: [{name: version, value: two}]}]\n    backendRefs: [{name: v2, port: 8080}]\n",
        ),
    ));
    let routes = model.http_routes(ECHO);
    // Both header matches take every path: equal, the first rule's first.
    assert_eq!(names(routes), ["mesh/m/1", "mesh/m/0", "mesh/m/1", "mesh/m/0"]);
    assert_eq!(
        routes[0].matches[0].uri,
        Some(StringMatch::PathPrefix("/v2".into()))
    );
    assert_eq!(
        routes[1].matches[0].headers.get("version"),
        Some(&StringMatch::Exact("one".into()))
    );
    assert_eq!(
        routes[2].matches[0].headers.get("version"),
        Some(&StringMatch::Exact("two".into()))
    );
    assert!(routes[3].matches[0].headers.is_empty());
}

#[test]
fn headers_query_parameters_and_methods_are_matched() {
    let model = compile(&route(
        "m",
        "mesh",
        TO_ECHO,
        "  - matches: [{method: POST, headers: [{name: X-A, value: a}, {name: x-b, type: RegularExpression, value: 'b+'}], queryParams: [{name: animal, value: whale}, {name: Color, type: RegularExpression, value: 'bl.*'}]}]\n    backendRefs: [{name: v1, port: 80}]\n",
    ));
    let m = &model.http_routes(ECHO)[0].matches[0];
    assert_eq!(m.method, Some(StringMatch::Exact("POST".into())));
    assert_eq!(m.headers.get("x-a"), Some(&StringMatch::Exact("a".into())));
    assert_eq!(m.headers.get("x-b"), Some(&StringMatch::Regex("b+".into())));
    assert_eq!(
        m.query_params.get("animal"),
        Some(&StringMatch::Exact("whale".into()))
    );
    assert_eq!(
        m.query_params.get("Color"),
        Some(&StringMatch::Regex("bl.*".into()))
    );
}

#[test]
fn weights_split_and_a_rule_without_a_backend_to_take_traffic_answers_500() {
    let model = compile(&route(
        "w",
        "mesh",
        TO_ECHO,
        concat!(
            "  - name: split\n    matches: [{path: {type: Exact, value: /split}}]\n    backendRefs: [{name: v1, port: 8080, weight: 70}, {name: v2, port: 8080, weight: 30}, {name: v3, port: 8080, weight: 0}]\n",
            "  - name: zero\n    matches: [{path: {type: Exact, value: /zero}}]\n    backendRefs: [{name: v1, port: 8080, weight: 0}]\n",
            "  - name: none\n    matches: [{path: {type: Exact, value: /none}}]\n",
            "  - name: unknown-kind\n    matches: [{path: {type: Exact, value: /unknown}}]\n    backendRefs: [{group: example.com, kind: Bucket, name: b}]\n",
            "  - name: partly\n    matches: [{path: {type: Exact, value: /partly}}]\n    backendRefs: [{name: v1, port: 8080, weight: 2}, {group: example.com, kind: Bucket, name: b, weight: 1}]\n",
        ),
    ));
    let routes = model.http_routes(ECHO);
    let action = |name: &str| {
        &routes
            .iter()
            .find(|r| r.name == format!("mesh/w/{name}"))
            .unwrap()
            .action
    };
    assert_eq!(
        action("split"),
        &HttpAction::Route(vec![
            to("v1.mesh.svc.cluster.local", 8080, 70),
            to("v2.mesh.svc.cluster.local", 8080, 30)
        ])
    );
    // An invalid backend's share goes to no service: answered 500.
    let nowhere = |weight| WeightedDestination::new(RouteDestination::new("", Default::default()), weight);
    assert_eq!(
        action("partly"),
        &HttpAction::Route(vec![to("v1.mesh.svc.cluster.local", 8080, 2), nowhere(1)])
    );
    assert_eq!(routes[0].no_cluster_status, Some(500));
    for name in ["zero", "none", "unknown-kind"] {
        let HttpAction::DirectResponse(response) = action(name) else {
            panic!("{name}: {:?}", action(name))
        };
        assert_eq!(response.status, 500, "{name}");
    }
}

#[test]
fn header_modifiers_set_add_and_remove() {
    let model = compile(&route(
        "h",
        "mesh",
        TO_ECHO,
        "  - filters:\n    - type: RequestHeaderModifier\n      requestHeaderModifier: {set: [{name: X-Set, value: s}], add: [{name: X-Add, value: a}], remove: [X-Gone]}\n    - type: ResponseHeaderModifier\n      responseHeaderModifier: {set: [{name: X-Header-Set, value: set}]}\n    backendRefs: [{name: v1, port: 80}]\n",
    ));
    let headers = &model.http_routes(ECHO)[0].headers;
    assert_eq!(headers.request.set, [("x-set".to_string(), "s".to_string())]);
    assert_eq!(headers.request.add, [("x-add".to_string(), "a".to_string())]);
    assert_eq!(headers.request.remove, ["x-gone"]);
    assert_eq!(
        headers.response.set,
        [("x-header-set".to_string(), "set".to_string())]
    );
}

#[test]
fn a_backends_own_header_modifiers_apply_to_what_is_sent_to_it() {
    let model = compile(&route(
        "b",
        "mesh",
        TO_ECHO,
        concat!(
            "  - name: own\n    matches: [{path: {type: Exact, value: /own}}]\n    backendRefs:\n    - name: v1\n      port: 80\n      filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-To, value: v1}], remove: [X-Gone]}}, {type: ResponseHeaderModifier, responseHeaderModifier: {add: [{name: X-From, value: v1}]}}]\n    - {name: v2, port: 80}\n",
            "  - name: mirrored\n    matches: [{path: {type: Exact, value: /mirrored}}]\n    backendRefs:\n    - name: v1\n      port: 80\n      filters: [{type: RequestMirror, requestMirror: {backendRef: {name: copy, port: 80}}}]\n",
            "  - name: redirected\n    matches: [{path: {type: Exact, value: /redirected}}]\n    backendRefs:\n    - name: v1\n      port: 80\n      filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplaceFullPath, replaceFullPath: /elsewhere}}}]\n",
            "  - name: rewritten\n    matches: [{path: {type: PathPrefix, value: /rewritten}}]\n    backendRefs:\n    - name: v1\n      port: 80\n      filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}}}]\n",
            "  - name: redirected-among-two\n    matches: [{path: {type: Exact, value: /two}}]\n    backendRefs:\n    - name: v1\n      port: 80\n      filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplaceFullPath, replaceFullPath: /elsewhere}}}]\n    - {name: v2, port: 80}\n",
        ),
    ));
    let routes = model.http_routes(ECHO);
    let route = |name: &str| {
        routes
            .iter()
            .find(|r| r.name == format!("mesh/b/{name}"))
            .unwrap()
    };
    let HttpAction::Route(targets) = &route("own").action else {
        panic!("{:?}", route("own"))
    };
    assert_eq!(
        targets[0].headers.request.set,
        [("x-to".to_string(), "v1".to_string())]
    );
    assert_eq!(targets[0].headers.request.remove, ["x-gone"]);
    assert_eq!(
        targets[0].headers.response.add,
        [("x-from".to_string(), "v1".to_string())]
    );
    assert!(targets[1].headers.is_empty());
    assert!(
        route("own").headers.is_empty(),
        "the route's own headers are untouched"
    );
    // A filter a backend cannot have done for it: no traffic to it.
    let HttpAction::DirectResponse(response) = &route("mirrored").action else {
        panic!("{:?}", route("mirrored"))
    };
    assert_eq!(response.status, 500);
    // A redirect or rewrite of a rule's only backend is the rule's.
    let HttpAction::Redirect(redirect) = &route("redirected").action else {
        panic!("{:?}", route("redirected"))
    };
    assert_eq!(redirect.uri.as_deref(), Some("/elsewhere"));
    assert!(route("rewritten").rewrite.is_some(), "{:?}", route("rewritten"));
    assert!(matches!(route("rewritten").action, HttpAction::Route(_)));
    // Of one backend among two, it cannot be done: that backend takes no
    // traffic, the other its share.
    let HttpAction::Route(targets) = &route("redirected-among-two").action else {
        panic!("{:?}", route("redirected-among-two"))
    };
    let hosts: Vec<&str> = targets.iter().map(|t| t.destination.host.as_str()).collect();
    assert_eq!(hosts.len(), 2, "{targets:?}");
    assert!(hosts[0].is_empty(), "v1 takes no traffic: {hosts:?}");
    assert!(hosts[1].starts_with("v2."), "{hosts:?}");
}

#[test]
fn redirects_carry_scheme_host_port_path_and_status() {
    let model = compile(&route(
        "r",
        "mesh",
        TO_ECHO,
        concat!(
            "  - name: prefix\n    matches: [{path: {type: PathPrefix, value: /original-prefix}}]\n    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /replacement-prefix}}}]\n",
            "  - name: full\n    matches: [{path: {type: PathPrefix, value: /full}}]\n    filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org, path: {type: ReplaceFullPath, replaceFullPath: /replacement}, statusCode: 301}}]\n",
            "  - name: scheme\n    matches: [{path: {type: PathPrefix, value: /scheme}}]\n    filters: [{type: RequestRedirect, requestRedirect: {scheme: https}}]\n",
            "  - name: port\n    matches: [{path: {type: PathPrefix, value: /port}}]\n    filters: [{type: RequestRedirect, requestRedirect: {port: 8083, statusCode: 308}}]\n",
        ),
    ));
    let routes = model.http_routes(ECHO);
    let redirect = |name: &str| {
        let route = routes
            .iter()
            .find(|r| r.name == format!("mesh/r/{name}"))
            .unwrap();
        let HttpAction::Redirect(redirect) = &route.action else {
            panic!("{name}: {:?}", route.action)
        };
        redirect.clone()
    };
    assert_eq!(
        redirect("prefix"),
        Redirect {
            prefix: Some("/replacement-prefix".into()),
            code: Some(302),
            ..Default::default()
        }
    );
    assert_eq!(
        redirect("full"),
        Redirect {
            uri: Some("/replacement".into()),
            authority: Some("example.org".into()),
            code: Some(301),
            ..Default::default()
        }
    );
    // A scheme without a port keeps the request's (a mesh request names
    // none): no `:443` in the location.
    assert_eq!(
        redirect("scheme"),
        Redirect {
            scheme: Some("https".into()),
            code: Some(302),
            ..Default::default()
        }
    );
    assert_eq!(
        redirect("port"),
        Redirect {
            port: Some(8083),
            code: Some(308),
            ..Default::default()
        }
    );
}

#[test]
fn url_rewrites_replace_the_host_and_the_full_path_or_its_matched_prefix() {
    let model = compile(&route(
        "u",
        "mesh",
        TO_ECHO,
        concat!(
            "  - name: prefix\n    matches: [{path: {type: PathPrefix, value: /prefix/one}}]\n    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /one/}}}]\n    backendRefs: [{name: v1, port: 80}]\n",
            "  - name: strip\n    matches: [{path: {type: PathPrefix, value: /strip}}]\n    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}]\n    backendRefs: [{name: v1, port: 80}]\n",
            "  - name: full\n    matches: [{path: {type: PathPrefix, value: /full}}]\n    filters: [{type: URLRewrite, urlRewrite: {hostname: one.example.org, path: {type: ReplaceFullPath, replaceFullPath: /one}}}]\n    backendRefs: [{name: v1, port: 80}]\n",
        ),
    ));
    let routes = model.http_routes(ECHO);
    let rewrite = |name: &str| {
        routes
            .iter()
            .find(|r| r.name == format!("mesh/u/{name}"))
            .unwrap()
            .rewrite
            .clone()
            .unwrap()
    };
    assert_eq!(
        rewrite("prefix"),
        Rewrite {
            uri_regex: Some(("^/prefix/one(/?)".into(), "/one\\1".into())),
            ..Default::default()
        }
    );
    assert_eq!(
        rewrite("strip"),
        Rewrite {
            uri_regex: Some(("^/strip/?".into(), "/".into())),
            ..Default::default()
        }
    );
    assert_eq!(
        rewrite("full"),
        Rewrite {
            authority: Some("one.example.org".into()),
            uri_regex: Some(("^/.*$".into(), "/one".into())),
            ..Default::default()
        }
    );
}

#[test]
fn mirrors_take_their_percent_or_fraction_and_timeouts_their_durations() {
    let model = compile(&route(
        "m",
        "mesh",
        TO_ECHO,
        concat!(
            "  - name: percent\n    matches: [{path: {type: Exact, value: /p}}]\n    filters: [{type: RequestMirror, requestMirror: {backendRef: {name: copy, port: 80}, percent: 20}}]\n    backendRefs: [{name: v1, port: 80}]\n    timeouts: {request: 10s, backendRequest: 500ms}\n",
            "  - name: fraction\n    matches: [{path: {type: Exact, value: /f}}]\n    filters: [{type: RequestMirror, requestMirror: {backendRef: {name: copy, namespace: other, port: 81}, fraction: {numerator: 1, denominator: 8}}}]\n    backendRefs: [{name: v1, port: 80}]\n    timeouts: {backendRequest: 1m}\n",
        ),
    ));
    let routes = model.http_routes(ECHO);
    let route = |name: &str| {
        routes
            .iter()
            .find(|r| r.name == format!("mesh/m/{name}"))
            .unwrap()
    };
    let mut copy = RouteDestination::new("copy.mesh.svc.cluster.local", Default::default());
    copy.port = Some(80);
    assert_eq!(
        route("percent").mirrors,
        [Mirror {
            destination: copy,
            percent: Some(20.0)
        }]
    );
    assert_eq!(route("percent").timeout, Some(Duration::from_secs(10)));
    assert_eq!(
        route("percent").retries,
        Some(Retries {
            attempts: 0,
            per_try_timeout: Some(Duration::from_millis(500)),
            ..Default::default()
        })
    );
    let mut other = RouteDestination::new("copy.other.svc.cluster.local", Default::default());
    other.port = Some(81);
    assert_eq!(
        route("fraction").mirrors,
        [Mirror {
            destination: other,
            percent: Some(12.5)
        }]
    );
    assert_eq!(route("fraction").timeout, Some(Duration::from_secs(60)));
    assert_eq!(route("fraction").retries, None);
}

#[test]
fn a_rules_retry_retries_its_codes_and_connection_errors() {
    let model = compile(&route(
        "r",
        "mesh",
        TO_ECHO,
        concat!(
            "  - name: codes\n    matches: [{path: {type: Exact, value: /c}}]\n    backendRefs: [{name: v1, port: 80}]\n    retry: {codes: [500, 503], attempts: 3, backoff: 100ms}\n",
            "  - name: plain\n    matches: [{path: {type: Exact, value: /p}}]\n    backendRefs: [{name: v1, port: 80}]\n    retry: {}\n    timeouts: {request: 1s, backendRequest: 200ms}\n",
            "  - name: per-try\n    matches: [{path: {type: Exact, value: /t}}]\n    backendRefs: [{name: v1, port: 80}]\n    retry: {attempts: 2}\n    timeouts: {backendRequest: 200ms}\n",
        ),
    ));
    let routes = model.http_routes(ECHO);
    let retries = |name: &str| {
        routes
            .iter()
            .find(|r| r.name == format!("mesh/r/{name}"))
            .and_then(|r| r.retries.clone())
            .unwrap()
    };
    let codes = retries("codes");
    assert_eq!(codes.attempts, 3);
    assert_eq!(codes.status_codes, [500, 503]);
    assert_eq!(codes.backoff, Some(Duration::from_millis(100)));
    assert_eq!(
        codes.retry_on.as_deref(),
        Some("connect-failure,refused-stream,reset,retriable-status-codes")
    );
    // No codes: connection errors only, one retry, the backend request
    // timeout each try's.
    let plain = retries("plain");
    assert_eq!(plain.attempts, 1);
    assert!(plain.status_codes.is_empty());
    assert_eq!(
        plain.retry_on.as_deref(),
        Some("connect-failure,refused-stream,reset")
    );
    assert_eq!(plain.per_try_timeout, Some(Duration::from_millis(200)));
    let timeout = |name: &str| {
        routes
            .iter()
            .find(|r| r.name == format!("mesh/r/{name}"))
            .and_then(|r| r.timeout)
    };
    assert_eq!(timeout("plain"), Some(Duration::from_secs(1)));
    // Retried with no request timeout: the backend request timeout bounds
    // each try, not the request (its tries are retried).
    let per_try = retries("per-try");
    assert_eq!(per_try.attempts, 2);
    assert_eq!(per_try.per_try_timeout, Some(Duration::from_millis(200)));
    assert_eq!(timeout("per-try"), None);
}

#[test]
fn unsupported_filters_answer_500() {
    let model = compile(&route(
        "x",
        "mesh",
        TO_ECHO,
        "  - filters: [{type: ExtensionRef, extensionRef: {group: example.com, kind: Filter, name: f}}]\n    backendRefs: [{name: v1, port: 80}]\n",
    ));
    let HttpAction::DirectResponse(response) = &model.http_routes(ECHO)[0].action else {
        panic!()
    };
    assert_eq!(response.status, 500);
}

#[test]
fn grpc_routes_match_methods_and_headers_and_split_by_weight() {
    let model = compile(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: g, namespace: mesh}
spec:
  parentRefs: [{group: "", kind: Service, name: echo}]
  rules:
  - name: service
    matches: [{method: {service: grpc.Echo}}]
    backendRefs: [{name: v1, port: 7070}]
  - name: exact
    matches: [{method: {service: grpc.Echo, method: Say}, headers: [{name: X-V, value: two}]}]
    filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-set, value: s}]}}]
    backendRefs: [{name: v1, port: 7070, weight: 1}, {name: v2, port: 7070, weight: 3}]
  - name: method
    matches: [{method: {method: Say}}]
    backendRefs: [{name: v1, port: 7070}]
  - name: regex
    matches: [{method: {type: RegularExpression, service: 'grpc\..*', method: 'S.*'}}]
    backendRefs: [{name: v1, port: 7070}]
  - name: all
    backendRefs: [{name: v1, port: 7070}]
"#,
    );
    let routes = model.http_routes(ECHO);
    assert_eq!(
        names(routes),
        [
            "mesh/g/exact",
            "mesh/g/service",
            "mesh/g/regex",
            "mesh/g/method",
            "mesh/g/all"
        ]
    );
    let uri = |i: usize| routes[i].matches[0].uri.clone();
    assert_eq!(uri(0), Some(StringMatch::Exact("/grpc.Echo/Say".into())));
    assert_eq!(uri(1), Some(StringMatch::Prefix("/grpc.Echo/".into())));
    assert_eq!(uri(2), Some(StringMatch::Regex("/grpc\\..*/S.*".into())));
    assert_eq!(uri(3), Some(StringMatch::Regex("/[^/]+/Say".into())));
    assert_eq!(uri(4), None);
    assert_eq!(
        routes[0].matches[0].headers.get("x-v"),
        Some(&StringMatch::Exact("two".into()))
    );
    assert_eq!(
        routes[0].headers.request.set,
        [("x-set".to_string(), "s".to_string())]
    );
    assert_eq!(
        routes[0].action,
        HttpAction::Route(vec![
            to("v1.mesh.svc.cluster.local", 7070, 1),
            to("v2.mesh.svc.cluster.local", 7070, 3)
        ])
    );
}

#[test]
fn a_changed_route_recompiles_its_hosts_incrementally() {
    let before_text = route("r", "mesh", TO_ECHO, "  - backendRefs: [{name: v1, port: 80}]\n");
    let after_text = route("r", "mesh", TO_ECHO, "  - backendRefs: [{name: v2, port: 80}]\n");
    let with_version = |text: &str, version: &str| {
        let mut objects = objects(text);
        objects[0].meta.resource_version = Some(version.into());
        objects
    };
    let previous = RoutingConfigs::from_configs(&with_version(&before_text, "1")).unwrap();
    let before = previous.compile();
    let now = RoutingConfigs::from_configs_reusing(&with_version(&after_text, "2"), &previous).unwrap();
    let recompiled = now.compile_from(&previous, &before);
    assert_eq!(recompiled.model, now.compile());
    let changed = recompiled.changed.expect("known by host");
    assert!(changed.contains(ECHO), "{changed:?}");
}

#[test]
fn a_cors_filter_is_the_routes_cors_policy() {
    let model = compile(&route(
        "c",
        "mesh",
        TO_ECHO,
        "  - filters: [{type: CORS, cors: {allowOrigins: ['https://www.example.com', 'https://*.example.org'], allowMethods: [GET, POST], allowHeaders: [x-a], exposeHeaders: [x-b], maxAge: 60, allowCredentials: true}}]\n    backendRefs: [{name: v1, port: 80}]\n",
    ));
    let cors = model.http_routes(ECHO)[0].cors.clone().expect("a CORS policy");
    assert_eq!(
        cors.allow_origins,
        [
            StringMatch::Exact("https://www.example.com".into()),
            StringMatch::Regex("https://.*\\.example\\.org".into()),
        ]
    );
    assert_eq!(cors.allow_methods, ["GET", "POST"]);
    assert_eq!(cors.allow_headers, ["x-a"]);
    assert_eq!(cors.expose_headers, ["x-b"]);
    assert_eq!(cors.max_age, Some(Duration::from_secs(60)));
    assert_eq!(cors.allow_credentials, Some(true));
}

#[test]
fn a_rules_session_persistence_keeps_its_sessions_by_cookie_or_header() {
    let model = compile(&route(
        "sticky",
        "mesh",
        TO_ECHO,
        "  - matches: [{path: {type: PathPrefix, value: /cart}}, {path: {type: RegularExpression, value: /c.*}}]\n    \
         sessionPersistence: {sessionName: shop, absoluteTimeout: 1h30m, cookieConfig: {lifetimeType: Permanent}}\n    \
         backendRefs: [{name: v1, port: 8080}]\n  \
         - matches: [{path: {type: PathPrefix, value: /api}}]\n    \
         sessionPersistence: {type: Header, sessionName: x-session, absoluteTimeout: 1h}\n    \
         backendRefs: [{name: v1, port: 8080}]\n  \
         - matches: [{path: {type: Exact, value: /login}}]\n    \
         sessionPersistence: {absoluteTimeout: 1h}\n    \
         backendRefs: [{name: v1, port: 8080}]\n  \
         - backendRefs: [{name: v1, port: 8080}]\n",
    ));
    let routes = model.http_routes(ECHO);
    let session = |name: &str, path: &str| {
        routes
            .iter()
            .find(|r| r.name == name && r.matches[0].uri == Some(StringMatch::PathPrefix(path.into())))
            .or_else(|| {
                routes
                    .iter()
                    .find(|r| r.name == name && r.matches[0].uri == Some(StringMatch::Exact(path.into())))
            })
            .unwrap_or_else(|| panic!("no route {name} for {path}"))
            .session
            .clone()
    };
    // A cookie named by sessionName, its Path the match's prefix, lasting
    // the absolute timeout.
    assert_eq!(
        session("mesh/sticky/0", "/cart"),
        Some(StickySession::Cookie {
            name: "shop".into(),
            path: "/cart".into(),
            ttl: Some(Duration::from_secs(5400)),
        })
    );
    // The same rule's regular expression match: a cookie for every path.
    let regex = routes
        .iter()
        .find(|r| r.name == "mesh/sticky/0" && matches!(r.matches[0].uri, Some(StringMatch::Regex(_))))
        .unwrap();
    assert!(
        matches!(&regex.session, Some(StickySession::Cookie { name, path, .. }) if name == "shop" && path == "/")
    );
    // A header (no lifetime: Envoy's header sessions have none).
    assert_eq!(
        session("mesh/sticky/1", "/api"),
        Some(StickySession::Header {
            name: "x-session".into()
        })
    );
    // A Session cookie (the default) named after the rule: it ends with
    // the browser session, its absoluteTimeout not applied (Envoy would
    // write it as Max-Age).
    let Some(StickySession::Cookie { name, path, ttl }) = session("mesh/sticky/2", "/login") else {
        panic!("a cookie session");
    };
    assert!(
        name.starts_with("session-") && name.len() == "session-".len() + 8,
        "{name}"
    );
    assert_eq!((path.as_str(), ttl), ("/login", None));
    // Another rule's default name is another.
    let other = compile(&route(
        "other",
        "mesh",
        TO_ECHO,
        "  - sessionPersistence: {}\n    backendRefs: [{name: v1, port: 8080}]\n",
    ));
    let Some(StickySession::Cookie { name: other, .. }) = &other.http_routes(ECHO)[0].session else {
        panic!("a cookie session");
    };
    assert_ne!(other, &name);
    // A rule without it keeps no session.
    assert!(
        routes
            .iter()
            .filter(|r| r.name == "mesh/sticky/3")
            .all(|r| r.session.is_none())
    );
}
