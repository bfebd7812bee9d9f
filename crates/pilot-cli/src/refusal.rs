//! The server's refusals (conflict, not found, invalid, unauthorized) as
//! messages a person can act on, naming the object as `pilotctl get` does.

use http::StatusCode;
use serde_json::Value;

use crate::Failure;
use crate::client::Client;
use crate::kinds;

/// `routerule reviews-default` (with the namespace when not `default`).
pub(crate) fn describe(kind: &str, namespace: &str, name: &str) -> String {
    if namespace == "default" {
        format!("{} {name}", kinds::display(kind))
    } else {
        format!("{} {namespace}/{name}", kinds::display(kind))
    }
}

/// The server's answer to a request about one object, as a message a person
/// can act on.
pub(crate) fn refused(
    kind: &str,
    namespace: &str,
    name: &str,
    status: StatusCode,
    body: &[u8],
    client: &Client,
) -> Failure {
    let what = describe(kind, namespace, name);
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let text = |pointer: &str| {
        body.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let message = text("/message");
    let current = text("/details/currentResourceVersion");
    let reason = text("/reason");
    let lines = match (status, reason.as_str()) {
        (StatusCode::CONFLICT, "AlreadyExists") => {
            vec![format!(
                "{what} already exists at version {current}; use replace or apply"
            )]
        }
        (StatusCode::CONFLICT, _) => {
            let sent = match body
                .pointer("/details/sentResourceVersion")
                .and_then(Value::as_str)
            {
                Some(sent) => format!("you sent version {sent}"),
                None => "you sent no version".to_string(),
            };
            vec![format!(
                "{what} was changed since you read it: {sent}, the current version is {current}; \
                 get it again and retry, or use apply"
            )]
        }
        (StatusCode::NOT_FOUND, _) => vec![format!("{what} not found; use create or apply")],
        (StatusCode::UNPROCESSABLE_ENTITY, _) => {
            let mut lines = vec![format!("{what} is invalid:")];
            if let Some(causes) = body.pointer("/details/causes").and_then(Value::as_array) {
                for cause in causes {
                    let field = cause.get("field").and_then(Value::as_str).unwrap_or("");
                    let message = cause.get("message").and_then(Value::as_str).unwrap_or("");
                    lines.push(format!("  {field}: {message}"));
                }
            }
            lines
        }
        (StatusCode::UNAUTHORIZED, _) => vec![format!(
            "the server at {} refused the request: {message}; pass --token or set token: in the config file",
            client.url
        )],
        _ if message.is_empty() => vec![format!("{what}: the server answered {status}")],
        _ => vec![format!("{what}: {message} ({status})")],
    };
    Failure {
        code: 1,
        messages: lines,
    }
}
