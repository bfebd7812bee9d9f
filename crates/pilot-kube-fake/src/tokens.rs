//! Service-account tokens in the fake: issued by a test hook as the
//! TokenRequest API issues them ([`crate::FakeApiServer::issue_token`]),
//! checked by `POST /apis/authentication.k8s.io/v1/tokenreviews` as the
//! API server checks them, and, when the fake requires it
//! ([`crate::FakeApiServer::require_authentication`]), required of every
//! caller as a bearer token.
//!
//! A TokenReview is answered `201 Created` with the review, its `status`
//! filled in as kube-apiserver fills it:
//!
//! - a valid token: `authenticated: true`, `user.username`
//!   `system:serviceaccount:NS:SA`, `user.uid` the service account's uid,
//!   `user.groups` `system:serviceaccounts`, `system:serviceaccounts:NS`,
//!   `system:authenticated`, `user.extra`
//!   `authentication.kubernetes.io/credential-id` `JTI=<the token's jti>`,
//!   and `audiences` the token's audiences that the review asked for (the
//!   API server's own audience when it named none); a token bound to a pod
//!   ([`crate::FakeApiServer::issue_pod_token`], what a pod's projected
//!   token is) also has the pod's and its node's names and uids in
//!   `user.extra` (`authentication.kubernetes.io/pod-name`, `pod-uid`,
//!   `node-name`, `node-uid`, as Kubernetes 1.30 and later write them) and
//!   in its claims (`kubernetes.io.pod`, `kubernetes.io.node`);
//! - otherwise `user: {}` and `error` in the API server's words (its
//!   authenticators' errors joined in brackets): `[invalid bearer token,
//!   service account token has expired]`, `[invalid bearer token, token
//!   audiences ["other"] is invalid for the target audiences
//!   ["istio-ca"]]`, and for a token it never issued (or revoked)
//!   `[invalid bearer token, square/go-jose: error in cryptographic
//!   primitive]`, what a JWT signed by another key gets.
//!
//! A review without `spec.token` is `400 BadRequest` (`token is required
//! for TokenReview in authentication`), any method but POST is 405. While
//! reviews are refused ([`crate::FakeApiServer::refuse_token_reviews`])
//! they are answered `503 ServiceUnavailable`, as an API server that is
//! overloaded or restarting. A caller without a valid token while
//! authentication is required gets the API server's `401 Unauthorized`
//! Status.
//!
//! Tokens are JWT-shaped (`header.claims.signature`, base64url; the claims
//! are the ones Kubernetes puts in a projected token), but the fake
//! recognises only the exact strings it issued: the signature is random.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::state::Failure;

/// The path of the TokenReview collection.
pub(crate) const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

/// The audience of tokens for the API server itself (kube-apiserver's
/// `--api-audiences` default on kubeadm clusters); a TokenRequest without
/// audiences gets it, and a TokenReview without audiences asks for it.
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// The fake's tokens and its TokenReview switches.
#[derive(Default)]
pub(crate) struct Tokens {
    issued: HashMap<String, Issued>,
    /// The uid of each service account a token was issued for, by
    /// (namespace, name).
    accounts: HashMap<(String, String), String>,
    /// The uid of each pod a token was bound to, by (namespace, name).
    pods: HashMap<(String, String), String>,
    /// The uid of each node a token's pod runs on, by name.
    nodes: HashMap<String, String>,
    /// While true, TokenReviews are answered 503.
    pub(crate) reviews_refused: bool,
    /// While true, every request needs a valid bearer token for
    /// [`API_AUDIENCE`].
    pub(crate) authentication_required: bool,
    /// TokenReviews answered (any outcome but 503).
    pub(crate) reviews: u64,
}

/// One issued token's claims.
struct Issued {
    namespace: String,
    account: String,
    audiences: Vec<String>,
    expires: SystemTime,
    /// The claim `jti`.
    jti: String,
    /// The pod (name, uid) and node (name, uid) it is bound to.
    bound: Option<Bound>,
}

/// What a pod's token is bound to.
#[derive(Clone)]
struct Bound {
    pod: (String, String),
    node: (String, String),
}

/// What a token is, or why it is refused (the API server's words).
enum Review<'a> {
    Authenticated {
        issued: &'a Issued,
        audiences: Vec<String>,
    },
    Refused(String),
}

impl Tokens {
    /// Issues a token for `namespace/account`, valid for `audiences`
    /// (the API server's when empty) for `lifetime` from now.
    pub(crate) fn issue(
        &mut self,
        namespace: &str,
        account: &str,
        audiences: &[&str],
        lifetime: Duration,
    ) -> String {
        self.issue_bound(namespace, account, None, audiences, lifetime)
    }

    /// [`Tokens::issue`] for a token bound to `pod` (of `namespace`) on
    /// `node`: a pod's projected token.
    pub(crate) fn issue_for_pod(
        &mut self,
        namespace: &str,
        account: &str,
        (pod, node): (&str, &str),
        audiences: &[&str],
        lifetime: Duration,
    ) -> String {
        let pod_uid = self
            .pods
            .entry((namespace.to_string(), pod.to_string()))
            .or_insert_with(|| uuid(&random::<16>()))
            .clone();
        let node_uid = self
            .nodes
            .entry(node.to_string())
            .or_insert_with(|| uuid(&random::<16>()))
            .clone();
        let bound = Bound {
            pod: (pod.to_string(), pod_uid),
            node: (node.to_string(), node_uid),
        };
        self.issue_bound(namespace, account, Some(bound), audiences, lifetime)
    }

    fn issue_bound(
        &mut self,
        namespace: &str,
        account: &str,
        bound: Option<Bound>,
        audiences: &[&str],
        lifetime: Duration,
    ) -> String {
        let audiences: Vec<String> = if audiences.is_empty() {
            vec![API_AUDIENCE.to_string()]
        } else {
            audiences.iter().map(|a| a.to_string()).collect()
        };
        let now = SystemTime::now();
        let expires = now + lifetime;
        let uid = self
            .accounts
            .entry((namespace.to_string(), account.to_string()))
            .or_insert_with(|| uuid(&random::<16>()))
            .clone();
        let seconds = |at: SystemTime| {
            at.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        };
        let header = json!({"alg": "RS256", "kid": "pilot-kube-fake"});
        let jti = uuid(&random::<16>());
        let mut claims = json!({
            "aud": audiences,
            "exp": seconds(expires),
            "iat": seconds(now),
            "nbf": seconds(now),
            "iss": API_AUDIENCE,
            "jti": jti,
            "kubernetes.io": {
                "namespace": namespace,
                "serviceaccount": {"name": account, "uid": uid},
            },
            "sub": format!("system:serviceaccount:{namespace}:{account}"),
        });
        if let Some(bound) = &bound {
            claims["kubernetes.io"]["pod"] = json!({"name": bound.pod.0, "uid": bound.pod.1});
            claims["kubernetes.io"]["node"] = json!({"name": bound.node.0, "uid": bound.node.1});
        }
        let token = format!(
            "{}.{}.{}",
            base64url(header.to_string().as_bytes()),
            base64url(claims.to_string().as_bytes()),
            base64url(&random::<32>())
        );
        self.issued.insert(
            token.clone(),
            Issued {
                namespace: namespace.to_string(),
                account: account.to_string(),
                audiences,
                expires,
                jti,
                bound,
            },
        );
        token
    }

    /// Forgets `token`: reviews and requests with it fail as with a token
    /// never issued. Whether it was known.
    pub(crate) fn revoke(&mut self, token: &str) -> bool {
        self.issued.remove(token).is_some()
    }

    /// Whether `token` authenticates a caller of the API server itself.
    pub(crate) fn authenticates_caller(&self, token: &str) -> bool {
        matches!(
            self.review(token, &[API_AUDIENCE.to_string()]),
            Review::Authenticated { .. }
        )
    }

    /// Reviews `token` for `wanted` audiences, as the API server's
    /// service-account token authenticator does.
    fn review(&self, token: &str, wanted: &[String]) -> Review<'_> {
        let Some(issued) = self.issued.get(token) else {
            return Review::Refused(
                "[invalid bearer token, square/go-jose: error in cryptographic primitive]".into(),
            );
        };
        if SystemTime::now() >= issued.expires {
            return Review::Refused("[invalid bearer token, service account token has expired]".into());
        }
        let audiences: Vec<String> = issued
            .audiences
            .iter()
            .filter(|a| wanted.contains(a))
            .cloned()
            .collect();
        if audiences.is_empty() {
            return Review::Refused(format!(
                "[invalid bearer token, token audiences {} is invalid for the target audiences {}]",
                go_quoted(&issued.audiences),
                go_quoted(wanted)
            ));
        }
        Review::Authenticated { issued, audiences }
    }

    /// Answers a request to the TokenReview collection: the status code
    /// and the object.
    pub(crate) fn answer(&mut self, method: &http::Method, body: &[u8]) -> Result<(u16, Value), Failure> {
        if method != http::Method::POST {
            return Err(Failure::new(
                405,
                "MethodNotAllowed",
                format!("{method} is not allowed on {TOKEN_REVIEWS}: TokenReview is create-only"),
            ));
        }
        if self.reviews_refused {
            return Err(Failure::new(
                503,
                "ServiceUnavailable",
                "the fake API server refuses TokenReviews for now",
            ));
        }
        let mut review: Value = serde_json::from_slice(body)
            .map_err(|e| Failure::new(400, "BadRequest", format!("the body is not a JSON object: {e}")))?;
        if !review.is_object() {
            return Err(Failure::new(
                400,
                "BadRequest",
                "the body is not a TokenReview object",
            ));
        }
        match (review["apiVersion"].as_str(), review["kind"].as_str()) {
            (Some("authentication.k8s.io/v1"), Some("TokenReview")) => {}
            (version, kind) => {
                return Err(Failure::new(
                    400,
                    "BadRequest",
                    format!(
                        "the body is {}/{}, not authentication.k8s.io/v1, Kind=TokenReview",
                        version.unwrap_or(""),
                        kind.unwrap_or("")
                    ),
                ));
            }
        }
        let token = review["spec"]["token"].as_str().unwrap_or_default().to_string();
        if token.is_empty() {
            return Err(Failure::new(
                400,
                "BadRequest",
                "token is required for TokenReview in authentication",
            ));
        }
        let wanted: Vec<String> = match review["spec"]["audiences"].as_array() {
            Some(list) if !list.is_empty() => list
                .iter()
                .map(|a| a.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .ok_or_else(|| Failure::new(400, "BadRequest", "spec.audiences: expected strings"))?,
            _ => vec![API_AUDIENCE.to_string()],
        };
        self.reviews += 1;
        let status = match self.review(&token, &wanted) {
            Review::Authenticated { issued, audiences } => {
                let uid = self
                    .accounts
                    .get(&(issued.namespace.clone(), issued.account.clone()))
                    .cloned()
                    .unwrap_or_default();
                let mut extra = json!({
                    "authentication.kubernetes.io/credential-id": [format!("JTI={}", issued.jti)],
                });
                if let Some(bound) = &issued.bound {
                    extra["authentication.kubernetes.io/node-name"] = json!([bound.node.0]);
                    extra["authentication.kubernetes.io/node-uid"] = json!([bound.node.1]);
                    extra["authentication.kubernetes.io/pod-name"] = json!([bound.pod.0]);
                    extra["authentication.kubernetes.io/pod-uid"] = json!([bound.pod.1]);
                }
                json!({
                    "authenticated": true,
                    "user": {
                        "username": format!("system:serviceaccount:{}:{}", issued.namespace, issued.account),
                        "uid": uid,
                        "groups": [
                            "system:serviceaccounts",
                            format!("system:serviceaccounts:{}", issued.namespace),
                            "system:authenticated",
                        ],
                        "extra": extra,
                    },
                    "audiences": audiences,
                })
            }
            Review::Refused(error) => json!({"user": {}, "error": error}),
        };
        review["metadata"] = json!({"creationTimestamp": null});
        review["status"] = status;
        Ok((201, review))
    }
}

/// What the token side answers for a request before the resources see
/// it: 401 when authentication is required and the caller has no valid
/// token, the TokenReview collection's answer; `None` for the rest.
pub(crate) fn intercept(
    tokens: &mut Tokens,
    parts: &http::request::Parts,
    body: &[u8],
) -> Option<Result<(u16, Value), Failure>> {
    if tokens.authentication_required
        && !bearer(&parts.headers).is_some_and(|token| tokens.authenticates_caller(token))
    {
        return Some(Err(unauthorized()));
    }
    (parts.uri.path().trim_end_matches('/') == TOKEN_REVIEWS).then(|| tokens.answer(&parts.method, body))
}

/// The `401 Unauthorized` Status the API server answers a caller without
/// a valid credential.
pub(crate) fn unauthorized() -> Failure {
    Failure::new(401, "Unauthorized", "Unauthorized")
}

/// The bearer token of an `Authorization` header.
pub(crate) fn bearer(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// A Go `%q` of a string slice: `["a" "b"]`.
fn go_quoted(list: &[String]) -> String {
    let quoted: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// `N` random bytes.
fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .expect("the system's random source");
    bytes
}

/// A version-4 UUID's text from 16 random bytes.
fn uuid(bytes: &[u8; 16]) -> String {
    let hex: String = bytes
        .iter()
        .enumerate()
        .map(|(i, b)| match i {
            6 => format!("{:02x}", (b & 0x0f) | 0x40),
            8 => format!("{:02x}", (b & 0x3f) | 0x80),
            _ => format!("{b:02x}"),
        })
        .collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Unpadded base64url (RFC 4648 §5), as in a JWT.
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_and_go_quoting_match_their_definitions() {
        assert_eq!(base64url(b""), "");
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(b"foob"), "Zm9vYg");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
        assert_eq!(go_quoted(&["a".into(), "b".into()]), r#"["a" "b"]"#);
        let id = uuid(&[0xff; 16]);
        assert_eq!(id, "ffffffff-ffff-4fff-bfff-ffffffffffff");
    }
}
