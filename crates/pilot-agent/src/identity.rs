//! Who the proxy is: the node id `type~ip~id~domain` pilot-discovery parses
//! (both ends use [`pilot_proxy_api::NodeId`]), the workload's labels
//! and the interception mode, which travel as node metadata (`LABELS`,
//! `INTERCEPTION_MODE`).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use pilot_proxy_api::{InterceptionMode, NodeId, ProxyType, metadata as keys};

use crate::AgentError;

/// The identity a proxy presents to pilot-discovery.
///
/// ```
/// use pilot_agent::{Identity, InterceptionMode, ProxyType};
/// let identity = Identity {
///     proxy_type: ProxyType::Sidecar,
///     ip: "10.1.1.3".parse().unwrap(),
///     id: "reviews-v2-7f9d.default".into(),
///     domain: "default.svc.cluster.local".into(),
///     labels: [("app".to_string(), "reviews".to_string())].into(),
///     interception: InterceptionMode::None,
///     cluster: "reviews".into(),
///     service_account: None,
/// };
/// assert_eq!(identity.node_id(), "sidecar~10.1.1.3~reviews-v2-7f9d.default~default.svc.cluster.local");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Sidecar, router or ingress.
    pub proxy_type: ProxyType,
    /// The workload's IP (`INSTANCE_IP` in a pod).
    pub ip: IpAddr,
    /// Unique id, `<pod>.<namespace>` by convention.
    pub id: String,
    /// DNS domain, `<namespace>.svc.cluster.local` by default.
    pub domain: String,
    /// The workload's labels.
    pub labels: BTreeMap<String, String>,
    /// How traffic reaches the proxy.
    pub interception: InterceptionMode,
    /// Envoy's service cluster (node.cluster): the `app` label by default.
    pub cluster: String,
    /// The workload's service account (node metadata `SERVICE_ACCOUNT`).
    pub service_account: Option<String>,
}

impl Identity {
    /// `type~ip~id~domain`.
    pub fn node_id(&self) -> String {
        NodeId {
            proxy_type: self.proxy_type,
            ip: self.ip,
            id: self.id.clone(),
            domain: self.domain.clone(),
        }
        .to_string()
    }

    /// The node metadata pilot-discovery reads: `LABELS` (an object of
    /// strings), `INTERCEPTION_MODE` and, when known, `SERVICE_ACCOUNT`.
    pub fn metadata(&self) -> serde_json::Value {
        let mut metadata = serde_json::json!({
            keys::LABELS: self.labels,
            keys::INTERCEPTION_MODE: self.interception.as_str(),
        });
        if let Some(account) = &self.service_account {
            metadata[keys::SERVICE_ACCOUNT] = account.clone().into();
        }
        metadata
    }
}

/// What the flags say, with the environment (a Kubernetes pod's downward
/// API) as fallback; [`IdentityInput::resolve`] makes an [`Identity`].
#[derive(Debug, Clone, Default)]
pub struct IdentityInput {
    /// `--ip`, else `INSTANCE_IP`.
    pub ip: Option<String>,
    /// `--id`, else `POD_NAME.POD_NAMESPACE`.
    pub id: Option<String>,
    /// `--namespace`, else `POD_NAMESPACE`, else `default`.
    pub namespace: Option<String>,
    /// `--domain`, else `<namespace>.svc.cluster.local`.
    pub domain: Option<String>,
    /// `--labels-file`: the downward API's `labels` file (`key="value"`
    /// per line).
    pub labels_file: Option<std::path::PathBuf>,
    /// `--label k=v` (repeatable), over the file's.
    pub labels: Vec<String>,
    /// `--interception-mode`.
    pub interception: InterceptionMode,
    /// `--service-cluster`.
    pub cluster: Option<String>,
    /// `--service-account`, else `SERVICE_ACCOUNT`.
    pub service_account: Option<String>,
}

impl IdentityInput {
    /// The identity, reading `env` for what the flags leave out.
    pub fn resolve(
        &self,
        proxy_type: ProxyType,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Identity, AgentError> {
        let non_empty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
        let ip_text = non_empty(self.ip.clone())
            .or_else(|| non_empty(env("INSTANCE_IP")))
            .ok_or(AgentError::Identity {
                field: "--ip",
                message: "no IP: pass --ip or set INSTANCE_IP (a pod's status.podIP)".into(),
            })?;
        let ip: IpAddr = ip_text.trim().parse().map_err(|_| AgentError::Identity {
            field: "--ip",
            message: format!("{ip_text:?} is not an IP address"),
        })?;
        let namespace = non_empty(self.namespace.clone())
            .or_else(|| non_empty(env("POD_NAMESPACE")))
            .unwrap_or_else(|| "default".to_string());
        let id = match non_empty(self.id.clone()) {
            Some(id) => id,
            None => match non_empty(env("POD_NAME")) {
                Some(pod) => format!("{pod}.{namespace}"),
                None => {
                    return Err(AgentError::Identity {
                        field: "--id",
                        message: "no id: pass --id or set POD_NAME (and POD_NAMESPACE)".into(),
                    });
                }
            },
        };
        if id.contains('~') {
            return Err(AgentError::Identity {
                field: "--id",
                message: format!("{id:?} contains '~', the node id's separator"),
            });
        }
        let domain =
            non_empty(self.domain.clone()).unwrap_or_else(|| format!("{namespace}.svc.cluster.local"));
        if domain.contains('~') {
            return Err(AgentError::Identity {
                field: "--domain",
                message: format!("{domain:?} contains '~', the node id's separator"),
            });
        }
        let mut labels = match &self.labels_file {
            Some(path) => read_labels_file(path)?,
            None => BTreeMap::new(),
        };
        for pair in &self.labels {
            let (k, v) = pair.split_once('=').ok_or_else(|| AgentError::Identity {
                field: "--label",
                message: format!("{pair:?} is not key=value"),
            })?;
            labels.insert(k.trim().to_string(), v.trim().to_string());
        }
        let cluster = non_empty(self.cluster.clone())
            .or_else(|| labels.get("app").cloned())
            .unwrap_or_else(|| "pilot-proxy".to_string());
        Ok(Identity {
            proxy_type,
            ip,
            id,
            domain,
            labels,
            interception: self.interception,
            cluster,
            service_account: non_empty(self.service_account.clone())
                .or_else(|| non_empty(env("SERVICE_ACCOUNT"))),
        })
    }
}

/// Reads a downward-API labels file: one `key="value"` a line, the value
/// quoted as Go's `%q` writes it.
pub fn read_labels_file(path: &Path) -> Result<BTreeMap<String, String>, AgentError> {
    let text = std::fs::read_to_string(path).map_err(|e| AgentError::file(path, e))?;
    parse_labels(&text).map_err(|(line, message)| AgentError::file(path, format!("line {line}: {message}")))
}

/// Parses the downward API's `key="value"` lines; errors carry the line
/// number.
pub fn parse_labels(text: &str) -> Result<BTreeMap<String, String>, (usize, String)> {
    let mut labels = BTreeMap::new();
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| (line_no, format!("{line:?} is not key=\"value\"")))?;
        let value = value.trim();
        let value = if let Some(inner) = value.strip_prefix('"') {
            let inner = inner
                .strip_suffix('"')
                .ok_or_else(|| (line_no, format!("value {value} has no closing quote")))?;
            unquote(inner).map_err(|m| (line_no, m))?
        } else {
            value.to_string()
        };
        labels.insert(key.trim().to_string(), value);
    }
    Ok(labels)
}

fn unquote(inner: &str) -> Result<String, String> {
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            other => {
                return Err(format!(
                    "unsupported escape \\{}",
                    other.map(String::from).unwrap_or_default()
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |key| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| v.to_string())
    }

    #[test]
    fn flags_win_over_the_environment() {
        let input = IdentityInput {
            ip: Some("10.0.0.9".into()),
            labels: vec!["version=v2".into()],
            ..Default::default()
        };
        let pod = env(&[
            ("INSTANCE_IP", "10.0.0.1"),
            ("POD_NAME", "reviews-1"),
            ("POD_NAMESPACE", "shop"),
        ]);
        let identity = input.resolve(ProxyType::Sidecar, pod).unwrap();
        assert_eq!(
            identity.node_id(),
            "sidecar~10.0.0.9~reviews-1.shop~shop.svc.cluster.local"
        );
        assert_eq!(identity.labels["version"], "v2");
        assert_eq!(identity.cluster, "pilot-proxy");
    }

    #[test]
    fn missing_identity_names_the_flag_and_variable() {
        let err = IdentityInput::default()
            .resolve(ProxyType::Router, env(&[]))
            .unwrap_err();
        assert!(
            err.to_string().contains("--ip") && err.to_string().contains("INSTANCE_IP"),
            "{err}"
        );
        let err = IdentityInput::default()
            .resolve(ProxyType::Router, env(&[("INSTANCE_IP", "1.2.3.4")]))
            .unwrap_err();
        assert!(err.to_string().contains("POD_NAME"), "{err}");
        let err = IdentityInput::default()
            .resolve(
                ProxyType::Router,
                env(&[("INSTANCE_IP", "nope"), ("POD_NAME", "a")]),
            )
            .unwrap_err();
        assert!(err.to_string().contains("\"nope\" is not an IP"), "{err}");
    }

    #[test]
    fn downward_api_labels() {
        let labels = parse_labels("app=\"reviews\"\nversion=\"v2\"\nnote=\"a \\\"b\\\"\"\n").unwrap();
        assert_eq!(labels["app"], "reviews");
        assert_eq!(labels["note"], "a \"b\"");
        assert_eq!(parse_labels("ok=\"1\"\nbroken\n").unwrap_err().0, 2);
    }
}
