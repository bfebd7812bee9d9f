//! Label selectors, as Kubernetes writes them:
//! `app=reviews,version!=v1,env,!canary,tier in (web,api),zone notin (a)`;
//! and field selectors on `metadata.name` and `metadata.namespace`.

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    Missing(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
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
        for part in split_outside_parentheses(text)? {
            let part = part.trim();
            if part.is_empty() {
                return Err(format!(
                    "labelSelector {text:?}: an empty requirement (two commas, or a comma at an end)"
                ));
            }
            let requirement = if let Some(requirement) = set_based(part)? {
                requirement
            } else if let Some((key, value)) = part.split_once("!=") {
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
                | Requirement::Missing(k)
                | Requirement::In(k, _)
                | Requirement::NotIn(k, _) => k,
            };
            pilot_model::label_key(key).map_err(|e| format!("labelSelector {part:?}: {e}"))?;
            if let Requirement::Equals(_, value) | Requirement::NotEquals(_, value) = &requirement {
                check_value(value).map_err(|e| format!("labelSelector {part:?}: {e}"))?;
            }
            if let Requirement::In(_, values) | Requirement::NotIn(_, values) = &requirement {
                for value in values {
                    check_value(value).map_err(|e| format!("labelSelector {part:?}: {e}"))?;
                }
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
            Requirement::In(k, values) => labels.get(k).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(k, values) => labels.get(k).is_none_or(|v| !values.contains(v)),
        })
    }
}

/// A field selector, as Kubernetes serves it for custom resources:
/// `metadata.name` and `metadata.namespace` with `=`, `==` or `!=`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct FieldSelector(Vec<(Field, bool, String)>);

/// A field a selector may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Name,
    Namespace,
}

impl FieldSelector {
    /// Parses `text` (empty selects everything); another field is refused
    /// as Kubernetes refuses it.
    pub(super) fn parse(text: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        if text.trim().is_empty() {
            return Ok(FieldSelector(requirements));
        }
        for part in text.split(',').map(str::trim) {
            let (field, equal, value) = if let Some((field, value)) = part.split_once("!=") {
                (field, false, value)
            } else if let Some((field, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (field, true, value)
            } else {
                return Err(format!(
                    "fieldSelector {part:?}: expected field=value, field==value or field!=value"
                ));
            };
            let field = match field.trim() {
                "metadata.name" => Field::Name,
                "metadata.namespace" => Field::Namespace,
                other => {
                    return Err(format!(
                        "fieldSelector {part:?}: field label not supported: {other} (supported: metadata.name, metadata.namespace)"
                    ));
                }
            };
            requirements.push((field, equal, value.trim().to_string()));
        }
        Ok(FieldSelector(requirements))
    }

    /// True when an object in `namespace` named `name` is selected.
    pub(super) fn matches(&self, namespace: &str, name: &str) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = match field {
                Field::Name => name,
                Field::Namespace => namespace,
            };
            (actual == value) == *equal
        })
    }
}

/// `text` split at the commas that are not inside `( )`.
fn split_outside_parentheses(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' if depth == 0 => depth = 1,
            '(' => return Err(format!("labelSelector {text:?}: nested parentheses")),
            ')' if depth == 1 => depth = 0,
            ')' => return Err(format!("labelSelector {text:?}: a ')' without its '('")),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("labelSelector {text:?}: a '(' without its ')'"));
    }
    parts.push(&text[start..]);
    Ok(parts)
}

/// `key in (a,b)` or `key notin (a,b)`, if `part` is one.
fn set_based(part: &str) -> Result<Option<Requirement>, String> {
    let Some(open) = part.find('(') else {
        return Ok(None);
    };
    let head = part[..open].trim();
    let (key, operator) = match head.rsplit_once(char::is_whitespace) {
        Some((key, operator)) if matches!(operator, "in" | "notin") => (key.trim(), operator),
        _ => {
            return Err(format!(
                "labelSelector {part:?}: expected `key in (values)` or `key notin (values)`"
            ));
        }
    };
    let Some(inner) = part[open + 1..].strip_suffix(')') else {
        return Err(format!("labelSelector {part:?}: text after ')'"));
    };
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
    if inner.trim().is_empty() {
        return Err(format!(
            "labelSelector {part:?}: `{operator}` needs at least one value"
        ));
    }
    Ok(Some(if operator == "in" {
        Requirement::In(key.to_string(), values)
    } else {
        Requirement::NotIn(key.to_string(), values)
    }))
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

    #[test]
    fn set_based_requirements() {
        let labels: BTreeMap<String, String> = [("app", "reviews"), ("tier", "web")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for (selector, expected) in [
            ("tier in (web,api)", true),
            ("tier in (api)", false),
            ("tier notin (api, db)", true),
            ("zone notin (a)", true),
            ("app=reviews,tier in (web),!canary", true),
            ("zone in (a,b),app", false),
        ] {
            assert_eq!(
                Selector::parse(selector).unwrap().matches(&labels),
                expected,
                "{selector}"
            );
        }
        for bad in [
            "tier in web",
            "tier in (web",
            "tier in ()",
            "tier within (a)",
            "tier in (a))",
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn field_selectors() {
        let selector = FieldSelector::parse("metadata.name=a,metadata.namespace!=kube-system").unwrap();
        assert!(selector.matches("default", "a"));
        assert!(!selector.matches("default", "b"));
        assert!(!selector.matches("kube-system", "a"));
        assert!(FieldSelector::parse("spec.hosts=a").is_err());
        assert!(FieldSelector::parse("metadata.name").is_err());
        assert!(FieldSelector::parse("").unwrap().matches("x", "y"));
    }
}
