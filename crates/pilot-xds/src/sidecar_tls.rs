//! TLS on a Sidecar's ingress listener (`ingress[].tls`), as Istio reads
//! it: the listener terminates TLS with the certificate and key files the
//! settings name (mounted into the proxy), in place of the mesh's mutual
//! TLS, so the workload's PeerAuthentication does not apply to that port.
//! `MUTUAL` requires a client certificate the `caCertificates` file
//! signed, `OPTIONAL_MUTUAL` verifies one when offered; `PASSTHROUGH`
//! (or no mode) forwards the connection as it came. After termination
//! an `HTTPS` port speaks HTTP, a `TLS` port TCP.
//!
//! Where HTTP follows the termination (`HTTPS`, `HTTP`, `HTTP2`, `GRPC`
//! ports), the listener offers ALPN `h2` and `http/1.1` ([`HTTP_ALPN`],
//! Istio's `ALPNHttp`), so a client speaking HTTP/2 negotiates it; the
//! connection manager serves either. Istio offers the same on ports of
//! every protocol; a port forwarding TCP offers none here, since a client
//! told `h2` would speak HTTP/2 to an application that may not.

use envoy_types::pb::envoy::config::core::v3::{DataSource, TransportSocket, data_source, transport_socket};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, TlsCertificate, TlsParameters,
    common_tls_context,
};
use envoy_types::pb::google::protobuf::BoolValue;
use pilot_api::networking::{ServerTlsMode, ServerTlsSettings, TlsProtocol};
use pilot_model::Protocol;

use crate::util::any;

/// The ALPN values a listener offers where it terminates TLS for HTTP:
/// HTTP/2 first, then HTTP/1.1 (Istio's `ALPNHttp`).
pub(crate) const HTTP_ALPN: [&str; 2] = ["h2", "http/1.1"];

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

    /// The transport socket terminating TLS, offering [`HTTP_ALPN`] when
    /// `protocol` (the one spoken after termination) is HTTP; `None` for
    /// passthrough.
    pub(crate) fn transport_socket(&self, protocol: Protocol) -> Option<TransportSocket> {
        if !self.terminates() {
            return None;
        }
        let file = |path: &str| {
            (!path.is_empty()).then(|| DataSource {
                specifier: Some(data_source::Specifier::Filename(path.to_string())),
                ..Default::default()
            })
        };
        let mut common = CommonTlsContext {
            tls_certificates: vec![TlsCertificate {
                certificate_chain: file(&self.server_certificate),
                private_key: file(&self.private_key),
                ..Default::default()
            }],
            alpn_protocols: alpn(protocol),
            ..Default::default()
        };
        let (min, max) = self.versions;
        if min != 0 || max != 0 || !self.cipher_suites.is_empty() {
            common.tls_params = Some(TlsParameters {
                tls_minimum_protocol_version: min,
                tls_maximum_protocol_version: max,
                cipher_suites: self.cipher_suites.clone(),
                ..Default::default()
            });
        }
        if self.mode != IngressTlsMode::Simple {
            common.validation_context_type = Some(
                common_tls_context::ValidationContextType::ValidationContext(CertificateValidationContext {
                    trusted_ca: file(&self.ca_certificates),
                    crl: file(&self.ca_crl),
                    verify_certificate_spki: self.verify_certificate_spki.clone(),
                    verify_certificate_hash: self.verify_certificate_hash.clone(),
                    ..Default::default()
                }),
            );
        }
        let context = DownstreamTlsContext {
            common_tls_context: Some(common),
            require_client_certificate: (self.mode == IngressTlsMode::Mutual)
                .then_some(BoolValue { value: true }),
            ..Default::default()
        };
        Some(TransportSocket {
            name: "envoy.transport_sockets.tls".into(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(any(&context))),
        })
    }
}

/// The ALPN values a listener terminating TLS offers where `protocol`
/// follows: [`HTTP_ALPN`] for HTTP, none otherwise.
pub(crate) fn alpn(protocol: Protocol) -> Vec<String> {
    if protocol.is_http() {
        HTTP_ALPN.iter().map(|p| p.to_string()).collect()
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::protobuf::Any;
    use prost::Message;

    fn context(socket: TransportSocket) -> DownstreamTlsContext {
        let Some(transport_socket::ConfigType::TypedConfig(Any { value, .. })) = socket.config_type else {
            panic!("typed config");
        };
        DownstreamTlsContext::decode(value.as_slice()).unwrap()
    }

    fn settings(mode: ServerTlsMode) -> ServerTlsSettings {
        ServerTlsSettings {
            mode: Some(mode),
            server_certificate: "/etc/certs/cert.pem".into(),
            private_key: "/etc/certs/key.pem".into(),
            ca_certificates: "/etc/certs/ca.pem".into(),
            min_protocol_version: Some(TlsProtocol::TlsV1_2),
            ..Default::default()
        }
    }

    #[test]
    fn simple_terminates_with_the_files_and_asks_no_client_certificate() {
        let tls = IngressTls::of(&settings(ServerTlsMode::Simple));
        assert_eq!(tls.after_termination(Protocol::Https), Protocol::Http);
        assert_eq!(tls.after_termination(Protocol::Tcp), Protocol::Tcp);
        let context = context(tls.transport_socket(Protocol::Http).unwrap());
        assert_eq!(context.require_client_certificate, None);
        let common = context.common_tls_context.unwrap();
        assert_eq!(common.alpn_protocols, ["h2", "http/1.1"]);
        assert_eq!(common.validation_context_type, None);
        let certificate = &common.tls_certificates[0];
        assert_eq!(
            certificate.certificate_chain.as_ref().unwrap().specifier,
            Some(data_source::Specifier::Filename("/etc/certs/cert.pem".into()))
        );
        assert_eq!(
            certificate.private_key.as_ref().unwrap().specifier,
            Some(data_source::Specifier::Filename("/etc/certs/key.pem".into()))
        );
        assert_eq!(common.tls_params.unwrap().tls_minimum_protocol_version, 3);
    }

    #[test]
    fn mutual_requires_a_client_certificate_from_the_ca() {
        let context = context(
            IngressTls::of(&settings(ServerTlsMode::Mutual))
                .transport_socket(Protocol::Tcp)
                .unwrap(),
        );
        assert_eq!(
            context.require_client_certificate,
            Some(BoolValue { value: true })
        );
        let common = context.common_tls_context.unwrap();
        assert!(common.alpn_protocols.is_empty(), "TCP after termination: no ALPN");
        let Some(common_tls_context::ValidationContextType::ValidationContext(validation)) =
            common.validation_context_type
        else {
            panic!("a validation context");
        };
        assert_eq!(
            validation.trusted_ca.unwrap().specifier,
            Some(data_source::Specifier::Filename("/etc/certs/ca.pem".into()))
        );
        let optional = context_of(ServerTlsMode::OptionalMutual);
        assert_eq!(optional.require_client_certificate, None);
        assert!(
            optional
                .common_tls_context
                .unwrap()
                .validation_context_type
                .is_some()
        );
    }

    fn context_of(mode: ServerTlsMode) -> DownstreamTlsContext {
        context(
            IngressTls::of(&settings(mode))
                .transport_socket(Protocol::Grpc)
                .unwrap(),
        )
    }

    #[test]
    fn passthrough_terminates_nothing() {
        let tls = IngressTls::of(&settings(ServerTlsMode::Passthrough));
        assert!(tls.transport_socket(Protocol::Http).is_none());
        assert_eq!(tls.after_termination(Protocol::Https), Protocol::Https);
    }
}
