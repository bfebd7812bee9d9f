//! The body read deadline: a request's whole body must arrive within
//! `--body-read-timeout-ms` of its head. The header read timeout ends at the
//! head, so without it a client announcing a body and sending nothing would
//! hold its connection (and its slot) for as long as it likes. A body that
//! misses the deadline fails to read with [`BodyTimedOut`], as an I/O
//! time-out (`std::io::ErrorKind::TimedOut`); the REST API answers 408
//! with its message and the connection is closed.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use tokio::time::{Instant, Sleep};

/// The error of a body that did not arrive within the deadline.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?} (--body-read-timeout-ms)")]
pub(crate) struct BodyTimedOut(pub Duration);

/// Middleware (`map_request_with_state`): puts the deadline on the
/// request's body, counted from now (the head has just been read).
pub(crate) async fn with_deadline(State(timeout): State<Duration>, request: Request) -> Request {
    if request.body().is_end_stream() {
        return request;
    }
    let deadline = Instant::now() + timeout;
    request.map(|body| {
        Body::new(TimedBody {
            body,
            timeout,
            deadline,
            sleep: None,
        })
    })
}

/// A body failing with [`BodyTimedOut`] once its deadline passes.
struct TimedBody {
    body: Body,
    timeout: Duration,
    deadline: Instant,
    /// Made at the first read that has to wait.
    sleep: Option<Pin<Box<Sleep>>>,
}

impl HttpBody for TimedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                let error = std::io::Error::new(std::io::ErrorKind::TimedOut, BodyTimedOut(this.timeout));
                Poll::Ready(Some(Err(axum::Error::new(error))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}
