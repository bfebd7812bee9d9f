//! The Gateway API's Gateways served by `pilot-agent proxy router` (a
//! real Envoy) with real traffic: conformance cases of the Gateway
//! profile, their manifests read from the corpus `gateway-api`
//! (`../shared/corpora/`), through the harness of
//! [`common::conformance`]. The expectation tables are those the upstream
//! conformance tests state, written here from them (the request, the
//! backend that answers or the status, what the backend saw, the
//! answer's headers), and so are the status checks.
//!
//! - HTTPRoute: simple same-namespace, cross-namespace, reference grant,
//!   invalid cross-namespace backend, partially invalid via a reference
//!   grant, nonexistent backend, backend of unknown kind, disallowed
//!   kind, parentRef not matching a listener's port or sectionName,
//!   listener port matching, hostname intersection, listener hostname
//!   matching, matching, exact path, method, query parameter and header
//!   matching, path match order, matching across routes, weights, request
//!   and response header modifiers (a route's, a backendRef's, and
//!   weighted backendRefs' own),
//!   redirects (host and status, path, port, scheme, port and scheme on
//!   HTTP and HTTPS listeners, 303, 307, 308), host and path rewrites, a mirror,
//!   retry (experimental: on codes, on connection errors, bounded by
//!   timeouts), observed generation bump (of an HTTPRoute, a
//!   Gateway and a GatewayClass), a Gateway's name of 253 characters, named rules, an invalid reference
//!   grant, a parent of another namespace not admitting the route, a
//!   parent's sectionName and port naming no one listener; backend
//!   protocols (an h2c backend reached over HTTP/2 by prior knowledge, a
//!   websocket through to its backend with a real client and server);
//!   service types (headless, hand-written EndpointSlices) through the
//!   Kubernetes registry on the fake API server.
//! - HTTPS listeners: HTTPRouteHTTPSListener (TLS ended with the
//!   listener's Secret from `--credentials-dir`, over SDS, and its
//!   rotation), GatewaySecretReferenceGrantSpecific and
//!   GatewaySecretMissingReferenceGrant (a Secret of another namespace),
//!   GatewaySecretInvalidReferenceGrant and
//!   GatewaySecretReferenceGrantAllInNamespace (status),
//!   GatewayInvalidTLSConfiguration (the listeners' status; a listener
//!   whose Secret is missing is left out until the Secret is written),
//!   HTTPRouteHTTPSListenerDetectMisdirectedRequests (421).
//! - BackendTLSPolicy: BackendTLSPolicy (TLS to the backend with the
//!   policy's SNI, verified with its ConfigMap's CA from
//!   `--ca-bundles-dir`, over SDS; a mismatched hostname or CA fails; the
//!   re-encrypt case through an HTTPS listener; the ConfigMap changed),
//!   BackendTLSPolicyInvalidCACertificateRef, BackendTLSPolicyInvalidKind,
//!   BackendTLSPolicySANValidation (DNS and URI names),
//!   BackendTLSPolicyConflictResolution,
//!   BackendTLSPolicyObservedGenerationBump; a Gateway's client
//!   certificate for its TLS backends (GatewayTLSBackendClientCertificate,
//!   GatewayInvalidTLSBackendConfiguration).
//! - GRPCRoute, with a real gRPC client and servers (gRPC for Python,
//!   the scripts of `crates/pilot-system-tests/tests/grpc/`): exact
//!   method matching, header matching, request header modifier, weights,
//!   listener hostname matching, a named rule; a BackendTLSPolicy on a
//!   GRPCRoute's backends (BackendTLSPolicyGRPCRoute, TLS to a gRPC
//!   server).
//! - TCPRoute: reference grant, attach to every listener, weights; a
//!   backend that does not exist or is of another namespace without a
//!   grant, a listener of another protocol (status).
//! - TLSRoute: passthrough by SNI, hostname intersection, terminated
//!   (TLSRouteTerminateSimpleSameNamespace, and
//!   BackendTLSPolicyTLSRouteTerminate: terminated, then TLS again to the
//!   backend), both on one port (TLSRouteMixedTermination); a backend
//!   that does not exist or of an unknown kind, grants that permit
//!   nothing, hostnames no listener takes, listeners of other protocols
//!   and a sectionName naming none (status).
//! - Gateways' listeners: supported kinds and an invalid route kind
//!   (GatewayInvalidRouteKind), attached routes counted
//!   (GatewayWithAttachedRoutes, and ...WithPort8080: by sectionName).

mod common;

use std::collections::BTreeMap;

use common::conformance::{
    Conformance, GRPC_TLS_BACKEND, HOST, INFRA, Request, V1, V2, V3, WEB, answered, move_parent_ports,
    router_service, said, to, triples,
};
use common::eventually;
use common::http_case::{At, Case, case, modified, request_header_cases, with_host_ports};
use common::upstreams::{failing_upstream, seen};
use serde_json::Value;

#[test]
fn same_and_cross_namespace_routes_and_reference_grants() {
    let Some(conformance) = Conformance::with(
        &["httproute-simple-same-namespace", "httproute-cross-namespace"],
        &["same-namespace", "backend-namespaces"],
    ) else {
        return;
    };
    // HTTPRouteSimpleSameNamespace, HTTPRouteCrossNamespace.
    conformance.expect(
        "same-namespace",
        &[
            ("example.com", "/", "infra-backend-v1", 200),
            ("example.org", "/any/path", "infra-backend-v1", 200),
        ],
    );
    conformance.expect("backend-namespaces", &[("example.com", "/", "web-backend", 200)]);
    assert_eq!(
        conformance.route_conditions(WEB, "cross-namespace"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
    assert_eq!(
        conformance.route_conditions(INFRA, "gateway-conformance-infra-test"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
    let gateway = conformance.object(&format!(
        "/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/gateways/same-namespace"
    ));
    let listener = &gateway["status"]["listeners"][0];
    assert_eq!(listener["attachedRoutes"], 1, "{gateway}");
    assert!(
        triples(&gateway["status"]["conditions"]).contains(&said("Programmed", "True", "Programmed")),
        "{gateway}"
    );
    assert!(
        triples(&listener["conditions"]).contains(&said("Programmed", "True", "Programmed")),
        "{gateway}"
    );
}

#[test]
fn a_backend_in_another_namespace_needs_a_reference_grant() {
    // HTTPRouteReferenceGrant: with the grant, the route reaches
    // web-backend; HTTPRouteInvalidCrossNamespaceBackendRef: without one,
    // ResolvedRefs is False (RefNotPermitted) and requests get 500.
    let Some(granted) = Conformance::with(&["httproute-reference-grant"], &["same-namespace"]) else {
        return;
    };
    granted.expect("same-namespace", &[("example.com", "/", "web-backend", 200)]);
    assert_eq!(
        granted.route_conditions(INFRA, "reference-grant"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
    drop(granted);

    let Some(refused) = Conformance::with(
        &["httproute-invalid-cross-namespace-backend-ref"],
        &["same-namespace"],
    ) else {
        return;
    };
    refused.expect(
        "same-namespace",
        &[("example.com", "/", "", 500), ("example.com", "/any", "", 500)],
    );
    assert_eq!(
        refused.route_conditions(INFRA, "invalid-cross-namespace-backend-ref"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "False", "RefNotPermitted")
        ]
    );
}

#[test]
fn route_and_listener_hostnames_intersect() {
    let Some(conformance) = Conformance::with(
        &["httproute-hostname-intersection"],
        &[
            "httproute-hostname-intersection",
            "httproute-hostname-intersection-all",
        ],
    ) else {
        return;
    };
    // HTTPRouteHostnameIntersection.
    conformance.expect(
        "httproute-hostname-intersection",
        &[
            // A specific route hostname matching a listener's.
            ("very.specific.com", "/s1", "infra-backend-v1", 200),
            ("non.matching.com", "/s1", "", 404),
            ("foo.nonmatchingwildcard.io", "/s1", "", 404),
            ("foo.wildcard.io", "/s1", "", 404),
            ("very.specific.com", "/non-matching-prefix", "", 404),
            // Specific route hostnames under a listener's wildcard.
            ("foo.wildcard.io", "/s2", "infra-backend-v2", 200),
            ("bar.wildcard.io", "/s2", "infra-backend-v2", 200),
            ("foo.bar.wildcard.io", "/s2", "infra-backend-v2", 200),
            ("non.matching.com", "/s2", "", 404),
            ("wildcard.io", "/s2", "", 404),
            ("very.specific.com", "/s2", "", 404),
            // A route wildcard covering a listener's specific hostname.
            ("very.specific.com", "/s3", "infra-backend-v3", 200),
            ("foo.specific.com", "/s3", "", 404),
            ("foo.wildcard.io", "/s3", "", 404),
            // Wildcards meeting.
            ("foo.anotherwildcard.io", "/s4", "infra-backend-v1", 200),
            ("bar.anotherwildcard.io", "/s4", "infra-backend-v1", 200),
            ("foo.bar.anotherwildcard.io", "/s4", "infra-backend-v1", 200),
            ("anotherwildcard.io", "/s4", "", 404),
            ("foo.wildcard.io", "/s4", "", 404),
            // No hostname in common: not attached.
            ("specific.but.wrong.com", "/s5", "", 404),
            ("wildcard.io", "/s5", "", 404),
        ],
    );
    conformance.expect(
        "httproute-hostname-intersection-all",
        &[
            ("first.com", "/", "infra-backend-v2", 200),
            ("sub.first.com", "/", "infra-backend-v2", 200),
            ("second.com", "/", "infra-backend-v2", 200),
            ("sub.second.com", "/", "infra-backend-v2", 200),
            ("third.com", "/", "", 404),
        ],
    );
    assert_eq!(
        conformance.route_conditions(INFRA, "no-intersecting-hosts"),
        [
            said("Accepted", "False", "NoMatchingListenerHostname"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

#[test]
fn a_hostname_belongs_to_its_most_specific_listener() {
    let Some(conformance) = Conformance::with(
        &["httproute-listener-hostname-matching"],
        &["httproute-listener-hostname-matching"],
    ) else {
        return;
    };
    // HTTPRouteListenerHostnameMatching.
    conformance.expect(
        "httproute-listener-hostname-matching",
        &[
            ("bar.com", "/", "infra-backend-v1", 200),
            ("foo.bar.com", "/", "infra-backend-v2", 200),
            ("baz.bar.com", "/", "infra-backend-v3", 200),
            ("boo.bar.com", "/", "infra-backend-v3", 200),
            ("multiple.prefixes.bar.com", "/", "infra-backend-v3", 200),
            ("multiple.prefixes.foo.com", "/", "infra-backend-v3", 200),
            ("foo.com", "/", "", 404),
            ("no.matching.host", "/", "", 404),
        ],
    );
}

#[test]
fn a_tcp_listener_routes_connections_to_its_tcp_route_under_a_reference_grant() {
    // TCPRouteReferenceGrant: the route's backend is in another namespace,
    // whose ReferenceGrant admits TCPRoutes of the route's.
    let Some(conformance) =
        Conformance::with(&["tcproute-reference-grant"], &["tcp-reference-grant-gateway"])
    else {
        return;
    };
    eventually("the TCP listener to reach tcp-reference-grant-backend", || {
        conformance.stream("tcp-reference-grant-gateway", 9320) == "tcp-reference-grant-backend"
    });
    for _ in 0..10 {
        assert_eq!(
            conformance.stream("tcp-reference-grant-gateway", 9320),
            "tcp-reference-grant-backend"
        );
    }
}

#[test]
fn a_tcp_route_without_a_section_attaches_to_every_tcp_listener() {
    // TCPRouteParentRefAttachAll: one route, four listeners.
    let Some(conformance) =
        Conformance::with(&["tcproute-parentref-attach-all"], &["tcp-attach-all-gateway"])
    else {
        return;
    };
    for port in [9310, 9311, 9312, 9313] {
        eventually(&format!("listener {port} to reach tcp-echo-attach-all"), || {
            conformance.stream("tcp-attach-all-gateway", port) == "tcp-echo-attach-all"
        });
    }
    let attached = conformance.attached_routes("tcp-attach-all-gateway");
    assert_eq!(attached, vec![Value::from(1); 4]);
}

#[test]
fn a_tcp_routes_backends_share_its_connections_by_their_weights() {
    // TCPRouteWeightedRouting: 70, 30 and 0, over 1,000 connections (the
    // margin as for HTTPRouteWeight's).
    let gateway = "tcp-weighted-gateway";
    let Some(conformance) = Conformance::with(&["tcproute-weighted-routing"], &[gateway]) else {
        return;
    };
    eventually("the TCP listener to reach a backend", || {
        conformance.stream(gateway, 9300).starts_with("tcp-backend-v")
    });
    const CONNECTIONS: usize = 1000;
    let mut answered = BTreeMap::<String, usize>::new();
    for _ in 0..CONNECTIONS {
        *answered.entry(conformance.stream(gateway, 9300)).or_default() += 1;
    }
    eprintln!("{CONNECTIONS} connections answered by {answered:?}");
    let share = |backend: &str| answered.get(backend).copied().unwrap_or(0) * 1000 / CONNECTIONS;
    for (backend, weight) in [("tcp-backend-v1", 700), ("tcp-backend-v2", 300)] {
        assert!(
            share(backend).abs_diff(weight) <= 50,
            "{backend}: {}/1000, its weight {weight}/1000: {answered:?}",
            share(backend)
        );
    }
    assert_eq!(
        answered.get("tcp-backend-v3"),
        None,
        "a weight of 0: {answered:?}"
    );
    assert_eq!(answered.values().sum::<usize>(), CONNECTIONS, "{answered:?}");
    assert_eq!(
        conformance.route_conditions_of("tcproutes", INFRA, "tcp-weighted-route"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

#[test]
fn a_tls_listener_passes_tls_through_by_sni() {
    // TLSRouteSimpleSameNamespace: abc.example.com reaches tcp-backend,
    // whose own certificate the client verifies (the router holds none).
    let Some(conformance) = Conformance::with(&["tlsroute-simple-same-namespace"], &["gateway-tlsroute"])
    else {
        return;
    };
    eventually("abc.example.com passed through to tcp-backend", || {
        conformance.https("gateway-tlsroute", 443, "abc.example.com")
    });
    assert!(
        !conformance.https("gateway-tlsroute", 443, "def.example.com"),
        "a name no TLSRoute holds is not passed through"
    );
    assert_eq!(
        conformance.route_conditions_of("tlsroutes", INFRA, "gateway-conformance-infra-test"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

#[test]
fn a_v1alpha2_tls_route_without_hostnames_takes_every_name_of_its_listener_by_its_first_rule() {
    // The experimental channel's v1alpha2 TLSRoute: no hostnames (every
    // SNI name the listener takes, here *.example.com) and two rules, of
    // which a stream takes the first.
    let gateway = "gateway-tlsroute";
    let Some(conformance) = Conformance::with(&["tlsroute-simple-same-namespace"], &[gateway]) else {
        return;
    };
    eventually("abc.example.com passed through to tcp-backend", || {
        conformance.https(gateway, 443, "abc.example.com")
    });
    conformance.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: TLSRoute\n\
         metadata: {{name: gateway-conformance-infra-test, namespace: {INFRA}}}\n\
         spec:\n  parentRefs: [{{name: {gateway}}}]\n  rules:\n  \
         - backendRefs: [{{name: tls-backend, port: 443}}]\n  \
         - backendRefs: [{{name: tls-backend-2, port: 443}}]\n"
    ));
    eventually("any name of the listener passed through to tls-backend", || {
        conformance
            .tls_backend(gateway, 443, "def.example.com")
            .as_deref()
            == Some("tls-backend")
    });
    for name in ["abc.example.com", "xyz.example.com", "def.example.com"] {
        assert_eq!(
            conformance.tls_backend(gateway, 443, name).as_deref(),
            Some("tls-backend"),
            "{name}"
        );
    }
    // Stored at v1, as the CRDs store it; its status as any TLSRoute's.
    let stored = conformance.object(&format!(
        "/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/tlsroutes/gateway-conformance-infra-test"
    ));
    assert_eq!(stored["spec"]["rules"].as_array().map(Vec::len), Some(2));
    assert!(stored["spec"].get("hostnames").is_none(), "{stored}");
    eventually("the route's status", || {
        conformance.route_conditions_of("tlsroutes", INFRA, "gateway-conformance-infra-test")
            == [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "True", "ResolvedRefs"),
            ]
    });
}

#[test]
fn a_tls_listener_terminating_tls_sends_its_routes_backends_what_the_connection_carried() {
    // TLSRouteTerminateSimpleSameNamespace: TLS with SNI tls.example.com
    // ends at the router with the listener's Secret (verified against the
    // test CA); tcp-backend's plain-text port answers with its name.
    let gateway = "gateway-tlsroute-terminate";
    let reencrypting = "gateway-btls-tlsroute-terminate";
    let Some(conformance) = Conformance::with(
        &[
            "tlsroute-terminate-simple-same-namespace",
            "backendtlspolicy-tlsroute-terminate",
        ],
        &[gateway, reencrypting],
    ) else {
        return;
    };
    eventually("tls.example.com ended and sent to tcp-backend", || {
        conformance
            .tls_stream(gateway, 8443, "tls.example.com")
            .as_deref()
            == Some("tcp-backend")
    });
    assert_eq!(
        conformance.tls_stream(gateway, 8443, "other.example.com"),
        None,
        "a name the listener does not hold is not served"
    );
    assert_eq!(
        conformance.route_conditions_of("tlsroutes", INFRA, "tlsroute-terminated-test"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
    assert_eq!(
        listener_conditions(&conformance, gateway, "tlsterminate"),
        [
            said("Accepted", "True", "Accepted"),
            said("Conflicted", "False", "NoConflicts"),
            said("Programmed", "True", "Programmed"),
            said("ResolvedRefs", "True", "ResolvedRefs"),
        ]
    );

    // BackendTLSPolicyTLSRouteTerminate: what the terminated connection
    // carries goes to the backend over TLS again, as the Service's
    // BackendTLSPolicy says (SNI abc.example.com, the only one the
    // backend accepts; the test CA). The backend is openssl's HTTP page.
    let accepted = [
        said("Accepted", "True", "Accepted"),
        said("ResolvedRefs", "True", "ResolvedRefs"),
    ];
    assert_eq!(
        conformance.policy_conditions("btls-tlsroute-terminate-test", reencrypting, &accepted),
        accepted
    );
    let request = b"GET / HTTP/1.0\r\n\r\n";
    eventually("tls.example.com ended and sent on over TLS", || {
        conformance
            .tls_exchange(reencrypting, 8443, "tls.example.com", request)
            .is_some_and(|answer| answer.contains("s_server -www"))
    });
}

#[test]
fn one_port_ends_tls_for_one_listener_and_passes_it_through_for_another() {
    // TLSRouteMixedTermination: port 8883 has a listener ending TLS for
    // tls.example.com (with its Secret; the connection's bytes go to
    // tcp-backend's plain-text port, which answers with its name) and one
    // passing abc.example.com through to tcp-backend's TLS port (the
    // client verifies the backend's own certificate for that name: the
    // router holds none).
    let gateway = "gateway-tlsroute-mixed-termination";
    let Some(conformance) = Conformance::with(&["tlsroute-mixed-termination-same-namespace"], &[gateway])
    else {
        return;
    };
    eventually("tls.example.com ended and sent to tcp-backend", || {
        conformance
            .tls_stream(gateway, 8883, "tls.example.com")
            .as_deref()
            == Some("tcp-backend")
    });
    eventually("abc.example.com passed through to tcp-backend", || {
        conformance.https(gateway, 8883, "abc.example.com")
    });
    assert_eq!(
        conformance.tls_stream(gateway, 8883, "other.example.com"),
        None,
        "a name neither listener holds is not served"
    );
    for route in [
        "gateway-conformance-mixed-passthroughroute",
        "gateway-conformance-mixed-terminateroute",
    ] {
        assert_eq!(
            conformance.route_conditions_of("tlsroutes", INFRA, route),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "True", "ResolvedRefs")
            ],
            "{route}"
        );
    }
    for listener in ["tls-terminate", "tls-passthrough"] {
        assert_eq!(
            listener_conditions(&conformance, gateway, listener),
            [
                said("Accepted", "True", "Accepted"),
                said("Conflicted", "False", "NoConflicts"),
                said("Programmed", "True", "Programmed"),
                said("ResolvedRefs", "True", "ResolvedRefs"),
            ],
            "{listener}"
        );
    }
}

#[test]
fn tls_routes_and_listeners_hostnames_intersect() {
    // TLSRouteHostnameIntersection: four Gateways (a listener's hostname
    // exact, a wildcard more and one less specific than the routes', and
    // none), each with routes to tls-backend and tls-backend-2.
    let gateways = [
        "gw-tlsroute-exact-hostname-x-1",
        "gw-tlsroute-more-specific-wc-hostname-x-2",
        "gw-tlsroute-less-specific-wc-hostname-x-3",
        "gw-tlsroute-empty-hostname-x-4",
    ];
    let Some(conformance) = Conformance::with(&["tlsroute-hostname-intersection"], &gateways) else {
        return;
    };
    let (one, two) = (Some("tls-backend"), Some("tls-backend-2"));
    // Per Gateway, each SNI and the backend it reaches.
    type Passed<'a> = Vec<(&'a str, Option<&'a str>)>;
    let cases: [(&str, Passed); 4] = [
        (
            gateways[0],
            vec![("abc.example.com", one), ("non.matching.com", None)],
        ),
        (
            gateways[1],
            vec![
                ("abc.example.com", one),
                ("other.example.com", two),
                ("non.matching.com", None),
            ],
        ),
        (
            gateways[2],
            vec![
                ("abc.example.com", one),
                ("other.example.com", two),
                ("non.matching.com", None),
            ],
        ),
        (
            gateways[3],
            vec![
                ("abc.example.com", one),
                ("other.example.com", two),
                ("non.matching.org", None),
            ],
        ),
    ];
    for (gateway, sni) in &cases {
        let answers = || -> Vec<Option<String>> {
            sni.iter()
                .map(|(host, _)| conformance.tls_backend(gateway, 443, host))
                .collect()
        };
        let expected: Vec<Option<String>> = sni.iter().map(|(_, b)| b.map(str::to_string)).collect();
        eventually(&format!("{gateway} to pass TLS through by SNI"), || {
            answers() == expected
        });
        assert_eq!(answers(), expected, "{gateway}: {sni:?}");
    }
    for route in [
        "tlsroute-more-specific-wc-hostname-x-1",
        "tlsroute-exact-hostname-x-2",
        "tlsroute-less-specific-wc-hostname-x-2",
        "tlsroute-exact-hostname-x-3",
        "tlsroute-more-specific-wc-hostname-x-3",
        "tlsroute-exact-hostname-x-4",
        "tlsroute-less-specific-wc-hostname-x-4",
    ] {
        assert_eq!(
            conformance.route_conditions_of("tlsroutes", INFRA, route),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "True", "ResolvedRefs")
            ],
            "{route}"
        );
    }
}

#[test]
fn requests_match_by_path_header_method_and_query_in_the_specifications_order() {
    // One manifest at a time (HTTPRouteMethodMatching's `GET` rule would
    // take the others' requests): HTTPRouteMatching,
    // HTTPRouteExactPathMatching, HTTPRouteMethodMatching,
    // HTTPRouteQueryParamMatching.
    let cases: [(&str, Vec<Request>); 4] = [
        (
            "httproute-matching",
            // A prefix matches whole segments; a header match beats a
            // bare prefix of the same length.
            vec![
                to("/", V1),
                to("/example", V1),
                to("/", V1).header("version", "one"),
                to("/v2", V2),
                to("/v2/example", V2),
                to("/", V2).header("version", "two"),
                to("/v2example", V1),
                to("/foo/v2/example", V1),
            ],
        ),
        (
            "httproute-exact-path-matching",
            // The whole path, its case; nothing else matches.
            vec![
                to("/one", V1),
                to("/two", V2),
                answered("/", 404),
                answered("/one/example", 404),
                answered("/two/", 404),
                answered("/Two", 404),
                answered("/onetwo", 404),
            ],
        ),
        (
            "httproute-method-matching",
            // A longer prefix beats a method match, which beats a header
            // match.
            vec![
                to("/", V1).method("POST"),
                to("/", V2),
                to("/path1", V1),
                to("/", V2).method("PUT").header("version", "one"),
                to("/path2", V3).method("POST").header("version", "two"),
                to("/path3", V1).method("PATCH"),
                to("/path4", V1).method("DELETE").header("version", "three"),
                to("/path5", V1).method("PATCH"),
                to("/", V2).method("PATCH").header("version", "four"),
                answered("/", 404).method("HEAD"),
                answered("/", 404).method("PUT"),
                answered("/path4", 404).method("DELETE"),
            ],
        ),
        (
            "httproute-query-param-matching",
            // Names and values are case-sensitive; more parameters win;
            // headers beat parameters; a longer prefix beats both.
            vec![
                to("/?animal=whale", V1),
                to("/?animal=dolphin", V2),
                to("/?animal=dolphin&color=blue", V3),
                to("/?ANIMAL=Whale", V3),
                to("/path1?animal=whale", V1),
                to("/?animal=whale", V2).header("version", "one"),
                to("/path2?animal=whale", V3).header("version", "two"),
                to("/path3?animal=shark", V1),
                to("/path4?animal=kraken", V1).header("version", "three"),
                to("/path5?animal=hydra", V1).header("version", "four"),
                to("/?animal=hydra", V3).header("version", "four"),
                to("/?animal=hydra", V2),
                answered("/?animal=whalesay", 404),
                answered("/?Animal=whale", 404),
                answered("/", 404),
            ],
        ),
    ];
    for (manifest, requests) in cases {
        let Some(conformance) = Conformance::with(&[manifest], &["same-namespace"]) else {
            return;
        };
        conformance.expect_requests("same-namespace", &requests);
    }
}

#[test]
fn matches_across_routes_of_one_hostname_are_ordered_together() {
    // HTTPRouteMatchingAcrossRoutes.
    let Some(conformance) = Conformance::with(&["httproute-matching-across-routes"], &["same-namespace"])
    else {
        return;
    };
    conformance.expect(
        "same-namespace",
        &[
            ("example.com", "/", V1, 200),
            ("example.com", "/example", V1, 200),
            ("example.net", "/example", V1, 200),
            ("example.com", "/v2", V2, 200),
            ("example.com", "/v2/example", V2, 200),
            ("example.com", "/v2example", V1, 200),
            ("example.com", "/foo/v2/example", V1, 200),
            ("example.net", "/v2", V1, 200),
            ("example.org", "/", "", 404),
        ],
    );
    let port = conformance.port("same-namespace", 80);
    let header = |host: &str| common::request_by_length(port, "GET", host, "/", &[("version", "two")]);
    assert_eq!(header("example.com"), (200, V2.to_string()));
    assert_eq!(header("example.net"), (200, V1.to_string()));
}

#[test]
fn a_rules_retry_tries_again_on_its_codes_as_many_times_as_it_says() {
    // HTTPRouteRetry (experimental): infra-backend-v3 fails as each
    // request asks; each request's id is used once.
    let Some(conformance) =
        Conformance::with_upstreams(&["httproute-retry"], &["same-namespace"], &v3_failing)
    else {
        return;
    };
    let port = conformance.port("same-namespace", 80);
    let send = |path: &str| common::request_by_length(port, "GET", HOST, path, &[]);
    let mut warm = 0;
    eventually("the retry routes to be served", || {
        warm += 1;
        send(&format!("/retry/code-all-attempts-2?id=warm-{warm}")).0 == 200
    });
    let cases = [
        // 500 is retried three times: the fourth try succeeds...
        ("/retry/code-500-attempts-3?fail=3&id=a", (200, "try 4")),
        // ...and a fifth is not made.
        ("/retry/code-500-attempts-3?fail=4&id=b", (500, "try 4")),
        // A code the rule does not name is not retried.
        (
            "/retry/code-500-attempts-3?fail=1&id=c&status=502",
            (502, "try 1"),
        ),
        // 5xx named: two retries.
        (
            "/retry/code-all-attempts-2?fail=2&id=d&status=503",
            (200, "try 3"),
        ),
        (
            "/retry/code-all-attempts-2?fail=3&id=e&status=504",
            (504, "try 3"),
        ),
    ];
    for (path, (status, body)) in cases {
        assert_eq!(send(path), (status, body.to_string()), "{path}");
    }
}

/// `upstream` for every HTTP backend but infra-backend-v3, which is a
/// [`failing_upstream`].
fn v3_failing(name: &'static str) -> u16 {
    if name == V3 {
        failing_upstream(name)
    } else {
        common::named_upstream(name)
    }
}

#[test]
fn a_rules_retry_tries_again_when_the_connection_fails() {
    // HTTPRouteRetryConnectionError (experimental): a rule with 3
    // attempts and no codes retries a request whose connection
    // infra-backend-v3 closes before answering, three times at most.
    let Some(conformance) = Conformance::with_upstreams(
        &["httproute-retry-connection-error"],
        &["same-namespace"],
        &v3_failing,
    ) else {
        return;
    };
    let port = conformance.port("same-namespace", 80);
    let send = |query: &str| {
        common::request_by_length(
            port,
            "GET",
            HOST,
            &format!("/retry/no-status-code-attempts-3?{query}"),
            &[],
        )
    };
    let mut warm = 0;
    eventually("the retry route to be served", || {
        warm += 1;
        send(&format!("id=warm-{warm}")).0 == 200
    });
    // Two closed connections, then the third try answers.
    assert_eq!(send("fail=2&reset=1&id=a"), (200, "try 3".to_string()));
    // Four closed: the first try and three retries all fail...
    let (status, body) = send("fail=4&reset=1&id=b");
    assert_eq!(status, 503, "{body}");
    // ...and no fifth try was made: the next request of that id is it.
    assert_eq!(send("fail=4&reset=1&id=b"), (200, "try 5".to_string()));
    assert_eq!(
        conformance.route_conditions(INFRA, "retries-connection-error"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

#[test]
fn a_rules_retries_are_bounded_by_its_timeouts() {
    // HTTPRouteRetryWithTimeouts (experimental), its timeouts ten times
    // longer (backendRequest 2s, request 4s) so that a loaded machine's
    // latency decides no case. infra-backend-v3 fails as each request
    // asks; each request's id is used once.
    let manifest = "httproute-retry-with-timeouts";
    let Some(conformance) = Conformance::with_upstreams(&[], &["same-namespace"], &v3_failing) else {
        return;
    };
    let corpus = pilot_test_support::corpus("gateway-api").expect("read above");
    let text =
        std::fs::read_to_string(corpus.join(format!("gwapi_conformance.tests.{manifest}.yaml"))).unwrap();
    for written in ["backendRequest: 200ms", "request: 400ms"] {
        assert!(text.contains(written), "{written}: {text}");
    }
    conformance.apply(
        &text
            .replace("backendRequest: 200ms", "backendRequest: 2s")
            .replace("request: 400ms", "request: 4s"),
    );
    let port = conformance.port("same-namespace", 80);
    let send = |path: &str| common::request_by_length(port, "GET", HOST, path, &[]);
    let backend = "/retry/backend-request-timeout-200ms";
    let request = "/retry/request-timeout-200ms";
    let mut warm = 0;
    eventually("the retry routes to be served", || {
        warm += 1;
        send(&format!("{backend}?id=warm-{warm}")).0 == 200
            && send(&format!("{request}?id=warm-{warm}")).0 == 200
    });
    // The backend request timeout bounds each try, and a try that times
    // out is retried (2 attempts, no request timeout): two tries of 3 s
    // time out, the third answers...
    assert_eq!(
        send(&format!("{backend}?fail=2&delay=3000&id=a")),
        (200, "try 3".to_string())
    );
    // ...and when the third times out too, the answer is 504, and no
    // fourth try was made.
    let (status, body) = send(&format!("{backend}?fail=3&delay=3000&id=b"));
    assert_eq!(status, 504, "{body}");
    assert_eq!(
        send(&format!("{backend}?fail=3&id=b")),
        (200, "try 4".to_string())
    );
    // The request timeout bounds the tries together: a 500 retried within
    // it succeeds...
    assert_eq!(
        send(&format!("{request}?fail=1&id=c")),
        (200, "try 2".to_string())
    );
    // ...but four failing tries of 1.5 s each (within the backend request
    // timeout, retried for their 500) outlast it: 504, not the fifth
    // try's 200.
    let (status, body) = send(&format!("{request}?fail=4&delay=1500&id=d"));
    assert_eq!(status, 504, "{body}");
    assert_eq!(
        conformance.route_conditions(INFRA, "retries-with-timeouts"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

#[test]
fn request_and_response_header_modifiers_change_what_each_side_sees() {
    // HTTPRouteRequestHeaderModifier, HTTPRouteBackendRequestHeaderModifier
    // (the same route's name and cases: one after the other),
    // HTTPRouteResponseHeaderModifier.
    for manifest in [
        "httproute-request-header-modifier",
        "httproute-request-header-modifier-backend",
    ] {
        let Some(conformance) = Conformance::echoing(&[manifest], &["same-namespace"]) else {
            return;
        };
        conformance.expect_cases("same-namespace", 80, &request_header_cases());
        assert_eq!(
            conformance.route_conditions(INFRA, "request-header-modifier"),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "True", "ResolvedRefs")
            ],
            "{manifest}"
        );
    }

    let Some(conformance) =
        Conformance::echoing(&["httproute-response-header-modifier"], &["same-namespace"])
    else {
        return;
    };
    conformance.expect_cases(
        "same-namespace",
        80,
        &[
            case("/set")
                .backend_sends("Some-Other-Header", "val")
                .answer("Some-Other-Header", "val")
                .answer("X-Header-Set", "set-overwrites-values"),
            case("/set")
                .backend_sends("Some-Other-Header", "val")
                .backend_sends("X-Header-Set", "some-other-value")
                .answer("Some-Other-Header", "val")
                .answer("X-Header-Set", "set-overwrites-values"),
            case("/add")
                .backend_sends("Some-Other-Header", "val")
                .answer("Some-Other-Header", "val")
                .answer("X-Header-Add", "add-appends-values"),
            case("/add")
                .backend_sends("Some-Other-Header", "val")
                .backend_sends("X-Header-Add", "some-other-value")
                .answer("Some-Other-Header", "val")
                .answer("X-Header-Add", "some-other-value,add-appends-values"),
            case("/remove")
                .backend_sends("X-Header-Remove", "val")
                .unanswered("X-Header-Remove"),
            case("/multiple")
                .backend_sends("X-Header-Set-2", "set-val-2")
                .backend_sends("X-Header-Add-2", "add-val-2")
                .backend_sends("X-Header-Remove-2", "remove-val-2")
                .backend_sends("Another-Header", "another-header-val")
                .backend_sends("X-Header-Remove-1", "val")
                .answer("X-Header-Set-1", "header-set-1")
                .answer("X-Header-Set-2", "header-set-2")
                .answer("X-Header-Add-1", "header-add-1")
                .answer("X-Header-Add-2", "add-val-2,header-add-2")
                .answer("X-Header-Add-3", "header-add-3")
                .answer("Another-Header", "another-header-val")
                .unanswered("X-Header-Remove-1")
                .unanswered("X-Header-Remove-2"),
            case("/case-insensitivity")
                .backend_sends("x-header-set", "original-val-set")
                .backend_sends("x-header-add", "original-val-add")
                .backend_sends("x-header-remove", "original-val-remove")
                .backend_sends("Another-Header", "another-header-val")
                .answer("X-Header-Set", "header-set")
                .answer("X-Header-Add", "original-val-add,header-add")
                .answer("X-Lowercase-Add", "lowercase-add")
                .answer("X-Mixedcase-Add-1", "mixedcase-add-1")
                .answer("X-Mixedcase-Add-2", "mixedcase-add-2")
                .answer("X-Uppercase-Add", "uppercase-add")
                .answer("Another-Header", "another-header-val")
                .unanswered("X-Header-Remove"),
            case("/response-and-request-header-modifiers")
                .header("X-Header-Remove", "remove-val")
                .header("X-Header-Add-Append", "append-val-1")
                .header("X-Header-Echo", "echo")
                .backend_sends("X-Header-Set-2", "set-val-2")
                .backend_sends("X-Header-Add-2", "add-val-2")
                .backend_sends("X-Header-Remove-2", "remove-val-2")
                .backend_sends("Another-Header", "another-header-val")
                .backend_sends("X-Header-Remove-1", "remove-val-1")
                .backend_sends("X-Header-Echo", "echo")
                .seen("X-Header-Add", "header-val-1")
                .seen("X-Header-Set", "set-overwrites-values")
                .seen("X-Header-Add-Append", "append-val-1,header-val-2")
                .unseen("X-Header-Remove")
                .answer("X-Header-Set-1", "header-set-1")
                .answer("X-Header-Set-2", "header-set-2")
                .answer("X-Header-Add-1", "header-add-1")
                .answer("X-Header-Add-2", "add-val-2,header-add-2")
                .answer("Another-Header", "another-header-val")
                .answer("X-Header-Echo", "echo")
                .unanswered("X-Header-Remove-1")
                .unanswered("X-Header-Remove-2"),
        ],
    );
}

#[test]
fn a_redirect_or_rewrite_of_a_rule_s_only_backend_is_done_for_its_requests() {
    // HTTPRouteBackendRequestRedirect, HTTPRouteBackendURLRewrite (one
    // manifest at a time: their paths are the same): the filter written
    // on the backend is done for every request the rule sends it.
    let redirects = Conformance::echoing(&["httproute-backend-request-redirect"], &["same-namespace"]);
    let Some(conformance) = redirects else {
        return;
    };
    conformance.expect_cases(
        "same-namespace",
        80,
        &[
            case("/full/original").redirect(302, "http", HOST, At::Listener, "/redirected-full"),
            case("/prefix/original").redirect(302, "http", HOST, At::Listener, "/redirected-prefix/original"),
        ],
    );
    drop(conformance);
    let Some(conformance) = Conformance::echoing(&["httproute-backend-url-rewrite"], &["same-namespace"])
    else {
        return;
    };
    conformance.expect_cases(
        "same-namespace",
        80,
        &[
            case("/full/original").seen_as(HOST, "/rewritten-full"),
            case("/prefix/original").seen_as(HOST, "/rewritten-prefix/original"),
        ],
    );
}

#[test]
fn redirects_answer_with_the_location_and_status_the_filter_says() {
    // One manifest at a time (their paths overlap): HTTPRouteRedirectHostAndStatus,
    // HTTPRouteRedirectPath, HTTPRouteRedirectPort, HTTPRouteRedirectScheme,
    // HTTPRoute303Redirect, HTTPRoute307Redirect, HTTPRoute308Redirect.
    // The location keeps what the filter does not change (the request's
    // host, path and scheme); with neither port nor scheme, the port is
    // the listener's; with a scheme and no port, the scheme's own.
    let cases: [(&str, Vec<Case>); 7] = [
        (
            "httproute-redirect-host-and-status",
            vec![
                case("/hostname-redirect").redirect(
                    302,
                    "http",
                    "example.org",
                    At::Listener,
                    "/hostname-redirect",
                ),
                case("/host-and-status").redirect(
                    301,
                    "http",
                    "example.org",
                    At::Listener,
                    "/host-and-status",
                ),
            ],
        ),
        (
            "httproute-redirect-path",
            vec![
                case("/original-prefix/lemon").redirect(
                    302,
                    "http",
                    HOST,
                    At::Listener,
                    "/replacement-prefix/lemon",
                ),
                case("/full/path/original").redirect(
                    302,
                    "http",
                    HOST,
                    At::Listener,
                    "/full-path-replacement",
                ),
                case("/path-and-host").redirect(
                    302,
                    "http",
                    "example.org",
                    At::Listener,
                    "/replacement-prefix",
                ),
                case("/path-and-status").redirect(301, "http", HOST, At::Listener, "/replacement-prefix"),
                case("/full-path-and-host").redirect(
                    302,
                    "http",
                    "example.org",
                    At::Listener,
                    "/replacement-full",
                ),
                case("/full-path-and-status").redirect(301, "http", HOST, At::Listener, "/replacement-full"),
            ],
        ),
        (
            "httproute-redirect-port",
            vec![
                case("/port").redirect(302, "http", HOST, At::Port(8083), "/port"),
                case("/port-and-host").redirect(302, "http", "example.org", At::Port(8083), "/port-and-host"),
                case("/port-and-status").redirect(301, "http", HOST, At::Port(8083), "/port-and-status"),
                case("/port-and-host-and-status").redirect(
                    302,
                    "http",
                    "example.org",
                    At::Port(8083),
                    "/port-and-host-and-status",
                ),
            ],
        ),
        (
            "httproute-redirect-scheme",
            vec![
                case("/scheme").redirect(302, "https", HOST, At::Scheme, "/scheme"),
                case("/scheme-and-host").redirect(
                    302,
                    "https",
                    "example.org",
                    At::Scheme,
                    "/scheme-and-host",
                ),
                case("/scheme-and-status").redirect(301, "https", HOST, At::Scheme, "/scheme-and-status"),
                case("/scheme-and-host-and-status").redirect(
                    302,
                    "https",
                    "example.org",
                    At::Scheme,
                    "/scheme-and-host-and-status",
                ),
            ],
        ),
        (
            "httproute-303-redirect",
            vec![
                case("/see-other")
                    .method("POST")
                    .redirect(303, "http", HOST, At::Listener, "/see-other"),
            ],
        ),
        (
            "httproute-307-redirect",
            vec![case("/temporary").redirect(307, "http", HOST, At::Listener, "/temporary")],
        ),
        (
            "httproute-308-redirect",
            vec![case("/permanent").redirect(308, "http", HOST, At::Listener, "/permanent")],
        ),
    ];
    for (manifest, cases) in cases {
        let Some(conformance) = Conformance::echoing(&[manifest], &["same-namespace"]) else {
            return;
        };
        conformance.expect_cases("same-namespace", 80, &with_host_ports(cases));
    }
}

#[test]
fn rewrites_change_the_host_and_path_the_backend_sees() {
    // HTTPRouteRewriteHost, HTTPRouteRewritePath.
    let Some(conformance) = Conformance::echoing(&["httproute-rewrite-host"], &["same-namespace"]) else {
        return;
    };
    conformance.expect_cases(
        "same-namespace",
        80,
        &[
            case("/one")
                .host("rewrite.example")
                .seen_as("one.example.org", "/one"),
            case("/two")
                .host("rewrite.example")
                .to(V2)
                .seen_as("example.org", "/two"),
            modified(
                case("/rewrite-host-and-modify-headers")
                    .host("rewrite.example")
                    .to(V2)
                    .seen_as("test.example.org", "/rewrite-host-and-modify-headers"),
            ),
        ],
    );
    drop(conformance);

    let Some(conformance) = Conformance::echoing(&["httproute-rewrite-path"], &["same-namespace"]) else {
        return;
    };
    conformance.expect_cases(
        "same-namespace",
        80,
        &[
            case("/prefix/one/two").seen_as(HOST, "/one/two"),
            case("/strip-prefix/three").seen_as(HOST, "/three"),
            case("/strip-prefix").seen_as(HOST, "/"),
            case("/full/one/two").seen_as(HOST, "/one"),
            modified(
                case("/full/rewrite-path-and-modify-headers/test")
                    .header("X-Header-Set", "set-val")
                    .seen_as(HOST, "/test"),
            ),
            modified(
                case("/prefix/rewrite-path-and-modify-headers/one")
                    .header("X-Header-Set", "set-val")
                    .seen_as(HOST, "/prefix/one"),
            ),
        ],
    );
}

#[test]
fn a_mirror_sends_each_request_to_its_backend_too() {
    // HTTPRouteRequestMirror: infra-backend-v1 answers; infra-backend-v2
    // must see each request (with the rule's header changes), once.
    let Some(conformance) = Conformance::echoing(&["httproute-request-mirror"], &["same-namespace"]) else {
        return;
    };
    conformance.expect_cases(
        "same-namespace",
        80,
        &[case("/mirror"), modified(case("/mirror-and-modify-headers"))],
    );
    let port = conformance.port("same-namespace", 80);
    const TAGS: [&str; 10] = ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"];
    for path in ["/mirror", "/mirror-and-modify-headers"] {
        for tag in TAGS {
            let answer = common::exchange(port, "GET", HOST, path, &[("x-tag", tag)]);
            assert_eq!(answer.status, 200, "{path} {tag}: {answer:?}");
            assert_eq!(
                seen(V1, path, tag),
                1,
                "{path} {tag}: infra-backend-v1 answered once"
            );
        }
        // The mirror's copies are sent beside the answer: each arrives,
        // once.
        eventually(&format!("infra-backend-v2 to see every {path}"), || {
            TAGS.iter().all(|tag| seen(V2, path, tag) >= 1)
        });
        for tag in TAGS {
            assert_eq!(seen(V2, path, tag), 1, "{path} {tag}: mirrored once");
        }
    }
}

#[test]
fn several_mirrors_each_get_every_request_and_a_percentage_mirror_its_share() {
    // HTTPRouteRequestMultipleMirrors: infra-backend-v1 answers; v2 and v3
    // each see every request once. HTTPRouteRequestPercentageMirror: v2
    // sees about the share written (20%, 25/50, 35%) of 200 requests.
    let Some(conformance) = Conformance::echoing(
        &[
            "httproute-request-multiple-mirrors",
            "httproute-request-percentage-mirror",
        ],
        &["same-namespace"],
    ) else {
        return;
    };
    conformance.expect_cases(
        "same-namespace",
        80,
        &[
            case("/multi-mirror"),
            modified(case("/multi-mirror-and-modify-request-headers")),
            case("/percent-mirror"),
            case("/percent-mirror-fraction"),
            modified(case("/percent-mirror-and-modify-headers")),
        ],
    );
    let port = conformance.port("same-namespace", 80);
    const TAGS: [&str; 10] = ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"];
    for path in ["/multi-mirror", "/multi-mirror-and-modify-request-headers"] {
        for tag in TAGS {
            let answer = common::exchange(port, "GET", HOST, path, &[("x-tag", tag)]);
            assert_eq!(answer.status, 200, "{path} {tag}: {answer:?}");
            assert_eq!(
                seen(V1, path, tag),
                1,
                "{path} {tag}: infra-backend-v1 answered once"
            );
        }
        for mirror in [V2, V3] {
            eventually(&format!("{mirror} to see every {path}"), || {
                TAGS.iter().all(|tag| seen(mirror, path, tag) >= 1)
            });
            for tag in TAGS {
                assert_eq!(
                    seen(mirror, path, tag),
                    1,
                    "{path} {tag}: mirrored to {mirror} once"
                );
            }
        }
    }
    // Each request's copy is sent or not at random: 200 requests at p
    // mirror a count of mean 200p, standard deviation at most 7.1 (at
    // p = 0.5); the bounds are 36 away, over 5 deviations.
    const REQUESTS: usize = 200;
    for (path, percent) in [
        ("/percent-mirror", 20),
        ("/percent-mirror-fraction", 50),
        ("/percent-mirror-and-modify-headers", 35),
    ] {
        let tag = "share";
        for _ in 0..REQUESTS {
            let answer = common::exchange(port, "GET", HOST, path, &[("x-tag", tag)]);
            assert_eq!(answer.status, 200, "{path}: {answer:?}");
        }
        assert_eq!(
            seen(V1, path, tag),
            REQUESTS,
            "{path}: infra-backend-v1 answered each"
        );
        // The copies are sent beside the answers: wait for the last to
        // arrive (the count stops moving), then compare.
        let mut last = usize::MAX;
        eventually(&format!("the copies of {path} to arrive"), || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            let now = seen(V2, path, tag);
            std::mem::replace(&mut last, now) == now
        });
        let expected = REQUESTS * percent / 100;
        let slack = 36;
        assert!(
            (expected.saturating_sub(slack)..=expected + slack).contains(&last),
            "{path}: {last} of {REQUESTS} mirrored, expected about {expected} ({percent}%)"
        );
    }
}

#[test]
fn a_rule_s_request_and_backend_request_timeouts_answer_504_and_0s_disables_them() {
    // HTTPRouteTimeoutRequest, HTTPRouteTimeoutBackendRequest: 500ms
    // timeouts; the backend answers `?delay=` late (3s here, the
    // conformance's 1s with more room under load): 504; with "0s" no
    // timeout, the late answer arrives (200).
    let Some(conformance) = Conformance::echoing(
        &["httproute-timeout-request", "httproute-timeout-backend-request"],
        &["same-namespace"],
    ) else {
        return;
    };
    conformance.expect_cases(
        "same-namespace",
        80,
        &[case("/request-timeout"), case("/backend-timeout")],
    );
    let port = conformance.port("same-namespace", 80);
    for (path, status) in [
        ("/request-timeout?delay=3s", 504),
        ("/backend-timeout?delay=3s", 504),
        ("/disable-request-timeout?delay=1s", 200),
        ("/disable-backend-timeout?delay=1s", 200),
    ] {
        let answer = common::exchange(port, "GET", HOST, path, &[]);
        assert_eq!(answer.status, status, "{path}: {answer:?}");
        if status == 200 {
            assert!(answer.body.contains(V1), "{path}: {answer:?}");
        }
    }
}

/// One CORS case of HTTPRouteCORS: the request (path, method, Origin, the
/// preflight's requested method and headers), the statuses allowed, each
/// answer header's allowed values (whitespace ignored) and the headers
/// that must be absent.
struct CorsCase {
    path: &'static str,
    method: &'static str,
    origin: &'static str,
    request_method: Option<&'static str>,
    request_headers: Option<&'static str>,
    statuses: &'static [u16],
    values: Vec<(&'static str, &'static [&'static str])>,
    absent: &'static [&'static str],
}

#[test]
fn cors_filters_answer_preflights_and_mark_answers_as_the_conformance_expects() {
    // HTTPRouteCORS: the expectation table written from the upstream
    // test's cases.
    let Some(conformance) = Conformance::echoing(&["httproute-cors"], &["same-namespace"]) else {
        return;
    };
    conformance.expect_cases("same-namespace", 80, &[case("/cors-1"), case("/cors-2")]);
    let port = conformance.port("same-namespace", 80);
    const PREFLIGHT: &[u16] = &[200, 204];
    const SIMPLE: &[u16] = &[200];
    const CORS_1: &[(&str, &[&str])] = &[
        ("access-control-allow-methods", &["GET,OPTIONS", "OPTIONS,GET"]),
        (
            "access-control-allow-headers",
            &["x-header-1,x-header-2", "x-header-2,x-header-1"],
        ),
        (
            "access-control-expose-headers",
            &["x-header-3,x-header-4", "x-header-4,x-header-3"],
        ),
        ("access-control-max-age", &["3600"]),
        ("access-control-allow-credentials", &["true"]),
    ];
    let preflight = |path, origin, method, headers| CorsCase {
        path,
        method: "OPTIONS",
        origin,
        request_method: Some(method),
        request_headers: headers,
        statuses: PREFLIGHT,
        values: Vec::new(),
        absent: &[],
    };
    let simple = |path, method, origin| CorsCase {
        path,
        method,
        origin,
        request_method: None,
        request_headers: None,
        statuses: SIMPLE,
        values: Vec::new(),
        absent: &[],
    };
    let cors_1 = |origin: &'static [&'static str]| {
        let mut values = vec![("access-control-allow-origin", origin)];
        values.extend_from_slice(CORS_1);
        values
    };
    let headers_1_2 = Some("x-header-1, x-header-2");
    let cases = [
        // Exact and wildcard origins (the wildcard takes any number of
        // labels), and one no pattern matches.
        CorsCase {
            values: cors_1(&["https://www.foo.com"]),
            ..preflight("/cors-1", "https://www.foo.com", "GET", headers_1_2)
        },
        CorsCase {
            values: cors_1(&["https://www.bar.com"]),
            ..preflight("/cors-1", "https://www.bar.com", "GET", headers_1_2)
        },
        CorsCase {
            values: cors_1(&["https://xpto.www.bar.com"]),
            ..preflight("/cors-1", "https://xpto.www.bar.com", "GET", headers_1_2)
        },
        CorsCase {
            statuses: &[200, 204, 403],
            absent: &["access-control-allow-origin"],
            ..preflight("/cors-1", "https://foobar.com", "GET", None)
        },
        CorsCase {
            values: vec![("access-control-allow-origin", &["https://www.foo.com"])],
            ..simple("/cors-1", "GET", "https://www.foo.com")
        },
        CorsCase {
            values: vec![("access-control-allow-origin", &["https://www.bar.com"])],
            ..simple("/cors-1", "GET", "https://www.bar.com")
        },
        CorsCase {
            statuses: &[200, 204, 403],
            absent: &["access-control-allow-origin"],
            ..simple("/cors-1", "GET", "https://foobar.com")
        },
        // Any method; no credentials header where allowCredentials is not true.
        CorsCase {
            values: vec![
                ("access-control-allow-methods", &["POST", "*"]),
                ("access-control-allow-origin", &["https://www.foo.com"]),
            ],
            absent: &["access-control-allow-credentials"],
            ..preflight("/cors-2", "https://www.foo.com", "POST", None)
        },
        // Any origin (with or without a port): the origin or "*".
        CorsCase {
            values: vec![
                ("access-control-allow-origin", &["https://foobar.com", "*"]),
                ("access-control-allow-methods", &["PUT"]),
            ],
            absent: &["access-control-allow-credentials"],
            ..preflight("/cors-wildcard-origin", "https://foobar.com", "PUT", None)
        },
        CorsCase {
            values: vec![
                ("access-control-allow-origin", &["https://foobar.com:12345", "*"]),
                ("access-control-allow-methods", &["PUT"]),
            ],
            absent: &["access-control-allow-credentials"],
            ..preflight("/cors-wildcard-origin", "https://foobar.com:12345", "PUT", None)
        },
        CorsCase {
            values: vec![("access-control-allow-origin", &["https://foobar.com:12345", "*"])],
            ..simple("/cors-wildcard-origin", "PUT", "https://foobar.com:12345")
        },
        CorsCase {
            values: vec![("access-control-allow-origin", &["https://foobar.com", "*"])],
            absent: &["access-control-allow-credentials"],
            ..simple("/cors-wildcard-origin", "PUT", "https://foobar.com")
        },
        // Wildcards with credentials answer what was asked, never "*".
        CorsCase {
            values: vec![
                ("access-control-allow-origin", &["https://other.foo.com"]),
                ("access-control-allow-methods", &["PUT"]),
                (
                    "access-control-allow-headers",
                    &["x-header-1,x-header-2", "x-header-2,x-header-1"],
                ),
                ("access-control-allow-credentials", &["true"]),
            ],
            ..preflight(
                "/cors-wildcard-methods-headers",
                "https://other.foo.com",
                "PUT",
                headers_1_2,
            )
        },
        CorsCase {
            values: vec![
                ("access-control-allow-methods", &["PUT", "*"]),
                (
                    "access-control-allow-headers",
                    &["x-header-1,x-header-2", "x-header-2,x-header-1", "*"],
                ),
            ],
            absent: &["access-control-allow-credentials"],
            ..preflight(
                "/cors-wildcard-methods-headers-unauth",
                "https://other.foo.com",
                "PUT",
                headers_1_2,
            )
        },
        CorsCase {
            values: vec![("access-control-allow-credentials", &["true"])],
            ..simple("/cors-wildcard-methods-headers", "GET", "https://other.foo.com")
        },
        CorsCase {
            absent: &["access-control-allow-credentials"],
            ..simple(
                "/cors-wildcard-methods-headers-unauth",
                "GET",
                "https://other.foo.com",
            )
        },
    ];
    let mut failures = Vec::new();
    for case in &cases {
        let mut headers = vec![("origin", case.origin)];
        headers.extend(case.request_method.map(|m| ("access-control-request-method", m)));
        headers.extend(
            case.request_headers
                .map(|h| ("access-control-request-headers", h)),
        );
        let answer = common::exchange(port, case.method, HOST, case.path, &headers);
        let said = format!("{} {} from {}: {answer:?}", case.method, case.path, case.origin);
        if !case.statuses.contains(&answer.status) {
            failures.push(format!("status {}: {said}", answer.status));
        }
        for (name, allowed) in &case.values {
            let value: Option<String> = answer.headers.get(*name).map(|v| v.split_whitespace().collect());
            if !value.as_deref().is_some_and(|v| allowed.contains(&v)) {
                failures.push(format!("{name} {value:?}, expected one of {allowed:?}: {said}"));
            }
        }
        for name in case.absent {
            if answer.headers.contains_key(*name) {
                failures.push(format!("{name} present: {said}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn listeners_of_one_port_are_isolated_with_and_without_route_hostnames() {
    // GatewayHTTPListenerIsolation: four HTTP listeners on port 80 (no
    // hostname, *.example.com, *.foo.example.com, abc.foo.example.com),
    // a route on each; a request is served only by the routes of the
    // listener that matches its host most specifically. The same table
    // holds when every route names all four hostnames (the listeners'
    // hostnames narrow them).
    let gateways = [
        "http-listener-isolation",
        "http-listener-isolation-with-hostname-intersection",
    ];
    let Some(conformance) = Conformance::with(
        &[
            "gateway-http-listener-isolation",
            "gateway-http-listener-isolation-with-hostname-intersection",
        ],
        &gateways,
    ) else {
        return;
    };
    let paths = [
        "/empty-hostname",
        "/wildcard-example-com",
        "/wildcard-foo-example-com",
        "/abc-foo-example-com",
    ];
    let hosts = [
        "bar.com",
        "bar.example.com",
        "bar.foo.example.com",
        "abc.foo.example.com",
    ];
    // Host i is served by the route at path i only.
    let mut cases = Vec::new();
    for (i, host) in hosts.iter().enumerate() {
        for (j, path) in paths.iter().enumerate() {
            cases.push(match i == j {
                true => (*host, *path, V1, 200),
                false => (*host, *path, "", 404),
            });
        }
    }
    for gateway in gateways {
        conformance.expect(gateway, &cases);
    }
}

#[test]
fn headers_and_path_kinds_choose_among_rules() {
    // HTTPRouteHeaderMatching: every header of a match must hold; the rule
    // with more header matches wins.
    let Some(conformance) = Conformance::with(&["httproute-header-matching"], &["same-namespace"]) else {
        return;
    };
    conformance.expect_requests(
        "same-namespace",
        &[
            to("/", V1).header("Version", "one"),
            to("/", V2).header("Version", "two"),
            to("/", V1).header("Version", "two").header("Color", "orange"),
            to("/", V2).header("Version", "two").header("Color", "blue"),
            answered("/", 404).header("Color", "orange"),
            answered("/", 404).header("Some-Other-Header", "one"),
            to("/", V1).header("Color", "blue"),
            to("/", V1).header("Color", "green"),
            to("/", V2).header("Color", "red"),
            to("/", V2).header("Color", "yellow"),
            answered("/", 404).header("Color", "purple"),
        ],
    );
    drop(conformance);

    // HTTPRoutePathMatchOrder: exact before prefix, longer prefixes first.
    let Some(conformance) = Conformance::with(&["httproute-path-match-order"], &["same-namespace"]) else {
        return;
    };
    conformance.expect_requests(
        "same-namespace",
        &[
            to("/match/exact/one", V3),
            to("/match/exact", V2),
            to("/match", V1),
            to("/match/prefix/one/any", V2),
            to("/match/prefix/any", V1),
            to("/match/any", V3),
        ],
    );
}

#[test]
fn backends_share_a_rules_requests_by_their_weights() {
    // HTTPRouteWeight: 70, 30 and 0. Of 1,000 requests each backend's
    // share is within 5 points of its weight, and a weight of 0 gets
    // none. (5 points are 3.4 standard deviations of a 70/30 share of
    // 1,000 requests: about one run in 1,500 fails by chance; of 500
    // requests, one in 70 would.)
    let Some(conformance) = Conformance::with(&["httproute-weight"], &["same-namespace"]) else {
        return;
    };
    let port = conformance.port("same-namespace", 80);
    eventually("the weighted route to be served", || {
        common::get_by_length(port, HOST, "/").0 == 200
    });
    const REQUESTS: usize = 1000;
    let mut answered = BTreeMap::<String, usize>::new();
    for _ in 0..REQUESTS {
        let (status, backend) = common::get_by_length(port, HOST, "/");
        assert_eq!(status, 200, "{backend}");
        *answered.entry(backend).or_default() += 1;
    }
    eprintln!("{REQUESTS} requests answered by {answered:?}");
    // In thousandths.
    let share = |backend: &str| answered.get(backend).copied().unwrap_or(0) * 1000 / REQUESTS;
    for (backend, weight) in [(V1, 700), (V2, 300)] {
        assert!(
            share(backend).abs_diff(weight) <= 50,
            "{backend}: {}/1000, its weight {weight}/1000: {answered:?}",
            share(backend)
        );
    }
    assert_eq!(answered.get(V3), None, "a weight of 0: {answered:?}");
    assert_eq!(answered.values().sum::<usize>(), REQUESTS, "{answered:?}");
}

#[test]
fn a_backend_that_cannot_be_resolved_is_answered_500() {
    // One manifest at a time (each route takes `/`):
    // HTTPRouteInvalidNonExistentBackendRef, HTTPRouteInvalidBackendRefUnknownKind,
    // HTTPRoutePartiallyInvalidViaInvalidReferenceGrant (its other rule's
    // backend, granted, answers).
    // Per manifest: its route, ResolvedRefs's reason, and the requests.
    type Requests<'a> = Vec<(&'a str, &'a str, &'a str, u16)>;
    let cases: [(&str, &str, &str, Requests); 3] = [
        (
            "httproute-invalid-nonexistent-backendref",
            "invalid-nonexistent-backend-ref",
            "BackendNotFound",
            vec![(HOST, "/", "", 500)],
        ),
        (
            "httproute-invalid-backendref-unknown-kind",
            "invalid-backend-ref-unknown-kind",
            "InvalidKind",
            vec![(HOST, "/v2", "", 500)],
        ),
        (
            "httproute-partially-invalid-via-invalid-reference-grant",
            "invalid-reference-grant",
            "RefNotPermitted",
            vec![(HOST, "/v2", "", 500), (HOST, "/", "app-backend-v1", 200)],
        ),
    ];
    for (manifest, route, reason, requests) in cases {
        let Some(conformance) = Conformance::with(&[manifest], &["same-namespace"]) else {
            return;
        };
        conformance.expect("same-namespace", &requests);
        assert_eq!(
            conformance.route_conditions(INFRA, route),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "False", reason)
            ],
            "{manifest}"
        );
    }
}

#[test]
fn routes_that_no_listener_takes_are_not_attached() {
    // HTTPRouteDisallowedKind (an HTTPRoute for a listener that takes
    // TLSRoutes only), HTTPRouteInvalidParentRefNotMatchingListenerPort,
    // HTTPRouteInvalidParentRefNotMatchingSectionName (their routes would
    // take `/`), beside HTTPRoutePathMatchOrder's route, which is
    // attached: its answers show the router has the Gateway's routes.
    let Some(conformance) = Conformance::with(
        &[
            "httproute-disallowed-kind",
            "httproute-invalid-parentref-not-matching-listener-port",
            "httproute-invalid-parentref-not-matching-section-name",
            "httproute-path-match-order",
        ],
        &["same-namespace"],
    ) else {
        return;
    };
    conformance.expect(
        "same-namespace",
        &[
            (HOST, "/match", V1, 200),
            (HOST, "/", "", 404),
            (HOST, "/any", "", 404),
        ],
    );
    assert_eq!(
        conformance.route_conditions(INFRA, "disallowed-kind"),
        [
            said("Accepted", "False", "NotAllowedByListeners"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
    for route in [
        "httproute-listener-not-matching-route-port",
        "httproute-listener-not-matching-section-name",
    ] {
        assert_eq!(
            conformance.route_conditions(INFRA, route),
            [
                said("Accepted", "False", "NoMatchingParent"),
                said("ResolvedRefs", "True", "ResolvedRefs")
            ],
            "{route}"
        );
    }
    assert_eq!(conformance.attached_routes("tlsroutes-only"), [Value::from(0)]);
    assert_eq!(
        conformance.attached_routes("same-namespace"),
        [Value::from(1)],
        "path-matching-order only"
    );
}

#[test]
fn a_route_for_a_port_is_served_by_that_ports_listeners_only() {
    // HTTPRouteListenerPortMatching: routes for ports 80, 8080 and 8090
    // (the last for one listener of two), each requested with the port in
    // its host, as a client of that port writes it.
    let gateway = "httproute-listener-port-matching";
    let Some(conformance) = Conformance::with(&[gateway], &[gateway]) else {
        return;
    };
    let port_8080 = conformance.port(gateway, 8080);
    let port_8090 = conformance.port(gateway, 8090);
    let foo_8080 = format!("foo.com:{port_8080}");
    let bar_8080 = format!("bar.com:{port_8080}");
    let foo_8090 = format!("foo.com:{port_8090}");
    let bar_8090 = format!("bar.com:{port_8090}");
    conformance.expect_on(gateway, 80, &[("foo.com", "/", V1, 200)]);
    conformance.expect_on(
        gateway,
        8080,
        &[(&foo_8080, "/", V2, 200), (&bar_8080, "/", V2, 200)],
    );
    conformance.expect_on(
        gateway,
        8090,
        &[(&foo_8090, "/", V3, 200), (&bar_8090, "/", "", 404)],
    );
    for route in ["backend-v1", "backend-v2", "backend-v3"] {
        assert_eq!(
            conformance.route_conditions(INFRA, route),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "True", "ResolvedRefs")
            ],
            "{route}"
        );
    }
}

#[test]
fn a_changed_route_is_served_and_its_status_is_of_its_new_generation() {
    // HTTPRouteObservedGenerationBump: the route's backend changed from
    // infra-backend-v1 to infra-backend-v2.
    let manifest = "httproute-observed-generation-bump";
    let Some(conformance) = Conformance::with(&[manifest], &["same-namespace"]) else {
        return;
    };
    let path =
        format!("/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/httproutes/observed-generation-bump");
    // The route's generation, once every condition is of it.
    let current = |what: &str| {
        let mut generation = Value::Null;
        eventually(what, || {
            let route = conformance.object(&path);
            generation = route["metadata"]["generation"].clone();
            let conditions = &route["status"]["parents"][0]["conditions"];
            triples(conditions)
                == [
                    said("Accepted", "True", "Accepted"),
                    said("ResolvedRefs", "True", "ResolvedRefs"),
                ]
                && conditions
                    .as_array()
                    .into_iter()
                    .flatten()
                    .all(|c| c["observedGeneration"] == generation)
        });
        generation
            .as_i64()
            .unwrap_or_else(|| panic!("no generation: {generation}"))
    };
    conformance.expect("same-namespace", &[(HOST, "/", V1, 200)]);
    let before = current("the route's conditions of its generation");

    let corpus = pilot_test_support::corpus("gateway-api").expect("read above");
    let text =
        std::fs::read_to_string(corpus.join(format!("gwapi_conformance.tests.{manifest}.yaml"))).unwrap();
    assert!(text.contains("name: infra-backend-v1"), "{text}");
    conformance.apply(&text.replace("name: infra-backend-v1", "name: infra-backend-v2"));
    conformance.expect("same-namespace", &[(HOST, "/", V2, 200)]);
    let after = current("the changed route's conditions of its new generation");
    assert!(after > before, "generation {before}, then {after}");
}

/// The hostnames past which a listener's routes are one route
/// configuration per host (pilot-xds's `SCOPED_MIN_HOSTS`; the test checks
/// that Envoy holds them so).
const SCOPED_HOSTS: usize = 100;

#[test]
fn a_listener_with_many_hostnames_routes_each_host_by_its_own_scope() {
    let Some(conformance) = Conformance::with(&[], &["same-namespace"]) else {
        return;
    };
    let route = |i: usize, backend: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
             metadata: {{name: scoped-{i}, namespace: {INFRA}}}\n\
             spec:\n  parentRefs: [{{name: same-namespace}}]\n  hostnames: [scoped-{i}.example.com]\n  \
             rules:\n  - backendRefs: [{{name: {backend}, port: 8080}}]\n"
        )
    };
    let backend = |i: usize| if i.is_multiple_of(2) { V1 } else { V2 };
    let routes: Vec<String> = (0..SCOPED_HOSTS).map(|i| route(i, backend(i))).collect();
    conformance.apply(&routes.join("---\n"));
    let hosts: Vec<String> = (0..SCOPED_HOSTS)
        .map(|i| format!("scoped-{i}.example.com"))
        .collect();
    let mut cases: Vec<(&str, &str, &str, u16)> = hosts
        .iter()
        .enumerate()
        .map(|(i, host)| (host.as_str(), "/", backend(i), 200))
        .collect();
    // Domains match whatever their case and with any port; a host no
    // route names has no route.
    cases.extend([
        ("SCOPED-3.Example.COM", "/", V2, 200),
        ("scoped-4.example.com:8080", "/", V1, 200),
        ("Scoped-5.example.com:80", "/", V2, 200),
        ("scoped.example.com", "/", "", 404),
        ("scoped-4.example.com.", "/", "", 404),
    ]);
    conformance.expect("same-namespace", &cases);
    let router = conformance.router("same-namespace");
    let (_, dump) = common::get(router.admin_port, "/config_dump");
    assert!(
        dump.contains("ScopedRoutesConfigDump") && dump.contains("\"scoped-42.example.com\""),
        "Envoy holds no scope per host:\n{dump}"
    );

    // Requests to two hosts no change touches, meanwhile.
    let port = conformance.port("same-namespace", 80);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let (mut sent, mut failed) = (0u32, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for (host, backend) in [("scoped-0.example.com", V1), ("scoped-1.example.com", V2)] {
                    sent += 1;
                    let answer = common::get_by_length(port, host, "/");
                    if answer != (200, backend.to_string()) {
                        failed.push((host, answer));
                    }
                }
            }
            (sent, failed)
        })
    };
    // A route changed, one added (a new host: a new scope), one deleted.
    conformance.apply(&route(7, V3));
    conformance.expect("same-namespace", &[("scoped-7.example.com", "/", V3, 200)]);
    conformance.apply(&route(SCOPED_HOSTS, V3));
    let added = format!("scoped-{SCOPED_HOSTS}.example.com");
    conformance.expect(
        "same-namespace",
        &[
            (added.as_str(), "/", V3, 200),
            ("scoped-7.example.com", "/", V3, 200),
        ],
    );
    conformance.delete(&route(3, V2));
    conformance.expect(
        "same-namespace",
        &[
            ("scoped-3.example.com", "/", "", 404),
            (added.as_str(), "/", V3, 200),
        ],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (sent, failed) = load.join().unwrap();
    assert!(
        sent > 0 && failed.is_empty(),
        "{} of {sent} requests failed: {failed:?}",
        failed.len()
    );
}

#[test]
fn a_changed_gateway_and_gateway_class_say_their_new_generation() {
    // GatewayObservedGenerationBump and GatewayClassObservedGenerationBump:
    // each condition (and each listener's) carries the generation it was
    // written for; a changed spec bumps the generation, and the status
    // follows it (a listener added gets its own status).
    let gateway = "gateway-observed-generation-bump";
    let class = "gatewayclass-observed-generation-bump";
    let Some(conformance) = Conformance::with(&[gateway], &[]) else {
        return;
    };
    let corpus = pilot_test_support::corpus("gateway-api").expect("read above");
    let manifest = |name: &str| {
        std::fs::read_to_string(corpus.join(format!("gwapi_conformance.tests.{name}.yaml"))).unwrap()
    };
    // The class as written names another controller; pilot answers for
    // its own only.
    let class_text = manifest(class);
    assert!(
        class_text.contains("controllerName: \"example.com/gateway-controller\""),
        "{class_text}"
    );
    let class_text = class_text.replace("example.com/gateway-controller", "pilot.io/gateway-controller");
    conformance.apply(&class_text);

    let gateway_path = format!("/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/gateways/{gateway}");
    let class_path = format!("/apis/gateway.networking.k8s.io/v1/gatewayclasses/{class}");
    // The object's generation once every condition is of it and its
    // listeners are `listeners` (in order).
    let current = |path: &str, listeners: &[&str], what: &str| {
        let mut generation = Value::Null;
        eventually(what, || {
            let object = conformance.object(path);
            generation = object["metadata"]["generation"].clone();
            let status = &object["status"];
            let of_generation = |conditions: &Value| {
                conditions
                    .as_array()
                    .is_some_and(|c| !c.is_empty() && c.iter().all(|c| c["observedGeneration"] == generation))
            };
            let named: Vec<&str> = status["listeners"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|l| l["name"].as_str())
                .collect();
            of_generation(&status["conditions"])
                && named == listeners
                && status["listeners"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .all(|l| of_generation(&l["conditions"]))
        });
        generation
            .as_i64()
            .unwrap_or_else(|| panic!("{path}: no generation: {generation}"))
    };

    let before = current(&gateway_path, &["http"], "the Gateway's status of its generation");
    let gateway_text = manifest(gateway);
    assert!(gateway_text.contains("      protocol: HTTP\n"), "{gateway_text}");
    // A listener more, after the last.
    conformance.apply(&format!(
        "{}\n    - name: alternate\n      port: 8080\n      protocol: HTTP\n",
        gateway_text.trim_end()
    ));
    let after = current(
        &gateway_path,
        &["http", "alternate"],
        "the changed Gateway's status of its new generation",
    );
    assert!(after > before, "generation {before}, then {after}");

    let before = current(&class_path, &[], "the GatewayClass's status of its generation");
    assert_eq!(
        triples(&conformance.object(&class_path)["status"]["conditions"]),
        [said("Accepted", "True", "Accepted")]
    );
    assert!(class_text.contains("description: \"old\""), "{class_text}");
    conformance.apply(&class_text.replace("description: \"old\"", "description: \"new\""));
    let after = current(
        &class_path,
        &[],
        "the changed GatewayClass's status of its new generation",
    );
    assert!(after > before, "generation {before}, then {after}");
}

#[test]
fn a_gateway_with_the_longest_name_kubernetes_allows_is_reconciled() {
    // GatewayNameMaximumLength: a Gateway named with 253 characters (the
    // most a DNS subdomain name has) is taken as any other: its status is
    // written, accepted, every condition of its generation.
    let manifest = "gateway-name-maximum-length";
    let Some(conformance) = Conformance::with(&[manifest], &[]) else {
        return;
    };
    let corpus = pilot_test_support::corpus("gateway-api").expect("read above");
    let text =
        std::fs::read_to_string(corpus.join(format!("gwapi_conformance.tests.{manifest}.yaml"))).unwrap();
    let name = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("name: "))
        .unwrap_or_else(|| panic!("no name: {text}"));
    assert_eq!(name.len(), 253, "{name}");
    let path = format!("/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/gateways/{name}");
    eventually("the Gateway's status, of its generation", || {
        let object = conformance.object(&path);
        let generation = &object["metadata"]["generation"];
        let conditions = &object["status"]["conditions"];
        let of_generation = conditions
            .as_array()
            .is_some_and(|c| !c.is_empty() && c.iter().all(|c| c["observedGeneration"] == *generation));
        of_generation && triples(conditions).contains(&said("Accepted", "True", "Accepted"))
    });
}

#[test]
fn a_parent_refs_port_moves_with_its_listener() {
    let ports = BTreeMap::from([
        (("gw".to_string(), 80), 41000),
        (("other".to_string(), 80), 42000),
    ]);
    let route = "\
spec:
  parentRefs:
  - name: gw
    port: 80
  - name: other
    sectionName: http
    port: 80
  - name: gw
    port: 81
  rules:
  - backendRefs:
    - name: gw
      port: 80";
    assert_eq!(
        move_parent_ports(route, &ports),
        "\
spec:
  parentRefs:
  - name: gw
    port: 41000
  - name: other
    sectionName: http
    port: 42000
  - name: gw
    port: 81
  rules:
  - backendRefs:
    - name: gw
      port: 80"
    );
}

#[test]
fn a_redirects_port_follows_its_scheme_or_its_listener() {
    // HTTPRouteRedirectPortAndScheme, its listeners on 80, 8080 and 443
    // (ending TLS). A port written is kept; none with a scheme is the
    // scheme's own; none without one is the listener's, its scheme the
    // request's (https on the TLS listener).
    let Some(conformance) = Conformance::echoing(
        &["httproute-redirect-port-and-scheme"],
        &[
            "same-namespace",
            "same-namespace-with-http-listener-on-8080",
            "same-namespace-with-https-listener",
        ],
    ) else {
        return;
    };
    conformance.expect_cases_tls(
        "same-namespace-with-https-listener",
        443,
        "example.org",
        &with_host_ports(vec![
            case("/scheme-nil-and-port-nil").redirect(
                302,
                "https",
                "example.org",
                At::Listener,
                "/scheme-nil-and-port-nil",
            ),
            case("/scheme-nil-and-port-443").redirect(
                302,
                "https",
                "example.org",
                At::Scheme,
                "/scheme-nil-and-port-443",
            ),
            case("/scheme-nil-and-port-8443").redirect(
                302,
                "https",
                "example.org",
                At::Port(8443),
                "/scheme-nil-and-port-8443",
            ),
            case("/scheme-http-and-port-nil").redirect(
                302,
                "http",
                "example.org",
                At::Scheme,
                "/scheme-http-and-port-nil",
            ),
            case("/scheme-http-and-port-80").redirect(
                302,
                "http",
                "example.org",
                At::Scheme,
                "/scheme-http-and-port-80",
            ),
            case("/scheme-http-and-port-8080").redirect(
                302,
                "http",
                "example.org",
                At::Port(8080),
                "/scheme-http-and-port-8080",
            ),
        ]),
    );
    conformance.expect_cases(
        "same-namespace",
        80,
        &with_host_ports(vec![
            case("/scheme-nil-and-port-nil").redirect(
                302,
                "http",
                "example.org",
                At::Listener,
                "/scheme-nil-and-port-nil",
            ),
            case("/scheme-nil-and-port-80").redirect(
                302,
                "http",
                "example.org",
                At::Scheme,
                "/scheme-nil-and-port-80",
            ),
            case("/scheme-nil-and-port-8080").redirect(
                302,
                "http",
                "example.org",
                At::Port(8080),
                "/scheme-nil-and-port-8080",
            ),
            case("/scheme-https-and-port-nil").redirect(
                302,
                "https",
                "example.org",
                At::Scheme,
                "/scheme-https-and-port-nil",
            ),
            case("/scheme-https-and-port-443").redirect(
                302,
                "https",
                "example.org",
                At::Scheme,
                "/scheme-https-and-port-443",
            ),
            case("/scheme-https-and-port-8443").redirect(
                302,
                "https",
                "example.org",
                At::Port(8443),
                "/scheme-https-and-port-8443",
            ),
        ]),
    );
    conformance.expect_cases(
        "same-namespace-with-http-listener-on-8080",
        8080,
        &with_host_ports(vec![
            case("/scheme-nil-and-port-nil").redirect(
                302,
                "http",
                "example.org",
                At::Listener,
                "/scheme-nil-and-port-nil",
            ),
            case("/scheme-nil-and-port-80").redirect(
                302,
                "http",
                "example.org",
                At::Scheme,
                "/scheme-nil-and-port-80",
            ),
            case("/scheme-https-and-port-nil").redirect(
                302,
                "https",
                "example.org",
                At::Scheme,
                "/scheme-https-and-port-nil",
            ),
        ]),
    );
    for (gateway, route) in [
        ("same-namespace", "http-route-for-listener-on-port-80"),
        (
            "same-namespace-with-http-listener-on-8080",
            "http-route-for-listener-on-port-8080",
        ),
        (
            "same-namespace-with-https-listener",
            "http-route-for-listener-on-port-443",
        ),
    ] {
        assert_eq!(
            conformance.route_conditions(INFRA, route),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "True", "ResolvedRefs")
            ],
            "{gateway}"
        );
    }
}

#[test]
fn each_weighted_backends_own_header_modifier_applies_to_what_it_is_sent() {
    // HTTPRouteRequestHeaderModifierBackendWeights: two backends of equal
    // weight, each setting `Backend` to its own name: of 100 requests,
    // each backend sees its own name, once.
    let Some(conformance) = Conformance::echoing(
        &["httproute-request-header-modifier-backend-weights"],
        &["same-namespace"],
    ) else {
        return;
    };
    let port = conformance.port("same-namespace", 80);
    eventually("the weighted route to be served", || {
        common::exchange(port, "GET", HOST, "/", &[]).status == 200
    });
    let mut answered = BTreeMap::<String, usize>::new();
    for _ in 0..100 {
        let answer = common::exchange(port, "GET", HOST, "/", &[]);
        assert_eq!(answer.status, 200, "{answer:?}");
        let echo: Value = serde_json::from_str(&answer.body).unwrap();
        let backend = echo["backend"].as_str().unwrap_or_default().to_string();
        assert_eq!(echo["headers"]["backend"], backend.as_str(), "{echo}");
        *answered.entry(backend).or_default() += 1;
    }
    // Both take requests (all 100 to one of two equal weights: 1 in 2^99).
    assert_eq!(answered.keys().collect::<Vec<_>>(), [V1, V2], "{answered:?}");
    assert_eq!(
        conformance.route_conditions(INFRA, "request-header-modifier-backend-weights"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

/// `(type, status, reason)` of the conditions of listener `listener` of
/// Gateway `gateway` (in the infra namespace), once its status lists
/// them.
fn listener_conditions(
    conformance: &Conformance,
    gateway: &str,
    listener: &str,
) -> Vec<(String, String, String)> {
    let path = format!("/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/gateways/{gateway}");
    let mut said = Vec::new();
    eventually(&format!("the status of listener {listener} of {gateway}"), || {
        let object = conformance.object(&path);
        said = object["status"]["listeners"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|l| l["name"] == listener)
            .map(|l| triples(&l["conditions"]))
            .unwrap_or_default();
        !said.is_empty()
    });
    said.sort();
    said
}

#[test]
fn an_https_listener_terminates_tls_with_its_secret_and_follows_its_rotation() {
    // HTTPRouteHTTPSListener: TLS terminated with the listener's Secret
    // (from --credentials-dir, sent over SDS), each hostname routed by
    // its own listener; a name no route holds is answered 404.
    let gateway = "same-namespace-with-https-listener";
    let Some(conformance) = Conformance::with(&["httproute-https-listener"], &[gateway]) else {
        return;
    };
    let get = |sni: &str, host: &str| conformance.https_get(gateway, 443, sni, host, "/");
    let certificate = "tls-checks-certificate";
    let expected = |backend: &str| Some((200, backend.to_string(), certificate.to_string()));
    eventually("example.org served over TLS", || {
        get("example.org", "example.org") == expected(V1)
    });
    assert_eq!(get("example.org", "example.org"), expected(V1));
    assert_eq!(get("second-example.org", "second-example.org"), expected(V2));
    assert_eq!(
        get("unknown-example.org", "unknown-example.org"),
        Some((404, String::new(), certificate.to_string()))
    );
    for listener in ["https", "https-with-hostname"] {
        assert_eq!(
            listener_conditions(&conformance, gateway, listener),
            [
                said("Accepted", "True", "Accepted"),
                said("Conflicted", "False", "NoConflicts"),
                said("Programmed", "True", "Programmed"),
                said("ResolvedRefs", "True", "ResolvedRefs"),
            ],
            "{listener}"
        );
    }
    for route in ["httproute-https-test", "httproute-https-test-no-hostname"] {
        assert_eq!(
            conformance.route_conditions(INFRA, route),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "True", "ResolvedRefs")
            ],
            "{route}"
        );
    }

    // The Secret rotated: the router presents the new certificate without
    // a restart, and no request fails meanwhile.
    conformance.rotate(
        INFRA,
        certificate,
        "rotated-certificate",
        "DNS:example.org,DNS:second-example.org,DNS:unknown-example.org,DNS:*.wildcard.org",
    );
    let mut failed = Vec::new();
    eventually("the rotated certificate presented", || {
        let answer = get("example.org", "example.org");
        match &answer {
            Some((200, backend, subject)) if backend == V1 => subject == "rotated-certificate",
            _ => {
                failed.push(answer);
                false
            }
        }
    });
    assert!(
        failed.is_empty(),
        "requests failed during the rotation: {failed:?}"
    );
}

#[test]
fn a_certificate_of_another_namespace_is_used_under_a_reference_grant_only() {
    // GatewaySecretReferenceGrantSpecific, then
    // GatewaySecretMissingReferenceGrant: the listener's Secret is in the
    // web namespace; the router (of the infra namespace) is sent it while
    // the ReferenceGrant there lets infra's Gateways refer to it.
    let gateway = "gateway-secret-reference-grant-specific";
    let Some(conformance) = Conformance::with(&[gateway], &[gateway]) else {
        return;
    };
    conformance.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
         metadata: {{name: to-v1, namespace: {INFRA}}}\n\
         spec:\n  parentRefs: [{{name: {gateway}}}]\n  hostnames: [example.org]\n  \
         rules: [{{backendRefs: [{{name: {V1}, port: 8080}}]}}]\n"
    ));
    let get = || conformance.https_get(gateway, 443, "example.org", "example.org", "/");
    let served = Some((200, V1.to_string(), "certificate".to_string()));
    eventually("example.org served with the web namespace's certificate", || {
        get() == served
    });
    assert_eq!(
        listener_conditions(&conformance, gateway, "https"),
        [
            said("Accepted", "True", "Accepted"),
            said("Conflicted", "False", "NoConflicts"),
            said("Programmed", "True", "Programmed"),
            said("ResolvedRefs", "True", "ResolvedRefs"),
        ]
    );

    // The grant now names another Secret: the reference is not permitted,
    // the listener is not served, and its status says why.
    conformance.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\n\
         metadata: {{name: reference-grant-specific, namespace: {WEB}}}\n\
         spec:\n  from: [{{group: gateway.networking.k8s.io, kind: Gateway, namespace: {INFRA}}}]\n  \
         to: [{{group: \"\", kind: Secret, name: not-the-certificate}}]\n"
    ));
    eventually("the listener no longer served", || get().is_none());
    eventually(
        "the listener's status to say the reference is not permitted",
        || {
            listener_conditions(&conformance, gateway, "https")
                == [
                    said("Accepted", "True", "Accepted"),
                    said("Conflicted", "False", "NoConflicts"),
                    said("Programmed", "False", "Invalid"),
                    said("ResolvedRefs", "False", "RefNotPermitted"),
                ]
        },
    );
}

#[test]
fn listeners_whose_certificates_cannot_be_used_say_why() {
    // GatewayInvalidTLSConfiguration: a Secret that does not exist, one
    // whose files are not a certificate and key (written malformed to
    // --credentials-dir: the corpus leaves Secrets out), a reference of
    // another group and of another kind: each listener's ResolvedRefs is
    // False with InvalidCertificateRef, and it is not Programmed.
    let Some(conformance) = Conformance::with(&["gateway-invalid-tls-configuration"], &[]) else {
        return;
    };
    conformance.write_secret(
        INFRA,
        "malformed-certificate",
        &[("tls.crt", "not a certificate"), ("tls.key", "not a key")],
    );
    // A valid Secret written after it, and a listener naming it: once that
    // listener's reference resolves, the directory was read with both.
    conformance.rotate(
        INFRA,
        "probe-certificate",
        "probe-certificate",
        "DNS:probe.example.org",
    );
    conformance.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: probe, namespace: {INFRA}}}\n\
         spec:\n  gatewayClassName: gateway-conformance\n  listeners:\n  \
         - {{name: https, port: 443, protocol: HTTPS, tls: {{certificateRefs: [{{name: probe-certificate}}]}}}}\n"
    ));
    eventually("the probe's certificate to be read", || {
        listener_conditions(&conformance, "probe", "https").contains(&said(
            "ResolvedRefs",
            "True",
            "ResolvedRefs",
        ))
    });
    for gateway in [
        "gateway-certificate-nonexistent-secret",
        "gateway-certificate-malformed-secret",
        "gateway-certificate-unsupported-group",
        "gateway-certificate-unsupported-kind",
    ] {
        assert_eq!(
            listener_conditions(&conformance, gateway, "https"),
            [
                said("Accepted", "True", "Accepted"),
                said("Conflicted", "False", "NoConflicts"),
                said("Programmed", "False", "Invalid"),
                said("ResolvedRefs", "False", "InvalidCertificateRef"),
            ],
            "{gateway}"
        );
    }
}

#[test]
fn a_listener_whose_secret_is_missing_is_left_out_until_the_secret_comes() {
    // GatewayInvalidTLSConfiguration's listener naming a Secret that does
    // not exist, its Gateway given an HTTP listener beside it. The router
    // is not held waiting for the Secret: the HTTP listener serves, and
    // the HTTPS listener's port refuses connections (no listener, not
    // one Envoy holds until its initial fetch of the secret times out,
    // then serves without a certificate). Once the Secret is written,
    // the listener serves with it, and its status says so.
    let gateway = "gateway-certificate-nonexistent-secret";
    let Some(conformance) = Conformance::with(&["gateway-invalid-tls-configuration"], &[gateway]) else {
        return;
    };
    let https = conformance.port(gateway, 443);
    let http = common::free_port();
    conformance.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {gateway}, namespace: {INFRA}}}\n\
         spec:\n  gatewayClassName: gateway-conformance\n  listeners:\n  \
         - {{name: https, port: {https}, protocol: HTTPS, allowedRoutes: {{namespaces: {{from: All}}}}, \
         tls: {{certificateRefs: [{{group: \"\", kind: Secret, name: nonexistent-certificate}}]}}}}\n  \
         - {{name: http, port: {http}, protocol: HTTP}}\n\
         ---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: to-v1, namespace: {INFRA}}}\n\
         spec:\n  parentRefs: [{{name: {gateway}}}]\n  hostnames: [example.org]\n  \
         rules: [{{backendRefs: [{{name: {V1}, port: 8080}}]}}]\n"
    ));
    eventually("the HTTP listener beside it to serve", || {
        common::get_by_length(http, "example.org", "/") == (200, V1.to_string())
    });
    let router = conformance.router(gateway);
    let (_, listeners) = common::get(router.admin_port, "/config_dump?resource=dynamic_listeners");
    assert!(
        listeners.contains(&format!("0.0.0.0_{http}")) && !listeners.contains(&format!("0.0.0.0_{https}")),
        "the HTTPS listener without its Secret was sent: {listeners}"
    );
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", https)).is_err(),
        "the HTTPS listener's port accepted a connection without a certificate to serve"
    );
    assert_eq!(
        listener_conditions(&conformance, gateway, "https"),
        [
            said("Accepted", "True", "Accepted"),
            said("Conflicted", "False", "NoConflicts"),
            said("Programmed", "False", "Invalid"),
            said("ResolvedRefs", "False", "InvalidCertificateRef"),
        ]
    );

    conformance.rotate(
        INFRA,
        "nonexistent-certificate",
        "written-later",
        "DNS:example.org",
    );
    eventually("the HTTPS listener served with the Secret written", || {
        conformance.https_get(gateway, 443, "example.org", "example.org", "/")
            == Some((200, V1.to_string(), "written-later".to_string()))
    });
    eventually("the HTTPS listener's status to say it is programmed", || {
        listener_conditions(&conformance, gateway, "https")
            == [
                said("Accepted", "True", "Accepted"),
                said("Conflicted", "False", "NoConflicts"),
                said("Programmed", "True", "Programmed"),
                said("ResolvedRefs", "True", "ResolvedRefs"),
            ]
    });
    // The HTTP listener kept serving.
    assert_eq!(
        common::get_by_length(http, "example.org", "/"),
        (200, V1.to_string())
    );
}

#[test]
fn https_listeners_on_one_port_answer_421_for_each_others_hostnames() {
    // HTTPRouteHTTPSListenerDetectMisdirectedRequests: the connection's
    // SNI chooses a listener; a request on it for a hostname another
    // HTTPS listener of the port owns is answered 421, one for a hostname
    // it owns but no route serves 404. (SNI, Host, backend or status.)
    let gateway = "same-namespace-with-https-listener";
    let Some(conformance) = Conformance::with(
        &["httproute-https-listener-detect-misdirected-requests"],
        &[gateway],
    ) else {
        return;
    };
    let cases: [(&str, &str, &str, u16); 15] = [
        ("example.org", "example.org", V1, 200),
        ("example.org", "second-example.org", "", 421),
        ("example.org", "unknown-example.org", "", 404),
        ("second-example.org", "second-example.org", V2, 200),
        ("second-example.org", "example.org", "", 421),
        ("second-example.org", "unknown-example.org", "", 421),
        (
            "third-example.wildcard.org",
            "third-example.wildcard.org",
            V3,
            200,
        ),
        ("third-example.wildcard.org", "fith-example.wildcard.org", V3, 200),
        (
            "third-example.wildcard.org",
            "fourth-example.wildcard.org",
            "",
            421,
        ),
        ("third-example.wildcard.org", "second-example.org", "", 421),
        ("third-example.wildcard.org", "unknown-example.org", "", 421),
        (
            "fourth-example.wildcard.org",
            "fourth-example.wildcard.org",
            V1,
            200,
        ),
        (
            "fourth-example.wildcard.org",
            "fith-example.wildcard.org",
            "",
            421,
        ),
        ("unknown-example.org", "example.org", V1, 200),
        ("unknown-example.org", "unknown-example.org", "", 404),
    ];
    let answered = |(sni, host, backend, status): &(&str, &str, &str, u16)| {
        let got = conformance.https_get(gateway, 443, sni, host, "/detect-misdirected-requests");
        let expected = (
            *status,
            if *status == 200 {
                backend.to_string()
            } else {
                String::new()
            },
        );
        (
            got.map(|(s, b, _)| (s, if s == 200 { b } else { String::new() })) == Some(expected.clone()),
            expected,
        )
    };
    eventually("every misdirected request answered 421", || {
        cases.iter().all(|c| answered(c).0)
    });
    for case in &cases {
        let got = conformance.https_get(gateway, 443, case.0, case.1, "/detect-misdirected-requests");
        assert!(answered(case).0, "{case:?}: {got:?}");
    }
}

#[test]
fn a_backend_tls_policy_connects_to_its_service_over_tls_as_it_says() {
    // BackendTLSPolicy: the Services' backend completes a handshake only
    // for the SNI abc.example.com, with a certificate the test CA signed
    // (the ConfigMap tls-checks-ca-certificate). Its answer is
    // openssl's session page.
    let gateway = "same-namespace";
    let https_gateway = "same-namespace-with-https-listener";
    let Some(conformance) = Conformance::with(
        &[
            "backendtlspolicy",
            "backendtlspolicy-invalid-ca-certificate-ref",
            "backendtlspolicy-invalid-kind",
        ],
        &[gateway, https_gateway],
    ) else {
        return;
    };
    let get = |path: &str| get_abc(&conformance, gateway, path);
    eventually("the backend reached over TLS", || {
        through_tls(&get("/backendtlspolicy"))
    });
    let accepted = [
        said("Accepted", "True", "Accepted"),
        said("ResolvedRefs", "True", "ResolvedRefs"),
    ];
    for policy in [
        "normative-test",
        "host-mismatch",
        "cert-mismatch",
        "reconcile-test",
    ] {
        assert_eq!(
            conformance.policy_conditions(policy, gateway, &accepted),
            accepted,
            "{policy}"
        );
    }
    // The policy's other ancestor: the Gateway of the re-encrypt route.
    assert_eq!(
        conformance.policy_conditions("normative-test", https_gateway, &accepted),
        accepted
    );
    // The wrong SNI (the backend refuses it) and the wrong CA: a 5xx.
    for path in [
        "/backendtlspolicy-host-mismatch",
        "/backendtlspolicy-cert-mismatch",
    ] {
        let answer = get(path);
        assert!(failed(&answer), "{path}: {answer:?}");
    }
    assert!(through_tls(&get("/backendtlspolicy-reconcile-test")));

    // Re-encrypt: TLS ended at the HTTPS listener, begun again towards
    // the backend.
    let reencrypted = || {
        conformance.https_get(
            https_gateway,
            443,
            "https-listener.org",
            "https-listener.org",
            "/backendtlspolicy",
        )
    };
    let reached = |answer: &Option<(u16, String, String)>| matches!(answer, Some((200, body, _)) if body.contains("s_server -www"));
    eventually("the re-encrypted request reached the backend", || {
        reached(&reencrypted())
    });

    // A ConfigMap that does not exist, one whose ca.crt holds no
    // certificate, a reference of another kind: not accepted, and
    // requests to their Services fail.
    let invalid = |reason: &str| {
        [
            said("Accepted", "False", "NoValidCACertificate"),
            said("ResolvedRefs", "False", reason),
        ]
    };
    for (policy, reason, path) in [
        (
            "nonexistent-ca-certificate-ref",
            "InvalidCACertificateRef",
            "/backendtlspolicy-nonexistent-ca-certificate-ref",
        ),
        (
            "malformed-ca-certificate-ref",
            "InvalidCACertificateRef",
            "/backendtlspolicy-malformed-ca-certificate-ref",
        ),
        ("invalid-kind", "InvalidKind", "/backendtlspolicy-invalid-kind"),
    ] {
        assert_eq!(
            conformance.policy_conditions(policy, gateway, &invalid(reason)),
            invalid(reason),
            "{policy}"
        );
        eventually(&format!("{path} answered 5xx"), || failed(&get(path)));
    }

    // The reconcile case: the policy moved to a ConfigMap not there yet,
    // then written, emptied, written again.
    conformance.apply(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\n\
         metadata: {name: reconcile-test, namespace: gateway-conformance-infra}\n\
         spec:\n  targetRefs: [{group: '', kind: Service, name: backendtlspolicy-reconcile-test, sectionName: btls}]\n  \
         validation:\n    caCertificateRefs: [{group: '', kind: ConfigMap, name: tls-checks-ca-certificate-reconcile-test}]\n    \
         hostname: abc.example.com\n",
    );
    let missing = invalid("InvalidCACertificateRef");
    assert_eq!(
        conformance.policy_conditions("reconcile-test", gateway, &missing),
        missing
    );
    eventually("the reconcile case answered 5xx", || {
        failed(&get("/backendtlspolicy-reconcile-test"))
    });
    let configmap = "tls-checks-ca-certificate-reconcile-test";
    conformance.write_ca_bundle(INFRA, configmap, &conformance.ca_pem());
    assert_eq!(
        conformance.policy_conditions("reconcile-test", gateway, &accepted),
        accepted
    );
    eventually("the reconcile case reached over TLS", || {
        through_tls(&get("/backendtlspolicy-reconcile-test"))
    });
    conformance.write_ca_bundle(INFRA, configmap, "");
    assert_eq!(
        conformance.policy_conditions("reconcile-test", gateway, &missing),
        missing
    );
    conformance.write_ca_bundle(INFRA, configmap, &conformance.ca_pem());
    assert_eq!(
        conformance.policy_conditions("reconcile-test", gateway, &accepted),
        accepted
    );
}

/// The conformance's gRPC echo service.
const GRPC_ECHO: &str = "/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho";

/// A gRPC client (gRPC for Python) of a Gateway of `conformance`'s,
/// its calls' `:authority` `grpc.example.com` unless one is given.
struct GrpcClient {
    python: common::grpc::Python,
    /// The router's address.
    address: String,
    _dir: tempfile::TempDir,
}

impl GrpcClient {
    fn of(conformance: &Conformance, gateway: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let python =
            common::grpc::Python::start("client.py", &[], std::path::Path::new("/nonexistent"), dir.path());
        GrpcClient {
            python,
            address: format!("127.0.0.1:{}", conformance.port(gateway, 80)),
            _dir: dir,
        }
    }

    /// The client's target for calls with `authority`.
    fn target(&self, authority: &str) -> String {
        format!("{}@{authority}", self.address)
    }

    /// A call of `method` of the echo service with `metadata`
    /// (`key=value` words): the server's answer, or the error.
    fn echo(&mut self, method: &str, metadata: &[&str]) -> Value {
        self.echo_at("grpc.example.com", method, metadata)
    }

    /// [`echo`](Self::echo) with `authority`.
    fn echo_at(&mut self, authority: &str, method: &str, metadata: &[&str]) -> Value {
        let command = format!(
            "echo {} {GRPC_ECHO}/{method} {}",
            self.target(authority),
            metadata.join(" ")
        );
        self.python.ask(command.trim_end())
    }

    /// Which backend answered a call of `method` with `metadata`, or the
    /// call's error code.
    fn answered(&mut self, method: &str, metadata: &[&str]) -> String {
        self.answered_at("grpc.example.com", method, metadata)
    }

    /// [`answered`](Self::answered) with `authority`.
    fn answered_at(&mut self, authority: &str, method: &str, metadata: &[&str]) -> String {
        let answer = self.echo_at(authority, method, metadata);
        match answer["backend"].as_str() {
            Some(backend) => backend.to_string(),
            None => answer["error"].as_str().unwrap_or("no answer").to_string(),
        }
    }
}

#[test]
fn grpc_calls_are_routed_by_their_method() {
    // GRPCRouteExactMethodMatching: Echo to v1, EchoTwo to v2, any other
    // method of the service has no route (UNIMPLEMENTED, Envoy's 404).
    let Some(conformance) = Conformance::with_grpc(&["grpcroute-exact-method-matching"], &["same-namespace"])
    else {
        return;
    };
    let mut client = GrpcClient::of(&conformance, "same-namespace");
    eventually("Echo routed to grpc-infra-backend-v1", || {
        client.answered("Echo", &[]) == "grpc-infra-backend-v1"
    });
    assert_eq!(client.answered("EchoTwo", &[]), "grpc-infra-backend-v2");
    assert_eq!(client.answered("EchoThree", &[]), "UNIMPLEMENTED");
    assert_eq!(
        conformance.route_conditions_of("grpcroutes", INFRA, "exact-matching"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

#[test]
fn a_grpc_routes_named_rule_routes_as_its_other_rules_do() {
    // GRPCRouteNamedRule: the rule named `named-rule` sends Echo to v1,
    // the unnamed one EchoTwo to v2.
    let Some(conformance) = Conformance::with_grpc(&["grpcroute-named-rule"], &["same-namespace"]) else {
        return;
    };
    let mut client = GrpcClient::of(&conformance, "same-namespace");
    eventually("Echo routed to grpc-infra-backend-v1", || {
        client.answered("Echo", &[]) == "grpc-infra-backend-v1"
    });
    assert_eq!(client.answered("EchoTwo", &[]), "grpc-infra-backend-v2");
    assert_eq!(
        conformance.route_conditions_of("grpcroutes", INFRA, "grpc-named-rules"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

#[test]
fn a_backend_tls_policy_secures_a_grpc_routes_backend() {
    // BackendTLSPolicyGRPCRoute: gRPC calls through the router to a
    // backend that serves TLS only, its certificate abc.example.com's,
    // signed by the CA of tls-checks-ca-certificate. A policy validating
    // that name with that CA reaches it; one validating another name, or
    // with another CA, does not (the call fails, UNAVAILABLE). All three
    // policies are accepted and their references resolved.
    let Some(conformance) = Conformance::with_grpc(&["backendtlspolicy-grpcroute"], &["same-namespace"])
    else {
        return;
    };
    let mut client = GrpcClient::of(&conformance, "same-namespace");
    eventually("Echo answered by the TLS backend", || {
        client.answered_at("abc.example.com", "Echo", &[]) == GRPC_TLS_BACKEND
    });
    assert_eq!(
        client.answered_at("abc.example.com", "EchoTwo", &[]),
        "UNAVAILABLE"
    );
    assert_eq!(
        client.answered_at("cert-mismatch.example.com", "Echo", &[]),
        "UNAVAILABLE"
    );
    let resolved = [
        said("Accepted", "True", "Accepted"),
        said("ResolvedRefs", "True", "ResolvedRefs"),
    ];
    for policy in ["grpc-normative-test", "grpc-host-mismatch", "grpc-cert-mismatch"] {
        assert_eq!(
            conformance.policy_conditions(policy, "same-namespace", &resolved),
            resolved,
            "{policy}"
        );
    }
    for route in [
        "backendtlspolicy-grpcroute",
        "backendtlspolicy-grpcroute-cert-mismatch",
    ] {
        assert_eq!(
            conformance.route_conditions_of("grpcroutes", INFRA, route),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "True", "ResolvedRefs")
            ],
            "{route}"
        );
    }
}

#[test]
fn grpc_calls_are_routed_by_their_metadata() {
    // GRPCRouteHeaderMatching: a match's headers all match, a rule's
    // matches any; of two matching, the one with more header matches wins
    // (the spec's precedence), so version=two with color=orange goes to
    // v1, not to the earlier rule's v2.
    let Some(conformance) = Conformance::with_grpc(&["grpcroute-header-matching"], &["same-namespace"])
    else {
        return;
    };
    let mut client = GrpcClient::of(&conformance, "same-namespace");
    let v1 = "grpc-infra-backend-v1";
    let v2 = "grpc-infra-backend-v2";
    eventually("version=one routed to grpc-infra-backend-v1", || {
        client.answered("Echo", &["version=one"]) == v1
    });
    for (metadata, expected) in [
        (&["version=two"][..], v2),
        (&["version=two", "color=orange"][..], v1),
        (&["color=blue"][..], v1),
        (&["color=green"][..], v1),
        (&["color=red"][..], v2),
        (&["color=yellow"][..], v2),
        (&["color=purple"][..], "UNIMPLEMENTED"),
        (&[][..], "UNIMPLEMENTED"),
    ] {
        assert_eq!(client.answered("Echo", metadata), expected, "{metadata:?}");
    }
}

#[test]
fn a_grpc_routes_header_modifier_changes_the_metadata_its_backend_gets() {
    // GRPCRouteRequestHeaderModifier: Echo's first rule (of three with
    // the same match) sets X-Header-Set; EchoTwo's sets, adds and removes
    // several.
    let Some(conformance) =
        Conformance::with_grpc(&["grpcroute-request-header-modifier"], &["same-namespace"])
    else {
        return;
    };
    let mut client = GrpcClient::of(&conformance, "same-namespace");
    eventually("Echo routed to grpc-infra-backend-v1", || {
        client.echo("Echo", &[])["backend"] == "grpc-infra-backend-v1"
    });
    let seen = |answer: &Value, key: &str| answer["metadata"][key].clone();
    let answer = client.echo("Echo", &["x-header-set=some-other-value"]);
    assert_eq!(
        seen(&answer, "x-header-set"),
        serde_json::json!(["set-overwrites-values"]),
        "{answer}"
    );
    let answer = client.echo(
        "EchoTwo",
        &[
            "x-header-set-1=other",
            "x-header-add-1=kept",
            "x-header-remove-1=gone",
            "x-header-remove-2=gone",
            "x-header-kept=kept",
        ],
    );
    assert_eq!(answer["backend"], "grpc-infra-backend-v2", "{answer}");
    assert_eq!(
        seen(&answer, "x-header-set-1"),
        serde_json::json!(["header-set-1"]),
        "{answer}"
    );
    assert_eq!(
        seen(&answer, "x-header-set-2"),
        serde_json::json!(["header-set-2"]),
        "{answer}"
    );
    assert_eq!(
        seen(&answer, "x-header-add-1"),
        serde_json::json!(["kept", "header-add-1"]),
        "{answer}"
    );
    assert_eq!(
        seen(&answer, "x-header-add-2"),
        serde_json::json!(["header-add-2"]),
        "{answer}"
    );
    assert_eq!(seen(&answer, "x-header-remove-1"), Value::Null, "{answer}");
    assert_eq!(seen(&answer, "x-header-remove-2"), Value::Null, "{answer}");
    assert_eq!(
        seen(&answer, "x-header-kept"),
        serde_json::json!(["kept"]),
        "{answer}"
    );
}

#[test]
fn grpc_calls_are_shared_by_backend_weights() {
    // GRPCRouteWeight: 70 / 30 / 0 over 500 calls, each share within five
    // points; the backend of weight 0 gets none.
    let Some(conformance) = Conformance::with_grpc(&["grpcroute-weight"], &["same-namespace"]) else {
        return;
    };
    let mut client = GrpcClient::of(&conformance, "same-namespace");
    eventually("calls routed to the weighted backends", || {
        client.answered("Echo", &[]).starts_with("grpc-infra-backend-v")
    });
    let calls = 500;
    let answer = client.python.ask(&format!(
        "calls {} {GRPC_ECHO}/Echo {calls}",
        client.target("grpc.example.com")
    ));
    assert_eq!(answer["errors"], serde_json::json!({}), "{answer}");
    let share = |backend: &str| answer["counts"][backend].as_u64().unwrap_or(0) as f64 / calls as f64;
    assert!((share("grpc-infra-backend-v1") - 0.7).abs() <= 0.05, "{answer}");
    assert!((share("grpc-infra-backend-v2") - 0.3).abs() <= 0.05, "{answer}");
    assert_eq!(share("grpc-infra-backend-v3"), 0.0, "{answer}");
}

#[test]
fn grpc_routes_attach_to_the_listeners_their_hostnames_name() {
    // GRPCRouteListenerHostnameMatching: four listeners on one port, by
    // hostname (bar.com, foo.bar.com, *.bar.com, *.foo.com), a route on
    // each of the first two and one on the wildcards; a call goes by its
    // :authority to the most specific listener's route.
    let gateway = "grpcroute-listener-hostname-matching";
    let Some(conformance) = Conformance::with_grpc(&[gateway], &[gateway]) else {
        return;
    };
    let mut client = GrpcClient::of(&conformance, gateway);
    eventually("bar.com routed to grpc-infra-backend-v1", || {
        client.answered_at("bar.com", "Echo", &[]) == "grpc-infra-backend-v1"
    });
    for (authority, expected) in [
        ("foo.bar.com", "grpc-infra-backend-v2"),
        ("baz.bar.com", "grpc-infra-backend-v3"),
        ("boo.bar.com", "grpc-infra-backend-v3"),
        ("multiple.prefixes.bar.com", "grpc-infra-backend-v3"),
        ("multiple.prefixes.foo.com", "grpc-infra-backend-v3"),
        ("foo.com", "UNIMPLEMENTED"),
        ("no.matching.host", "UNIMPLEMENTED"),
    ] {
        assert_eq!(
            client.answered_at(authority, "Echo", &[]),
            expected,
            "{authority}"
        );
    }
}

#[test]
fn a_backend_tls_policys_subject_alt_names_decide_which_certificates_it_accepts() {
    // BackendTLSPolicySANValidation: the backend's certificate (for SNI
    // abc.example.com) names DNS abc.example.com and URI
    // spiffe://abc.example.com/test-identity. A policy listing
    // subjectAltNames accepts a certificate carrying one of them (instead
    // of the hostname), whether a DNS name or a URI; none of them, a 5xx.
    let gateway = "same-namespace";
    let Some(conformance) = Conformance::with(&["backendtlspolicy-san"], &[gateway]) else {
        return;
    };
    let get = |path: &str| get_abc(&conformance, gateway, path);
    eventually("the backend reached over TLS by its DNS name", || {
        through_tls(&get("/backendtlspolicy-san-dns"))
    });
    for path in ["/backendtlspolicy-san-uri", "/backendtlspolicy-multiple-sans"] {
        eventually(&format!("{path} reached over TLS"), || through_tls(&get(path)));
    }
    refused(
        &conformance,
        gateway,
        &[
            "/backendtlspolicy-san-dns-mismatch",
            "/backendtlspolicy-san-uri-mismatch",
            "/backendtlspolicy-multiple-mismatch-sans",
        ],
    );
    policies_say(
        &conformance,
        gateway,
        &[
            "san-dns",
            "san-dns-mismatch",
            "san-uri",
            "san-uri-mismatch",
            "multiple-sans",
            "multiple-mismatch-sans",
        ],
        &[
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs"),
        ],
    );
}

#[test]
fn of_backend_tls_policies_for_one_port_the_first_applies_and_the_others_say_conflicted() {
    // BackendTLSPolicyConflictResolution: the backend completes a
    // handshake for the SNI abc.example.com only. Of two policies for one
    // Service (or one port of it) created together, the first by name
    // applies (its SNI other.example.com: the handshake fails, a 5xx) and
    // the other is not accepted; a policy for a port applies there before
    // one for the whole Service, which applies on the other port (SNI
    // abc.example.com: through TLS).
    let gateway = "same-namespace";
    let Some(conformance) = Conformance::with(&["backendtlspolicy-conflict-resolution"], &[gateway]) else {
        return;
    };
    let get = |path: &str| get_abc(&conformance, gateway, path);
    eventually("port 8443 reached over TLS by the whole Service's policy", || {
        through_tls(&get("/backendtlspolicy-not-conflicted-without-section-name"))
    });
    for path in [
        "/backendtlspolicy-not-conflicted-with-section-name",
        "/backendtlspolicy-conflicted-without-section-name",
        "/backendtlspolicy-conflicted-with-section-name",
    ] {
        let answer = get(path);
        assert!(failed(&answer), "{path}: {answer:?}");
    }
    let accepted = [
        said("Accepted", "True", "Accepted"),
        said("ResolvedRefs", "True", "ResolvedRefs"),
    ];
    for policy in [
        "conflicted-without-section-name-1",
        "conflicted-with-section-name-1",
        "not-conflicted-with-section-name",
        "not-conflicted-without-section-name",
    ] {
        assert_eq!(
            conformance.policy_conditions(policy, gateway, &accepted),
            accepted,
            "{policy}"
        );
    }
    let conflicted = [
        said("Accepted", "False", "Conflicted"),
        said("ResolvedRefs", "True", "ResolvedRefs"),
    ];
    for policy in [
        "conflicted-without-section-name-2",
        "conflicted-with-section-name-2",
    ] {
        assert_eq!(
            conformance.policy_conditions(policy, gateway, &conflicted),
            conflicted,
            "{policy}"
        );
    }
}

#[test]
fn a_changed_backend_tls_policy_applies_and_its_status_is_of_its_new_generation() {
    // BackendTLSPolicyObservedGenerationBump: the policy's hostname
    // changed from abc.example.com to foo.example.com. It stays accepted,
    // every condition of its new generation, and the change applies: the
    // backend completes a handshake for abc.example.com only, so the
    // route's requests now fail.
    let gateway = "same-namespace";
    let manifest = "backendtlspolicy-observed-generation-bump";
    let Some(conformance) = Conformance::with(&[manifest], &[gateway]) else {
        return;
    };
    let path = format!(
        "/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/backendtlspolicies/observed-generation-bump"
    );
    // The policy's generation, once its conditions for the Gateway are
    // all of it.
    let current = |what: &str| {
        let mut generation = Value::Null;
        eventually(what, || {
            let policy = conformance.object(&path);
            generation = policy["metadata"]["generation"].clone();
            let conditions = policy["status"]["ancestors"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| a["ancestorRef"]["name"] == gateway)
                .map(|a| a["conditions"].clone())
                .unwrap_or_default();
            triples(&conditions)
                == [
                    said("Accepted", "True", "Accepted"),
                    said("ResolvedRefs", "True", "ResolvedRefs"),
                ]
                && conditions
                    .as_array()
                    .into_iter()
                    .flatten()
                    .all(|c| c["observedGeneration"] == generation)
        });
        generation
            .as_i64()
            .unwrap_or_else(|| panic!("no generation: {generation}"))
    };
    eventually("the backend reached over TLS", || {
        through_tls(&get_abc(&conformance, gateway, "/"))
    });
    let before = current("the policy's conditions of its generation");

    let corpus = pilot_test_support::corpus("gateway-api").expect("read above");
    let text =
        std::fs::read_to_string(corpus.join(format!("gwapi_conformance.tests.{manifest}.yaml"))).unwrap();
    assert!(text.contains("hostname: \"abc.example.com\""), "{text}");
    conformance.apply(&text.replace("hostname: \"abc.example.com\"", "hostname: \"foo.example.com\""));
    eventually("the backend refusing the policy's new name", || {
        failed(&get_abc(&conformance, gateway, "/"))
    });
    let after = current("the changed policy's conditions of its new generation");
    assert!(after > before, "generation {before}, then {after}");
}

#[test]
fn a_gateways_routers_present_its_client_certificate_to_tls_backends() {
    // GatewayTLSBackendClientCertificate: the backend (TLS under a
    // BackendTLSPolicy) completes a handshake only with a client
    // certificate the conformance's CA signed; the router presents the
    // Secret the Gateway's tls.backend.clientCertificateRef names, and the
    // backend's page names it. The Gateway says ResolvedRefs.
    let gateway = "gateway-tls-backend-client-certificate";
    let manifest = "gateway-tls-backend-client-certificate";
    let Some(conformance) = Conformance::with(&[manifest], &[gateway]) else {
        return;
    };
    let presented =
        |answer: &(u16, String)| through_tls(answer) && answer.1.contains("tls-checks-client-certificate");
    eventually(
        "the backend reached with the Gateway's client certificate",
        || presented(&get_abc(&conformance, gateway, "/")),
    );
    let path = format!("/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/gateways/{gateway}");
    eventually("the Gateway's ResolvedRefs", || {
        triples(&conformance.object(&path)["status"]["conditions"]).contains(&said(
            "ResolvedRefs",
            "True",
            "ResolvedRefs",
        ))
    });
    let resolved = [
        said("Accepted", "True", "Accepted"),
        said("ResolvedRefs", "True", "ResolvedRefs"),
    ];
    assert_eq!(
        conformance.policy_conditions("gateway-tls-backend-client-certificate-test", gateway, &resolved),
        resolved
    );
    assert_eq!(conformance.route_conditions(INFRA, gateway), resolved);

    // Without the client certificate, the backend refuses the router's
    // handshake.
    let corpus = pilot_test_support::corpus("gateway-api").expect("read above");
    let text =
        std::fs::read_to_string(corpus.join(format!("gwapi_conformance.tests.{manifest}.yaml"))).unwrap();
    let start = text
        .find("  tls:\n    backend:\n")
        .unwrap_or_else(|| panic!("{text}"));
    let end = start + text[start..].find("---").unwrap_or_else(|| panic!("{text}"));
    // (The listener's port where the harness moved it.)
    let listener = "      port: 80\n";
    assert!(text[..start].contains(listener), "{text}");
    let without = text[..start].replace(
        listener,
        &format!("      port: {}\n", conformance.port(gateway, 80)),
    );
    conformance.apply(&format!("{without}{}", &text[end..]));
    eventually(
        "the backend refusing a router without a client certificate",
        || failed(&get_abc(&conformance, gateway, "/")),
    );
}

#[test]
fn a_gateways_client_certificate_that_does_not_resolve_says_why() {
    // GatewayInvalidTLSBackendConfiguration: a Gateway whose
    // tls.backend.clientCertificateRef names a Secret that is not there,
    // one that holds no certificate, another group or kind, or a Secret of
    // another namespace without a grant, is accepted, and says
    // ResolvedRefs False with the reason.
    let Some(conformance) = Conformance::with(&["gateway-invalid-tls-backend-configuration"], &[]) else {
        return;
    };
    for (gateway, reason) in [
        (
            "gateway-client-certificate-nonexistent-secret",
            "InvalidClientCertificateRef",
        ),
        (
            "gateway-client-certificate-unsupported-group",
            "InvalidClientCertificateRef",
        ),
        (
            "gateway-client-certificate-unsupported-kind",
            "InvalidClientCertificateRef",
        ),
        (
            "gateway-client-certificate-malformed-secret",
            "InvalidClientCertificateRef",
        ),
        (
            "gateway-client-certificate-missing-reference-grant",
            "RefNotPermitted",
        ),
    ] {
        let path = format!("/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/gateways/{gateway}");
        let mut conditions = Vec::new();
        eventually(&format!("{gateway}'s ResolvedRefs"), || {
            conditions = triples(&conformance.object(&path)["status"]["conditions"]);
            conditions.iter().any(|(t, _, _)| t == "ResolvedRefs")
        });
        assert!(
            conditions.contains(&said("Accepted", "True", "Accepted")),
            "{gateway}: {conditions:?}"
        );
        assert!(
            conditions.contains(&said("ResolvedRefs", "False", reason)),
            "{gateway}: {conditions:?}"
        );
    }
}

/// A GET of `path` for `abc.example.com` through `gateway`'s listener on
/// port 80: the status and the body, `(0, "")` when nothing answered. (A
/// BackendTLSPolicy case's backend answers HTTP/1.0 with no length, ended
/// by closing.)
fn get_abc(conformance: &Conformance, gateway: &str, path: &str) -> (u16, String) {
    pilot_test_support::http::request(
        ([127, 0, 0, 1], conformance.port(gateway, 80)).into(),
        "GET",
        path,
        &[("host", "abc.example.com")],
        b"",
    )
    .map_or((0, String::new()), |answer| (answer.code, answer.text()))
}

/// Whether an answer is the BackendTLSPolicy backend's (openssl's
/// session page), so reached over TLS.
fn through_tls((status, body): &(u16, String)) -> bool {
    *status == 200 && body.contains("s_server -www")
}

/// Whether the router answered a 5xx (the backend not reached).
fn failed((status, _): &(u16, String)) -> bool {
    matches!(status, 500 | 502 | 503)
}

/// Each of `paths` answered a 5xx (the backend not reached), now.
fn refused(conformance: &Conformance, gateway: &str, paths: &[&str]) {
    for path in paths {
        let answer = get_abc(conformance, gateway, path);
        assert!(failed(&answer), "{path}: {answer:?}");
    }
}

/// Each of the BackendTLSPolicies `policies` says `expected` for its
/// ancestor `gateway`.
fn policies_say(
    conformance: &Conformance,
    gateway: &str,
    policies: &[&str],
    expected: &[(String, String, String)],
) {
    for policy in policies {
        assert_eq!(
            conformance.policy_conditions(policy, gateway, expected),
            expected,
            "{policy}"
        );
    }
}

/// The condition of `kind` among `conditions`.
fn condition(conditions: &[(String, String, String)], kind: &str) -> (String, String, String) {
    conditions
        .iter()
        .find(|(t, _, _)| t == kind)
        .cloned()
        .unwrap_or_else(|| panic!("no {kind} condition in {conditions:?}"))
}

#[test]
fn parents_routes_cannot_attach_to_and_backends_they_cannot_reach_are_in_their_status() {
    // Status alone, as the upstream tests check it (no router needed):
    // - HTTPRouteInvalidCrossNamespaceParentRef: a route of another
    //   namespace on a listener admitting its own: Accepted False
    //   (NotAllowedByListeners), its references resolved, nothing attached;
    // - HTTPRouteInvalidParentRefSectionNameNotMatchingPort: a parent's
    //   sectionName and port naming no one listener: NoMatchingParent;
    // - TCPRouteInvalidBackendRefNonexistent, TCPRouteInvalidCrossNamespaceBackendRef,
    //   TLSRouteInvalidBackendRefNonexistent: ResolvedRefs False
    //   (BackendNotFound, RefNotPermitted), the route accepted;
    // - TCPRouteInvalidNonTCPListener: a TCPRoute on an HTTP listener:
    //   NotAllowedByListeners, nothing attached;
    // - TLSRouteInvalidNoMatchingListener: a TLSRoute on an HTTP or an
    //   HTTPS listener (NotAllowedByListeners), or naming no listener
    //   (NoMatchingParent), nothing attached.
    let Some(conformance) = Conformance::with(
        &[
            "httproute-invalid-cross-namespace-parent-ref",
            "httproute-invalid-parentref-section-name-not-matching-port",
            "tcproute-invalid-backendref-nonexistent",
            "tcproute-invalid-cross-namespace-backend-ref",
            "tcproute-invalid-non-tcp-listener",
            "tlsroute-invalid-backendref-nonexistent",
            "tlsroute-invalid-no-matching-listener",
        ],
        &[],
    ) else {
        return;
    };
    let http = |namespace: &str, name: &str| conformance.route_conditions(namespace, name);
    let tcp = |name: &str| conformance.route_conditions_of("tcproutes", INFRA, name);
    let tls = |name: &str| conformance.route_conditions_of("tlsroutes", INFRA, name);
    assert_eq!(
        http(WEB, "invalid-cross-namespace-parent-ref"),
        [
            said("Accepted", "False", "NotAllowedByListeners"),
            said("ResolvedRefs", "True", "ResolvedRefs"),
        ]
    );
    assert_eq!(
        condition(
            &http(INFRA, "httproute-listener-section-name-not-matching-port"),
            "Accepted"
        ),
        said("Accepted", "False", "NoMatchingParent")
    );
    for (name, reason) in [
        ("tcp-route-invalid-backend-ref-nonexistent", "BackendNotFound"),
        ("tcp-invalid-cross-namespace-backend-ref", "RefNotPermitted"),
    ] {
        assert_eq!(
            tcp(name),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "False", reason)
            ],
            "{name}"
        );
    }
    assert_eq!(
        condition(&tcp("tcp-route"), "Accepted"),
        said("Accepted", "False", "NotAllowedByListeners")
    );
    assert_eq!(
        tls("invalid-backend-ref-nonexistent"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "False", "BackendNotFound")
        ]
    );
    for (name, reason) in [
        ("tlsroute-not-allowed-protocol-http", "NotAllowedByListeners"),
        ("tlsroute-not-allowed-protocol-https", "NotAllowedByListeners"),
        ("tlsroute-no-matching-section-name", "NoMatchingParent"),
    ] {
        assert_eq!(
            condition(&tls(name), "Accepted"),
            said("Accepted", "False", reason),
            "{name}"
        );
    }
    for gateway in [
        "same-namespace",
        "gateway-with-one-not-matching-port-and-section-name-route",
        "tcp-mixed-protocol-gateway",
        "gateway-tlsroute-http-only",
        "gateway-tlsroute-https-only",
        "gateway-tlsroute-tls-passthrough-only",
    ] {
        let attached = conformance.attached_routes(gateway);
        assert!(
            attached.iter().all(|n| n == 0),
            "{gateway}: {attached:?} routes attached"
        );
    }
}

#[test]
fn a_reference_no_grant_permits_is_answered_500_beside_named_rules() {
    // HTTPRouteInvalidReferenceGrant: ReferenceGrants that each miss one
    // part (the namespace they are in, the group, kind or namespace of
    // the route, the group, kind or name of the Service) permit nothing:
    // the route is accepted, its ResolvedRefs is False
    // (RefNotPermitted), and its requests are answered 500. Beside it on
    // the same listener, HTTPRouteNamedRule: a rule's name changes
    // nothing of how it routes.
    let gateway = "same-namespace";
    let Some(conformance) = Conformance::with(
        &["httproute-invalid-reference-grant", "httproute-named-rule"],
        &[gateway],
    ) else {
        return;
    };
    conformance.expect(
        gateway,
        &[
            (HOST, "/", "", 500),
            (HOST, "/named", V1, 200),
            (HOST, "/unnamed", V2, 200),
        ],
    );
    assert_eq!(
        conformance.route_conditions(INFRA, "reference-grant"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "False", "RefNotPermitted")
        ]
    );
    assert_eq!(
        conformance.route_conditions(INFRA, "http-named-rules"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

/// A listener as its Gateway's status gives it: its name, the kinds it
/// supports (`group/kind`), its conditions (sorted) and `attachedRoutes`.
type ListenerStatus = (String, Vec<String>, Vec<(String, String, String)>, i64);

/// Each listener of `gateway` as its status gives it.
fn listener_statuses(conformance: &Conformance, gateway: &str) -> Vec<ListenerStatus> {
    let path = format!("/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/gateways/{gateway}");
    let mut listeners = Vec::new();
    eventually(&format!("the status of {gateway}'s listeners"), || {
        let object = conformance.object(&path);
        listeners = object["status"]["listeners"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|l| {
                let kinds = l["supportedKinds"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|k| {
                        format!(
                            "{}/{}",
                            k["group"].as_str().unwrap_or_default(),
                            k["kind"].as_str().unwrap_or_default()
                        )
                    })
                    .collect();
                let mut conditions = triples(&l["conditions"]);
                conditions.sort();
                (
                    l["name"].as_str().unwrap_or_default().to_string(),
                    kinds,
                    conditions,
                    l["attachedRoutes"].as_i64().unwrap_or(-1),
                )
            })
            .collect();
        !listeners.is_empty()
    });
    listeners
}

#[test]
fn a_gateways_addresses_are_those_of_the_service_in_front_of_its_router() {
    // GatewayOptionalAddressValue: a Gateway asking for an IPAddress of
    // pilot's choosing gets one. Its status lists the cluster IP of the
    // Service in front of its router, then that Service's hostname, and it
    // is programmed. Asked for an IP that Service does not have, it says
    // AddressNotAssigned, naming it, while its router still serves it.
    let gateway = "gateway-without-address-value";
    let manifest = "gateway-optional-address-value";
    let Some(conformance) = Conformance::with(&[manifest], &[gateway]) else {
        return;
    };
    let path = format!("/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/gateways/{gateway}");
    let (hostname, address) = router_service(gateway, 0);
    let expected = serde_json::json!([
        {"type": "IPAddress", "value": address},
        {"type": "Hostname", "value": hostname},
    ]);
    eventually("the Gateway's addresses", || {
        conformance.object(&path)["status"]["addresses"] == expected
    });
    let programmed = |reason: &str| {
        let mut conditions = Vec::new();
        eventually(&format!("the Gateway's Programmed to say {reason}"), || {
            conditions = triples(&conformance.object(&path)["status"]["conditions"]);
            conditions
                .iter()
                .any(|(t, _, r)| t == "Programmed" && r == reason)
        });
        conditions
    };
    assert_eq!(
        programmed("Programmed"),
        [
            said("Accepted", "True", "Accepted"),
            said("Programmed", "True", "Programmed")
        ]
    );
    // Served: its listener (no route attached) answers 404.
    conformance.expect_on(gateway, 8080, &[(HOST, "/", "", 404)]);

    let corpus = pilot_test_support::corpus("gateway-api").expect("read above");
    let text =
        std::fs::read_to_string(corpus.join(format!("gwapi_conformance.tests.{manifest}.yaml"))).unwrap();
    let asked = "  - type: \"IPAddress\"\n";
    assert!(text.contains(asked), "{text}");
    // The listener's port where the harness moved it.
    let changed = text
        .replace(asked, &format!("{asked}    value: \"10.96.9.9\"\n"))
        .replace(
            "port: 8080",
            &format!("port: {}", conformance.port(gateway, 8080)),
        );
    conformance.apply(&changed);
    assert_eq!(
        programmed("AddressNotAssigned"),
        [
            said("Accepted", "True", "Accepted"),
            said("Programmed", "False", "AddressNotAssigned")
        ]
    );
    let status = conformance.object(&path)["status"].clone();
    let message = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Programmed")
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default();
    assert!(message.contains("IPAddress 10.96.9.9"), "{status}");
    assert_eq!(status["addresses"], expected);
    conformance.expect_on(gateway, 8080, &[(HOST, "/", "", 404)]);
}

#[test]
fn gateways_with_listeners_or_parameters_pilot_does_not_take_say_so() {
    // GatewayListenerUnsupportedProtocol: a listener of protocol INVALID
    // is not accepted (UnsupportedProtocol, no kinds); its Gateway is
    // accepted for its other listeners (True, ListenersNotValid), or not
    // at all when it has none (False, ListenersNotValid).
    let Some(conformance) = Conformance::with(&["gateway-invalid-listeners-unsupported-protocol"], &[])
    else {
        return;
    };
    let gateway_conditions = |name: &str| {
        let path = format!("/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/gateways/{name}");
        let mut said = Vec::new();
        eventually(&format!("the status of {name}"), || {
            said = triples(&conformance.object(&path)["status"]["conditions"]);
            !said.is_empty()
        });
        said
    };
    let invalid = (
        "invalid".to_string(),
        Vec::<String>::new(),
        vec![
            said("Accepted", "False", "UnsupportedProtocol"),
            said("Conflicted", "False", "NoConflicts"),
            said("Programmed", "False", "Invalid"),
            said("ResolvedRefs", "True", "ResolvedRefs"),
        ],
        0,
    );
    let only = "gateway-only-unsupported-protocols";
    // GatewayInvalidParametersRef: pilot reads no parameters; a Gateway
    // asking for some is not accepted, nor served.
    let parameters = "gateway-invalid-parameters-ref";
    conformance.apply(
        &std::fs::read_to_string(
            pilot_test_support::corpus("gateway-api")
                .unwrap()
                .join(format!("gwapi_conformance.tests.{parameters}.yaml")),
        )
        .unwrap(),
    );
    let said_of_parameters = gateway_conditions(parameters);
    assert!(
        said_of_parameters.contains(&said("Accepted", "False", "InvalidParameters"))
            && said_of_parameters.contains(&said("Programmed", "False", "Invalid")),
        "{said_of_parameters:?}"
    );
    assert!(
        gateway_conditions(only).contains(&said("Accepted", "False", "ListenersNotValid")),
        "{:?}",
        gateway_conditions(only)
    );
    assert_eq!(
        listener_statuses(&conformance, only),
        std::slice::from_ref(&invalid)
    );
    let mixed = "gateway-supported-and-unsupported-protocols";
    assert!(
        gateway_conditions(mixed).contains(&said("Accepted", "True", "ListenersNotValid")),
        "{:?}",
        gateway_conditions(mixed)
    );
    let listeners = listener_statuses(&conformance, mixed);
    assert_eq!(listeners.len(), 2, "{listeners:?}");
    assert_eq!(listeners[0].0, "http");
    // The conformance asks for HTTPRoute among the kinds (an
    // implementation may support more: pilot's HTTP listeners take
    // GRPCRoutes too).
    assert!(
        listeners[0]
            .1
            .contains(&"gateway.networking.k8s.io/HTTPRoute".to_string()),
        "{listeners:?}"
    );
    assert!(
        listeners[0].2.contains(&said("Accepted", "True", "Accepted")),
        "{listeners:?}"
    );
    assert_eq!(listeners[1], invalid);
}

#[test]
fn a_listener_added_serves_its_routes_and_one_removed_stops() {
    // GatewayModifyListeners: an HTTP listener (data.test.com) added to a
    // Gateway beside its HTTPS one: both accepted, resolved, one route
    // attached each, and the new one routes; of a Gateway with an HTTPS
    // and an HTTP listener, the HTTPS one removed: the HTTP listener alone
    // in the status, still routing, and the HTTPS port refuses
    // connections. Each edit moves the Gateway's generation.
    let (add, remove) = ("gateway-add-listener", "gateway-remove-listener");
    let Some(conformance) = Conformance::with(&["gateway-modify-listeners"], &[add, remove]) else {
        return;
    };
    let served = |port: u16, host: &str| common::get_by_length(port, host, "/") == (200, V1.to_string());
    let https = |gateway: &str| {
        conformance
            .https_get(gateway, 443, "secure.test.com", "secure.test.com", "/")
            .is_some_and(|(status, body, _)| status == 200 && body == V1)
    };
    eventually("the HTTPS listeners to route", || https(add) && https(remove));
    let remove_http = conformance.port(remove, 80);
    eventually("gateway-remove-listener's HTTP listener to route", || {
        served(remove_http, "any.test.com")
    });
    let generation = |gateway: &str| {
        conformance.object(&format!(
            "/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/gateways/{gateway}"
        ))["metadata"]["generation"]
            .as_i64()
            .unwrap_or_default()
    };
    let before = (generation(add), generation(remove));
    let (add_https, remove_https) = (conformance.port(add, 443), conformance.port(remove, 443));
    let added_http = common::free_port();
    let https_listener = |port: u16| {
        format!(
            "  - name: https\n    port: {port}\n    protocol: HTTPS\n    hostname: secure.test.com\n    \
             allowedRoutes: {{namespaces: {{from: All}}}}\n    \
             tls: {{certificateRefs: [{{group: \"\", kind: Secret, name: tls-validity-checks-certificate, namespace: {INFRA}}}]}}\n"
        )
    };
    let gateway = |name: &str, listeners: String| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: {INFRA}}}\n\
             spec:\n  gatewayClassName: gateway-conformance\n  listeners:\n{listeners}"
        )
    };
    conformance.apply(&gateway(
        add,
        format!(
            "{}  - {{name: http, port: {added_http}, protocol: HTTP, hostname: data.test.com, \
             allowedRoutes: {{namespaces: {{from: All}}}}}}\n",
            https_listener(add_https)
        ),
    ));
    conformance.apply(&gateway(
        remove,
        format!("  - {{name: http, port: {remove_http}, protocol: HTTP, allowedRoutes: {{namespaces: {{from: All}}}}}}\n"),
    ));
    let accepted_and_resolved = |listener: &ListenerStatus| {
        listener.2.contains(&said("Accepted", "True", "Accepted"))
            && listener.2.contains(&said("ResolvedRefs", "True", "ResolvedRefs"))
            && listener
                .1
                .contains(&"gateway.networking.k8s.io/HTTPRoute".to_string())
            && listener.3 == 1
    };
    eventually("both listeners of gateway-add-listener in its status", || {
        let listeners = listener_statuses(&conformance, add);
        listeners.iter().map(|l| l.0.as_str()).collect::<Vec<_>>() == ["https", "http"]
            && listeners.iter().all(accepted_and_resolved)
    });
    eventually("the added listener to route", || {
        served(added_http, "data.test.com")
    });
    assert!(https(add), "the HTTPS listener still serves");
    eventually(
        "gateway-remove-listener's status to hold its HTTP listener only",
        || {
            let listeners = listener_statuses(&conformance, remove);
            listeners.len() == 1 && listeners[0].0 == "http" && accepted_and_resolved(&listeners[0])
        },
    );
    eventually("the removed listener's port to refuse connections", || {
        std::net::TcpStream::connect(("127.0.0.1", remove_https)).is_err()
    });
    assert!(
        served(remove_http, "any.test.com"),
        "the HTTP listener still serves"
    );
    let after = (generation(add), generation(remove));
    assert!(
        after.0 > before.0 && after.1 > before.1,
        "{before:?} -> {after:?}"
    );
}

#[test]
fn tls_listeners_support_tls_routes_whether_they_pass_tls_through_or_end_it() {
    // TLSRouteListenerPassthroughSupportedKinds: a passthrough listener
    // allowing TCPRoute and TLSRoute supports TLSRoute only
    // (ResolvedRefs False, InvalidRouteKinds).
    // TLSRouteListenerTerminateSupportedKinds: a terminating one supports
    // TLSRoute and is accepted. (pilot ends TLS on TLS listeners and mixes
    // both modes on one port: the "not supported" cases do not apply.)
    let Some(conformance) = Conformance::with(
        &[
            "tlsroute-listener-passthrough-supported-kinds",
            "tlsroute-listener-terminate-supported-kinds",
        ],
        &[],
    ) else {
        return;
    };
    let tls_route = "gateway.networking.k8s.io/TLSRoute".to_string();
    let passthrough = listener_statuses(&conformance, "gateway-tlsroute-passthrough-supported-kind");
    assert_eq!(passthrough.len(), 1, "{passthrough:?}");
    assert_eq!(passthrough[0].0, "tls-passthrough");
    assert_eq!(passthrough[0].1, std::slice::from_ref(&tls_route));
    assert!(
        passthrough[0]
            .2
            .contains(&said("ResolvedRefs", "False", "InvalidRouteKinds")),
        "{passthrough:?}"
    );
    assert_eq!(passthrough[0].3, 0);
    let terminate = listener_statuses(&conformance, "gateway-tlsroute-terminate-supported");
    assert_eq!(terminate.len(), 1, "{terminate:?}");
    assert_eq!(terminate[0].0, "tls-terminate");
    assert_eq!(terminate[0].1, [tls_route]);
    assert!(
        terminate[0].2.contains(&said("Accepted", "True", "Accepted")),
        "{terminate:?}"
    );
    assert_eq!(terminate[0].3, 0);
}

#[test]
fn tcp_routes_attach_by_port_or_section_and_a_listener_s_oldest_route_takes_its_connections() {
    // TCPRouteParentRefPortAndSectionName: three TCP listeners, a route on
    // each by port, by sectionName, by both: each listener's connections
    // reach its route's backend.
    let by_ref = "tcp-multi-listener-gateway";
    let attach = "tcp-multi-route-attach-gateway";
    let Some(conformance) = Conformance::with(
        &[
            "tcproute-parentref-port-and-section-name",
            "tcproute-multiple-routes-attachment",
        ],
        &[by_ref, attach],
    ) else {
        return;
    };
    for (port, backend) in [
        (9300, "tcp-echo-one"),
        (9301, "tcp-echo-two"),
        (9302, "tcp-echo-three"),
    ] {
        eventually(&format!("listener {port} to reach {backend}"), || {
            conformance.stream(by_ref, port) == backend
        });
    }
    for route in [
        "tcp-route-by-port",
        "tcp-route-by-section",
        "tcp-route-by-section-and-port",
    ] {
        assert_eq!(
            conformance.route_conditions_of("tcproutes", INFRA, route),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "True", "ResolvedRefs")
            ],
            "{route}"
        );
    }
    // TCPRouteMultipleRoutesAttachment: a newer route on the same
    // listener is accepted and counted, but the older takes every
    // connection.
    eventually("the older route to take connections", || {
        conformance.stream(attach, 9310) == "tcp-attach-backend-1"
    });
    // Creation times are in seconds, and of two routes created in one
    // second the first by name ("newer") is the older: the newer one is
    // created in a later second.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    conformance.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: TCPRoute\n\
         metadata: {{name: tcproute-attach-newer, namespace: {INFRA}}}\n\
         spec:\n  parentRefs: [{{name: {attach}, sectionName: tcp}}]\n  \
         rules: [{{backendRefs: [{{name: tcp-attach-backend-2, port: 3000}}]}}]\n"
    ));
    for route in ["tcproute-attach-older", "tcproute-attach-newer"] {
        assert_eq!(
            conformance.route_conditions_of("tcproutes", INFRA, route)[0],
            said("Accepted", "True", "Accepted"),
            "{route}"
        );
    }
    eventually("the listener to count both routes", || {
        listener_statuses(&conformance, attach)
            .first()
            .is_some_and(|l| l.3 == 2)
    });
    for i in 0..20 {
        assert_eq!(
            conformance.stream(attach, 9310),
            "tcp-attach-backend-1",
            "connection {i}"
        );
    }
}

#[test]
fn a_route_on_two_gateways_serves_on_both_beside_each_one_s_own() {
    // HTTPRouteMultipleGateways: /shared reaches infra-backend-v1 through
    // either Gateway; the rest each Gateway's own route's backend.
    // HTTPRouteNoBackendRefs: a rule without backends (omitted or empty)
    // is answered 500.
    // (One manifest at a time: both route / on same-namespace.)
    let Some(conformance) = Conformance::with(
        &["httproute-multiple-gateways"],
        &["same-namespace", "all-namespaces"],
    ) else {
        return;
    };
    conformance.expect(
        "same-namespace",
        &[(HOST, "/shared", V1, 200), (HOST, "/", V2, 200)],
    );
    conformance.expect(
        "all-namespaces",
        &[(HOST, "/shared", V1, 200), (HOST, "/", V3, 200)],
    );
    drop(conformance);
    let Some(conformance) = Conformance::with(&["httproute-omitted-backendrefs"], &["same-namespace"]) else {
        return;
    };
    conformance.expect(
        "same-namespace",
        &[
            (HOST, "/forward", V1, 200),
            (HOST, "/omitted-no-forward", "", 500),
            (HOST, "/empty-no-forward", "", 500),
        ],
    );
    assert_eq!(
        conformance.route_conditions(INFRA, "omitted-backendrefs"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

#[test]
fn backends_that_speak_h2c_or_websockets_are_reached_in_their_protocol() {
    // HTTPRouteBackendProtocolH2C: infra-backend-v1's port 8081 speaks
    // HTTP/2 by prior knowledge only (an HTTP/1.1 request fails its
    // handshake): a client's HTTP/1.1 request reaches it as HTTP/2.
    let Some(conformance) =
        Conformance::with_backend_protocols(&["httproute-backend-protocol-h2c"], &["same-namespace"])
    else {
        return;
    };
    let port = conformance.port("same-namespace", 80);
    let answer = || {
        let (status, body) = common::get_by_length(port, HOST, "/h2c");
        (
            status,
            serde_json::from_str::<Value>(&body).unwrap_or(Value::Null),
        )
    };
    eventually("the h2c backend to answer", || answer().0 == 200);
    let (status, body) = answer();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["backend"], "infra-backend-v1", "{body}");
    assert_eq!(body["version"], "HTTP/2.0", "{body}");
    assert_eq!(body["path"], "/h2c", "{body}");
    assert_eq!(
        conformance.route_conditions(INFRA, "backend-protocol-h2c"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
    drop(conformance);
    // HTTPRouteBackendProtocolWebSocket: a websocket (a real client's
    // handshake and frames) through the router to port 8082's echo
    // server: a text and a binary message come back as sent.
    let Some(conformance) =
        Conformance::with_backend_protocols(&["httproute-backend-protocol-websocket"], &["same-namespace"])
    else {
        return;
    };
    eventually("a websocket through the router", || {
        conformance
            .websocket("same-namespace", "/ws")
            .get("error")
            .is_none()
    });
    assert_eq!(
        conformance.websocket("same-namespace", "/ws"),
        serde_json::json!({
            "text": "Websocket Support!",
            "binary": [1, 2, 3, 4, 5, 6, 7],
            "backend": "infra-backend-v1",
        })
    );
    assert_eq!(
        conformance.route_conditions(INFRA, "backend-protocol-ws"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

#[test]
fn routes_reach_headless_services_and_services_with_endpoint_slices_of_their_own() {
    // HTTPRouteServiceTypes, through the Kubernetes registry (the fake API
    // server, its objects as the manifest writes them): a Service whose
    // EndpointSlices are written by hand, a headless Service (its slices
    // as the EndpointSlice controller writes them for its selector) and a
    // headless Service with hand-written slices each take the route's
    // requests to infra-backend-v1. Each has an IPv4 slice with that
    // backend's address and an empty IPv6 one.
    use k8s_openapi::api::core::v1::{Namespace, Service};
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube::api::{Api, PostParams};
    let Some(conformance) = Conformance::with_kubernetes(&["httproute-service-types"], &["same-namespace"])
    else {
        return;
    };
    let upstream = common::named_upstream(V1);
    let cluster = conformance.cluster();
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    let namespace = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": INFRA, "labels": {"kubernetes.io/metadata.name": INFRA}},
    });
    cluster
        .block_on(namespaces.create(
            &PostParams::default(),
            &serde_json::from_value(namespace).unwrap(),
        ))
        .unwrap();
    let services: Api<Service> = Api::namespaced(cluster.client(), INFRA);
    let slices: Api<EndpointSlice> = Api::namespaced(cluster.client(), INFRA);
    let created = PostParams::default();
    let kinds = [
        ("manual-endpointslices", "10.96.3.1", None),
        ("headless", "None", Some(V1)),
        ("headless-manual-endpointslices", "None", None),
    ];
    for (name, cluster_ip, app) in kinds {
        let service = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": INFRA},
            "spec": {
                "clusterIP": cluster_ip,
                "selector": app.map(|app| serde_json::json!({"app": app})),
                "ports": [{"name": "first-port", "protocol": "TCP", "port": 8080, "targetPort": 3000}],
            },
        });
        cluster
            .block_on(services.create(&created, &serde_json::from_value(service).unwrap()))
            .unwrap();
        let ready = serde_json::json!([{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]);
        for (family, endpoints) in [("IPv4", ready), ("IPv6", serde_json::json!([]))] {
            let slice = serde_json::json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": format!("{name}-{}", family.to_ascii_lowercase()),
                    "namespace": INFRA,
                    "labels": {"kubernetes.io/service-name": name},
                },
                "addressType": family,
                "ports": [{"name": "first-port", "port": upstream, "protocol": "TCP"}],
                "endpoints": endpoints,
            });
            cluster
                .block_on(slices.create(&created, &serde_json::from_value(slice).unwrap()))
                .unwrap();
        }
    }
    conformance.expect(
        "same-namespace",
        &[
            (HOST, "/manual-endpointslices", V1, 200),
            (HOST, "/headless", V1, 200),
            (HOST, "/headless-manual-endpointslices", V1, 200),
        ],
    );
    assert_eq!(
        conformance.route_conditions(INFRA, "service-types"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

#[test]
fn a_certificate_of_another_namespace_without_a_grant_is_not_permitted() {
    // GatewaySecretMissingReferenceGrant: the listener's ResolvedRefs is
    // False (RefNotPermitted), and it is not programmed.
    let Some(conformance) = Conformance::with(&["gateway-secret-missing-reference-grant"], &[]) else {
        return;
    };
    let listeners = listener_statuses(&conformance, "gateway-secret-missing-reference-grant");
    assert_eq!(listeners.len(), 1, "{listeners:?}");
    assert_eq!(listeners[0].0, "https");
    assert!(
        listeners[0]
            .2
            .contains(&said("ResolvedRefs", "False", "RefNotPermitted"))
            && listeners[0].2.contains(&said("Programmed", "False", "Invalid")),
        "{listeners:?}"
    );
    assert_eq!(listeners[0].3, 0);
}

#[test]
fn a_gateway_s_frontend_validation_verifies_client_certificates_by_port() {
    // GatewayFrontendClientCertificateValidation: port 443 takes clients
    // signed by the default CA (tls-validity-checks-ca-certificate), 8443
    // those of its own (the per-port one); each refuses the other's and
    // none. GatewayFrontendClientCertificateValidationInsecureFallback:
    // with AllowInsecureFallback each port takes either and none too, and
    // the Gateway says InsecureFrontendValidationMode.
    let (strict, fallback) = ("client-validation-default", "client-validation-insecure-fallback");
    let Some(conformance) = Conformance::with(
        &[
            "gateway-with-clientcertificate-validation",
            "gateway-with-clientcertificate-validation-insecure-fallback",
        ],
        &[strict, fallback],
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pki = pilot_test_support::certs::Pki::new(dir.path());
    let client = "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n";
    let mut clients = Vec::new();
    for (ca, bundle) in [
        ("default-ca", "tls-validity-checks-ca-certificate"),
        ("port-ca", "tls-validity-checks-per-port-ca-certificate"),
    ] {
        let authority = pki.ca(ca).unwrap();
        conformance.write_ca_bundle(INFRA, bundle, &std::fs::read_to_string(&authority.cert).unwrap());
        clients.push(pki.leaf(&format!("client-of-{ca}"), ca, client).unwrap());
    }
    let (default_client, port_client) = (&clients[0], &clients[1]);
    let answered = |gateway: &str, port: u16, host: &str, client, backend: &str| {
        conformance.https_get_as(gateway, port, host, client) == Some((200, backend.to_string()))
    };
    eventually("both Gateways to verify their clients", || {
        answered(strict, 443, "example.org", Some(default_client), V1)
            && answered(strict, 8443, "second-example.org", Some(port_client), V2)
            && answered(fallback, 443, "example.org", Some(default_client), V1)
    });
    let cases: [(&str, u16, &str, Option<&pilot_test_support::certs::Pair>, bool); 12] = [
        (strict, 443, "example.org", Some(default_client), true),
        (strict, 443, "example.org", Some(port_client), false),
        (strict, 443, "example.org", None, false),
        (strict, 8443, "second-example.org", Some(port_client), true),
        (strict, 8443, "second-example.org", Some(default_client), false),
        (strict, 8443, "second-example.org", None, false),
        (fallback, 443, "example.org", Some(default_client), true),
        (fallback, 443, "example.org", Some(port_client), true),
        (fallback, 443, "example.org", None, true),
        (fallback, 8443, "second-example.org", Some(port_client), true),
        (fallback, 8443, "second-example.org", Some(default_client), true),
        (fallback, 8443, "second-example.org", None, true),
    ];
    for (gateway, port, host, client, taken) in cases {
        let backend = if port == 443 { V1 } else { V2 };
        let answer = conformance.https_get_as(gateway, port, host, client);
        let name = client
            .map(|c| c.cert.display().to_string())
            .unwrap_or("no certificate".into());
        match taken {
            true => assert_eq!(
                answer,
                Some((200, backend.to_string())),
                "{gateway}:{port} with {name}"
            ),
            // Refused in the handshake (or, by TLS 1.3, right after it).
            false => assert!(
                answer.as_ref().is_none_or(|(status, _)| *status == 0),
                "{gateway}:{port} with {name}: {answer:?}"
            ),
        }
    }
    let path = format!("/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/gateways/{fallback}");
    eventually("the fallback Gateway to say its mode is insecure", || {
        triples(&conformance.object(&path)["status"]["conditions"]).contains(&said(
            "InsecureFrontendValidationMode",
            "True",
            "ConfigurationChanged",
        ))
    });
}

#[test]
fn frontend_validation_that_cannot_be_followed_is_not_accepted_and_not_served() {
    // GatewayInvalidFrontendClientCertificateValidation and
    // GatewayFrontendInvalidDefaultClientCertificateValidation: a listener
    // whose CA reference is missing, of another kind, or of another
    // namespace without a grant is not accepted (NoValidCACertificate),
    // its ResolvedRefs says which, it is not programmed and not served;
    // an HTTP listener of the same Gateway is untouched.
    let Some(conformance) = Conformance::with(
        &[
            "gateway-with-invalid-clientcertificate-validation",
            "gateway-invalid-default-frontend-client-certificate-validation",
        ],
        &[],
    ) else {
        return;
    };
    // The default's ConfigMap is there: the listener using it is served.
    conformance.write_ca_bundle(INFRA, "tls-validity-checks-ca-certificate", &conformance.ca_pem());
    let invalid = "gateway-with-invalid-client-cert-validation";
    let default = "invalid-default-client-validation-config";
    let cases = [
        (invalid, "https", None),
        (invalid, "https-unresolved", Some("InvalidCACertificateRef")),
        (invalid, "https-invalid-kind", Some("InvalidCACertificateKind")),
        (invalid, "https-grant-missing", Some("RefNotPermitted")),
        (default, "http", None),
        (default, "https", Some("InvalidCACertificateRef")),
    ];
    let condition = |listener: &ListenerStatus, type_: &str| {
        listener
            .2
            .iter()
            .find(|c| c.0 == type_)
            .cloned()
            .unwrap_or_default()
    };
    for (gateway, name, refused) in cases {
        let mut last = None;
        eventually(&format!("{gateway}/{name} to say {refused:?}"), || {
            let listeners = listener_statuses(&conformance, gateway);
            let Some(listener) = listeners.into_iter().find(|l| l.0 == name) else {
                return false;
            };
            let fine = match refused {
                None => ["Accepted", "ResolvedRefs", "Programmed"]
                    .iter()
                    .all(|t| condition(&listener, t).1 == "True"),
                Some(reason) => {
                    condition(&listener, "ResolvedRefs") == said("ResolvedRefs", "False", reason)
                        && condition(&listener, "Accepted")
                            == said("Accepted", "False", "NoValidCACertificate")
                        && condition(&listener, "Programmed").1 == "False"
                }
            };
            last = Some(listener);
            fine
        });
        assert!(last.is_some());
    }
}

#[test]
fn listeners_say_which_route_kinds_they_support_and_how_many_routes_attach() {
    // GatewayInvalidRouteKind: a listener allowing only a kind that is not
    // a route supports none (ResolvedRefs False, InvalidRouteKinds); one
    // allowing it and HTTPRoute supports HTTPRoute, still InvalidRouteKinds.
    // GatewayWithAttachedRoutes: listeners admitting routes of their own
    // namespace by a selector on its name count the routes attached: one,
    // then two (a third route, whose hostname the listener's does not
    // take, is not attached).
    let Some(conformance) = Conformance::with(
        &["gateway-invalid-route-kind", "gateway-with-attached-routes"],
        &[],
    ) else {
        return;
    };
    let http_route = "gateway.networking.k8s.io/HTTPRoute".to_string();
    let [(name, kinds, conditions, attached)] =
        <[_; 1]>::try_from(listener_statuses(&conformance, "gateway-only-invalid-route-kind")).unwrap();
    assert_eq!((name.as_str(), kinds.len(), attached), ("http", 0, 0));
    assert!(
        conditions.contains(&said("ResolvedRefs", "False", "InvalidRouteKinds")),
        "{conditions:?}"
    );
    let [(_, kinds, conditions, attached)] = <[_; 1]>::try_from(listener_statuses(
        &conformance,
        "gateway-supported-and-invalid-route-kind",
    ))
    .unwrap();
    assert_eq!((kinds, attached), (vec![http_route.clone()], 0));
    assert!(
        conditions.contains(&said("ResolvedRefs", "False", "InvalidRouteKinds")),
        "{conditions:?}"
    );
    for (gateway, expected) in [
        ("gateway-with-one-attached-route", 1),
        ("gateway-with-two-attached-routes", 2),
    ] {
        let mut seen = Vec::new();
        eventually(&format!("{gateway} to count {expected} routes"), || {
            seen = listener_statuses(&conformance, gateway);
            seen.len() == 1 && seen[0].3 == expected
        });
        let (_, kinds, conditions, _) = &seen[0];
        assert_eq!(kinds, std::slice::from_ref(&http_route), "{gateway}");
        assert!(
            conditions.iter().any(|c| c.0 == "Accepted" && c.1 == "True")
                && conditions.iter().any(|c| c.0 == "ResolvedRefs" && c.1 == "True"),
            "{gateway}: {conditions:?}"
        );
    }
    assert_eq!(
        condition(
            &conformance.route_conditions(INFRA, "http-route-not-accepted"),
            "Accepted"
        ),
        said("Accepted", "False", "NoMatchingListenerHostname")
    );
}

#[test]
fn a_route_naming_a_listener_by_section_attaches_to_it_alone() {
    // GatewayWithAttachedRoutesWithPort8080: of a Gateway's two HTTP
    // listeners (8080 and 80), the route's sectionName names the one on
    // 80: it counts the route, the other none, both accepted with their
    // references resolved; the route's requests are served on 80 only.
    let gateway = "gateway-with-two-listeners-and-one-attached-route";
    let Some(conformance) = Conformance::with(&["gateway-with-attached-routes-with-port-8080"], &[gateway])
    else {
        return;
    };
    let http_route = "gateway.networking.k8s.io/HTTPRoute".to_string();
    let mut seen = Vec::new();
    eventually("the listeners to count their routes", || {
        seen = listener_statuses(&conformance, gateway);
        seen.iter().map(|l| (l.0.as_str(), l.3)).collect::<Vec<_>>() == [("http-unattached", 0), ("http", 1)]
    });
    for (name, kinds, conditions, _) in &seen {
        assert_eq!(kinds, std::slice::from_ref(&http_route), "{name}");
        assert!(
            conditions.contains(&said("Accepted", "True", "Accepted"))
                && conditions.iter().any(|c| c.0 == "ResolvedRefs" && c.1 == "True"),
            "{name}: {conditions:?}"
        );
    }
    conformance.expect_on(gateway, 80, &[(HOST, "/", V1, 200)]);
    conformance.expect_on(gateway, 8080, &[(HOST, "/", "", 404)]);
}

#[test]
fn tls_routes_and_certificates_other_namespaces_do_not_grant_say_why() {
    // TLSRouteInvalidBackendRefUnknownKind (InvalidKind),
    // TLSRouteInvalidReferenceGrant (grants that each miss one part:
    // RefNotPermitted), TLSRouteInvalidNoMatchingListenerHostname
    // (hostnames no listener's takes, exact or wildcard:
    // NoMatchingListenerHostname); GatewaySecretInvalidReferenceGrant
    // (the listener's Secret of another namespace, no grant permitting it:
    // RefNotPermitted, not programmed), then
    // GatewaySecretReferenceGrantAllInNamespace applied (a grant of every
    // Secret there to the Gateways of the listener's namespace: its
    // listener and the first one resolved and programmed).
    let Some(conformance) = Conformance::with(
        &[
            "tlsroute-invalid-backendref-unknown-kind",
            "tlsroute-invalid-reference-grant",
            "tlsroute-invalid-no-matching-listener-hostname",
            "gateway-secret-invalid-reference-grant",
        ],
        &[],
    ) else {
        return;
    };
    let tls = |name: &str| conformance.route_conditions_of("tlsroutes", INFRA, name);
    for (name, reason) in [
        ("invalid-backend-ref-unknown-kind", "InvalidKind"),
        ("gateway-conformance-infra-test", "RefNotPermitted"),
    ] {
        assert_eq!(
            tls(name),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "False", reason)
            ],
            "{name}"
        );
    }
    for name in ["tlsroute-hostname-mismatch-1", "tlsroute-hostname-mismatch-2"] {
        assert_eq!(
            condition(&tls(name), "Accepted"),
            said("Accepted", "False", "NoMatchingListenerHostname"),
            "{name}"
        );
    }
    assert_eq!(
        listener_conditions(&conformance, "gateway-secret-invalid-reference-grant", "https"),
        [
            said("Accepted", "True", "Accepted"),
            said("Conflicted", "False", "NoConflicts"),
            said("Programmed", "False", "Invalid"),
            said("ResolvedRefs", "False", "RefNotPermitted"),
        ]
    );
    let corpus = pilot_test_support::corpus("gateway-api").expect("read above");
    conformance.apply(
        &std::fs::read_to_string(
            corpus.join("gwapi_conformance.tests.gateway-secret-reference-grant-all-in-namespace.yaml"),
        )
        .unwrap(),
    );
    for gateway in [
        "gateway-secret-reference-grant-all-in-namespace",
        "gateway-secret-invalid-reference-grant",
    ] {
        eventually(&format!("{gateway}'s listener to be resolved"), || {
            listener_conditions(&conformance, gateway, "https")
                == [
                    said("Accepted", "True", "Accepted"),
                    said("Conflicted", "False", "NoConflicts"),
                    said("Programmed", "True", "Programmed"),
                    said("ResolvedRefs", "True", "ResolvedRefs"),
                ]
        });
    }
}
