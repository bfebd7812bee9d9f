//! `fieldValidation=Strict` as kube-apiserver answers it: a body with an
//! unknown or a duplicate field is a request that cannot be decoded, 400
//! `BadRequest` with the message kubectl and the client libraries show
//! (`RouteRule in version "v1alpha2" cannot be handled as a RouteRule:
//! strict decoding error: unknown field "spec.foo", duplicate field
//! "spec.bar"`). pilot's suggestion for a misspelt field follows the list,
//! and each field's line and column in the body are in `details.causes`.

use axum::http::StatusCode;
use pilot_model::KindSchema;
use pilot_model::document::{DocumentError, DocumentErrors};
use serde_json::{Value, json};

use crate::ApiError;

/// True when `error` is a field the kind does not know.
pub(crate) fn is_unknown(error: &DocumentError) -> bool {
    error.message.starts_with("unknown field") && !error.path.is_empty()
}

/// True when `error` is a field given twice in one object.
pub(crate) fn is_duplicate(error: &DocumentError) -> bool {
    error.message.starts_with("duplicate key") && !error.path.is_empty()
}

/// The strict decoding error of a body of `schema` in `namespace` for the
/// unknown and duplicate fields among `errors`; `None` when there are
/// none (the other errors are the object's validation, answered 422).
pub(crate) fn decoding_error(
    schema: &KindSchema,
    namespace: &str,
    errors: &DocumentErrors,
) -> Option<ApiError> {
    let strict: Vec<&DocumentError> = errors
        .0
        .iter()
        .filter(|e| is_unknown(e) || is_duplicate(e))
        .collect();
    if strict.is_empty() {
        return None;
    }
    let list: Vec<String> = strict
        .iter()
        .map(|e| {
            let what = if is_unknown(e) { "unknown" } else { "duplicate" };
            format!("{what} field {:?}", e.path)
        })
        .collect();
    // "unknown field `precedance`; did you mean `precedence`?": the
    // suggestion, with the field it is about (the list of known fields,
    // when there is no close one, stays in the causes).
    let hints: Vec<String> = strict
        .iter()
        .filter_map(|e| {
            let (_, hint) = e.message.split_once(';')?;
            hint.trim_start()
                .starts_with("did you mean")
                .then(|| format!("{}:{hint}", e.path))
        })
        .collect();
    let mut message = format!(
        "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
        list.join(", "),
        kind = schema.kind,
        version = schema.version,
    );
    if !hints.is_empty() {
        message.push_str(&format!(" ({})", hints.join("; ")));
    }
    let causes: Vec<Value> = strict
        .iter()
        .map(|e| {
            json!({
                "reason": if is_unknown(e) { "FieldValueNotSupported" } else { "FieldValueDuplicate" },
                "field": e.path,
                "message": e.message,
                "line": e.line,
                "column": e.column,
            })
        })
        .collect();
    Some(ApiError {
        details: json!({"namespace": namespace, "causes": causes}),
        ..ApiError::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(path: &str, message: &str) -> DocumentError {
        DocumentError {
            source: "body".into(),
            document: 1,
            line: 4,
            column: 7,
            path: path.into(),
            message: message.into(),
        }
    }

    #[test]
    fn unknown_and_duplicate_fields_are_a_bad_request_as_kube_apiserver_words_it() {
        let schema = KindSchema::new(
            "RouteRule",
            "routerules",
            "config.istio.io",
            "v1alpha2",
            |_, _| {},
        );
        let errors = DocumentErrors(vec![
            error(
                "spec.precedance",
                "unknown field `precedance`; did you mean `precedence`?",
            ),
            error("spec.route[0].weight", "must be at most 100"),
            error("spec.destination", "duplicate key `destination`"),
        ]);
        let refused = decoding_error(&schema, "default", &errors).unwrap();
        assert_eq!(
            (refused.code, refused.reason),
            (StatusCode::BAD_REQUEST, "BadRequest")
        );
        assert_eq!(
            refused.message,
            "RouteRule in version \"v1alpha2\" cannot be handled as a RouteRule: strict decoding error: \
             unknown field \"spec.precedance\", duplicate field \"spec.destination\" \
             (spec.precedance: did you mean `precedence`?)"
        );
        assert_eq!(refused.details["causes"][0]["line"], 4);
        assert_eq!(refused.details["causes"][1]["reason"], "FieldValueDuplicate");
        let invalid_only = DocumentErrors(vec![error("spec.route[0].weight", "must be at most 100")]);
        assert!(decoding_error(&schema, "default", &invalid_only).is_none());
    }
}
