//! Golden bootstraps for sidecar, router and ingress, each accepted by the
//! real Envoy (`--mode validate`) with the command line the agent gives
//! epoch 0 and a later epoch, plaintext and with ADS credentials (token,
//! TLS, mTLS). `UPDATE_GOLDEN=1` rewrites the files.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use pilot_agent::envoy::EnvoyOptions;
use pilot_agent::{BootstrapConfig, DiscoveryAuth, DiscoveryTls, IdentityInput, InterceptionMode, ProxyType};

fn config(proxy_type: ProxyType, discovery: &[&str]) -> BootstrapConfig {
    let input = IdentityInput {
        ip: Some("10.1.2.3".into()),
        id: None,
        namespace: Some("shop".into()),
        labels: vec!["app=reviews".into(), "version=v2".into()],
        interception: if proxy_type == ProxyType::Sidecar {
            InterceptionMode::Redirect
        } else {
            InterceptionMode::None
        },
        ..Default::default()
    };
    let env = |key: &str| (key == "POD_NAME").then(|| format!("{proxy_type}-7f9d"));
    BootstrapConfig {
        identity: input.resolve(proxy_type, env).unwrap(),
        discovery: discovery.iter().map(|s| s.to_string()).collect(),
        admin_port: 15000,
        auth: DiscoveryAuth::default(),
        sds_socket: None,
    }
}

fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(
        actual, expected,
        "{name} differs from the golden file (UPDATE_GOLDEN=1 rewrites it)"
    );
}

fn validate(config: &BootstrapConfig, epoch: u32) {
    let dir = tempfile::tempdir().unwrap();
    let options = EnvoyOptions {
        binary: common::envoy_binary(),
        config_dir: dir.path().to_path_buf(),
        base_id: u32::from(common::free_port()),
        drain: Duration::from_secs(45),
        parent_shutdown: Duration::from_secs(60),
        concurrency: 2,
        log_level: "warning".into(),
        extra_args: vec![],
    };
    let path = config.write(dir.path(), epoch).unwrap();
    assert_eq!(path, dir.path().join(format!("envoy-rev{epoch}.json")));
    let output = std::process::Command::new(&options.binary)
        .args(options.args(epoch, &path))
        .args(["--mode", "validate"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "envoy rejected the {} bootstrap: {}",
        config.identity.proxy_type,
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn sidecar_router_and_ingress_bootstraps_are_golden_and_valid() {
    for (proxy_type, name) in [
        (ProxyType::Sidecar, "bootstrap_sidecar.json"),
        (ProxyType::Router, "bootstrap_router.json"),
        (ProxyType::Ingress, "bootstrap_ingress.json"),
    ] {
        let config = config(proxy_type, &["pilot-0.pilot:15010", "pilot-1.pilot:15010"]);
        let text = serde_json::to_string_pretty(&config.render().unwrap()).unwrap() + "\n";
        golden(name, &text);
        validate(&config, 0);
        validate(&config, 3);
    }
}

#[test]
fn node_identity_is_what_pilot_discovery_parses() {
    let config = config(ProxyType::Sidecar, &["127.0.0.1:15010", "[::1]:15010"]);
    let bootstrap = config.render().unwrap();
    assert_eq!(
        bootstrap["node"]["id"],
        "sidecar~10.1.2.3~sidecar-7f9d.shop~shop.svc.cluster.local"
    );
    assert_eq!(bootstrap["node"]["metadata"]["LABELS"]["version"], "v2");
    assert_eq!(bootstrap["node"]["metadata"]["INTERCEPTION_MODE"], "REDIRECT");
    assert_eq!(bootstrap["node"]["cluster"], "reviews");
    // IP addresses only: a static cluster, one endpoint per replica.
    let xds = &bootstrap["static_resources"]["clusters"][0];
    assert_eq!(xds["type"], "STATIC");
    assert_eq!(
        xds["load_assignment"]["endpoints"][0]["lb_endpoints"][1]["endpoint"]["address"]["socket_address"]["address"],
        "::1"
    );
    validate(&config, 0);
}

/// The ADS credentials with the certificate files in `certs`.
fn secured(
    mut config: BootstrapConfig,
    certs: &std::path::Path,
    client: bool,
    token: bool,
) -> BootstrapConfig {
    config.auth = DiscoveryAuth {
        token: token.then(|| "proxy-token-default-0123456789".to_string()),
        tls: Some(DiscoveryTls {
            ca_file: certs.join("ca.pem"),
            client: client.then(|| (certs.join("proxy.pem"), certs.join("proxy-key.pem"))),
            server_name: None,
        }),
    };
    config
}

#[test]
fn bootstraps_with_ads_credentials_are_golden_and_valid() {
    let dir = tempfile::tempdir().unwrap();
    common::certificates(dir.path());
    let golden_certs = std::path::Path::new("/etc/pilot/certs");
    // Token and mTLS to replicas by DNS name: SNI is the first name, the
    // certificate must carry one of them.
    let dns = config(
        ProxyType::Sidecar,
        &["pilot-0.pilot:15012", "pilot-1.pilot:15012"],
    );
    // TLS alone to an IP address: no SNI, the certificate's IP SAN is checked.
    let ip = config(ProxyType::Router, &["127.0.0.1:15012"]);
    for (base, client, token, name) in [
        (dns, true, true, "bootstrap_sidecar_mtls_token.json"),
        (ip, false, false, "bootstrap_router_tls.json"),
    ] {
        let shown = secured(base.clone(), golden_certs, client, token);
        let text = serde_json::to_string_pretty(&shown.render().unwrap()).unwrap() + "\n";
        golden(name, &text);
        // Envoy reads the files while validating: the same bootstrap with
        // real certificates.
        validate(&secured(base, dir.path(), client, token), 0);
    }
    // A token over plaintext (a loopback ADS port).
    let mut token_only = config(ProxyType::Ingress, &["127.0.0.1:15010"]);
    token_only.auth.token = Some("proxy-token-default-0123456789".into());
    let bootstrap = token_only.render().unwrap();
    assert_eq!(
        bootstrap["dynamic_resources"]["ads_config"]["grpc_services"][0]["initial_metadata"][0],
        serde_json::json!({"key": "authorization", "value": "Bearer proxy-token-default-0123456789"})
    );
    assert!(
        bootstrap["static_resources"]["clusters"][0]
            .get("transport_socket")
            .is_none()
    );
    validate(&token_only, 0);
}

#[test]
fn a_bootstrap_with_a_token_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(ProxyType::Sidecar, &["127.0.0.1:15010"]);
    config.auth.token = Some("proxy-token-default-0123456789".into());
    let path = config.write(dir.path(), 0).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
}
