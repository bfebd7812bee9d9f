//! One incremental (delta) ADS stream: only changed resources are sent,
//! and removed ones are named in `removed_resources`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DeltaDiscoveryResponse};
use tokio::sync::mpsc;

use super::generated::{Entry, ORDER, ProxyConfig};
use super::grpc::{Outgoing, frame};
use super::stream::Protocol;
use super::stream::update_status;
use super::{Inner, MeshSnapshot, Nack};
use crate::Proxy;

type Responses = mpsc::Sender<Outgoing>;

/// A type's subscription and what the client holds.
#[derive(Default)]
struct Subscription {
    wildcard: bool,
    names: BTreeSet<String>,
    /// Version of each resource the client has (from us, or from its
    /// `initial_resource_versions`: `None` when that is not one of ours).
    /// Names sent by us share the generated configuration's string.
    known: HashMap<Arc<str>, Option<u64>>,
    nonce: String,
}

impl Subscription {
    fn wants(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }
}

pub(super) struct DeltaConnection {
    server: Arc<Inner>,
    id: u64,
    proxy: Proxy,
    responses: Responses,
    subscriptions: BTreeMap<&'static str, Subscription>,
    snapshot: Option<Arc<MeshSnapshot>>,
    generated: Option<ProxyConfig>,
    nonce: u64,
}

impl Protocol for DeltaConnection {
    type Request = DeltaDiscoveryRequest;
    const INCREMENTAL: bool = true;

    fn node(request: &Self::Request) -> Option<&Node> {
        request.node.as_ref()
    }

    fn names_listeners(request: &Self::Request) -> bool {
        request.type_url == ORDER[2].1
            && !request.resource_names_subscribe.is_empty()
            && request.resource_names_subscribe.iter().all(|name| name != "*")
    }

    fn new(server: Arc<Inner>, id: u64, proxy: Proxy, responses: Responses) -> Self {
        DeltaConnection {
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

    async fn refresh(&mut self, snapshot: Arc<MeshSnapshot>) {
        let generated = snapshot
            .generated
            .get(&self.proxy, &*self.server.registry, &snapshot.mesh)
            .await;
        self.generated = Some(generated);
        self.snapshot = Some(snapshot);
    }

    async fn request(&mut self, request: DeltaDiscoveryRequest) -> bool {
        let Some((short, _)) = ORDER.iter().find(|(_, url)| *url == request.type_url) else {
            return true;
        };
        let short: &'static str = short;
        let first_for_type = !self.subscriptions.contains_key(short);
        let subscription = self.subscriptions.entry(short).or_default();
        if !request.response_nonce.is_empty() {
            if request.response_nonce != subscription.nonce {
                return true;
            }
            let version = update_status(&self.server, self.id, short, |s| s.sent.clone()).unwrap_or_default();
            match &request.error_detail {
                Some(error) => {
                    tracing::warn!(node = %self.proxy.node_id(), r#type = short, message = error.message, "NACK");
                    self.server
                        .nacks
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    self.server.rejects.add(short);
                    // What was rejected is not held by the client.
                    update_status(&self.server, self.id, short, |s| {
                        s.nack = Some(Nack {
                            version,
                            message: error.message.clone(),
                        })
                    });
                }
                None => {
                    update_status(&self.server, self.id, short, |s| s.acked = Some(version));
                }
            }
        }
        let subscription = self.subscriptions.entry(short).or_default();
        if first_for_type {
            subscription.known = request
                .initial_resource_versions
                .iter()
                .map(|(name, version)| (Arc::from(name.as_str()), u64::from_str_radix(version, 16).ok()))
                .collect();
            // An empty first subscription to CDS or LDS is the wildcard.
            subscription.wildcard =
                request.resource_names_subscribe.is_empty() && matches!(short, "CDS" | "LDS");
        }
        let mut changed = first_for_type;
        for name in &request.resource_names_subscribe {
            if name == "*" {
                changed |= !subscription.wildcard;
                subscription.wildcard = true;
            } else {
                changed |= subscription.names.insert(name.clone());
            }
        }
        for name in &request.resource_names_unsubscribe {
            if name == "*" {
                subscription.wildcard = false;
            }
            subscription.names.remove(name);
            subscription.known.remove(name.as_str());
        }
        if changed {
            self.send(short, &BTreeSet::new()).await
        } else {
            true
        }
    }

    async fn push(&mut self) -> bool {
        let mut stale = BTreeSet::new();
        for (short, _) in ORDER {
            if !self.subscriptions.contains_key(short) {
                continue;
            }
            let force = if short == "EDS" {
                std::mem::take(&mut stale)
            } else {
                BTreeSet::new()
            };
            let sent = self.changes(short);
            if short == "CDS" {
                // A changed cluster warms again and needs its load assignment.
                stale = sent.iter().cloned().collect();
            }
            if !self.send(short, &force).await {
                return false;
            }
        }
        true
    }
}

impl DeltaConnection {
    /// The names whose version differs from what the client holds.
    fn changes(&self, short: &str) -> Vec<String> {
        let (Some(subscription), Some(generated)) = (self.subscriptions.get(short), &self.generated) else {
            return Vec::new();
        };
        generated
            .entries(short)
            .filter(|e| {
                subscription.wants(&e.name) && subscription.known.get(&e.name) != Some(&Some(e.version))
            })
            .map(|e| e.name.to_string())
            .collect()
    }

    /// Sends what changed for one type (plus `force`d names), and the
    /// removals; nothing when there is nothing.
    async fn send(&mut self, short: &'static str, force: &BTreeSet<String>) -> bool {
        let Some(snapshot) = &self.snapshot else {
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
        let present: HashSet<&str> = generated.entries(short).map(|e| &*e.name).collect();
        let removed: Vec<String> = subscription
            .known
            .keys()
            .filter(|name| !present.contains(&***name))
            .map(|name| name.to_string())
            .collect();
        let selected = |e: &Entry| {
            subscription.wants(&e.name)
                && (force.contains(&*e.name) || subscription.known.get(&e.name) != Some(&Some(e.version)))
        };
        let sent: Vec<(Arc<str>, u64)> = generated
            .entries(short)
            .filter(|e| selected(e))
            .map(|e| (Arc::clone(&e.name), e.version))
            .collect();
        if sent.is_empty() && removed.is_empty() && !subscription.nonce.is_empty() {
            return true;
        }
        let resources = generated.delta(short, selected);
        for (name, version) in sent {
            subscription.known.insert(name, Some(version));
        }
        for name in &removed {
            subscription.known.remove(name.as_str());
        }
        self.nonce += 1;
        let nonce = self.nonce.to_string();
        subscription.nonce = nonce.clone();
        update_status(&self.server, self.id, short, |s| s.sent = Some(version.clone()));
        let head = DeltaDiscoveryResponse {
            system_version_info: version,
            type_url: url.to_string(),
            removed_resources: removed,
            nonce,
            ..Default::default()
        };
        let sent = self.responses.send(frame(&head, resources)).await.is_ok();
        if sent {
            self.server.sent.add(short);
        }
        sent
    }
}
