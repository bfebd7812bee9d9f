//! The query parameters of a write, as Kubernetes names them: `dryRun`,
//! `fieldManager`, `fieldValidation` and `force`.

use std::collections::HashMap;

use axum::http::{HeaderMap, header};

use crate::ApiError;

/// How a write is to be carried out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct WriteOptions {
    /// `dryRun=All`: validate and answer as the write would, store nothing.
    pub dry_run: bool,
    /// `fieldManager=`: who makes the change (server-side apply's owner).
    pub field_manager: Option<String>,
    /// The manager a write other than an apply is recorded under:
    /// `fieldManager`, or the client's user agent up to its first `/`, as
    /// kube-apiserver derives it.
    pub manager: String,
    /// `fieldValidation=`: what happens to a field the kind does not know.
    pub field_validation: FieldValidation,
    /// `force=true`: a server-side apply takes the fields it conflicts on.
    pub force: bool,
}

/// `fieldValidation`: what happens to a field the kind does not know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    /// Refused with kube-apiserver's strict decoding error (400), an
    /// unknown field and a duplicate one alike; what kubectl asks for.
    Strict,
    /// Dropped (of a duplicate, the last value kept), with a `Warning`
    /// header naming it: kube-apiserver's default when the parameter is
    /// not sent.
    #[default]
    Warn,
    /// Dropped silently.
    Ignore,
}

impl WriteOptions {
    /// The options in `query` (and the manager from `headers`'
    /// `User-Agent` when `fieldManager` is not sent); 400 naming the
    /// parameter when one is not understood.
    pub(crate) fn parse(query: &HashMap<String, String>, headers: &HeaderMap) -> Result<Self, ApiError> {
        let dry_run = match query.get("dryRun").map(String::as_str) {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "Invalid dryRun value {other:?}: the only supported value is \"All\""
                )));
            }
        };
        let field_manager = match query.get("fieldManager").map(String::as_str) {
            None | Some("") => None,
            Some(name) if name.len() > 128 || name.chars().any(|c| c.is_control()) => {
                return Err(ApiError::bad_request(
                    "fieldManager must be at most 128 printable characters",
                ));
            }
            Some(name) => Some(name.to_string()),
        };
        let field_validation = match query.get("fieldValidation").map(String::as_str) {
            Some("Strict") => FieldValidation::Strict,
            None | Some("") | Some("Warn") => FieldValidation::Warn,
            Some("Ignore") => FieldValidation::Ignore,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "fieldValidation must be Strict, Warn or Ignore, not {other:?}"
                )));
            }
        };
        // Read as Go's strconv.ParseBool reads it (the Python client sends
        // `True`).
        let force = match query.get("force").map(String::as_str) {
            None | Some("" | "0" | "f" | "F" | "false" | "False" | "FALSE") => false,
            Some("1" | "t" | "T" | "true" | "True" | "TRUE") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "force must be true or false, not {other:?}"
                )));
            }
        };
        let manager = field_manager.clone().unwrap_or_else(|| {
            let agent = headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let prefix: String = agent.split('/').next().unwrap_or("").chars().take(128).collect();
            if prefix.is_empty() {
                "unknown".to_string()
            } else {
                prefix
            }
        });
        Ok(WriteOptions {
            dry_run,
            field_manager,
            manager,
            field_validation,
            force,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_kubernetes_parameters() {
        let none = HeaderMap::new();
        let options = WriteOptions::parse(
            &query(&[
                ("dryRun", "All"),
                ("fieldManager", "kubectl"),
                ("fieldValidation", "Strict"),
                ("force", "true"),
            ]),
            &none,
        )
        .unwrap();
        assert!(options.dry_run && options.force);
        assert_eq!(options.field_manager.as_deref(), Some("kubectl"));
        assert_eq!(options.manager, "kubectl");
        assert_eq!(options.field_validation, FieldValidation::Strict);
        let defaults = WriteOptions::parse(&query(&[]), &none).unwrap();
        assert_eq!(defaults.field_validation, FieldValidation::Warn);
        assert!(!defaults.dry_run && !defaults.force && defaults.field_manager.is_none());
        for bad in [("dryRun", "Yes"), ("fieldValidation", "strict"), ("force", "yes")] {
            assert!(WriteOptions::parse(&query(&[bad]), &none).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_default_manager_is_the_user_agent_up_to_its_first_slash() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::USER_AGENT,
            "OpenAPI-Generator/31.0.0/python".parse().unwrap(),
        );
        let options = WriteOptions::parse(&query(&[]), &headers).unwrap();
        assert_eq!(options.manager, "OpenAPI-Generator");
        assert!(options.field_manager.is_none());
    }
}
