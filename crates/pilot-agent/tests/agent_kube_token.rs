//! The agent's certificate requests with a Kubernetes service-account
//! token, against `pilot-discovery --kube-token-review` on the fake API
//! server: the token the fake issued for `default/reviews` with audience
//! `istio-ca`, in the agent's `--discovery-token-file`, gets a certificate
//! of `spiffe://cluster.local/ns/default/sa/reviews`; when the kubelet
//! rotates the file, the renewals carry the new token and go on after the
//! old one expired; a token for another audience is refused with the
//! reason. And the agent binary with the real Envoy: Envoy's ADS stream
//! carries the token and syncs, the agent's report of a killed Envoy is
//! taken with it, and a rotated token hot-restarts Envoy, which syncs
//! again.

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime};

use common::Agent;
use pilot_agent::DiscoveryAuth;
use pilot_agent::sds::{Sds, SdsOptions};
use pilot_ca::SpiffeId;
use pilot_kube_fake::FakeApiServer;
use pilot_test_support::{Discovery, FakeCluster, PATIENCE, eventually, free_port};

/// Sds requesting `identity` from `xds_port` with the token in
/// `token_file`, renewing every couple of seconds.
fn sds(dir: &Path, xds_port: u16, token_file: &Path, identity: &SpiffeId) -> SdsOptions {
    SdsOptions {
        ttl: Duration::from_secs(4),
        token_file: Some(token_file.to_path_buf()),
        ..SdsOptions::new(
            dir.join("sds/socket"),
            format!("127.0.0.1:{xds_port}"),
            DiscoveryAuth {
                token: Some(std::fs::read_to_string(token_file).unwrap()),
                tls: None,
            },
            identity.clone(),
            dir.join("mesh-roots.pem"),
        )
    }
}

/// Replaces `path` with `text` as the kubelet does: a new file moved into
/// place.
fn rotate(path: &Path, text: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, path).unwrap();
}

#[test]
fn the_pods_token_gets_its_identity_and_renewals_follow_its_rotation() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fake = FakeApiServer::new();
    let cluster = runtime.block_on(FakeCluster::serve(&fake));
    let discovery = Discovery::start_with_env(&["--kube-token-review"], &cluster.env());
    let dir = tempfile::tempdir().unwrap();
    let identity = SpiffeId::new("cluster.local", "default", "reviews").unwrap();

    // A short-lived first token, so that renewals after its expiry prove
    // the rotated one is sent.
    let lifetime = Duration::from_secs(8);
    let first = fake.issue_token("default", "reviews", &["istio-ca"], lifetime);
    let first_expires = SystemTime::now() + lifetime;
    let token_file = dir.path().join("istio-token");
    std::fs::write(&token_file, &first).unwrap();
    let agent = runtime
        .block_on(Sds::start(sds(
            dir.path(),
            discovery.xds_port,
            &token_file,
            &identity,
        )))
        .unwrap();
    let wait = |version: u64| {
        runtime
            .block_on(async { tokio::time::timeout(PATIENCE, agent.wait_version(version)).await })
            .unwrap_or_else(|_| panic!("no certificate {version}: {:?}", agent.last_error()))
    };
    let served = wait(1);
    assert_eq!(
        pilot_ca::verify_chain(
            std::slice::from_ref(&served.chain_pem),
            &served.root_pem,
            SystemTime::now()
        )
        .unwrap(),
        identity
    );

    rotate(
        &token_file,
        &fake.issue_token("default", "reviews", &["istio-ca"], Duration::from_secs(3600)),
    );
    // Past the first token's expiry (and pilot-discovery's memory of its
    // review), renewals go on.
    if let Ok(left) = first_expires.duration_since(SystemTime::now()) {
        std::thread::sleep(left + Duration::from_secs(1));
    }
    let current = wait(0).version;
    let renewed = wait(current + 2);
    assert_eq!(
        pilot_ca::verify_chain(
            std::slice::from_ref(&renewed.chain_pem),
            &renewed.root_pem,
            SystemTime::now()
        )
        .unwrap(),
        identity
    );

    // A token for another audience gets nothing, and the agent says why.
    let other_dir = tempfile::tempdir().unwrap();
    let other_file = other_dir.path().join("istio-token");
    std::fs::write(
        &other_file,
        fake.issue_token("default", "reviews", &["other"], Duration::from_secs(3600)),
    )
    .unwrap();
    let refused = runtime
        .block_on(Sds::start(sds(
            other_dir.path(),
            discovery.xds_port,
            &other_file,
            &identity,
        )))
        .unwrap();
    eventually("the refusal of the other audience's token", || {
        refused
            .last_error()
            .is_some_and(|e| e.contains("Unauthenticated") && e.contains(r#"token audiences ["other"]"#))
    });
    drop(refused);
    drop(agent);
}

const ADMIN: &str = "admin-token-0123456789";
const NODE: &str = "sidecar~10.0.0.8~app-2.default~default.svc.cluster.local";

#[test]
fn envoy_under_the_agent_syncs_and_reports_with_the_pods_token_and_follows_its_rotation() {
    let cluster = FakeCluster::start();
    let fake = &cluster.fake;
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{ADMIN} rw admin\n")).unwrap();
    let services = common::services_file(dir.path(), free_port(), free_port());
    let discovery = common::Discovery::start_with_env(
        &[
            "--kube-token-review",
            "--token-file",
            tokens.to_str().unwrap(),
            "--services",
            services.to_str().unwrap(),
        ],
        &cluster.env(),
    );
    let row = || {
        let (code, out) = discovery.pilotctl(ADMIN, &["proxy-status"]);
        assert_eq!(code, 0, "{out}");
        out.lines().find(|l| l.starts_with(NODE)).map(str::to_string)
    };
    let synced = |row: &str| row.split_whitespace().filter(|w| *w == "SYNCED").count() >= 2;

    let token_file = dir.path().join("istio-token");
    std::fs::write(
        &token_file,
        fake.issue_token("default", "app", &["istio-ca"], Duration::from_secs(3600)),
    )
    .unwrap();
    let xds = format!("127.0.0.1:{}", discovery.xds_port);
    let agent = Agent::start(
        "sidecar",
        &[
            "--ip",
            "10.0.0.8",
            "--id",
            "app-2.default",
            "--service-account",
            "app",
            "--interception-mode",
            "NONE",
            "--label",
            "app=app",
            "--discovery-address",
            &xds,
            "--discovery-url",
            &discovery.url,
            "--discovery-token-file",
            token_file.to_str().unwrap(),
            "--max-retries",
            "2",
        ],
    );
    eventually("proxy-status SYNCED with the service-account token", || {
        row().is_some_and(|row| synced(&row))
    });

    // A killed Envoy is restarted and reported with the token.
    let first = agent.envoy_pids();
    assert_eq!(first.len(), 1, "{first:?}");
    let killed = std::process::Command::new("kill")
        .args(["-9", &first[0].to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    eventually("proxy-status to show the reported restart", || {
        row().is_some_and(|row| row.contains("signal 9 (SIGKILL)"))
    });

    // The kubelet rotates the token: Envoy is hot-restarted with it.
    assert_eq!(agent.metric("pilot_agent_envoy_hot_restarts_total"), Some(0));
    rotate(
        &token_file,
        &fake.issue_token("default", "app", &["istio-ca"], Duration::from_secs(3600)),
    );
    eventually("a hot restart for the rotated token", || {
        agent.metric("pilot_agent_envoy_hot_restarts_total") == Some(1)
    });
    eventually("SYNCED with the rotated token", || {
        agent.ready() && row().is_some_and(|row| synced(&row))
    });
    let log = agent.log();
    assert!(
        !log.contains("report refused") && !log.contains("report not sent"),
        "{log}"
    );
}
