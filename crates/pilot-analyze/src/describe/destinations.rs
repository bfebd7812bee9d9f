//! A route's destinations as describing shows them: the DestinationRule
//! and subset each uses, and a subset that is missing or has no instance.

use pilot_api::networking::{self, VirtualService};
use pilot_model::Config;
use pilot_routing::WeightedDestination;

use super::routes::{DestinationView, Tracer, reference};
use super::{labels_text, resolve};

impl Tracer<'_> {
    /// A VirtualService destination, with its DestinationRule and subset.
    pub(super) fn destination(
        &self,
        vs: &Config<VirtualService>,
        destination: &networking::Destination,
        weight: Option<i32>,
        single: bool,
    ) -> DestinationView {
        let domain = self.context.input.domain;
        let host = resolve(&destination.host, &vs.meta.namespace, domain);
        let rule = self
            .rules
            .iter()
            .find(|r| resolve(&r.spec.host, &r.meta.namespace, domain) == host);
        let mut view = DestinationView {
            host: host.clone(),
            subset: (!destination.subset.is_empty()).then(|| destination.subset.clone()),
            port: destination
                .port
                .as_ref()
                .and_then(|p| u16::try_from(p.number).ok()),
            weight: weight
                .and_then(|w| u32::try_from(w).ok())
                .unwrap_or(if single { 100 } else { 0 }),
            destination_rule: rule.map(reference),
            ..Default::default()
        };
        if destination.subset.is_empty() {
            return view;
        }
        match rule {
            None => {
                view.problem = Some(format!(
                    "subset {} is missing: no DestinationRule for {host} defines subsets; pilot leaves this destination out",
                    destination.subset
                ));
            }
            Some(rule) => match rule.spec.subsets.iter().find(|s| s.name == destination.subset) {
                Some(subset) => {
                    view.subset_labels = subset.labels.clone();
                    if let Some(registry) = self.context.input.registry
                        && let Some(service) = registry.services.get(&host)
                        && !service
                            .instances
                            .iter()
                            .any(|i| subset.labels.iter().all(|(k, v)| i.labels.get(k) == Some(v)))
                    {
                        view.problem = Some(format!(
                            "subset {} ({}) has no instance in the registry: its requests fail with 503",
                            subset.name,
                            labels_text(&subset.labels)
                        ));
                    }
                }
                None => {
                    let names: Vec<&str> = rule.spec.subsets.iter().map(|s| s.name.as_str()).collect();
                    view.problem = Some(format!(
                        "subset {} is missing: DestinationRule {}/{} defines {}; pilot leaves this destination out",
                        destination.subset,
                        rule.meta.namespace,
                        rule.meta.name,
                        if names.is_empty() {
                            "no subset".to_string()
                        } else {
                            names.join(", ")
                        }
                    ));
                }
            },
        }
        view
    }

    /// A compiled destination (a RouteRule's): its subset by labels.
    pub(super) fn compiled_destination(&self, target: &WeightedDestination) -> DestinationView {
        let labels = target.destination.subset.0.clone();
        let subset = self
            .context
            .model
            .destination(&target.destination.host)
            .and_then(|d| d.subsets.iter().find(|s| s.labels.0 == labels))
            .map(|s| s.name.clone());
        let mut problem = None;
        if !labels.is_empty()
            && let Some(registry) = self.context.input.registry
            && let Some(service) = registry.services.get(&target.destination.host)
            && !service
                .instances
                .iter()
                .any(|i| labels.iter().all(|(k, v)| i.labels.get(k) == Some(v)))
            && target.weight > 0
        {
            problem = Some(format!(
                "no instance has the labels {}: its requests fail with 503",
                labels_text(&labels)
            ));
        }
        DestinationView {
            host: target.destination.host.clone(),
            subset: subset.or_else(|| (!labels.is_empty()).then(|| labels_text(&labels))),
            subset_labels: labels,
            port: target.destination.port,
            weight: target.weight,
            destination_rule: None,
            problem,
        }
    }
}
