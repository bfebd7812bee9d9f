//! What is injected: the `sidecarInjector` section of the mesh config file,
//! every field optional.
//!
//! ```yaml
//! sidecarInjector:
//!   proxyImage: registry.example/pilot/proxy:0.1.0
//!   discoveryAddress: pilot-discovery.pilot-system:15010
//!   resources: {requests: {cpu: 100m, memory: 128Mi}}
//!   tokenAudience: istio-ca
//! ```

use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::InjectError;

/// The template of the injected containers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct InjectTemplate {
    /// The sidecar's image (it holds pilot-agent and Envoy).
    pub proxy_image: String,
    /// The init container's image (it holds pilot-agent and iptables).
    pub init_image: String,
    /// Image pull policy of both.
    pub image_pull_policy: String,
    /// pilot-discovery's ADS address, `HOST:PORT`.
    pub discovery_address: String,
    /// The proxy's uid and gid; its traffic is never captured.
    pub proxy_uid: u32,
    /// The port captured traffic is redirected to (Envoy's virtual listener).
    pub capture_port: u16,
    /// The agent's status port: readiness (`/healthz/ready`) and stats;
    /// never captured.
    pub status_port: u16,
    /// The sidecar's `resources` (a Kubernetes ResourceRequirements).
    pub resources: Value,
    /// The init container's `resources`.
    pub init_resources: Value,
    /// The control-plane revision that injects (`istio.io/rev`; `""` the
    /// default revision): pods labelled for another revision are left to
    /// it. Set by [`InjectTemplate::with_revision`] (pilot-discovery's
    /// `--revision`).
    pub revision: String,
    /// The audience of the service-account token projected into the
    /// sidecar, which it presents to pilot-discovery's ADS and CA
    /// (Istio's `istio-ca`).
    pub token_audience: String,
}

impl Default for InjectTemplate {
    fn default() -> Self {
        Self {
            proxy_image: "pilot/proxy:0.1.0".into(),
            init_image: "pilot/proxy:0.1.0".into(),
            image_pull_policy: "IfNotPresent".into(),
            discovery_address: "pilot-discovery.pilot-system:15010".into(),
            proxy_uid: 1337,
            capture_port: 15001,
            status_port: 15020,
            resources: json!({"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}}),
            init_resources: json!({"requests": {"cpu": "10m", "memory": "10Mi"}, "limits": {"cpu": "100m", "memory": "50Mi"}}),
            revision: String::new(),
            token_audience: "istio-ca".into(),
        }
    }
}

impl InjectTemplate {
    /// The template of control-plane revision `revision` (`""`: the
    /// default): it injects only pods of that revision, and when the
    /// template keeps the built-in discovery address, its sidecars connect
    /// to that revision's Service, `pilot-discovery-REVISION`, as Istio's
    /// `istiod-REVISION` (a `discoveryAddress` of the mesh config is kept).
    pub fn with_revision(mut self, revision: &str) -> InjectTemplate {
        // `default` is the default revision's label value.
        let revision = if revision == "default" { "" } else { revision };
        if !revision.is_empty() && self.discovery_address == InjectTemplate::default().discovery_address {
            self.discovery_address = format!("pilot-discovery-{revision}.pilot-system:15010");
        }
        self.revision = revision.to_string();
        self
    }

    /// Reads the `sidecarInjector` section of a mesh config file (YAML or
    /// JSON); other sections are left to their readers. Errors name the
    /// file, line and column of the offending field.
    pub fn load(path: &Path) -> Result<InjectTemplate, InjectError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| InjectError::Template {
            file: file.clone(),
            message: e.to_string(),
        })?;
        Self::parse(&file, &text)
    }

    /// [`InjectTemplate::load`] on text.
    pub fn parse(file: &str, text: &str) -> Result<InjectTemplate, InjectError> {
        let values = pilot_model::document::parse_values(file, text)?;
        let Some(section) = values.first().and_then(|v| v.get("sidecarInjector")) else {
            return Ok(InjectTemplate::default());
        };
        serde_json::from_value(section.clone()).map_err(|e| {
            let message = e.to_string();
            // serde names the unknown or mistyped field in backquotes.
            let field = message.split('`').nth(1).unwrap_or("");
            let path = format!(".sidecarInjector.{field}");
            let at = pilot_model::document::locate_path(text, 0, path.trim_end_matches('.'))
                .map(|p| format!("{}:{}: ", p.line, p.column))
                .unwrap_or_default();
            InjectError::Template {
                file: file.to_string(),
                message: format!("{at}.sidecarInjector: {message}"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_what_the_file_leaves_out() {
        let t = InjectTemplate::parse("mesh.yaml", "sidecarInjector:\n  proxyImage: x/proxy:1\n").unwrap();
        assert_eq!(t.proxy_image, "x/proxy:1");
        assert_eq!(t.discovery_address, InjectTemplate::default().discovery_address);
        assert_eq!(
            InjectTemplate::parse("m.yaml", "other: 1\n").unwrap(),
            InjectTemplate::default()
        );
    }

    #[test]
    fn the_example_mesh_config_spells_out_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/inject/mesh.yaml");
        assert_eq!(InjectTemplate::load(&path).unwrap(), InjectTemplate::default());
    }

    #[test]
    fn unknown_fields_are_named_with_their_position() {
        let err = InjectTemplate::parse("mesh.yaml", "sidecarInjector:\n  proxyImage: x\n  proxyImg: y\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("mesh.yaml: 3:3: .sidecarInjector:"), "{err}");
        assert!(err.contains("proxyImg"), "{err}");
    }
}
