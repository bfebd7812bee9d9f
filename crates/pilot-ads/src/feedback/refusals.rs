//! Streams refused before they were served (no valid credential, a node
//! id the caller may not claim, a malformed request): a counter per reason,
//! and the counts since the server started ([`RefusedStreams`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// Streams refused since the server started, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RefusedStreams {
    /// No credential, or one that is not valid.
    pub unauthenticated: u64,
    /// A valid credential claiming a node id outside its scope.
    pub permission_denied: u64,
    /// A request that is not a valid ADS request (undecodable, no node, a
    /// malformed node id).
    pub invalid_argument: u64,
    /// A credential with as many streams open as it may have.
    pub resource_exhausted: u64,
    /// A credential that could not be checked now (what
    /// [`Authenticate`](crate::Authenticate) asks was unreachable).
    pub unavailable: u64,
}

/// The refusals counted so far, by reason, shared by every stream.
#[derive(Default)]
pub(crate) struct RefusalCounters {
    unauthenticated: AtomicU64,
    permission_denied: AtomicU64,
    invalid_argument: AtomicU64,
    resource_exhausted: AtomicU64,
    unavailable: AtomicU64,
}

impl RefusalCounters {
    /// Counts a stream ended with `status` (other codes are not refusals).
    pub(crate) fn count(&self, status: &tonic::Status) {
        let counter = match status.code() {
            tonic::Code::Unauthenticated => &self.unauthenticated,
            tonic::Code::PermissionDenied => &self.permission_denied,
            tonic::Code::InvalidArgument => &self.invalid_argument,
            tonic::Code::ResourceExhausted => &self.resource_exhausted,
            tonic::Code::Unavailable => &self.unavailable,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts as they are now.
    pub(crate) fn snapshot(&self) -> RefusedStreams {
        RefusedStreams {
            unauthenticated: self.unauthenticated.load(Ordering::Relaxed),
            permission_denied: self.permission_denied.load(Ordering::Relaxed),
            invalid_argument: self.invalid_argument.load(Ordering::Relaxed),
            resource_exhausted: self.resource_exhausted.load(Ordering::Relaxed),
            unavailable: self.unavailable.load(Ordering::Relaxed),
        }
    }
}
