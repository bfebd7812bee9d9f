//! One call of an admission webhook, as the API server makes it: `POST`
//! of the review to `clientConfig.url` over HTTPS (HTTP/1.1), the server's
//! certificate verified against `clientConfig.caBundle` (base64 PEM; with
//! none, the call fails: the fake has no system roots to fall back on),
//! within `timeoutSeconds` (default 10); the answer must be 200 with an
//! `AdmissionReview` v1 whose `response.uid` is the request's.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;

/// Calls `webhook` with `review`: its `response`, or why the call failed
/// (the failure policy decides what that means).
pub(crate) async fn call(webhook: &Value, review: &Value, uid: &str) -> Result<Value, String> {
    let config = &webhook["clientConfig"];
    let Some(url) = config["url"].as_str() else {
        return Err(if config["service"].is_object() {
            "the fake API server cannot resolve clientConfig.service (it has no endpoints to reach); give clientConfig.url".into()
        } else {
            "the webhook has no clientConfig.url".into()
        });
    };
    let timeout = Duration::from_secs(webhook["timeoutSeconds"].as_u64().unwrap_or(10).clamp(1, 30));
    let body = serde_json::to_vec(review).unwrap_or_default();
    let answer = tokio::time::timeout(timeout, post(url, config["caBundle"].as_str(), body))
        .await
        .map_err(|_| {
            format!("failed to call webhook: Post {url:?}: context deadline exceeded ({timeout:?})")
        })?
        .map_err(|e| format!("failed to call webhook: Post {url:?}: {e}"))?;
    let review: Value =
        serde_json::from_slice(&answer).map_err(|e| format!("received invalid webhook response: {e}"))?;
    if review["apiVersion"] != "admission.k8s.io/v1" || review["kind"] != "AdmissionReview" {
        return Err(format!(
            "received invalid webhook response: expected admission.k8s.io/v1 AdmissionReview, got {} {}",
            review["apiVersion"], review["kind"]
        ));
    }
    let response = review["response"].clone();
    if response["uid"] != uid {
        return Err(format!("expected response.uid={uid:?}, got {}", response["uid"]));
    }
    Ok(response)
}

/// The body of a 200 answer to the POST.
async fn post(url: &str, ca_bundle: Option<&str>, body: Vec<u8>) -> Result<Bytes, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("invalid URL: {e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err("webhook URLs must be https".into());
    }
    let host = uri
        .host()
        .ok_or("the URL has no host")?
        .trim_matches(['[', ']'])
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let mut roots = RootCertStore::empty();
    let pem = ca_bundle
        .filter(|b| !b.is_empty())
        .and_then(base64_decode)
        .ok_or("x509: certificate signed by unknown authority (the webhook has no caBundle)")?;
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
        roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(host.clone()).map_err(|e| format!("server name {host:?}: {e}"))?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("dial tcp {host}:{port}: {e}"))?;
    let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let request = http::Request::post(path)
        .header(http::header::HOST, format!("{host}:{port}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let result = async {
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        if status != http::StatusCode::OK {
            return Err(format!(
                "the server answered {status}: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(512)])
            ));
        }
        Ok(bytes)
    }
    .await;
    driver.abort();
    result
}

/// Standard base64 (padding optional), or `None` for anything else.
pub(crate) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for byte in text.trim().trim_end_matches('=').bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((buffer >> bits) & 0xff).unwrap_or_default());
            buffer &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_rfc4648_vectors() {
        for (encoded, decoded) in [
            ("", ""),
            ("Zg==", "f"),
            ("Zm8=", "fo"),
            ("Zm9v", "foo"),
            ("Zm9vYmFy", "foobar"),
        ] {
            assert_eq!(base64_decode(encoded).unwrap(), decoded.as_bytes());
        }
        assert_eq!(base64_decode("Zm9v!"), None);
    }
}
