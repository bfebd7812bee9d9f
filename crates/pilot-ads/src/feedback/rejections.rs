//! What each proxy rejected, by object: the objects left out of its
//! configuration so that the other objects' changes keep reaching it.
//!
//! When a proxy NACKs a response, the objects blamed are those the
//! rejected content brought: the objects (at their versions) that the
//! first response of that type it refused since it last ACKed one was
//! generated from, and the response it last ACKed was not
//! (`push/inputs.rs`). Each is recorded here against the proxy's node id
//! with the type and Envoy's message, and a push follows: from then on
//! the proxy's configuration is generated without them (shared with every
//! proxy of its class that left out the same objects), so later changes
//! of other objects in the same resource (another rule on the same port)
//! reach it instead of being refused behind the bad one.
//!
//! - An object is left out at the version rejected: a new version of it
//!   (or its deletion) forgets the entry at the next push, and the new
//!   version is sent (and blamed afresh if it is rejected too).
//! - Nothing can be left out when the NACK blames no object: the proxy
//!   has not ACKed a response of that type on this stream (no baseline to
//!   compare with), or the refused content came from no object change (a
//!   registry change). Then the proxy keeps refusing, as the status shows
//!   (`NACKED`), until the content changes.
//! - The entries belong to the node id, not the stream: they survive a
//!   reconnect. A reconnecting proxy (the same Envoy, its limits
//!   unchanged) would refuse the object again, and, having ACKed nothing
//!   on its new stream, could not be blamed; served without it from its
//!   first response, it gets the rest at once. They live in this
//!   replica's memory: a proxy that reconnects to another replica is sent
//!   the object again there.
//! - At most [`MAX_PER_NODE`] objects per node are left out; the blame
//!   beyond them is not recorded (the proxy keeps refusing).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use pilot_model::WithheldObject;
use tokio::sync::Notify;

use crate::push::{LeftOut, ObjectVersion, PushObjects};
use crate::xds_type::XdsType;

/// At most this many objects left out for one node.
pub(crate) const MAX_PER_NODE: usize = 256;

/// Why an object is left out for a node.
#[derive(Debug, Clone)]
struct Rejected {
    type_: &'static str,
    message: String,
}

/// By node id, the objects a push leaves out of the node's configuration
/// and their records (nodes leaving nothing out are absent).
pub(crate) type LeftOutByNode = HashMap<String, (LeftOut, Vec<WithheldObject>)>;

/// Every node's rejected objects, and a signal for the push pipeline.
#[derive(Default)]
pub(crate) struct Rejections {
    by_node: Mutex<HashMap<String, BTreeMap<ObjectVersion, Rejected>>>,
    recorded: Notify,
}

impl Rejections {
    /// Records that `node` rejected `objects` in a response of `t` saying
    /// `message`; true (and the pipeline is woken to push) when one of
    /// them was not recorded yet.
    pub(crate) fn record(&self, node: &str, objects: Vec<ObjectVersion>, t: XdsType, message: &str) -> bool {
        let mut all = self.by_node.lock().unwrap_or_else(|p| p.into_inner());
        let rejected = all.entry(node.to_string()).or_default();
        let mut added = false;
        for object in objects {
            if rejected.contains_key(&object) {
                continue;
            }
            if rejected.len() >= MAX_PER_NODE {
                tracing::warn!(node, object = ?object, "too many objects left out for this proxy; not leaving out more");
                break;
            }
            tracing::warn!(
                node,
                kind = object.kind,
                namespace = object.namespace,
                name = object.name,
                version = object.resource_version,
                r#type = %t,
                "leaving a rejected object out of the proxy's configuration"
            );
            rejected.insert(
                object,
                Rejected {
                    type_: t.short(),
                    message: message.to_string(),
                },
            );
            added = true;
        }
        drop(all);
        if added {
            self.recorded.notify_one();
        }
        added
    }

    /// What each node's configuration leaves out of a push of `objects`:
    /// the objects it rejected that the push holds at the version
    /// rejected, and the same as its record. Worked out once per push
    /// (one lock), for the streams to read without any.
    pub(crate) fn of_push(&self, objects: &PushObjects) -> LeftOutByNode {
        let all = self.by_node.lock().unwrap_or_else(|p| p.into_inner());
        let mut by_node = HashMap::new();
        for (node, rejected) in all.iter() {
            let mut set = BTreeSet::new();
            let mut records = Vec::new();
            for (object, why) in rejected.iter().filter(|(o, _)| objects.holds(o)) {
                set.insert(object.clone());
                records.push(WithheldObject {
                    kind: object.kind.clone(),
                    namespace: object.namespace.clone(),
                    name: object.name.clone(),
                    resource_version: object.resource_version.clone(),
                    type_: why.type_.to_string(),
                    message: why.message.clone(),
                });
            }
            if !set.is_empty() {
                by_node.insert(node.clone(), (Arc::new(set), records));
            }
        }
        by_node
    }

    /// What `node`'s configuration leaves out of a push of `objects`.
    #[cfg(test)]
    fn left_out(&self, node: &str, objects: &PushObjects) -> (LeftOut, Vec<WithheldObject>) {
        self.of_push(objects).remove(node).unwrap_or_default()
    }

    /// Forgets the objects `objects` no longer holds at the version
    /// rejected (changed or deleted), and the nodes left with none.
    pub(crate) fn forget_stale(&self, objects: &PushObjects) {
        let mut all = self.by_node.lock().unwrap_or_else(|p| p.into_inner());
        if all.is_empty() {
            return;
        }
        all.retain(|_, rejected| {
            rejected.retain(|object, _| objects.holds(object));
            !rejected.is_empty()
        });
    }

    /// Waits until something new is recorded (one wake-up per burst; a
    /// record made while nobody waits is kept for the next wait).
    pub(crate) async fn recorded(&self) {
        self.recorded.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, version: &str) -> ObjectVersion {
        ObjectVersion {
            kind: "RouteRule".into(),
            namespace: "default".into(),
            name: name.into(),
            resource_version: version.into(),
        }
    }

    fn push(objects: &[(&str, &str)]) -> PushObjects {
        let configs = objects
            .iter()
            .map(|(name, version)| {
                let mut meta = pilot_model::ConfigMeta::new("RouteRule", "default", *name);
                meta.resource_version = Some(version.to_string());
                Arc::new(pilot_model::Config {
                    meta,
                    spec: serde_json::Value::Null,
                })
            })
            .collect();
        PushObjects::new(configs)
    }

    #[test]
    fn an_object_is_left_out_at_the_version_rejected_until_it_changes() {
        let rejections = Rejections::default();
        assert!(rejections.record("n", vec![object("bad", "5")], XdsType::Route, "too big"));
        // Again: nothing new.
        assert!(!rejections.record("n", vec![object("bad", "5")], XdsType::Route, "too big"));
        let now = push(&[("bad", "5"), ("good", "6")]);
        let (set, records) = rejections.left_out("n", &now);
        assert_eq!(set.iter().collect::<Vec<_>>(), [&object("bad", "5")]);
        assert_eq!(
            (records[0].name.as_str(), records[0].type_.as_str()),
            ("bad", "RDS")
        );
        assert_eq!(records[0].message, "too big");
        // Another node: nothing.
        assert!(rejections.left_out("m", &now).0.is_empty());
        // A new version is not left out, and the old entry is forgotten.
        let fixed = push(&[("bad", "7"), ("good", "6")]);
        assert!(rejections.left_out("n", &fixed).0.is_empty());
        rejections.forget_stale(&fixed);
        assert!(rejections.left_out("n", &now).0.is_empty());
        // Deleted: forgotten too.
        rejections.record("n", vec![object("good", "6")], XdsType::Route, "x");
        rejections.forget_stale(&push(&[("bad", "7")]));
        assert!(rejections.by_node.lock().unwrap().is_empty());
    }

    #[test]
    fn a_node_leaves_out_a_bounded_number_of_objects() {
        let rejections = Rejections::default();
        let many = (0..MAX_PER_NODE + 10)
            .map(|i| object(&format!("r{i}"), "1"))
            .collect();
        rejections.record("n", many, XdsType::Route, "x");
        assert_eq!(rejections.by_node.lock().unwrap()["n"].len(), MAX_PER_NODE);
    }
}
