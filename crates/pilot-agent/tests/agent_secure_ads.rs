//! The agent against a pilot-discovery whose ADS port wants TLS and a
//! token: with `--discovery-ca-file` and `--discovery-token-file` (an `xds`
//! token of namespace default) the real Envoy syncs, a `kill -9` is
//! restarted and reported with that same token, a rotated token
//! hot-restarts Envoy, which syncs again; without the token the
//! stream is refused and Envoy gets no configuration; a client
//! certificate (`--discovery-cert`/`--discovery-key`) is a credential too.

mod common;

use common::{Agent, Discovery, eventually, free_port};

const ADMIN: &str = "admin-token-0123456789";
const PROXY: &str = "proxy-token-default-0123456789";
const ROTATED: &str = "proxy-token-rotated-0123456789";
const NODE: &str = "sidecar~10.0.0.8~app-2.default~default.svc.cluster.local";

fn proxy_row(discovery: &Discovery, node: &str) -> Option<String> {
    let (code, out) = discovery.pilotctl(ADMIN, &["proxy-status"]);
    assert_eq!(code, 0, "{out}");
    out.lines().find(|l| l.starts_with(node)).map(str::to_string)
}

fn synced(row: &str) -> bool {
    row.split_whitespace().filter(|w| *w == "SYNCED").count() >= 2
}

fn refused_unauthenticated(discovery: &Discovery) -> u64 {
    let (code, metrics) = discovery.get("/metrics", ADMIN);
    assert_eq!(code, 200);
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("pilot_xds_refused_streams_total{reason=\"unauthenticated\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no refused streams counter in {metrics}"))
}

#[test]
fn envoy_syncs_over_tls_with_an_xds_token_or_a_client_certificate_and_is_refused_without() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path();
    common::certificates(certs);
    let tokens = certs.join("tokens");
    std::fs::write(
        &tokens,
        format!(
            "{ADMIN} rw admin\n{PROXY} xds app namespace=default\n{ROTATED} xds app2 namespace=default\n"
        ),
    )
    .unwrap();
    let proxy_token = certs.join("proxy-token");
    std::fs::write(&proxy_token, format!("{PROXY}\n")).unwrap();
    let services = common::services_file(certs, free_port(), free_port());
    let discovery = Discovery::start(&[
        "--token-file",
        tokens.to_str().unwrap(),
        "--xds-tls-cert",
        certs.join("server.pem").to_str().unwrap(),
        "--xds-tls-key",
        certs.join("server-key.pem").to_str().unwrap(),
        "--xds-client-ca",
        certs.join("ca.pem").to_str().unwrap(),
        "--services",
        services.to_str().unwrap(),
    ]);
    let xds = format!("127.0.0.1:{}", discovery.xds_port);
    let ca = certs.join("ca.pem");
    let agent = Agent::start(
        "sidecar",
        &[
            "--ip",
            "10.0.0.8",
            "--id",
            "app-2.default",
            "--interception-mode",
            "NONE",
            "--label",
            "app=app",
            "--discovery-address",
            &xds,
            "--discovery-url",
            &discovery.url,
            "--discovery-token-file",
            proxy_token.to_str().unwrap(),
            "--discovery-ca-file",
            ca.to_str().unwrap(),
            // SNI localhost, and the certificate must name it.
            "--discovery-server-name",
            "localhost",
            "--max-retries",
            "2",
        ],
    );
    eventually("proxy-status SYNCED over TLS with the xds token", || {
        proxy_row(&discovery, NODE).is_some_and(|row| synced(&row))
    });
    assert!(agent.ready(), "{}", agent.log());

    let first = agent.envoy_pids();
    assert_eq!(first.len(), 1, "{first:?}");
    let killed = std::process::Command::new("kill")
        .args(["-9", &first[0].to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // The report is posted with the xds token (no --token-file given).
    eventually("proxy-status to show the restart and the signal", || {
        proxy_row(&discovery, NODE)
            .is_some_and(|row| row.contains("signal 9 (SIGKILL)") && row.split_whitespace().any(|w| w == "1"))
    });
    eventually("SYNCED again", || {
        proxy_row(&discovery, NODE).is_some_and(|row| synced(&row))
    });

    // A rotated token: Envoy is hot-restarted with it and syncs again.
    assert_eq!(agent.metric("pilot_agent_envoy_hot_restarts_total"), Some(0));
    std::fs::write(&proxy_token, format!("{ROTATED}\n")).unwrap();
    eventually("a hot restart for the new token", || {
        agent.metric("pilot_agent_envoy_hot_restarts_total") == Some(1)
    });
    eventually("SYNCED with the new token", || {
        agent.ready() && proxy_row(&discovery, NODE).is_some_and(|row| synced(&row))
    });
    drop(agent);

    // The same agent without the token: TLS is fine, the stream is refused.
    let before = refused_unauthenticated(&discovery);
    let tokenless = Agent::start(
        "sidecar",
        &[
            "--ip",
            "10.0.0.9",
            "--id",
            "app-3.default",
            "--interception-mode",
            "NONE",
            "--label",
            "app=app",
            "--discovery-address",
            &xds,
            "--discovery-ca-file",
            ca.to_str().unwrap(),
        ],
    );
    eventually("ADS refusing the stream without a token", || {
        refused_unauthenticated(&discovery) > before
    });
    assert!(!tokenless.ready(), "an Envoy without a token got configuration");
    assert!(
        proxy_row(&discovery, "sidecar~10.0.0.9~app-3.default~").is_none(),
        "the proxy without a token is listed"
    );
    drop(tokenless);

    // mTLS instead of a token: the proxy's SPIFFE certificate (namespace
    // default) is its credential.
    let mtls = Agent::start(
        "sidecar",
        &[
            "--ip",
            "10.0.0.10",
            "--id",
            "app-4.default",
            "--interception-mode",
            "NONE",
            "--label",
            "app=app",
            "--discovery-address",
            &xds,
            "--discovery-server-name",
            "localhost",
            "--discovery-ca-file",
            ca.to_str().unwrap(),
            "--service-account",
            "app",
            "--discovery-cert",
            certs.join("proxy.pem").to_str().unwrap(),
            "--discovery-key",
            certs.join("proxy-key.pem").to_str().unwrap(),
        ],
    );
    eventually("proxy-status SYNCED over mTLS", || {
        proxy_row(&discovery, "sidecar~10.0.0.10~app-4.default~").is_some_and(|row| synced(&row))
    });
    assert!(mtls.ready(), "{}", mtls.log());
}
