//! A ztunnel's stream: delta xDS of `istio.workload.Address` (WDS) and
//! `istio.security.Authorization` (WADS), as istiod serves them.
//!
//! - Subscriptions: an empty first subscription, or `*`, is the wildcard
//!   (every resource in the ztunnel's scope); names subscribe on demand,
//!   by resource name (a workload's uid, a service's `<ns>/<hostname>`) or
//!   by address (`<network>/<ip>`, answered with the resource that has
//!   it, the address as its alias); a name that exists nowhere is answered
//!   as removed. `resource_names_unsubscribe` takes names (or the
//!   wildcard) back.
//! - Scope: every workload and service (a workload on the node may reach
//!   any of them, by service or pod address); the authorizations of the
//!   root namespace and of the namespaces that have workloads on the
//!   ztunnel's node (ztunnel enforces policy for its node's workloads
//!   only).
//! - Every type subscribed gets a response at once, empty or not: ztunnel
//!   is not ready before. A reconnecting ztunnel names what it holds
//!   (`initial_resource_versions`): it is sent what differs, and the
//!   removal of what no longer exists.
//! - A push sends authorizations before addresses (a workload's policies
//!   before the workload), each only what changed for this ztunnel
//!   (`push/ambient.rs` works out the changes once for every stream),
//!   with `removed_resources` for what went away.
//! - ACKs and NACKs are recorded per type as for Envoys (WDS, WADS in the
//!   proxy's status); a NACKed version is not sent again: a later change
//!   answers.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DeltaDiscoveryResponse};
use futures::FutureExt;
use pilot_xds::Proxy;
use pilot_xds::ambient::AmbientOptions;

use super::transport::{Outgoing, RequestError, Requests, Responses, frame};
use crate::feedback::EndReason;
use crate::push::MeshSnapshot;
use crate::push::ambient::{AmbientResources, Entry, framed_resource};
use crate::state::ServerState;
use crate::xds_type::XdsType;

/// One type's subscription and what the ztunnel holds of it.
#[derive(Default)]
struct Subscription {
    subscribed: bool,
    wildcard: bool,
    /// Names subscribed on demand (resource names or `<network>/<ip>`).
    names: BTreeSet<String>,
    /// The resources the ztunnel was last brought up to date with: of
    /// every name its subscription selected there, it holds that version.
    base: Option<Arc<AmbientResources>>,
    /// Where what it holds differs from `base` (`None`: nothing).
    over: HashMap<Arc<str>, Option<Arc<str>>>,
    /// Names subscribed on demand that nothing answered yet.
    unanswered: BTreeSet<String>,
    /// The latest response's nonce (0: none sent).
    nonce: u64,
    /// The push version of the latest response.
    version: u64,
}

/// A ztunnel's stream state.
struct Ztunnel {
    server: Arc<ServerState>,
    id: u64,
    proxy: Proxy,
    responses: Responses,
    types: [Subscription; 2],
    nonce: u64,
    resources: Option<Arc<AmbientResources>>,
    options: AmbientOptions,
}

/// The stream ended.
struct Gone;

/// Serves a ztunnel's stream, whose first request is `first`, to its end.
pub(super) async fn serve(
    server: Arc<ServerState>,
    id: u64,
    deadline: Option<tokio::time::Instant>,
    proxy: Proxy,
    first: DeltaDiscoveryRequest,
    mut requests: Requests<DeltaDiscoveryRequest>,
    responses: Responses,
) {
    let mut snapshots = server.snapshots.subscribe();
    let mut closing = server.closing.subscribe();
    server.feedback.register(id, proxy.node_id(), true);
    if let Some(node) = &proxy.node_name {
        server.feedback.node(id, node);
    }
    let options = AmbientOptions::default().with_trust_domain(server.options.trust_domain.clone());
    let mut stream = Ztunnel {
        server: Arc::clone(&server),
        id,
        proxy,
        responses,
        types: Default::default(),
        nonce: 0,
        resources: None,
        options,
    };
    let reason = async {
        if *closing.borrow_and_update() {
            return EndReason::ServerClosed;
        }
        let current = snapshots.borrow_and_update().clone();
        if let Some(snapshot) = current {
            stream.take(&snapshot).await;
        }
        if stream.request(first).await.is_err() {
            return EndReason::ResponseDropped;
        }
        let mut deadline = deadline.map(|d| Box::pin(tokio::time::sleep_until(d)));
        loop {
            let expired = async {
                match deadline.as_mut() {
                    Some(deadline) => deadline.as_mut().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = closing.changed() => return EndReason::ServerClosed,
                () = stream.responses.stalled() => return EndReason::WriteTimeout,
                () = expired => {
                    let status = tonic::Status::unavailable("maximum connection age reached: reconnect");
                    let _ = stream.responses.send(Outgoing::End(Box::new(status))).await;
                    return EndReason::MaxAge;
                }
                request = requests.message().map(|r| r.map(|r| r.map(Box::new))) => match request {
                    Ok(Some(request)) => {
                        if stream.request(*request).await.is_err() {
                            return EndReason::ResponseDropped;
                        }
                    }
                    Ok(None) => return EndReason::ProxyClosed,
                    Err(RequestError::Malformed(status)) => {
                        tracing::warn!(node = %stream.proxy.node_id(), reason = status.message(), "bad ADS request");
                        server.refused.count(&status);
                        let _ = stream.responses.send(Outgoing::End(Box::new(status))).await;
                        return EndReason::BadRequest;
                    }
                    Err(RequestError::Transport(status)) => {
                        tracing::info!(node = %stream.proxy.node_id(), reason = status.message(), "ADS stream failed");
                        return EndReason::TransportError;
                    }
                },
                changed = snapshots.changed() => {
                    if changed.is_err() {
                        return EndReason::ServerClosed;
                    }
                    let snapshot = snapshots.borrow_and_update().clone();
                    if let Some(snapshot) = snapshot {
                        stream.take(&snapshot).await;
                        if stream.push().await.is_err() {
                            return EndReason::ResponseDropped;
                        }
                    }
                }
            }
        }
    }
    .await;
    server.feedback.unregister(id, reason);
}

impl Ztunnel {
    /// Takes the resources of `snapshot` (generated once for every
    /// ztunnel).
    async fn take(&mut self, snapshot: &Arc<MeshSnapshot>) {
        self.resources = Some(self.server.ambient.of(snapshot, &self.options).await);
        self.server.feedback.taken(self.id, snapshot.version);
    }

    /// Handles one request: records its ACK or NACK, applies its
    /// subscription changes and answers them.
    async fn request(&mut self, request: DeltaDiscoveryRequest) -> Result<(), Gone> {
        let Some(t) = XdsType::ambient_from_url(&request.type_url) else {
            tracing::debug!(
                type_url = request.type_url,
                "ignoring a ztunnel's request for a type it is not served"
            );
            return Ok(());
        };
        let slot = AmbientResources::slot(t);
        let sub = &mut self.types[slot];
        if !request.response_nonce.is_empty() && request.response_nonce.parse() == Ok(sub.nonce) {
            let feedback = &self.server.feedback;
            match &request.error_detail {
                Some(error) => {
                    tracing::warn!(node = %self.proxy.node_id(), r#type = %t, version = sub.version, message = error.message, "NACK");
                    feedback.nacked(self.id, t, sub.version, &error.message);
                }
                None => feedback.acked(self.id, t, sub.version),
            }
        }
        let first = !sub.subscribed;
        let mut changed = first;
        if first {
            sub.subscribed = true;
            sub.wildcard = request.resource_names_subscribe.is_empty();
            sub.over = request
                .initial_resource_versions
                .iter()
                .map(|(name, version)| (Arc::from(name.as_str()), Some(Arc::from(version.as_str()))))
                .collect();
        }
        for name in &request.resource_names_subscribe {
            if name == "*" {
                changed |= !sub.wildcard;
                sub.wildcard = true;
            } else if sub.names.insert(name.clone()) {
                changed = true;
                sub.unanswered.insert(name.clone());
            }
        }
        for name in &request.resource_names_unsubscribe {
            if name == "*" {
                sub.wildcard = false;
            } else {
                sub.names.remove(name);
                sub.unanswered.remove(name);
            }
            // Let go of by the ztunnel: nothing more to send of it, not
            // even its removal.
            sub.over.insert(Arc::from(name.as_str()), None);
        }
        if changed {
            self.respond(t, first).await?;
        }
        Ok(())
    }

    /// Sends what the current resources changed, authorizations first.
    async fn push(&mut self) -> Result<(), Gone> {
        for t in [XdsType::Authorization, XdsType::Address] {
            if self.types[AmbientResources::slot(t)].subscribed {
                self.respond(t, false).await?;
            }
        }
        Ok(())
    }

    /// Sends `t` if the ztunnel lacks something of the current resources
    /// it subscribes to, or holds something gone; always when `first`.
    async fn respond(&mut self, t: XdsType, first: bool) -> Result<(), Gone> {
        let Some(current) = self.resources.clone() else {
            return Ok(());
        };
        let slot = AmbientResources::slot(t);
        let node = self.proxy.node_name.clone().unwrap_or_default();
        let sub = &mut self.types[slot];
        let entries = &current.types[slot];
        // What the subscription selects of `resources`: its entry, or
        // none.
        let selected = |resources: &AmbientResources, sub: &Subscription, name: &str| -> bool {
            let Some(entry) = resources.types[slot].get(name) else {
                return false;
            };
            if sub.names.contains(name) {
                return true;
            }
            sub.wildcard && in_scope(resources, &node, entry)
        };
        let held = |sub: &Subscription, name: &str| -> Option<Arc<str>> {
            if let Some(over) = sub.over.get(name) {
                return over.clone();
            }
            let base = sub.base.as_ref()?;
            selected(base, sub, name).then(|| Arc::clone(&base.types[slot][name].version))
        };
        let mut resources = Vec::new();
        let mut removed = Vec::new();
        // A wildcard subscriber that holds nothing (a ztunnel at connect)
        // and whose scope is every resource of the type (addresses): all
        // of them, as their shared concatenation, with no pass over the
        // names (11,000 of them per ztunnel in a mesh of 10,000 workloads).
        let everything = sub.wildcard
            && sub.names.is_empty()
            && sub.base.is_none()
            && sub.over.is_empty()
            && entries.values().all(|e| e.namespace.is_none());
        if everything && !entries.is_empty() {
            resources.push(current.whole(slot));
        }
        // The names to look at: what changed between the base and now (or
        // every name, when the base is not the generation just before, or
        // the node's namespaces moved), and the exceptions.
        let mut candidates: BTreeSet<Arc<str>> = sub.over.keys().cloned().collect();
        let incremental = match (&sub.base, &current.since) {
            (Some(base), Some((since, changed)))
                if base.generation == *since && base.namespaces_on(&node) == current.namespaces_on(&node) =>
            {
                candidates.extend(changed[slot].iter().cloned());
                true
            }
            (Some(base), _) if Arc::ptr_eq(base, &current) => true,
            _ => false,
        };
        if !incremental && !everything {
            candidates.extend(entries.keys().cloned());
            if let Some(base) = &sub.base {
                candidates.extend(base.types[slot].keys().cloned());
            }
        }
        for name in &candidates {
            let want = selected(&current, sub, name).then(|| &entries[name]);
            let have = held(sub, name);
            match (want, have) {
                (Some(entry), have) if have.as_deref() != Some(&*entry.version) => {
                    resources.push(entry.framed.clone());
                }
                (None, Some(_)) => removed.push(name.to_string()),
                _ => {}
            }
        }
        // Every resource of the type, in name order (a ztunnel that holds
        // nothing, at connect): the shared concatenation of them, not one
        // part (so one DATA frame) per resource.
        if resources.len() > 1 && resources.len() == entries.len() {
            resources = vec![current.whole(slot)];
        }
        // On-demand names: by address, the resource that has it (with the
        // address as its alias); names that exist nowhere, as removed.
        for name in std::mem::take(&mut sub.unanswered) {
            if entries.contains_key(name.as_str()) {
                continue;
            }
            match current.by_address.get(&name).and_then(|n| entries.get(n)) {
                Some(entry) => resources.push(aliased(t, entry, &name)),
                None => removed.push(name),
            }
        }
        sub.base = Some(Arc::clone(&current));
        sub.over.clear();
        if resources.is_empty() && removed.is_empty() && !first {
            return Ok(());
        }
        self.nonce += 1;
        let nonce = self.nonce;
        let sub = &mut self.types[slot];
        sub.nonce = nonce;
        sub.version = current.version;
        let head = DeltaDiscoveryResponse {
            system_version_info: current.version.to_string(),
            type_url: t.url().to_string(),
            nonce: nonce.to_string(),
            removed_resources: removed,
            ..Default::default()
        };
        self.server.feedback.sent(self.id, t, current.version);
        self.responses
            .send(frame(&head, resources))
            .await
            .map_err(|_| Gone)
    }
}

/// True when a wildcard subscription of a ztunnel on `node` selects
/// `entry`: every address; an authorization of the root namespace, or of
/// a namespace with workloads on the node.
fn in_scope(resources: &AmbientResources, node: &str, entry: &Entry) -> bool {
    match &entry.namespace {
        None => true,
        Some(namespace) => resources
            .namespaces_on(node)
            .is_some_and(|namespaces| namespaces.contains(&**namespace)),
    }
}

/// `entry` as the answer to an on-demand subscription of `alias`.
fn aliased(t: XdsType, entry: &Entry, alias: &str) -> bytes::Bytes {
    framed_resource(t, &entry.name, &entry.version, &entry.value, &[alias.to_string()])
}
