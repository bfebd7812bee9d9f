//! The ADS gRPC service on pilot-h2: authenticates a new stream, picks its
//! protocol by method, and starts its session task (`session.rs`) over the
//! stream's plumbing (`transport.rs`); calls to other methods go to the
//! port's other services (`routes.rs`) when it has them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::admission::{Admission, StreamGuard};
use super::auth::{Authenticate, Caller};
use super::routes::Routes;
use super::session::{self, Protocol};
use super::transport::{self, Requests, Responses};
use super::{delta, sotw};
use crate::state::ServerState;

const STREAM_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const DELTA_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

/// The ADS service a pilot-h2 server calls per new stream.
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

    /// Starts the task of a new stream of protocol `P`.
    fn open<P: Protocol + 'static>(
        &self,
        messages: pilot_h2::Messages,
        mut sender: pilot_h2::Sender,
        caller: Option<Caller>,
        guard: StreamGuard,
    ) {
        // The stream is open: its clients see so before the first
        // response (which waits for the first push).
        sender.send_headers();
        let inner = &self.server;
        let id = inner.next_connection.fetch_add(1, Ordering::Relaxed);
        let limits = session::StreamLimits {
            caller,
            deadline: self
                .max_age
                .map(|age| tokio::time::Instant::now() + jitter(age, id)),
        };
        let session = session::drive::<P>(
            Arc::clone(inner),
            id,
            limits,
            Requests::new(messages),
            Responses::new(sender),
        );
        // Counted against its credential until the session ends. (A
        // future that awaits the session would hold it twice: as what it
        // captured and as what it awaits.)
        tokio::spawn(futures::FutureExt::map(session, move |()| drop(guard)));
    }

    /// Ends a stream at once with `status`.
    fn refuse(sender: pilot_h2::Sender, status: &tonic::Status) {
        sender.finish(transport::code(status.code()), status.message());
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

impl pilot_h2::Service for AdsService {
    fn call(&self, request: pilot_h2::Request, sender: pilot_h2::Sender) {
        let pilot_h2::Request { head, messages } = request;
        let path = head.path.as_str();
        if path != STREAM_PATH && path != DELTA_PATH {
            match &self.routes {
                Some(routes) => routes.call(head, messages, sender),
                None => Self::refuse(sender, &tonic::Status::unimplemented(format!("no method {path}"))),
            }
            return;
        }
        let extensions = &head.connection.extensions;
        let caller = match &self.auth {
            None => None,
            Some(auth) => match auth.authenticate(&head.headers, extensions) {
                Ok(caller) => Some(caller),
                Err(status) => {
                    tracing::warn!(code = ?status.code(), reason = status.message(), "ADS stream refused");
                    self.server.refused.count(&status);
                    return Self::refuse(sender, &status);
                }
            },
        };
        let compressed = head
            .headers
            .get("grpc-encoding")
            .is_some_and(|e| e.as_bytes() != b"identity");
        if compressed {
            let status = tonic::Status::unimplemented("this server accepts uncompressed requests only");
            return Self::refuse(sender, &status);
        }
        let guard = match (&self.admission, &caller) {
            (Some(admission), Some(caller)) => match admission.open_stream(&caller.name) {
                Ok(guard) => guard,
                Err(status) => {
                    tracing::warn!(caller = %caller.name, reason = status.message(), "ADS stream refused");
                    self.server.refused.count(&status);
                    return Self::refuse(sender, &status);
                }
            },
            _ => StreamGuard::none(),
        };
        if let Some(admission) = &self.admission {
            admission.admit(extensions);
        }
        if head.path == STREAM_PATH {
            self.open::<sotw::Sotw>(messages, sender, caller, guard);
        } else {
            self.open::<delta::Delta>(messages, sender, caller, guard);
        }
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
