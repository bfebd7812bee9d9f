//! pilot's system tests (`publish = false`): the real binaries together,
//! as an operator runs them. `pilot-discovery` (one or several replicas)
//! on the memory store, etcd or the fake Kubernetes API server; `pilotctl`
//! against it; real Envoys and proxyless gRPC clients that it configures.
//! The tests are in `tests/`, one file per area; this library is their
//! one setup:
//!
//! - [`Store`]: where `pilot-discovery` keeps configuration, as flags and
//!   environment; [`discovery`] starts a server on it and waits until it
//!   is ready;
//! - [`Mesh`]: the bookinfo services in a services file, and the servers
//!   and status-writing replicas ([`Mesh::replica`]) that serve them;
//! - [`list`] and [`get`]: objects as `pilotctl get -o json` shows them;
//! - [`weighted`]: the weighted clusters in an Envoy's config dump;
//! - [`guide`]: runs a guide of `docs/guide/` as written (`tests/guides.rs`).
//!
//! The pieces come from pilot-test-support: it finds (or builds) the
//! binaries, starts etcd and Envoy from the workspace's `.tools`, runs
//! `pilotctl` with a clean environment and serves the fake Kubernetes API
//! server to other processes.

pub mod guide;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use pilot_test_support::{Discovery, FakeCluster, free_port, pilotctl};
use serde_json::Value;

/// Where a `pilot-discovery` keeps configuration.
#[derive(Clone, Copy)]
pub enum Store<'a> {
    /// The memory store, gone when the server stops.
    Memory,
    /// The memory store with its journal in a directory (`--data-dir`).
    DataDir(&'a Path),
    /// etcd at these endpoints (comma-separated).
    Etcd(&'a str),
    /// Custom resources on the fake Kubernetes API server, the CRDs
    /// installed by the server (`--install-crds`).
    Kubernetes(&'a FakeCluster),
}

impl<'a> Store<'a> {
    /// `pilot-discovery`'s flags for this store.
    pub fn flags(&self) -> Vec<&'a str> {
        match *self {
            Store::Memory => Vec::new(),
            Store::DataDir(dir) => vec!["--data-dir", dir.to_str().expect("a UTF-8 path")],
            Store::Etcd(endpoints) => vec!["--store", "etcd", "--etcd-endpoints", endpoints],
            Store::Kubernetes(_) => vec!["--store", "kubernetes", "--install-crds"],
        }
    }

    /// The environment it needs (`KUBECONFIG` for Kubernetes).
    pub fn env(&self) -> Vec<(&'static str, &'a OsStr)> {
        match *self {
            Store::Kubernetes(cluster) => cluster.env().to_vec(),
            _ => Vec::new(),
        }
    }
}

/// Starts a `pilot-discovery` on `store` with `flags` more, on free
/// loopback ports, and waits until it is ready.
pub fn discovery(store: &Store, flags: &[&str]) -> Discovery {
    let mut all = store.flags();
    all.extend_from_slice(flags);
    Discovery::start_with_env(&all, &store.env())
}

/// The bookinfo services (productpage, details, ratings, and reviews in
/// versions v1, v2 and v3) in a services file in a temporary directory,
/// every service on one free port.
pub struct Mesh {
    /// The port of every service.
    pub port: u16,
    /// The services file (`--services`).
    pub services: PathBuf,
    _dir: tempfile::TempDir,
}

impl Mesh {
    /// Writes the services file.
    pub fn bookinfo() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = free_port();
        let services = dir.path().join("services.yaml");
        std::fs::write(&services, bookinfo_services(port)).expect("the services file");
        Mesh {
            port,
            services,
            _dir: dir,
        }
    }

    /// The outbound cluster of `version`'s reviews
    /// (`outbound|PORT|version=v1|reviews.default.svc.cluster.local`).
    pub fn reviews(&self, version: &str) -> String {
        format!(
            "outbound|{}|version={version}|reviews.default.svc.cluster.local",
            self.port
        )
    }

    /// A `pilot-discovery` serving these services on `store`, with
    /// `flags` more (see [`discovery`]).
    pub fn discovery(&self, store: &Store, flags: &[&str]) -> Discovery {
        let mut all = vec!["--services", self.services.to_str().expect("a UTF-8 path")];
        all.extend_from_slice(flags);
        discovery(store, &all)
    }

    /// A replica named `name` of a set sharing `store`: it writes status
    /// every 200 ms when it holds the status-writer election, and its
    /// record expires 3 s after it stops renewing it (a `kill -9`).
    pub fn replica(&self, store: &Store, name: &str) -> Discovery {
        self.discovery(
            store,
            &[
                "--status-interval",
                "200ms",
                "--replica-name",
                name,
                "--replica-ttl",
                "3s",
            ],
        )
    }
}

/// The services file text for the bookinfo services on `port`, reviews in
/// three versions; instances on 127.0.0.1 from port 20000.
pub fn bookinfo_services(port: u16) -> String {
    let mut text = String::from("services:\n");
    for (name, versions) in [
        ("productpage", &["v1"][..]),
        ("details", &["v1"]),
        ("ratings", &["v1"]),
        ("reviews", &["v1", "v2", "v3"]),
    ] {
        text.push_str(&format!(
            "- hostname: {name}.default.svc.cluster.local\n  ports: [{{name: http, port: {port}, protocol: HTTP}}]\n  instances:\n"
        ));
        for (i, version) in versions.iter().enumerate() {
            text.push_str(&format!(
                "  - {{address: 127.0.0.1, port: {}, labels: {{app: {name}, version: {version}}}}}\n",
                20000 + i
            ));
        }
    }
    text
}

/// Every object of `kind` (a plural, `routerules`) in the default
/// namespace, as `pilotctl get KIND -o json` through `url` prints it.
pub fn list(url: Option<&str>, kind: &str) -> Vec<Value> {
    let run = pilotctl(url, &["get", kind, "-o", "json"], &[], None);
    assert_eq!(run.code, 0, "{run:?}");
    let list: Value = serde_json::from_str(&run.stdout).expect("pilotctl's JSON");
    list["items"].as_array().cloned().unwrap_or_default()
}

/// One object, as `pilotctl get KIND NAME -o json` through `url` prints it.
pub fn get(url: Option<&str>, kind: &str, name: &str) -> Value {
    let run = pilotctl(url, &["get", kind, name, "-o", "json"], &[], None);
    assert_eq!(run.code, 0, "{run:?}");
    serde_json::from_str(&run.stdout).expect("pilotctl's JSON")
}

/// Every (cluster, weight) of the weighted routes in an Envoy config dump
/// (`/config_dump`, as JSON).
pub fn weighted(dump: &Value) -> Vec<(String, u64)> {
    let mut found = Vec::new();
    match dump {
        Value::Object(map) => {
            if let Some(clusters) = map
                .get("weighted_clusters")
                .and_then(|w| w.get("clusters"))
                .and_then(|c| c.as_array())
            {
                for cluster in clusters {
                    let name = cluster["name"].as_str().unwrap_or_default().to_string();
                    found.push((name, cluster["weight"].as_u64().unwrap_or_default()));
                }
            }
            for child in map.values() {
                found.extend(weighted(child));
            }
        }
        Value::Array(items) => items.iter().for_each(|i| found.extend(weighted(i))),
        _ => {}
    }
    found
}
