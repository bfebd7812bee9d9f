//! SPIFFE workload identities, `spiffe://<trust-domain>/ns/<ns>/sa/<sa>`,
//! as Istio names a workload by its namespace and service account.
//!
//! Every identity follows the SPIFFE ID rules, however it is built
//! ([`SpiffeId::new`], [`SpiffeId::parse`]): the trust domain is made of
//! `[a-z0-9._-]`, each path segment of `[A-Za-z0-9._-]`, no segment is
//! empty, `.` or `..`, and the whole URI is at most
//! [`MAX_SPIFFE_ID_BYTES`] bytes. The fields are private, so an identity
//! that breaks these rules cannot exist.

use std::fmt;

use crate::CaError;

/// The longest SPIFFE ID, in bytes (the SPIFFE specification's limit).
pub const MAX_SPIFFE_ID_BYTES: usize = 2048;

/// The scheme every SPIFFE ID starts with.
const SCHEME: &str = "spiffe://";

/// A workload's identity: the trust domain, namespace and service account.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpiffeId {
    trust_domain: String,
    namespace: String,
    service_account: String,
}

impl SpiffeId {
    /// The identity of `service_account` in `namespace` of `trust_domain`;
    /// refused with the offending part named when one breaks the SPIFFE
    /// rules.
    pub fn new(
        trust_domain: impl Into<String>,
        namespace: impl Into<String>,
        service_account: impl Into<String>,
    ) -> Result<Self, CaError> {
        let id = SpiffeId {
            trust_domain: trust_domain.into(),
            namespace: namespace.into(),
            service_account: service_account.into(),
        };
        id.check()?;
        Ok(id)
    }

    /// Parses `spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>`.
    pub fn parse(uri: &str) -> Result<Self, CaError> {
        let not = || CaError::NotSpiffe { uri: shown(uri) };
        if uri.len() > MAX_SPIFFE_ID_BYTES {
            return Err(invalid(uri, "URI", format!("is {} bytes, over {MAX_SPIFFE_ID_BYTES}", uri.len())));
        }
        let rest = uri.strip_prefix(SCHEME).ok_or_else(not)?;
        let (domain, path) = rest.split_once('/').ok_or_else(not)?;
        let parts: Vec<&str> = path.split('/').collect();
        match parts.as_slice() {
            ["ns", ns, "sa", sa] => {
                let id = SpiffeId {
                    trust_domain: domain.to_string(),
                    namespace: (*ns).to_string(),
                    service_account: (*sa).to_string(),
                };
                id.check()?;
                Ok(id)
            }
            _ => {
                // A segment that breaks the rules is named even when the
                // shape is wrong too.
                check_trust_domain(uri, domain)?;
                for part in &parts {
                    check_segment(uri, "path segment", part)?;
                }
                Err(not())
            }
        }
    }

    /// Checks `segment` as a path segment of a SPIFFE ID (a namespace or
    /// service account): `[A-Za-z0-9._-]`, not empty, `.` or `..`; `field`
    /// names it in the error (`namespace`, `serviceAccount`).
    pub fn check_path_segment(field: &str, segment: &str) -> Result<(), CaError> {
        check_segment(segment, field, segment)
    }

    /// Checks `domain` as a SPIFFE trust domain: `[a-z0-9._-]`, not empty.
    pub fn check_trust_domain(domain: &str) -> Result<(), CaError> {
        check_trust_domain(domain, domain)
    }

    /// The trust domain (`cluster.local` by default, as Istio's).
    pub fn trust_domain(&self) -> &str {
        &self.trust_domain
    }

    /// The workload's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The workload's service account.
    pub fn service_account(&self) -> &str {
        &self.service_account
    }

    /// The URI, `spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>`.
    pub fn uri(&self) -> String {
        self.to_string()
    }

    /// The same namespace and service account in `trust_domain` (a
    /// workload of an aliased trust domain renewing in this one).
    pub fn in_trust_domain(&self, trust_domain: &str) -> Result<Self, CaError> {
        SpiffeId::new(trust_domain, self.namespace.clone(), self.service_account.clone())
    }

    fn check(&self) -> Result<(), CaError> {
        let uri = self.to_string();
        check_trust_domain(&uri, &self.trust_domain)?;
        check_segment(&uri, "namespace", &self.namespace)?;
        check_segment(&uri, "service account", &self.service_account)?;
        if uri.len() > MAX_SPIFFE_ID_BYTES {
            return Err(invalid(&uri, "URI", format!("is {} bytes, over {MAX_SPIFFE_ID_BYTES}", uri.len())));
        }
        Ok(())
    }
}

impl fmt::Display for SpiffeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{SCHEME}{}/ns/{}/sa/{}",
            self.trust_domain, self.namespace, self.service_account
        )
    }
}

fn check_trust_domain(id: &str, domain: &str) -> Result<(), CaError> {
    if domain.is_empty() {
        return Err(invalid(id, "trust domain", "is empty".into()));
    }
    if let Some(bad) = domain
        .chars()
        .find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '.' | '_' | '-'))
    {
        return Err(invalid(
            id,
            "trust domain",
            format!("{} has {bad:?}; a trust domain is made of a-z, 0-9, '.', '_' and '-'", shown(domain)),
        ));
    }
    Ok(())
}

fn check_segment(id: &str, field: &str, segment: &str) -> Result<(), CaError> {
    let reason = match segment {
        "" => "is empty".to_string(),
        "." | ".." => format!("is {segment:?}, a relative path segment"),
        _ => match segment
            .chars()
            .find(|c| !matches!(c, 'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-'))
        {
            Some(bad) => format!(
                "{} has {bad:?}; a path segment is made of A-Z, a-z, 0-9, '.', '_' and '-'",
                shown(segment)
            ),
            None if segment.len() > MAX_SPIFFE_ID_BYTES => {
                format!("is {} bytes, over {MAX_SPIFFE_ID_BYTES}", segment.len())
            }
            None => return Ok(()),
        },
    };
    Err(invalid(id, field, reason))
}

fn invalid(id: &str, part: &str, reason: String) -> CaError {
    CaError::InvalidIdentity {
        id: shown(id),
        part: part.to_string(),
        reason,
    }
}

/// `text` for an error message: whole when short, else its start and its
/// length (an identity may be kilobytes long).
pub(crate) fn shown(text: &str) -> String {
    const SHOWN: usize = 96;
    if text.len() <= SHOWN {
        return text.to_string();
    }
    let mut end = SHOWN;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_workload_identities() {
        let id = SpiffeId::parse("spiffe://cluster.local/ns/default/sa/reviews").unwrap();
        assert_eq!(id, SpiffeId::new("cluster.local", "default", "reviews").unwrap());
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

    #[test]
    fn identities_that_break_the_spiffe_rules_are_refused_naming_the_part() {
        let long = "a".repeat(3000);
        for (domain, namespace, account, expected) in [
            ("cluster.local", "default", "..", "the service account is \"..\", a relative path segment"),
            ("cluster.local", ".", "reviews", "the namespace is \".\", a relative path segment"),
            ("cluster.local", "default", "a;b,c=d\"e", "the service account a;b,c=d\"e has ';'"),
            ("Cluster.Local", "default", "reviews", "the trust domain Cluster.Local has 'C'"),
            ("cluster.local", "default", "", "the service account is empty"),
            ("cluster.local", "def ault", "reviews", "the namespace def ault has ' '"),
            ("cluster.local", "default", long.as_str(), "the service account is 3000 bytes, over 2048"),
        ] {
            let error = SpiffeId::new(domain, namespace, account).unwrap_err();
            assert!(matches!(error, CaError::InvalidIdentity { .. }), "{error}");
            let text = error.to_string();
            assert!(text.contains(expected), "{expected}: {text}");
            assert!(text.len() < 400, "the error stays short: {text}");
        }
        let error = SpiffeId::parse("spiffe://cluster.local/ns/default/sa/..").unwrap_err();
        assert!(error.to_string().contains("relative path segment"), "{error}");
        let error = SpiffeId::parse(&format!("spiffe://cluster.local/ns/default/sa/{long}")).unwrap_err();
        assert!(error.to_string().contains("over 2048"), "{error}");
        // The longest identity allowed is allowed.
        let prefix = "spiffe://cluster.local/ns/default/sa/".len();
        let account = "a".repeat(MAX_SPIFFE_ID_BYTES - prefix);
        assert_eq!(
            SpiffeId::new("cluster.local", "default", account.as_str()).unwrap().uri().len(),
            MAX_SPIFFE_ID_BYTES
        );
        assert!(SpiffeId::new("cluster.local", "default", format!("{account}a")).is_err());
    }
}
