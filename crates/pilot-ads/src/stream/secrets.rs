//! SDS over ADS: the `Secret`s a proxy's listeners and clusters name
//! (`kubernetes://[<namespace>/]<name>[-cacert]`, `pilot_model::CredentialName`),
//! served from the server's [`CredentialSource`](pilot_model::CredentialSource);
//! and the certificate authority bundles BackendTLSPolicies name
//! (`configmap://<namespace>/<name>[,<name>...]`, `pilot_model::CaBundleName`),
//! each a validation context holding the ConfigMaps' `ca.crt` one after
//! the other (while one of them is missing, a certificate authority
//! nothing chains to: `trusts_nothing`, as for a policy's reference to
//! another kind, `unresolved-ca://<namespace>/<policy>`).
//!
//! - Who may read what: a proxy reads the credentials of its own namespace
//!   (its node id's, which an authenticated caller may only claim for its
//!   own namespace); a router proxy also those of another namespace whose
//!   ReferenceGrant lets Gateways of its namespace refer to that Secret,
//!   as a Gateway's `certificateRefs` may. Any proxy reads a bundle whose
//!   ConfigMaps BackendTLSPolicies of their namespace name (certificate
//!   authorities, nothing secret; never another ConfigMap). A name it may
//!   not read is answered as one that does not exist: nothing is sent for
//!   it (and a warning names the proxy and the Secret, once each time it
//!   becomes unreadable, not at every push).
//! - When: on the proxy's request (a name it newly asks for), after a
//!   change of the credentials, and after a push (a ReferenceGrant may
//!   have come or gone). Only what changed for the proxy is sent: a
//!   state-of-the-world response carries every secret the proxy asks for
//!   and may read (a secret left out is not a removal in state of the
//!   world; a response is sent only when some secret is there, since
//!   Envoy refuses one without the secret it waits for), a delta response
//!   the changed ones and, in `removed_resources`, those deleted or no
//!   longer readable.
//! - ACKs and NACKs are logged; a NACKed secret is not sent again until
//!   it changes. Secrets are not part of a proxy's distribution status:
//!   their versions are not configuration versions.
//! - What the stream keeps is boxed and made only when the proxy first
//!   asks for a secret: a sidecar without any holds one pointer.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, Secret, TlsCertificate, secret,
};
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, DiscoveryResponse, Resource};
use envoy_types::pb::google::protobuf::Any;
use pilot_model::{CaBundleName, CredentialName, TlsCredential};
use prost::Message;

use super::session::{Gone, Session};
use super::transport::frame;

/// The type URL of SDS resources.
pub(crate) const SECRET_URL: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/// What a Secret request asks for.
pub(super) enum Asked {
    /// Exactly these names (state of the world).
    Names(BTreeSet<String>),
    /// These more, these no longer (delta).
    Change {
        subscribe: Vec<String>,
        unsubscribe: Vec<String>,
    },
}

/// A stream's Secret subscription and what the proxy was sent.
#[derive(Default)]
pub(super) struct Secrets {
    names: BTreeSet<String>,
    /// Per name, the version of the secret the proxy holds (sent).
    held: BTreeMap<String, u64>,
    /// The nonce of the latest Secret response (0: none yet).
    nonce: u64,
    /// The names asked for that the proxy may not read, as last looked
    /// at: each is logged once when it becomes so, not at every push.
    refused: BTreeSet<String>,
}

/// One secret as the proxy may have it now: its version and resource.
struct Current {
    version: u64,
    secret: Secret,
}

impl Session {
    /// Handles a request for Secrets: records its ACK or NACK, applies its
    /// names, and sends what the proxy lacks.
    pub(super) async fn secret_request(
        &mut self,
        incremental: bool,
        nonce: &str,
        error: Option<&str>,
        asked: Asked,
    ) -> Result<(), Gone> {
        let node = self.node_id().to_string();
        let secrets = self.secrets.get_or_insert_with(Default::default);
        if !nonce.is_empty() {
            if nonce.parse::<u64>().ok() != Some(secrets.nonce) || nonce.starts_with(['0', '+']) {
                // A newer response is on its way; the answer to it carries
                // the names.
                return Ok(());
            }
            match error {
                Some(message) => tracing::warn!(node, message, "Secret NACK"),
                None => tracing::debug!(node, "Secret ACK"),
            }
        }
        let before = secrets.names.clone();
        match asked {
            Asked::Names(names) => secrets.names = names,
            Asked::Change {
                subscribe,
                unsubscribe,
            } => {
                for name in unsubscribe {
                    secrets.names.remove(&name);
                    secrets.held.remove(&name);
                }
                secrets.names.extend(subscribe.into_iter().filter(|n| n != "*"));
            }
        }
        if !incremental {
            // A state-of-the-world proxy that lets a name go forgets it.
            let names = secrets.names.clone();
            secrets.held.retain(|name, _| names.contains(name));
        }
        let added = secrets.names.difference(&before).count() > 0;
        self.send_secrets(incremental, added && !incremental).await
    }

    /// Sends the secrets the proxy asks for whose version it lacks
    /// (`whole`: every one it may read, for a state-of-the-world
    /// subscription that named new ones).
    pub(super) async fn send_secrets(&mut self, incremental: bool, whole: bool) -> Result<(), Gone> {
        let Some(secrets) = self.secrets.as_ref() else {
            return Ok(());
        };
        let mut refused = BTreeMap::new();
        let mut current = BTreeMap::new();
        for name in &secrets.names {
            match self.current_secret(name) {
                Ok(Some(now)) => {
                    current.insert(name.clone(), now);
                }
                Ok(None) => {}
                Err(why) => {
                    refused.insert(name.clone(), why);
                }
            }
        }
        for (name, why) in &refused {
            if !secrets.refused.contains(name) {
                tracing::warn!(node = self.node_id(), secret = name.as_str(), "{why}");
            }
        }
        let secrets = self.secrets.as_mut().expect("checked above");
        secrets.refused = refused.into_keys().collect();
        let secrets = &**secrets;
        let changed = current
            .iter()
            .any(|(name, now)| secrets.held.get(name) != Some(&now.version));
        let removed: Vec<String> = secrets
            .held
            .keys()
            .filter(|name| !current.contains_key(*name))
            .cloned()
            .collect();
        let message = if incremental {
            if !changed && removed.is_empty() {
                return Ok(());
            }
            let resources = current
                .iter()
                .filter(|(name, now)| secrets.held.get(*name) != Some(&now.version))
                .map(|(name, now)| Resource {
                    name: name.clone(),
                    version: format!("{:016x}", now.version),
                    resource: Some(any(&now.secret)),
                    ..Default::default()
                })
                .collect();
            SecretMessage::Delta(DeltaDiscoveryResponse {
                system_version_info: version_of(&current),
                resources,
                type_url: SECRET_URL.to_string(),
                removed_resources: removed,
                ..Default::default()
            })
        } else {
            // Envoy refuses a response without the secret it waits for:
            // none is sent until one is there.
            if current.is_empty() || !(changed || whole) {
                return Ok(());
            }
            SecretMessage::Sotw(DiscoveryResponse {
                version_info: version_of(&current),
                resources: current.values().map(|now| any(&now.secret)).collect(),
                type_url: SECRET_URL.to_string(),
                ..Default::default()
            })
        };
        let nonce = self.next_nonce();
        let secrets = self.secrets.as_mut().expect("checked above");
        secrets.nonce = nonce;
        secrets.held = current
            .into_iter()
            .map(|(name, now)| (name, now.version))
            .collect();
        let message = match message {
            SecretMessage::Sotw(mut response) => {
                response.nonce = nonce.to_string();
                frame(&response, Vec::new())
            }
            SecretMessage::Delta(mut response) => {
                response.nonce = nonce.to_string();
                frame(&response, Vec::new())
            }
        };
        self.send_raw(message).await
    }

    /// The secret `resource` as this proxy may have it now: `None` when
    /// there is no such credential, why not when the proxy may not read
    /// it.
    fn current_secret(&self, resource: &str) -> Result<Option<Current>, String> {
        if let Some(bundle) = CaBundleName::parse(resource) {
            return self.current_bundle(resource, &bundle);
        }
        // A BackendTLSPolicy's reference to something else than a
        // ConfigMap: nothing can be trusted through it.
        if resource.starts_with(pilot_routing::backend_tls::UNRESOLVED_CA_PREFIX) {
            return Ok(trusts_nothing().map(|pem| validation_context(resource, pem)));
        }
        let Some(source) = self.server().credentials.get() else {
            return Ok(None);
        };
        let configs = self.snapshot().map(|snapshot| &snapshot.rules.configs);
        Ok(credential_secret(&**source, self.proxy(), resource, configs)?.map(Current::of))
    }

    /// The bundle `resource` (`wanted`): the `ca.crt` of each ConfigMap it
    /// names, when every one is there (else [`trusts_nothing`]), each
    /// named by a BackendTLSPolicy.
    fn current_bundle(&self, resource: &str, wanted: &CaBundleName) -> Result<Option<Current>, String> {
        let named = |name: &str| {
            self.snapshot()
                .is_some_and(|snapshot| snapshot.rules.configs.names_ca_bundle(&wanted.namespace, name))
        };
        if let Some(name) = wanted.names.iter().find(|name| !named(name)) {
            return Err(format!(
                "the proxy may not read the ConfigMap {}/{name}: no BackendTLSPolicy there names it",
                wanted.namespace
            ));
        }
        let source = self.server().credentials.get();
        let mut pem = Vec::new();
        for name in &wanted.names {
            let Some(bundle) = source.and_then(|source| source.ca_bundle(&wanted.namespace, name)) else {
                let Some(nothing) = trusts_nothing() else {
                    return Ok(None);
                };
                pem = nothing.to_vec();
                break;
            };
            pem.extend_from_slice(&bundle);
            if !pem.ends_with(b"\n") {
                pem.push(b'\n');
            }
        }
        Ok(Some(validation_context(resource, &pem)))
    }
}

/// The secret `resource` (a certificate and key, or with `-cacert` a
/// certificate authority) as `proxy` may have it from `source`, under the
/// ReferenceGrants of `configs` (the push's): `None` when there is no such
/// credential, why not when the proxy may not read it. What a stream
/// sends, and what generation asks before it serves an edge server
/// terminating TLS with it (`push/certificates.rs`).
pub(crate) fn credential_secret(
    source: &dyn pilot_model::CredentialSource,
    proxy: &pilot_xds::Proxy,
    resource: &str,
    configs: Option<&pilot_routing::RoutingConfigs>,
) -> Result<Option<Secret>, String> {
    let own = crate::push::proxy_namespace(proxy);
    let Some(wanted) = CredentialName::parse(resource, &own) else {
        return Ok(None);
    };
    if !may_read(proxy, &own, &wanted, configs) {
        return Err(format!(
            "the proxy may not read the Secret {}/{}: not its namespace, and no ReferenceGrant there lets \
             Gateways of {own} refer to it",
            wanted.namespace, wanted.name
        ));
    }
    Ok(source
        .get(&wanted.namespace, &wanted.name)
        .and_then(|credential| secret_of(resource, &credential, wanted.ca)))
}

/// Whether `proxy`, of namespace `own`, may read `wanted`: its own
/// namespace's, or (a router) one a ReferenceGrant of `configs` lets its
/// namespace's Gateways refer to.
fn may_read(
    proxy: &pilot_xds::Proxy,
    own: &str,
    wanted: &CredentialName,
    configs: Option<&pilot_routing::RoutingConfigs>,
) -> bool {
    if wanted.namespace == own {
        return true;
    }
    if proxy.proxy_type != pilot_xds::ProxyType::Router {
        return false;
    }
    configs.is_some_and(|configs| configs.grants_secret(own, &wanted.namespace, &wanted.name))
}

impl Current {
    /// `secret`, versioned by a digest of its encoding.
    fn of(secret: Secret) -> Self {
        let mut hasher = DefaultHasher::new();
        secret.encode_to_vec().hash(&mut hasher);
        Current {
            version: hasher.finish(),
            secret,
        }
    }
}

enum SecretMessage {
    Sotw(DiscoveryResponse),
    Delta(DeltaDiscoveryResponse),
}

/// The SDS resource `name` of `credential`: its certificate and key, or
/// (`ca`) its certificate authority, `None` when it has none.
fn secret_of(name: &str, credential: &TlsCredential, ca: bool) -> Option<Secret> {
    let kind = if ca {
        secret::Type::ValidationContext(CertificateValidationContext {
            trusted_ca: Some(inline(credential.ca_certificates.as_deref()?)),
            ..Default::default()
        })
    } else {
        secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(inline(&credential.certificate_chain)),
            private_key: Some(inline(&credential.private_key)),
            ..Default::default()
        })
    };
    Some(Secret {
        name: name.to_string(),
        r#type: Some(kind),
    })
}

/// `bytes` as an inline data source.
/// The secret `resource`: a validation context trusting `pem`.
fn validation_context(resource: &str, pem: &[u8]) -> Current {
    Current::of(Secret {
        name: resource.to_string(),
        r#type: Some(secret::Type::ValidationContext(CertificateValidationContext {
            trusted_ca: Some(inline(pem)),
            ..Default::default()
        })),
    })
}

/// A certificate authority no certificate chains to (its key was dropped
/// once it had signed itself, at the first use in this process), PEM. A
/// bundle that cannot be served (a ConfigMap missing, or holding no
/// certificate; no credential source; a policy's reference to another
/// kind, `unresolved-ca://`) is served as trusting it alone: the
/// proxy fails every handshake that would have trusted the bundle (a 5xx),
/// never skips verification, and does not wait for the bundle before it
/// uses the cluster (Envoy's SDS `initial_fetch_timeout`, 15 s, which held
/// a router's start). When the ConfigMaps come, the bundle is sent in its
/// place. (`None` if it could not be made, which the server's random
/// source failing alone would do: then nothing is sent for the bundle,
/// and the proxy waits for it.)
fn trusts_nothing() -> Option<&'static [u8]> {
    static PEM: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    PEM.get_or_init(|| {
        let made = (|| {
            let key = rcgen::KeyPair::generate()?;
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            params.distinguished_name.push(
                rcgen::DnType::CommonName,
                "pilot: no certificate authority (the bundle cannot be read)",
            );
            Ok::<_, rcgen::Error>(params.self_signed(&key)?.pem())
        })();
        made.map(String::into_bytes)
            .inspect_err(|error| tracing::error!(%error, "cannot make a certificate authority to stand in for missing CA bundles"))
            .ok()
    })
    .as_deref()
}

fn inline(bytes: &[u8]) -> DataSource {
    DataSource {
        specifier: Some(data_source::Specifier::InlineBytes(bytes.to_vec())),
        ..Default::default()
    }
}

fn any(secret: &Secret) -> Any {
    Any {
        type_url: SECRET_URL.to_string(),
        value: secret.encode_to_vec(),
    }
}

/// A response's version: a digest of the versions it says the proxy holds.
fn version_of(current: &BTreeMap<String, Current>) -> String {
    let mut hasher = DefaultHasher::new();
    for (name, now) in current {
        (name, now.version).hash(&mut hasher);
    }
    format!("{:016x}", hasher.finish())
}
