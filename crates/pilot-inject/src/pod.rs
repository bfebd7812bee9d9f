//! The injection of one pod: the decision and the containers, volumes and
//! status annotation added.

use serde_json::{Map, Value, json};

use crate::template::InjectTemplate;

/// The annotation that opts a pod out (`"false"`).
pub const INJECT_ANNOTATION: &str = "sidecar.istio.io/inject";
/// The annotation naming what was injected; its presence makes injection a
/// no-op.
pub const STATUS_ANNOTATION: &str = "sidecar.istio.io/status";
/// The injected init container.
pub const INIT_CONTAINER: &str = "pilot-init";
/// The injected sidecar.
pub const PROXY_CONTAINER: &str = "pilot-proxy";
/// The injected volumes: Envoy's bootstraps, the pod's labels, the
/// projected service-account token the sidecar presents to pilot.
pub const VOLUMES: [&str; 3] = ["pilot-envoy", "pilot-podinfo", "istio-token"];
/// Where the sidecar reads its projected service-account token.
pub const TOKEN_PATH: &str = "/var/run/secrets/tokens/istio-token";

const TRAFFIC: &str = "traffic.sidecar.istio.io/";

/// What [`inject_pod`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The sidecar was added.
    Injected,
    /// Left alone, with the reason.
    Skipped(&'static str),
}

/// A problem with the pod: the field path (relative to the pod template)
/// and what is wrong.
pub type PodProblem = (String, String);

/// Injects the sidecar into a pod (`metadata` and `spec` of a Pod or a pod
/// template), unless it opts out (`sidecar.istio.io/inject: "false"`), uses
/// the host's network, or is already injected. On error nothing is changed.
pub fn inject_pod(pod: &mut Value, template: &InjectTemplate) -> Result<Decision, PodProblem> {
    let annotations = pod
        .pointer("/metadata/annotations")
        .cloned()
        .unwrap_or(Value::Null);
    if !annotations.is_null() && !annotations.is_object() {
        return Err((".metadata.annotations".into(), "must be a map of strings".into()));
    }
    let annotation = |key: &str| -> Result<Option<String>, PodProblem> {
        match annotations.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Bool(b)) => Ok(Some(b.to_string())),
            Some(_) => Err((format!(".metadata.annotations[{key}]"), "must be a string".into())),
        }
    };
    if let Some(value) = annotation(INJECT_ANNOTATION)? {
        match value.to_ascii_lowercase().as_str() {
            "false" | "n" | "no" | "off" => return Ok(Decision::Skipped("sidecar.istio.io/inject is false")),
            "true" | "y" | "yes" | "on" => {}
            _ => {
                return Err((
                    format!(".metadata.annotations[{INJECT_ANNOTATION}]"),
                    format!("{value:?} is not \"true\" or \"false\""),
                ));
            }
        }
    }
    if let Some(labelled) = pod
        .pointer("/metadata/labels")
        .and_then(|labels| labels.get(pilot_model::REVISION_LABEL))
    {
        let Some(labelled) = labelled.as_str() else {
            return Err((
                format!(".metadata.labels[{}]", pilot_model::REVISION_LABEL),
                "must be a string".into(),
            ));
        };
        if labelled != pilot_model::revision_name(&template.revision) {
            return Ok(Decision::Skipped(
                "the pod's istio.io/rev label names another control-plane revision",
            ));
        }
    }
    if annotation(STATUS_ANNOTATION)?.is_some() {
        return Ok(Decision::Skipped(
            "already injected (sidecar.istio.io/status is set)",
        ));
    }
    let Some(spec) = pod.get("spec") else {
        return Err((".spec".into(), "missing: a pod needs a spec".into()));
    };
    if spec.get("hostNetwork").and_then(Value::as_bool) == Some(true) {
        return Ok(Decision::Skipped("the pod uses the host's network"));
    }
    let containers = match spec.get("containers") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(Value::Array(_)) | None => {
            return Err((
                ".spec.containers".into(),
                "a pod needs at least one container".into(),
            ));
        }
        Some(_) => return Err((".spec.containers".into(), "must be a list of containers".into())),
    };
    for (i, container) in containers.iter().enumerate() {
        if container.get("name").and_then(Value::as_str) == Some(PROXY_CONTAINER) {
            return Err((
                format!(".spec.containers[{i}].name"),
                format!(
                    "{PROXY_CONTAINER} is the injected sidecar's name, but the pod has no {STATUS_ANNOTATION} annotation"
                ),
            ));
        }
    }
    for field in ["initContainers", "volumes"] {
        if let Some(v) = spec.get(field).filter(|v| !v.is_null() && !v.is_array()) {
            let _ = v;
            return Err((format!(".spec.{field}"), "must be a list".into()));
        }
    }

    let ports = container_ports(containers)?;
    let init_args = iptables_args(template, &ports, &annotation)?;
    let init = json!({
        "name": INIT_CONTAINER,
        "image": template.init_image,
        "imagePullPolicy": template.image_pull_policy,
        "command": ["pilot-agent"],
        "args": init_args,
        "resources": template.init_resources,
        "securityContext": {
            "runAsUser": 0,
            "runAsNonRoot": false,
            "privileged": false,
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
        },
    });
    let field = |path: &str| json!({"valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}});
    let env = |name: &str, path: &str| {
        let mut e = field(path);
        e["name"] = json!(name);
        e
    };
    let proxy = json!({
        "name": PROXY_CONTAINER,
        "image": template.proxy_image,
        "imagePullPolicy": template.image_pull_policy,
        "command": ["pilot-agent"],
        "args": [
            "proxy", "sidecar",
            "--discovery-address", template.discovery_address,
            "--labels-file", "/etc/pilot/podinfo/labels",
            "--config-dir", "/etc/pilot/proxy",
            "--status-addr", format!("0.0.0.0:{}", template.status_port),
            "--discovery-token-file", TOKEN_PATH,
        ],
        "env": [
            env("POD_NAME", "metadata.name"),
            env("POD_NAMESPACE", "metadata.namespace"),
            env("INSTANCE_IP", "status.podIP"),
        ],
        "ports": [{"name": "http-status", "containerPort": template.status_port, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": "/healthz/ready", "port": template.status_port},
            "initialDelaySeconds": 1,
            "periodSeconds": 2,
            "failureThreshold": 30,
        },
        "resources": template.resources,
        "securityContext": {
            "runAsUser": template.proxy_uid,
            "runAsGroup": template.proxy_uid,
            "runAsNonRoot": true,
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": VOLUMES[0], "mountPath": "/etc/pilot/proxy"},
            {"name": VOLUMES[1], "mountPath": "/etc/pilot/podinfo", "readOnly": true},
            {"name": VOLUMES[2], "mountPath": "/var/run/secrets/tokens", "readOnly": true},
        ],
    });
    let volumes = [
        json!({"name": VOLUMES[0], "emptyDir": {"medium": "Memory"}}),
        json!({"name": VOLUMES[1], "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
        ]}}),
        // The pod's own service-account token for pilot's audience, rotated
        // by the kubelet (pilot-agent rereads it): the credential
        // pilot-discovery checks with a TokenReview.
        json!({"name": VOLUMES[2], "projected": {"sources": [{"serviceAccountToken": {
            "path": "istio-token",
            "audience": template.token_audience,
            "expirationSeconds": 43200,
        }}]}}),
    ];
    let status = json!({
        "version": concat!("pilot-inject/", env!("CARGO_PKG_VERSION")),
        "initContainers": [INIT_CONTAINER],
        "containers": [PROXY_CONTAINER],
        "volumes": VOLUMES,
        "revision": pilot_model::revision_name(&template.revision),
    });

    // Everything checked: change the pod.
    let spec = pod["spec"].as_object_mut().expect("checked above");
    push(spec, "initContainers", [init]);
    push(spec, "containers", [proxy]);
    push(spec, "volumes", volumes);
    let metadata = pod
        .as_object_mut()
        .expect("a pod with a spec is an object")
        .entry("metadata")
        .or_insert_with(|| json!({}));
    if let Some(metadata) = metadata.as_object_mut() {
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        if annotations.is_null() {
            *annotations = json!({});
        }
        annotations[STATUS_ANNOTATION] = json!(status.to_string());
    }
    Ok(Decision::Injected)
}

fn push<const N: usize>(spec: &mut Map<String, Value>, field: &str, items: [Value; N]) {
    let list = spec.entry(field).or_insert_with(|| json!([]));
    if list.is_null() {
        *list = json!([]);
    }
    if let Some(list) = list.as_array_mut() {
        list.extend(items);
    }
}

/// The TCP ports the pod's containers declare, in order, without repeats.
fn container_ports(containers: &[Value]) -> Result<Vec<u16>, PodProblem> {
    let mut ports = Vec::new();
    for (i, container) in containers.iter().enumerate() {
        let Some(list) = container.get("ports").filter(|p| !p.is_null()) else {
            continue;
        };
        let Some(list) = list.as_array() else {
            return Err((format!(".spec.containers[{i}].ports"), "must be a list".into()));
        };
        for (j, port) in list.iter().enumerate() {
            let protocol = port.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            if protocol != "TCP" {
                continue;
            }
            let number = port
                .get("containerPort")
                .and_then(Value::as_u64)
                .filter(|p| (1..=65535).contains(p))
                .ok_or_else(|| {
                    (
                        format!(".spec.containers[{i}].ports[{j}].containerPort"),
                        "must be a port number (1-65535)".to_string(),
                    )
                })? as u16;
            if !ports.contains(&number) {
                ports.push(number);
            }
        }
    }
    Ok(ports)
}

/// `pilot-agent iptables` arguments from the ports and the
/// `traffic.sidecar.istio.io/*` annotations (each checked).
fn iptables_args(
    template: &InjectTemplate,
    ports: &[u16],
    annotation: &dyn Fn(&str) -> Result<Option<String>, PodProblem>,
) -> Result<Vec<String>, PodProblem> {
    let checked = |name: &str, kind: ListKind| -> Result<Option<String>, PodProblem> {
        let key = format!("{TRAFFIC}{name}");
        let Some(value) = annotation(&key)? else {
            return Ok(None);
        };
        check_list(&value, kind).map_err(|m| (format!(".metadata.annotations[{key}]"), m))?;
        Ok(Some(
            value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(","),
        ))
    };
    let inbound = match checked("includeInboundPorts", ListKind::PortsOrStar)? {
        Some(value) => value,
        None => ports.iter().map(u16::to_string).collect::<Vec<_>>().join(","),
    };
    let mut exclude_inbound = vec![template.status_port.to_string()];
    if let Some(value) = checked("excludeInboundPorts", ListKind::Ports)? {
        exclude_inbound.extend(value.split(',').filter(|s| !s.is_empty()).map(str::to_string));
    }
    let include_cidrs =
        checked("includeOutboundIPRanges", ListKind::CidrsOrStar)?.unwrap_or_else(|| "*".into());
    let exclude_cidrs = checked("excludeOutboundIPRanges", ListKind::Cidrs)?.unwrap_or_default();
    let exclude_ports = checked("excludeOutboundPorts", ListKind::Ports)?.unwrap_or_default();
    let uid = template.proxy_uid.to_string();
    let port = template.capture_port.to_string();
    Ok([
        "iptables",
        "--outbound-port",
        &port,
        "--inbound-port",
        &port,
        "--proxy-uid",
        &uid,
        "--proxy-gid",
        &uid,
        "--inbound-ports",
        &inbound,
        "--exclude-inbound-ports",
        &exclude_inbound.join(","),
        "--include-outbound-cidrs",
        &include_cidrs,
        "--exclude-outbound-cidrs",
        &exclude_cidrs,
        "--exclude-outbound-ports",
        &exclude_ports,
    ]
    .map(str::to_string)
    .to_vec())
}

#[derive(Clone, Copy)]
enum ListKind {
    Ports,
    PortsOrStar,
    Cidrs,
    CidrsOrStar,
}

fn check_list(value: &str, kind: ListKind) -> Result<(), String> {
    let star = matches!(kind, ListKind::PortsOrStar | ListKind::CidrsOrStar);
    if star && value.trim() == "*" {
        return Ok(());
    }
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match kind {
            ListKind::Ports | ListKind::PortsOrStar => {
                if !item.parse::<u16>().is_ok_and(|p| p != 0) {
                    return Err(format!("{item:?} is not a port (1-65535)"));
                }
            }
            ListKind::Cidrs | ListKind::CidrsOrStar => {
                let (address, prefix) = item.split_once('/').unwrap_or((item, ""));
                let address: std::net::IpAddr = address
                    .parse()
                    .map_err(|_| format!("{item:?} is not an address or CIDR"))?;
                let max = if address.is_ipv4() { 32 } else { 128 };
                if !prefix.is_empty() && !prefix.parse::<u8>().is_ok_and(|p| p <= max) {
                    return Err(format!("{item:?} has a bad prefix length (0-{max})"));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(annotations: Value) -> Value {
        json!({"metadata": {"annotations": annotations}, "spec": {"containers": [
            {"name": "app", "image": "app", "ports": [{"containerPort": 9080}, {"containerPort": 53, "protocol": "UDP"}]}
        ]}})
    }

    #[test]
    fn each_revision_injects_only_its_own_pods_and_points_them_at_itself() {
        let labelled = |rev: &str| {
            let mut p = pod(json!({}));
            p["metadata"]["labels"] = json!({"app": "reviews", "istio.io/rev": rev});
            p
        };
        let stable = InjectTemplate::default();
        let canary = InjectTemplate::default().with_revision("canary");
        assert_eq!(
            canary.discovery_address,
            "pilot-discovery-canary.pilot-system:15010"
        );

        // A pod of the canary revision: the default injector leaves it.
        let mut p = labelled("canary");
        assert!(matches!(inject_pod(&mut p, &stable), Ok(Decision::Skipped(_))));
        assert_eq!(p, labelled("canary"), "a skipped pod is unchanged");
        // The canary injector injects it, pointing it at the canary.
        assert_eq!(inject_pod(&mut p, &canary), Ok(Decision::Injected));
        let args = p["spec"]["containers"][1]["args"].to_string();
        assert!(
            args.contains("pilot-discovery-canary.pilot-system:15010"),
            "{args}"
        );
        let status: Value =
            serde_json::from_str(p["metadata"]["annotations"][STATUS_ANNOTATION].as_str().unwrap()).unwrap();
        assert_eq!(status["revision"], "canary");

        // `default` names the default revision; the canary leaves it.
        let mut p = labelled("default");
        assert!(matches!(inject_pod(&mut p, &canary), Ok(Decision::Skipped(_))));
        assert_eq!(inject_pod(&mut p, &stable), Ok(Decision::Injected));
        // An unlabelled pod is whoever's webhook its namespace selects.
        let mut p = pod(json!({}));
        assert_eq!(inject_pod(&mut p, &canary), Ok(Decision::Injected));

        // A discovery address of the mesh config is kept.
        let own = InjectTemplate {
            discovery_address: "pilot.example:15010".into(),
            ..InjectTemplate::default()
        };
        assert_eq!(
            own.with_revision("canary").discovery_address,
            "pilot.example:15010"
        );
        // A label that is not a string is the pod's error, named.
        let mut p = pod(json!({}));
        p["metadata"]["labels"] = json!({"istio.io/rev": 3});
        assert_eq!(
            inject_pod(&mut p, &canary).unwrap_err().0,
            ".metadata.labels[istio.io/rev]"
        );
    }

    #[test]
    fn the_sidecar_presents_its_projected_token_for_pilots_audience() {
        let mut p = pod(json!({}));
        assert_eq!(
            inject_pod(&mut p, &InjectTemplate::default()),
            Ok(Decision::Injected)
        );
        let volumes = p["spec"]["volumes"].as_array().unwrap();
        let token = volumes.iter().find(|v| v["name"] == "istio-token").unwrap();
        assert_eq!(
            token["projected"]["sources"][0]["serviceAccountToken"]["audience"],
            "istio-ca"
        );
        let sidecar = &p["spec"]["containers"][1];
        let args: Vec<String> = serde_json::from_value(sidecar["args"].clone()).unwrap();
        let at = args.iter().position(|a| a == "--discovery-token-file").unwrap();
        assert_eq!(args[at + 1], TOKEN_PATH);
        assert!(
            sidecar["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["name"] == "istio-token"
                    && TOKEN_PATH.starts_with(m["mountPath"].as_str().unwrap()))
        );
    }

    fn init_args(pod: &Value) -> Vec<String> {
        serde_json::from_value(pod["spec"]["initContainers"][0]["args"].clone()).unwrap()
    }

    #[test]
    fn ports_come_from_the_containers_and_annotations_override() {
        let mut p = pod(json!({}));
        assert_eq!(
            inject_pod(&mut p, &InjectTemplate::default()),
            Ok(Decision::Injected)
        );
        let args = init_args(&p);
        let at = args.iter().position(|a| a == "--inbound-ports").unwrap();
        assert_eq!(args[at + 1], "9080");

        let mut p = pod(json!({
            "traffic.sidecar.istio.io/includeInboundPorts": "*",
            "traffic.sidecar.istio.io/excludeInboundPorts": "22",
            "traffic.sidecar.istio.io/excludeOutboundIPRanges": "10.0.0.0/8, 169.254.169.254",
        }));
        inject_pod(&mut p, &InjectTemplate::default()).unwrap();
        let args = init_args(&p).join(" ");
        assert!(
            args.contains("--inbound-ports * --exclude-inbound-ports 15020,22"),
            "{args}"
        );
        assert!(
            args.contains("--exclude-outbound-cidrs 10.0.0.0/8,169.254.169.254"),
            "{args}"
        );
    }

    #[test]
    fn bad_annotations_are_refused_and_nothing_changes() {
        let mut p = pod(json!({"traffic.sidecar.istio.io/excludeOutboundIPRanges": "10.0.0.0/40"}));
        let before = p.clone();
        let (path, message) = inject_pod(&mut p, &InjectTemplate::default()).unwrap_err();
        assert_eq!(
            path,
            ".metadata.annotations[traffic.sidecar.istio.io/excludeOutboundIPRanges]"
        );
        assert!(message.contains("prefix"), "{message}");
        assert_eq!(p, before);
    }

    #[test]
    fn opt_out_host_network_and_reinjection_are_left_alone() {
        let mut p = pod(json!({"sidecar.istio.io/inject": "false"}));
        assert!(matches!(
            inject_pod(&mut p, &InjectTemplate::default()),
            Ok(Decision::Skipped(_))
        ));
        let mut p = pod(json!({}));
        p["spec"]["hostNetwork"] = json!(true);
        assert!(matches!(
            inject_pod(&mut p, &InjectTemplate::default()),
            Ok(Decision::Skipped(_))
        ));
        let mut p = pod(json!({}));
        inject_pod(&mut p, &InjectTemplate::default()).unwrap();
        let once = p.clone();
        assert!(matches!(
            inject_pod(&mut p, &InjectTemplate::default()),
            Ok(Decision::Skipped(_))
        ));
        assert_eq!(p, once);
    }
}
