//! State-of-the-world ADS: a subscription is a set of names (or every
//! resource). A Listener or Cluster response carries every resource the
//! subscription selects, sent when their digest changed; a load
//! assignment or route configuration response carries only the resources
//! whose version differs from what the stream was last sent, plus newly
//! subscribed names (the client keeps the others: xDS protocol, "Grouping
//! Resources into Responses"), worked out once per push and subscription
//! in `diffs.rs`.

use std::collections::BTreeSet;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;

use super::secrets::Asked;
use super::session::{Answer, Gone, Protocol, Resend, Session};
use super::sotw_request::{EncodedNames, NamesKey, SotwRequest};
use super::transport::{Outgoing, Requests, Responses};
use super::withheld::{Removal, Withheld};
use crate::push::{EncodedType, ProxyConfig};
use crate::state::ServerState;
use crate::xds_type::XdsType;

/// A type's subscription and what was last sent for it.
#[derive(Default)]
struct Subscription {
    /// `None`: every resource (wildcard). Shared by the proxies that
    /// subscribe to the same names.
    names: Option<Arc<BTreeSet<String>>>,
    /// The names as the proxy last listed them (digest and count), so an
    /// ACK listing them again is known without decoding them.
    requested: Option<NamesKey>,
    digest: Option<u64>,
    /// The shared encoding the stream's latest response of the type came
    /// from (for every subscribed name, the stream holds its version
    /// there), shared with the other streams of the push.
    last: Option<Arc<EncodedType>>,
    /// The digest of the proxy's own resources of the type last sent.
    own_digest: Option<u64>,
    /// The proxy's own encoding of the type last sent (kept where a
    /// removal from it is withheld: clusters).
    last_own: Option<Arc<EncodedType>>,
}

/// A state-of-the-world stream's subscriptions, by type.
pub(super) struct Sotw {
    subscriptions: [Option<Subscription>; XdsType::ALL.len()],
}

impl Protocol for Sotw {
    type Request = SotwRequest;
    const INCREMENTAL: bool = false;

    fn new() -> Self {
        Sotw {
            subscriptions: Default::default(),
        }
    }

    fn node(request: &SotwRequest) -> Option<&Node> {
        request.node.as_ref()
    }

    fn header(request: &SotwRequest) -> (&str, &str, Option<&str>) {
        (
            &request.type_url,
            &request.response_nonce,
            request.error_detail.as_ref().map(|e| e.message.as_str()),
        )
    }

    fn names_listeners(request: &SotwRequest) -> bool {
        request.type_url == XdsType::Listener.url() && !request.resource_names.is_empty()
    }

    fn subscribe(
        &mut self,
        session: &Session,
        t: XdsType,
        answer: Answer,
        request: SotwRequest,
    ) -> Option<Resend> {
        let wildcard = request.resource_names.is_empty() && t.wildcard_by_default();
        let subscription = self.subscriptions[t.index()].get_or_insert_with(Subscription::default);
        match answer {
            // A newer response is on its way; the proxy's answer to it will
            // carry its names.
            Answer::Stale => return None,
            // An ACK or NACK naming what it named before: nothing to send
            // (after a NACK, not the rejected thing again).
            Answer::Latest if same_names(subscription, wildcard, &request.resource_names) => {
                return None;
            }
            Answer::Latest | Answer::Initial => {}
        }
        subscription.requested = (!wildcard).then(|| request.resource_names.key());
        let names = (!wildcard).then(|| {
            session
                .server()
                .names
                .intern_sorted(&request.resource_names.sorted())
        });
        // Of a type sent by subset, a stream that has been sent some is
        // sent the names it newly subscribes to (and what changed).
        let resend = match (&subscription.last, &subscription.names, &names) {
            (Some(_), Some(before), Some(after)) if subset(session, t) => {
                Resend::Names(Arc::new(after.difference(before).cloned().collect()))
            }
            // A new subscription is answered even when its digest is
            // unchanged (a reconnecting proxy needs the response).
            _ => Resend::All,
        };
        subscription.names = names;
        Some(resend)
    }

    fn subscribed(&self, t: XdsType) -> bool {
        self.subscriptions[t.index()].is_some()
    }

    fn secret_names(request: &SotwRequest) -> Asked {
        Asked::Names(request.resource_names.decode())
    }

    async fn serve_ztunnel(
        server: Arc<ServerState>,
        _id: u64,
        _deadline: Option<tokio::time::Instant>,
        proxy: pilot_xds::Proxy,
        _first: SotwRequest,
        _requests: Requests<SotwRequest>,
        mut responses: Responses,
    ) {
        let status = tonic::Status::invalid_argument(format!(
            "{} is a ztunnel: ztunnels are served over delta xDS (DeltaAggregatedResources) only",
            proxy.node_id()
        ));
        tracing::warn!(code = ?status.code(), reason = status.message(), "ADS stream refused");
        server.refused.count(&status);
        let _ = responses.send(Outgoing::End(Box::new(status))).await;
    }

    async fn respond(&mut self, session: &mut Session, t: XdsType, resend: &Resend) -> Result<Resend, Gone> {
        let (Some(subscription), Some(config)) =
            (&mut self.subscriptions[t.index()], session.config().cloned())
        else {
            // Not synced yet: the first push will answer.
            return Ok(Resend::Nothing);
        };
        let config = &config;
        let shared = Arc::clone(&config.shared.types[t.short()]);
        let (resources, changed) = match (&subscription.last, resend) {
            (Some(last), Resend::Nothing | Resend::Names(_)) if subset(session, t) => {
                let none = BTreeSet::new();
                let forced = match resend {
                    Resend::Names(names) => &**names,
                    _ => &none,
                };
                let update = session
                    .server()
                    .diffs
                    .update(last, &shared, &subscription.names, forced);
                let mut resources = update.resources.clone();
                let mut count = update.count;
                let own = own_digest(config, t, &subscription.names);
                if own.is_some() && own != subscription.own_digest {
                    let (selected, n) = own_resources(config, t, &subscription.names);
                    resources.extend(selected);
                    count += n;
                }
                subscription.own_digest = own;
                subscription.last = Some(shared);
                if count == 0 {
                    return Ok(Resend::Nothing);
                }
                (resources, Resend::All)
            }
            _ => {
                let (mut digest, mut resources) = config.sotw(t.short(), &subscription.names);
                if Withheld::applies(t, true) {
                    // Clusters the proxy's routes may still name: sent as
                    // last sent until it applied routes without them.
                    withhold_removed(session, subscription, config, t, &shared);
                    // A named subscription lets go of a cluster itself.
                    let named = subscription.names.is_some();
                    if !named {
                        session.withheld.drop_released(t);
                    }
                    let held = session.withheld.held(t, named);
                    if !held.is_empty() {
                        let mut hasher = DefaultHasher::new();
                        digest.hash(&mut hasher);
                        for (name, removal) in held {
                            (name, removal.version).hash(&mut hasher);
                            resources.extend(removal.encoded.clone());
                        }
                        digest = hasher.finish();
                    }
                }
                let changed = subscription.digest != Some(digest);
                if !changed && !resend.any() {
                    return Ok(Resend::Nothing);
                }
                // What changed, by name, for the re-sends that follow
                // (after clusters changed: their load assignments).
                let names =
                    if !changed {
                        Resend::Nothing
                    } else if session.server().options.sotw_changed_only && t == XdsType::Cluster {
                        let mut names = session
                            .server()
                            .diffs
                            .changed_names(subscription.last.as_ref(), &shared);
                        // Of a named subscription, only the names it holds
                        // (their load assignments are sent after it).
                        if let Some(subscribed) = &subscription.names {
                            names = Arc::new(names.intersection(subscribed).cloned().collect());
                        }
                        if own_digest(config, t, &subscription.names) != subscription.own_digest {
                            Arc::make_mut(&mut names).extend(config.own.iter().flat_map(|own| {
                                own.types[t.short()].entries.iter().map(|e| e.name.to_string())
                            }));
                        }
                        Resend::Names(names)
                    } else {
                        // A response carries every selected resource: which
                        // of them changed is not known here.
                        Resend::All
                    };
                subscription.digest = Some(digest);
                subscription.own_digest = own_digest(config, t, &subscription.names);
                subscription.last = Some(shared);
                if Withheld::applies(t, true) {
                    subscription.last_own = config.own.as_ref().map(|own| Arc::clone(&own.types[t.short()]));
                }
                (resources, names)
            }
        };
        session
            .send(t, resources, |version_info, nonce| DiscoveryResponse {
                version_info,
                type_url: t.url().to_string(),
                nonce,
                ..Default::default()
            })
            .await?;
        Ok(changed)
    }
}

/// Withholds the removal of every resource of `t` the stream was last
/// sent, still subscribes to, and the configuration now lacks; forgets
/// the withheld ones that are back or no longer subscribed.
fn withhold_removed(
    session: &mut Session,
    subscription: &Subscription,
    config: &ProxyConfig,
    t: XdsType,
    shared: &Arc<EncodedType>,
) {
    let own = config.own.as_ref().map(|own| &own.types[t.short()]);
    let present =
        |name: &str| shared.position(name).is_some() || own.is_some_and(|own| own.position(name).is_some());
    let wanted = |name: &str| {
        subscription
            .names
            .as_ref()
            .is_none_or(|names| names.contains(name))
    };
    session.withheld.retain(t, |name| wanted(name) && !present(name));
    let mut removed = Vec::new();
    let mut gone_from = |last: &EncodedType, i: usize| {
        let entry = &last.entries[i];
        if wanted(&entry.name) && !present(&entry.name) {
            let removal = Removal::new(Some(entry.version), Some(last.sotw_entry(i)));
            removed.push((Arc::clone(&entry.name), removal));
        }
    };
    if let Some(last) = subscription
        .last
        .as_ref()
        .filter(|last| !Arc::ptr_eq(last, shared))
    {
        let diff = session.server().diffs.between(last, shared);
        for name in &diff.gone {
            if let Some(i) = last.position(name) {
                gone_from(last, i);
            }
        }
    }
    if let Some(last_own) = subscription
        .last_own
        .as_ref()
        .filter(|last_own| own.is_none_or(|own| !Arc::ptr_eq(last_own, own)))
    {
        for i in 0..last_own.entries.len() {
            gone_from(last_own, i);
        }
    }
    for (name, removal) in removed {
        session.withheld.withhold(t, name, removal);
    }
}

/// True when responses of `t` carry only what changed (load assignments
/// and route configurations; Listener and Cluster responses carry every
/// resource).
fn subset(session: &Session, t: XdsType) -> bool {
    !t.wildcard_by_default() && session.server().options.sotw_changed_only
}

/// The digest of the proxy's own resources of `t` that `names` selects
/// (`None` when it has none of the type).
fn own_digest(config: &ProxyConfig, t: XdsType, names: &Option<Arc<BTreeSet<String>>>) -> Option<u64> {
    let own = &config.own.as_ref()?.types[t.short()];
    if own.entries.is_empty() {
        return None;
    }
    Some(own.digest(|name| names.as_ref().is_none_or(|names| names.contains(name))))
}

/// The proxy's own resources of `t` that `names` selects, and how many.
fn own_resources(
    config: &ProxyConfig,
    t: XdsType,
    names: &Option<Arc<BTreeSet<String>>>,
) -> (Vec<bytes::Bytes>, usize) {
    let Some(own) = &config.own else {
        return (Vec::new(), 0);
    };
    let own = &own.types[t.short()];
    let wanted = |name: &str| names.as_ref().is_none_or(|names| names.contains(name));
    let count = own.entries.iter().filter(|e| wanted(&e.name)).count();
    (own.sotw(|e| wanted(&e.name)), count)
}

/// True when a request names the same resources as the subscription.
/// This is every ACK: one that lists the names as the proxy last did
/// (same digest and count) is answered without decoding them; one that
/// lists them otherwise (another order, say) is decoded and compared as a
/// set, and remembered as the way the proxy lists them.
fn same_names(subscription: &mut Subscription, wildcard: bool, requested: &EncodedNames) -> bool {
    let Some(names) = &subscription.names else {
        return wildcard;
    };
    if wildcard {
        return false;
    }
    let key = requested.key();
    if subscription.requested == Some(key) {
        return true;
    }
    let same = names.len() == requested.len() && names.iter().map(String::as_str).eq(requested.sorted());
    if same {
        subscription.requested = Some(key);
    }
    same
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
    use prost::Message;

    use super::*;

    fn names(list: &[&str]) -> EncodedNames {
        let request = DiscoveryRequest {
            resource_names: list.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        };
        <SotwRequest as crate::stream::transport::Request>::decode(
            Bytes::from(request.encode_to_vec()).into(),
        )
        .expect("decodes")
        .resource_names
    }

    fn subscribed(list: &[&str]) -> Subscription {
        let requested = names(list);
        Subscription {
            names: Some(Arc::new(requested.decode())),
            requested: Some(requested.key()),
            ..Default::default()
        }
    }

    #[test]
    fn an_ack_is_the_same_subscription_by_its_names_whatever_their_order() {
        let mut subscription = subscribed(&["a", "b", "c"]);
        assert!(same_names(&mut subscription, false, &names(&["a", "b", "c"])));
        // Another order: the same set, and remembered as the proxy's order.
        assert!(same_names(&mut subscription, false, &names(&["c", "a", "b"])));
        assert_eq!(subscription.requested, Some(names(&["c", "a", "b"]).key()));
        assert!(!same_names(&mut subscription, false, &names(&["a", "b"])));
        assert!(!same_names(&mut subscription, false, &names(&["a", "b", "d"])));
        assert!(!same_names(&mut subscription, false, &names(&["a", "b", "b"])));
        // A wildcard request is another subscription than a named one.
        assert!(!same_names(&mut subscription, true, &names(&[])));
        let mut wildcard = Subscription::default();
        assert!(same_names(&mut wildcard, true, &names(&[])));
        assert!(!same_names(&mut wildcard, false, &names(&["a"])));
    }
}
