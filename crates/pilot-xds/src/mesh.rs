//! The configuration generation reads: the routing model (routes,
//! destinations, Sidecars, security policies, all compiled by
//! `pilot_routing`) and the mesh settings no object carries.

use std::sync::Arc;

use pilot_model::{DynConfig, Labels, ServiceDiscovery};
use pilot_routing::ExtensionProviders;
use pilot_routing::{MtlsMode, PeerAuthentications, RoutingConfigs, RoutingModel};

use crate::XdsError;

/// The trust domain of workload identities, unless configured otherwise.
pub const DEFAULT_TRUST_DOMAIN: &str = "cluster.local";

/// The configuration of one push as generation reads it: the compiled
/// [`RoutingModel`] (shared by clones) and the trust domain of workload
/// identities. It holds no routing or security object: those are
/// compiled into the model ([`RoutingConfigs::compile`]) before
/// generation sees them.
///
/// ```
/// use pilot_routing::RoutingConfigs;
/// use pilot_xds::MeshConfig;
/// let mut configs = RoutingConfigs::default();
/// configs.domain_suffix = "svc.example".into();
/// let mesh = MeshConfig::new(configs.compile());
/// assert!(mesh.model().http_routes("reviews.default.svc.example").is_empty());
/// assert_eq!(mesh.model().domain_suffix(), "svc.example");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MeshConfig {
    model: Arc<RoutingModel>,
    trust_domain: String,
    extension_providers: Arc<ExtensionProviders>,
    server_certificates: Option<Arc<dyn ServerCertificates>>,
}

/// Which server certificates a proxy can be sent over SDS, as the server
/// serving its secrets knows. An edge server terminating TLS with a
/// certificate its proxy cannot be sent is left out of the proxy's
/// listeners: Envoy would hold the listener until the secret came or its
/// initial fetch timed out (15 s), and on its first configuration every
/// other listener with it. Without one ([`MeshConfig::new`]) every
/// certificate is taken to come, and such a listener waits for it.
pub trait ServerCertificates: Send + Sync + std::fmt::Debug {
    /// Whether `proxy` is sent the SDS secret `name`, as a server
    /// certificate and key names it (or, ending in `-cacert`, as a
    /// server's certificate authority for client certificates does).
    fn available(&self, proxy: &crate::Proxy, name: &str) -> bool;
}

impl Default for MeshConfig {
    /// No objects, the default settings.
    fn default() -> Self {
        MeshConfig::new(RoutingConfigs::default().compile())
    }
}

impl MeshConfig {
    /// The configuration of `model`, in the default trust domain.
    pub fn new(model: impl Into<Arc<RoutingModel>>) -> Self {
        MeshConfig {
            model: model.into(),
            trust_domain: DEFAULT_TRUST_DOMAIN.into(),
            extension_providers: Arc::default(),
            server_certificates: None,
        }
    }

    /// A configuration whose model is `model` with the trust domain and
    /// extension providers of `like`: for a model restricted to a proxy's
    /// scope ([`RoutingModel::scoped`]).
    pub fn from_model(model: RoutingModel, like: &MeshConfig) -> Self {
        MeshConfig {
            model: Arc::new(model),
            trust_domain: like.trust_domain.clone(),
            extension_providers: Arc::clone(&like.extension_providers),
            server_certificates: like.server_certificates.clone(),
        }
    }

    /// The routing and security kinds among `configs`, compiled (with the
    /// default settings); other kinds are ignored. Fails on an object that
    /// does not decode as its kind.
    pub fn from_configs<'a>(configs: impl IntoIterator<Item = &'a DynConfig>) -> Result<Self, XdsError> {
        let configs =
            RoutingConfigs::from_configs(configs).map_err(|e| XdsError::BadConfig(e.to_string()))?;
        Ok(MeshConfig::new(configs.compile()))
    }

    /// The same configuration with workload identities in `trust_domain`.
    pub fn with_trust_domain(mut self, trust_domain: &str) -> Self {
        self.trust_domain = trust_domain.to_string();
        self
    }

    /// The same configuration with the settings (trust domain, extension
    /// providers, server certificates) of `like`.
    pub fn with_settings_of(mut self, like: &MeshConfig) -> Self {
        self.trust_domain = like.trust_domain.clone();
        self.extension_providers = Arc::clone(&like.extension_providers);
        self.server_certificates = like.server_certificates.clone();
        self
    }

    /// The same configuration with the mesh config's extension providers
    /// (the external authorizers CUSTOM AuthorizationPolicies name).
    pub fn with_extension_providers(mut self, providers: Arc<ExtensionProviders>) -> Self {
        self.extension_providers = providers;
        self
    }

    /// The mesh config's extension providers (none by default).
    pub fn extension_providers(&self) -> &ExtensionProviders {
        &self.extension_providers
    }

    /// This configuration without the extension providers whose service
    /// (hostname and port) `registry` does not have, as Istio resolves a
    /// provider's service among the proxy's services: a CUSTOM policy
    /// naming such a provider then denies what its rules match, rather
    /// than leave the decision to an ext_authz filter with no cluster
    /// (which `failOpen` would let through). Borrowed when every provider
    /// resolves.
    pub fn resolving_providers(&self, registry: &dyn ServiceDiscovery) -> std::borrow::Cow<'_, MeshConfig> {
        let resolves = |provider: &pilot_routing::ExtensionProvider| {
            registry.get_service(provider.hostname()).is_some_and(|service| {
                service
                    .ports
                    .iter()
                    .any(|port| u32::from(port.port) == provider.port())
            })
        };
        if self.extension_providers.extension_providers.iter().all(resolves) {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut providers = (*self.extension_providers).clone();
        providers.extension_providers.retain(resolves);
        std::borrow::Cow::Owned(self.clone().with_extension_providers(Arc::new(providers)))
    }

    /// The same configuration, with edge servers whose certificate a proxy
    /// cannot be sent left out of its listeners ([`ServerCertificates`]).
    pub fn with_server_certificates(mut self, certificates: Arc<dyn ServerCertificates>) -> Self {
        self.server_certificates = Some(certificates);
        self
    }

    /// Which server certificates proxies can be sent, when known.
    pub fn server_certificates(&self) -> Option<&dyn ServerCertificates> {
        self.server_certificates.as_deref()
    }

    /// The trust domain of workload identities (`cluster.local`).
    pub fn trust_domain(&self) -> &str {
        &self.trust_domain
    }

    /// The routing model.
    pub fn model(&self) -> &RoutingModel {
        &self.model
    }

    /// The routing model, shared.
    pub fn shared_model(&self) -> &Arc<RoutingModel> {
        &self.model
    }

    /// What mutual TLS between workloads is generated from: the model's
    /// PeerAuthentication modes and the trust domain.
    pub fn mesh_tls(&self) -> MeshTls<'_> {
        MeshTls::new(self.model.peer_authentication(), &self.trust_domain)
    }

    /// [`MeshConfig::mesh_tls`] for a proxy that takes part in it: none
    /// (no mutual TLS) for a proxy without SDS certificates or a proxyless
    /// gRPC one.
    pub fn security_for(&self, proxy: &crate::Proxy) -> Option<MeshTls<'_>> {
        (proxy.sds && proxy.generator == crate::Generator::Envoy).then(|| self.mesh_tls())
    }
}

/// What mutual TLS between workloads is generated from: the compiled
/// PeerAuthentication modes and the trust domain of workload identities
/// ([`MeshConfig::mesh_tls`](crate::MeshConfig::mesh_tls)).
#[derive(Debug, Clone, Copy)]
pub struct MeshTls<'a> {
    modes: &'a PeerAuthentications,
    trust_domain: &'a str,
}

impl<'a> MeshTls<'a> {
    /// The modes `modes`, identities in `trust_domain`.
    pub fn new(modes: &'a PeerAuthentications, trust_domain: &'a str) -> Self {
        MeshTls { modes, trust_domain }
    }

    /// The mode a workload of `namespace` with `labels` accepts on its
    /// port `port` ([`PeerAuthentications::mtls_mode`]).
    pub fn mtls_mode(&self, namespace: &str, labels: &Labels, port: u16) -> MtlsMode {
        self.modes.mtls_mode(namespace, labels, port)
    }

    /// The SPIFFE identity of a service account of `namespace`.
    pub fn spiffe_id(&self, namespace: &str, service_account: &str) -> String {
        format!(
            "spiffe://{}/ns/{namespace}/sa/{service_account}",
            self.trust_domain
        )
    }
}
