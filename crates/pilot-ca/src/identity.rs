//! SPIFFE workload identities, `spiffe://<trust-domain>/ns/<ns>/sa/<sa>`,
//! as Istio names a workload by its namespace and service account.

use std::fmt;

use crate::CaError;

/// A workload's identity: the trust domain, namespace and service account.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpiffeId {
    /// The trust domain (`cluster.local` by default, as Istio's).
    pub trust_domain: String,
    /// The workload's namespace.
    pub namespace: String,
    /// The workload's service account.
    pub service_account: String,
}

impl SpiffeId {
    /// The identity of `service_account` in `namespace` of `trust_domain`.
    pub fn new(
        trust_domain: impl Into<String>,
        namespace: impl Into<String>,
        service_account: impl Into<String>,
    ) -> Self {
        SpiffeId {
            trust_domain: trust_domain.into(),
            namespace: namespace.into(),
            service_account: service_account.into(),
        }
    }

    /// Parses `spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>`.
    pub fn parse(uri: &str) -> Result<Self, CaError> {
        let not = || CaError::NotSpiffe { uri: uri.to_string() };
        let rest = uri.strip_prefix("spiffe://").ok_or_else(not)?;
        let (domain, path) = rest.split_once('/').ok_or_else(not)?;
        let parts: Vec<&str> = path.split('/').collect();
        match parts.as_slice() {
            ["ns", ns, "sa", sa] if valid_segment(domain) && valid_segment(ns) && valid_segment(sa) => {
                Ok(SpiffeId::new(domain, *ns, *sa))
            }
            _ => Err(not()),
        }
    }

    /// The URI, `spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>`.
    pub fn uri(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for SpiffeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "spiffe://{}/ns/{}/sa/{}",
            self.trust_domain, self.namespace, self.service_account
        )
    }
}

/// A path segment or domain: not empty, printable ASCII without `/`,
/// whitespace, `?` or `#`.
fn valid_segment(segment: &str) -> bool {
    !segment.is_empty()
        && segment
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'/' | b'?' | b'#' | b'%'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_workload_identities() {
        let id = SpiffeId::parse("spiffe://cluster.local/ns/default/sa/reviews").unwrap();
        assert_eq!(id, SpiffeId::new("cluster.local", "default", "reviews"));
        assert_eq!(id.uri(), "spiffe://cluster.local/ns/default/sa/reviews");
        for bad in [
            "https://cluster.local/ns/default/sa/reviews",
            "spiffe://cluster.local/ns/default",
            "spiffe://cluster.local/ns//sa/reviews",
            "spiffe://cluster.local/ns/default/sa/reviews/extra",
            "spiffe:///ns/default/sa/reviews",
            "spiffe://cluster.local/sa/default/ns/reviews",
        ] {
            let error = SpiffeId::parse(bad).unwrap_err().to_string();
            assert!(error.contains(bad), "{error}");
        }
    }
}
