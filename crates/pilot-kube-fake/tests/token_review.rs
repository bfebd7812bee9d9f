//! The fake's service-account tokens through a real `kube::Client`: a
//! TokenReview of a valid token names the service account, its groups
//! and the audiences asked for; an expired, unknown, revoked or
//! wrong-audience token is not authenticated and the error says why, in
//! the API server's words; a review without a token is 400 and one while
//! reviews are refused 503; over HTTPS with authentication required, a
//! caller without a valid token gets 401.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use pilot_kube_fake::FakeApiServer;

const HOUR: Duration = Duration::from_secs(3600);

async fn review(
    fake: &FakeApiServer,
    token: &str,
    audiences: &[&str],
) -> Result<TokenReviewStatus, kube::Error> {
    let reviews: Api<TokenReview> = Api::all(fake.client());
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            audiences: Some(audiences.iter().map(|a| a.to_string()).collect()),
        },
        ..Default::default()
    };
    let answer = reviews.create(&PostParams::default(), &review).await?;
    Ok(answer.status.expect("a reviewed TokenReview has a status"))
}

fn api_error(error: kube::Error) -> Box<kube::core::Status> {
    match error {
        kube::Error::Api(status) => status,
        other => panic!("expected a Status from the API server, got {other}"),
    }
}

#[tokio::test]
async fn a_valid_token_is_reviewed_as_its_service_account() {
    let fake = FakeApiServer::new();
    let token = fake.issue_token("bookinfo", "reviews", &["istio-ca", "vault"], HOUR);
    assert_eq!(token.split('.').count(), 3, "JWT-shaped: {token}");
    let status = review(&fake, &token, &["istio-ca"]).await.unwrap();
    assert_eq!(status.authenticated, Some(true), "{status:?}");
    assert_eq!(status.error, None);
    assert_eq!(status.audiences.as_deref(), Some(&["istio-ca".to_string()][..]));
    let user = status.user.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:bookinfo:reviews")
    );
    assert_eq!(
        user.groups.unwrap(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:bookinfo",
            "system:authenticated"
        ]
    );
    let uid = user.uid.unwrap();
    assert_eq!(uid.len(), 36, "{uid}");
    // Another token of the same account: the same uid.
    let again = fake.issue_token("bookinfo", "reviews", &["istio-ca"], HOUR);
    let status = review(&fake, &again, &["istio-ca"]).await.unwrap();
    assert_eq!(status.user.unwrap().uid, Some(uid));
    assert_eq!(fake.token_reviews(), 2);
}

#[tokio::test]
async fn a_pod_s_token_names_its_pod_and_node_in_extra() {
    let fake = FakeApiServer::new();
    let token = fake.issue_pod_token(
        "istio-system",
        "ztunnel",
        ("ztunnel-abcde", "node-1"),
        &["istio-ca"],
        HOUR,
    );
    let status = review(&fake, &token, &["istio-ca"]).await.unwrap();
    assert_eq!(status.authenticated, Some(true), "{status:?}");
    let extra = status.user.unwrap().extra.unwrap();
    let one = |key: &str| match extra.get(key).map(Vec::as_slice) {
        Some([value]) => value.clone(),
        other => panic!("{key}: expected one value, got {other:?}"),
    };
    assert_eq!(one("authentication.kubernetes.io/node-name"), "node-1");
    assert_eq!(one("authentication.kubernetes.io/pod-name"), "ztunnel-abcde");
    assert_eq!(one("authentication.kubernetes.io/pod-uid").len(), 36);
    assert_eq!(one("authentication.kubernetes.io/node-uid").len(), 36);
    assert!(one("authentication.kubernetes.io/credential-id").starts_with("JTI="));
    // The same pod's next token: the same pod uid.
    let again = fake.issue_pod_token(
        "istio-system",
        "ztunnel",
        ("ztunnel-abcde", "node-1"),
        &["istio-ca"],
        HOUR,
    );
    let status = review(&fake, &again, &["istio-ca"]).await.unwrap();
    let extra_again = status.user.unwrap().extra.unwrap();
    assert_eq!(
        extra_again["authentication.kubernetes.io/pod-uid"],
        extra["authentication.kubernetes.io/pod-uid"]
    );
    // A token bound to no pod names none.
    let plain = fake.issue_token("bookinfo", "reviews", &["istio-ca"], HOUR);
    let status = review(&fake, &plain, &["istio-ca"]).await.unwrap();
    let extra = status.user.unwrap().extra.unwrap();
    assert!(
        !extra.contains_key("authentication.kubernetes.io/node-name"),
        "{extra:?}"
    );
}

#[tokio::test]
async fn expired_unknown_revoked_and_other_audience_tokens_are_refused_with_the_reason() {
    let fake = FakeApiServer::new();
    let refused = |status: TokenReviewStatus| {
        assert_ne!(status.authenticated, Some(true), "{status:?}");
        assert_eq!(status.user.and_then(|u| u.username), None);
        status.error.expect("a refused review says why")
    };
    let expired = fake.issue_token("bookinfo", "reviews", &["istio-ca"], Duration::ZERO);
    assert_eq!(
        refused(review(&fake, &expired, &["istio-ca"]).await.unwrap()),
        "[invalid bearer token, service account token has expired]"
    );
    let other = fake.issue_token("bookinfo", "reviews", &["other"], HOUR);
    assert_eq!(
        refused(review(&fake, &other, &["istio-ca"]).await.unwrap()),
        r#"[invalid bearer token, token audiences ["other"] is invalid for the target audiences ["istio-ca"]]"#
    );
    let unknown = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl";
    assert_eq!(
        refused(review(&fake, unknown, &["istio-ca"]).await.unwrap()),
        "[invalid bearer token, square/go-jose: error in cryptographic primitive]"
    );
    let revoked = fake.issue_token("bookinfo", "reviews", &["istio-ca"], HOUR);
    assert!(fake.revoke_token(&revoked));
    assert!(
        refused(review(&fake, &revoked, &["istio-ca"]).await.unwrap()).contains("cryptographic primitive")
    );
    // Without audiences, the review asks for the API server's own.
    let for_api = fake.issue_token("bookinfo", "reviews", &[], HOUR);
    let status = review(&fake, &for_api, &[]).await.unwrap();
    assert_eq!(
        status.audiences.unwrap(),
        [pilot_kube_fake::API_AUDIENCE.to_string()]
    );
}

#[tokio::test]
async fn a_review_without_a_token_is_bad_and_refused_reviews_are_unavailable() {
    let fake = FakeApiServer::new();
    let empty = api_error(review(&fake, "", &["istio-ca"]).await.unwrap_err());
    assert_eq!((empty.code, empty.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        empty.message,
        "token is required for TokenReview in authentication"
    );
    let token = fake.issue_token("bookinfo", "reviews", &["istio-ca"], HOUR);
    fake.refuse_token_reviews(true);
    let down = api_error(review(&fake, &token, &["istio-ca"]).await.unwrap_err());
    assert_eq!((down.code, down.reason.as_str()), (503, "ServiceUnavailable"));
    fake.refuse_token_reviews(false);
    assert_eq!(
        review(&fake, &token, &["istio-ca"]).await.unwrap().authenticated,
        Some(true)
    );
}

/// A client of `url` trusting `ca` (DER), sending `token` if any.
fn https_client(url: &str, ca: Vec<u8>, token: Option<&str>) -> kube::Client {
    let mut config = kube::Config::new(url.parse().unwrap());
    config.root_cert = Some(vec![ca]);
    if let Some(token) = token {
        config.headers.push((
            http::header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        ));
    }
    kube::Client::try_from(config).unwrap()
}

#[tokio::test]
async fn over_https_with_authentication_required_only_valid_tokens_get_in() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let fake = FakeApiServer::new();
    let listening = fake
        .listen_tls(cert.pem().as_bytes(), key.serialize_pem().as_bytes())
        .await
        .unwrap();
    assert!(listening.url().starts_with("https://127.0.0.1:"));
    fake.require_authentication(true);
    let list = |token: Option<&str>| {
        let client = https_client(&listening.url(), cert.der().to_vec(), token);
        async move { Api::<Namespace>::all(client).list(&ListParams::default()).await }
    };
    let none = api_error(list(None).await.unwrap_err());
    assert_eq!((none.code, none.reason.as_str()), (401, "Unauthorized"));
    let token = fake.issue_token("pilot-system", "pilot-discovery", &[], HOUR);
    assert_eq!(list(Some(&token)).await.unwrap().items.len(), 2);
    // A token for another audience is not a credential for the API server.
    let other = fake.issue_token("pilot-system", "pilot-discovery", &["istio-ca"], HOUR);
    assert_eq!(api_error(list(Some(&other)).await.unwrap_err()).code, 401);
    fake.revoke_token(&token);
    assert_eq!(api_error(list(Some(&token)).await.unwrap_err()).code, 401);
    fake.require_authentication(false);
    assert_eq!(list(None).await.unwrap().items.len(), 2);
}
