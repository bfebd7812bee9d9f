//! A real Envoy serving generated resources as static configuration, its
//! listeners bound at the workload's address so requests reach them
//! directly, killed when dropped: what the RBAC, JWT and ext_authz tests
//! send real requests through.

use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pilot_test_support::{ProcessGuard, envoy_binary, free_port};
use pilot_xds::envoy_types::pb::envoy::config::bootstrap::v3::Admin;
use pilot_xds::envoy_types::pb::envoy::config::core::v3::{Address, SocketAddress, address, socket_address};
use pilot_xds::envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use pilot_xds::{Resources, testing};
use prost::Message;

/// A running Envoy and the directory of its bootstrap and log.
pub(crate) struct StaticEnvoy {
    _process: ProcessGuard,
    dir: tempfile::TempDir,
}

impl StaticEnvoy {
    /// Starts Envoy as proxy `node` with `resources` (inbound listeners,
    /// which do not bind in a mesh, bind here) and static `secrets`, and
    /// waits until every listener accepts on `workload` (bounded, for a
    /// broken Envoy).
    pub(crate) fn start(node: &str, workload: &str, resources: &Resources, secrets: Vec<Secret>) -> Self {
        let mut resources = resources.clone();
        for listener in &mut resources.listeners {
            listener.bind_to_port = None;
        }
        let dir = tempfile::tempdir().unwrap();
        let admin_port = free_port();
        let mut bootstrap = testing::static_bootstrap(node, &resources, free_port());
        if let Some(statics) = bootstrap.static_resources.as_mut() {
            statics.secrets = secrets;
        }
        bootstrap.admin = Some(Admin {
            address: Some(Address {
                address: Some(address::Address::SocketAddress(SocketAddress {
                    address: "127.0.0.1".into(),
                    port_specifier: Some(socket_address::PortSpecifier::PortValue(u32::from(admin_port))),
                    ..Default::default()
                })),
            }),
            ..Default::default()
        });
        let path = dir.path().join("bootstrap.pb");
        std::fs::write(&path, bootstrap.encode_to_vec()).unwrap();
        let log = std::fs::File::create(dir.path().join("envoy.log")).unwrap();
        let process = ProcessGuard::spawn(
            Command::new(envoy_binary())
                .arg("-c")
                .arg(&path)
                .args(["--disable-hot-restart", "--log-level", "warn"])
                .args(["--base-id", &admin_port.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log),
        )
        .unwrap();
        let envoy = StaticEnvoy {
            _process: process,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        for listener in &resources.listeners {
            let port: u16 = listener.name.rsplit('_').next().unwrap().parse().unwrap();
            while TcpStream::connect((workload, port)).is_err() {
                assert!(
                    Instant::now() < deadline,
                    "Envoy never listened:\n{}",
                    envoy.log()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        envoy
    }

    /// What Envoy logged so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("envoy.log")).unwrap_or_default()
    }
}
