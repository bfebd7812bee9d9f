//! Label selectors, as Kubernetes writes them: `app=reviews,version!=v1,env,!canary`.

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    Missing(String),
}

/// A parsed label selector; every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Selector(Vec<Requirement>);

impl Selector {
    /// Parses `text` (empty selects everything).
    pub(super) fn parse(text: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        if text.trim().is_empty() {
            return Ok(Selector(requirements));
        }
        for part in text.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(format!(
                    "labelSelector {text:?}: an empty requirement (two commas, or a comma at an end)"
                ));
            }
            let requirement = if let Some((key, value)) = part.split_once("!=") {
                Requirement::NotEquals(key.trim().into(), value.trim().into())
            } else if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Requirement::Equals(key.trim().into(), value.trim().into())
            } else if let Some(key) = part.strip_prefix('!') {
                Requirement::Missing(key.trim().into())
            } else {
                Requirement::Exists(part.into())
            };
            let key = match &requirement {
                Requirement::Equals(k, _)
                | Requirement::NotEquals(k, _)
                | Requirement::Exists(k)
                | Requirement::Missing(k) => k,
            };
            pilot_model::label_key(key).map_err(|e| format!("labelSelector {part:?}: {e}"))?;
            if let Requirement::Equals(_, value) | Requirement::NotEquals(_, value) = &requirement {
                check_value(value).map_err(|e| format!("labelSelector {part:?}: {e}"))?;
            }
            requirements.push(requirement);
        }
        Ok(Selector(requirements))
    }

    /// True when `labels` satisfy every requirement.
    pub(super) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Missing(k) => !labels.contains_key(k),
        })
    }
}

/// A label value as Kubernetes allows it: at most 63 characters,
/// alphanumerics, `-`, `_` and `.`, starting and ending alphanumeric (or
/// empty).
fn check_value(value: &str) -> Result<(), String> {
    let ok = value.is_empty()
        || (value.len() <= 63
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{value:?} is not a label value (at most 63 alphanumerics, '-', '_' or '.', alphanumeric at both ends)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_selectors_are_refused() {
        for bad in ["a=b=c", "a,,b", "a,", ",a", "a!=b=c"] {
            assert!(Selector::parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(Selector::parse("a=b,c!=d,e,!f").is_ok());
        assert!(Selector::parse("").is_ok());
    }

    #[test]
    fn selects_as_kubernetes_does() {
        let labels: BTreeMap<String, String> =
            [("app".to_string(), "reviews".to_string())].into_iter().collect();
        for (selector, expected) in [
            ("", true),
            ("app=reviews", true),
            ("app==reviews", true),
            ("app!=reviews", false),
            ("app", true),
            ("!app", false),
            ("app=reviews,version", false),
            ("version!=v1", true),
        ] {
            assert_eq!(
                Selector::parse(selector).unwrap().matches(&labels),
                expected,
                "{selector}"
            );
        }
        assert!(Selector::parse("bad key=x").is_err());
    }
}
