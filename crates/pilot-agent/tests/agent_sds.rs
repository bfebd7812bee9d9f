//! The agent's SDS server with a real pilot-discovery CA and a real Envoy:
//! the agent's bootstrap (its `sds-grpc` cluster) plus a TLS listener
//! whose certificate and root come over SDS; Envoy shows the SPIFFE
//! certificate, and with a short lifetime the certificate it holds
//! changes while the same Envoy process runs.

use std::time::SystemTime;

use pilot_agent::sds::{RootPinning, Sds, SdsOptions};
use pilot_agent::{BootstrapConfig, DiscoveryAuth, IdentityInput, ProxyType};
use pilot_ca::SpiffeId;
use pilot_test_support::{Discovery, Envoy, eventually, free_port};
use serde_json::{Value, json};

const TOKEN: &str = "reviews-token-0123456789abcdef";

/// The serial numbers and URIs of the certificates Envoy holds
/// (`/certs`).
fn envoy_certs(envoy: &Envoy) -> Vec<(String, Vec<String>)> {
    let text = envoy.admin("/certs");
    let Ok(value) = serde_json::from_str::<Value>(&text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in value["certificates"].as_array().into_iter().flatten() {
        for cert in entry["cert_chain"].as_array().into_iter().flatten() {
            let uris = cert["subject_alt_names"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|san| san["uri"].as_str().map(String::from))
                .collect();
            out.push((
                cert["serial_number"].as_str().unwrap_or_default().to_string(),
                uris,
            ));
        }
    }
    out
}

fn sds_source() -> Value {
    json!({
        "api_config_source": {
            "api_type": "GRPC",
            "transport_api_version": "V3",
            "grpc_services": [{"envoy_grpc": {"cluster_name": pilot_agent::sds::SDS_CLUSTER}}],
        },
        "resource_api_version": "V3",
    })
}

#[test]
fn envoy_gets_the_spiffe_certificate_over_sds_and_it_rotates_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        format!("{TOKEN} xds reviews namespace=default serviceAccount=reviews\n"),
    )
    .unwrap();
    let discovery = Discovery::start(&["--token-file", tokens.to_str().unwrap()]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let socket = dir.path().join("sds/socket");
    let auth = DiscoveryAuth {
        token: Some(TOKEN.into()),
        tls: None,
    };
    let identity = SpiffeId::new("cluster.local", "default", "reviews").unwrap();
    let sds = runtime
        .block_on(Sds::start(SdsOptions {
            socket: socket.clone(),
            ca_address: format!("127.0.0.1:{}", discovery.xds_port),
            auth: auth.clone(),
            token_file: None,
            identity: identity.clone(),
            // Renewed every two seconds.
            ttl: std::time::Duration::from_secs(4),
            pinning: RootPinning::FirstUse(dir.path().join("mesh-roots.pem")),
            socket_group: None,
            insecure_plaintext: false,
        }))
        .unwrap();
    let first = runtime.block_on(sds.wait_version(1));
    assert_eq!(
        pilot_ca::verify_chain(
            std::slice::from_ref(&first.chain_pem),
            &first.root_pem,
            SystemTime::now()
        )
        .unwrap(),
        identity
    );

    // The agent's own bootstrap, plus a listener whose TLS comes over SDS.
    let input = IdentityInput {
        ip: Some("127.0.0.1".into()),
        namespace: Some("default".into()),
        service_account: Some("reviews".into()),
        ..Default::default()
    };
    let config = BootstrapConfig {
        identity: input
            .resolve(ProxyType::Router, |key| {
                (key == "POD_NAME").then(|| "reviews-v1".to_string())
            })
            .unwrap(),
        discovery: vec![format!("127.0.0.1:{}", discovery.xds_port)],
        admin_port: free_port(),
        auth,
        sds_socket: Some(socket),
    };
    let mut bootstrap = config.render().unwrap();
    bootstrap["static_resources"]["listeners"] = json!([{
        "name": "mtls",
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": free_port()}},
        "filter_chains": [{
            "transport_socket": {
                "name": "envoy.transport_sockets.tls",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
                    "require_client_certificate": true,
                    "common_tls_context": {
                        "tls_certificate_sds_secret_configs": [{"name": "default", "sds_config": sds_source()}],
                        "validation_context_sds_secret_config": {"name": "ROOTCA", "sds_config": sds_source()},
                    },
                },
            },
            "filters": [{
                "name": "envoy.filters.network.tcp_proxy",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                    "stat_prefix": "mtls",
                    "cluster": pilot_agent::bootstrap::XDS_CLUSTER,
                },
            }],
        }],
    }]);
    let envoy = Envoy::start(
        &bootstrap.to_string(),
        "bootstrap.json",
        config.admin_port,
        "info",
    )
    .unwrap();
    let spiffe = identity.uri();
    eventually("Envoy to hold the SPIFFE certificate", || {
        envoy_certs(&envoy).iter().any(|(_, uris)| uris.contains(&spiffe))
    });
    let held = |envoy: &Envoy| -> Vec<String> {
        envoy_certs(envoy)
            .into_iter()
            .filter(|(_, uris)| uris.contains(&spiffe))
            .map(|(serial, _)| serial)
            .collect()
    };
    let before = held(&envoy);
    assert_eq!(before.len(), 1, "{before:?}");
    // Two renewals later the same Envoy process (started here without hot
    // restart) holds another certificate.
    let renewed = runtime.block_on(sds.wait_version(3));
    assert_ne!(renewed.chain_pem, first.chain_pem);
    assert_eq!(renewed.root_pem, first.root_pem, "one root");
    eventually("Envoy to hold a renewed certificate", || {
        let now = held(&envoy);
        now.len() == 1 && now != before
    });
    drop(sds);
    drop(envoy);
    drop(discovery);
}
