//! Getting and renewing the workload certificate from pilot-discovery's
//! CA: a new key and CSR each time, the ADS credentials on the call, the
//! answer checked against the pinned mesh roots ([`super::trust`]) before
//! it is served.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use pilot_ca::WorkloadKey;
use tokio::sync::watch;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use super::trust::{self, Accepted, Pinned, RootPinning};
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

/// Fetches a certificate, checks it against the pinned roots, publishes
/// it, sleeps half its life, and again, forever; failures and refused
/// answers are logged, kept in `last_error` and retried with backoff (the
/// current certificate stays served).
pub(super) async fn renew(
    options: SdsOptions,
    mut pinned: Pinned,
    secrets: watch::Sender<Option<Arc<Secrets>>>,
    last_error: Arc<Mutex<Option<String>>>,
) {
    let mut version = 0;
    let mut backoff = FIRST_BACKOFF;
    let set_error = |error: Option<String>| {
        if let Ok(mut last) = last_error.lock() {
            *last = error;
        }
    };
    loop {
        let asked = SystemTime::now();
        match fetch(&options, &pinned)
            .await
            .and_then(|answer| pin(&options, &pinned, answer))
        {
            Ok((accepted, key_pem)) => {
                version += 1;
                backoff = FIRST_BACKOFF;
                pinned = accepted.pinned;
                set_error(None);
                let not_after = asked + options.ttl;
                tracing::info!(identity = %options.identity, version, ttl = ?options.ttl, "workload certificate issued");
                secrets.send_replace(Some(Arc::new(Secrets {
                    version,
                    chain_pem: accepted.chain_pem,
                    key_pem,
                    root_pem: accepted.bundle_pem,
                    not_after,
                })));
                tokio::time::sleep(options.ttl / 2).await;
            }
            Err(error) => {
                tracing::warn!(%error, retry_in = ?backoff, "workload certificate request failed; the certificates served before stay served");
                set_error(Some(error));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// The roots `answer` pins beyond `pinned`: logged, and stored when the
/// agent keeps them (a root not stored is not served).
fn pin(
    options: &SdsOptions,
    pinned: &Pinned,
    (accepted, key_pem): (Accepted, String),
) -> Result<(Accepted, String), String> {
    if accepted.added.is_empty() {
        return Ok((accepted, key_pem));
    }
    if pinned.is_empty() {
        tracing::warn!(
            ca = %options.ca_address,
            roots = ?accepted.added,
            store = %options.pinning.path().display(),
            "trust on first use: the mesh roots of the CA's first answer are pinned"
        );
    } else {
        tracing::info!(
            ca = %options.ca_address,
            roots = ?accepted.added,
            pinned = accepted.pinned.len(),
            "mesh root rotation: new roots cross-signed by a pinned root are pinned"
        );
    }
    if let RootPinning::FirstUse(path) = &options.pinning {
        accepted
            .pinned
            .store(path)
            .map_err(|e| format!("storing the pinned mesh roots: {e}"))?;
    }
    Ok((accepted, key_pem))
}

/// The token to send now: the token file's content (rotated tokens are
/// picked up), else the one read at start.
fn current_token(options: &SdsOptions) -> Option<String> {
    let reread = options.token_file.as_deref().map(crate::args::read_token);
    match reread {
        Some(Ok(token)) => Some(token),
        Some(Err(error)) => {
            tracing::warn!(%error, "sending the token read earlier");
            options.auth.token.clone()
        }
        None => options.auth.token.clone(),
    }
}

/// One request, its answer checked: what to serve, and the key.
async fn fetch(options: &SdsOptions, pinned: &Pinned) -> Result<(Accepted, String), String> {
    let key = WorkloadKey::generate().map_err(|e| e.to_string())?;
    let csr = key.csr_pem(&options.identity).map_err(|e| e.to_string())?;
    let own_key = trust::csr_public_key(&csr)?;
    let mut request = tonic::Request::new(IstioCertificateRequest {
        csr,
        validity_duration: i64::try_from(options.ttl.as_secs()).unwrap_or(i64::MAX),
    });
    request.set_timeout(REQUEST_TIMEOUT);
    if let Some(token) = &current_token(options) {
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
        .map_err(|status| {
            format!(
                "{}: {:?}: {}",
                options.ca_address,
                status.code(),
                status.message()
            )
        })?;
    let chain = response.into_inner().cert_chain;
    let accepted = trust::check_answer(
        &chain,
        &own_key,
        &options.identity.uri(),
        pinned,
        SystemTime::now(),
    )
    .map_err(|why| format!("the answer of the CA at {} is refused: {why}", options.ca_address))?;
    Ok((accepted, key.private_key_pem()))
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
