//! The query parameters of a write, as Kubernetes names them: `dryRun`,
//! `fieldManager`, `force` and `fieldValidation`.

use std::collections::HashMap;

use super::ApiError;

/// How a write is to be carried out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct WriteOptions {
    /// `dryRun=All`: validate and answer as the write would, store nothing.
    pub dry_run: bool,
    /// `fieldManager=`: who makes the change (server-side apply's owner).
    pub field_manager: Option<String>,
    /// `force=true`: server-side apply takes fields other managers own.
    pub force: bool,
    /// `fieldValidation=`: what an unknown field does.
    pub field_validation: FieldValidation,
}

/// `fieldValidation`: what happens to a field the kind does not know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    /// Refused (422), as pilot always validates; Kubernetes' default for
    /// kubectl (which asks for it).
    #[default]
    Strict,
    /// Dropped, with a `Warning` header naming it.
    Warn,
    /// Dropped silently.
    Ignore,
}

impl WriteOptions {
    /// The options in `query`; 400 naming the parameter when one is not
    /// understood.
    pub(crate) fn parse(query: &HashMap<String, String>) -> Result<Self, ApiError> {
        let dry_run = match query.get("dryRun").map(String::as_str) {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "Invalid dryRun value {other:?}: the only supported value is \"All\""
                )));
            }
        };
        let force = match query.get("force").map(String::as_str) {
            None | Some("") | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "force must be true or false, not {other:?}"
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
            None | Some("") | Some("Strict") => FieldValidation::Strict,
            Some("Warn") => FieldValidation::Warn,
            Some("Ignore") => FieldValidation::Ignore,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "fieldValidation must be Strict, Warn or Ignore, not {other:?}"
                )));
            }
        };
        Ok(WriteOptions {
            dry_run,
            field_manager,
            force,
            field_validation,
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
        let options = WriteOptions::parse(&query(&[
            ("dryRun", "All"),
            ("fieldManager", "kubectl"),
            ("force", "true"),
            ("fieldValidation", "Warn"),
        ]))
        .unwrap();
        assert!(options.dry_run && options.force);
        assert_eq!(options.field_manager.as_deref(), Some("kubectl"));
        assert_eq!(options.field_validation, FieldValidation::Warn);
        assert_eq!(WriteOptions::parse(&query(&[])).unwrap(), WriteOptions::default());
        for bad in [("dryRun", "Yes"), ("force", "1"), ("fieldValidation", "strict")] {
            assert!(WriteOptions::parse(&query(&[bad])).is_err(), "{bad:?}");
        }
    }
}
