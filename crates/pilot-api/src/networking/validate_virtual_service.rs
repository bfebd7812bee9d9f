//! [`VirtualService`] validation as Istio's (`ValidateVirtualService` and
//! `validateHTTPRoute`), every error with its field path.

use super::checks::{
    at, check_destination, check_duration, check_export_to, check_gateway_names, check_headers, check_labels,
    check_match_header_name, check_percentage, check_port, check_regex_at, check_string_match, check_subnet,
    index, is_ip, key, wildcard_domain,
};
use super::virtual_service::{
    CorsPolicy, HttpFaultInjection, HttpMatchRequest, HttpRedirect, HttpRetry, HttpRewrite, HttpRoute,
    RouteDestination, TlsRoute, VirtualService,
};
use crate::primitives::uri_text;
use pilot_model::{FieldErrors, dns1123_label};

/// Conditions Envoy retries on (`x-envoy-retry-on`,
/// `x-envoy-retry-grpc-on`), as Istio accepts them in `retryOn`.
pub const RETRY_ON: [&str; 16] = [
    "5xx",
    "gateway-error",
    "reset",
    "reset-before-request",
    "connect-failure",
    "retriable-4xx",
    "refused-stream",
    "retriable-status-codes",
    "retriable-headers",
    "envoy-ratelimited",
    "http3-post-connect-failure",
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
];

/// Methods CORS may allow.
const CORS_METHODS: [&str; 10] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE", "*",
];

/// gRPC status names a fault may abort with.
const GRPC_STATUS: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The largest direct response body Istio accepts.
const MAX_DIRECT_RESPONSE_BYTES: usize = 1024 * 1024;

/// True when host pattern `a` and `b` can name the same host (Istio's
/// `host.Name.Matches`): equal, or one a wildcard covering the other.
pub fn hosts_overlap(a: &str, b: &str) -> bool {
    let covers = |w: &str, other: &str| match w.strip_prefix('*') {
        Some(suffix) => {
            other.ends_with(suffix) || other.strip_prefix('*').is_some_and(|o| o.ends_with(suffix))
        }
        None => false,
    };
    a == b || covers(a, b) || covers(b, a)
}

/// True when host `sni` is within host pattern `host` (Istio's
/// `host.Name.SubsetOf`).
fn subset_of(sni: &str, host: &str) -> bool {
    match host.strip_prefix('*') {
        Some(suffix) => sni.ends_with(suffix) && sni != suffix,
        None => sni == host,
    }
}

pub(crate) fn validate(vs: &VirtualService, errors: &mut FieldErrors) {
    if vs.hosts.is_empty() {
        // A delegate: routes only.
        if !vs.gateways.is_empty() {
            errors.push(
                "spec.gateways",
                "delegate virtual service must have no gateways specified",
            );
        }
        if !vs.tls.is_empty() {
            errors.push(
                "spec.tls",
                "delegate virtual service must have no tls route specified",
            );
        }
        if !vs.tcp.is_empty() {
            errors.push(
                "spec.tcp",
                "delegate virtual service must have no tcp route specified",
            );
        }
    }
    check_gateway_names("spec.gateways", &vs.gateways, errors);
    let to_gateway = !vs.gateways.is_empty() && !vs.gateways.iter().any(|g| g == "mesh");
    let to_mesh = vs.gateways.is_empty() || vs.gateways.iter().any(|g| g == "mesh");

    let mut all_valid = true;
    for (i, host) in vs.hosts.iter().enumerate() {
        let path = index("spec.hosts", i);
        if let Err(message) = wildcard_domain(host) {
            if !is_ip(host) {
                errors.push(path, message);
                all_valid = false;
            }
        } else if to_mesh && host == "*" {
            errors.push(
                path,
                "wildcard host * is not allowed for virtual services bound to the mesh gateway",
            );
            all_valid = false;
        }
    }
    if all_valid {
        for i in 0..vs.hosts.len() {
            for j in i + 1..vs.hosts.len() {
                if hosts_overlap(&vs.hosts[i], &vs.hosts[j]) {
                    errors.push(
                        index("spec.hosts", j),
                        format!(
                            "duplicate hosts in virtual service: {} & {}",
                            vs.hosts[i], vs.hosts[j]
                        ),
                    );
                }
            }
        }
    }
    if vs.http.is_empty() && vs.tcp.is_empty() && vs.tls.is_empty() {
        errors.push("spec", "http, tcp or tls must be provided in virtual service");
    }
    for (i, route) in vs.http.iter().enumerate() {
        http_route(&index("spec.http", i), route, vs.hosts.is_empty(), errors);
    }
    for (i, route) in vs.tls.iter().enumerate() {
        tls_route(&index("spec.tls", i), route, vs, to_gateway, errors);
    }
    for (i, route) in vs.tcp.iter().enumerate() {
        let path = index("spec.tcp", i);
        for (j, m) in route.matches.iter().enumerate() {
            let mp = index(&at(&path, "match"), j);
            for (k, subnet) in m.destination_subnets.iter().enumerate() {
                check_subnet(&index(&at(&mp, "destinationSubnets"), k), subnet, errors);
            }
            if !m.source_subnet.is_empty() {
                check_subnet(&at(&mp, "sourceSubnet"), &m.source_subnet, errors);
            }
            if let Some(port) = m.port {
                check_port(&at(&mp, "port"), port, errors);
            }
            check_labels(&at(&mp, "sourceLabels"), &m.source_labels, errors);
            check_gateway_names(&at(&mp, "gateways"), &m.gateways, errors);
            source_namespace(&at(&mp, "sourceNamespace"), &m.source_namespace, errors);
        }
        if route.route.is_empty() {
            errors.push(at(&path, "route"), "TCP route is required");
        }
        route_destinations(&at(&path, "route"), &route.route, errors);
    }
    check_export_to("spec.exportTo", &vs.export_to, false, errors);
}

fn source_namespace(path: &str, namespace: &str, errors: &mut FieldErrors) {
    if !namespace.is_empty() && dns1123_label(namespace).is_err() {
        errors.push(path, format!("sourceNamespace match {namespace} is invalid"));
    }
}

fn tls_route(path: &str, route: &TlsRoute, vs: &VirtualService, to_gateway: bool, errors: &mut FieldErrors) {
    if route.matches.is_empty() {
        errors.push(
            at(path, "match"),
            "TLS route must have at least one match condition",
        );
    }
    for (j, m) in route.matches.iter().enumerate() {
        let mp = index(&at(path, "match"), j);
        if m.sni_hosts.is_empty() {
            errors.push(at(&mp, "sniHosts"), "TLS match must have at least one SNI host");
        }
        for (k, sni) in m.sni_hosts.iter().enumerate() {
            let sp = index(&at(&mp, "sniHosts"), k);
            let checked = if to_gateway && sni.starts_with("outbound_") {
                Ok(())
            } else {
                wildcard_domain(sni)
            };
            match checked {
                Err(_) if is_ip(sni) => {}
                Err(message) => errors.push(sp, message),
                Ok(()) if !vs.hosts.iter().any(|h| subset_of(sni, h) || h == "*") => errors.push(
                    sp,
                    format!(
                        "SNI host {sni:?} is not a compatible subset of any of the virtual service hosts: [{}]",
                        vs.hosts.join(", ")
                    ),
                ),
                Ok(()) => {}
            }
        }
        for (k, subnet) in m.destination_subnets.iter().enumerate() {
            check_subnet(&index(&at(&mp, "destinationSubnets"), k), subnet, errors);
        }
        if let Some(port) = m.port {
            check_port(&at(&mp, "port"), port, errors);
        }
        check_labels(&at(&mp, "sourceLabels"), &m.source_labels, errors);
        check_gateway_names(&at(&mp, "gateways"), &m.gateways, errors);
        source_namespace(&at(&mp, "sourceNamespace"), &m.source_namespace, errors);
    }
    if route.route.is_empty() {
        errors.push(at(path, "route"), "TLS route is required");
    }
    route_destinations(&at(path, "route"), &route.route, errors);
}

fn route_destinations(path: &str, routes: &[RouteDestination], errors: &mut FieldErrors) {
    let mut total: i64 = 0;
    for (i, r) in routes.iter().enumerate() {
        let rp = index(path, i);
        check_destination(&at(&rp, "destination"), &r.destination, errors);
        weight(&rp, r.weight, &mut total, errors);
    }
    if routes.len() > 1 && total == 0 {
        errors.push(path, "total destination weight = 0");
    }
}

fn weight(path: &str, weight: Option<i32>, total: &mut i64, errors: &mut FieldErrors) {
    let weight = weight.unwrap_or(0);
    if weight < 0 {
        errors.push(at(path, "weight"), format!("weight {weight} < 0"));
    }
    *total += i64::from(weight);
}

fn http_route(path: &str, route: &HttpRoute, delegate: bool, errors: &mut FieldErrors) {
    conflicts(path, route, delegate, errors);
    if route.websocket_upgrade.is_some() {
        errors.warn(
            at(path, "websocketUpgrade"),
            "ignored, as Istio ignores it: every HTTP route upgrades to WebSocket when the client asks",
        );
    }
    for (i, m) in route.matches.iter().enumerate() {
        http_match(&index(&at(path, "match"), i), m, errors);
    }
    check_headers(&at(path, "headers"), route.headers.as_ref(), errors);
    if let Some(cors) = &route.cors_policy {
        cors_policy(&at(path, "corsPolicy"), cors, errors);
    }
    if let Some(fault) = &route.fault {
        fault_injection(&at(path, "fault"), fault, errors);
    }
    if let Some(percent) = route.mirror_percent
        && percent > 100
    {
        errors.push(
            at(path, "mirrorPercent"),
            format!("mirror_percent must have a max value of 100 (it has {percent})"),
        );
    }
    if let Some(p) = route.mirror_percentage {
        if p.value > 100.0 {
            errors.push(
                at(path, "mirrorPercentage.value"),
                format!(
                    "mirror_percentage must have a max value of 100 (it has {})",
                    p.value
                ),
            );
        }
        if p.value < 0.0 || p.value.is_nan() {
            errors.push(
                at(path, "mirrorPercentage.value"),
                format!(
                    "mirror_percentage must have a min value of 0 (it has {})",
                    p.value
                ),
            );
        }
    }
    if let Some(mirror) = &route.mirror {
        check_destination(&at(path, "mirror"), mirror, errors);
    }
    for (i, mirror) in route.mirrors.iter().enumerate() {
        let mp = index(&at(path, "mirrors"), i);
        check_destination(&at(&mp, "destination"), &mirror.destination, errors);
        if let Some(p) = mirror.percentage
            && !(0.0..=100.0).contains(&p.value)
        {
            errors.push(
                at(&mp, "percentage.value"),
                format!("mirror percentage must be between 0 and 100 (it has {})", p.value),
            );
        }
    }
    if let Some(redirect) = &route.redirect {
        http_redirect(&at(path, "redirect"), redirect, &route.matches, errors);
    }
    if let Some(direct) = &route.direct_response {
        let dp = at(path, "directResponse");
        http_status(&at(&dp, "status"), i64::from(direct.status), errors);
        if let Some(body) = &direct.body {
            let given = [&body.string, &body.bytes].iter().filter(|b| b.is_some()).count();
            if given > 1 {
                errors.push(at(&dp, "body"), "give only one of string or bytes");
            }
            let size = body.string.as_ref().map_or(0, String::len)
                + body.bytes.as_ref().map_or(0, |b| b.len() * 3 / 4);
            if size > MAX_DIRECT_RESPONSE_BYTES {
                errors.push(
                    at(&dp, "body"),
                    "large direct_responses may impact control plane performance, must be less than 1MB",
                );
            }
        }
    }
    if let Some(retries) = &route.retries {
        http_retry(&at(path, "retries"), retries, errors);
    }
    if let Some(rewrite) = &route.rewrite {
        http_rewrite(&at(path, "rewrite"), rewrite, errors);
    }
    authority_rewrite(path, route, errors);
    let mut total: i64 = 0;
    for (i, r) in route.route.iter().enumerate() {
        let rp = index(&at(path, "route"), i);
        check_headers(&at(&rp, "headers"), r.headers.as_ref(), errors);
        check_destination(&at(&rp, "destination"), &r.destination, errors);
        weight(&rp, r.weight, &mut total, errors);
    }
    if route.route.len() > 1 && total == 0 {
        errors.push(at(path, "route"), "total destination weight = 0");
    }
    check_duration(&at(path, "timeout"), route.timeout, errors);
}

/// Istio's `validateHTTPRouteConflict`: route, redirect and direct
/// response are exclusive; delegation takes neither route nor redirect.
fn conflicts(path: &str, route: &HttpRoute, delegate: bool, errors: &mut FieldErrors) {
    if route.delegate.is_some() && !delegate {
        if route.redirect.is_some() {
            errors.push(at(path, "redirect"), "root HTTP route must not specify redirect");
        }
        if !route.route.is_empty() {
            errors.push(at(path, "route"), "root HTTP route must not specify route");
        }
        return;
    }
    if route.delegate.is_some() {
        errors.push(
            at(path, "delegate"),
            "delegate HTTP route cannot contain delegate",
        );
    }
    let (what, field) = if route.redirect.is_some() {
        ("redirect", "redirect")
    } else if route.direct_response.is_some() {
        ("direct_response", "directResponse")
    } else {
        if route.route.is_empty() {
            errors.push(
                at(path, "route"),
                "HTTP route, redirect or direct_response is required",
            );
        }
        ("", "")
    };
    if !what.is_empty() {
        if !route.route.is_empty() {
            errors.push(
                at(path, field),
                format!("HTTP route cannot contain both route and {what}"),
            );
        }
        if route.fault.is_some() {
            errors.push(
                at(path, field),
                format!("HTTP route cannot contain both fault and {what}"),
            );
        }
        if route.rewrite.is_some() {
            errors.push(
                at(path, field),
                format!("HTTP route rule cannot contain both rewrite and {what}"),
            );
        }
        if route.redirect.is_some() && route.direct_response.is_some() {
            errors.push(
                at(path, field),
                "HTTP route rule cannot contain both direct_response and redirect",
            );
        }
    }
    if route.mirror.is_some() && !route.mirrors.is_empty() {
        errors.push(
            at(path, "mirrors"),
            "HTTP route cannot contain both mirror and mirrors",
        );
    }
}

fn http_match(path: &str, m: &HttpMatchRequest, errors: &mut FieldErrors) {
    for (field, map) in [("headers", &m.headers), ("withoutHeaders", &m.without_headers)] {
        for (name, value) in map {
            let hp = key(&at(path, field), name);
            check_match_header_name(&hp, name, errors);
            if !(field == "withoutHeaders" && value.regex.as_deref() == Some("*")) {
                check_string_match(&hp, value, false, errors);
            }
        }
    }
    if let Some(uri) = &m.uri {
        check_string_match(&at(path, "uri"), uri, false, errors);
        for (field, value) in [("exact", &uri.exact), ("prefix", &uri.prefix)] {
            if let Some(value) = value
                && let Err(message) = uri_text(value)
            {
                errors.push(at(&at(path, "uri"), field), message);
            }
        }
    }
    for (field, value) in [
        ("scheme", &m.scheme),
        ("method", &m.method),
        ("authority", &m.authority),
    ] {
        if let Some(value) = value {
            check_string_match(&at(path, field), value, false, errors);
        }
    }
    for (name, value) in &m.query_params {
        check_string_match(&key(&at(path, "queryParams"), name), value, false, errors);
    }
    if let Some(port) = m.port {
        check_port(&at(path, "port"), port, errors);
    }
    check_labels(&at(path, "sourceLabels"), &m.source_labels, errors);
    check_gateway_names(&at(path, "gateways"), &m.gateways, errors);
    source_namespace(&at(path, "sourceNamespace"), &m.source_namespace, errors);
}

fn cors_policy(path: &str, cors: &CorsPolicy, errors: &mut FieldErrors) {
    for (i, origin) in cors.allow_origins.iter().enumerate() {
        let op = index(&at(path, "allowOrigins"), i);
        let value = origin
            .exact
            .as_ref()
            .or(origin.prefix.as_ref())
            .or(origin.regex.as_ref());
        if value.is_none_or(String::is_empty) {
            errors.push(&op, "'' is not a valid match type for CORS allow origins");
        } else {
            check_string_match(&op, origin, true, errors);
        }
    }
    for (i, method) in cors.allow_methods.iter().enumerate() {
        if !CORS_METHODS.contains(&method.as_str()) {
            errors.push(
                index(&at(path, "allowMethods"), i),
                format!("{method:?} is not a supported HTTP method"),
            );
        }
    }
    for (field, names) in [
        ("allowHeaders", &cors.allow_headers),
        ("exposeHeaders", &cors.expose_headers),
    ] {
        for (i, name) in names.iter().enumerate() {
            let hp = index(&at(path, field), i);
            if name != "*" {
                check_match_header_name(&hp, name, errors);
            }
        }
    }
    if let Some(max_age) = cors.max_age {
        let mp = at(path, "maxAge");
        max_age.check_millis(&mp, errors);
        if max_age.as_std().subsec_nanos() != 0 {
            errors.push(mp, "max_age duration is accurate only to seconds precision");
        }
    }
}

fn fault_injection(path: &str, fault: &HttpFaultInjection, errors: &mut FieldErrors) {
    if fault.abort.is_none() && fault.delay.is_none() {
        errors.push(path, "HTTP fault injection must have an abort and/or a delay");
    }
    if let Some(abort) = &fault.abort {
        let ap = at(path, "abort");
        check_percentage(&at(&ap, "percentage"), abort.percentage, errors);
        let given = [
            abort.http_status.is_some(),
            abort.grpc_status.is_some(),
            abort.http2_error.is_some(),
        ]
        .iter()
        .filter(|g| **g)
        .count();
        if given > 1 {
            errors.push(&ap, "give only one of httpStatus, grpcStatus or http2Error");
        }
        if let Some(status) = abort.http_status {
            http_status(&at(&ap, "httpStatus"), i64::from(status), errors);
        }
        if let Some(status) = &abort.grpc_status
            && !GRPC_STATUS.contains(&status.as_str())
        {
            errors.push(
                at(&ap, "grpcStatus"),
                format!("gRPC status {status:?} is not supported; use a name such as NOT_FOUND"),
            );
        }
        if abort.http2_error.is_some() {
            errors.push(
                at(&ap, "http2Error"),
                "HTTP/2 abort fault injection not supported yet",
            );
        }
        if given == 0 {
            errors.push(&ap, "an abort needs httpStatus or grpcStatus");
        }
    }
    if let Some(delay) = &fault.delay {
        let dp = at(path, "delay");
        check_percentage(&at(&dp, "percentage"), delay.percentage, errors);
        if let Some(percent) = delay.percent
            && !(0..=100).contains(&percent)
        {
            errors.push(
                at(&dp, "percent"),
                format!("percentage {percent} is not in range 0..100"),
            );
        }
        check_duration(&at(&dp, "fixedDelay"), delay.fixed_delay, errors);
        if delay.exponential_delay.is_some() {
            errors.push(at(&dp, "exponentialDelay"), "exponentialDelay not supported yet");
        }
        if delay.fixed_delay.is_none() && delay.exponential_delay.is_none() {
            errors.push(&dp, "a delay needs fixedDelay");
        }
    }
}

fn http_status(path: &str, status: i64, errors: &mut FieldErrors) {
    if !(200..=599).contains(&status) {
        errors.push(path, format!("HTTP status {status} is not in range 200-599"));
    }
}

fn http_redirect(
    path: &str,
    redirect: &HttpRedirect,
    matches: &[HttpMatchRequest],
    errors: &mut FieldErrors,
) {
    if !redirect.uri.is_empty() && !redirect.prefix_rewrite.is_empty() {
        errors.push(path, "redirect may only specify one of uri or prefix_rewrite");
    }
    if !redirect.prefix_rewrite.is_empty()
        && matches
            .iter()
            .any(|m| m.uri.as_ref().is_some_and(|u| u.prefix.is_none()))
    {
        errors.push(
            at(path, "prefixRewrite"),
            "redirect prefix_rewrite requires all URI matches to use prefix match type",
        );
    }
    if redirect.uri.is_empty()
        && redirect.prefix_rewrite.is_empty()
        && redirect.authority.is_empty()
        && redirect.port.is_none()
        && redirect.derive_port.is_none()
        && redirect.scheme.is_empty()
    {
        errors.push(path, "redirect must specify URI, authority, scheme, or port");
    }
    if redirect.port.is_some() && redirect.derive_port.is_some() {
        errors.push(path, "give only one of port or derivePort");
    }
    if let Some(code) = redirect.redirect_code
        && code != 0
        && !matches!(code, 301 | 302 | 303 | 307 | 308)
    {
        // Envoy's RedirectAction knows these five.
        errors.push(
            at(path, "redirectCode"),
            format!("{code} is not a valid redirect code; use 301, 302, 303, 307 or 308"),
        );
    }
    if !redirect.scheme.is_empty() && redirect.scheme != "http" && redirect.scheme != "https" {
        errors.push(
            at(path, "scheme"),
            "invalid redirect scheme, must be \"http\" or \"https\"",
        );
    }
    if let Some(port) = redirect.port {
        check_port(&at(path, "port"), port, errors);
    }
    for (field, value) in [
        ("uri", &redirect.uri),
        ("authority", &redirect.authority),
        ("prefixRewrite", &redirect.prefix_rewrite),
    ] {
        if let Err(message) = uri_text(value) {
            errors.push(at(path, field), message);
        }
    }
}

fn http_retry(path: &str, retries: &HttpRetry, errors: &mut FieldErrors) {
    if retries.attempts < 0 {
        errors.push(at(path, "attempts"), "attempts cannot be negative");
    }
    if retries.attempts == 0
        && (retries.per_try_timeout.is_some()
            || !retries.retry_on.is_empty()
            || retries.retry_remote_localities.is_some())
    {
        errors.push(
            path,
            "http retry policy configured when attempts are set to 0 (disabled)",
        );
    }
    check_duration(&at(path, "perTryTimeout"), retries.per_try_timeout, errors);
    check_duration(&at(path, "backoff"), retries.backoff, errors);
    if !retries.retry_on.is_empty() {
        for policy in retries.retry_on.split(',') {
            let status = policy
                .parse::<u16>()
                .is_ok_and(|code| (100..=599).contains(&code));
            if !status && !RETRY_ON.contains(&policy) {
                errors.push(
                    at(path, "retryOn"),
                    format!("{policy:?} is not a valid retryOn policy"),
                );
            }
        }
    }
}

fn http_rewrite(path: &str, rewrite: &HttpRewrite, errors: &mut FieldErrors) {
    if !rewrite.uri.is_empty() && rewrite.uri_regex_rewrite.is_some() {
        errors.push(path, "rewrite may only contain one of URI or UriRegexRewrite");
    }
    if rewrite.uri.is_empty() && rewrite.uri_regex_rewrite.is_none() && rewrite.authority.is_empty() {
        errors.push(
            path,
            "rewrite must specify at least one of URI, UriRegexRewrite, or authority",
        );
    }
    for (field, value) in [("uri", &rewrite.uri), ("authority", &rewrite.authority)] {
        if let Err(message) = uri_text(value) {
            errors.push(at(path, field), message);
        }
    }
    if !rewrite.authority.is_empty() && rewrite.authority.contains(['/', ' ']) {
        errors.push(
            at(path, "authority"),
            format!("{:?} is not a host[:port]", rewrite.authority),
        );
    }
    if let Some(regex) = &rewrite.uri_regex_rewrite {
        let rp = at(path, "uriRegexRewrite");
        if regex.pattern.is_empty() || regex.rewrite.is_empty() {
            errors.push(
                &rp,
                "UriRegexRewrite requires both Rewrite and Match fields to be specified",
            );
        }
        if !regex.pattern.is_empty() {
            check_regex_at(&at(&rp, "match"), &regex.pattern, errors);
        }
    }
}

/// Istio's `validateAuthorityRewrite`: the authority set once.
fn authority_rewrite(path: &str, route: &HttpRoute, errors: &mut FieldErrors) {
    let mut current = route
        .rewrite
        .as_ref()
        .map(|r| r.authority.clone())
        .unwrap_or_default();
    if let Some(request) = route.headers.as_ref().and_then(|h| h.request.as_ref()) {
        for map in [&request.set, &request.add] {
            for (name, value) in map {
                if name.eq_ignore_ascii_case(":authority") || name.eq_ignore_ascii_case("host") {
                    if !current.is_empty() {
                        errors.push(
                            at(path, "headers.request"),
                            format!("authority header cannot be set multiple times: have {current:?}, attempting to set {value:?}"),
                        );
                    }
                    current = value.clone();
                }
            }
        }
    }
}
