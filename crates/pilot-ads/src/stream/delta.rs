//! Incremental (delta) ADS: subscriptions change by names added and
//! removed, only resources whose version the proxy lacks are sent, and
//! removed ones are named in `removed_resources` (a removal of what
//! other resources refer to once the proxy applied the routes without it:
//! `withheld.rs`).
//!
//! What a stream holds is kept relative to the shared encoding it was
//! last brought up to date with (`base`): the proxy holds that encoding's
//! version of every name it subscribes to, except where `over` says
//! otherwise (its `initial_resource_versions`, names it subscribed to
//! since, its own inbound resources). A push then costs a stream what
//! changed between the two encodings (worked out once for every stream
//! that moves between them, `diffs.rs`) plus its exceptions, not a pass
//! over the mesh; and 2,000 streams subscribed to the same 4,000 load
//! assignments hold one set of names and no per-name versions.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DeltaDiscoveryResponse};

use pilot_xds::Proxy;

use super::secrets::Asked;
use super::session::{Answer, Gone, Protocol, Resend, Session};
use super::transport::{Requests, Responses};
use super::withheld::{Removal, Withheld};
use crate::push::EncodedType;
use crate::state::ServerState;
use crate::xds_type::XdsType;

/// What the proxy holds of one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// Nothing.
    Absent,
    /// This version (`None`: one the proxy had from elsewhere, named in
    /// its `initial_resource_versions`, that is not one of ours).
    Version(Option<u64>),
}

/// A type's subscription and what the client holds.
struct Subscription {
    wildcard: bool,
    /// Shared with the streams that subscribe to the same names.
    names: Arc<BTreeSet<String>>,
    /// The shared encoding the stream was last brought up to date with.
    base: Option<Arc<EncodedType>>,
    /// Where what the proxy holds differs from `base`'s versions of the
    /// names it subscribes to (names sent by us share the generated
    /// configuration's string).
    over: HashMap<Arc<str>, Held>,
}

impl Subscription {
    fn wants(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }

    /// What the proxy holds of `name`.
    fn held(&self, name: &str) -> Held {
        if let Some(held) = self.over.get(name) {
            return *held;
        }
        match &self.base {
            Some(base) if self.wants(name) => base
                .position(name)
                .map_or(Held::Absent, |i| Held::Version(Some(base.entries[i].version))),
            _ => Held::Absent,
        }
    }

    /// Writes what the proxy holds by `base` into `over` and lets `base`
    /// go: before what the subscription selects changes wholesale (the
    /// wildcard is turned on or off).
    fn materialize(&mut self) {
        if let Some(base) = self.base.take() {
            for entry in &base.entries {
                if self.wildcard || self.names.contains(&*entry.name) {
                    self.over
                        .entry(Arc::clone(&entry.name))
                        .or_insert(Held::Version(Some(entry.version)));
                }
            }
        }
    }
}

/// An incremental stream's subscriptions, by type.
pub(super) struct Delta {
    subscriptions: [Option<Subscription>; XdsType::ALL.len()],
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
        session: &Session,
        t: XdsType,
        _answer: Answer,
        request: DeltaDiscoveryRequest,
    ) -> Option<Resend> {
        // Subscription changes apply whatever the nonce (they are deltas:
        // one ignored would never come again).
        let slot = &mut self.subscriptions[t.index()];
        let first = slot.is_none();
        let subscription = slot.get_or_insert_with(|| Subscription {
            // An empty first subscription to CDS or LDS is the wildcard.
            wildcard: request.resource_names_subscribe.is_empty() && t.wildcard_by_default(),
            names: Arc::default(),
            base: None,
            over: request
                .initial_resource_versions
                .iter()
                .map(|(name, version)| {
                    let version = u64::from_str_radix(version, 16).ok();
                    (Arc::from(name.as_str()), Held::Version(version))
                })
                .collect(),
        });
        let mut changed = first;
        // The new set of names: a merge of sorted slices, interned without
        // a `String` per name when another stream holds the same set.
        let mut added: Vec<&str> = Vec::new();
        for name in &request.resource_names_subscribe {
            if name == "*" {
                if !subscription.wildcard {
                    subscription.materialize();
                    subscription.wildcard = true;
                    changed = true;
                }
                continue;
            }
            if !subscription.names.contains(name.as_str()) {
                added.push(name);
                changed = true;
                // (Without a base, whatever `over` does not name is absent.)
                if !subscription.wildcard && subscription.base.is_some() {
                    // Not selected until now: the proxy holds it only if it
                    // said so.
                    subscription
                        .over
                        .entry(Arc::from(name.as_str()))
                        .or_insert(Held::Absent);
                }
            }
        }
        let mut removed: Vec<&str> = Vec::new();
        for name in &request.resource_names_unsubscribe {
            if name == "*" {
                if subscription.wildcard {
                    subscription.materialize();
                    subscription.wildcard = false;
                }
            } else if subscription.names.contains(name.as_str()) {
                removed.push(name);
            }
            // The proxy forgets it.
            subscription.over.insert(Arc::from(name.as_str()), Held::Absent);
        }
        if !added.is_empty() || !removed.is_empty() {
            added.sort_unstable();
            added.dedup();
            removed.sort_unstable();
            removed.dedup();
            let names = merged(&subscription.names, &added, &removed);
            subscription.names = session.server().names.intern_sorted(&names);
        }
        // New names are answered with what the proxy lacks of them.
        changed.then_some(Resend::Nothing)
    }

    fn subscribed(&self, t: XdsType) -> bool {
        self.subscriptions[t.index()].is_some()
    }

    fn secret_names(request: &DeltaDiscoveryRequest) -> Asked {
        Asked::Change {
            subscribe: request.resource_names_subscribe.clone(),
            unsubscribe: request.resource_names_unsubscribe.clone(),
        }
    }

    fn serve_ztunnel(
        server: Arc<ServerState>,
        id: u64,
        deadline: Option<tokio::time::Instant>,
        proxy: Proxy,
        first: DeltaDiscoveryRequest,
        requests: Requests<DeltaDiscoveryRequest>,
        responses: Responses,
    ) -> impl std::future::Future<Output = ()> + Send {
        super::ambient::serve(server, id, deadline, proxy, first, requests, responses)
    }

    async fn respond(&mut self, session: &mut Session, t: XdsType, resend: &Resend) -> Result<Resend, Gone> {
        let first = !session.has_sent(t);
        let (Some(subscription), Some(config)) = (&mut self.subscriptions[t.index()], session.config())
        else {
            return Ok(Resend::Nothing);
        };
        let shared = Arc::clone(&config.shared.types[t.short()]);
        let own = config.own.as_ref().map(|own| Arc::clone(&own.types[t.short()]));
        let present = |name: &str| {
            shared.position(name).is_some() || own.as_ref().is_some_and(|own| own.position(name).is_some())
        };
        // Removals of what other resources refer to wait until the proxy
        // applied routes and listeners without them (`withheld.rs`); one
        // that is back, or no longer subscribed, is no removal.
        let withholds = Withheld::applies(t, false);
        if withholds {
            session
                .withheld
                .retain(t, |name| subscription.wants(name) && !present(name));
        }
        let server = session.server_handle();
        let withheld = &mut session.withheld;
        // A client subscribing to clusters by name lets go of one itself:
        // its removal is never named while it subscribes to it.
        let named = t == XdsType::Cluster && !subscription.wildcard;
        // What a reconnecting proxy holds from elsewhere goes at once (the
        // stream sent it nothing yet).
        let withholds = withholds && subscription.base.is_some();
        let mut remove = |name: &Arc<str>, held: Held, removed: &mut Vec<String>| {
            let Held::Version(version) = held else {
                return;
            };
            if !withholds || (!named && withheld.take_released(t, name)) {
                removed.push(name.to_string());
            } else {
                withheld.withhold(t, Arc::clone(name), Removal::new(version, None));
            }
        };
        let mut plan = Plan {
            // Only a cluster response's changes are followed (by the load
            // assignments re-sent after it).
            changed: (t == XdsType::Cluster).then(BTreeSet::new),
            ..Default::default()
        };
        match &subscription.base {
            // First brought up to date, holding nothing: everything the
            // subscription selects, as every stream with the same names
            // is sent it (worked out once for them all).
            None if subscription.over.is_empty() => {
                let selection = shared.selection((!subscription.wildcard).then_some(&subscription.names));
                let selected = &selection.positions;
                plan.lacking = !selected.is_empty();
                if let Some(changed) = &mut plan.changed {
                    if subscription.wildcard {
                        plan.all_changed = Some(shared.names());
                        plan.changed = None;
                    } else {
                        changed.extend(selected.iter().map(|&i| shared.entries[i].name.to_string()));
                    }
                }
                plan.shared = selected.to_vec();
            }
            // First brought up to date: every resource is looked at.
            None => {
                for i in 0..shared.entries.len() {
                    plan.consider(subscription, resend, &shared, i, false);
                }
            }
            // What changed since `base`, the exceptions and the forced.
            Some(base) => {
                let diff = (!Arc::ptr_eq(base, &shared)).then(|| server.diffs.between(base, &shared));
                let candidates = diff
                    .iter()
                    .flat_map(|diff| diff.names.iter())
                    .chain(subscription.over.keys());
                let mut positions: Vec<usize> = candidates.filter_map(|n| shared.position(n)).collect();
                match resend {
                    Resend::Nothing => {}
                    Resend::All => positions.extend(0..shared.entries.len()),
                    Resend::Names(names) => positions.extend(names.iter().filter_map(|n| shared.position(n))),
                }
                positions.sort_unstable();
                positions.dedup();
                for i in positions {
                    plan.consider(subscription, resend, &shared, i, false);
                }
                // Held by `base` and gone from the push (the exceptions
                // are looked at below).
                for name in diff.iter().flat_map(|diff| diff.gone.iter()) {
                    let in_own = own.as_ref().is_some_and(|own| own.position(name).is_some());
                    if !in_own && !subscription.over.contains_key(name) {
                        remove(name, subscription.held(name), &mut plan.removed);
                    }
                }
            }
        }
        if let Some(own) = &own {
            for i in 0..own.entries.len() {
                plan.consider(subscription, resend, own, i, true);
            }
        }
        // Exceptions for names neither encoding has: gone unless absent
        // already.
        for (name, held) in &subscription.over {
            if !present(name) {
                remove(name, *held, &mut plan.removed);
            }
        }
        // From here the proxy holds, of every name it subscribes to, the
        // push's version (the changes below are sent) or nothing (removed):
        // `shared` is the new base; only its own resources and what it holds
        // without subscribing stay exceptions.
        let wants = |name: &str| subscription.wildcard || subscription.names.contains(name);
        let mut over: HashMap<Arc<str>, Held> = subscription
            .over
            .drain()
            .filter(|(name, held)| *held != Held::Absent && !wants(name) && present(name))
            .collect();
        if let Some(own) = &own {
            for entry in own.entries.iter().filter(|e| wants(&e.name)) {
                over.insert(Arc::clone(&entry.name), Held::Version(Some(entry.version)));
            }
        }
        // What a withheld removal leaves with the proxy.
        for (name, removal) in withheld.held(t, named) {
            over.insert(Arc::clone(name), Held::Version(removal.version));
        }
        subscription.over = over;
        subscription.base = Some(Arc::clone(&shared));
        // The first response of a type goes out even when empty: the proxy
        // waits for it.
        if plan.shared.is_empty() && plan.own.is_empty() && plan.removed.is_empty() && !first {
            return Ok(Resend::Nothing);
        }
        let mut resources = shared.delta_at(&mut plan.shared);
        if let Some(own) = &own {
            resources.extend(own.delta_at(&mut plan.own));
        }
        let removed = plan.removed;
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
        Ok(match (plan.changed, plan.all_changed) {
            (_, Some(names)) => Resend::Names(names),
            (Some(names), None) => Resend::Names(Arc::new(names)),
            (None, None) if plan.lacking => Resend::All,
            (None, None) => Resend::Nothing,
        })
    }
}

/// `names` with `added` (sorted, none of them in `names`) and without
/// `removed` (sorted), sorted.
fn merged<'a>(names: &'a BTreeSet<String>, added: &[&'a str], removed: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::with_capacity(names.len() + added.len());
    let mut kept = names
        .iter()
        .map(String::as_str)
        .filter(|n| removed.binary_search(n).is_err())
        .peekable();
    let mut new = added
        .iter()
        .copied()
        .filter(|n| removed.binary_search(n).is_err())
        .peekable();
    loop {
        let next = match (kept.peek(), new.peek()) {
            (Some(a), Some(b)) if a < b => kept.next(),
            (Some(_), Some(_)) => new.next(),
            (Some(_), None) => kept.next(),
            (None, Some(_)) => new.next(),
            (None, None) => break,
        };
        out.extend(next);
    }
    out
}

/// What one response of an incremental stream carries.
#[derive(Default)]
struct Plan {
    /// Positions in the shared encoding to send.
    shared: Vec<usize>,
    /// Positions in the proxy's own encoding to send.
    own: Vec<usize>,
    removed: Vec<String>,
    /// Names sent because the proxy lacked their version (not only
    /// forced): what the re-sends after a cluster change follow. Kept
    /// only where they are followed.
    changed: Option<BTreeSet<String>>,
    /// Instead of `changed`: every name sent, as a shared set.
    all_changed: Option<Arc<BTreeSet<String>>>,
    /// Whether anything was sent because the proxy lacked it.
    lacking: bool,
}

impl Plan {
    /// Sends entry `i` of `encoded` if the proxy subscribes to it and
    /// lacks its version, or `resend` forces it.
    fn consider(
        &mut self,
        subscription: &Subscription,
        resend: &Resend,
        encoded: &EncodedType,
        i: usize,
        own: bool,
    ) {
        let entry = &encoded.entries[i];
        let forced = match resend {
            Resend::Nothing => false,
            Resend::All => true,
            Resend::Names(names) => names.contains(&*entry.name),
        };
        // A name forced goes even before the proxy subscribes to it (the
        // load assignment of a cluster just sent, which warms waiting for
        // it).
        let wanted = subscription.wants(&entry.name);
        if !wanted && !matches!(resend, Resend::Names(_) if forced) {
            return;
        }
        let lacking = wanted && subscription.held(&entry.name) != Held::Version(Some(entry.version));
        if !(lacking || forced) {
            return;
        }
        if lacking {
            self.lacking = true;
            if let Some(changed) = &mut self.changed {
                changed.insert(entry.name.to_string());
            }
        }
        if own { &mut self.own } else { &mut self.shared }.push(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_names_are_sorted_with_the_added_and_without_the_removed() {
        let names: BTreeSet<String> = ["b", "d", "f"].iter().map(|s| s.to_string()).collect();
        assert_eq!(
            merged(&names, &["a", "c", "g"], &[]),
            ["a", "b", "c", "d", "f", "g"]
        );
        assert_eq!(merged(&names, &["c"], &["b", "c", "x"]), ["d", "f"]);
        assert_eq!(merged(&BTreeSet::new(), &["a", "b"], &[]), ["a", "b"]);
        assert!(merged(&names, &[], &["b", "d", "f"]).is_empty());
    }
}
