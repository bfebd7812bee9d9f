//! No secret over plaintext: the bearer token and the workload's
//! certificates cross a plaintext connection only to a loopback address
//! (`127.0.0.0/8`, `::1`, `localhost`), or when the operator says
//! `--insecure-plaintext-discovery`, which is logged as a warning at
//! every start.

use std::net::IpAddr;

use crate::{AgentError, DiscoveryAuth};

/// The flag that lets the token and certificates cross plaintext.
pub const INSECURE_FLAG: &str = "--insecure-plaintext-discovery";

/// Whether `host` (a name or an IP, IPv6 with or without brackets) is
/// this machine's loopback.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

/// The host of `HOST:PORT` (`[v6]:PORT` too); the whole text when it has
/// no port.
pub fn host_of(address: &str) -> &str {
    if let Some(rest) = address.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(host, _)| host);
    }
    match address.rsplit_once(':') {
        Some((host, _)) if !host.contains(':') => host,
        _ => address,
    }
}

/// Refuses plaintext to a discovery address that is not loopback when
/// the connection would carry a secret: the token (`auth.token`), or the
/// workload's certificates (`certificates`: the agent serves SDS). With
/// TLS (`auth.tls`) anything goes; with `insecure` it goes too, with a
/// warning naming each address.
pub fn check_discovery(
    addresses: &[String],
    auth: &DiscoveryAuth,
    certificates: bool,
    insecure: bool,
) -> Result<(), AgentError> {
    if auth.tls.is_some() || (auth.token.is_none() && !certificates) {
        return Ok(());
    }
    let carried = match (auth.token.is_some(), certificates) {
        (true, true) => "the bearer token and the workload certificates",
        (true, false) => "the bearer token",
        _ => "the workload certificates",
    };
    for address in addresses {
        if is_loopback_host(host_of(address)) {
            continue;
        }
        if insecure {
            tracing::warn!(
                %address,
                "INSECURE: {carried} cross plaintext to --discovery-address {address} ({INSECURE_FLAG}): \
                 anyone on the path can read the token and swap the certificates"
            );
            continue;
        }
        return Err(AgentError::Plaintext {
            address: address.clone(),
            message: format!(
                "--discovery-address {address} is plaintext and not loopback, and would carry {carried}: \
                 set --discovery-ca-file (TLS), or {INSECURE_FLAG} to accept that anyone on the path reads them"
            ),
        });
    }
    Ok(())
}

/// Refuses to post reports with a token (`token`) to an `http://` URL
/// that is not loopback, unless `insecure`.
pub fn check_report_url(url: &str, token: bool, insecure: bool) -> Result<(), AgentError> {
    if !token {
        return Ok(());
    }
    let host = url
        .strip_prefix("http://")
        .map(|rest| rest.split(['/', '?']).next().unwrap_or_default())
        .map(host_of);
    let Some(host) = host else {
        return Ok(());
    };
    if is_loopback_host(host) {
        return Ok(());
    }
    if insecure {
        tracing::warn!(%url, "INSECURE: the bearer token crosses plaintext to --discovery-url {url} ({INSECURE_FLAG})");
        return Ok(());
    }
    Err(AgentError::Plaintext {
        address: url.to_string(),
        message: format!(
            "--discovery-url {url} is plaintext and not loopback, and reports carry the bearer token: \
             reach pilot-discovery's REST port on loopback, or set {INSECURE_FLAG} to accept that anyone on \
             the path reads the token"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(token: bool, tls: bool) -> DiscoveryAuth {
        DiscoveryAuth {
            token: token.then(|| "token-0123456789".to_string()),
            tls: tls.then(|| crate::DiscoveryTls {
                ca_file: "ca.pem".into(),
                client: None,
                server_name: None,
            }),
        }
    }

    #[test]
    fn loopback_hosts() {
        for host in ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "10.0.0.1",
            "0.0.0.0",
            "pilot-discovery.pilot-system",
            "localhost.evil.example",
            "::",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
        assert_eq!(host_of("10.0.0.1:15010"), "10.0.0.1");
        assert_eq!(host_of("[::1]:15010"), "::1");
        assert_eq!(host_of("pilot:15010"), "pilot");
        assert_eq!(host_of("::1"), "::1");
    }

    #[test]
    fn a_token_or_certificates_never_cross_plaintext_to_another_host() {
        let remote = vec!["127.0.0.1:15010".to_string(), "10.78.0.10:15010".to_string()];
        for (token, certificates) in [(true, false), (false, true), (true, true)] {
            let error = check_discovery(&remote, &auth(token, false), certificates, false)
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("10.78.0.10:15010")
                    && error.contains(INSECURE_FLAG)
                    && error.contains("--discovery-ca-file"),
                "{error}"
            );
        }
        // Nothing secret, TLS, loopback, or the explicit flag: allowed.
        check_discovery(&remote, &auth(false, false), false, false).unwrap();
        check_discovery(&remote, &auth(true, true), true, false).unwrap();
        check_discovery(&remote[..1], &auth(true, false), true, false).unwrap();
        check_discovery(&remote, &auth(true, false), true, true).unwrap();
    }

    #[test]
    fn reports_with_a_token_stay_on_loopback() {
        let error = check_report_url("http://10.0.0.5:8080", true, false)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("http://10.0.0.5:8080") && error.contains(INSECURE_FLAG),
            "{error}"
        );
        check_report_url("http://127.0.0.1:8080/", true, false).unwrap();
        check_report_url("http://[::1]:8080", true, false).unwrap();
        check_report_url("http://10.0.0.5:8080", false, false).unwrap();
        check_report_url("http://10.0.0.5:8080", true, true).unwrap();
    }
}
