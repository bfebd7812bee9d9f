//! The identity of a configuration object.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The identity of a configuration object: its kind, namespace and name.
///
/// ```
/// use pilot_model::ConfigKey;
/// let key = ConfigKey::new("RouteRule", "default", "reviews-v2");
/// assert_eq!(key.to_string(), "RouteRule default/reviews-v2");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ConfigKey {
    /// The kind's name, e.g. `RouteRule`.
    pub kind: String,
    /// The namespace, a DNS-1123 label; empty for a cluster-scoped kind's
    /// object ([`KindSchema::cluster_scoped`](crate::KindSchema::cluster_scoped)),
    /// whose key reads `Kind name`.
    pub namespace: String,
    /// The name, a DNS-1123 subdomain.
    pub name: String,
}

impl ConfigKey {
    /// A key from its three parts.
    pub fn new(kind: impl Into<String>, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ConfigKey {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            // A cluster-scoped object's.
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}
