//! A Sidecar's ingress listeners compiled ([`IngressPort`]): the port
//! traffic arrives on, the address it listens on, where traffic goes
//! ([`DefaultEndpoint`]), the TLS it terminates ([`IngressTls`]) and the
//! limits of its inbound cluster ([`InboundLimits`]).
//!
//! As Istio reads them:
//! - An ingress listener receives on its port (at `bind`, else 0.0.0.0)
//!   and forwards to its `defaultEndpoint`: `127.0.0.1:PORT` or
//!   `[::1]:PORT` (loopback), `0.0.0.0:PORT` or `[::]:PORT` (the
//!   proxy's own address), `unix:///path` (a Unix domain socket); none:
//!   127.0.0.1 at the same port. Its protocol picks HTTP or TCP.
//! - Its `tls` terminates TLS there in place of the mesh's mutual TLS,
//!   with the certificate and key files the settings name (mounted into
//!   the proxy), so the workload's PeerAuthentication does not apply to
//!   that port. `MUTUAL` requires a client certificate the
//!   `caCertificates` file signed, `OPTIONAL_MUTUAL` verifies one when
//!   offered; `PASSTHROUGH` (or no mode) forwards the connection as it
//!   came. After termination an `HTTPS` port speaks HTTP, a `TLS` port
//!   TCP.
//! - Its `connectionPool` limits its inbound cluster in place of the
//!   Sidecar's `inboundConnectionPool`.

use pilot_api::networking::{ConnectionPoolSettings, ServerTlsMode, ServerTlsSettings, TlsProtocol};
use pilot_model::Protocol;

/// An ingress listener.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct IngressPort {
    /// The port traffic arrives on.
    pub port: u16,
    /// Its protocol.
    pub protocol: Protocol,
    /// The address it listens on (empty: 0.0.0.0).
    pub bind: String,
    /// `captureMode: NONE`: it binds its address whatever the proxy's
    /// capture.
    pub uncaptured: bool,
    /// Where traffic goes.
    pub endpoint: DefaultEndpoint,
    /// TLS it terminates in place of the mesh's mutual TLS.
    pub tls: Option<IngressTls>,
    /// Its inbound cluster's limits: its own `connectionPool`, else the
    /// Sidecar's `inboundConnectionPool`.
    pub limits: Option<InboundLimits>,
}

/// Where an ingress listener forwards traffic.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DefaultEndpoint {
    /// A loopback address and port (`127.0.0.1:PORT`, `[::1]:PORT`).
    Loopback(String, u16),
    /// The proxy's own address at a port (`0.0.0.0:PORT`, `[::]:PORT`).
    InstanceIp(u16),
    /// A Unix domain socket's path (`unix:///path`).
    Unix(String),
}

/// Circuit breakers of the inbound clusters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct InboundLimits {
    /// `tcp.maxConnections`.
    pub max_connections: Option<u32>,
    /// `http.http1MaxPendingRequests`.
    pub max_pending_requests: Option<u32>,
    /// `http.http2MaxRequests`.
    pub max_requests: Option<u32>,
    /// `http.maxRetries`.
    pub max_retries: Option<u32>,
}

/// How an ingress listener treats TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IngressTlsMode {
    /// Forwarded as it came, not terminated.
    Passthrough,
    /// Terminated with the listener's certificate.
    Simple,
    /// Terminated; clients must present a certificate the CA signed.
    Mutual,
    /// Terminated; a client certificate is verified when presented.
    OptionalMutual,
}

/// An ingress listener's TLS settings (files on the proxy).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct IngressTls {
    /// How TLS is treated.
    pub mode: IngressTlsMode,
    /// Path of the certificate chain.
    pub server_certificate: String,
    /// Path of the private key.
    pub private_key: String,
    /// Path of the CA certificates that verify clients.
    pub ca_certificates: String,
    /// Path of a certificate revocation list.
    pub ca_crl: String,
    /// Lowest and highest TLS versions accepted (Envoy's numbering; 0:
    /// Envoy's default).
    pub versions: (i32, i32),
    /// Cipher suites offered (none: Envoy's default).
    pub cipher_suites: Vec<String>,
    /// Base64 SPKI hashes a client certificate must match.
    pub verify_certificate_spki: Vec<String>,
    /// Hex hashes a client certificate must match.
    pub verify_certificate_hash: Vec<String>,
}

impl DefaultEndpoint {
    /// Parses a `defaultEndpoint` (validation has refused other forms);
    /// empty: 127.0.0.1 at `port`.
    pub fn parse(text: &str, port: u16) -> Option<Self> {
        if text.is_empty() {
            return Some(DefaultEndpoint::Loopback("127.0.0.1".into(), port));
        }
        if let Some(path) = text.strip_prefix("unix://") {
            return (!path.is_empty()).then(|| DefaultEndpoint::Unix(path.to_string()));
        }
        let (host, port) = text.rsplit_once(':')?;
        let port: u16 = port.parse().ok()?;
        match host.trim_start_matches('[').trim_end_matches(']') {
            "0.0.0.0" | "::" => Some(DefaultEndpoint::InstanceIp(port)),
            loopback @ ("127.0.0.1" | "::1") => Some(DefaultEndpoint::Loopback(loopback.to_string(), port)),
            _ => None,
        }
    }
}

impl InboundLimits {
    /// The circuit breakers a connection pool's settings give.
    pub fn of(pool: &ConnectionPoolSettings) -> Self {
        let count = |n: Option<i32>| n.and_then(|n| u32::try_from(n).ok());
        let (tcp, http) = (pool.tcp.as_ref(), pool.http.as_ref());
        InboundLimits {
            max_connections: count(tcp.and_then(|t| t.max_connections)),
            max_pending_requests: count(http.and_then(|h| h.http1_max_pending_requests)),
            max_requests: count(http.and_then(|h| h.http2_max_requests)),
            max_retries: count(http.and_then(|h| h.max_retries)),
        }
    }
}

impl IngressTls {
    /// The settings of a Sidecar's ingress listener (validation has
    /// refused the modes and fields a sidecar does not take).
    pub fn of(settings: &ServerTlsSettings) -> Self {
        let mode = match settings.mode {
            Some(ServerTlsMode::Simple) => IngressTlsMode::Simple,
            Some(ServerTlsMode::Mutual) => IngressTlsMode::Mutual,
            Some(ServerTlsMode::OptionalMutual) => IngressTlsMode::OptionalMutual,
            _ => IngressTlsMode::Passthrough,
        };
        let version = |v: Option<TlsProtocol>| v.map_or(0, |v| v as i32);
        IngressTls {
            mode,
            server_certificate: settings.server_certificate.clone(),
            private_key: settings.private_key.clone(),
            ca_certificates: settings.ca_certificates.clone(),
            ca_crl: settings.ca_crl.clone(),
            versions: (
                version(settings.min_protocol_version),
                version(settings.max_protocol_version),
            ),
            cipher_suites: settings.cipher_suites.clone(),
            verify_certificate_spki: settings.verify_certificate_spki.clone(),
            verify_certificate_hash: settings.verify_certificate_hash.clone(),
        }
    }

    /// True when the listener terminates TLS.
    pub fn terminates(&self) -> bool {
        self.mode != IngressTlsMode::Passthrough
    }

    /// The protocol spoken after termination: HTTP for `HTTPS`, else the
    /// port's own.
    pub fn after_termination(&self, protocol: Protocol) -> Protocol {
        match protocol {
            Protocol::Https if self.terminates() => Protocol::Http,
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_endpoints_parse_as_istio_reads_them() {
        use DefaultEndpoint::*;
        assert_eq!(
            DefaultEndpoint::parse("", 80),
            Some(Loopback("127.0.0.1".into(), 80))
        );
        assert_eq!(
            DefaultEndpoint::parse("127.0.0.1:8080", 80),
            Some(Loopback("127.0.0.1".into(), 8080))
        );
        assert_eq!(
            DefaultEndpoint::parse("[::1]:8080", 80),
            Some(Loopback("::1".into(), 8080))
        );
        assert_eq!(DefaultEndpoint::parse("0.0.0.0:9", 80), Some(InstanceIp(9)));
        assert_eq!(DefaultEndpoint::parse("[::]:9", 80), Some(InstanceIp(9)));
        assert_eq!(
            DefaultEndpoint::parse("unix:///var/run/app.sock", 80),
            Some(Unix("/var/run/app.sock".into()))
        );
        assert_eq!(DefaultEndpoint::parse("10.0.0.1:80", 80), None);
    }
}
