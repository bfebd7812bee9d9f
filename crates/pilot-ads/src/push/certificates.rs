//! Which server certificates a push's proxies can be sent: what the SDS
//! stream (`stream/secrets.rs`) would answer, asked by generation before
//! it serves an edge server terminating TLS with one
//! ([`pilot_xds::ServerCertificates`]). A server whose certificate does
//! not come is left out of its proxies' listeners, so that Envoy does not
//! hold them waiting for it; a change of the credentials pushes again
//! (`pipeline.rs`), generating the edge classes anew.

use std::sync::Arc;

use pilot_model::{CaBundleName, CredentialSource};
use pilot_xds::{Proxy, ServerCertificates};

use super::recompile::PushRules;

/// The certificates of `source` as a push with `rules` lets each proxy
/// read them; none without a source (no secret is served then).
pub(crate) struct SdsCertificates {
    pub(crate) source: Option<Arc<dyn CredentialSource>>,
    pub(crate) rules: Arc<PushRules>,
}

impl std::fmt::Debug for SdsCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SdsCertificates")
            .field("source", &self.source.is_some())
            .finish_non_exhaustive()
    }
}

impl ServerCertificates for SdsCertificates {
    fn available(&self, proxy: &Proxy, name: &str) -> bool {
        let Some(source) = &self.source else {
            return false;
        };
        // A bundle of certificate authorities (a Gateway's frontend
        // ConfigMaps): every one there, else the stream would send one
        // that trusts nothing.
        if let Some(bundle) = CaBundleName::parse(name) {
            return bundle.names.iter().all(|config_map| {
                self.rules.configs.names_ca_bundle(&bundle.namespace, config_map)
                    && source.ca_bundle(&bundle.namespace, config_map).is_some()
            });
        }
        matches!(
            crate::stream::credential_secret(&**source, proxy, name, Some(&self.rules.configs)),
            Ok(Some(_))
        )
    }
}
