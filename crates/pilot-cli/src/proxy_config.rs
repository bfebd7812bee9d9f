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
pub(crate) async fn scope(client: &Client, proxy: &str) -> Result<(), Failure> {
    let value = for_proxy(
        client,
        proxy,
        &ProxyDebug {
            path: "/debug/scope",
            command: "proxy-config scope",
            not_connected: StatusCode::NOT_FOUND,
            hint: "pilotctl proxy-status lists those that are",
            unreadable: "an unreadable scope",
        },
    )
    .await?;
    print!("{}", render(&value));
    Ok(())
}

/// A server `/debug` endpoint that takes `?proxy=`, as a `proxy-config`
/// command reads it.
pub(crate) struct ProxyDebug<'a> {
    /// The endpoint's path, without the query.
    pub path: &'a str,
    /// The command, for the refusal message.
    pub command: &'a str,
    /// The status with which the server says no such proxy is connected.
    pub not_connected: StatusCode,
    /// What the user can do then, after "no proxy P is connected to URL; ".
    pub hint: &'a str,
    /// What an undecodable body is, after "the server sent ".
    pub unreadable: &'a str,
}

/// The JSON body of `endpoint` for `proxy`; a failure naming the proxy
/// when the server does not know it, the server's refusal otherwise.
pub(crate) async fn for_proxy(
    client: &Client,
    proxy: &str,
    endpoint: &ProxyDebug<'_>,
) -> Result<Value, Failure> {
    let path = format!("{}?proxy={}", endpoint.path, encode(proxy));
    let (status, body) = client.send(Method::GET, &path, None).await?;
    if status == endpoint.not_connected {
        return Err(Failure::failed(format!(
            "no proxy {proxy} is connected to {}; {}",
            client.url, endpoint.hint
        )));
    }
    if status != StatusCode::OK {
        return Err(refused(endpoint.command, "default", proxy, status, &body, client));
    }
    serde_json::from_slice(&body)
        .map_err(|e| Failure::failed(format!("the server sent {}: {e}", endpoint.unreadable)))
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
