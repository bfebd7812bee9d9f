//! `RequestAuthentication`: which JSON Web Tokens (JWT) a workload's
//! inbound requests may carry, for the mesh (in the root namespace, no
//! selector), a namespace (no selector), selected workloads (`selector`)
//! or the pods of a Kubernetes Gateway (`targetRef`/`targetRefs`), with
//! Istio's validation (`ValidateRequestAuthentication`).
//!
//! A request with a token none of the rules accepts (bad signature,
//! expired, wrong issuer or audience) is refused with 401; a request
//! without a token passes: requiring one is an AuthorizationPolicy's job
//! (`requestPrincipals: ["*"]`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{GROUP, VERSION, WorkloadSelector};
use crate::primitives::{Duration, header_name};
use pilot_model::{ConfigKind, FieldErrors};

/// The JWTs the selected workloads accept.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestAuthentication {
    /// The workloads it applies to; none (and no `targetRef`): every
    /// workload of the namespace (of the mesh, in the root namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<WorkloadSelector>,
    /// The resource it applies to, instead of a selector: a Kubernetes
    /// Gateway (`gateway.networking.k8s.io`) applies it to that gateway's
    /// pods; a Service, ServiceEntry or GatewayClass, which Istio binds
    /// to waypoints only, applies it to no workload here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<PolicyTargetReference>,
    /// Several resources, as `targetRef`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_refs: Vec<PolicyTargetReference>,
    /// The token issuers accepted; a token must satisfy the rule of its
    /// issuer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jwt_rules: Vec<JwtRule>,
}

/// A resource a policy applies to (Istio's
/// `type.v1beta1.PolicyTargetReference`).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyTargetReference {
    /// The API group (empty: the core group).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The kind: `Gateway`, `GatewayClass`, `Service` or `ServiceEntry`.
    #[serde(default)]
    pub kind: String,
    /// The resource's name.
    #[serde(default)]
    pub name: String,
    /// Must be empty: the policy's own namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// The Kubernetes Gateway API group.
pub const GATEWAY_API_GROUP: &str = "gateway.networking.k8s.io";
/// The label the pods of a Kubernetes Gateway carry, its value the
/// Gateway's name: what a `targetRef` to a Gateway selects.
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

/// The kinds a `targetRef` may name, by group (Istio's
/// `allowedTargetRefs`).
const TARGET_KINDS: [(&str, &str); 4] = [
    ("", "Service"),
    ("networking.istio.io", "ServiceEntry"),
    (GATEWAY_API_GROUP, "Gateway"),
    (GATEWAY_API_GROUP, "GatewayClass"),
];

impl PolicyTargetReference {
    /// Whether it names a Kubernetes Gateway.
    pub fn is_gateway(&self) -> bool {
        self.group == GATEWAY_API_GROUP && self.kind == "Gateway"
    }

    fn validate(&self, errors: &mut FieldErrors, path: &str) {
        if self.name.is_empty() {
            errors.push(format!("{path}.name"), "targetRef name must be set");
        }
        if !self.namespace.is_empty() {
            errors.push(
                format!("{path}.namespace"),
                "targetRef namespace must not be set; cross namespace referencing is not supported",
            );
        }
        let group = if self.group == "core" {
            ""
        } else {
            self.group.as_str()
        };
        if !TARGET_KINDS.contains(&(group, self.kind.as_str())) {
            errors.push(
                format!("{path}.kind"),
                format!(
                    "targetRef must be to a Service, networking.istio.io ServiceEntry, or gateway.networking.k8s.io Gateway or GatewayClass, not {:?}/{:?}",
                    self.group, self.kind
                ),
            );
        }
    }
}

/// One token issuer: how its tokens are checked, where they are found,
/// and what is passed on.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JwtRule {
    /// The token's `iss`: a token of this issuer is checked by this rule.
    #[serde(default)]
    pub issuer: String,
    /// The `aud` values accepted (any of them); none: any audience.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audiences: Vec<String>,
    /// Where the issuer's public keys (a JWKS) are fetched from, an
    /// `http` or `https` URL; the proxy fetches it through a cluster pilot
    /// generates.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub jwks_uri: String,
    /// The issuer's public keys inline, a JWKS in JSON (takes precedence
    /// over `jwksUri`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub jwks: String,
    /// Headers the token may be in; none (and no `fromParams` or
    /// `fromCookies`): `Authorization: Bearer <token>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from_headers: Vec<JwtHeader>,
    /// Query parameters the token may be in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from_params: Vec<String>,
    /// Cookies the token may be in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from_cookies: Vec<String>,
    /// A header the checked token's payload (base64url JSON) is passed on
    /// in.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output_payload_to_header: String,
    /// Whether the token itself is passed on to the application (it is
    /// removed otherwise).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forward_original_token: bool,
    /// Claims of the checked token passed on as request headers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_claim_to_headers: Vec<ClaimToHeader>,
    /// Claims whose value is a space-separated string, matched by
    /// `request.auth.claims[...]` as a list of its words (beside `scope`
    /// and `permission`, which always are).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub space_delimited_claims: Vec<String>,
    /// How long fetching `jwksUri` may take (Envoy's default: 5s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
}

/// A header a token is found in.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JwtHeader {
    /// The header's name.
    #[serde(default)]
    pub name: String,
    /// What precedes the token in its value (`Bearer `).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
}

/// A claim passed on as a header.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimToHeader {
    /// The header's name.
    #[serde(default)]
    pub header: String,
    /// The claim's name (a top-level claim of string, number or boolean
    /// value).
    #[serde(default)]
    pub claim: String,
}

/// A `jwksUri`, parsed: scheme, host and port (80 or 443 when not given),
/// and path with query.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JwksUri {
    /// Whether it is `https`.
    pub tls: bool,
    /// The host: a DNS name or an IP address (without brackets).
    pub host: String,
    /// The port.
    pub port: u16,
    /// The path and query (`/` at least).
    pub path: String,
}

impl JwksUri {
    /// Parses an `http://` or `https://` URL with a host, as Istio's
    /// `ParseJwksURI` does.
    ///
    /// ```
    /// use pilot_api::security::JwksUri;
    /// let uri = JwksUri::parse("https://example.com/.well-known/jwks.json").unwrap();
    /// assert_eq!((uri.tls, uri.host.as_str(), uri.port), (true, "example.com", 443));
    /// assert_eq!(JwksUri::parse("http://10.0.0.1:8080").unwrap().path, "/");
    /// assert!(JwksUri::parse("ftp://example.com/keys").is_err());
    /// assert!(JwksUri::parse("https:///keys").is_err());
    /// ```
    pub fn parse(uri: &str) -> Result<Self, String> {
        let bad = |why: &str| Err(format!("jwksUri {uri:?} is not a valid http or https URL: {why}"));
        let (tls, rest) = if let Some(rest) = uri.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = uri.strip_prefix("http://") {
            (false, rest)
        } else {
            return bad("the scheme must be http or https");
        };
        let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        if authority.contains('@') {
            return bad("user information is not allowed");
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let Some((host, after)) = v6.split_once(']') else {
                return bad("an unclosed [ in the host");
            };
            if host.parse::<std::net::Ipv6Addr>().is_err() {
                return bad("not an IPv6 address in [ ]");
            }
            (host, after.strip_prefix(':'))
        } else {
            match authority.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return bad("the host is missing");
        }
        if host.parse::<std::net::IpAddr>().is_err()
            && pilot_model::dns1123_subdomain(&host.to_ascii_lowercase()).is_err()
        {
            return bad("the host is not a DNS name or an IP address");
        }
        let port = match port {
            None | Some("") => {
                if tls {
                    443
                } else {
                    80
                }
            }
            Some(port) => match port.parse::<u16>() {
                Ok(port) if port > 0 => port,
                _ => return bad("the port is not a number in 1..65535"),
            },
        };
        let path = path.split('#').next().unwrap_or_default();
        let path = if path.is_empty() || path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_string()
        };
        Ok(JwksUri {
            tls,
            host: host.to_ascii_lowercase(),
            port,
            path,
        })
    }

    /// Whether the host is an IP address.
    pub fn host_is_ip(&self) -> bool {
        self.host.parse::<std::net::IpAddr>().is_ok()
    }
}

/// Checks that `jwks` is a JSON Web Key Set (RFC 7517) whose keys have
/// the members their type needs, base64url-encoded, or a single key.
///
/// ```
/// use pilot_api::security::check_jwks;
/// assert!(check_jwks(r#"{"keys":[{"kty":"EC","crv":"P-256","x":"AQ","y":"Ag"}]}"#).is_ok());
/// assert!(check_jwks(r#"{"keys":[{"kty":"RSA","e":"AQAB"}]}"#).is_err());
/// assert!(check_jwks("not json").is_err());
/// ```
pub fn check_jwks(jwks: &str) -> Result<(), String> {
    let value: serde_json::Value =
        serde_json::from_str(jwks).map_err(|e| format!("jwks parse error: not JSON: {e}"))?;
    let keys: Vec<&serde_json::Value> = match value.get("keys") {
        Some(serde_json::Value::Array(keys)) => keys.iter().collect(),
        Some(_) => return Err("jwks parse error: `keys` must be a list".into()),
        None if value.get("kty").is_some() => vec![&value],
        None => return Err("jwks parse error: neither a key set (`keys`) nor a key (`kty`)".into()),
    };
    for (index, key) in keys.iter().enumerate() {
        let member = |name: &str| key.get(name).and_then(|v| v.as_str());
        let needs: &[&str] = match member("kty") {
            Some("RSA") => &["n", "e"],
            Some("EC") => &["crv", "x", "y"],
            Some("oct") => &["k"],
            Some("OKP") => &["crv", "x"],
            Some(other) => {
                return Err(format!(
                    "jwks parse error: keys[{index}]: unknown key type {other:?}"
                ));
            }
            None => return Err(format!("jwks parse error: keys[{index}]: `kty` is missing")),
        };
        for name in needs {
            let Some(text) = member(name) else {
                return Err(format!("jwks parse error: keys[{index}]: `{name}` is missing"));
            };
            let base64url = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
            if *name != "crv" && (text.is_empty() || !text.trim_end_matches('=').chars().all(base64url)) {
                return Err(format!(
                    "jwks parse error: keys[{index}]: `{name}` is not base64url"
                ));
            }
        }
    }
    Ok(())
}

impl ConfigKind for RequestAuthentication {
    const KIND: &'static str = "RequestAuthentication";
    const PLURAL: &'static str = "requestauthentications";
    const GROUP: &'static str = GROUP;
    const VERSION: &'static str = VERSION;
    const SERVED_VERSIONS: &'static [&'static str] = &["v1beta1"];
    const SHORT_NAMES: &'static [&'static str] = &["ra"];

    #[cfg(feature = "schema")]
    fn openapi_schema() -> Option<serde_json::Value> {
        Some(crate::primitives::openapi_schema::<Self>())
    }

    fn validate(&self, errors: &mut FieldErrors) {
        let kinds = [
            self.selector.is_some(),
            self.target_ref.is_some(),
            !self.target_refs.is_empty(),
        ];
        if kinds.iter().filter(|set| **set).count() > 1 {
            errors.push("spec", "only one of selector, targetRef or targetRefs can be set");
        }
        if let Some(selector) = &self.selector {
            selector.validate(errors, "spec.selector");
        }
        if let Some(target) = &self.target_ref {
            target.validate(errors, "spec.targetRef");
        }
        for (index, target) in self.target_refs.iter().enumerate() {
            target.validate(errors, &format!("spec.targetRefs[{index}]"));
        }
        for (index, rule) in self.jwt_rules.iter().enumerate() {
            rule.validate(errors, &format!("spec.jwtRules[{index}]"));
        }
    }
}

impl JwtRule {
    fn validate(&self, errors: &mut FieldErrors, path: &str) {
        if self.issuer.is_empty() && self.jwks_uri.is_empty() {
            errors.push(
                format!("{path}.issuer"),
                "issuer or jwksUri must be non-empty string",
            );
        }
        for (index, audience) in self.audiences.iter().enumerate() {
            if audience.is_empty() {
                errors.push(
                    format!("{path}.audiences[{index}]"),
                    "audience must be non-empty string",
                );
            }
        }
        if !self.jwks_uri.is_empty()
            && let Err(message) = JwksUri::parse(&self.jwks_uri)
        {
            errors.push(format!("{path}.jwksUri"), message);
        }
        if !self.jwks.is_empty()
            && let Err(message) = check_jwks(&self.jwks)
        {
            errors.push(format!("{path}.jwks"), message);
        }
        for (index, header) in self.from_headers.iter().enumerate() {
            let at = format!("{path}.fromHeaders[{index}].name");
            if header.name.is_empty() {
                errors.push(at, "location header name must be non-empty string");
            } else if let Err(message) = header_name(&header.name.to_ascii_lowercase()) {
                errors.push(at, message);
            }
        }
        for (index, param) in self.from_params.iter().enumerate() {
            if param.is_empty() {
                errors.push(
                    format!("{path}.fromParams[{index}]"),
                    "location query must be non-empty string",
                );
            }
        }
        for (index, cookie) in self.from_cookies.iter().enumerate() {
            if cookie.is_empty() {
                errors.push(
                    format!("{path}.fromCookies[{index}]"),
                    "cookie name must be non-empty string",
                );
            }
        }
        if !self.output_payload_to_header.is_empty()
            && let Err(message) = header_name(&self.output_payload_to_header.to_ascii_lowercase())
        {
            errors.push(format!("{path}.outputPayloadToHeader"), message);
        }
        for (index, output) in self.output_claim_to_headers.iter().enumerate() {
            let at = format!("{path}.outputClaimToHeaders[{index}]");
            if output.claim.is_empty() || output.header.is_empty() {
                errors.push(
                    at,
                    "outputClaimToHeaders header and claim value must be non-empty string",
                );
                continue;
            }
            if let Err(message) = strict_header_name(&output.header) {
                errors.push(format!("{at}.header"), message);
            }
        }
        for (index, claim) in self.space_delimited_claims.iter().enumerate() {
            if claim.is_empty() {
                errors.push(
                    format!("{path}.spaceDelimitedClaims[{index}]"),
                    "a claim name must be non-empty string",
                );
            }
        }
        if let Some(timeout) = self.timeout {
            timeout.check_millis(&format!("{path}.timeout"), errors);
        }
    }
}

/// A header name as Istio's `ValidateStrictHTTPHeaderName` takes it: an
/// HTTP token, not a pseudo-header.
fn strict_header_name(name: &str) -> Result<(), String> {
    if name.starts_with(':') {
        return Err(format!("header name {name:?} is a pseudo-header"));
    }
    header_name(&name.to_ascii_lowercase())
}

impl RequestAuthentication {
    /// The labels of the workloads it selects, beside its namespace: its
    /// selector's, or a Kubernetes Gateway's pods' for each `targetRef`
    /// to a Gateway; `Some(empty)` for every workload of the namespace
    /// (neither a selector nor a `targetRef`); an empty list when its
    /// targets select no workload here.
    pub fn selected_labels(&self) -> Vec<BTreeMap<String, String>> {
        if let Some(selector) = &self.selector {
            return vec![selector.match_labels.clone()];
        }
        let targets: Vec<&PolicyTargetReference> = self.target_ref.iter().chain(&self.target_refs).collect();
        if targets.is_empty() {
            return vec![BTreeMap::new()];
        }
        targets
            .into_iter()
            .filter(|t| t.is_gateway())
            .map(|t| BTreeMap::from([(GATEWAY_NAME_LABEL.to_string(), t.name.clone())]))
            .collect()
    }
}
