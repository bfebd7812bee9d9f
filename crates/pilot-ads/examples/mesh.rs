//! A bookinfo-like mesh served to a real Envoy: the discovery server on the
//! in-memory store and registry, with small HTTP upstreams that answer with
//! their version, and the bookinfo example rules applied as the
//! `networking.istio.io/v1` objects `pilotctl convert` makes of them.
//!
//!     cargo run -p pilot-ads --example mesh
//!
//! It prints how to start Envoy against it and what to curl.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use pilot_ads::{XdsOptions, XdsServer};
use pilot_api::default_registry;
use pilot_model::{ConfigStore, Labels, NetworkEndpoint, Port, Protocol, Service, ServiceInstance, document};
use pilot_routing::convert;
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const XDS_PORT: u16 = 15010;
const SERVICE_PORT: u16 = 9080;

/// An upstream that answers every request with `name version`.
async fn upstream(answer: String) -> std::io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                let mut seen = Vec::new();
                while let Ok(n) = stream.read(&mut buffer).await {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buffer[..n]);
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        let response = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{answer}\n",
                            answer.len() + 1
                        );
                        if stream.write_all(response.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    Ok(port)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Configuration: the bookinfo rules (later files win for the same
    // name), converted to VirtualServices, DestinationRules, a
    // ServiceEntry and a Gateway as `pilotctl convert` writes them.
    let registry = default_registry();
    let store = MemoryConfigStore::new(registry.clone());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/bookinfo");
    let mut rules = BTreeMap::new();
    for object in document::read_dir(&dir, &registry)? {
        rules.insert(object.key(), object);
    }
    let rules: Vec<_> = rules.into_values().collect();
    for object in convert::convert_objects(&rules)?.objects {
        store.create(object).await?;
    }
    let controller = Arc::new(Controller::new(Arc::new(store)));
    controller.run();

    // Services: every bookinfo service on port 9080, versions as instances.
    let services = MemoryServiceRegistry::new();
    let localhost: IpAddr = "127.0.0.1".parse()?;
    for (name, versions) in [
        ("productpage", &["v1"][..]),
        ("details", &["v1"]),
        ("ratings", &["v1"]),
        ("reviews", &["v1", "v2", "v3"]),
    ] {
        let service = services.add_service(Service::new(
            format!("{name}.default.svc.cluster.local"),
            vec![Port::new("http", SERVICE_PORT, Protocol::Http)],
        ));
        for version in versions {
            let port = upstream(format!("{name} {version}")).await?;
            services.add_instance(ServiceInstance::new(
                Arc::clone(&service),
                NetworkEndpoint::new(localhost, port, service.ports[0].clone()),
                Labels::from_pairs([("app", name), ("version", version)]),
            ))?;
        }
    }

    let server = XdsServer::new(controller, Arc::new(services), XdsOptions::default());
    let bootstrap = std::env::temp_dir().join("pilot-mesh-envoy.yaml");
    std::fs::write(&bootstrap, envoy_bootstrap())?;
    println!("pilot discovery server: ADS (state of the world and delta) on 127.0.0.1:{XDS_PORT}");
    println!("Envoy bootstrap written to {}", bootstrap.display());
    println!();
    println!("start Envoy (scripts/install-deps puts it in .tools/envoy):");
    println!("  .tools/envoy/bin/envoy -c {} --base-id 7", bootstrap.display());
    println!("then, through Envoy's listener on 127.0.0.1:{SERVICE_PORT}:");
    println!(
        "  curl -s -H 'host: reviews' http://127.0.0.1:{SERVICE_PORT}/                          # v1 80%, v2 20%"
    );
    println!("  curl -s -H 'host: reviews' -H 'end-user: jason' http://127.0.0.1:{SERVICE_PORT}/     # v3");
    println!("  curl -s -H 'host: productpage' http://127.0.0.1:{SERVICE_PORT}/");
    println!("Envoy's admin: http://127.0.0.1:15000/config_dump ; press Ctrl-C to stop.");
    let address: SocketAddr = ([127, 0, 0, 1], XDS_PORT).into();
    server
        .serve(address, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

/// An Envoy bootstrap for a sidecar without traffic capture, all of its
/// configuration from the ADS server.
fn envoy_bootstrap() -> String {
    format!(
        r#"node:
  id: sidecar~10.0.0.100~example.default~default.svc.cluster.local
  cluster: example
  metadata: {{INTERCEPTION_MODE: NONE}}
admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: 15000}}}}
dynamic_resources:
  ads_config:
    api_type: GRPC
    transport_api_version: V3
    grpc_services: [{{envoy_grpc: {{cluster_name: xds-grpc}}}}]
  cds_config: {{ads: {{}}, resource_api_version: V3}}
  lds_config: {{ads: {{}}, resource_api_version: V3}}
static_resources:
  clusters:
  - name: xds-grpc
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    load_assignment:
      cluster_name: xds-grpc
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {XDS_PORT}}}}}}}}}]}}]
"#
    )
}
