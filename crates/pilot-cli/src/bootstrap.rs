//! `pilotctl grpc-bootstrap`: the xDS bootstrap file a proxyless gRPC
//! application reads (`GRPC_XDS_BOOTSTRAP=FILE`, gRFC A27), pointing at
//! pilot-discovery's ADS port, with a node pilot recognises as gRPC
//! (metadata `GENERATOR: grpc`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::{Value, json};

use crate::Failure;

/// The listener name template xDS-enabled gRPC servers fill in with their
/// listening address (pilot-xds's `GRPC_SERVER_LISTENER_PREFIX` + `%s`).
pub(crate) const SERVER_LISTENER_TEMPLATE: &str = "grpc/server?xds.resource.listening_address=%s";

/// What the bootstrap says about the workload.
#[derive(Debug, Clone, clap::Args)]
pub struct BootstrapArgs {
    /// pilot-discovery's ADS address, HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    pub xds_address: String,
    /// The workload's IP (its instances in the registry are its own; an
    /// xDS-enabled server gets listeners for them).
    #[arg(long, default_value = "127.0.0.1", value_name = "IP")]
    pub ip: IpAddr,
    /// The workload's id, conventionally POD.NAMESPACE (default:
    /// grpc-client.NAMESPACE).
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// The DNS suffix after the namespace.
    #[arg(long, default_value = "svc.cluster.local", value_name = "SUFFIX")]
    pub domain_suffix: String,
    /// The workload's labels, k=v,k=v (source matches of rules read them).
    #[arg(long, value_name = "LABELS")]
    pub labels: Option<String>,
    /// Write the file here instead of standard output.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
}

/// Writes (or prints) the bootstrap for `namespace`.
pub(crate) fn run(args: &BootstrapArgs, namespace: &str) -> Result<(), Failure> {
    let text = render(args, namespace)?;
    match &args.output {
        Some(path) => std::fs::write(path, text + "\n")
            .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display()))),
        None => {
            println!("{text}");
            Ok(())
        }
    }
}

/// The bootstrap JSON.
pub(crate) fn render(args: &BootstrapArgs, namespace: &str) -> Result<String, Failure> {
    let (host, port) = args
        .xds_address
        .rsplit_once(':')
        .ok_or_else(|| Failure::usage(format!("--xds-address {:?} is not HOST:PORT", args.xds_address)))?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(Failure::usage(format!(
            "--xds-address {:?} is not HOST:PORT (a port is 1-65535)",
            args.xds_address
        )));
    }
    let labels = parse_labels(args.labels.as_deref().unwrap_or(""))?;
    let id = args
        .id
        .clone()
        .unwrap_or_else(|| format!("grpc-client.{namespace}"));
    if id.is_empty() || id.contains('~') {
        return Err(Failure::usage(format!(
            "--id {id:?} must be non-empty and contain no '~'"
        )));
    }
    let domain = format!("{namespace}.{}", args.domain_suffix);
    let value: Value = json!({
        "xds_servers": [{
            "server_uri": args.xds_address,
            "channel_creds": [{"type": "insecure"}],
            "server_features": ["xds_v3"],
        }],
        "node": {
            "id": format!("sidecar~{}~{id}~{domain}", args.ip),
            "metadata": {
                "GENERATOR": "grpc",
                "NAMESPACE": namespace,
                "LABELS": labels,
            },
            "locality": {},
        },
        "server_listener_resource_name_template": SERVER_LISTENER_TEMPLATE,
    });
    serde_json::to_string_pretty(&value).map_err(|e| Failure::failed(e.to_string()))
}

fn parse_labels(text: &str) -> Result<BTreeMap<String, String>, Failure> {
    text.split(',')
        .filter(|pair| !pair.trim().is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
            _ => Err(Failure::usage(format!(
                "--labels entry {pair:?} is not key=value"
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(address: &str) -> BootstrapArgs {
        BootstrapArgs {
            xds_address: address.into(),
            ip: "10.0.0.7".parse().unwrap(),
            id: None,
            domain_suffix: "svc.cluster.local".into(),
            labels: Some("app=greeter,version=v2".into()),
            output: None,
        }
    }

    #[test]
    fn bootstrap_names_server_node_and_generator() {
        let text = render(&args("127.0.0.1:15010"), "prod").unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["xds_servers"][0]["server_uri"], "127.0.0.1:15010");
        assert_eq!(value["xds_servers"][0]["server_features"][0], "xds_v3");
        assert_eq!(
            value["node"]["id"],
            "sidecar~10.0.0.7~grpc-client.prod~prod.svc.cluster.local"
        );
        assert_eq!(value["node"]["metadata"]["GENERATOR"], "grpc");
        assert_eq!(value["node"]["metadata"]["LABELS"]["version"], "v2");
        assert_eq!(
            value["server_listener_resource_name_template"],
            SERVER_LISTENER_TEMPLATE
        );
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        for address in ["nowhere", "host:99999", ":80"] {
            let failure = render(&args(address), "default").unwrap_err();
            assert_eq!(failure.code, 2);
            assert!(failure.messages[0].contains("--xds-address"), "{failure:?}");
        }
        let mut bad = args("127.0.0.1:1");
        bad.labels = Some("app".into());
        let failure = render(&bad, "default").unwrap_err();
        assert!(
            failure.messages[0].contains("\"app\" is not key=value"),
            "{failure:?}"
        );
    }
}
