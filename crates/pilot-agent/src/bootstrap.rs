//! The Envoy bootstrap the agent writes for each epoch
//! (`envoy-rev<EPOCH>.json`): node identity, admin on 127.0.0.1, an ADS
//! cluster over HTTP/2 with keepalives listing every discovery address
//! (over TLS, with a client certificate and/or a bearer token when
//! pilot-discovery asks for them), LDS and CDS over ADS, stats; with the
//! agent's SDS server on, an `sds-grpc` cluster on its Unix socket.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{AgentError, Identity};

/// The name of the ADS cluster in the bootstrap.
pub const XDS_CLUSTER: &str = "xds-grpc";

/// Everything the bootstrap is made from. Two equal values give the same
/// file, so the supervisor compares these to decide on a hot restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapConfig {
    /// Who the proxy is.
    pub identity: Identity,
    /// pilot-discovery's ADS addresses (`host:port`), one endpoint each.
    pub discovery: Vec<String>,
    /// Envoy's admin port on 127.0.0.1.
    pub admin_port: u16,
    /// How Envoy authenticates to pilot-discovery's ADS port.
    pub auth: DiscoveryAuth,
    /// The agent's SDS socket (`--sds-socket`), served to Envoy as the
    /// [`SDS_CLUSTER`](crate::sds::SDS_CLUSTER) cluster; none: no SDS.
    pub sds_socket: Option<PathBuf>,
}

/// The credentials of the ADS connection: a bearer token sent as gRPC
/// `authorization` metadata, TLS with a trusted CA, and a client
/// certificate for mTLS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiscoveryAuth {
    /// The bearer token (`--discovery-token-file`'s content); it is written
    /// into the bootstrap, which is then readable by its owner only.
    pub token: Option<String>,
    /// TLS to pilot-discovery (`--discovery-ca-file`); none: plaintext.
    pub tls: Option<DiscoveryTls>,
}

/// TLS of the ADS connection. Envoy reads the files when an epoch starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryTls {
    /// The CA pilot-discovery's certificate must chain to.
    pub ca_file: PathBuf,
    /// The client certificate and key (`--discovery-cert`,
    /// `--discovery-key`), for mTLS.
    pub client: Option<(PathBuf, PathBuf)>,
    /// The name pilot-discovery's certificate must carry (SNI and the
    /// subject alt name checked); none: every discovery address's host.
    pub server_name: Option<String>,
}

impl BootstrapConfig {
    /// The bootstrap as Envoy's v3 JSON.
    ///
    /// ```
    /// use pilot_agent::{BootstrapConfig, Identity, InterceptionMode, ProxyType};
    /// let config = BootstrapConfig {
    ///     identity: Identity {
    ///         proxy_type: ProxyType::Router,
    ///         ip: "10.0.0.2".parse().unwrap(),
    ///         id: "egress.default".into(),
    ///         domain: "default.svc.cluster.local".into(),
    ///         labels: Default::default(),
    ///         interception: InterceptionMode::None,
    ///         cluster: "egress".into(),
    ///         service_account: None,
    ///     },
    ///     discovery: vec!["pilot-1:15010".into(), "10.0.0.7:15010".into()],
    ///     admin_port: 15000,
    ///     auth: Default::default(),
    ///     sds_socket: None,
    /// };
    /// let bootstrap = config.render().unwrap();
    /// assert_eq!(bootstrap["admin"]["address"]["socket_address"]["address"], "127.0.0.1");
    /// let xds = &bootstrap["static_resources"]["clusters"][0];
    /// assert_eq!(xds["type"], "STRICT_DNS");
    /// assert_eq!(xds["load_assignment"]["endpoints"][0]["lb_endpoints"].as_array().unwrap().len(), 2);
    /// ```
    pub fn render(&self) -> Result<Value, AgentError> {
        if self.discovery.is_empty() {
            return Err(AgentError::Identity {
                field: "--discovery-address",
                message: "no discovery address: pass --discovery-address HOST:PORT (repeatable)".into(),
            });
        }
        let mut endpoints = Vec::new();
        let mut all_ips = true;
        for address in &self.discovery {
            let (host, port) = split_host_port(address)?;
            all_ips &= host.parse::<std::net::IpAddr>().is_ok();
            endpoints.push(json!({
                "endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}}
            }));
        }
        let identity = &self.identity;
        let mut grpc_service = json!({"envoy_grpc": {"cluster_name": XDS_CLUSTER}});
        if let Some(token) = &self.auth.token {
            grpc_service["initial_metadata"] =
                json!([{"key": "authorization", "value": format!("Bearer {token}")}]);
        }
        let mut bootstrap = json!({
            "node": {
                "id": identity.node_id(),
                "cluster": identity.cluster,
                "metadata": identity.metadata(),
            },
            "admin": {
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": self.admin_port}},
            },
            "dynamic_resources": {
                "ads_config": {
                    "api_type": "GRPC",
                    "transport_api_version": "V3",
                    "set_node_on_first_message_only": true,
                    "grpc_services": [grpc_service],
                },
                "cds_config": {"ads": {}, "resource_api_version": "V3"},
                "lds_config": {"ads": {}, "resource_api_version": "V3"},
            },
            "static_resources": {
                "clusters": [{
                    "name": XDS_CLUSTER,
                    "type": if all_ips { "STATIC" } else { "STRICT_DNS" },
                    "connect_timeout": "1s",
                    "lb_policy": "ROUND_ROBIN",
                    "typed_extension_protocol_options": {
                        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                            "explicit_http_config": {
                                "http2_protocol_options": {
                                    "connection_keepalive": {"interval": "30s", "timeout": "10s"},
                                },
                            },
                        },
                    },
                    "upstream_connection_options": {
                        "tcp_keepalive": {"keepalive_time": 300, "keepalive_interval": 30, "keepalive_probes": 3},
                    },
                    "load_assignment": {
                        "cluster_name": XDS_CLUSTER,
                        "endpoints": [{"lb_endpoints": endpoints}],
                    },
                }],
            },
            "stats_config": {"use_all_default_tags": true},
        });
        if let Some(tls) = &self.auth.tls {
            bootstrap["static_resources"]["clusters"][0]["transport_socket"] =
                tls.transport_socket(&self.discovery)?;
        }
        if let (Some(socket), Some(clusters)) = (
            &self.sds_socket,
            bootstrap["static_resources"]["clusters"].as_array_mut(),
        ) {
            clusters.push(sds_cluster(socket));
            bootstrap["node"]["metadata"][pilot_proxy_api::metadata::SDS] = json!("true");
        }
        Ok(bootstrap)
    }

    /// Writes the bootstrap of `epoch` into `dir` (atomically: a temporary
    /// file renamed), returning its path.
    pub fn write(&self, dir: &Path, epoch: u32) -> Result<PathBuf, AgentError> {
        let path = bootstrap_path(dir, epoch);
        let text = serde_json::to_string_pretty(&self.render()?).map_err(|e| AgentError::file(&path, e))?;
        std::fs::create_dir_all(dir).map_err(|e| AgentError::file(dir, e))?;
        let tmp = dir.join(format!(".envoy-rev{epoch}.json.tmp"));
        // Owner-only: the bootstrap may hold the ADS bearer token.
        let _ = std::fs::remove_file(&tmp);
        let mut file = std::fs::OpenOptions::new();
        file.write(true).create(true).truncate(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
        let mut file = file.open(&tmp).map_err(|e| AgentError::file(&tmp, e))?;
        std::io::Write::write_all(&mut file, text.as_bytes()).map_err(|e| AgentError::file(&tmp, e))?;
        drop(file);
        std::fs::rename(&tmp, &path).map_err(|e| AgentError::file(&path, e))?;
        Ok(path)
    }
}

impl DiscoveryTls {
    /// The ADS cluster's `transport_socket`: an `UpstreamTlsContext` with
    /// ALPN h2 (gRPC), the CA as `trusted_ca`, the server name as SNI, and
    /// the names pilot-discovery's certificate must carry.
    fn transport_socket(&self, discovery: &[String]) -> Result<Value, AgentError> {
        let mut names = Vec::new();
        match &self.server_name {
            Some(name) => names.push(name.clone()),
            None => {
                for address in discovery {
                    let (host, _) = split_host_port(address)?;
                    if !names.contains(&host) {
                        names.push(host);
                    }
                }
            }
        }
        let sans: Vec<Value> = names
            .iter()
            .map(|name| {
                let san_type = if name.parse::<std::net::IpAddr>().is_ok() {
                    "IP_ADDRESS"
                } else {
                    "DNS"
                };
                json!({"san_type": san_type, "matcher": {"exact": name}})
            })
            .collect();
        let mut common = json!({
            "alpn_protocols": ["h2"],
            "validation_context": {
                "trusted_ca": {"filename": self.ca_file.display().to_string()},
                "match_typed_subject_alt_names": sans,
            },
        });
        if let Some((cert, key)) = &self.client {
            common["tls_certificates"] = json!([{
                "certificate_chain": {"filename": cert.display().to_string()},
                "private_key": {"filename": key.display().to_string()},
            }]);
        }
        let mut context = json!({
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
            "common_tls_context": common,
        });
        // SNI is a host name, never an IP address (RFC 6066).
        if let Some(sni) = names.iter().find(|n| n.parse::<std::net::IpAddr>().is_err()) {
            context["sni"] = json!(sni);
        }
        Ok(json!({"name": "envoy.transport_sockets.tls", "typed_config": context}))
    }
}

/// `<dir>/envoy-rev<epoch>.json`.
pub fn bootstrap_path(dir: &Path, epoch: u32) -> PathBuf {
    dir.join(format!("envoy-rev{epoch}.json"))
}

/// The SDS cluster: HTTP/2 on the agent's Unix socket.
fn sds_cluster(socket: &Path) -> Value {
    let name = crate::sds::SDS_CLUSTER;
    json!({
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}},
            },
        },
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"pipe": {"path": socket.display().to_string()}}}}]}],
        },
    })
}

fn split_host_port(address: &str) -> Result<(String, u16), AgentError> {
    let bad = |message: String| AgentError::Identity {
        field: "--discovery-address",
        message,
    };
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| bad(format!("{address:?} is not HOST:PORT")))?;
    let port: u16 = port
        .parse()
        .map_err(|_| bad(format!("{address:?}: port {port:?} is not a number")))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad(format!("{address:?} has no host")));
    }
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            split_host_port("[::1]:15010").unwrap(),
            ("::1".to_string(), 15010)
        );
        assert_eq!(split_host_port("pilot:1").unwrap(), ("pilot".to_string(), 1));
        for bad in ["pilot", ":15010", "pilot:x", "pilot:70000"] {
            let err = split_host_port(bad).unwrap_err().to_string();
            assert!(err.contains("--discovery-address"), "{err}");
        }
    }
}
