//! Bearer-token authentication of REST callers, and the start-up check
//! that the REST API is not served off loopback without it
//! ([`check_open`]). With tokens configured,
//! every endpoint but `/healthz` and `/readyz` needs a valid token, writes
//! need a read-write one, and an xDS token is refused by the REST API (it
//! may only open ADS streams, see [`super::xds`]) but for
//! `POST /v1/proxy-events`, the reports of the proxies it may claim
//! (pilot-agent sends its ADS token). With `--kube-token-review` a
//! Kubernetes service-account token may post reports too
//! ([`super::token_review`]), of its namespace's proxies: a report names a
//! node id only, which shows the namespace and not the service account.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::token_review::TokenReviewer;
use super::tokens::{Access, Tokens, bearer};
use pilot_apiserver::ApiError;

/// Refuses a REST address that is not loopback without `--token-file`,
/// unless `--allow-unauthenticated` says so.
pub(crate) fn check_open(args: &crate::args::Args, tokens: bool) -> Result<(), String> {
    if tokens || args.listen.ip().is_loopback() || args.allow_unauthenticated {
        return Ok(());
    }
    Err(format!(
        "the REST API would listen on {} without authentication: give --token-file, or \
         --allow-unauthenticated to let any client that reaches it read and change the configuration",
        args.listen
    ))
}

/// The one REST route an `xds` token may call.
const PROXY_EVENTS: &str = "/v1/proxy-events";

/// Middleware: refuses requests without a valid token (401), and writes
/// with a read-only one (403).
pub(crate) async fn require(
    State(tokens): State<Option<Arc<Tokens>>>,
    State(reviewer): State<Option<Arc<TokenReviewer>>>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(tokens) = &tokens else {
        return next.run(request).await;
    };
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer);
    let unauthorized = |message: &str| {
        let mut response = ApiError::new(StatusCode::UNAUTHORIZED, "Unauthorized", message).into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        response
    };
    let Some(token) = token else {
        return unauthorized(
            "this server requires a bearer token (pilotctl --token, or token: in its config file)",
        );
    };
    let found = tokens.find(token);
    if found.is_none()
        && let Some(reviewer) = &reviewer
        && request.method() == Method::POST
        && request.uri().path() == PROXY_EVENTS
    {
        return match reviewer.authenticate(token).await {
            Ok(credential) => {
                let caller = credential.caller;
                let scope = match caller.scope {
                    pilot_ads::NodeScope::ServiceAccount { namespace, .. } => {
                        pilot_ads::NodeScope::Namespace(namespace)
                    }
                    other => other,
                };
                request.extensions_mut().insert(pilot_ads::Caller {
                    name: caller.name,
                    scope,
                });
                next.run(request).await
            }
            Err(status) if status.code() == tonic::Code::Unavailable => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                status.message(),
            )
            .into_response(),
            Err(status) => unauthorized(status.message()),
        };
    }
    if let Some(found) = found.filter(|t| t.access == Access::Xds)
        && request.method() == Method::POST
        && request.uri().path() == PROXY_EVENTS
    {
        // The handler checks the reported node id against this scope.
        request.extensions_mut().insert(pilot_ads::Caller {
            name: format!("token {}", found.name),
            scope: found.scope(),
        });
        return next.run(request).await;
    }
    match found.map(|t| (t.access, t.name.as_str())) {
        None => unauthorized("the bearer token is not valid"),
        Some((Access::Xds, name)) => ApiError::new(
            StatusCode::FORBIDDEN,
            "Forbidden",
            format!("token {name:?} may only open ADS streams and post proxy events"),
        )
        .into_response(),
        Some((Access::ReadOnly, name))
            if !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) =>
        {
            ApiError::new(
                StatusCode::FORBIDDEN,
                "Forbidden",
                format!("token {name:?} is read-only; writes need a read-write token"),
            )
            .into_response()
        }
        Some(_) => next.run(request).await,
    }
}
