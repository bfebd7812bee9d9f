//! Incremental (delta) ADS: subscriptions change by names added and
//! removed, only resources whose version the proxy lacks are sent, and
//! removed ones are named in `removed_resources`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DeltaDiscoveryResponse};

use super::generated::Entry;
use super::session::{Answer, Gone, Protocol, Resend, Session};
use super::xds_type::XdsType;

/// A type's subscription and what the client holds.
#[derive(Default)]
struct Subscription {
    wildcard: bool,
    names: BTreeSet<String>,
    /// Version of each resource the client has (from us, or from its
    /// `initial_resource_versions`: `None` when that is not one of ours).
    /// Names sent by us share the generated configuration's string.
    known: HashMap<Arc<str>, Option<u64>>,
}

impl Subscription {
    fn wants(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }
}

/// An incremental stream's subscriptions, by type.
pub(super) struct Delta {
    subscriptions: [Option<Subscription>; 4],
}

impl Protocol for Delta {
    type Request = DeltaDiscoveryRequest;
    const INCREMENTAL: bool = true;

    fn new() -> Self {
        Delta {
            subscriptions: Default::default(),
        }
    }

    fn node(request: &DeltaDiscoveryRequest) -> Option<&Node> {
        request.node.as_ref()
    }

    fn header(request: &DeltaDiscoveryRequest) -> (&str, &str, Option<&str>) {
        (
            &request.type_url,
            &request.response_nonce,
            request.error_detail.as_ref().map(|e| e.message.as_str()),
        )
    }

    fn names_listeners(request: &DeltaDiscoveryRequest) -> bool {
        request.type_url == XdsType::Listener.url()
            && !request.resource_names_subscribe.is_empty()
            && request.resource_names_subscribe.iter().all(|name| name != "*")
    }

    fn subscribe(
        &mut self,
        _session: &Session,
        t: XdsType,
        _answer: Answer,
        request: DeltaDiscoveryRequest,
    ) -> Option<Resend> {
        // Subscription changes apply whatever the nonce (they are deltas:
        // one ignored would never come again).
        let slot = &mut self.subscriptions[t.index()];
        let first = slot.is_none();
        let subscription = slot.get_or_insert_with(Subscription::default);
        if first {
            subscription.known = request
                .initial_resource_versions
                .iter()
                .map(|(name, version)| (Arc::from(name.as_str()), u64::from_str_radix(version, 16).ok()))
                .collect();
            // An empty first subscription to CDS or LDS is the wildcard.
            subscription.wildcard = request.resource_names_subscribe.is_empty() && t.wildcard_by_default();
        }
        let mut changed = first;
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
        // New names are answered with what the proxy lacks of them.
        changed.then_some(Resend::Nothing)
    }

    fn subscribed(&self, t: XdsType) -> bool {
        self.subscriptions[t.index()].is_some()
    }

    async fn respond(&mut self, session: &mut Session, t: XdsType, resend: &Resend) -> Result<Resend, Gone> {
        let first = !session.has_sent(t);
        let (Some(subscription), Some(config)) = (&mut self.subscriptions[t.index()], session.config())
        else {
            return Ok(Resend::Nothing);
        };
        let present: HashSet<&str> = config.entries(t.short()).map(|e| &*e.name).collect();
        let removed: Vec<String> = subscription
            .known
            .keys()
            .filter(|name| !present.contains(&***name))
            .map(|name| name.to_string())
            .collect();
        let lacking = |e: &Entry| subscription.known.get(&e.name) != Some(&Some(e.version));
        let forced = |e: &Entry| match resend {
            Resend::Nothing => false,
            Resend::All => true,
            Resend::Names(names) => names.contains(&*e.name),
        };
        let selected = |e: &Entry| subscription.wants(&e.name) && (lacking(e) || forced(e));
        let mut changed = BTreeSet::new();
        let mut sent: Vec<(Arc<str>, u64)> = Vec::new();
        for e in config.entries(t.short()).filter(|e| selected(e)) {
            if lacking(e) {
                changed.insert(e.name.to_string());
            }
            sent.push((Arc::clone(&e.name), e.version));
        }
        // The first response of a type goes out even when empty: the proxy
        // waits for it.
        if sent.is_empty() && removed.is_empty() && !first {
            return Ok(Resend::Nothing);
        }
        let resources = config.delta(t.short(), selected);
        for (name, version) in sent {
            subscription.known.insert(name, Some(version));
        }
        for name in &removed {
            subscription.known.remove(name.as_str());
        }
        session
            .send(t, resources, |system_version_info, nonce| {
                DeltaDiscoveryResponse {
                    system_version_info,
                    type_url: t.url().to_string(),
                    removed_resources: removed,
                    nonce,
                    ..Default::default()
                }
            })
            .await?;
        Ok(Resend::Names(changed))
    }
}
