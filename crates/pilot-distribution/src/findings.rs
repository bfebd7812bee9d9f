//! Analysis findings in objects' status: the [`Findings`] an embedder
//! gives the [`crate::StatusWriter`] (pilot-discovery: pilot-analyze over
//! its Controller's objects, its registry and its proxies), turned into a
//! `Reconciled` condition and `validationMessages` beside the distribution
//! counts, written in the same status write.
//!
//! `Reconciled` is `True` while no finding about the object is an error,
//! `False` with the first error's name as reason and its description as
//! message otherwise; `observedGeneration` is the object's generation, and
//! `lastTransitionTime` moves only when the status (`True`/`False`) does.
//! A fix removes the messages and turns the condition back at the
//! writer's next round.

use std::collections::HashMap;
use std::time::SystemTime;

use pilot_model::{
    Condition, ConfigKey, ConfigStatus, DynConfig, GatewayApiStatus, RECONCILED, ValidationMessage,
};

/// Where findings come from: what analysis says of each object, and the
/// Gateway API's status of the objects that have one, computed once per
/// round of the elected writer.
pub trait Findings: Send + Sync + 'static {
    /// The validation messages of every object that has some, by object.
    /// An object missing from the map has none.
    fn findings(&self) -> HashMap<ConfigKey, Vec<ValidationMessage>>;

    /// The Gateway API's status of every object pilot answers for
    /// (pilot-routing's `gateway_api_status::statuses`); none by default.
    fn gateway_api(&self) -> HashMap<ConfigKey, GatewayApiStatus> {
        HashMap::new()
    }

    /// The kinds (ids) [`Findings::gateway_api`] gives statuses to, whose
    /// objects the writer reads beside the pushed kinds'; none by default.
    fn status_kinds(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Adds the Gateway API's status `parts` to `status`: its conditions
/// after the `Reconciled` one, its listeners, addresses, parents and
/// ancestors. A condition
/// keeps the transition time the object's current status gives it (same
/// place, same type) while its status holds.
pub(crate) fn apply_gateway_api(
    object: &DynConfig,
    parts: &GatewayApiStatus,
    now: SystemTime,
    status: &mut ConfigStatus,
) {
    let previous = object.meta.status.as_ref();
    let keep = |conditions: &[Condition], before: Option<&[Condition]>| -> Vec<Condition> {
        conditions
            .iter()
            .map(|condition| {
                let mut condition = condition.clone();
                condition.last_transition_time = before
                    .and_then(|b| b.iter().find(|c| c.type_ == condition.type_))
                    .filter(|c| c.status == condition.status)
                    .map_or(now, |c| c.last_transition_time);
                condition
            })
            .collect()
    };
    status
        .conditions
        .extend(keep(&parts.conditions, previous.map(|s| s.conditions.as_slice())));
    status.listeners = parts
        .listeners
        .iter()
        .map(|listener| {
            let before = previous
                .and_then(|s| s.listeners.iter().find(|l| l.name == listener.name))
                .map(|l| l.conditions.as_slice());
            let mut listener = listener.clone();
            listener.conditions = keep(&listener.conditions, before);
            listener
        })
        .collect();
    status.addresses = parts.addresses.clone();
    status.parents = parts
        .parents
        .iter()
        .map(|parent| {
            let before = previous
                .and_then(|s| s.parents.iter().find(|p| p.parent_ref == parent.parent_ref))
                .map(|p| p.conditions.as_slice());
            let mut parent = parent.clone();
            parent.conditions = keep(&parent.conditions, before);
            parent
        })
        .collect();
    status.ancestors = parts
        .ancestors
        .iter()
        .map(|ancestor| {
            let before = previous
                .and_then(|s| {
                    s.ancestors
                        .iter()
                        .find(|a| a.ancestor_ref == ancestor.ancestor_ref)
                })
                .map(|a| a.conditions.as_slice());
            let mut ancestor = ancestor.clone();
            ancestor.conditions = keep(&ancestor.conditions, before);
            ancestor
        })
        .collect();
}

/// Sets `status`'s conditions and validation messages for `object` from
/// `messages` (sorted; an empty list clears them), keeping the transition
/// time of the object's current `Reconciled` condition when its status is
/// unchanged.
pub(crate) fn apply(
    object: &DynConfig,
    messages: &[ValidationMessage],
    now: SystemTime,
    status: &mut ConfigStatus,
) {
    let mut messages = messages.to_vec();
    messages.sort();
    messages.dedup();
    let first_error = messages.iter().find(|m| m.is_error());
    let warnings = messages.iter().filter(|m| !m.is_error()).count();
    let (state, reason, message) = match first_error {
        Some(error) => (
            "False",
            if error.type_.name.is_empty() {
                error.type_.code.clone()
            } else {
                error.type_.name.clone()
            },
            format!("{}: {}", error.type_.code, error.description),
        ),
        None => (
            "True",
            "Reconciled".to_string(),
            match warnings {
                0 => "analysis found nothing wrong".to_string(),
                1 => "analysis found no error, 1 warning (see validationMessages)".to_string(),
                n => format!("analysis found no error, {n} warnings (see validationMessages)"),
            },
        ),
    };
    let previous = object
        .meta
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == RECONCILED));
    let last_transition_time = previous
        .filter(|c| c.status == state)
        .map_or(now, |c| c.last_transition_time);
    status.conditions = vec![Condition {
        type_: RECONCILED.to_string(),
        status: state.to_string(),
        reason,
        message,
        observed_generation: object.meta.generation,
        last_transition_time,
    }];
    status.validation_messages = messages;
}

#[cfg(test)]
mod tests {
    use pilot_model::{ConfigMeta, MessageType};

    use super::*;

    fn message(code: &str, level: &str, description: &str) -> ValidationMessage {
        ValidationMessage {
            type_: MessageType {
                code: code.into(),
                name: format!("Name{code}"),
            },
            level: level.into(),
            description: description.into(),
        }
    }

    fn status() -> ConfigStatus {
        pilot_model::distribution_status("VirtualService", "7", &[], SystemTime::UNIX_EPOCH)
    }

    #[test]
    fn an_error_makes_reconciled_false_and_a_fix_turns_it_back() {
        let mut object = DynConfig {
            meta: ConfigMeta::new("VirtualService", "default", "reviews"),
            spec: Default::default(),
        };
        object.meta.generation = Some(4);
        let at = |s| SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(s);
        let mut written = status();
        let faulty = [
            message("PLT0211", "WARNING", "spec.http[1]: never matches"),
            message("PLT0210", "ERROR", "spec.gateways[0]: no gateway"),
        ];
        apply(&object, &faulty, at(10), &mut written);
        let condition = &written.conditions[0];
        assert_eq!(
            (
                condition.status.as_str(),
                condition.reason.as_str(),
                condition.message.as_str()
            ),
            ("False", "NamePLT0210", "PLT0210: spec.gateways[0]: no gateway")
        );
        assert_eq!(condition.observed_generation, Some(4));
        assert_eq!(written.validation_messages.len(), 2);

        // The same findings a round later: the same status, time kept.
        object.meta.status = Some(written.clone());
        let mut again = status();
        apply(&object, &faulty, at(20), &mut again);
        assert!(again.same_as(&written));
        assert_eq!(again.conditions[0].last_transition_time, at(10));

        // Fixed: True, no messages, a new transition time.
        let mut fixed = status();
        apply(&object, &[], at(30), &mut fixed);
        assert!(!fixed.same_as(&written));
        assert_eq!(fixed.conditions[0].status, "True");
        assert_eq!(fixed.conditions[0].last_transition_time, at(30));
        assert!(fixed.validation_messages.is_empty());
    }
}
