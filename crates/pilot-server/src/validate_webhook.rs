//! The validating admission webhook: `POST /validate` on the webhook
//! listener (`--inject-webhook ADDR`, HTTPS), an `AdmissionReview` v1 in
//! and out, each object validated by pilot-apiserver's
//! [`validate_review`], the REST API's own decoding and validation. The
//! `ValidatingWebhookConfiguration` that sends reviews here is kept by
//! `validation_config.rs` (`--validation-webhook-config`).

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use pilot_apiserver::admission::{ReviewAnswer, validate_review};
use pilot_model::KindRegistry;

/// The `/validate` route over the kinds of `registry`.
pub(crate) fn routes(registry: KindRegistry) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .with_state(registry)
}

async fn validate(State(registry): State<KindRegistry>, body: Bytes) -> ReviewAnswer {
    let answer = validate_review(&registry, &body);
    if !answer.allowed() {
        tracing::debug!(
            message = %answer.review["response"]["status"]["message"],
            "validating webhook: denied"
        );
    }
    answer
}
