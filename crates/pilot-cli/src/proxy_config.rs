//! `pilotctl proxy-config scope <proxy>`: the server's `/debug/scope`, the
//! hosts a connected proxy's scope holds (what it is sent clusters,
//! listeners and routes for) and why each, with the Sidecar or default
//! that decided it and its outbound traffic policy.

use http::{Method, StatusCode};
use serde_json::Value;

use crate::Failure;
use crate::client::Client;
use crate::refusal::refused;
use crate::table::table;

/// Prints `proxy`'s scope (its node id, or its id `<pod>.<namespace>`).
pub async fn scope(client: &Client, proxy: &str) -> Result<(), Failure> {
    let path = format!("/debug/scope?proxy={}", encode(proxy));
    let (status, body) = client.send(Method::GET, &path, None).await?;
    if status == StatusCode::NOT_FOUND {
        return Err(Failure::failed(format!(
            "no proxy {proxy} is connected to {}; pilotctl proxy-status lists those that are",
            client.url
        )));
    }
    if status != StatusCode::OK {
        return Err(refused(
            "proxy-config scope",
            "default",
            proxy,
            status,
            &body,
            client,
        ));
    }
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| Failure::failed(format!("the server sent an unreadable scope: {e}")))?;
    print!("{}", render(&value));
    Ok(())
}

/// The header lines (proxy, decided by, outbound traffic policy) and a
/// HOST / WHY table.
fn render(value: &Value) -> String {
    let field = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or("").to_string();
    let mut out = format!(
        "Proxy: {}\nDecided by: {}\nOutbound traffic policy: {}\n\n",
        field("proxy"),
        field("decidedBy"),
        field("outboundTrafficPolicy")
    );
    let mut rows = vec![vec!["HOST".to_string(), "WHY".to_string()]];
    for host in value.get("hosts").and_then(Value::as_array).into_iter().flatten() {
        let get = |name: &str| host.get(name).and_then(Value::as_str).unwrap_or("").to_string();
        rows.push(vec![get("host"), get("reason")]);
    }
    out.push_str(&table(&rows));
    out
}

/// `text` as a URL query value.
pub(crate) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_reads_as_its_hosts_and_why() {
        let value = serde_json::json!({
            "proxy": "sidecar~10.0.0.1~productpage-v1.prod~prod.svc.cluster.local",
            "decidedBy": "Sidecar prod/default (namespace default)",
            "outboundTrafficPolicy": "REGISTRY_ONLY",
            "hosts": [
                {"host": "reviews.prod.svc.cluster.local", "reason": "imported by ./*"},
            ],
        });
        let text = render(&value);
        assert!(
            text.contains("Decided by: Sidecar prod/default (namespace default)"),
            "{text}"
        );
        assert!(text.contains("reviews.prod.svc.cluster.local"), "{text}");
        assert!(text.contains("imported by ./*"), "{text}");
        assert_eq!(encode("sidecar~10.0.0.1~a.b"), "sidecar%7E10.0.0.1%7Ea.b");
    }
}
