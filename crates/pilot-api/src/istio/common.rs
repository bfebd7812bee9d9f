//! Types shared by the routing kinds: service references, match
//! conditions, string matches, and the checks on them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use pilot_model::{FieldErrors, dns1123_label, dns1123_subdomain, push_key};

use crate::primitives::{check_regex, cidr, header_name, uri_text, wildcard_host};

/// A reference to a service, as Istio's v1alpha1 routing API wrote it:
/// either `name` (with optional `namespace` and `domain`) or a fully
/// qualified `service`, plus optional version `labels`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IstioService {
    /// Short service name, a DNS-1123 label (e.g. `reviews`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Namespace of the service, a DNS-1123 label.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Domain suffix (e.g. `svc.cluster.local`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub domain: String,
    /// The fully qualified name instead of name/namespace/domain.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service: String,
    /// Labels that select a subset of instances (e.g. `version: v2`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl IstioService {
    /// The hostname this reference names in an object of `namespace`:
    /// `service` if given, else `name.namespace.domain`, where an empty
    /// namespace is the object's and an empty domain is `domain_suffix`.
    pub fn hostname(&self, namespace: &str, domain_suffix: &str) -> String {
        if !self.service.is_empty() {
            return self.service.clone();
        }
        let namespace = if self.namespace.is_empty() {
            namespace
        } else {
            &self.namespace
        };
        let domain = if self.domain.is_empty() {
            domain_suffix
        } else {
            &self.domain
        };
        format!("{}.{namespace}.{domain}", self.name)
    }

    /// Records every problem with this reference at `path`: exactly one of
    /// `name` or `service`; no namespace or domain beside `service`; DNS
    /// syntax; label syntax.
    pub fn validate(&self, path: &str, errors: &mut FieldErrors) {
        self.check(path, false, errors);
    }

    /// Whether `service` is a wildcard host (`*.foo.com`, `*-bar.foo.com`,
    /// `*`): an external host an egress rule allows, reached at the
    /// connection's original destination.
    pub fn is_wildcard(&self) -> bool {
        self.service.starts_with('*')
    }

    /// The rule's or policy's own destination, which may also be a
    /// wildcard host an egress rule allows ([`wildcard_host`]), as Istio's
    /// routing API accepted; a wildcard has no instances to select by label.
    pub fn validate_destination(&self, path: &str, errors: &mut FieldErrors) {
        self.check(path, true, errors);
        if self.is_wildcard() && !self.labels.is_empty() {
            errors.push(
                format!("{path}.labels"),
                "a wildcard host is reached at the connection's original destination and has no instances to select by label",
            );
        }
    }

    fn check(&self, path: &str, wildcard: bool, errors: &mut FieldErrors) {
        if !self.service.is_empty() {
            if !self.name.is_empty() {
                errors.push(path, "specify either name or service, not both");
            }
            if !self.namespace.is_empty() || !self.domain.is_empty() {
                errors.push(path, "namespace and domain cannot be given with service");
            }
            if wildcard && self.is_wildcard() {
                if let Err(message) = wildcard_host(&self.service) {
                    errors.push(format!("{path}.service"), message);
                }
            } else if let Err(message) = dns1123_subdomain(&self.service) {
                let message = if self.is_wildcard() {
                    format!(
                        "{message}; a wildcard host names no single destination here (only a rule's or policy's own destination may be one)"
                    )
                } else {
                    message
                };
                errors.push(format!("{path}.service"), message);
            }
        } else if self.name.is_empty() {
            errors.push(path, "a service reference needs a name or a service");
        } else {
            if let Err(message) = dns1123_label(&self.name) {
                errors.push(format!("{path}.name"), message);
            }
            if !self.namespace.is_empty()
                && let Err(message) = dns1123_label(&self.namespace)
            {
                errors.push(format!("{path}.namespace"), message);
            }
            if !self.domain.is_empty()
                && let Err(message) = dns1123_subdomain(&self.domain)
            {
                errors.push(format!("{path}.domain"), message);
            }
        }
        errors.check_labels(&format!("{path}.labels"), &self.labels);
    }

    /// Like [`IstioService::validate`], and the reference must not select
    /// instances by label (a rule's own destination names a whole service).
    pub fn validate_without_labels(&self, path: &str, errors: &mut FieldErrors) {
        self.validate(path, errors);
        self.no_labels(path, errors);
    }

    /// Like [`IstioService::validate_destination`], without labels (a route
    /// rule's own destination).
    pub fn validate_destination_without_labels(&self, path: &str, errors: &mut FieldErrors) {
        self.check(path, true, errors);
        self.no_labels(path, errors);
    }

    fn no_labels(&self, path: &str, errors: &mut FieldErrors) {
        if !self.labels.is_empty() {
            errors.push(
                format!("{path}.labels"),
                "a rule's destination names a whole service and cannot have labels; select versions in the route",
            );
        }
    }
}

/// A condition on the traffic a rule applies to.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchCondition {
    /// Only traffic from this service (and these source labels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<IstioService>,
    /// TCP attributes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<L4MatchAttributes>,
    /// UDP attributes (not supported by the data plane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<L4MatchAttributes>,
    /// HTTP request attributes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<MatchRequest>,
}

impl MatchCondition {
    /// Records every problem at `path`.
    pub fn validate(&self, path: &str, errors: &mut FieldErrors) {
        if let Some(source) = &self.source {
            source.validate(&format!("{path}.source"), errors);
        }
        if let Some(tcp) = &self.tcp {
            tcp.validate(&format!("{path}.tcp"), errors);
        }
        if self.udp.is_some() {
            errors.push(format!("{path}.udp"), "UDP matches are not supported");
        }
        if let Some(request) = &self.request {
            request.validate(&format!("{path}.request"), errors);
        }
    }
}

/// Layer-4 match attributes.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct L4MatchAttributes {
    /// Source IPv4/IPv6 addresses or CIDR blocks.
    #[serde(alias = "source_subnet", default, skip_serializing_if = "Vec::is_empty")]
    pub source_subnet: Vec<String>,
    /// Destination IPv4/IPv6 addresses or CIDR blocks.
    #[serde(alias = "destination_subnet", default, skip_serializing_if = "Vec::is_empty")]
    pub destination_subnet: Vec<String>,
}

impl L4MatchAttributes {
    /// Records every subnet that is not an address or CIDR block.
    pub fn validate(&self, path: &str, errors: &mut FieldErrors) {
        for (field, subnets) in [
            ("sourceSubnet", &self.source_subnet),
            ("destinationSubnet", &self.destination_subnet),
        ] {
            for (i, subnet) in subnets.iter().enumerate() {
                if let Err(message) = cidr(subnet) {
                    errors.push(format!("{path}.{field}[{i}]"), message);
                }
            }
        }
    }
}

/// HTTP request match attributes.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchRequest {
    /// Header matches by lowercase header name; `uri`, `scheme`, `method`
    /// and `authority` match the request line.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, StringMatch>,
}

impl MatchRequest {
    /// Records every problem at `path`.
    pub fn validate(&self, path: &str, errors: &mut FieldErrors) {
        for (name, matcher) in &self.headers {
            let mut at = format!("{path}.headers");
            push_key(&mut at, name);
            if let Err(message) = header_name(name) {
                errors.push(at.clone(), message);
            }
            matcher.validate(&at, name == "uri", errors);
        }
    }
}

/// How a string is matched: exactly one of `exact`, `prefix` or `regex`
/// (RE2 syntax, within Envoy's program-size limit: [`check_regex`]).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StringMatch {
    /// Exact value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    /// Prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

impl StringMatch {
    /// Records every problem at `path`: a URI match may not be empty nor
    /// hold control characters; a header prefix may not be empty (Envoy's
    /// `StringMatcher.prefix` has `min_len: 1`); a regex must compile in
    /// Envoy's RE2 within its program-size limit.
    pub fn validate(&self, path: &str, is_uri: bool, errors: &mut FieldErrors) {
        let given: Vec<(&str, &String)> = [
            ("exact", &self.exact),
            ("prefix", &self.prefix),
            ("regex", &self.regex),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k, v)))
        .collect();
        match given.as_slice() {
            [] => errors.push(path, "give one of exact, prefix or regex"),
            [(kind, value)] => {
                let at = format!("{path}.{kind}");
                if value.is_empty() && (is_uri || *kind != "exact") {
                    errors.push(at, "must not be empty");
                } else if *kind == "regex" {
                    if let Err(message) = check_regex(value) {
                        errors.push(
                            at,
                            format!("{value:?} is not a regular expression Envoy accepts: {message}"),
                        );
                    }
                } else if is_uri && let Err(message) = uri_text(value) {
                    errors.push(at, message);
                }
            }
            _ => errors.push(path, "give only one of exact, prefix or regex"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors_of(f: impl FnOnce(&mut FieldErrors)) -> Vec<String> {
        let mut errors = FieldErrors::new();
        f(&mut errors);
        errors.into_iter().map(|e| e.to_string()).collect()
    }

    fn service(name: &str, namespace: &str, domain: &str, fqdn: &str) -> IstioService {
        IstioService {
            name: name.into(),
            namespace: namespace.into(),
            domain: domain.into(),
            service: fqdn.into(),
            labels: BTreeMap::new(),
        }
    }

    #[test]
    fn istio_service_rules() {
        assert!(
            errors_of(|e| service("reviews", "default", "svc.cluster.local", "").validate("d", e)).is_empty()
        );
        assert!(
            errors_of(|e| service("", "", "", "reviews.default.svc.cluster.local").validate("d", e))
                .is_empty()
        );
        assert_eq!(
            errors_of(|e| service("reviews", "", "", "reviews.default").validate("d", e)),
            ["d: specify either name or service, not both"]
        );
        assert_eq!(
            errors_of(|e| service("", "default", "", "reviews.default").validate("d", e)),
            ["d: namespace and domain cannot be given with service"]
        );
        assert_eq!(
            errors_of(|e| service("", "", "", "").validate("d", e)),
            ["d: a service reference needs a name or a service"]
        );
        let bad = errors_of(|e| service("Reviews", "bad_ns", "", "").validate("d", e));
        assert_eq!(bad.len(), 2);
        assert!(
            bad[0].starts_with("d.name: ") && bad[1].starts_with("d.namespace: "),
            "{bad:?}"
        );
        let mut labelled = service("reviews", "", "", "");
        labelled.labels.insert("version".into(), "v2".into());
        assert!(errors_of(|e| labelled.validate("d", e)).is_empty());
        assert_eq!(errors_of(|e| labelled.validate_without_labels("d", e)).len(), 1);
        labelled.labels.insert("bad key!".into(), "x".into());
        assert_eq!(errors_of(|e| labelled.validate("d", e)).len(), 1);
    }

    #[test]
    fn subnets_headers_and_string_matches() {
        for ok in ["10.0.0.0/8", "192.168.1.1", "0.0.0.0/0", "fd00::/8", "::1"] {
            assert!(cidr(ok).is_ok(), "{ok}");
        }
        for bad in [
            "10.0.0.0/33",
            "10.0.0/8",
            "x",
            "10.0.0.0/",
            "10.0.0.0/-1",
            "::/129",
            "",
        ] {
            assert!(cidr(bad).is_err(), "{bad}");
        }
        assert!(header_name("end-user").is_ok());
        assert!(header_name("End-User").is_err());
        assert!(header_name("a b").is_err());
        let uri = StringMatch {
            prefix: Some(String::new()),
            ..Default::default()
        };
        assert_eq!(
            errors_of(|e| uri.validate("m", true, e)),
            ["m.prefix: must not be empty"]
        );
        // Envoy's StringMatcher.prefix has min_len 1 for headers too.
        assert_eq!(
            errors_of(|e| uri.validate("m", false, e)),
            ["m.prefix: must not be empty"]
        );
        let both = StringMatch {
            exact: Some("a".into()),
            regex: Some("b".into()),
            ..Default::default()
        };
        assert_eq!(
            errors_of(|e| both.validate("m", false, e)),
            ["m: give only one of exact, prefix or regex"]
        );
        assert_eq!(
            errors_of(|e| StringMatch::default().validate("m", false, e)),
            ["m: give one of exact, prefix or regex"]
        );
        let mut request = MatchRequest::default();
        request.headers.insert(
            "Cookie".into(),
            StringMatch {
                exact: Some("x".into()),
                ..Default::default()
            },
        );
        assert_eq!(
            errors_of(|e| request.validate("r", e)),
            ["r.headers.Cookie: header name \"Cookie\" must be lowercase"]
        );
    }

    #[test]
    fn match_conditions() {
        let condition = MatchCondition {
            tcp: Some(L4MatchAttributes {
                source_subnet: vec!["10.0.0.0/8".into(), "nope".into()],
                destination_subnet: vec![],
            }),
            udp: Some(L4MatchAttributes::default()),
            ..Default::default()
        };
        let errors = errors_of(|e| condition.validate("spec.match", e));
        assert_eq!(errors.len(), 2);
        assert!(errors[0].starts_with("spec.match.tcp.sourceSubnet[1]: "));
        assert_eq!(errors[1], "spec.match.udp: UDP matches are not supported");
    }
}
