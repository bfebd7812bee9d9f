//! Backend selection: the configuration store and the service registries
//! the flags ask for. Adding a backend is one arm in [`open_store`] and one
//! in [`open_registries`].

use std::sync::Arc;

use pilot_model::{
    AggregateDiscovery, ConfigWatch, KindRegistry, LocalMembership, Membership, ServiceDiscovery,
};
use pilot_store_etcd::{EtcdConfigStore, EtcdMembership, EtcdOptions, EtcdServiceRegistry};
use pilot_store_k8s::{DiscoveryOptions, KubeConfigStore, KubeMembership, KubeServiceDiscovery};
use pilot_store_memory::journal::JournalOptions;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};

use super::services_file;
use crate::args::{Args, RegistryKind, StoreKind};
use crate::ca::RootStore;
use crate::error::StartError;

/// A client for the cluster of `KUBECONFIG` (or `~/.kube/config`), or the
/// one the server runs in.
pub(crate) async fn kube_client() -> Result<kube::Client, StartError> {
    kube::Client::try_default().await.map_err(|e| {
        StartError::Failed(format!(
            "cannot reach Kubernetes (KUBECONFIG, ~/.kube/config or in-cluster): {e}"
        ))
    })
}

/// The configuration store the flags name and what comes with it.
pub(crate) struct OpenedStore {
    /// The store.
    pub(crate) store: Arc<dyn ConfigWatch>,
    /// What the data directory's journal held back at start (`--data-dir`
    /// only: objects that no longer validate, kept in its
    /// `quarantine.jsonl`).
    pub(crate) quarantine: crate::debug::quarantine::JournalQuarantine,
    /// The membership of the replicas sharing the store.
    pub(crate) membership: Arc<dyn Membership>,
    /// Where the store keeps the CA's self-signed root.
    pub(crate) ca_root: RootStore,
}

/// The configuration store the flags name, with the membership of the
/// replicas sharing it, this one named `replica`.
pub(crate) async fn open_store(
    args: &Args,
    registry: KindRegistry,
    replica: &str,
) -> Result<OpenedStore, StartError> {
    let local = || Arc::new(LocalMembership::new(replica)) as Arc<dyn Membership>;
    match &args.data_dir {
        Some(dir) if args.store == StoreKind::Memory => {
            let store = pilot_store_memory::journal::open(dir, registry, JournalOptions::default())
                .map_err(|e| StartError::Failed(e.to_string()))?;
            let quarantine = Arc::new(store.quarantined().to_vec());
            Ok(OpenedStore {
                store: Arc::new(store),
                quarantine,
                membership: local(),
                ca_root: RootStore::Dir(dir.join("cacerts")),
            })
        }
        _ => {
            let (store, membership, ca_root) = open_backend(args, registry, replica).await?;
            Ok(OpenedStore {
                store,
                quarantine: Arc::default(),
                membership,
                ca_root,
            })
        }
    }
}

async fn open_backend(
    args: &Args,
    registry: KindRegistry,
    replica: &str,
) -> Result<(Arc<dyn ConfigWatch>, Arc<dyn Membership>, RootStore), StartError> {
    let local = || Arc::new(LocalMembership::new(replica)) as Arc<dyn Membership>;
    if args.data_dir.is_some() && args.store != StoreKind::Memory {
        return Err(StartError::Usage(
            "--data-dir applies to --store memory only; etcd and Kubernetes keep their own data".into(),
        ));
    }
    match args.store {
        // With --data-dir, `open_store` opened the journal.
        StoreKind::Memory => Ok((
            Arc::new(MemoryConfigStore::new(registry)),
            local(),
            RootStore::Memory,
        )),
        StoreKind::Etcd => {
            let options = etcd_options(args)?;
            let store = EtcdConfigStore::connect(&options, registry).await.map_err(|e| {
                StartError::Failed(format!(
                    "cannot connect to etcd at {}: {e}",
                    options.endpoints.join(",")
                ))
            })?;
            let membership = Arc::new(EtcdMembership::new(&store, replica, args.replica_ttl));
            let ca_root = RootStore::etcd(store.client(), &args.etcd_prefix);
            Ok((Arc::new(store), membership, ca_root))
        }
        StoreKind::Kubernetes => {
            let client = kube_client().await?;
            if args.install_crds {
                pilot_store_k8s::install_crds(client.clone(), &registry)
                    .await
                    .map_err(|e| StartError::Failed(format!("cannot install the CRDs: {e}")))?;
            }
            // Replicas on Kubernetes: a Lease and a ConfigMap each, and
            // the `pilot-status-writer` Lease, in the store's namespace
            // (else the kubeconfig's or the pod's).
            let namespace = args
                .kube_namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_string());
            // The CA's root: a Secret there too.
            let ca_root = RootStore::Kubernetes {
                client: client.clone(),
                namespace: namespace.clone(),
            };
            let membership = Arc::new(KubeMembership::new(
                client.clone(),
                namespace,
                replica,
                args.replica_ttl,
            ));
            let store: Arc<dyn ConfigWatch> = match &args.kube_namespace {
                Some(namespace) => Arc::new(KubeConfigStore::namespaced(client, registry, namespace)),
                None => Arc::new(KubeConfigStore::new(client, registry)),
            };
            Ok((store, membership, ca_root))
        }
    }
}

/// The service registries, combined (`discovery.has_synced()` is true once
/// every registry that follows a remote source has its first full view).
pub(crate) struct Registries {
    /// Every registry as one.
    pub discovery: Arc<dyn ServiceDiscovery>,
    /// The file-fed registry's file and writer, to follow.
    pub file: Option<(std::path::PathBuf, pilot_store::RegistryWriter)>,
}

/// The registries the flags name (`--services FILE`, `--registry etcd`).
pub(crate) async fn open_registries(args: &Args) -> Result<Registries, StartError> {
    let mut aggregate = AggregateDiscovery::default();
    let mut file = None;
    // The in-memory registry is always there (empty), so embedders and
    // tests can add services to a running setup.
    aggregate.push(Arc::new(MemoryServiceRegistry::new()));
    if let Some(path) = &args.services {
        let loaded = services_file::load(path).map_err(StartError::Failed)?;
        let (registry, writer) = services_file::registry(&loaded);
        aggregate.push(Arc::new(registry));
        file = Some((path.clone(), writer));
    }
    for kind in &args.registries {
        match kind {
            RegistryKind::Etcd => {
                let options = etcd_options(args)?;
                let registry = EtcdServiceRegistry::connect(&options).await.map_err(|e| {
                    StartError::Failed(format!("cannot connect the etcd service registry: {e}"))
                })?;
                aggregate.push(Arc::new(registry));
            }
            RegistryKind::Kubernetes => {
                let registry = KubeServiceDiscovery::start(
                    kube_client().await?,
                    DiscoveryOptions {
                        domain: args.kube_domain.clone(),
                        namespace: args.kube_namespace.clone(),
                        ..Default::default()
                    },
                );
                aggregate.push(Arc::new(registry));
            }
        }
    }
    Ok(Registries {
        discovery: Arc::new(aggregate),
        file,
    })
}

fn etcd_options(args: &Args) -> Result<EtcdOptions, StartError> {
    if args.etcd_endpoints.is_empty() {
        return Err(StartError::Usage(
            "etcd needs --etcd-endpoints, e.g. --etcd-endpoints http://127.0.0.1:2379".into(),
        ));
    }
    let mut options = EtcdOptions::new(args.etcd_endpoints.clone()).with_prefix(args.etcd_prefix.clone());
    // etcd security.
    options.ca_file = args.etcd_ca_file.clone();
    if let (Some(cert), Some(key)) = (&args.etcd_cert, &args.etcd_key) {
        options.client_cert = Some((cert.clone(), key.clone()));
    }
    if let (Some(user), Some(file)) = (&args.etcd_user, &args.etcd_password_file) {
        let text = std::fs::read_to_string(file).map_err(|e| {
            StartError::Failed(format!(
                "cannot read the etcd password file {}: {e}",
                file.display()
            ))
        })?;
        let password = text.lines().next().unwrap_or_default().to_string();
        options.user = Some((user.clone(), password));
    }
    Ok(options)
}
