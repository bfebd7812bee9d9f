//! The port's other gRPC services ([`ServeOptions::routes`](super::ServeOptions::routes),
//! tonic's) on the same HTTP/2 connections: a call's hyper request goes
//! to tonic's routes as it is (its extensions carry the connection's
//! [`Peer`](super::Peer)), and tonic's response, compressed or not, goes
//! back as it is. These are short unary calls (a certificate signing).
//!
//! A call's request body counts against its connection's request budget
//! for as long as the call lasts ([`RequestBudget`]): tonic buffers a
//! message until it is whole, so many calls holding partial messages are
//! bounded per connection as ADS streams are.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body::Frame;
use tower_service::Service as _;

use super::budget::{OverBudget, RequestBudget};

/// Tonic's routes, called per stream.
#[derive(Clone)]
pub(super) struct Routes {
    routes: tonic::service::Routes,
}

impl Routes {
    /// Serves calls with `routes`.
    pub(super) fn new(routes: tonic::service::Routes) -> Self {
        Routes { routes }
    }

    /// Serves one call.
    pub(super) fn call(
        &self,
        request: http::Request<hyper::body::Incoming>,
    ) -> BoxFuture<'static, Result<http::Response<tonic::body::Body>, Infallible>> {
        let budget = request.extensions().get::<Arc<RequestBudget>>().cloned();
        let request = request.map(|body| {
            tonic::body::Body::new(Charged {
                body,
                budget,
                charged: 0,
            })
        });
        Box::pin(self.routes.clone().call(request))
    }
}

/// A call's request body, every byte of it charged to the connection's
/// budget until the body is dropped.
struct Charged {
    body: hyper::body::Incoming,
    budget: Option<Arc<RequestBudget>>,
    charged: usize,
}

impl http_body::Body for Charged {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let this = &mut *self;
        let frame = match std::task::ready!(Pin::new(&mut this.body).poll_frame(cx)) {
            None => return Poll::Ready(None),
            Some(Err(error)) => {
                return Poll::Ready(Some(Err(tonic::Status::unavailable(format!(
                    "the request stream failed: {error}"
                )))));
            }
            Some(Ok(frame)) => frame,
        };
        if let (Some(budget), Some(data)) = (&this.budget, frame.data_ref()) {
            let len = data.len();
            if let Err(OverBudget { limit, used }) = budget.charge(len) {
                return Poll::Ready(Some(Err(tonic::Status::resource_exhausted(format!(
                    "a request of more than {} bytes does not fit: this connection's streams hold {used} bytes \
                     of requests, of a request buffer of {limit} bytes",
                    this.charged + len
                )))));
            }
            this.charged += len;
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Charged {
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            budget.release(self.charged);
        }
    }
}
