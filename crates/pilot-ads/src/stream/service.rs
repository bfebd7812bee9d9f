//! The ADS gRPC service (a tower `Service` on tonic's transport, not
//! tonic's generated server): authenticates a new stream, picks its
//! protocol by method, and starts its session task (`session.rs`) over the
//! stream's plumbing (`transport.rs`).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use tonic::body::Body;
use tonic::server::NamedService;

use super::admission::{Admission, StreamGuard};
use super::auth::{Authenticate, Caller};
use super::session::{self, Protocol};
use super::{delta, sotw, transport};
use crate::state::ServerState;

const SERVICE: &str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
const STREAM_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const DELTA_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

/// The ADS service to add to a `tonic::transport::Server` (see
/// [`XdsServer::service`](crate::XdsServer::service)).
#[derive(Clone)]
pub struct AdsService {
    server: Arc<ServerState>,
    auth: Option<Arc<dyn Authenticate>>,
    max_age: Option<Duration>,
    admission: Option<Arc<Admission>>,
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
        }
    }

    /// Admits streams into `admission`'s bookkeeping (their connection's
    /// handshake deadline, streams per credential).
    pub(crate) fn with_admission(mut self, admission: Arc<Admission>) -> Self {
        self.admission = Some(admission);
        self
    }

    /// Ends every stream once it is `age` old (give or take 10%, so
    /// proxies that connected together do not all reconnect together),
    /// after the response in flight, with `UNAVAILABLE`: the proxy
    /// reconnects at once, to this server or another of its ADS cluster,
    /// so proxies spread again over replicas that came back.
    pub fn with_max_connection_age(mut self, age: Option<Duration>) -> Self {
        self.max_age = age;
        self
    }

    /// Starts the task of a new stream of protocol `P`.
    fn open<P: Protocol + 'static>(
        &self,
        body: Body,
        caller: Option<Caller>,
        guard: StreamGuard,
    ) -> http::Response<Body> {
        let inner = &self.server;
        let (requests, responses, response) = transport::open(body, inner.options.send_queue);
        let id = inner.next_connection.fetch_add(1, Ordering::Relaxed);
        let limits = session::StreamLimits {
            caller,
            deadline: self
                .max_age
                .map(|age| tokio::time::Instant::now() + jitter(age, id)),
        };
        let session = session::drive::<P>(Arc::clone(inner), id, limits, requests, responses);
        tokio::spawn(async move {
            // Counted against its credential until the session ends.
            let _guard = guard;
            session.await;
        });
        response
    }
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

impl NamedService for AdsService {
    const NAME: &'static str = SERVICE;
}

impl tower_service::Service<http::Request<Body>> for AdsService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let compressed = request
            .headers()
            .get("grpc-encoding")
            .is_some_and(|e| e.as_bytes() != b"identity");
        let caller = match &self.auth {
            None => None,
            Some(auth) => match auth.authenticate(request.headers(), request.extensions()) {
                Ok(caller) => Some(caller),
                Err(status) => {
                    tracing::warn!(code = ?status.code(), reason = status.message(), "ADS stream refused");
                    self.server.refused.count(&status);
                    return std::future::ready(Ok(status.into_http()));
                }
            },
        };
        let response = if compressed {
            tonic::Status::unimplemented("this server accepts uncompressed requests only").into_http()
        } else {
            let path = request.uri().path();
            if path != STREAM_PATH && path != DELTA_PATH {
                return std::future::ready(Ok(
                    tonic::Status::unimplemented(format!("no method {path}")).into_http()
                ));
            }
            let guard = match (&self.admission, &caller) {
                (Some(admission), Some(caller)) => match admission.open_stream(&caller.name) {
                    Ok(guard) => guard,
                    Err(status) => {
                        tracing::warn!(caller = %caller.name, reason = status.message(), "ADS stream refused");
                        self.server.refused.count(&status);
                        return std::future::ready(Ok(status.into_http()));
                    }
                },
                _ => StreamGuard::none(),
            };
            if let Some(admission) = &self.admission {
                admission.admit(request.extensions());
            }
            if path == STREAM_PATH {
                self.open::<sotw::Sotw>(request.into_body(), caller, guard)
            } else {
                self.open::<delta::Delta>(request.into_body(), caller, guard)
            }
        };
        std::future::ready(Ok(response))
    }
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
