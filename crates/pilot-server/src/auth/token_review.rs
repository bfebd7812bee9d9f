//! Kubernetes service-account tokens as ADS and CA credentials
//! (`--kube-token-review`): a bearer token that is not one of
//! `--token-file`'s is sent to the Kubernetes API in a TokenReview, with
//! the audiences of `--token-audience` (`istio-ca` by default).
//!
//! The token is accepted when the review says it is authenticated, the
//! audiences it returns include one of those asked for, and its user is a
//! service account (`system:serviceaccount:NS:SA`); the caller is then
//! `spiffe://<trust-domain>/ns/NS/sa/SA`, bound as a client certificate of
//! that identity is (node ids of namespace `NS` with `SERVICE_ACCOUNT`
//! `SA`; certificates of that identity only), unless the account is a
//! node proxy's and the token is bound to a node (`node_proxy.rs`). A
//! token the review refuses
//! (expired, unknown, for another audience) is `UNAUTHENTICATED` with the
//! API server's reason. A review that cannot be made (the API unreachable,
//! an error status, no answer within [`REVIEW_TIMEOUT`]) is
//! `UNAVAILABLE` with the reason: an outage never lets a token in, and is
//! never reported as the caller's fault.
//!
//! Accepted tokens are remembered for a short while ([`Reviewed`]), as the
//! API server's own token cache does: until the token's expiry when its
//! claims say it, and at most [`CACHE_TTL`], so a proxy's reconnections
//! and CSRs cost one review a minute. A revoked token is therefore still
//! accepted for up to that long. Refusals are not remembered; at most
//! [`MAX_IN_FLIGHT`] reviews are asked at once, so a flood of made-up
//! tokens does not become a flood of requests to the API server (the
//! others wait, within [`REVIEW_TIMEOUT`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use kube::api::{Api, PostParams};
use pilot_ads::{Caller, NodeScope};

use super::node_proxy::{self, Credential};

/// How long an accepted token is remembered at most.
pub(crate) const CACHE_TTL: Duration = Duration::from_secs(60);

/// How many accepted tokens are remembered at most.
pub(crate) const CACHE_MAX: usize = 10_000;

/// How long a review may take before the call fails `UNAVAILABLE`.
/// (Within `--xds-handshake-timeout`'s default, so a workload learns why
/// before its connection is closed; the client does not retry.)
pub(crate) const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);

/// How many reviews are asked of the API server at once at most.
pub(crate) const MAX_IN_FLIGHT: usize = 32;

/// Reviews bearer tokens with the Kubernetes API.
pub(crate) struct TokenReviewer {
    /// The client, made on first use (and at start, to fail early).
    client: tokio::sync::OnceCell<kube::Client>,
    /// Where an in-cluster client's credentials are.
    service_account_dir: std::path::PathBuf,
    audiences: Vec<String>,
    trust_domain: String,
    /// The node proxies' service accounts (`--ztunnel-service-account`).
    ztunnel_accounts: Vec<(String, String)>,
    reviewed: Mutex<Reviewed>,
    in_flight: tokio::sync::Semaphore,
}

impl TokenReviewer {
    /// The reviewer `--kube-token-review` configures: asking for the
    /// `--token-audience`s, naming callers in `--trust-domain`.
    pub(crate) fn from_args(args: &crate::args::Args) -> Result<Option<Self>, String> {
        if !args.kube_token_review {
            return Ok(None);
        }
        let mut reviewer = Self::new(args.token_audiences.clone(), args.trust_domain.clone())?;
        reviewer.service_account_dir = args.kube_service_account_dir.clone();
        reviewer.ztunnel_accounts = node_proxy::ztunnel_accounts(&args.ztunnel_service_accounts)?;
        Ok(Some(reviewer))
    }

    /// A reviewer asking for `audiences`, naming callers in
    /// `trust_domain`.
    fn new(audiences: Vec<String>, trust_domain: String) -> Result<Self, String> {
        if audiences.is_empty() || audiences.iter().any(String::is_empty) {
            return Err("--token-audience: an audience cannot be empty".into());
        }
        Ok(TokenReviewer {
            client: tokio::sync::OnceCell::new(),
            service_account_dir: std::path::PathBuf::new(),
            audiences,
            trust_domain,
            ztunnel_accounts: vec![("istio-system".into(), "ztunnel".into())],
            reviewed: Mutex::new(Reviewed::default()),
            in_flight: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
        })
    }

    /// The Kubernetes client, made the first time (without retries: a
    /// review answers within [`REVIEW_TIMEOUT`] or fails).
    pub(crate) async fn client(&self) -> Result<&kube::Client, String> {
        self.client
            .get_or_try_init(|| async {
                crate::backend::kube_client_without_retries(&self.service_account_dir)
                    .await
                    .map_err(|e| format!("--kube-token-review: {e}"))
            })
            .await
    }

    /// The caller `token` authenticates, or why not.
    pub(crate) async fn authenticate(&self, token: &str) -> Result<Credential, tonic::Status> {
        let key = digest(token);
        if let Some(caller) = self.lock().get(&key, Instant::now()) {
            return Ok(caller);
        }
        let status = match tokio::time::timeout(REVIEW_TIMEOUT, self.review(token)).await {
            Ok(result) => result?,
            Err(_) => {
                return Err(tonic::Status::unavailable(format!(
                    "the Kubernetes TokenReview of the bearer token did not answer within {}s; try again",
                    REVIEW_TIMEOUT.as_secs()
                )));
            }
        };
        let caller = self.caller(&status)?;
        let ttl = expiry(token)
            .and_then(|at| at.duration_since(SystemTime::now()).ok())
            .map_or(CACHE_TTL, |left| left.min(CACHE_TTL));
        self.lock().insert(key, caller.clone(), Instant::now() + ttl);
        Ok(caller)
    }

    /// Asks the API server about `token`.
    async fn review(&self, token: &str) -> Result<TokenReviewStatus, tonic::Status> {
        let client = self.client().await.map_err(tonic::Status::unavailable)?;
        // Never closed: the permit comes, or the caller's timeout does.
        let _permit = self
            .in_flight
            .acquire()
            .await
            .map_err(|_| tonic::Status::unavailable("the TokenReview queue is closed"))?;
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: Some(self.audiences.clone()),
            },
            ..Default::default()
        };
        let answer = Api::<TokenReview>::all(client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| {
                tonic::Status::unavailable(format!(
                    "the Kubernetes TokenReview of the bearer token failed ({}); try again",
                    describe(&e)
                ))
            })?;
        answer.status.ok_or_else(|| {
            tonic::Status::unavailable(
                "the Kubernetes TokenReview of the bearer token came back without a status",
            )
        })
    }

    /// The caller a review's `status` names, or why it is refused.
    fn caller(&self, status: &TokenReviewStatus) -> Result<Credential, tonic::Status> {
        if status.authenticated != Some(true) {
            return Err(tonic::Status::unauthenticated(format!(
                "the bearer token is not valid: Kubernetes says {}",
                status.error.as_deref().unwrap_or("it is not authenticated")
            )));
        }
        let returned = status.audiences.as_deref().unwrap_or_default();
        if !returned.iter().any(|a| self.audiences.contains(a)) {
            return Err(tonic::Status::unauthenticated(format!(
                "the Kubernetes token is for audiences {returned:?}, not one of {:?} (--token-audience)",
                self.audiences
            )));
        }
        let username = status
            .user
            .as_ref()
            .and_then(|u| u.username.as_deref())
            .unwrap_or_default();
        let (namespace, account) = username
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            .ok_or_else(|| {
                tonic::Status::unauthenticated(format!(
                    "the Kubernetes token is {username:?}'s, not a service account's \
                     (system:serviceaccount:NAMESPACE:NAME)"
                ))
            })?;
        let identity =
            pilot_ca::SpiffeId::new(self.trust_domain.clone(), namespace, account).map_err(|e| {
                tonic::Status::unauthenticated(format!("the service account of the Kubernetes token: {e}"))
            })?;
        let own = (namespace.to_string(), account.to_string());
        let node = self
            .ztunnel_accounts
            .contains(&own)
            .then(|| node_proxy::bound_node(status.user.as_ref().and_then(|u| u.extra.as_ref())))
            .flatten();
        let scope = match node {
            Some(node) => NodeScope::Node(node.to_string()),
            None => NodeScope::ServiceAccount {
                namespace: own.0.clone(),
                account: own.1.clone(),
            },
        };
        Ok(Credential {
            caller: Caller {
                name: identity.uri(),
                scope,
            },
            identity: Some(own),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Reviewed> {
        self.reviewed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Accepted tokens (by digest) and until when, at most [`CACHE_MAX`].
#[derive(Default)]
pub(crate) struct Reviewed(HashMap<[u8; 32], (Credential, Instant)>);

impl Reviewed {
    /// The caller of a token accepted before and not yet due again.
    fn get(&mut self, key: &[u8; 32], now: Instant) -> Option<Credential> {
        match self.0.get(key) {
            Some((caller, until)) if *until > now => Some(caller.clone()),
            Some(_) => {
                self.0.remove(key);
                None
            }
            None => None,
        }
    }

    /// Remembers an accepted token until `until`; when full, the entries
    /// past due go first, and if none is, nothing more is remembered.
    fn insert(&mut self, key: [u8; 32], caller: Credential, until: Instant) {
        if self.0.len() >= CACHE_MAX {
            let now = Instant::now();
            self.0.retain(|_, (_, due)| *due > now);
            if self.0.len() >= CACHE_MAX {
                return;
            }
        }
        self.0.insert(key, (caller, until));
    }
}

/// A token's SHA-256: the cache keeps no token itself.
fn digest(token: &str) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut key = [0u8; 32];
    key.copy_from_slice(digest.as_ref());
    key
}

/// The `exp` claim of a JWT-shaped token, when it has one (unverified:
/// it only shortens how long an accepted token is remembered).
fn expiry(token: &str) -> Option<SystemTime> {
    let claims = token.split('.').nth(1)?;
    let claims: serde_json::Value = serde_json::from_slice(&base64url_decode(claims)?).ok()?;
    let seconds = claims.get("exp")?.as_u64()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

/// Unpadded (or padded) base64url.
fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for byte in text.trim_end_matches('=').bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        bits = bits << 6 | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
        }
    }
    Some(out)
}

/// An API error as the operator needs it: the status code and message.
fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!(
            "the API server answered {} {}: {}",
            status.code, status.reason, status.message
        ),
        other => format!("the API server cannot be reached: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn reviewer() -> TokenReviewer {
        TokenReviewer::new(vec!["istio-ca".into()], "cluster.local".into()).unwrap()
    }

    fn status(value: serde_json::Value) -> TokenReviewStatus {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_review_names_the_service_account_or_says_why_not() {
        let reviewer = reviewer();
        let caller = reviewer
            .caller(&status(serde_json::json!({
                "authenticated": true, "audiences": ["istio-ca"],
                "user": {"username": "system:serviceaccount:bookinfo:reviews"},
            })))
            .unwrap();
        assert_eq!(caller.identity, Some(("bookinfo".into(), "reviews".into())));
        let caller = caller.caller;
        assert_eq!(caller.name, "spiffe://cluster.local/ns/bookinfo/sa/reviews");
        assert_eq!(
            caller.scope,
            NodeScope::ServiceAccount {
                namespace: "bookinfo".into(),
                account: "reviews".into()
            }
        );
        let refused = |value| reviewer.caller(&status(value)).unwrap_err();
        let expired = refused(
            serde_json::json!({"user": {}, "error": "[invalid bearer token, service account token has expired]"}),
        );
        assert_eq!(expired.code(), tonic::Code::Unauthenticated);
        assert!(expired.message().contains("has expired"), "{expired:?}");
        let audience = refused(serde_json::json!({
            "authenticated": true, "audiences": ["vault"],
            "user": {"username": "system:serviceaccount:bookinfo:reviews"},
        }));
        assert!(
            audience.message().contains("not one of [\"istio-ca\"]"),
            "{audience:?}"
        );
        let user = refused(serde_json::json!({
            "authenticated": true, "audiences": ["istio-ca"], "user": {"username": "alice"},
        }));
        assert!(user.message().contains("not a service account"), "{user:?}");
        let odd = refused(serde_json::json!({
            "authenticated": true, "audiences": ["istio-ca"],
            "user": {"username": "system:serviceaccount:a/b:c"},
        }));
        assert_eq!(odd.code(), tonic::Code::Unauthenticated, "{odd:?}");
    }

    #[test]
    fn a_ztunnel_token_bound_to_a_node_is_that_node_s_proxy() {
        let reviewer = reviewer();
        let review = |account: &str, extra: serde_json::Value| {
            reviewer
                .caller(&status(serde_json::json!({
                    "authenticated": true, "audiences": ["istio-ca"],
                    "user": {"username": format!("system:serviceaccount:istio-system:{account}"), "extra": extra},
                })))
                .unwrap()
        };
        let bound = serde_json::json!({
            "authentication.kubernetes.io/node-name": ["node-1"],
            "authentication.kubernetes.io/pod-name": ["ztunnel-abcde"],
        });
        let ztunnel = review("ztunnel", bound.clone());
        assert_eq!(ztunnel.caller.scope, NodeScope::Node("node-1".into()));
        assert_eq!(ztunnel.identity, Some(("istio-system".into(), "ztunnel".into())));
        // Any other account's pod token carries its node too: it stays
        // that account's.
        assert!(matches!(
            review("istiod", bound).caller.scope,
            NodeScope::ServiceAccount { .. }
        ));
        // A ztunnel token bound to no node is the account's only.
        assert!(matches!(
            review("ztunnel", serde_json::json!({})).caller.scope,
            NodeScope::ServiceAccount { .. }
        ));
    }

    /// A reviewer whose API server takes every request and never answers,
    /// and how many requests it took.
    fn hanging() -> (Arc<TokenReviewer>, Arc<AtomicUsize>) {
        let taken = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&taken);
        let service = tower::service_fn(move |_: http::Request<kube::client::Body>| {
            counter.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<http::Response<kube::client::Body>, std::convert::Infallible>>()
        });
        let reviewer = reviewer();
        assert!(reviewer.client.set(kube::Client::new(service, "default")).is_ok());
        (Arc::new(reviewer), taken)
    }

    #[tokio::test(start_paused = true)]
    async fn a_review_without_an_answer_fails_unavailable_and_few_are_asked_at_once() {
        let (reviewer, taken) = hanging();
        let calls: Vec<_> = (0..MAX_IN_FLIGHT + 8)
            .map(|i| {
                let reviewer = Arc::clone(&reviewer);
                tokio::spawn(async move { reviewer.authenticate(&format!("token-{i}")).await })
            })
            .collect();
        // Every call has started and waits: on the API server, or for a
        // place among the reviews in flight.
        while taken.load(Ordering::SeqCst) < MAX_IN_FLIGHT {
            tokio::task::yield_now().await;
        }
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(taken.load(Ordering::SeqCst), MAX_IN_FLIGHT);
        for call in calls {
            let refused = call.await.unwrap().unwrap_err();
            assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
            assert!(refused.message().contains("did not answer within"), "{refused:?}");
        }
    }

    #[test]
    fn the_cache_forgets_at_the_deadline_and_stays_bounded() {
        let mut reviewed = Reviewed::default();
        let caller = Credential::of(Caller {
            name: "x".into(),
            scope: NodeScope::Any,
        });
        let now = Instant::now();
        reviewed.insert(digest("a"), caller.clone(), now + Duration::from_secs(5));
        assert_eq!(reviewed.get(&digest("a"), now), Some(caller.clone()));
        assert_eq!(reviewed.get(&digest("a"), now + Duration::from_secs(6)), None);
        assert!(reviewed.0.is_empty());
        for i in 0..CACHE_MAX + 10 {
            reviewed.insert(digest(&i.to_string()), caller.clone(), now + CACHE_TTL);
        }
        assert_eq!(reviewed.0.len(), CACHE_MAX);
    }

    #[test]
    fn the_expiry_of_a_jwt_shaped_token_is_read_from_its_claims() {
        // {"exp":2000000000}
        let token = "e30.eyJleHAiOjIwMDAwMDAwMDB9.c2ln";
        assert_eq!(
            expiry(token),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000_000))
        );
        assert_eq!(expiry("opaque-token-0123456789"), None);
        assert_eq!(base64url_decode("Zm9vYg").unwrap(), b"foob");
    }
}
