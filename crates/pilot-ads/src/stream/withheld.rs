//! Removals withheld until nothing the proxy applied refers to them: the
//! break half of make before break (xDS protocol, "Eventual consistency
//! considerations").
//!
//! Clusters are named by route configurations and listeners, load
//! assignments by clusters, route configurations by listeners and scopes.
//! A push sends additions first (CDS, EDS, LDS, SRDS, RDS), so nothing refers to what
//! the proxy lacks; but a removal sent in that order would reach the proxy
//! while the routes it holds still name what was removed (a request routed
//! there fails: Envoy's `no_cluster`, gRPC's "Cluster resource ... does
//! not exist"). So a resource of a referenced type (clusters; for delta,
//! also load assignments and route configurations) that leaves the
//! proxy's configuration is withheld: a state-of-the-world stream keeps
//! sending the last version of the cluster the proxy was sent, a delta
//! stream does not name it in `removed_resources` yet.
//!
//! A removal is released once the proxy has applied (ACKed, or ACKed a
//! later response of) the listener, scope and route configuration responses sent
//! up to the end of the push that removed it: from then on, every listener
//! and route it holds comes from a configuration without the resource.
//! Then the session sends clusters, load assignments and route
//! configurations again, without what was released. Each removal waits
//! for its own push's responses, so changes arriving meanwhile neither
//! lose a removal nor hold it back beyond its own point. A resource that
//! comes back (or that a named subscription lets go of) is no longer
//! withheld. A client that subscribes to clusters by name (gRPC) lets go
//! of one only once its routes no longer use it: until it does, a
//! released cluster is still sent as it was last (a gRPC client fails the
//! calls it is still routing to a cluster the server says does not
//! exist), and its removal is never named. What a reconnecting delta
//! proxy says it holds from elsewhere (`initial_resource_versions`) and
//! the configuration lacks is removed at once: this stream never sent it. A stream withholds at most [`MAX_WITHHELD`] removals per type:
//! beyond that, the oldest are released (a proxy that keeps NACKing its
//! routes while clusters come and go).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::xds_type::XdsType;

/// At most this many removals of one type withheld on a stream.
pub(super) const MAX_WITHHELD: usize = 16_384;

/// A stream's withheld removals, by type.
#[derive(Default)]
pub(super) struct Withheld {
    types: [HashMap<Arc<str>, Removal>; XdsType::ALL.len()],
}

/// One withheld removal: what the proxy still holds of the resource.
#[derive(Debug, Clone)]
pub(super) struct Removal {
    /// Its version as a delta stream sent it (`None`: one the proxy had
    /// from elsewhere).
    pub(super) version: Option<u64>,
    /// Its encoded form as a state-of-the-world response carries it.
    pub(super) encoded: Option<Bytes>,
    state: State,
}

impl Removal {
    /// A removal to withhold: what the proxy holds of it.
    pub(super) fn new(version: Option<u64>, encoded: Option<Bytes>) -> Self {
        Removal {
            version,
            encoded,
            state: State::Pending,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Decided during a push (or an answer) not yet finished.
    Pending,
    /// Waits until the proxy has applied these responses.
    Waiting(Point),
    /// May be sent: the next response of its type leaves it out.
    Released,
}

/// The nonces (as numbers; 0 for none) of the latest listener, scope and
/// route configuration responses sent when a removal was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Point {
    pub(super) listeners: u64,
    pub(super) scopes: u64,
    pub(super) routes: u64,
}

impl Withheld {
    /// True for the types whose removals are withheld by a protocol: the
    /// types other resources refer to, among those where a removal is
    /// something the proxy is told (`omission_removes`: state of the
    /// world removes clusters and listeners by leaving them out; delta
    /// names every removal).
    pub(super) fn applies(t: XdsType, omission_removes: bool) -> bool {
        match t {
            // Nothing names a scope: an HTTP connection manager takes
            // every scope its key builder finds.
            XdsType::Listener | XdsType::ScopedRoute => false,
            XdsType::Cluster => true,
            XdsType::Endpoint | XdsType::Route => !omission_removes,
            // ztunnel's types are not Envoy's: no Envoy resource refers
            // to them (their streams are `ambient.rs`'s).
            XdsType::Address | XdsType::Authorization => false,
        }
    }

    /// Withholds the removal of `name` (of type `t`) unless it is already.
    pub(super) fn withhold(&mut self, t: XdsType, name: Arc<str>, removal: Removal) {
        self.types[t.index()].entry(name).or_insert(removal);
    }

    /// True when the removal of `name` is withheld (not released).
    #[cfg(test)]
    pub(super) fn holds(&self, t: XdsType, name: &str) -> bool {
        self.types[t.index()]
            .get(name)
            .is_some_and(|r| r.state != State::Released)
    }

    /// Forgets `name`'s removal if it was released: true when it was
    /// (the caller now sends the removal).
    pub(super) fn take_released(&mut self, t: XdsType, name: &str) -> bool {
        let map = &mut self.types[t.index()];
        if map.get(name).is_some_and(|r| r.state == State::Released) {
            map.remove(name);
            return true;
        }
        false
    }

    /// Keeps only the removals of `t` that `keep` says are still
    /// removals (not back in the configuration, still subscribed).
    pub(super) fn retain(&mut self, t: XdsType, mut keep: impl FnMut(&str) -> bool) {
        let map = &mut self.types[t.index()];
        if !map.is_empty() {
            map.retain(|name, _| keep(name));
        }
    }

    /// Forgets the released removals of `t` (a state-of-the-world
    /// response that leaves them out is about to be sent).
    pub(super) fn drop_released(&mut self, t: XdsType) {
        self.types[t.index()].retain(|_, r| r.state != State::Released);
    }

    /// The withheld removals of `t`, sorted by name: those not released,
    /// or all of them (`released`).
    pub(super) fn held(&self, t: XdsType, released: bool) -> Vec<(&Arc<str>, &Removal)> {
        let mut held: Vec<_> = self.types[t.index()]
            .iter()
            .filter(|(_, r)| released || r.state != State::Released)
            .collect();
        held.sort_unstable_by(|a, b| a.0.cmp(b.0));
        held
    }

    /// True when nothing is withheld or released of `t`.
    #[cfg(test)]
    pub(super) fn is_empty(&self, t: XdsType) -> bool {
        self.types[t.index()].is_empty()
    }

    /// Gives the removals decided since the last call their point: the
    /// listener and route responses sent by now.
    pub(super) fn seal(&mut self, point: Point) {
        for map in &mut self.types {
            for removal in map.values_mut() {
                if removal.state == State::Pending {
                    removal.state = State::Waiting(point);
                }
            }
        }
    }

    /// Releases the removals whose point the proxy has applied (the
    /// nonces of the latest listener and route responses it ACKed), and
    /// the oldest beyond [`MAX_WITHHELD`]; the types with anything
    /// released.
    pub(super) fn release(&mut self, applied: Point) -> Vec<XdsType> {
        let mut released = Vec::new();
        for t in XdsType::ALL {
            let map = &mut self.types[t.index()];
            let mut any = false;
            for removal in map.values_mut() {
                if let State::Waiting(point) = removal.state
                    && point.listeners <= applied.listeners
                    && point.scopes <= applied.scopes
                    && point.routes <= applied.routes
                {
                    removal.state = State::Released;
                    any = true;
                }
            }
            let waiting = map.values().filter(|r| r.state != State::Released).count();
            if waiting > MAX_WITHHELD {
                let mut points: Vec<(Point, Arc<str>)> = map
                    .iter()
                    .filter_map(|(name, r)| match r.state {
                        State::Waiting(point) => Some((point, Arc::clone(name))),
                        _ => None,
                    })
                    .collect();
                points.sort_unstable();
                for (_, name) in points.into_iter().take(waiting - MAX_WITHHELD) {
                    if let Some(removal) = map.get_mut(&name) {
                        removal.state = State::Released;
                        any = true;
                    }
                }
            }
            if any {
                released.push(t);
            }
        }
        released
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(listeners: u64, routes: u64) -> Point {
        Point {
            listeners,
            scopes: 0,
            routes,
        }
    }

    #[test]
    fn a_removal_is_released_once_both_listeners_and_routes_of_its_push_are_applied() {
        let mut withheld = Withheld::default();
        withheld.withhold(XdsType::Cluster, "a".into(), Removal::new(Some(1), None));
        // Not sealed yet: nothing applied releases it.
        assert!(withheld.release(point(100, 100)).is_empty());
        withheld.seal(point(3, 4));
        // A later removal, in a later push.
        withheld.withhold(XdsType::Cluster, "b".into(), Removal::new(Some(2), None));
        withheld.seal(point(7, 8));
        assert!(withheld.release(point(3, 3)).is_empty(), "routes not applied");
        assert!(withheld.release(point(2, 9)).is_empty(), "listeners not applied");
        assert!(withheld.holds(XdsType::Cluster, "a"));
        assert_eq!(withheld.release(point(3, 4)), [XdsType::Cluster]);
        assert!(!withheld.holds(XdsType::Cluster, "a"));
        assert!(withheld.holds(XdsType::Cluster, "b"), "b waits for its own push");
        assert_eq!(
            withheld
                .held(XdsType::Cluster, false)
                .iter()
                .map(|(n, _)| &***n)
                .collect::<Vec<_>>(),
            ["b"]
        );
        assert!(withheld.take_released(XdsType::Cluster, "a"));
        assert!(!withheld.take_released(XdsType::Cluster, "a"));
        assert!(!withheld.take_released(XdsType::Cluster, "b"));
        // A newer response applied counts for an older point.
        assert_eq!(withheld.release(point(20, 20)), [XdsType::Cluster]);
        withheld.drop_released(XdsType::Cluster);
        assert!(withheld.is_empty(XdsType::Cluster));
    }

    #[test]
    fn a_resource_back_in_the_configuration_is_no_longer_withheld() {
        let mut withheld = Withheld::default();
        for name in ["a", "b"] {
            withheld.withhold(XdsType::Cluster, name.into(), Removal::new(None, None));
        }
        withheld.seal(point(1, 1));
        withheld.retain(XdsType::Cluster, |name| name != "a");
        assert!(!withheld.holds(XdsType::Cluster, "a"));
        assert_eq!(withheld.release(point(1, 1)), [XdsType::Cluster]);
        assert!(!withheld.take_released(XdsType::Cluster, "a"));
        assert!(withheld.take_released(XdsType::Cluster, "b"));
    }

    #[test]
    fn beyond_the_bound_the_oldest_removals_are_released() {
        let mut withheld = Withheld::default();
        for i in 0..MAX_WITHHELD + 2 {
            withheld.withhold(
                XdsType::Endpoint,
                format!("c{i}").into(),
                Removal::new(None, None),
            );
            withheld.seal(point(i as u64 + 1, 0));
        }
        assert_eq!(withheld.release(point(0, 0)), [XdsType::Endpoint]);
        assert!(!withheld.holds(XdsType::Endpoint, "c0"));
        assert!(!withheld.holds(XdsType::Endpoint, "c1"));
        assert!(withheld.holds(XdsType::Endpoint, "c2"));
        assert_eq!(withheld.held(XdsType::Endpoint, false).len(), MAX_WITHHELD);
    }
}
