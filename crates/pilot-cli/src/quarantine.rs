//! `pilotctl quarantine`: the server's `/debug/quarantine`, one line per
//! object (kind, namespace/name, the version the store holds, every field
//! error), so an operator sees what was written around the API and why it
//! is not served.

use http::{Method, StatusCode};
use serde_json::Value;

use crate::Failure;
use crate::client::Client;
use crate::refusal::refused;
use crate::table::table;

/// Prints the quarantined objects; exit 1 (a failure) when there are any,
/// so scripts and CI notice.
pub(crate) async fn show(client: &Client) -> Result<(), Failure> {
    let (status, body) = client.send(Method::GET, "/debug/quarantine", None).await?;
    if status != StatusCode::OK {
        return Err(refused("quarantine", "default", "", status, &body, client));
    }
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| Failure::failed(format!("the server sent an unreadable quarantine list: {e}")))?;
    let items = value
        .get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if items.is_empty() {
        eprintln!("No object in {}'s store fails validation.", client.url);
        return Ok(());
    }
    print!("{}", render(&items));
    Err(Failure::failed(format!(
        "{} object(s) in the store fail validation and are not served; fix them with pilotctl replace (or in the store), or delete them",
        items.len()
    )))
}

/// The table: KIND, NAME (namespace/name), VERSION, ERRORS (`field: message`
/// joined by `; `).
fn render(items: &[Value]) -> String {
    let text = |item: &Value, field: &str| item.get(field).and_then(Value::as_str).unwrap_or("").to_string();
    let mut rows = vec![
        ["KIND", "NAME", "VERSION", "ERRORS"]
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
    ];
    for item in items {
        let errors: Vec<String> = item
            .get("errors")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|e| {
                let field = text(e, "field");
                let message = text(e, "message");
                if field.is_empty() {
                    message
                } else {
                    format!("{field}: {message}")
                }
            })
            .collect();
        rows.push(vec![
            text(item, "kind"),
            format!("{}/{}", text(item, "namespace"), text(item, "name")),
            text(item, "resourceVersion"),
            errors.join("; "),
        ]);
    }
    table(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_object_with_every_error() {
        let items = serde_json::json!([{
            "kind": "RouteRule", "namespace": "default", "name": "reviews-30", "resourceVersion": "12",
            "errors": [
                {"field": "spec.route[0].weight", "message": "weights must sum to 100, got 30"},
                {"field": "metadata.labels", "message": "bad"},
            ],
        }]);
        let text = render(items.as_array().unwrap());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].starts_with("KIND"), "{text}");
        assert!(
            lines[1].contains("RouteRule")
                && lines[1].contains("default/reviews-30")
                && lines[1].contains("12")
                && lines[1]
                    .contains("spec.route[0].weight: weights must sum to 100, got 30; metadata.labels: bad"),
            "{text}"
        );
    }
}
