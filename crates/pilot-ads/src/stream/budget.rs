//! A connection's request budget: the bytes of requests received and not
//! yet whole (partial gRPC messages) that all the streams of one
//! connection may hold at once
//! ([`ServeOptions::request_buffer_per_connection`](super::ServeOptions::request_buffer_per_connection)).
//! A stream that would take the connection over it ends with
//! `RESOURCE_EXHAUSTED` instead of waiting for room: waiting streams
//! could each hold a part of the budget the others need.
//!
//! What HTTP/2 itself holds before a stream reads it is bounded apart,
//! by the connection's flow-control window (`serve.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One connection's budget, shared by its streams (in each request's
/// extensions).
#[derive(Debug)]
pub(crate) struct RequestBudget {
    limit: usize,
    used: AtomicUsize,
}

/// Why bytes could not be charged: the sizes to name in the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OverBudget {
    /// The connection's budget.
    pub(crate) limit: usize,
    /// Bytes its streams held when the charge was refused.
    pub(crate) used: usize,
}

impl RequestBudget {
    /// A budget of `limit` bytes (at least one).
    pub(crate) fn new(limit: usize) -> Arc<Self> {
        Arc::new(RequestBudget {
            limit: limit.max(1),
            used: AtomicUsize::new(0),
        })
    }

    /// The budget's size.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Takes `bytes` from the budget, or says how full it is.
    pub(crate) fn charge(&self, bytes: usize) -> Result<(), OverBudget> {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let after = used.saturating_add(bytes);
            if after > self.limit {
                return Err(OverBudget {
                    limit: self.limit,
                    used,
                });
            }
            match self
                .used
                .compare_exchange_weak(used, after, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(now) => used = now,
            }
        }
    }

    /// Gives `bytes` back (at most what was charged).
    pub(crate) fn release(&self, bytes: usize) {
        if bytes > 0 {
            let _ = self
                .used
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |used| {
                    Some(used.saturating_sub(bytes))
                });
        }
    }

    /// Bytes held now.
    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_past_the_limit_are_refused_with_the_sizes_until_released() {
        let budget = RequestBudget::new(100);
        budget.charge(60).unwrap();
        assert_eq!(budget.charge(41), Err(OverBudget { limit: 100, used: 60 }));
        budget.charge(40).unwrap();
        budget.release(70);
        assert_eq!(budget.used(), 30);
        budget.charge(70).unwrap();
        budget.release(1000);
        assert_eq!(budget.used(), 0);
    }
}
