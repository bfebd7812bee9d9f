//! The ADS gRPC service on hyper's HTTP/2 requests: authenticates a new
//! stream, picks its protocol by method, and starts its session task
//! (`session.rs`) over the stream's plumbing (`transport.rs`); calls to
//! other methods go to the port's other services (`routes.rs`) when it
//! has them.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::future::{BoxFuture, Either, Ready};
use hyper::body::Incoming;

use super::admission::{Admission, StreamGuard};
use super::auth::{Authenticate, Caller};
use super::budget::RequestBudget;
use super::routes::Routes;
use super::session::{self, Protocol};
use super::stall::WriteStall;
use super::transport;
use super::{delta, sotw};
use crate::state::ServerState;

const STREAM_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const DELTA_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

/// The ADS service each connection calls per new stream.
#[derive(Clone)]
pub(crate) struct AdsService {
    server: Arc<ServerState>,
    auth: Option<Arc<dyn Authenticate>>,
    max_age: Option<Duration>,
    admission: Option<Arc<Admission>>,
    routes: Option<Routes>,
}

impl AdsService {
    /// The service of the server whose state is `server`, its streams
    /// authenticated by `auth` when there is one; no maximum age.
    pub(crate) fn new(server: Arc<ServerState>, auth: Option<Arc<dyn Authenticate>>) -> Self {
        AdsService {
            server,
            auth,
            max_age: None,
            admission: None,
            routes: None,
        }
    }

    /// Admits streams into `admission`'s bookkeeping (their connection's
    /// handshake deadline, streams per credential).
    pub(crate) fn with_admission(mut self, admission: Arc<Admission>) -> Self {
        self.admission = Some(admission);
        self
    }

    /// Serves calls to other methods with `routes`.
    pub(crate) fn with_routes(mut self, routes: Option<tonic::service::Routes>) -> Self {
        self.routes = routes.map(Routes::new);
        self
    }

    /// Ends every stream once it is `age` old (give or take 10%, so
    /// proxies that connected together do not all reconnect together),
    /// after the response in flight, with `UNAVAILABLE`: the proxy
    /// reconnects at once, to this server or another of its ADS cluster,
    /// so proxies spread again over replicas that came back.
    pub(crate) fn with_max_connection_age(mut self, age: Option<Duration>) -> Self {
        self.max_age = age;
        self
    }

    /// Starts the task of a new stream of protocol `P`; its response is
    /// sent (its HEADERS go out) at once, before the first push.
    fn open<P: Protocol + 'static>(
        &self,
        body: Incoming,
        budget: Option<Arc<RequestBudget>>,
        stall: Option<Arc<WriteStall>>,
        caller: Option<Caller>,
        guard: StreamGuard,
    ) -> Response {
        let (requests, responses, response) = transport::open::<P::Request>(body, budget, stall);
        let inner = &self.server;
        let id = inner.next_connection.fetch_add(1, Ordering::Relaxed);
        let limits = session::StreamLimits {
            caller,
            deadline: self
                .max_age
                .map(|age| tokio::time::Instant::now() + jitter(age, id)),
        };
        let session = session::drive::<P>(Arc::clone(inner), id, limits, requests, responses);
        // Counted against its credential until the session ends. (A
        // future that awaits the session would hold it twice: as what it
        // captured and as what it awaits.)
        tokio::spawn(futures::FutureExt::map(session, move |()| drop(guard)));
        response
    }

    /// Serves one request of the connection: an ADS stream, or a call to
    /// another of the port's services.
    pub(crate) fn call(&self, request: http::Request<Incoming>) -> Call {
        let path = request.uri().path();
        if path != STREAM_PATH && path != DELTA_PATH {
            return match &self.routes {
                Some(routes) => Either::Right(routes.call(request)),
                None => refuse(&tonic::Status::unimplemented(format!("no method {path}"))),
            };
        }
        let delta = path == DELTA_PATH;
        let (parts, body) = request.into_parts();
        let Some(auth) = self.auth.clone() else {
            return Either::Left(futures::future::ready(Ok(self.stream(delta, parts, body, None))));
        };
        // The connection is admitted only once authentication ends, so its
        // handshake deadline covers it: a connection whose credential takes
        // too long to check is closed with the request in flight.
        let service = self.clone();
        Either::Right(Box::pin(async move {
            let response = match auth.authenticate(&parts.headers, &parts.extensions).await {
                Ok(caller) => service.stream(delta, parts, body, Some(caller)),
                Err(status) => {
                    tracing::warn!(code = ?status.code(), reason = status.message(), "ADS stream refused");
                    service.server.refused.count(&status);
                    refused(&status)
                }
            };
            Ok(response)
        }))
    }

    /// Opens the stream of an authenticated `caller` (`None`: the server
    /// does not authenticate), or refuses it.
    fn stream(
        &self,
        delta: bool,
        parts: http::request::Parts,
        body: Incoming,
        caller: Option<Caller>,
    ) -> Response {
        let compressed = parts
            .headers
            .get("grpc-encoding")
            .is_some_and(|e| e.as_bytes() != b"identity");
        if compressed {
            return refused(&tonic::Status::unimplemented(
                "this server accepts uncompressed requests only",
            ));
        }
        let guard = match (&self.admission, &caller) {
            (Some(admission), Some(caller)) => match admission.open_stream(&caller.name) {
                Ok(guard) => guard,
                Err(status) => {
                    tracing::warn!(caller = %caller.name, reason = status.message(), "ADS stream refused");
                    self.server.refused.count(&status);
                    return refused(&status);
                }
            },
            _ => StreamGuard::none(),
        };
        if let Some(admission) = &self.admission {
            admission.admit(&parts.extensions);
        }
        let budget = parts.extensions.get::<Arc<RequestBudget>>().cloned();
        let stall = parts.extensions.get::<Arc<WriteStall>>().cloned();
        if delta {
            self.open::<delta::Delta>(body, budget, stall, caller, guard)
        } else {
            self.open::<sotw::Sotw>(body, budget, stall, caller, guard)
        }
    }
}

/// A response of the port.
type Response = http::Response<tonic::body::Body>;

/// What serving one request of the connection returns: an ADS stream's
/// response at once, or another service's call.
pub(crate) type Call =
    Either<Ready<Result<Response, Infallible>>, BoxFuture<'static, Result<Response, Infallible>>>;

/// A stream ended at once with `status` (a trailers-only response).
fn refuse(status: &tonic::Status) -> Call {
    Either::Left(futures::future::ready(Ok(refused(status))))
}

/// The trailers-only response that ends a stream with `status`.
fn refused(status: &tonic::Status) -> Response {
    let mut response = http::Response::new(tonic::body::Body::default());
    *response.headers_mut() = transport::trailers(status);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}

/// `age` moved by up to 10% either way, differently for each stream.
fn jitter(age: Duration, id: u64) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(id);
    // A fraction in [-0.1, 0.1].
    let fraction = (hasher.finish() % 2001) as f64 / 10_000.0 - 0.1;
    age.mul_f64(1.0 + fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_ten_percent_and_varies() {
        let age = Duration::from_secs(1800);
        let ages: Vec<Duration> = (0..200).map(|id| jitter(age, id)).collect();
        for a in &ages {
            assert!(*a >= age.mul_f64(0.9) && *a <= age.mul_f64(1.1), "{a:?}");
        }
        let distinct: std::collections::BTreeSet<_> = ages.iter().collect();
        assert!(
            distinct.len() > 100,
            "jitter spreads the ages: {}",
            distinct.len()
        );
    }
}
