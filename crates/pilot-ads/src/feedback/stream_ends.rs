//! Why streams ended: the reason of one stream, and the counts since the
//! server started.

/// Why streams ended, since the server started (refusals are counted
/// apart, in [`RefusedStreams`](crate::RefusedStreams)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamEnds {
    /// The proxy ended its side of the stream (a clean close).
    pub proxy_closed: u64,
    /// The proxy's side failed: the connection was reset or closed, or an
    /// HTTP/2 keepalive went unanswered.
    pub transport_error: u64,
    /// A request that was not a valid ADS request after the first.
    pub bad_request: u64,
    /// The response body was dropped before the stream ended (the
    /// connection went away while a response waited to be written).
    pub response_dropped: u64,
    /// The server shut down ([`XdsServer::close`](crate::XdsServer::close)).
    pub server_closed: u64,
    /// The stream reached the maximum connection age and was told to
    /// reconnect.
    pub max_age: u64,
    /// A response waited for the write timeout with nothing taken (the
    /// proxy kept its flow-control window shut): the connection was
    /// dropped.
    pub write_timeout: u64,
}

/// Why one stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndReason {
    ProxyClosed,
    TransportError,
    BadRequest,
    ResponseDropped,
    ServerClosed,
    MaxAge,
    WriteTimeout,
}
