//! A small HTTP/1.1 client for the pilot REST API: one connection per
//! request, plain or TLS, bearer token when configured.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::Failure;

/// Where the server is and how to talk to it.
pub(crate) struct Client {
    scheme_https: bool,
    host: String,
    port: u16,
    authority: String,
    prefix: String,
    token: Option<String>,
    tls: Option<tokio_rustls::TlsConnector>,
    /// The server URL as given, for messages.
    pub url: String,
    /// Where the server URL came from, for messages.
    pub origin: String,
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl Client {
    /// A client for `url` (`http://host:port` or `https://...`).
    pub(crate) fn new(
        url: &str,
        origin: String,
        token: Option<String>,
        ca_file: Option<&std::path::Path>,
    ) -> Result<Self, Failure> {
        let uri: Uri = url.parse().map_err(|e| {
            Failure::usage(format!(
                "server address {url:?} (from {origin}) is not a URL: {e}"
            ))
        })?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => {
                return Err(Failure::usage(format!(
                    "server address {url:?} (from {origin}) must start with http:// or https://"
                )));
            }
        };
        let authority = uri
            .authority()
            .ok_or_else(|| Failure::usage(format!("server address {url:?} has no host")))?;
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let tls = if https {
            Some(tls_connector(ca_file)?)
        } else {
            None
        };
        Ok(Client {
            scheme_https: https,
            host: authority
                .host()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port,
            authority: authority.to_string(),
            prefix: uri.path().trim_end_matches('/').to_string(),
            token,
            tls,
            url: url.to_string(),
            origin,
        })
    }

    /// Sends one request; the status and body of the answer.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(StatusCode, Bytes), Failure> {
        let unreachable = |error: String| {
            Failure::failed(format!(
                "cannot reach the pilot server at {} ({}): {error}; is pilot-discovery running there? \
                 Set --server, PILOT_SERVER or server: in the config file",
                self.url, self.origin
            ))
        };
        let connect = TcpStream::connect((self.host.as_str(), self.port));
        let stream = tokio::time::timeout(Duration::from_secs(10), connect)
            .await
            .map_err(|_| unreachable("timed out connecting".into()))?
            .map_err(|e| unreachable(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let io: Box<dyn Io> = match (&self.tls, self.scheme_https) {
            (Some(tls), true) => {
                let name = rustls_pki_types::ServerName::try_from(self.host.clone())
                    .map_err(|e| Failure::usage(format!("bad server name {}: {e}", self.host)))?;
                Box::new(
                    tls.connect(name, stream)
                        .await
                        .map_err(|e| unreachable(format!("TLS handshake failed: {e}")))?,
                )
            }
            _ => Box::new(stream),
        };
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let driver = tokio::spawn(connection);
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.prefix))
            .header(header::HOST, &self.authority)
            .header(header::ACCEPT, "application/json");
        if let Some(token) = &self.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| Failure::failed(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| unreachable(e.to_string()))?
            .to_bytes();
        driver.abort();
        Ok((status, body))
    }
}

fn tls_connector(ca_file: Option<&std::path::Path>) -> Result<tokio_rustls::TlsConnector, Failure> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let Some(ca_file) = ca_file else {
        return Err(Failure::usage(
            "an https server needs the CA that signed its certificate: --ca-file FILE (or ca-file: in the config file)",
        ));
    };
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(ca_file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| Failure::usage(format!("cannot read the CA file {}: {e}", ca_file.display())))?;
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| Failure::usage(format!("bad CA certificate in {}: {e}", ca_file.display())))?;
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| Failure::failed(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}
