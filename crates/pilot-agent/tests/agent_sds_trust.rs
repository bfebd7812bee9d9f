//! What the agent's SDS server accepts from a CA, against a CA this test
//! plays over real gRPC on loopback (an on-path attacker answers what it
//! likes): the mesh's answer is served; an attacker's root with a
//! `kube-system/admin` leaf, or a leaf for another key, is refused with
//! the reason and the certificates served before stay served; a new root
//! cross-signed by the pinned one is accepted. Trust on first use keeps
//! the first root across restarts. And no token or certificate crosses
//! plaintext to an address beyond loopback unless the insecure flag says
//! so.

mod common;

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use pilot_agent::sds::{RootPinning, Sds, SdsOptions};
use pilot_agent::{DiscoveryAuth, plaintext::INSECURE_FLAG};
use pilot_ca::{CaMaterial, CaOptions, CertificateAuthority, Csr, SpiffeId, generate_root};
use pilot_test_support::eventually;
use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName, DnType, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

const TOKEN: &str = "reviews-token-0123456789abcdef";

/// What the CA answers.
#[derive(Clone, Copy, Debug)]
enum Answer {
    /// The mesh's CA: a leaf for the CSR, the mesh root.
    Mesh,
    /// The attacker's root, and a `kube-system/admin` leaf for the
    /// agent's key.
    AttackerAdmin,
    /// A leaf of the mesh for another key (the attacker's CSR relayed).
    OtherKey,
    /// The renewed root signs; the mesh root cross-signed it; both in
    /// the bundle, the new first.
    Rotation,
}

struct Roots {
    mesh: CaMaterial,
    attacker: CaMaterial,
    new: CaMaterial,
}

/// `IstioCertificateService/CreateCertificate` answering what `answer`
/// says.
#[derive(Clone)]
struct FakeCa {
    answer: Arc<Mutex<Answer>>,
    roots: Arc<Roots>,
    requests: Arc<Mutex<Vec<Option<String>>>>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct IstioCertificateRequest {
    #[prost(string, tag = "1")]
    csr: String,
    #[prost(int64, tag = "3")]
    validity_duration: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct IstioCertificateResponse {
    #[prost(string, repeated, tag = "1")]
    cert_chain: Vec<String>,
}

impl FakeCa {
    fn start(runtime: &tokio::runtime::Runtime, roots: Roots) -> (Self, String) {
        let ca = FakeCa {
            answer: Arc::new(Mutex::new(Answer::Mesh)),
            roots: Arc::new(roots),
            requests: Arc::default(),
        };
        let incoming = runtime
            .block_on(async { tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap()) })
            .unwrap();
        let address = incoming.local_addr().unwrap().to_string();
        let service = ca.clone();
        runtime.spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming),
        );
        (ca, address)
    }

    fn set(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    fn answer(&self, csr_pem: &str) -> Vec<String> {
        let reviews = SpiffeId::parse("spiffe://cluster.local/ns/default/sa/reviews").unwrap();
        let sign = |ca: &CaMaterial, csr: &str| {
            let csr = Csr::from_pem(csr).unwrap();
            CertificateAuthority::new(ca, CaOptions::new("cluster.local"))
                .unwrap()
                .sign(&csr, &reviews, None)
                .unwrap()
                .cert_chain
        };
        let roots = &self.roots;
        let answer = *self.answer.lock().unwrap();
        match answer {
            Answer::Mesh => sign(&roots.mesh, csr_pem),
            Answer::AttackerAdmin => {
                let public_key = CertificateSigningRequestParams::from_pem(csr_pem)
                    .unwrap()
                    .public_key;
                let mut params = CertificateParams::default();
                params.distinguished_name = DistinguishedName::new();
                params.subject_alt_names = vec![SanType::URI(
                    "spiffe://cluster.local/ns/kube-system/sa/admin"
                        .try_into()
                        .unwrap(),
                )];
                let issuer = issuer(&roots.attacker);
                let leaf = params.signed_by(&public_key, &issuer).unwrap().pem();
                vec![leaf, roots.attacker.cert_pem.clone()]
            }
            Answer::OtherKey => {
                let other = pilot_ca::WorkloadKey::generate().unwrap();
                sign(&roots.mesh, &other.csr_pem(&reviews).unwrap())
            }
            // As the CA renews its root: leaf, cross-certificate, the new
            // root then the old.
            Answer::Rotation => {
                let mut chain = sign(&roots.new, csr_pem);
                chain.pop();
                chain.push(cross_certificate(&roots.new, &roots.mesh));
                chain.push(format!("{}{}", roots.new.cert_pem, roots.mesh.cert_pem));
                chain
            }
        }
    }
}

fn issuer(ca: &CaMaterial) -> Issuer<'static, KeyPair> {
    Issuer::from_ca_cert_pem(&ca.cert_pem, KeyPair::from_pem(&ca.key_pem).unwrap()).unwrap()
}

/// `new`'s subject and public key, issued and signed by `old`.
fn cross_certificate(new: &CaMaterial, old: &CaMaterial) -> String {
    let (_, cert) = x509_parser::pem::parse_x509_pem(new.cert_pem.as_bytes()).unwrap();
    let cert = cert.parse_x509().unwrap();
    let mut name = DistinguishedName::new();
    for o in cert.subject().iter_organization() {
        name.push(DnType::OrganizationName, o.as_str().unwrap());
    }
    for cn in cert.subject().iter_common_name() {
        name.push(DnType::CommonName, cn.as_str().unwrap());
    }
    let mut params = CertificateParams::default();
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::hours(1);
    let key = KeyPair::from_pem(&new.key_pem).unwrap();
    params.signed_by(&key, &issuer(old)).unwrap().pem()
}

impl tonic::server::NamedService for FakeCa {
    const NAME: &'static str = "istio.v1.auth.IstioCertificateService";
}

impl tonic::codegen::Service<http::Request<tonic::body::Body>> for FakeCa {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = tonic::codegen::BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let ca = self.clone();
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
            Ok(grpc.unary(Create(ca), request).await)
        })
    }
}

struct Create(FakeCa);

impl tonic::server::UnaryService<IstioCertificateRequest> for Create {
    type Response = IstioCertificateResponse;
    type Future = std::future::Ready<Result<tonic::Response<IstioCertificateResponse>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<IstioCertificateRequest>) -> Self::Future {
        let token = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        self.0.requests.lock().unwrap().push(token);
        let cert_chain = self.0.answer(&request.into_inner().csr);
        std::future::ready(Ok(tonic::Response::new(IstioCertificateResponse { cert_chain })))
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn roots() -> Roots {
    let hour = Duration::from_secs(3600);
    let mesh = generate_root("cluster.local", hour).unwrap();
    Roots {
        attacker: generate_root("cluster.local", hour).unwrap(),
        new: generate_root("cluster.local", hour).unwrap(),
        mesh,
    }
}

fn options(dir: &std::path::Path, address: &str, pinning: RootPinning) -> SdsOptions {
    SdsOptions {
        // Renewed every second.
        ttl: Duration::from_secs(2),
        pinning,
        ..SdsOptions::new(
            dir.join("sds/socket"),
            address.to_string(),
            DiscoveryAuth {
                token: Some(TOKEN.into()),
                tls: None,
            },
            SpiffeId::parse("spiffe://cluster.local/ns/default/sa/reviews").unwrap(),
            dir.join("mesh-roots.pem"),
        )
    }
}

fn refused_with(sds: &Sds, reason: &str) -> bool {
    sds.last_error().is_some_and(|error| error.contains(reason))
}

#[test]
fn a_pinned_agent_serves_the_mesh_refuses_an_attacker_and_follows_a_cross_signed_rotation() {
    let runtime = runtime();
    let dir = tempfile::tempdir().unwrap();
    let roots = roots();
    let mesh_root = roots.mesh.cert_pem.clone();
    let rotated_bundle = format!("{}{}", roots.new.cert_pem, roots.mesh.cert_pem);
    let root_file = dir.path().join("mesh-root.pem");
    std::fs::write(&root_file, &mesh_root).unwrap();
    let (ca, address) = FakeCa::start(&runtime, roots);
    let sds = runtime
        .block_on(Sds::start(options(
            dir.path(),
            &address,
            RootPinning::File(root_file.clone()),
        )))
        .unwrap();
    let first = runtime.block_on(sds.wait_version(1));
    assert_eq!(first.root_pem, mesh_root);
    assert_eq!(
        ca.requests.lock().unwrap()[0].as_deref(),
        Some(format!("Bearer {TOKEN}").as_str())
    );

    // The attacker's root and its kube-system/admin certificate.
    ca.set(Answer::AttackerAdmin);
    eventually("the attacker's root to be refused", || {
        refused_with(&sds, "neither pinned nor cross-signed by a pinned root")
    });
    let served = sds.current().unwrap();
    assert_eq!(served.version, 1, "the certificates served before stay served");
    assert_eq!(served.chain_pem, first.chain_pem);
    assert_eq!(served.root_pem, mesh_root);

    // A mesh certificate, but for another key than the agent's.
    ca.set(Answer::OtherKey);
    eventually("a leaf for another key to be refused", || {
        refused_with(&sds, "another public key than the agent's")
    });
    assert_eq!(sds.current().unwrap().version, 1);

    // A new root, cross-signed by the pinned one.
    ca.set(Answer::Rotation);
    let rotated = runtime.block_on(sds.wait_version(2));
    assert_eq!(rotated.root_pem, rotated_bundle);
    assert_eq!(sds.last_error(), None);
    assert_eq!(
        std::fs::read_to_string(&root_file).unwrap(),
        mesh_root,
        "the configured root file is never written"
    );
    drop(sds);
}

#[test]
fn trust_on_first_use_keeps_the_first_root_across_restarts() {
    let runtime = runtime();
    let dir = tempfile::tempdir().unwrap();
    let roots = roots();
    let mesh_root = roots.mesh.cert_pem.clone();
    let (ca, address) = FakeCa::start(&runtime, roots);
    let store = dir.path().join("state/mesh-roots.pem");
    let first_use = || options(dir.path(), &address, RootPinning::FirstUse(store.clone()));
    let sds = runtime.block_on(Sds::start(first_use())).unwrap();
    let first = runtime.block_on(sds.wait_version(1));
    assert_eq!(first.root_pem, mesh_root);
    assert_eq!(std::fs::read_to_string(&store).unwrap(), mesh_root);
    drop(sds);

    // Restarted behind an attacker: the stored root is pinned.
    ca.set(Answer::AttackerAdmin);
    let sds = runtime.block_on(Sds::start(first_use())).unwrap();
    eventually("the attacker's root to be refused after a restart", || {
        refused_with(&sds, "neither pinned nor cross-signed")
    });
    assert!(sds.current().is_none(), "nothing is served");
    assert_eq!(std::fs::read_to_string(&store).unwrap(), mesh_root);
    drop(sds);
}

#[test]
fn no_token_or_certificate_crosses_plaintext_beyond_loopback_without_the_flag() {
    let runtime = runtime();
    let dir = tempfile::tempdir().unwrap();
    // TEST-NET-1: nothing answers there, and nothing is sent.
    let remote = "192.0.2.1:15010";
    let error = runtime
        .block_on(Sds::start(options(
            dir.path(),
            remote,
            RootPinning::FirstUse(dir.path().join("r.pem")),
        )))
        .unwrap_err()
        .to_string();
    assert!(error.contains(remote) && error.contains(INSECURE_FLAG), "{error}");

    // The agent refuses to start, naming the address and the flag.
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let base = [
        "--ip",
        "10.0.0.8",
        "--id",
        "app-1.default",
        "--interception-mode",
        "NONE",
        "--discovery-address",
        remote,
        "--discovery-token-file",
        token.to_str().unwrap(),
    ];
    let mut agent = common::Agent::start("sidecar", &base);
    assert_ne!(agent.wait_exit(), 0);
    let log = agent.log();
    assert!(
        log.contains(remote) && log.contains(INSECURE_FLAG) && log.contains("--discovery-ca-file"),
        "{log}"
    );
    assert!(agent.envoy_pids().is_empty(), "an Envoy was started: {log}");

    // With the flag it runs, and says so loudly.
    let mut insecure = base.to_vec();
    insecure.push(INSECURE_FLAG);
    let agent = common::Agent::start("sidecar", &insecure);
    eventually("the agent to start, warning that it runs insecurely", || {
        let log = agent.log();
        log.contains("INSECURE") && log.contains(remote) && log.contains("pilot-agent started")
    });
    drop(agent);
}
