//! `pilotctl proxy-config secret <proxy>`: the workload certificates the
//! server's CA issued to a proxy's agent (the server's
//! `/debug/certificates?proxy=`), each with its identity and expiry, as
//! `istioctl proxy-config secret` shows a proxy's.

use http::StatusCode;
use serde_json::Value;

use crate::Failure;
use crate::client::Client;
use crate::proxy_config::{ProxyDebug, for_proxy};
use crate::table::table;

/// Prints the certificates issued for `proxy` (its node id, or the id
/// `<pod>.<namespace>` of a connected proxy).
pub(crate) async fn secret(client: &Client, proxy: &str) -> Result<(), Failure> {
    let value = for_proxy(
        client,
        proxy,
        &ProxyDebug {
            path: "/debug/certificates",
            command: "proxy-config secret",
            not_connected: StatusCode::BAD_REQUEST,
            hint: "give its node id, or see pilotctl proxy-status",
            unreadable: "unreadable certificates",
        },
    )
    .await?;
    print!("{}", render(&value));
    Ok(())
}

/// A `default` row per certificate: identity, expiry, when and to whom it
/// was issued; or why there is none.
fn render(value: &Value) -> String {
    let proxy = value.get("proxy").and_then(Value::as_str).unwrap_or("");
    let certificates: Vec<&Value> = value
        .get("certificates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    if certificates.is_empty() {
        return format!(
            "No certificate was issued to {proxy} by this server: its agent serves no SDS (pilot-agent --sds-socket), \
             or another replica issued it\n"
        );
    }
    let mut rows = vec![
        ["RESOURCE NAME", "IDENTITY", "NOT AFTER", "ISSUED", "REQUESTED BY"]
            .map(String::from)
            .to_vec(),
    ];
    for certificate in certificates {
        let get = |name: &str| {
            certificate
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        rows.push(vec![
            "default".into(),
            get("identity"),
            get("notAfter"),
            get("issuedAt"),
            format!("{} ({})", get("caller"), get("peer")),
        ]);
    }
    format!("Proxy: {proxy}\n\n{}", table(&rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_certificate_reads_as_its_identity_and_expiry() {
        let value = serde_json::json!({
            "proxy": "sidecar~10.0.0.1~reviews-v1.default~default.svc.cluster.local",
            "certificates": [{
                "identity": "spiffe://cluster.local/ns/default/sa/reviews",
                "notAfter": "2026-11-27T19:00:00Z",
                "issuedAt": "2026-11-26T19:00:00Z",
                "caller": "reviews",
                "peer": "10.0.0.1:40000",
            }],
        });
        let text = render(&value);
        let row = text.lines().find(|l| l.starts_with("default")).unwrap();
        assert!(
            row.contains("spiffe://cluster.local/ns/default/sa/reviews"),
            "{text}"
        );
        assert!(row.contains("2026-11-27T19:00:00Z"), "{text}");
        assert!(row.contains("reviews (10.0.0.1:40000)"), "{text}");
        let none = render(&serde_json::json!({"proxy": "p", "certificates": []}));
        assert!(none.starts_with("No certificate was issued to p"), "{none}");
    }
}
