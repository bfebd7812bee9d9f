//! Where a self-signed root is kept when no `--ca-dir` gives one: in the
//! configured store, so every replica sharing it and every restart signs
//! with the same root ([`RootStore`]).
//!
//! The root is created only if absent, with the store's own
//! compare-and-set: of two replicas starting at once, one keeps its root
//! and the other reads the winner's. A renewed root (`renew.rs`) replaces
//! it the same way: compared against the version read (etcd's
//! `mod_revision`, the Secret's `resourceVersion`, the directory's
//! certificate under a lock file), so of two replicas renewing at once
//! one writes and the other reads what it wrote.
//!
//! | store | where the root and its key live | who can read them |
//! |-------|---------------------------------|-------------------|
//! | etcd | the key `<prefix>/_ca/root` (JSON of the PEM files) | whoever may read the prefix in etcd |
//! | Kubernetes | the Secret `pilot-ca-secret` (type `istio.io/ca-root`) in the store's namespace | whoever RBAC lets get Secrets there |
//! | memory, `--data-dir` | `DATA_DIR/cacerts/`, files only the server's user may read | that user |
//! | memory | this process only: a restart makes a new root | nobody else |
//!
//! None of them is a configuration object: the REST API (and `kubectl`
//! pointed at it) lists kinds, and no kind reaches these keys, so the key
//! is never served over it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnOpResponse};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use pilot_ca::CaMaterial;

/// The Kubernetes Secret holding the root.
pub(crate) const SECRET_NAME: &str = "pilot-ca-secret";
/// Its type.
const SECRET_TYPE: &str = "istio.io/ca-root";
/// The files a kept root is made of (Istio's `cacerts` names).
const CERT: &str = "ca-cert.pem";
const KEY: &str = "ca-key.pem";
const CHAIN: &str = "cert-chain.pem";
const ROOT: &str = "root-cert.pem";

/// What a stored root was read at, to replace it only if it is unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Version {
    /// Kept nowhere but in this process.
    Process,
    /// The etcd key's `mod_revision`.
    Etcd(i64),
    /// The Secret's `resourceVersion`.
    Kubernetes(String),
    /// The directory's `ca-cert.pem`.
    Dir(String),
}

/// Where the configured store keeps a self-signed root.
#[derive(Clone)]
pub(crate) enum RootStore {
    /// Nowhere: the root lives as long as the process.
    Memory,
    /// A directory (the memory store's `--data-dir`).
    Dir(PathBuf),
    /// One key in etcd.
    Etcd {
        /// The store's client.
        client: Box<etcd_client::Client>,
        /// The key.
        key: String,
    },
    /// A Secret in a namespace.
    Kubernetes {
        /// The store's client.
        client: kube::Client,
        /// The Secret's namespace.
        namespace: String,
    },
}

impl RootStore {
    /// The root for etcd under `prefix`.
    pub(crate) fn etcd(client: etcd_client::Client, prefix: &str) -> Self {
        RootStore::Etcd {
            client: Box::new(client),
            key: format!("{}/_ca/root", prefix.trim_end_matches('/')),
        }
    }

    /// The root kept here, or a new self-signed root for `trust_domain`
    /// kept here if there is none yet.
    pub(crate) async fn load_or_create(
        &self,
        trust_domain: &str,
        root_ttl: Duration,
    ) -> Result<CaMaterial, String> {
        let generate = || {
            pilot_ca::generate_root(trust_domain, root_ttl)
                .map_err(|e| format!("generating the CA root: {e}"))
        };
        match self {
            RootStore::Memory => {
                tracing::warn!(
                    "the CA's root is self-signed and kept in memory (memory store without --data-dir, no --ca-dir): \
                     a restart makes a new root, and workloads must fetch it again"
                );
                generate()
            }
            RootStore::Dir(dir) => {
                let (dir, domain) = (dir.clone(), trust_domain.to_string());
                tokio::task::spawn_blocking(move || super::dir::load_or_create(&dir, &domain, root_ttl))
                    .await
                    .map_err(|e| format!("keeping the CA root: {e}"))?
            }
            RootStore::Etcd { client, key } => {
                if let Some((files, _)) = etcd_get(client, key).await? {
                    return material(&files, &format!("etcd key {key}"));
                }
                let ours = generate()?;
                let kept = etcd_create_if_absent(client, key, &files_of(&ours)).await?;
                announce(kept.is_none(), &format!("etcd key {key}"));
                match kept {
                    None => Ok(ours),
                    Some(files) => material(&files, &format!("etcd key {key}")),
                }
            }
            RootStore::Kubernetes { client, namespace } => {
                let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
                let place = format!("Secret {namespace}/{SECRET_NAME}");
                let read = |secret: Secret| material(&secret_files(secret), &place);
                let unavailable = |e: kube::Error| format!("reading the CA root from {place}: {e}");
                if let Some(secret) = api.get_opt(SECRET_NAME).await.map_err(unavailable)? {
                    return read(secret);
                }
                let ours = generate()?;
                let secret = root_secret(namespace, &files_of(&ours), None);
                match api.create(&PostParams::default(), &secret).await {
                    Ok(_) => {
                        announce(true, &place);
                        Ok(ours)
                    }
                    Err(kube::Error::Api(status)) if status.code == 409 => {
                        announce(false, &place);
                        read(api.get(SECRET_NAME).await.map_err(unavailable)?)
                    }
                    Err(e) => Err(format!("keeping the CA root in {place}: {e}")),
                }
            }
        }
    }
}

impl RootStore {
    /// The root kept here and the version it was read at; `None` for a
    /// root kept in this process only (or none kept yet).
    pub(crate) async fn load(&self) -> Result<Option<(CaMaterial, Version)>, String> {
        match self {
            RootStore::Memory => Ok(None),
            RootStore::Dir(dir) => {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || super::dir::load_versioned(&dir))
                    .await
                    .map_err(|e| format!("reading the CA root: {e}"))?
                    .map(|(material, cert)| Some((material, Version::Dir(cert))))
            }
            RootStore::Etcd { client, key } => match etcd_get(client, key).await? {
                Some((files, revision)) => {
                    Ok(Some((material(&files, &format!("etcd key {key}"))?, Version::Etcd(revision))))
                }
                None => Ok(None),
            },
            RootStore::Kubernetes { client, namespace } => {
                let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
                let place = format!("Secret {namespace}/{SECRET_NAME}");
                let Some(secret) = api
                    .get_opt(SECRET_NAME)
                    .await
                    .map_err(|e| format!("reading the CA root from {place}: {e}"))?
                else {
                    return Ok(None);
                };
                let version = secret.metadata.resource_version.clone().unwrap_or_default();
                Ok(Some((material(&secret_files(secret), &place)?, Version::Kubernetes(version))))
            }
        }
    }

    /// Replaces the root read at `version` with `renewed`: `false` when it
    /// changed since (another replica renewed it first).
    pub(crate) async fn replace(&self, version: &Version, renewed: &CaMaterial) -> Result<bool, String> {
        let files = files_of(renewed);
        match (self, version) {
            (RootStore::Memory, _) | (_, Version::Process) => Ok(true),
            (RootStore::Dir(dir), Version::Dir(cert)) => {
                let (dir, cert) = (dir.clone(), cert.clone());
                tokio::task::spawn_blocking(move || super::dir::replace(&dir, &cert, &files))
                    .await
                    .map_err(|e| format!("keeping the renewed CA root: {e}"))?
            }
            (RootStore::Etcd { client, key }, Version::Etcd(revision)) => {
                let value = serde_json::to_vec(&files).map_err(|e| format!("encoding the CA root: {e}"))?;
                let txn = Txn::new()
                    .when([Compare::mod_revision(key.as_str(), CompareOp::Equal, *revision)])
                    .and_then([TxnOp::put(key.as_str(), value, None)]);
                let response = client
                    .as_ref()
                    .clone()
                    .txn(txn)
                    .await
                    .map_err(|e| format!("keeping the renewed CA root in etcd key {key}: {e}"))?;
                Ok(response.succeeded())
            }
            (RootStore::Kubernetes { client, namespace }, Version::Kubernetes(resource_version)) => {
                let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
                let secret = root_secret(namespace, &files, Some(resource_version.clone()));
                match api.replace(SECRET_NAME, &PostParams::default(), &secret).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                    Err(e) => Err(format!(
                        "keeping the renewed CA root in Secret {namespace}/{SECRET_NAME}: {e}"
                    )),
                }
            }
            (_, version) => Err(format!("the CA root was read at {version:?}, from another store")),
        }
    }
}

/// The Secret keeping `files`.
fn root_secret(namespace: &str, files: &BTreeMap<String, String>, resource_version: Option<String>) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(SECRET_NAME.into()),
            namespace: Some(namespace.to_string()),
            resource_version,
            ..Default::default()
        },
        type_: Some(SECRET_TYPE.into()),
        data: Some(
            files
                .iter()
                .map(|(name, text)| (name.clone(), ByteString(text.clone().into_bytes())))
                .collect(),
        ),
        ..Default::default()
    }
}

/// The files a Secret holds.
fn secret_files(secret: Secret) -> BTreeMap<String, String> {
    secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(name, bytes)| (name, String::from_utf8_lossy(&bytes.0).into_owned()))
        .collect()
}

/// The files of a self-signed root (Istio's `cacerts` names): during a
/// rotation the cross-certificate is `cert-chain.pem` and `root-cert.pem`
/// the bundle of the new root and the previous one.
fn files_of(material: &CaMaterial) -> BTreeMap<String, String> {
    let mut files: BTreeMap<String, String> = [
        (CERT, material.cert_pem.clone()),
        (KEY, material.key_pem.clone()),
        (ROOT, material.trust_bundle_pem()),
    ]
    .into_iter()
    .map(|(name, text)| (name.to_string(), text))
    .collect();
    if !material.chain_pem.is_empty() {
        files.insert(CHAIN.to_string(), material.chain_pem.concat());
    }
    files
}

/// The material in `files`, read from `place`.
fn material(files: &BTreeMap<String, String>, place: &str) -> Result<CaMaterial, String> {
    let file = |name: &str| {
        files
            .get(name)
            .ok_or_else(|| format!("the CA root in {place} has no {name}"))
    };
    CaMaterial::from_pem(
        file(CERT)?,
        file(KEY)?,
        files.get(CHAIN).map(String::as_str),
        files.get(ROOT).map(String::as_str),
    )
    .map_err(|e| format!("the CA root in {place}: {e}"))
}

fn announce(made: bool, place: &str) {
    if made {
        tracing::info!(%place, "made a self-signed CA root and kept it");
    } else {
        tracing::info!(%place, "another replica made the CA root first; reading it");
    }
}

/// The files under `key` and their `mod_revision`, if any.
async fn etcd_get(
    client: &etcd_client::Client,
    key: &str,
) -> Result<Option<(BTreeMap<String, String>, i64)>, String> {
    let response = client
        .clone()
        .get(key, None)
        .await
        .map_err(|e| format!("reading the CA root from etcd key {key}: {e}"))?;
    response
        .kvs()
        .first()
        .map(|kv| decode(key, kv.value()).map(|files| (files, kv.mod_revision())))
        .transpose()
}

/// Keeps `files` under `key` unless it exists: `None` when they were
/// kept, else what the key holds.
async fn etcd_create_if_absent(
    client: &etcd_client::Client,
    key: &str,
    files: &BTreeMap<String, String>,
) -> Result<Option<BTreeMap<String, String>>, String> {
    let value = serde_json::to_vec(files).map_err(|e| format!("encoding the CA root: {e}"))?;
    let txn = Txn::new()
        .when([Compare::create_revision(key, CompareOp::Equal, 0)])
        .and_then([TxnOp::put(key, value, None)])
        .or_else([TxnOp::get(key, None)]);
    let response = client
        .clone()
        .txn(txn)
        .await
        .map_err(|e| format!("keeping the CA root in etcd key {key}: {e}"))?;
    if response.succeeded() {
        return Ok(None);
    }
    let kept = response.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.value().to_vec()),
        _ => None,
    });
    match kept {
        Some(value) => decode(key, &value).map(Some),
        None => Err(format!(
            "etcd key {key} existed when the CA root was kept, and was gone when read"
        )),
    }
}

fn decode(key: &str, value: &[u8]) -> Result<BTreeMap<String, String>, String> {
    serde_json::from_slice(value)
        .map_err(|e| format!("the CA root in etcd key {key} is not its JSON files: {e}"))
}
