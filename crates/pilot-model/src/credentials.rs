//! TLS credentials: the certificates and keys a proxy's listeners
//! terminate TLS with (a Gateway API listener's `certificateRefs`, an
//! Istio Gateway server's `credentialName`) and a DestinationRule's client
//! certificates, kept outside the configuration store: a private key is
//! not configuration, and whoever may read routing rules may not read it.
//!
//! A [`CredentialSource`] holds them by namespace and name, as Kubernetes
//! holds `kubernetes.io/tls` Secrets (`tls.crt`, `tls.key`, and
//! optionally `ca.crt`). The ADS server sends them to the proxies allowed
//! to read them as SDS `Secret`s named as Istio names them
//! ([`CredentialName`]): `kubernetes://<name>` for one in the proxy's own
//! namespace, `kubernetes://<namespace>/<name>` for one named with its
//! namespace, and the same with `-cacert` appended for the certificate
//! authority (`ca.crt`) that verifies clients or servers.
//!
//! A source may also hold certificate authority bundles as Kubernetes
//! holds them in ConfigMaps (the `ca.crt` key), which a Gateway API
//! BackendTLSPolicy names to verify its backends with
//! ([`CredentialSource::ca_bundle`]). They are sent as SDS validation
//! contexts named [`CaBundleName`]s: `configmap://<namespace>/<name>`, or
//! several names joined by `,` for a policy naming several ConfigMaps.

use std::sync::Arc;

use futures::stream::BoxStream;

/// The prefix of an SDS resource name that names a credential.
pub const CREDENTIAL_PREFIX: &str = "kubernetes://";

/// The suffix of an SDS resource name that asks for a credential's
/// certificate authority (`ca.crt`) rather than its certificate and key.
pub const CA_SUFFIX: &str = "-cacert";

/// The prefix of an SDS resource name that names certificate authority
/// bundles held as ConfigMaps.
pub const CA_BUNDLE_PREFIX: &str = "configmap://";

/// A certificate chain and its private key, with the certificate
/// authority that verifies peers when there is one, each PEM as a
/// `kubernetes.io/tls` Secret holds it. Its `Debug` leaves the key out.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsCredential {
    /// `tls.crt`: the certificate, then its chain.
    pub certificate_chain: Vec<u8>,
    /// `tls.key`: the private key of the first certificate.
    pub private_key: Vec<u8>,
    /// `ca.crt`: the certificate authorities trusted to sign peers'
    /// certificates (for MUTUAL TLS), when the Secret has one.
    pub ca_certificates: Option<Vec<u8>>,
}

impl std::fmt::Debug for TlsCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsCredential")
            .field(
                "certificate_chain",
                &format_args!("{} bytes", self.certificate_chain.len()),
            )
            .field("private_key", &format_args!("<redacted>"))
            .field(
                "ca_certificates",
                &self
                    .ca_certificates
                    .as_ref()
                    .map(|ca| format!("{} bytes", ca.len())),
            )
            .finish()
    }
}

/// Where credentials come from: a directory laid out like mounted Secrets,
/// a Kubernetes API server's `kubernetes.io/tls` Secrets, or an embedder's
/// own vault.
pub trait CredentialSource: Send + Sync {
    /// The credential `name` of `namespace`, when there is one and it is
    /// well formed (a source leaves out what would not load, and says why
    /// in its log).
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<TlsCredential>>;

    /// The certificate authority bundle (PEM, a ConfigMap's `ca.crt`) `name`
    /// of `namespace`, when the source holds one that holds certificates.
    /// None by default: a source of Secrets only.
    fn ca_bundle(&self, namespace: &str, name: &str) -> Option<Arc<Vec<u8>>> {
        let _ = (namespace, name);
        None
    }

    /// Yields once after each change (or several coalesced) from now on:
    /// after an item, [`get`](Self::get) returns what changed. Bounded
    /// however slowly it is read, and nothing is lost: a reader that
    /// falls behind sees one item for every change since it last read.
    fn changes(&self) -> BoxStream<'static, ()>;
}

/// What an SDS resource name asks for: which credential, and whether its
/// certificate and key or its certificate authority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialName {
    /// The credential's namespace (the proxy's when the name has none).
    pub namespace: String,
    /// The credential's name.
    pub name: String,
    /// True for `-cacert`: the certificate authority.
    pub ca: bool,
}

impl CredentialName {
    /// Reads `resource` (`kubernetes://name`, `kubernetes://ns/name`, or a
    /// bare name as Istio's `credentialName` is written, each with an
    /// optional `-cacert`) as asked by a proxy of `proxy_namespace`.
    /// `None` for a name no Secret could have.
    pub fn parse(resource: &str, proxy_namespace: &str) -> Option<Self> {
        let path = resource.strip_prefix(CREDENTIAL_PREFIX).unwrap_or(resource);
        let (namespace, name) = match path.split_once('/') {
            Some((namespace, name)) => (namespace, name),
            None => (proxy_namespace, path),
        };
        let (name, ca) = match name.strip_suffix(CA_SUFFIX) {
            Some(base) => (base, true),
            None => (name, false),
        };
        let valid = |part: &str| crate::dns1123_subdomain(part).is_ok();
        (valid(namespace) && valid(name)).then(|| CredentialName {
            namespace: namespace.to_string(),
            name: name.to_string(),
            ca,
        })
    }

    /// The SDS resource name of the certificate and key of `name` in
    /// `namespace`, as a listener refers to it.
    pub fn resource(namespace: &str, name: &str) -> String {
        format!("{CREDENTIAL_PREFIX}{namespace}/{name}")
    }
}

/// An SDS resource name that asks for certificate authority bundles:
/// `configmap://<namespace>/<name>[,<name>...]`, the bundles of those
/// ConfigMaps of one namespace, concatenated in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaBundleName {
    /// The ConfigMaps' namespace.
    pub namespace: String,
    /// The ConfigMaps' names (at least one).
    pub names: Vec<String>,
}

impl CaBundleName {
    /// Reads `resource`; `None` when it is not a `configmap://` name or
    /// names something no ConfigMap could be.
    pub fn parse(resource: &str) -> Option<Self> {
        let (namespace, names) = resource.strip_prefix(CA_BUNDLE_PREFIX)?.split_once('/')?;
        let valid = |part: &str| crate::dns1123_subdomain(part).is_ok();
        let names: Vec<String> = names.split(',').map(str::to_string).collect();
        (valid(namespace) && names.iter().all(|n| valid(n))).then(|| CaBundleName {
            namespace: namespace.to_string(),
            names,
        })
    }

    /// The SDS resource name of the bundles `names` of `namespace`.
    pub fn resource<S: AsRef<str>>(namespace: &str, names: &[S]) -> String {
        let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
        format!("{CA_BUNDLE_PREFIX}{namespace}/{}", names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_as_istio_writes_them() {
        let read = |resource: &str| CredentialName::parse(resource, "gateways");
        let named = |namespace: &str, name: &str, ca| {
            Some(CredentialName {
                namespace: namespace.into(),
                name: name.into(),
                ca,
            })
        };
        assert_eq!(read("kubernetes://cert"), named("gateways", "cert", false));
        assert_eq!(read("cert"), named("gateways", "cert", false));
        assert_eq!(read("kubernetes://web/cert"), named("web", "cert", false));
        assert_eq!(read("kubernetes://web/cert-cacert"), named("web", "cert", true));
        assert_eq!(read("cert-cacert"), named("gateways", "cert", true));
        assert_eq!(
            read(&CredentialName::resource("web", "cert")),
            named("web", "cert", false)
        );
        for bad in [
            "",
            "kubernetes://",
            "kubernetes://web/",
            "a/b/c",
            "kubernetes://Web/cert",
            "default",
            "ROOTCA",
        ] {
            let parsed = read(bad);
            // `default` and `ROOTCA` are names a Secret could have: read
            // as such (the agent serves its own under those names; ADS
            // never sees them asked of it).
            if matches!(bad, "default" | "ROOTCA") {
                assert_eq!(parsed.is_some(), bad == "default", "{bad}");
            } else {
                assert_eq!(parsed, None, "{bad}");
            }
        }
    }

    #[test]
    fn ca_bundle_names_name_configmaps_of_one_namespace() {
        let named = |namespace: &str, names: &[&str]| {
            Some(CaBundleName {
                namespace: namespace.into(),
                names: names.iter().map(|n| n.to_string()).collect(),
            })
        };
        assert_eq!(CaBundleName::parse("configmap://web/ca"), named("web", &["ca"]));
        assert_eq!(
            CaBundleName::parse("configmap://web/ca,other.ca"),
            named("web", &["ca", "other.ca"])
        );
        assert_eq!(
            CaBundleName::parse(&CaBundleName::resource("web", &["a", "b"])),
            named("web", &["a", "b"])
        );
        for bad in [
            "kubernetes://web/ca",
            "configmap://ca",
            "configmap://web/",
            "configmap://web/a,",
            "configmap://web/a/b",
            "configmap://Web/ca",
        ] {
            assert_eq!(CaBundleName::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_key_stays_out_of_debug() {
        let credential = TlsCredential {
            certificate_chain: b"chain".to_vec(),
            private_key: b"-----BEGIN PRIVATE KEY-----secret".to_vec(),
            ca_certificates: None,
        };
        let shown = format!("{credential:?}");
        assert!(!shown.contains("secret") && shown.contains("redacted"), "{shown}");
    }
}
