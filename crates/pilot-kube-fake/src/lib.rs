//! An in-process fake of the Kubernetes API server, for tests
//! (`publish = false`; a dev-dependency only).
//!
//! No API server can be installed where pilot's tests run, so
//! pilot-store-k8s's tests (and pilot-discovery's and the system tests on
//! Kubernetes) talk to this fake through a real [`kube::Client`]: requests
//! go through the client's whole stack (URL building, JSON, error decoding,
//! watch streaming) into a tower service that answers them from memory, or
//! over HTTP on a loopback port ([`FakeApiServer::listen`]) for another
//! process. It is faithful to the list/watch/write semantics pilot relies
//! on, as the Kubernetes API documents them, and to the admission webhooks
//! pilot serves, and to nothing else (no schemas, field ownership or
//! garbage collection; see "Not implemented" below). Tests that need a real cluster stay
//! `#[ignore = "needs a cluster"]`, runnable with `KUBECONFIG` set.
//!
//! What it implements:
//!
//! - **Resources**: `Namespace`, `Node` (cluster-scoped), `Pod`, `Service`,
//!   `EndpointSlice`, `ConfigMap`, `Secret`, `Lease` (`coordination.k8s.io/v1`; all
//!   namespaced), `CustomResourceDefinition`,
//!   `MutatingWebhookConfiguration` and `ValidatingWebhookConfiguration`
//!   (`admissionregistration.k8s.io/v1`, cluster-scoped); a CRD, once
//!   created or applied, makes its served versions available. Any other path
//!   is 404 with "the server could not find the requested resource".
//! - **Discovery** for kubectl: `/version`, `/api`, `/apis`, `/api/v1` and
//!   `/apis/<group>/<version>` in the legacy (unaggregated) form; no
//!   OpenAPI documents (`kubectl apply --validate=false`).
//! - **Admission webhooks**: creates, updates (and deletes, when a rule
//!   names them) matched by a webhook configuration's rules and selectors
//!   are sent to its webhooks over HTTPS (`clientConfig.url`, verified with
//!   `caBundle`; `service` references cannot be resolved by the fake and
//!   count as failed calls), mutating ones first with their JSONPatch
//!   applied; a denial answers with the webhook's status and `admission
//!   webhook "NAME" denied the request: MSG`; `failurePolicy` and
//!   `timeoutSeconds` decide about failed calls (`admission.rs`).
//! - **Dry runs** (`dryRun=All`, in the query or a delete's options):
//!   admission runs and the write is checked as a real one, answered, and
//!   not stored (no version moves, no watch sees it).
//! - **resourceVersion**: one counter for the whole server (as etcd's
//!   revision), set on every object written; lists carry it in
//!   `metadata.resourceVersion`. An update that changes nothing keeps the
//!   version. `uid`, `creationTimestamp` and `generation` are the server's.
//! - **Namespaces**: `default` and `kube-system` exist; creating a
//!   namespaced object in a missing namespace is 404 (`namespaces "x" not
//!   found`). Deleting a namespace does not delete its objects.
//! - **Writes**: POST creates (409 `AlreadyExists`), PUT replaces and needs
//!   the current `metadata.resourceVersion` (422 `Invalid` without one, 409
//!   `Conflict` when stale, 404 when missing), DELETE honours
//!   `preconditions.resourceVersion` (409) and answers with the deleted
//!   object at the deletion's version; PATCH is server-side apply only
//!   (`application/apply-patch+yaml`, `fieldManager` required), simplified
//!   to "create, or merge the applied fields" (no field ownership). Names
//!   must be DNS-1123 subdomains (422 `Invalid` with the field in
//!   `details.causes`).
//! - **Watch** (`?watch=true`): from `resourceVersion` R, every change after
//!   R in order as `ADDED`/`MODIFIED`/`DELETED`, then live ones; with no R
//!   (or `0`) the current objects as `ADDED` first. If the history after R is
//!   gone, the answer is 200 with one `ERROR` event holding a 410 `Expired`
//!   Status, as the API server does. With `allowWatchBookmarks=true` a watch
//!   gets a `BOOKMARK` at the new version whenever the server's version
//!   moves by a write it does not see (the API server sends bookmarks at
//!   its discretion, about once a minute; the fake sends them promptly).
//!   A watch that falls [`WATCH_BUFFER`] events behind is closed, as the API
//!   server closes watchers that cannot keep up.
//! - Field selectors on lists and watches: `metadata.name` and
//!   `metadata.namespace` of any resource, `type` of Secrets, with `=`,
//!   `==` and `!=` (another field is a 400, `field label not supported`,
//!   as the API server answers).
//! - **Not implemented** (answered 400 rather than ignored): label
//!   selectors. Lists are never paginated (`limit` is ignored, which
//!   the API allows), `timeoutSeconds` is ignored, and there are no
//!   built-in admission plugins, schema validation, finalizers or garbage
//!   collection.
//!
//! - **Requests recorded**: every request's verb and resource attributes,
//!   with the bearer token it carried, as an RBAC authorizer sees them
//!   ([`FakeApiServer::requests`]), so a test can prove a Role grants what
//!   a program asks and nothing more. Nothing is denied by them.
//! - **Service-account tokens** (`tokens.rs`): [`FakeApiServer::issue_token`]
//!   issues one as the TokenRequest API does ([`FakeApiServer::issue_pod_token`]
//!   one bound to a pod on a node, whose review names both), `POST
//!   /apis/authentication.k8s.io/v1/tokenreviews` reviews it as the API
//!   server does (valid, expired, wrong audience, unknown), and with
//!   [`FakeApiServer::require_authentication`] every request needs one
//!   (401 otherwise), as an API server reached over TLS
//!   ([`FakeApiServer::listen_tls`]) from a pod.
//!
//! Test hooks force what a real cluster does only sometimes:
//! [`FakeApiServer::expire_history`] (etcd compaction, so resuming watches
//! get 410), [`FakeApiServer::close_watches`] (a dropped connection),
//! [`FakeApiServer::refuse_watches`] (an API server that is unavailable)
//! [`FakeApiServer::refuse_writes`] (403 Forbidden to every write),
//! [`FakeApiServer::refuse_token_reviews`] (503 to TokenReviews) and
//! [`FakeApiServer::revoke_token`].
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use k8s_openapi::api::core::v1::Namespace;
//! use kube::api::{Api, ListParams};
//! use pilot_kube_fake::FakeApiServer;
//!
//! let fake = FakeApiServer::new();
//! let namespaces: Api<Namespace> = Api::all(fake.client());
//! let names: Vec<String> = namespaces.list(&ListParams::default()).await.unwrap()
//!     .items.into_iter().filter_map(|n| n.metadata.name).collect();
//! assert_eq!(names, ["default", "kube-system"]);
//! # });
//! ```

mod admission;
mod discovery;
mod record;
mod serve;
mod state;
mod tokens;
mod webhook_call;

use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use record::{ApiRequest, Target};
pub use state::{DEFAULT_HISTORY, WATCH_BUFFER};
pub use tokens::API_AUDIENCE;

/// The fake API server: shared state behind a tower service. Clones, and
/// the clients made from any of them, share one server; its open watches
/// end when the last of them is dropped.
#[derive(Clone)]
pub struct FakeApiServer {
    state: Arc<Mutex<state::State>>,
}

/// A [`FakeApiServer`] served on a loopback port; dropping it stops the
/// server and closes its connections.
pub struct Listening {
    address: std::net::SocketAddr,
    tls: bool,
    task: tokio::task::JoinHandle<()>,
}

impl Listening {
    /// `http://127.0.0.1:PORT` (`https://` from [`FakeApiServer::listen_tls`]).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.address)
    }

    /// The address it listens on.
    pub fn address(&self) -> std::net::SocketAddr {
        self.address
    }

    /// A kubeconfig document whose current context is this server.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\ncurrent-context: fake\n",
            self.url()
        )
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeApiServer {
    /// A server with the built-in resources and the `default` and
    /// `kube-system` namespaces.
    pub fn new() -> Self {
        FakeApiServer {
            state: Arc::new(Mutex::new(state::State::new())),
        }
    }

    /// A [`kube::Client`] whose requests this server answers (default
    /// namespace `default`). Must be called inside a Tokio runtime.
    pub fn client(&self) -> kube::Client {
        self.client_with(None)
    }

    /// [`client`](Self::client) sending `Authorization: Bearer TOKEN`,
    /// for when [`require_authentication`](Self::require_authentication)
    /// is on.
    pub fn client_as(&self, token: &str) -> kube::Client {
        let header =
            ::http::HeaderValue::from_str(&format!("Bearer {token}")).expect("a token a header can carry");
        self.client_with(Some(header))
    }

    fn client_with(&self, authorization: Option<::http::HeaderValue>) -> kube::Client {
        let state = Arc::clone(&self.state);
        let service = tower::service_fn(move |mut request: ::http::Request<kube::client::Body>| {
            let state = Arc::clone(&state);
            if let Some(header) = &authorization {
                request
                    .headers_mut()
                    .insert(::http::header::AUTHORIZATION, header.clone());
            }
            async move { Ok::<_, Infallible>(serve::handle(state, request).await) }
        });
        kube::Client::new(service, "default")
    }

    /// Serves this fake over HTTP on a free 127.0.0.1 port as well, for
    /// programs in other processes (a `pilot-discovery` given a kubeconfig
    /// whose server is [`Listening::url`]). Stops when the returned guard
    /// is dropped.
    pub async fn listen(&self) -> std::io::Result<Listening> {
        self.serve_on(None).await
    }

    /// Serves this fake over HTTPS on a free 127.0.0.1 port, with the
    /// certificate chain and key of `cert_pem` and `key_pem` (PEM; the
    /// certificate must name IP 127.0.0.1), as an in-cluster client
    /// reaches the API server. Stops when the returned guard is dropped.
    pub async fn listen_tls(&self, cert_pem: &[u8], key_pem: &[u8]) -> std::io::Result<Listening> {
        use rustls_pki_types::pem::PemObject;
        let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
        let certs = rustls_pki_types::CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("the certificate: {e}")))?;
        let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| invalid(format!("the key: {e}")))?;
        let config =
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| invalid(e.to_string()))?
                .with_no_client_auth()
                .with_single_cert(certs, key)
                .map_err(|e| invalid(e.to_string()))?;
        self.serve_on(Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))))
            .await
    }

    /// Serves HTTP/1.1 on a free loopback port, over TLS with `tls`.
    async fn serve_on(&self, tls: Option<tokio_rustls::TlsAcceptor>) -> std::io::Result<Listening> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let state = Arc::clone(&self.state);
        let secure = tls.is_some();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let state = Arc::clone(&state);
                let tls = tls.clone();
                connections.spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let state = Arc::clone(&state);
                        async move { Ok::<_, Infallible>(serve::handle(state, request).await) }
                    });
                    let http = hyper::server::conn::http1::Builder::new();
                    match tls {
                        None => {
                            let _ = http
                                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                                .await;
                        }
                        Some(tls) => {
                            // A client that fails the handshake is dropped.
                            if let Ok(stream) = tls.accept(stream).await {
                                let _ = http
                                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                                    .await;
                            }
                        }
                    }
                });
                // Forget the connections that ended.
                while connections.try_join_next().is_some() {}
            }
        });
        Ok(Listening {
            address,
            tls: secure,
            task,
        })
    }

    /// Issues a token for service account `service_account` of
    /// `namespace`, as the TokenRequest API does (a projected
    /// service-account token): valid for `audiences` (the API server's,
    /// [`API_AUDIENCE`], when empty) for `lifetime` from now. A zero
    /// `lifetime` makes a token that is already expired.
    pub fn issue_token(
        &self,
        namespace: &str,
        service_account: &str,
        audiences: &[&str],
        lifetime: Duration,
    ) -> String {
        self.lock()
            .tokens
            .issue(namespace, service_account, audiences, lifetime)
    }

    /// [`issue_token`](Self::issue_token) for a token bound to `pod` of
    /// `namespace` running on `node`, as a pod's projected token is: its
    /// TokenReview names the pod and the node in `user.extra`.
    pub fn issue_pod_token(
        &self,
        namespace: &str,
        service_account: &str,
        (pod, node): (&str, &str),
        audiences: &[&str],
        lifetime: Duration,
    ) -> String {
        self.lock()
            .tokens
            .issue_for_pod(namespace, service_account, (pod, node), audiences, lifetime)
    }

    /// Revokes `token` (as deleting the pod it is bound to does): from now
    /// on it is reviewed, and refused as a caller's credential, as a token
    /// the server never issued. Whether it was an issued token.
    pub fn revoke_token(&self, token: &str) -> bool {
        self.lock().tokens.revoke(token)
    }

    /// While `refused`, TokenReviews are answered 503 ServiceUnavailable.
    pub fn refuse_token_reviews(&self, refused: bool) {
        self.lock().tokens.reviews_refused = refused;
    }

    /// While `required`, every request needs `Authorization: Bearer T`
    /// with a token from [`issue_token`](Self::issue_token) for
    /// [`API_AUDIENCE`], unexpired and not revoked; any other request is
    /// answered 401 Unauthorized. (The in-process [`client`](Self::client)
    /// sends no token; [`client_as`](Self::client_as) does.)
    pub fn require_authentication(&self, required: bool) {
        self.lock().tokens.authentication_required = required;
    }

    /// How many TokenReviews were answered (any outcome but a refusal by
    /// [`refuse_token_reviews`](Self::refuse_token_reviews)).
    pub fn token_reviews(&self) -> u64 {
        self.lock().tokens.reviews
    }

    /// The server's current resourceVersion.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// Forgets the history of changes, as an etcd compaction does: a watch
    /// that resumes from before now gets 410 Gone and must list again.
    pub fn expire_history(&self) {
        self.lock().expire_history();
    }

    /// Keeps only the last `changes` changes for resuming watches (default
    /// [`DEFAULT_HISTORY`]).
    pub fn set_history_limit(&self, changes: usize) {
        self.lock().history_limit = changes.max(1);
    }

    /// Ends every open watch, as a dropped connection does; clients resume.
    pub fn close_watches(&self) {
        self.lock().watchers.clear();
    }

    /// While `refused`, new watches are answered 503 ServiceUnavailable.
    pub fn refuse_watches(&self, refused: bool) {
        self.lock().watches_refused = refused;
    }

    /// While `refused`, every write (any method but GET) is answered 403
    /// Forbidden, as an API server whose RBAC denies pilot's account.
    pub fn refuse_writes(&self, refused: bool) {
        self.lock().writes_refused = refused;
    }

    /// How many open watches there are.
    pub fn open_watches(&self) -> usize {
        let mut state = self.lock();
        state.watchers.retain(|w| !w.sender.is_closed());
        state.watchers.len()
    }

    /// Every distinct request asked of this server so far, with the
    /// attributes RBAC authorizes (see [`ApiRequest`]), sorted.
    pub fn requests(&self) -> Vec<ApiRequest> {
        self.lock().requests.iter().cloned().collect()
    }

    /// How many watches were answered 410 Gone so far.
    pub fn expired_answers(&self) -> u64 {
        self.lock().expired_answers
    }

    fn lock(&self) -> MutexGuard<'_, state::State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Default for FakeApiServer {
    fn default() -> Self {
        Self::new()
    }
}
