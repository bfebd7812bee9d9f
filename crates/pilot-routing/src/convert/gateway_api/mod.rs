//! Conversion of Istio's VirtualServices and Gateways
//! (`networking.istio.io`) to the Kubernetes Gateway API
//! (`gateway.networking.k8s.io/v1`): what is exact is converted, and
//! every construct that is not is reported as a [`Note`] naming the object
//! and the field path, and listed in the converted object's
//! [`NOTES_ANNOTATION`].
//!
//! - A VirtualService for the mesh (no `gateways`, or `mesh` among them)
//!   becomes an HTTPRoute whose parents are the Services its hosts name
//!   (GAMMA): `reviews` or `reviews.prod.svc.<suffix>` is the Service
//!   `reviews` of its namespace or of `prod`. One bound to gateways
//!   becomes an HTTPRoute whose parents are the converted Gateways (same
//!   names and namespaces), its `hostnames` the VirtualService's hosts.
//!   Both at once make two HTTPRoutes (`NAME` for the gateways,
//!   `NAME-mesh` for the Services): the Gateway API reads `hostnames`
//!   only for Gateways.
//! - An Istio Gateway becomes a Gateway of the GatewayClass
//!   [`GatewayApiOptions::gateway_class`] (one listener per server and
//!   host); the GatewayClass itself (`controllerName`
//!   [`crate::gateway_api_status::CONTROLLER_NAME`]) is emitted once.
//! - Each HTTP route is one rule (one per match when a prefix rewrite
//!   needs it); its matches, destinations (Services with a port), redirect,
//!   rewrite, header operations, mirrors and timeout are converted where
//!   the Gateway API means the same thing (`routes.rs`, `matches.rs`).
//! - Order: Istio takes the first route that matches; the Gateway API
//!   orders matches by precedence (an exact path, then the longest
//!   prefix, a method, the most headers, the most query parameters).
//!   Every pair of matches the precedence reorders is checked: a note says
//!   so unless no request can match both (`order.rs`).
//!
//! Every object written passes pilot's validation of its kind; one that
//! would not is left out with a note. Objects of other kinds are kept as
//! they are; the v1alpha2 routing kinds are first converted to v1
//! ([`super::convert_objects`]), with their notes.
//!
//! ```
//! use pilot_model::document;
//! use pilot_api::default_registry;
//! use pilot_routing::convert::gateway_api::{GatewayApiOptions, to_gateway_api};
//!
//! let text = r#"
//! apiVersion: networking.istio.io/v1
//! kind: VirtualService
//! metadata: {name: reviews, namespace: default}
//! spec:
//!   hosts: [reviews]
//!   http:
//!   - match: [{headers: {end-user: {exact: jason}}}]
//!     route: [{destination: {host: reviews-v2, port: {number: 9080}}}]
//!   - route: [{destination: {host: reviews-v1, port: {number: 9080}}}]
//! "#;
//! let objects = document::parse("vs.yaml", text, &default_registry()).unwrap();
//! let conversion = to_gateway_api(&objects, &GatewayApiOptions::default()).unwrap();
//! assert!(conversion.notes.is_empty(), "{:?}", conversion.notes);
//! let yaml = document::to_yaml(&conversion.objects);
//! assert!(yaml.contains("kind: HTTPRoute"));
//! assert!(yaml.contains("kind: Service"));
//! ```

use std::collections::BTreeMap;

use pilot_api::gateway_api::{GatewayClass, HttpRoute};
use pilot_api::networking::{Gateway as IstioGateway, VirtualService};
use pilot_model::{Config, ConfigKind, DynConfig, StoreError};

use super::{Conversion, Note};
use crate::gateway_api_status::CONTROLLER_NAME;

mod listeners;
mod matches;
mod order;
mod routes;

/// The annotation of a converted object naming what it was converted
/// from (`VirtualService default/reviews`).
pub const FROM_ANNOTATION: &str = "convert.pilot.io/from";

/// The annotation of a converted object listing, one per line, what was
/// not converted exactly (`spec.http[1].fault: ...`): the notes of its
/// source object.
pub const NOTES_ANNOTATION: &str = "convert.pilot.io/notes";

/// How to convert.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GatewayApiOptions {
    /// The DNS suffix of Service hostnames (`svc.cluster.local`).
    pub domain_suffix: String,
    /// The GatewayClass of the converted Gateways (`pilot`).
    pub gateway_class: String,
    /// The ports of the Services, by hostname: a destination without a
    /// port takes its Service's only port (a backendRef to a Service must
    /// name one).
    pub service_ports: BTreeMap<String, Vec<u16>>,
}

impl Default for GatewayApiOptions {
    fn default() -> Self {
        GatewayApiOptions {
            domain_suffix: crate::DEFAULT_DOMAIN_SUFFIX.to_string(),
            gateway_class: DEFAULT_GATEWAY_CLASS.to_string(),
            service_ports: BTreeMap::new(),
        }
    }
}

/// The GatewayClass the converted Gateways name unless told otherwise.
pub const DEFAULT_GATEWAY_CLASS: &str = "pilot";

/// The Gateway API equivalent of the VirtualServices and Gateways of
/// `objects` (and of the v1alpha2 routing kinds, through v1): the
/// GatewayClass when a Gateway was converted, the Gateways, then the
/// HTTPRoutes; objects of other kinds are kept after them. Fails on an
/// object that does not decode as its kind.
pub fn to_gateway_api(objects: &[DynConfig], options: &GatewayApiOptions) -> Result<Conversion, StoreError> {
    let v1 = super::convert_objects(objects)?;
    let mut notes = v1.notes;
    let mut gateways = Vec::new();
    let mut routes = Vec::new();
    let mut services: Vec<(Out, Vec<Config<HttpRoute>>)> = Vec::new();
    let mut others = Vec::new();
    for object in &v1.objects {
        match object.meta.kind.as_str() {
            IstioGateway::KIND => {
                let gateway: Config<IstioGateway> = Config::from_dyn(object)?;
                let mut out = Out::new(&gateway.meta.kind, &gateway.meta.namespace, &gateway.meta.name);
                let converted = listeners::gateway(&gateway, options, &mut out);
                let converted = converted.iter().map(Config::to_dyn).collect::<Result<_, _>>()?;
                gateways.extend(out.finish(converted, &mut notes));
            }
            VirtualService::KIND => {
                let service: Config<VirtualService> = Config::from_dyn(object)?;
                let mut out = Out::new(&service.meta.kind, &service.meta.namespace, &service.meta.name);
                let converted = routes::virtual_service(&service, options, &mut out);
                if converted.is_empty() {
                    out.note(
                        "spec",
                        "nothing of it could be converted: no HTTPRoute is written",
                    );
                }
                services.push((out, converted));
            }
            _ => others.push(object.clone()),
        }
    }
    shared_parents(&mut services);
    for (out, converted) in services {
        let converted = converted.iter().map(Config::to_dyn).collect::<Result<_, _>>()?;
        routes.extend(out.finish(converted, &mut notes));
    }
    let mut objects = Vec::new();
    if !gateways.is_empty() {
        let mut class = Config::new(
            "default",
            options.gateway_class.clone(),
            GatewayClass {
                controller_name: CONTROLLER_NAME.to_string(),
                description: Some("pilot's Gateways".to_string()),
                ..Default::default()
            },
        );
        class.meta.annotations.insert(
            FROM_ANNOTATION.to_string(),
            "pilotctl convert --to gateway-api: the class of the converted Gateways".to_string(),
        );
        let class = class.to_dyn()?;
        // A class name that is no object name is the caller's mistake.
        pilot_api::default_registry().prepare(class.clone())?;
        objects.push(class);
    }
    objects.extend(gateways);
    objects.extend(routes);
    objects.extend(others);
    Ok(Conversion { objects, notes })
}

/// The notes of one source object, and where its converted objects get
/// them.
pub(super) struct Out {
    kind: String,
    namespace: String,
    name: String,
    notes: Vec<Note>,
}

impl Out {
    fn new(kind: &str, namespace: &str, name: &str) -> Self {
        Out {
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            notes: Vec::new(),
        }
    }

    /// Records that `path` of the source was not converted exactly.
    fn note(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.notes.push(Note {
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            path: path.into(),
            message: message.into(),
        });
    }

    /// The objects `converted`, each annotated with its source and the
    /// notes, that pass their kind's validation (a note says why any other
    /// was left out); the notes go to `notes`.
    fn finish(mut self, converted: Vec<DynConfig>, notes: &mut Vec<Note>) -> Vec<DynConfig> {
        let registry = pilot_api::default_registry();
        let lines: Vec<String> = self
            .notes
            .iter()
            .map(|n| format!("{}: {}", n.path, n.message))
            .collect();
        let mut kept = Vec::new();
        for mut object in converted {
            object.meta.annotations.insert(
                FROM_ANNOTATION.to_string(),
                format!("{} {}/{}", self.kind, self.namespace, self.name),
            );
            if !lines.is_empty() {
                object
                    .meta
                    .annotations
                    .insert(NOTES_ANNOTATION.to_string(), lines.join("\n"));
            }
            match registry.prepare(object.clone()) {
                Ok(_) => kept.push(object),
                Err(error) => {
                    let kind = object.meta.kind.split('.').next().unwrap_or_default().to_string();
                    let name = object.meta.name.clone();
                    self.note(
                        "spec",
                        format!("the {kind} {name} it converts to fails validation ({error}): left out"),
                    );
                }
            }
        }
        notes.append(&mut self.notes);
        kept
    }
}

/// Notes on each VirtualService whose HTTPRoutes share a parent and a
/// hostname with an earlier one's (by namespace and name, as pilot orders
/// them): Istio takes the routes of one VirtualService after the other's
/// (or only one's), where the Gateway API orders the rules of every
/// HTTPRoute of a parent together, by precedence.
fn shared_parents(services: &mut [(Out, Vec<Config<HttpRoute>>)]) {
    services.sort_by(|a, b| (&a.0.namespace, &a.0.name).cmp(&(&b.0.namespace, &b.0.name)));
    // (group, kind, namespace, name, hostname) of each parent, by source.
    type Parent = (String, String, String, String, String);
    let keys: Vec<Vec<Parent>> = services
        .iter()
        .map(|(_, routes)| {
            let mut keys = Vec::new();
            for route in routes {
                let hostnames = route
                    .spec
                    .hostnames
                    .clone()
                    .unwrap_or_else(|| vec!["*".to_string()]);
                for parent in route.spec.parent_refs.iter().flatten() {
                    let namespace = parent
                        .namespace
                        .clone()
                        .unwrap_or_else(|| route.meta.namespace.clone());
                    for host in &hostnames {
                        keys.push((
                            parent.group().to_string(),
                            parent.kind().to_string(),
                            namespace.clone(),
                            parent.name.clone(),
                            host.clone(),
                        ));
                    }
                }
            }
            keys
        })
        .collect();
    let overlap = |a: &str, b: &str| {
        let covers = |wild: &str, host: &str| wild.strip_prefix('*').is_some_and(|rest| host.ends_with(rest));
        a == b || covers(a, b) || covers(b, a)
    };
    for later in 1..services.len() {
        let found = (0..later).find_map(|earlier| {
            keys[later].iter().find_map(|k| {
                keys[earlier]
                    .iter()
                    .find(|e| e.0 == k.0 && e.1 == k.1 && e.2 == k.2 && e.3 == k.3 && overlap(&e.4, &k.4))
                    .map(|e| (earlier, e.clone()))
            })
        });
        if let Some((earlier, (_, kind, namespace, name, host))) = found {
            let (ns, other) = (
                services[earlier].0.namespace.clone(),
                services[earlier].0.name.clone(),
            );
            let what = if kind == "Service" {
                format!("the Service {namespace}/{name}")
            } else {
                format!("{host} on the {kind} {namespace}/{name}")
            };
            services[later].0.note(
                "spec.hosts",
                format!(
                    "the VirtualService {ns}/{other} routes {what} too: Istio takes one VirtualService's \
                     routes before the other's, the Gateway API ranks the rules of both HTTPRoutes together"
                ),
            );
        }
    }
}

/// The Service a host names: `(name, namespace)` of `name.namespace.suffix`
/// (a short name is already resolved in the object's namespace); none for
/// any other host.
fn service_of(host: &str, suffix: &str) -> Option<(String, String)> {
    let rest = host.strip_suffix(suffix)?.strip_suffix('.')?;
    let (name, namespace) = rest.split_once('.')?;
    let label = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    };
    (label(name) && label(namespace)).then(|| (name.to_string(), namespace.to_string()))
}

/// Whether `host` is a Gateway API hostname: lower-case DNS labels, a
/// leading `*.` allowed, no IP address.
fn is_hostname(host: &str) -> bool {
    let rest = host.strip_prefix("*.").unwrap_or(host);
    !rest.is_empty()
        && host.len() <= 253
        && rest.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
        && !rest.split('.').all(|l| l.bytes().all(|b| b.is_ascii_digit()))
}

/// `text` as a section or rule name (`[a-z0-9-]`, at most 253
/// characters), none when nothing is left.
fn section_name(text: &str) -> Option<String> {
    let name: String = text
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let name = name.trim_matches('-');
    (!name.is_empty()).then(|| name.chars().take(253).collect::<String>())
}

#[cfg(test)]
mod tests;
