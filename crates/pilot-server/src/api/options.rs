//! The query parameters of a write, as Kubernetes names them: `dryRun`,
//! `fieldManager` and `fieldValidation`.

use std::collections::HashMap;

use super::ApiError;

/// How a write is to be carried out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct WriteOptions {
    /// `dryRun=All`: validate and answer as the write would, store nothing.
    pub dry_run: bool,
    /// `fieldManager=`: who makes the change (server-side apply's owner).
    pub field_manager: Option<String>,
    /// `fieldValidation=`: what the client asks an unknown field to do
    /// (pilot refuses one whichever it is).
    pub field_validation: FieldValidation,
}

/// `fieldValidation`: what the client asks to happen to a field the kind
/// does not know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    /// Refused (422); what kubectl asks for.
    #[default]
    Strict,
    /// Kubernetes drops the field with a `Warning` header.
    Warn,
    /// Kubernetes drops the field silently.
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
            ("fieldValidation", "Warn"),
        ]))
        .unwrap();
        assert!(options.dry_run);
        assert_eq!(options.field_manager.as_deref(), Some("kubectl"));
        assert_eq!(options.field_validation, FieldValidation::Warn);
        assert_eq!(WriteOptions::parse(&query(&[])).unwrap(), WriteOptions::default());
        for bad in [("dryRun", "Yes"), ("fieldValidation", "strict")] {
            assert!(WriteOptions::parse(&query(&[bad])).is_err(), "{bad:?}");
        }
    }
}
