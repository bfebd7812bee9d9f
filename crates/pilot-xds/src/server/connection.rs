//! One state-of-the-world ADS stream.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use tokio::sync::mpsc;

use super::generated::{ORDER, ProxyConfig};
use super::grpc::{Outgoing, frame};
use super::stream::Protocol;
use super::stream::update_status;
use super::{Inner, MeshSnapshot, Nack, TypeStatus};
use crate::Proxy;

type Responses = mpsc::Sender<Outgoing>;

/// A type's subscription and what was last sent for it.
#[derive(Default)]
struct Subscription {
    /// `None`: every resource (wildcard). Shared by the proxies that
    /// subscribe to the same names.
    names: Option<Arc<BTreeSet<String>>>,
    nonce: String,
    digest: Option<u64>,
}

pub(super) struct Connection {
    server: Arc<Inner>,
    id: u64,
    proxy: Proxy,
    responses: Responses,
    subscriptions: BTreeMap<&'static str, Subscription>,
    snapshot: Option<Arc<MeshSnapshot>>,
    generated: Option<ProxyConfig>,
    nonce: u64,
}

impl Protocol for Connection {
    type Request = DiscoveryRequest;
    const INCREMENTAL: bool = false;

    fn node(request: &Self::Request) -> Option<&Node> {
        request.node.as_ref()
    }

    fn names_listeners(request: &Self::Request) -> bool {
        request.type_url == ORDER[2].1 && !request.resource_names.is_empty()
    }

    fn new(server: Arc<Inner>, id: u64, proxy: Proxy, responses: Responses) -> Self {
        Connection {
            server,
            id,
            proxy,
            responses,
            subscriptions: BTreeMap::new(),
            snapshot: None,
            generated: None,
            nonce: 0,
        }
    }

    fn proxy(&self) -> &Proxy {
        &self.proxy
    }

    /// The proxy's configuration for a new snapshot (shared with the other
    /// proxies of its class).
    async fn refresh(&mut self, snapshot: Arc<MeshSnapshot>) {
        let generated = snapshot
            .generated
            .get(&self.proxy, &*self.server.registry, &snapshot.mesh)
            .await;
        self.generated = Some(generated);
        self.snapshot = Some(snapshot);
    }

    /// Handles one request: ACK, NACK or (re)subscription. False when the
    /// stream is gone.
    async fn request(&mut self, request: DiscoveryRequest) -> bool {
        let Some((short, _)) = ORDER.iter().find(|(_, url)| *url == request.type_url) else {
            tracing::debug!(
                type_url = request.type_url,
                "ignoring a request for a type this server does not serve"
            );
            return true;
        };
        let short: &'static str = short;
        let wildcard = request.resource_names.is_empty() && matches!(short, "CDS" | "LDS");
        let subscription = self.subscriptions.entry(short).or_default();
        if !request.response_nonce.is_empty() {
            if request.response_nonce != subscription.nonce {
                // An answer to an older response; the newer one is on its way.
                return true;
            }
            match &request.error_detail {
                Some(error) => {
                    tracing::warn!(node = %self.proxy.node_id(), r#type = short, message = error.message, "NACK");
                    self.server
                        .nacks
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    self.server.rejects.add(short);
                    let version = self.status(short, |s| s.sent.clone()).unwrap_or_default();
                    self.status(short, |s| {
                        s.nack = Some(Nack {
                            version,
                            message: error.message.clone(),
                        })
                    });
                }
                None => {
                    tracing::debug!(node = %self.proxy.node_id(), r#type = short, version = request.version_info, "ACK");
                    self.status(short, |s| s.acked = Some(request.version_info.clone()));
                }
            }
            if same_names(
                &self.subscriptions[short].names,
                wildcard,
                &request.resource_names,
            ) {
                return true;
            }
        }
        let names = (!wildcard).then(|| {
            self.server
                .names
                .intern(request.resource_names.into_iter().collect())
        });
        self.subscriptions.entry(short).or_default().names = names;
        self.send(short, true).await
    }

    /// Sends every subscribed type whose content changed, in push order.
    async fn push(&mut self) -> bool {
        let mut force_eds = false;
        let mut force_rds = false;
        for (short, _) in ORDER {
            if !self.subscriptions.contains_key(short) {
                continue;
            }
            let force = (short == "EDS" && force_eds) || (short == "RDS" && force_rds);
            let before = self.subscriptions[short].digest;
            if !self.send(short, force).await {
                return false;
            }
            let changed = self.subscriptions[short].digest != before;
            force_eds |= short == "CDS" && changed;
            force_rds |= short == "LDS" && changed;
        }
        true
    }
}

impl Connection {
    /// Sends one type if it changed (or always, with `force`).
    async fn send(&mut self, short: &'static str, force: bool) -> bool {
        let Some(snapshot) = &self.snapshot else {
            // Not synced yet: the first push will answer.
            return true;
        };
        let version = snapshot.version.to_string();
        let url = ORDER
            .iter()
            .find(|(s, _)| *s == short)
            .map(|(_, u)| *u)
            .unwrap_or_default();
        let Some(generated) = &self.generated else {
            return true;
        };
        let subscription = self.subscriptions.entry(short).or_default();
        let (digest, resources) = generated.sotw(short, &subscription.names);
        if !force && subscription.digest == Some(digest) {
            return true;
        }
        self.nonce += 1;
        let nonce = self.nonce.to_string();
        subscription.digest = Some(digest);
        subscription.nonce = nonce.clone();
        let head = DiscoveryResponse {
            version_info: version.clone(),
            type_url: url.to_string(),
            nonce,
            ..Default::default()
        };
        self.status(short, |s| s.sent = Some(version));
        let sent = self.responses.send(frame(&head, resources)).await.is_ok();
        if sent {
            self.server.sent.add(short);
        }
        sent
    }

    fn status<T>(&self, short: &'static str, f: impl FnOnce(&mut TypeStatus) -> T) -> T {
        update_status(&self.server, self.id, short, f)
    }
}

/// True when a request names the same resources as the subscription (no
/// allocation: this is every ACK).
fn same_names(current: &Option<Arc<BTreeSet<String>>>, wildcard: bool, requested: &[String]) -> bool {
    match current {
        None => wildcard,
        Some(names) => {
            !wildcard && names.len() == requested.len() && requested.iter().all(|n| names.contains(n))
        }
    }
}
