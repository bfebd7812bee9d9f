//! The real Envoy (`.tools/envoy/bin/envoy`, installed by
//! `scripts/install-deps`) run by a test: a bootstrap file, a log, an
//! admin port, killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::http;
use crate::ports::free_port;
use crate::process::ProcessGuard;

/// The RE2 program-size limit (`re2.max_program_size.error_level`) of
/// the Envoys [`Envoy::ads`] starts: lower than Envoy's default of 100, so
/// that a test can have a proxy refuse a rule pilot accepts
/// ([`NACKED_REGEX`]), as an operator's lowered limit would.
pub const ENVOY_RE2_LIMIT: u64 = 50;

/// A regular expression pilot accepts (RE2 program size 68, within
/// Envoy's default limit) that [`Envoy::ads`]'s Envoys refuse (over
/// [`ENVOY_RE2_LIMIT`]): how tests make a proxy NACK.
pub const NACKED_REGEX: &str = "[0-9a-f]{32}";

/// The name of the ADS cluster in [`Envoy::ads`]'s bootstrap.
pub const XDS_CLUSTER: &str = "xds-grpc";

/// The Envoy binary: `$ENVOY`, else `.tools/envoy/bin/envoy` in the
/// workspace, else `envoy` on `PATH`.
pub fn envoy_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("ENVOY") {
        return PathBuf::from(path);
    }
    let tools = crate::workspace().join(".tools/envoy/bin/envoy");
    if tools.exists() {
        return tools;
    }
    PathBuf::from("envoy")
}

/// A running Envoy, killed when dropped (or when the test process dies).
pub struct Envoy {
    process: ProcessGuard,
    /// The admin port on 127.0.0.1.
    pub admin_port: u16,
    dir: tempfile::TempDir,
}

impl Envoy {
    /// Starts Envoy as `node_id` with string `metadata`, getting every
    /// listener and cluster over ADS (state of the world, or `delta`) from
    /// 127.0.0.1:`xds_port`.
    pub fn ads(node_id: &str, metadata: &[(&str, &str)], xds_port: u16, delta: bool) -> Result<Self, String> {
        Self::ads_cluster(node_id, metadata, &[xds_port], delta)
    }

    /// [`ads`](Self::ads) with an ADS cluster of several servers
    /// (127.0.0.1:each of `xds_ports`, round robin): Envoy opens its stream
    /// to one, and reconnects to another when that one goes away.
    pub fn ads_cluster(
        node_id: &str,
        metadata: &[(&str, &str)],
        xds_ports: &[u16],
        delta: bool,
    ) -> Result<Self, String> {
        let admin_port = free_port();
        let metadata: serde_json::Map<String, Value> = metadata
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect();
        let socket = |port: u16| json!({"socket_address": {"address": "127.0.0.1", "port_value": port}});
        let ads = json!({"ads": {}, "resource_api_version": "V3"});
        let bootstrap = json!({
            "node": {"id": node_id, "cluster": "pilot", "metadata": metadata},
            "admin": {"address": socket(admin_port)},
            "layered_runtime": {"layers": [{"name": "test", "static_layer": {
                "re2.max_program_size.error_level": ENVOY_RE2_LIMIT,
            }}]},
            "dynamic_resources": {
                "ads_config": {
                    "api_type": if delta { "DELTA_GRPC" } else { "GRPC" },
                    "transport_api_version": "V3",
                    "grpc_services": [{"envoy_grpc": {"cluster_name": XDS_CLUSTER}}],
                },
                "cds_config": ads,
                "lds_config": ads,
            },
            "static_resources": {"clusters": [{
                "name": XDS_CLUSTER,
                "type": "STATIC",
                "connect_timeout": "1s",
                "typed_extension_protocol_options": {
                    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                        "explicit_http_config": {"http2_protocol_options": {}},
                    },
                },
                "load_assignment": {
                    "cluster_name": XDS_CLUSTER,
                    "endpoints": [{"lb_endpoints": xds_ports
                        .iter()
                        .map(|port| json!({"endpoint": {"address": socket(*port)}}))
                        .collect::<Vec<_>>()}],
                },
            }]},
        });
        Self::start(&bootstrap.to_string(), "bootstrap.json", admin_port, "warn")
    }

    /// Starts Envoy on the bootstrap `text` (written as `file_name`, whose
    /// extension tells Envoy its format) whose admin listens on
    /// 127.0.0.1:`admin_port`.
    pub fn start(text: &str, file_name: &str, admin_port: u16, log_level: &str) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let path = dir.path().join(file_name);
        std::fs::write(&path, text).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.path().join("envoy.log")).map_err(|e| e.to_string())?;
        let envoy = envoy_binary();
        let process = ProcessGuard::spawn(
            Command::new(&envoy)
                .arg("-c")
                .arg(&path)
                .args(["--disable-hot-restart", "--log-level", log_level])
                .args(["--base-id", &admin_port.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log),
        )
        .map_err(|e| format!("cannot run {} (run scripts/install-deps): {e}", envoy.display()))?;
        Ok(Envoy {
            process,
            admin_port,
            dir,
        })
    }

    /// A GET on the admin endpoint; the body, or empty if it did not answer.
    pub fn admin(&self, path: &str) -> String {
        http::get(self.admin_port, path).1
    }

    /// What Envoy logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("envoy.log")).unwrap_or_default()
    }

    /// The directory holding the bootstrap and the log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Kills Envoy now.
    pub fn kill(&mut self) {
        self.process.kill();
    }
}
