//! [`DestinationRule`] and [`TrafficPolicy`] validation as Istio's
//! (`ValidateDestinationRule`, `validateTrafficPolicy`, `ValidateTLS`),
//! every error with its field path.

use std::collections::BTreeSet;

use super::checks::{at, check_duration, check_export_to, check_labels, check_port, index, wildcard_domain};
use super::destination_rule::DestinationRule;
use super::traffic_policy::{
    ClientTlsMode, ClientTlsSettings, ConnectionPoolSettings, H2UpgradePolicy, LoadBalancerSettings,
    LocalityLbSetting, OutlierDetection, SimpleLb, TrafficPolicy,
};
use pilot_model::{FieldErrors, dns1123_label};

pub(crate) fn validate(dr: &DestinationRule, errors: &mut FieldErrors) {
    if let Err(message) = wildcard_domain(&dr.host) {
        errors.push("spec.host", message);
    }
    if let Some(policy) = &dr.traffic_policy {
        traffic_policy("spec.trafficPolicy", policy, errors);
    }
    let mut names = BTreeSet::new();
    for (i, subset) in dr.subsets.iter().enumerate() {
        let path = index("spec.subsets", i);
        if !names.insert(subset.name.as_str()) {
            errors.push(
                at(&path, "name"),
                format!("duplicate subset names: {}", subset.name),
            );
        }
        if subset.name.is_empty() {
            errors.push(at(&path, "name"), "subset name cannot be empty");
        } else if dns1123_label(&subset.name).is_err() {
            errors.push(
                at(&path, "name"),
                format!("subset name is invalid: {}", subset.name),
            );
        }
        check_labels(&at(&path, "labels"), &subset.labels, errors);
        if let Some(policy) = &subset.traffic_policy {
            traffic_policy(&at(&path, "trafficPolicy"), policy, errors);
        }
    }
    check_export_to("spec.exportTo", &dr.export_to, false, errors);
    if let Some(selector) = &dr.workload_selector {
        check_labels(
            "spec.workloadSelector.matchLabels",
            &selector.match_labels,
            errors,
        );
        if dr.export_to.iter().any(|e| e != ".") {
            errors.push(
                "spec.exportTo",
                "destination rule with workload selector cannot have exportTo beyond current namespace",
            );
        }
    }
}

/// Records every problem with `policy` at `path`.
pub(crate) fn traffic_policy(path: &str, policy: &TrafficPolicy, errors: &mut FieldErrors) {
    if policy.outlier_detection.is_none()
        && policy.connection_pool.is_none()
        && policy.load_balancer.is_none()
        && policy.tls.is_none()
        && policy.port_level_settings.is_empty()
        && policy.tunnel.is_none()
        && policy.proxy_protocol.is_none()
        && policy.retry_budget.is_none()
    {
        errors.push(path, "traffic policy must have at least one field");
        return;
    }
    if policy.tunnel.is_some() {
        crate::primitives::not_supported(errors, &at(path, "tunnel"), "tunnel");
    }
    if let Some(budget) = &policy.retry_budget {
        let bp = at(path, "retryBudget");
        if budget.percent.is_some_and(|p| !(0.0..=100.0).contains(&p)) {
            errors.push(at(&bp, "percent"), "percent must be between 0 and 100");
        }
        check_duration(&at(&bp, "budgetInterval"), budget.budget_interval, errors);
    }
    parts(
        path,
        policy.load_balancer.as_ref(),
        policy.connection_pool.as_ref(),
        policy.outlier_detection.as_ref(),
        policy.tls.as_ref(),
        errors,
    );
    let mut ports = BTreeSet::new();
    for (i, port_policy) in policy.port_level_settings.iter().enumerate() {
        let pp = index(&at(path, "portLevelSettings"), i);
        match port_policy.port {
            None => errors.push(at(&pp, "port"), "portTrafficPolicy must have valid port"),
            Some(port) => {
                check_port(&at(&pp, "port.number"), port.number, errors);
                if !ports.insert(port.number) {
                    errors.push(
                        at(&pp, "port.number"),
                        format!("port {} has settings already", port.number),
                    );
                }
            }
        }
        if port_policy.outlier_detection.is_none()
            && port_policy.connection_pool.is_none()
            && port_policy.load_balancer.is_none()
            && port_policy.tls.is_none()
        {
            errors.push(&pp, "port traffic policy must have at least one field");
        } else {
            parts(
                &pp,
                port_policy.load_balancer.as_ref(),
                port_policy.connection_pool.as_ref(),
                port_policy.outlier_detection.as_ref(),
                port_policy.tls.as_ref(),
                errors,
            );
        }
    }
}

fn parts(
    path: &str,
    load_balancer: Option<&LoadBalancerSettings>,
    pool: Option<&ConnectionPoolSettings>,
    outlier: Option<&OutlierDetection>,
    tls: Option<&ClientTlsSettings>,
    errors: &mut FieldErrors,
) {
    if let Some(lb) = load_balancer {
        load_balancer_settings(&at(path, "loadBalancer"), lb, errors);
    }
    if let Some(pool) = pool {
        connection_pool(&at(path, "connectionPool"), pool, errors);
    }
    if let Some(outlier) = outlier {
        outlier_detection(&at(path, "outlierDetection"), outlier, errors);
    }
    if let Some(tls) = tls {
        client_tls(&at(path, "tls"), tls, errors);
    }
}

fn load_balancer_settings(path: &str, lb: &LoadBalancerSettings, errors: &mut FieldErrors) {
    if lb.simple.is_some() && lb.consistent_hash.is_some() {
        errors.push(path, "give only one of simple or consistentHash");
    }
    if let Some(hash) = &lb.consistent_hash {
        let hp = at(path, "consistentHash");
        let keys = [
            hash.http_header_name.is_some(),
            hash.http_cookie.is_some(),
            hash.use_source_ip.is_some(),
            hash.http_query_parameter_name.is_some(),
        ]
        .iter()
        .filter(|k| **k)
        .count();
        if keys > 1 {
            errors.push(
                &hp,
                "give only one of httpHeaderName, httpCookie, useSourceIp or httpQueryParameterName",
            );
        }
        if let Some(name) = &hash.http_header_name
            && let Err(message) = crate::primitives::header_name(&name.to_ascii_lowercase())
        {
            errors.push(at(&hp, "httpHeaderName"), message);
        }
        if hash.http_query_parameter_name.as_deref() == Some("") {
            errors.push(at(&hp, "httpQueryParameterName"), "must not be empty");
        }
        if let Some(cookie) = &hash.http_cookie {
            let cp = at(&hp, "httpCookie");
            if cookie.name.is_empty() {
                errors.push(at(&cp, "name"), "name required for HttpCookie");
            }
            let mut seen = BTreeSet::new();
            for (i, attribute) in cookie.attributes.iter().enumerate() {
                let ap = index(&at(&cp, "attributes"), i);
                if attribute.name.is_empty() {
                    errors.push(at(&ap, "name"), "cookie attribute name cannot be empty");
                } else if !seen.insert(attribute.name.as_str()) {
                    errors.push(
                        at(&ap, "name"),
                        format!("duplicate cookie attribute name: {}", attribute.name),
                    );
                }
            }
            if let Some(ttl) = cookie.ttl
                && ttl.as_std().subsec_nanos() % 1_000_000 != 0
            {
                errors.push(at(&cp, "ttl"), "only durations to ms precision are supported");
            }
        }
        if hash.ring_hash.is_some() && hash.maglev.is_some() {
            errors.push(&hp, "give only one of ringHash or maglev");
        }
        if hash.minimum_ring_size.is_some_and(|s| s != 0)
            && (hash.ring_hash.is_some() || hash.maglev.is_some())
        {
            errors.push(
                &hp,
                "only one of MinimumRingSize or Maglev/Ringhash can be specified",
            );
        }
        if let Some(maglev) = hash.maglev {
            let tp = at(&hp, "maglev.tableSize");
            match maglev.table_size {
                None | Some(0) => errors.push(tp, "tableSize must be set for maglev"),
                Some(size) if size >= 5_000_011 => {
                    errors.push(tp, "tableSize must be less than 5000011 for maglev")
                }
                Some(size) if !is_prime(size) => {
                    errors.push(tp, "tableSize must be a prime number for maglev")
                }
                Some(_) => {}
            }
        }
        for (field, size) in [
            ("minimumRingSize", hash.minimum_ring_size),
            (
                "ringHash.minimumRingSize",
                hash.ring_hash.and_then(|r| r.minimum_ring_size),
            ),
        ] {
            // Envoy's RingHashLbConfig: minimum_ring_size at most 8M.
            if size.is_some_and(|s| s > 8_388_608) {
                errors.push(at(&hp, field), "the ring size may be at most 8388608");
            }
        }
    }
    if let Some(locality) = &lb.locality_lb_setting {
        locality_lb(&at(path, "localityLbSetting"), locality, errors);
    }
    for (field, given) in [
        (
            "localityLbSetting",
            lb.locality_lb_setting
                .as_ref()
                .is_some_and(|l| l.enabled != Some(false)),
        ),
        (
            "zoneAwareLbSetting",
            lb.zone_aware_lb_setting
                .as_ref()
                .is_some_and(|z| z.enabled != Some(false)),
        ),
    ] {
        if given {
            errors.warn(
                at(path, field),
                "not applied: pilot does not weigh or fail over endpoints by locality; traffic is balanced over all of them alike",
            );
        }
    }
    check_duration(&at(path, "warmupDurationSecs"), lb.warmup_duration_secs, errors);
    if let Some(warmup) = &lb.warmup {
        let wp = at(path, "warmup");
        match warmup.duration {
            None => errors.push(at(&wp, "duration"), "duration is required"),
            Some(d) if d.as_std().is_zero() => {
                errors.push(at(&wp, "duration"), "duration must be greater than 0")
            }
            Some(d) => check_duration(&at(&wp, "duration"), Some(d), errors),
        }
        if let Some(p) = warmup.minimum_percent
            && !(0.0..=100.0).contains(&p)
        {
            errors.push(
                at(&wp, "minimumPercent"),
                format!("minimumPercent value should be between 0 and 100, got {p}"),
            );
        }
        if warmup.aggression.is_some_and(|a| a < 1.0) {
            errors.push(
                at(&wp, "aggression"),
                "aggression should be greater than or equal to 1",
            );
        }
    }
    if lb.warmup.is_some() || lb.warmup_duration_secs.is_some() {
        let field = if lb.warmup.is_some() {
            "warmup"
        } else {
            "warmupDurationSecs"
        };
        let slow_start_balancer = lb.consistent_hash.is_none()
            && !matches!(lb.simple, Some(SimpleLb::Random | SimpleLb::Passthrough));
        if !slow_start_balancer {
            errors.warn(
                at(path, field),
                "not applied: slow start is for the ROUND_ROBIN and LEAST_REQUEST balancers only",
            );
        }
    }
}

/// Istio's `validateLocalityLbSetting`: `distribute` and `failover` not
/// both, shares summing to 100, a failover to another region.
fn locality_lb(path: &str, locality: &LocalityLbSetting, errors: &mut FieldErrors) {
    if !locality.distribute.is_empty() && !locality.failover.is_empty() {
        errors.push(path, "can not simultaneously set 'distribute' and 'failover'");
    }
    for (i, distribute) in locality.distribute.iter().enumerate() {
        let dp = format!("{path}.distribute[{i}]");
        let sum: u64 = distribute.to.values().map(|w| u64::from(*w)).sum();
        if sum != 100 {
            errors.push(
                at(&dp, "to"),
                format!("the weights of a locality must sum to 100, got {sum}"),
            );
        }
        if distribute.from.is_empty() {
            errors.push(at(&dp, "from"), "from must be set");
        }
    }
    for (i, failover) in locality.failover.iter().enumerate() {
        let fp = format!("{path}.failover[{i}]");
        if failover.from == failover.to {
            errors.push(fp, "locality lb failover settings must specify different regions");
        } else if failover.from.contains('/') || failover.to.contains('/') {
            errors.push(fp, "locality lb failover only supports region-level failover");
        }
    }
}

fn is_prime(x: u64) -> bool {
    if x < 2 {
        return false;
    }
    let mut factor = 2;
    while factor * factor <= x {
        if x.is_multiple_of(factor) {
            return false;
        }
        factor += 1;
    }
    true
}

/// A connection pool's settings (a DestinationRule's, a Sidecar's
/// inbound one).
pub(super) fn connection_pool(path: &str, pool: &ConnectionPoolSettings, errors: &mut FieldErrors) {
    if pool.http.is_none() && pool.tcp.is_none() {
        errors.push(path, "connection pool must have at least one field");
    }
    if let Some(http) = &pool.http {
        let hp = at(path, "http");
        for (field, value) in [
            ("http1MaxPendingRequests", http.http1_max_pending_requests),
            ("http2MaxRequests", http.http2_max_requests),
            ("maxRequestsPerConnection", http.max_requests_per_connection),
            ("maxRetries", http.max_retries),
            ("maxConcurrentStreams", http.max_concurrent_streams),
        ] {
            if value.is_some_and(|v| v < 0) {
                errors.push(at(&hp, field), "must be non-negative");
            }
        }
        check_duration(&at(&hp, "idleTimeout"), http.idle_timeout, errors);
        if http.h2_upgrade_policy == Some(H2UpgradePolicy::Upgrade) && http.use_client_protocol {
            errors.push(
                at(&hp, "useClientProtocol"),
                "use client protocol must not be true when H2UpgradePolicy is UPGRADE",
            );
        }
        if let Some(keepalive) = &http.http2_keep_alive {
            let kp = at(&hp, "http2KeepAlive");
            check_duration(&at(&kp, "interval"), keepalive.interval, errors);
            check_duration(&at(&kp, "timeout"), keepalive.timeout, errors);
        }
    }
    if let Some(tcp) = &pool.tcp {
        let tp = at(path, "tcp");
        if tcp.max_connections.is_some_and(|v| v < 0) {
            errors.push(at(&tp, "maxConnections"), "max connections must be non-negative");
        }
        check_duration(&at(&tp, "connectTimeout"), tcp.connect_timeout, errors);
        check_duration(
            &at(&tp, "maxConnectionDuration"),
            tcp.max_connection_duration,
            errors,
        );
        if tcp.idle_timeout.is_some_and(|d| !d.as_std().is_zero()) {
            check_duration(&at(&tp, "idleTimeout"), tcp.idle_timeout, errors);
        }
        if let Some(keepalive) = &tcp.tcp_keepalive {
            let kp = at(&tp, "tcpKeepalive");
            check_duration(&at(&kp, "time"), keepalive.time, errors);
            check_duration(&at(&kp, "interval"), keepalive.interval, errors);
        }
    }
}

fn outlier_detection(path: &str, outlier: &OutlierDetection, errors: &mut FieldErrors) {
    check_duration(&at(path, "baseEjectionTime"), outlier.base_ejection_time, errors);
    check_duration(&at(path, "interval"), outlier.interval, errors);
    if !outlier.split_external_local_origin_errors
        && outlier.consecutive_local_origin_failures.is_some_and(|v| v > 0)
    {
        errors.push(
            at(path, "consecutiveLocalOriginFailures"),
            "outlier detection consecutive local origin failures is specified, but split external local origin errors is set to false",
        );
    }
    if outlier.consecutive_errors.is_some_and(|v| v < 0) {
        errors.push(at(path, "consecutiveErrors"), "must be non-negative");
    }
    for (field, value) in [
        ("maxEjectionPercent", outlier.max_ejection_percent),
        ("minHealthPercent", outlier.min_health_percent),
    ] {
        if let Some(value) = value
            && !(0..=100).contains(&value)
        {
            errors.push(
                at(path, field),
                format!("percentage {value} is not in range 0..100"),
            );
        }
    }
    if !outlier.outlier_detection_http_error_codes.is_empty() {
        crate::primitives::not_supported(
            errors,
            &at(path, "outlierDetectionHttpErrorCodes"),
            "outlierDetectionHttpErrorCodes",
        );
    }
}

/// Istio's `ValidateTLS` for traffic leaving a proxy.
pub(crate) fn client_tls(path: &str, tls: &ClientTlsSettings, errors: &mut FieldErrors) {
    let mode = tls.mode.unwrap_or(ClientTlsMode::Disable);
    if tls.insecure_skip_verify == Some(true) {
        if mode == ClientTlsMode::Simple
            && (!tls.ca_certificates.is_empty()
                || !tls.credential_name.is_empty()
                || !tls.subject_alt_names.is_empty())
        {
            errors.push(
                path,
                "cannot specify CaCertificates or CredentialName or SubjectAltNames when InsecureSkipVerify is set true",
            );
        }
        if mode == ClientTlsMode::Mutual
            && (!tls.ca_certificates.is_empty() || !tls.subject_alt_names.is_empty())
        {
            errors.push(
                path,
                "cannot specify CaCertificates or SubjectAltNames when InsecureSkipVerify is set true",
            );
        }
    }
    if matches!(mode, ClientTlsMode::Simple | ClientTlsMode::Mutual) && !tls.credential_name.is_empty() {
        if !tls.client_certificate.is_empty()
            || !tls.ca_certificates.is_empty()
            || !tls.private_key.is_empty()
            || !tls.ca_crl.is_empty()
        {
            errors.push(
                path,
                "cannot specify client certificates or CA certificate or CA CRL If credentialName is set",
            );
        }
        return;
    }
    if mode == ClientTlsMode::Mutual {
        if tls.client_certificate.is_empty() {
            errors.push(
                at(path, "clientCertificate"),
                "client certificate required for mutual tls",
            );
        }
        if tls.private_key.is_empty() {
            errors.push(at(path, "privateKey"), "private key required for mutual tls");
        }
    }
    if mode == ClientTlsMode::IstioMutual {
        for (field, value) in [
            ("clientCertificate", &tls.client_certificate),
            ("privateKey", &tls.private_key),
            ("caCertificates", &tls.ca_certificates),
            ("credentialName", &tls.credential_name),
        ] {
            if !value.is_empty() {
                errors.push(
                    at(path, field),
                    "ISTIO_MUTUAL uses the mesh's workload certificates; remove this field",
                );
            }
        }
    }
}
