//! Keeps the `ValidatingWebhookConfiguration` named by
//! `--validation-webhook-config` pointing at this server's `/validate`, as
//! istiod's webhook controller does:
//!
//! 1. the CA that verifies the webhook listener's certificate
//!    (`--webhook-ca-bundle`, or the last certificate of the `--tls-cert`
//!    chain) is written into every webhook's `clientConfig.caBundle`, the
//!    `failurePolicy` left as it is (`Ignore` as shipped: while the API
//!    server cannot call the webhook, writes are not blocked);
//! 2. a self-test: a dry-run create (`dryRun=All`, nothing stored) of an
//!    invalid VirtualService, which the API server sends to the webhook. When
//!    the answer is the webhook's denial, the webhook is reachable and
//!    trusted, and every webhook of the configuration is set to
//!    `failurePolicy: Fail`; until then the self-test is retried with
//!    backoff;
//! 3. then the CA file and the configuration are checked again every
//!    [`RECHECK`] (a rotated certificate, or a configuration re-applied
//!    with an empty caBundle or `Ignore`, is patched again).
//!
//! Every step is logged with what it found. The configuration must match
//! VirtualServices (`networking.istio.io`) for the self-test to reach the
//! webhook; the CRDs must be installed (`--install-crds`). RBAC: `get` and
//! `update` of the configuration, `create` of virtualservices (dry run).

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use tokio::sync::watch;

use crate::args::Args;

/// How often the CA file and the configuration are checked once the
/// webhook is set to `Fail`.
pub(crate) const RECHECK: Duration = Duration::from_secs(10);

/// The name of the self-test's VirtualService (a dry run: never stored).
const SELF_TEST_NAME: &str = "pilot-webhook-self-test";

/// The longest wait between two attempts while the self-test fails.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What the controller keeps, from the flags.
pub(crate) struct ValidationConfig {
    name: String,
    ca: CaSource,
    /// Where the self-test's object is created (dry run).
    namespace: String,
    /// The in-cluster client's service-account directory.
    service_account_dir: PathBuf,
}

/// Where the caBundle comes from.
enum CaSource {
    /// `--webhook-ca-bundle`: the file as it is.
    Bundle(PathBuf),
    /// The last certificate of the `--tls-cert` chain.
    ChainIssuer(PathBuf),
}

/// What one pass found.
#[derive(Debug, PartialEq, Eq)]
enum Pass {
    /// The caBundle is current and every webhook fails closed.
    Settled,
    /// The self-test did not get the webhook's denial yet.
    NotYet,
}

impl ValidationConfig {
    /// The controller the flags ask for, if any.
    pub(crate) fn from_args(args: &Args) -> Option<Self> {
        let name = args.validation_webhook_config.clone()?;
        let ca = match (&args.webhook_ca_bundle, &args.tls_cert) {
            (Some(bundle), _) => CaSource::Bundle(bundle.clone()),
            (None, Some(chain)) => CaSource::ChainIssuer(chain.clone()),
            // Refused by the flags (`--inject-webhook` needs `--tls-cert`).
            (None, None) => return None,
        };
        Some(ValidationConfig {
            name,
            ca,
            namespace: args.kube_namespace.clone().unwrap_or_else(|| "default".into()),
            service_account_dir: args.kube_service_account_dir.clone(),
        })
    }

    /// Runs until `shutdown` turns true.
    pub(crate) async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let mut backoff = Duration::from_millis(250);
        let mut client = None;
        loop {
            let wait = match &client {
                None => match crate::backend::kube_client(&self.service_account_dir).await {
                    Ok(made) => {
                        client = Some(made);
                        Duration::ZERO
                    }
                    Err(e) => {
                        tracing::warn!(configuration = %self.name, error = %e, "validation webhook: no Kubernetes client yet");
                        backoff
                    }
                },
                Some(client) => match self.pass(client).await {
                    Ok(Pass::Settled) => {
                        backoff = Duration::from_millis(250);
                        RECHECK
                    }
                    Ok(Pass::NotYet) => backoff,
                    Err(e) => {
                        tracing::warn!(configuration = %self.name, error = %e, retry_in = ?backoff, "validation webhook: cannot update the configuration");
                        backoff
                    }
                },
            };
            if wait == backoff {
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = shutdown.wait_for(|closing| *closing) => return,
            }
        }
    }

    /// One pass: the caBundle written if it differs, the self-test run while
    /// a webhook does not fail closed, and then `Fail` set.
    async fn pass(&self, client: &kube::Client) -> Result<Pass, String> {
        let bundle = self.ca_bundle()?;
        let configurations: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        let mut configuration = configurations
            .get(&self.name)
            .await
            .map_err(|e| format!("ValidatingWebhookConfiguration {:?}: {e}", self.name))?;
        let webhooks = configuration.webhooks.get_or_insert_default();
        if webhooks.is_empty() {
            return Err(format!(
                "ValidatingWebhookConfiguration {:?} has no webhooks",
                self.name
            ));
        }
        let stale = webhooks
            .iter()
            .any(|w| w.client_config.ca_bundle.as_ref().map(|b| &b.0) != Some(&bundle));
        if stale {
            for webhook in webhooks.iter_mut() {
                webhook.client_config.ca_bundle = Some(ByteString(bundle.clone()));
            }
            configuration = configurations
                .replace(&self.name, &PostParams::default(), &configuration)
                .await
                .map_err(|e| format!("writing the caBundle of {:?}: {e}", self.name))?;
            tracing::info!(configuration = %self.name, "validation webhook: caBundle written");
        }
        let names: Vec<String> = configuration
            .webhooks
            .iter()
            .flatten()
            .map(|w| w.name.clone())
            .collect();
        let failing_open = configuration
            .webhooks
            .iter()
            .flatten()
            .any(|w| w.failure_policy.as_deref() != Some("Fail"));
        if !failing_open {
            return Ok(Pass::Settled);
        }
        match self.self_test(client, &names).await {
            Ok(()) => {}
            Err(why) => {
                tracing::info!(configuration = %self.name, %why, "validation webhook: self-test not passed yet; failurePolicy stays as it is");
                return Ok(Pass::NotYet);
            }
        }
        for webhook in configuration.webhooks.iter_mut().flatten() {
            webhook.failure_policy = Some("Fail".into());
        }
        configurations
            .replace(&self.name, &PostParams::default(), &configuration)
            .await
            .map_err(|e| format!("setting failurePolicy Fail on {:?}: {e}", self.name))?;
        tracing::info!(configuration = %self.name, "validation webhook: self-test denied as expected; failurePolicy set to Fail");
        Ok(Pass::Settled)
    }

    /// A dry-run create of an invalid VirtualService: `Ok` when the API
    /// server answers with the denial of one of `webhooks`.
    async fn self_test(&self, client: &kube::Client, webhooks: &[String]) -> Result<(), String> {
        let gvk = GroupVersionKind::gvk("networking.istio.io", "v1", "VirtualService");
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            &self.namespace,
            &ApiResource::from_gvk_with_plural(&gvk, "virtualservices"),
        );
        let invalid: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "networking.istio.io/v1",
            "kind": "VirtualService",
            "metadata": {"name": SELF_TEST_NAME, "namespace": self.namespace,
                "labels": {"app.kubernetes.io/component": "webhook-self-test"}},
            "spec": {"hosts": ["invalid host: pilot's validating webhook self-test"],
                "http": [{"route": [{"destination": {"host": "self-test"}}]}]},
        }))
        .map_err(|e| e.to_string())?;
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        match api.create(&dry_run, &invalid).await {
            Ok(_) => Err("the API server admitted an invalid VirtualService (the webhook was not called, or its call failed and was ignored)".into()),
            Err(kube::Error::Api(status))
                if webhooks
                    .iter()
                    .any(|name| status.message.contains(&format!("admission webhook \"{name}\" denied the request"))) =>
            {
                Ok(())
            }
            Err(e) => Err(format!("the dry-run create failed otherwise: {e}")),
        }
    }

    /// The PEM written into the caBundle.
    fn ca_bundle(&self) -> Result<Vec<u8>, String> {
        match &self.ca {
            CaSource::Bundle(path) => {
                let pem = std::fs::read(path)
                    .map_err(|e| format!("--webhook-ca-bundle {}: {e}", path.display()))?;
                let count = CertificateDer::pem_slice_iter(&pem).filter(Result::is_ok).count();
                if count == 0 {
                    return Err(format!(
                        "--webhook-ca-bundle {}: no PEM certificate in it",
                        path.display()
                    ));
                }
                Ok(pem)
            }
            CaSource::ChainIssuer(path) => {
                let pem = std::fs::read(path).map_err(|e| format!("--tls-cert {}: {e}", path.display()))?;
                let last = CertificateDer::pem_slice_iter(&pem)
                    .filter_map(Result::ok)
                    .last()
                    .ok_or_else(|| format!("--tls-cert {}: no PEM certificate in it", path.display()))?;
                Ok(pem_of(&last))
            }
        }
    }
}

/// One certificate as PEM text.
fn pem_of(der: &CertificateDer<'_>) -> Vec<u8> {
    let encoded = pilot_inject::admission::base64(der.as_ref());
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in encoded.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(ca: CaSource) -> ValidationConfig {
        ValidationConfig {
            name: "pilot-validator".into(),
            ca,
            namespace: "default".into(),
            service_account_dir: PathBuf::from("/nonexistent"),
        }
    }

    #[test]
    fn the_default_ca_bundle_is_the_last_certificate_of_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let leaf = rcgen::generate_simple_self_signed(vec!["leaf".to_string()]).unwrap();
        let issuer = rcgen::generate_simple_self_signed(vec!["issuer".to_string()]).unwrap();
        let chain = dir.path().join("chain.pem");
        std::fs::write(&chain, format!("{}{}", leaf.cert.pem(), issuer.cert.pem())).unwrap();
        let bundle = config(CaSource::ChainIssuer(chain)).ca_bundle().unwrap();
        let certificates: Vec<CertificateDer<'_>> = CertificateDer::pem_slice_iter(&bundle)
            .map(Result::unwrap)
            .collect();
        assert_eq!(certificates, [issuer.cert.der().clone()]);

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate").unwrap();
        let error = config(CaSource::Bundle(empty)).ca_bundle().unwrap_err();
        assert!(error.contains("no PEM certificate"), "{error}");
        let error = config(CaSource::Bundle(dir.path().join("missing.pem")))
            .ca_bundle()
            .unwrap_err();
        assert!(error.contains("--webhook-ca-bundle"), "{error}");
    }
}
