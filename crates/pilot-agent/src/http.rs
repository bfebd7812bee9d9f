//! A small HTTP/1.1 client (one connection per request) for Envoy's admin
//! endpoint and pilot-discovery's REST API. Plain HTTP only.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

use crate::AgentError;

/// One request to `url`; the status and body, or an error naming the URL.
pub(crate) async fn request(
    method: Method,
    url: &str,
    body: Option<Vec<u8>>,
    token: Option<&str>,
    timeout: Duration,
) -> Result<(StatusCode, Bytes), AgentError> {
    let fail = |message: String| AgentError::Http {
        url: url.to_string(),
        message,
    };
    let call = async {
        let uri: Uri = url.parse().map_err(|e| fail(format!("not a URL: {e}")))?;
        if uri.scheme_str() != Some("http") {
            return Err(fail("only http:// URLs are supported".into()));
        }
        let host = uri.host().ok_or_else(|| fail("no host".into()))?.to_string();
        let port = uri.port_u16().unwrap_or(80);
        let stream =
            tokio::net::TcpStream::connect((host.trim_start_matches('[').trim_end_matches(']'), port))
                .await
                .map_err(|e| fail(e.to_string()))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| fail(e.to_string()))?;
        let driver = tokio::spawn(connection);
        let mut builder = Request::builder()
            .method(method)
            .uri(uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"))
            .header(http::header::HOST, format!("{host}:{port}"));
        if body.is_some() {
            builder = builder.header(http::header::CONTENT_TYPE, "application/json");
        }
        if let Some(token) = token {
            builder = builder.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = builder
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| fail(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| fail(e.to_string()))?
            .to_bytes();
        driver.abort();
        Ok((status, bytes))
    };
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| fail(format!("no answer within {timeout:?}")))?
}
