//! The roots the certificate service serves, as a workload sees them in
//! `cert_chain`: the leaf, the intermediates (during a rotation, the
//! cross-certificate) and last the trust bundle, the signing root first.
//! An operator's bundle of several roots is served whole; the
//! self-signed root is renewed before it expires, with overlap, and the
//! replicas sharing it through etcd agree on the renewed root.

mod common;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use common::TestServer;
use common::ca::{channel, create_with_csr, write_token_file};
use pilot_ca::{SpiffeId, WorkloadKey, verify_chain};

const REVIEWS: &str = "reviews-token-0123456789abcdef";

/// Generous enough for a loaded machine; it only catches a hang.
const PATIENCE: Duration = Duration::from_secs(120);

fn tokens(dir: &Path) -> String {
    write_token_file(dir, &[&format!("{REVIEWS} xds reviews namespace=default serviceAccount=reviews")])
}

fn reviews() -> SpiffeId {
    SpiffeId::new("cluster.local", "default", "reviews").unwrap()
}

/// A certificate for `default/reviews` from the server at `xds`.
async fn issue(xds: std::net::SocketAddr) -> Vec<String> {
    let csr = WorkloadKey::generate().unwrap().csr_pem(&reviews()).unwrap();
    create_with_csr(&channel(xds).await, Some(REVIEWS), csr, 0)
        .await
        .unwrap()
}

/// The PEM certificates of one text.
fn certificates(text: &str) -> Vec<String> {
    pem::parse_many(text)
        .unwrap()
        .iter()
        .map(|block| pem::encode_config(block, pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF)))
        .collect()
}

/// The last element of a chain: the trust bundle, one PEM per root.
fn bundle(chain: &[String]) -> Vec<String> {
    certificates(chain.last().unwrap())
}

/// Issues certificates until one's chain satisfies `done`.
async fn issue_until(xds: std::net::SocketAddr, what: &str, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let chain = issue(xds).await;
        if done(&chain) {
            return chain;
        }
        assert!(Instant::now() < deadline, "never {what}; last chain: {chain:#?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `--ca-dir` with `root-cert.pem` holding the new root and the old one:
/// the server starts, the new root signs, and both are the bundle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_bundle_of_the_new_and_the_old_root_is_served_whole() {
    let dir = tempfile::tempdir().unwrap();
    let ca_dir = dir.path().join("cacerts");
    std::fs::create_dir(&ca_dir).unwrap();
    let day = Duration::from_secs(86_400);
    let new = pilot_ca::generate_root("cluster.local", day).unwrap();
    let old = pilot_ca::generate_root("cluster.local", day).unwrap();
    std::fs::write(ca_dir.join("ca-cert.pem"), &new.cert_pem).unwrap();
    std::fs::write(ca_dir.join("ca-key.pem"), &new.key_pem).unwrap();
    let bundle_file = format!("{}{}", new.cert_pem, old.cert_pem);
    std::fs::write(ca_dir.join("root-cert.pem"), &bundle_file).unwrap();
    let tokens = tokens(dir.path());
    let server = TestServer::start(&["--token-file", &tokens, "--ca-dir", &ca_dir.display().to_string()]).await;
    let chain = issue(server.xds).await;
    assert_eq!(chain.len(), 2, "the leaf and the bundle: {chain:#?}");
    assert_eq!(chain[1], bundle_file, "both roots, the signing one first");
    assert_eq!(verify_chain(&chain[..1], &new.cert_pem, SystemTime::now()).unwrap(), reviews());
    assert!(
        verify_chain(&chain[..1], &old.cert_pem, SystemTime::now()).is_err(),
        "the old root did not sign it"
    );
    server.stop().await;
}

/// The self-signed root lives 30 s and is renewed when 10 s are left:
/// certificates issued before and after the renewal verify both against
/// the old root alone (the new one through the cross-certificate) and
/// against the new bundle; once the old root expires it leaves the
/// bundle, and what the new root signs verifies against the new root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_self_signed_root_is_renewed_with_overlap_before_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens(dir.path());
    let server = TestServer::start(&[
        "--token-file",
        &tokens,
        "--ca-root-ttl",
        "30s",
        "--ca-root-renew-before",
        "10s",
        "--ca-root-check-interval",
        "500ms",
    ])
    .await;
    let before = issue(server.xds).await;
    let old_bundle = bundle(&before);
    assert_eq!(old_bundle.len(), 1, "one root to begin with");
    let old_root = old_bundle[0].clone();
    assert!(
        verify_chain(&before, &old_root, SystemTime::now()).is_ok(),
        "issued before, trusted by the old root"
    );

    let after = issue_until(server.xds, "renewed", |chain| bundle(chain).len() == 2).await;
    let new_bundle = bundle(&after);
    assert_eq!(new_bundle[1], old_root, "the old root stays, after the new one");
    let new_root = new_bundle[0].clone();
    assert_ne!(new_root, old_root);
    assert_eq!(after.len(), 3, "leaf, cross-certificate, bundle: {after:#?}");
    let now = SystemTime::now();
    let without_bundle = |chain: &[String]| chain[..chain.len() - 1].to_vec();
    for (what, chain) in [("before", &before), ("after", &after)] {
        assert_eq!(
            verify_chain(&without_bundle(chain), &old_root, now).unwrap(),
            reviews(),
            "issued {what} the renewal: trusted by a peer that has only the old root"
        );
        assert_eq!(
            verify_chain(&without_bundle(chain), after.last().unwrap(), now).unwrap(),
            reviews(),
            "issued {what} the renewal: trusted through the new bundle"
        );
    }
    assert!(
        verify_chain(&after[..1], &old_root, now).is_err(),
        "the old root reaches the new one only through the cross-certificate"
    );

    // The old root expires 30 s after the start: it and the
    // cross-certificate leave what is served.
    let later = issue_until(server.xds, "dropped the expired root", |chain| {
        !bundle(chain).contains(&old_root)
    })
    .await;
    assert!(bundle(&later).contains(&new_root), "{later:#?}");
    assert_eq!(
        verify_chain(&without_bundle(&later), &new_root, SystemTime::now()).unwrap(),
        reviews()
    );
    server.stop().await;
}

/// Two replicas on one etcd keep one self-signed root; when it is due
/// both try to renew it, one writes (compare-and-swap on the key's
/// revision) and both serve the one renewed root and bundle.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_sharing_the_root_in_etcd_agree_on_its_renewal() {
    let etcd = pilot_test_support::EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens(dir.path());
    let endpoint = etcd.endpoint();
    let flags = [
        "--token-file",
        &tokens,
        "--store",
        "etcd",
        "--etcd-endpoints",
        &endpoint,
        "--ca-root-ttl",
        "40s",
        "--ca-root-renew-before",
        "20s",
        "--ca-root-check-interval",
        "300ms",
    ];
    let (first, second) = tokio::join!(TestServer::start(&flags), TestServer::start(&flags));
    let old_root = bundle(&issue(first.xds).await)[0].clone();
    assert_eq!(bundle(&issue(second.xds).await), vec![old_root.clone()], "one root to begin with");
    let renewed = |chain: &[String]| bundle(chain).len() == 2;
    let on_first = issue_until(first.xds, "renewed on the first replica", renewed).await;
    let on_second = issue_until(second.xds, "renewed on the second replica", renewed).await;
    assert_eq!(
        on_first.last(),
        on_second.last(),
        "both replicas serve one renewed bundle"
    );
    assert_eq!(bundle(&on_first)[1], old_root);
    assert_eq!(on_first[1], on_second[1], "and one cross-certificate");
    let mut client = etcd_client::Client::connect([endpoint], None).await.unwrap();
    let kept = client.get("/pilot/config/_ca/root", None).await.unwrap();
    let files: std::collections::BTreeMap<String, String> =
        serde_json::from_slice(kept.kvs()[0].value()).unwrap();
    assert_eq!(&files["root-cert.pem"], on_first.last().unwrap(), "the bundle kept in etcd");
    assert_eq!(files["cert-chain.pem"], on_first[1], "the cross-certificate kept in etcd");
    first.stop().await;
    second.stop().await;
}
