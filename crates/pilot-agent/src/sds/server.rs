//! `envoy.service.secret.v3.SecretDiscoveryService` on a Unix socket,
//! state of the world: each stream is answered with the secrets it names
//! (`default`, `ROOTCA`) as soon as they exist, again whenever its names
//! change, and again after every renewal. ACKs need no answer; a NACK is
//! logged.

use std::pin::Pin;
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source::Specifier};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, Secret, TlsCertificate, secret,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::envoy::service::secret::v3::secret_discovery_service_server::{
    SecretDiscoveryService, SecretDiscoveryServiceServer,
};
use envoy_types::pb::google::protobuf::Any;
use futures::{Stream, StreamExt};
use prost::Message;
use tokio::net::UnixListener;
use tokio::sync::{mpsc, watch};

use super::{DEFAULT_SECRET, ROOT_SECRET, Secrets};

/// The bootstrap's cluster for the SDS socket.
pub const SDS_CLUSTER: &str = "sds-grpc";
/// The type URL of an SDS resource.
pub const SECRET_TYPE: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

type Responses = Pin<Box<dyn Stream<Item = Result<DiscoveryResponse, tonic::Status>> + Send>>;
type DeltaResponses = Pin<Box<dyn Stream<Item = Result<DeltaDiscoveryResponse, tonic::Status>> + Send>>;

/// Serves SDS on `listener` until the task is aborted.
pub(super) async fn serve(listener: UnixListener, secrets: watch::Receiver<Option<Arc<Secrets>>>) {
    let incoming = futures::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await.map(|(stream, _)| stream);
        Some((accepted, listener))
    });
    let service = SecretDiscoveryServiceServer::new(SdsService { secrets });
    if let Err(error) = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming(incoming)
        .await
    {
        tracing::error!(%error, "the SDS server stopped");
    }
}

struct SdsService {
    secrets: watch::Receiver<Option<Arc<Secrets>>>,
}

#[tonic::async_trait]
impl SecretDiscoveryService for SdsService {
    type DeltaSecretsStream = DeltaResponses;
    type StreamSecretsStream = Responses;

    async fn delta_secrets(
        &self,
        _request: tonic::Request<tonic::Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<tonic::Response<DeltaResponses>, tonic::Status> {
        Err(tonic::Status::unimplemented(
            "this SDS server speaks state of the world (api_type: GRPC)",
        ))
    }

    async fn stream_secrets(
        &self,
        request: tonic::Request<tonic::Streaming<DiscoveryRequest>>,
    ) -> Result<tonic::Response<Responses>, tonic::Status> {
        let (tx, rx) = mpsc::channel(4);
        tokio::spawn(stream(request.into_inner(), self.secrets.clone(), tx));
        let responses = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
        Ok(tonic::Response::new(responses.boxed()))
    }

    async fn fetch_secrets(
        &self,
        request: tonic::Request<DiscoveryRequest>,
    ) -> Result<tonic::Response<DiscoveryResponse>, tonic::Status> {
        let current = self.secrets.borrow().clone();
        let secrets = current.ok_or_else(|| tonic::Status::unavailable("no certificate issued yet"))?;
        Ok(tonic::Response::new(response(
            &request.into_inner().resource_names,
            &secrets,
            0,
        )))
    }
}

/// One SDS stream: answers the names asked, and every renewal.
async fn stream(
    mut requests: tonic::Streaming<DiscoveryRequest>,
    mut secrets: watch::Receiver<Option<Arc<Secrets>>>,
    responses: mpsc::Sender<Result<DiscoveryResponse, tonic::Status>>,
) {
    let mut names: Option<Vec<String>> = None;
    let mut sent_version = 0;
    let mut nonce = 0u64;
    loop {
        tokio::select! {
            request = requests.next() => {
                let request = match request {
                    Some(Ok(request)) => request,
                    Some(Err(status)) => {
                        tracing::debug!(%status, "SDS stream ended");
                        return;
                    }
                    None => return,
                };
                if let Some(error) = &request.error_detail {
                    tracing::warn!(names = ?request.resource_names, error = %error.message, "Envoy rejected a secret");
                }
                if names.as_ref() == Some(&request.resource_names) {
                    continue; // an ACK or NACK of what was sent
                }
                names = Some(request.resource_names);
                sent_version = 0;
            }
            changed = secrets.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
        let current = secrets.borrow_and_update().clone();
        if let (Some(names), Some(current)) = (&names, current)
            && current.version != sent_version
        {
            nonce += 1;
            if responses
                .send(Ok(response(names, &current, nonce)))
                .await
                .is_err()
            {
                return;
            }
            sent_version = current.version;
        }
    }
}

/// A response with the secrets of `names` that exist.
fn response(names: &[String], secrets: &Secrets, nonce: u64) -> DiscoveryResponse {
    let resources = names
        .iter()
        .filter_map(|name| secret(name, secrets))
        .map(|secret| Any {
            type_url: SECRET_TYPE.into(),
            value: secret.encode_to_vec(),
        })
        .collect();
    DiscoveryResponse {
        version_info: secrets.version.to_string(),
        resources,
        type_url: SECRET_TYPE.into(),
        nonce: nonce.to_string(),
        ..Default::default()
    }
}

/// The secret called `name`, if it is one this server has.
fn secret(name: &str, secrets: &Secrets) -> Option<Secret> {
    let inline = |text: &str| {
        Some(DataSource {
            specifier: Some(Specifier::InlineBytes(text.as_bytes().to_vec())),
            ..Default::default()
        })
    };
    let kind = match name {
        DEFAULT_SECRET => secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: inline(&secrets.chain_pem),
            private_key: inline(&secrets.key_pem),
            ..Default::default()
        }),
        ROOT_SECRET => secret::Type::ValidationContext(CertificateValidationContext {
            trusted_ca: inline(&secrets.root_pem),
            ..Default::default()
        }),
        _ => return None,
    };
    Some(Secret {
        name: name.to_string(),
        r#type: Some(kind),
    })
}
