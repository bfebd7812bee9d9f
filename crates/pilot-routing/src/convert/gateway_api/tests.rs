use super::*;
use pilot_api::gateway_api::{HttpHeaderMatch, HttpMethod, HttpPathMatch, HttpRouteMatch, PathMatchType};
use pilot_model::document;

fn path(kind: PathMatchType, value: &str) -> HttpRouteMatch {
    HttpRouteMatch {
        path_written: Some(HttpPathMatch {
            type_written: Some(kind),
            value_written: Some(value.to_string()),
        }),
        ..Default::default()
    }
}

#[test]
fn matches_are_known_apart_only_when_no_request_meets_both() {
    use PathMatchType::{Exact, PathPrefix, RegularExpression};
    let overlap = order::overlap;
    assert!(!overlap(&path(Exact, "/a"), &path(Exact, "/b")));
    assert!(overlap(&path(Exact, "/api/v1"), &path(PathPrefix, "/api")));
    assert!(!overlap(&path(Exact, "/apis"), &path(PathPrefix, "/api")));
    assert!(!overlap(&path(PathPrefix, "/api"), &path(PathPrefix, "/apis")));
    assert!(overlap(&path(PathPrefix, "/"), &path(PathPrefix, "/apis")));
    assert!(overlap(&path(RegularExpression, "/x.*"), &path(Exact, "/y")));
    let with = |method, value: &str| HttpRouteMatch {
        method,
        headers: Some(vec![HttpHeaderMatch {
            name: "end-user".into(),
            value: value.into(),
            type_written: None,
        }]),
        ..Default::default()
    };
    assert!(!overlap(
        &with(Some(HttpMethod::Get), "a"),
        &with(Some(HttpMethod::Post), "a")
    ));
    assert!(!overlap(&with(None, "jason"), &with(None, "mary")));
    assert!(overlap(
        &with(None, "jason"),
        &with(Some(HttpMethod::Get), "jason")
    ));
}

#[test]
fn durations_as_the_gateway_api_writes_them() {
    let d = std::time::Duration::from_millis;
    assert_eq!(routes::gateway_duration(d(90_000)).as_deref(), Some("1m30s"));
    assert_eq!(routes::gateway_duration(d(1_500)).as_deref(), Some("1s500ms"));
    assert_eq!(routes::gateway_duration(d(0)).as_deref(), Some("0s"));
    assert_eq!(routes::gateway_duration(d(7_200_000)).as_deref(), Some("2h"));
}

#[test]
fn server_hosts_give_listeners_and_who_may_attach() {
    let text = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: edge, namespace: web}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*/a.example.com", ./b.example.com, shop/c.example.com, d.example.com]
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: [a.example.com]
    tls: {mode: SIMPLE, credentialName: a-cert}
  - port: {number: 8443, name: mtls, protocol: HTTPS}
    hosts: [a.example.com]
    tls: {mode: MUTUAL, credentialName: a-cert}
"#;
    let objects = document::parse("gw.yaml", text, &pilot_api::default_registry()).unwrap();
    let conversion = to_gateway_api(&objects, &GatewayApiOptions::default()).unwrap();
    let kinds: Vec<&str> = conversion.objects.iter().map(|o| o.meta.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "GatewayClass.gateway.networking.k8s.io",
            "Gateway.gateway.networking.k8s.io"
        ]
    );
    let listeners = &conversion.objects[1].spec["listeners"];
    let from: Vec<String> = listeners
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            format!(
                "{} {} {}",
                l["name"].as_str().unwrap(),
                l["hostname"].as_str().unwrap_or("*"),
                l["allowedRoutes"]["namespaces"]
            )
        })
        .collect();
    assert_eq!(
        from,
        [
            r#"http-1 a.example.com {"from":"All"}"#,
            r#"http-2 b.example.com {"from":"Same"}"#,
            r#"http-3 c.example.com {"from":"Selector","selector":{"matchLabels":{"kubernetes.io/metadata.name":"shop"}}}"#,
            r#"http-4 d.example.com {"from":"All"}"#,
            r#"https a.example.com {"from":"All"}"#,
        ]
    );
    assert_eq!(listeners[4]["tls"]["certificateRefs"][0]["name"], "a-cert");
    let paths: Vec<&str> = conversion.notes.iter().map(|n| n.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "spec.selector",
            "spec.servers[1].tls.credentialName",
            "spec.servers[2].tls.mode"
        ]
    );
}

fn notes_of(text: &str) -> Vec<String> {
    let objects = document::parse("vs.yaml", text, &pilot_api::default_registry()).unwrap();
    let conversion = to_gateway_api(&objects, &GatewayApiOptions::default()).unwrap();
    conversion
        .notes
        .iter()
        .map(|n| format!("{}/{} {}", n.namespace, n.name, n.path))
        .collect()
}

#[test]
fn what_the_routes_leave_out_or_share_is_noted_at_its_field() {
    let notes = notes_of(
        r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a, namespace: default}
spec:
  hosts: [reviews]
  http:
  - mirror: {host: shadow, port: {number: 80}}
    mirrorPercentage: {value: 0.00001}
    route:
    - {destination: {host: reviews-v1, port: {number: 9080}}, weight: 100}
    - {destination: {host: reviews-v2, port: {number: 9080}}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: b, namespace: default}
spec:
  hosts: [reviews.default.svc.cluster.local, httpbin.org]
  http:
  - match: [{uri: {exact: /x}, sourceLabels: {app: web}}, {uri: {exact: /y}}]
    retries: {attempts: 3}
    route: [{destination: {host: httpbin.org}}, {destination: {host: reviews, subset: v2, port: {number: 9080}}, weight: 100}]
"#,
    );
    assert_eq!(
        notes,
        [
            "default/a spec.http[0].mirrorPercentage",
            "default/a spec.http[0].route[1].weight",
            "default/b spec.http[0].match[0].sourceLabels",
            "default/b spec.http[0].retries",
            "default/b spec.http[0].route[0].destination.host",
            "default/b spec.http[0].route[1].destination.subset",
            "default/b spec.hosts[1]",
            "default/b spec.hosts",
        ]
    );
}

#[test]
fn a_tcp_server_is_one_listener_without_hostname() {
    let text = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: db, namespace: data}
spec:
  servers:
  - port: {number: 3306, name: mysql, protocol: TCP}
    hosts: [db.example.com, other.example.com]
"#;
    let objects = document::parse("gw.yaml", text, &pilot_api::default_registry()).unwrap();
    let conversion = to_gateway_api(&objects, &GatewayApiOptions::default()).unwrap();
    let listeners = conversion.objects[1].spec["listeners"].as_array().unwrap();
    assert_eq!(listeners.len(), 1);
    assert_eq!(listeners[0]["protocol"], "TCP");
    assert!(listeners[0].get("hostname").is_none(), "{listeners:?}");
    let paths: Vec<&str> = conversion.notes.iter().map(|n| n.path.as_str()).collect();
    assert_eq!(paths, ["spec.servers[0].hosts"]);
}
