//! Getting and renewing the workload certificate from pilot-discovery's
//! CA: a new key and CSR each time, the ADS credentials on the call.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use pilot_ca::WorkloadKey;
use tokio::sync::watch;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use super::{SdsOptions, Secrets};

/// The first retry after a failed request; doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between failed requests.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A request's deadline.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Istio's `IstioCertificateRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct IstioCertificateRequest {
    #[prost(string, tag = "1")]
    csr: String,
    #[prost(int64, tag = "3")]
    validity_duration: i64,
}

/// Istio's `IstioCertificateResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct IstioCertificateResponse {
    #[prost(string, repeated, tag = "1")]
    cert_chain: Vec<String>,
}

/// Fetches a certificate, publishes it, sleeps half its life, and again,
/// forever; failures are logged and retried with backoff (the current
/// certificate stays served).
pub(super) async fn renew(options: SdsOptions, secrets: watch::Sender<Option<Arc<Secrets>>>) {
    let mut version = 0;
    let mut backoff = FIRST_BACKOFF;
    loop {
        let asked = SystemTime::now();
        match fetch(&options).await {
            Ok((chain_pem, key_pem, root_pem)) => {
                version += 1;
                backoff = FIRST_BACKOFF;
                let not_after = asked + options.ttl;
                tracing::info!(identity = %options.identity, version, ttl = ?options.ttl, "workload certificate issued");
                secrets.send_replace(Some(Arc::new(Secrets {
                    version,
                    chain_pem,
                    key_pem,
                    root_pem,
                    not_after,
                })));
                tokio::time::sleep(options.ttl / 2).await;
            }
            Err(error) => {
                tracing::warn!(%error, retry_in = ?backoff, "workload certificate request failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// One request: the chain (leaf and intermediates), the key and the root.
async fn fetch(options: &SdsOptions) -> Result<(String, String, String), String> {
    let key = WorkloadKey::generate().map_err(|e| e.to_string())?;
    let csr = key.csr_pem(&options.identity).map_err(|e| e.to_string())?;
    let mut request = tonic::Request::new(IstioCertificateRequest {
        csr,
        validity_duration: i64::try_from(options.ttl.as_secs()).unwrap_or(i64::MAX),
    });
    request.set_timeout(REQUEST_TIMEOUT);
    if let Some(token) = &options.auth.token {
        let value = format!("Bearer {token}")
            .parse()
            .map_err(|_| "the token is not a valid header value".to_string())?;
        request.metadata_mut().insert("authorization", value);
    }
    let channel = channel(options).await?;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| format!("{}: {e}", options.ca_address))?;
    let path =
        http::uri::PathAndQuery::from_static("/istio.v1.auth.IstioCertificateService/CreateCertificate");
    let response: tonic::Response<IstioCertificateResponse> = grpc
        .unary(request, path, tonic_prost::ProstCodec::default())
        .await
        .map_err(|status| format!("{:?}: {}", status.code(), status.message()))?;
    let mut chain = response.into_inner().cert_chain;
    if chain.len() < 2 {
        return Err(format!(
            "the CA answered {} certificates, expected a leaf and a root",
            chain.len()
        ));
    }
    let root = chain.pop().unwrap_or_default();
    Ok((chain.concat(), key.private_key_pem(), root))
}

/// A channel to the CA, over TLS when the ADS connection is.
async fn channel(options: &SdsOptions) -> Result<Channel, String> {
    let tls = options.auth.tls.as_ref();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{}", options.ca_address))
        .map_err(|e| format!("{}: {e}", options.ca_address))?
        .connect_timeout(REQUEST_TIMEOUT);
    if let Some(tls) = tls {
        let read =
            |path: &std::path::Path| std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()));
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(&tls.ca_file)?));
        if let Some(name) = &tls.server_name {
            config = config.domain_name(name.clone());
        }
        if let Some((cert, key)) = &tls.client {
            config = config.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        endpoint = endpoint.tls_config(config).map_err(|e| e.to_string())?;
    }
    endpoint
        .connect()
        .await
        .map_err(|e| format!("{}: {e}", options.ca_address))
}
