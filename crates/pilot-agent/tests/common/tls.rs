//! TLS helpers of the gateway tests: a curl client that resolves any host
//! name to loopback (the `openssl s_server` upstream is
//! `pilot_test_support::openssl_server`).

use std::process::Command;

/// curl to `https://host:port/` resolved to 127.0.0.1, trusting `ca`,
/// with `extra` arguments: (success, body).
pub(crate) fn curl_https(
    host: &str,
    port: u16,
    ca: &std::path::Path,
    extra: &[&std::ffi::OsStr],
) -> (bool, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--resolve"])
        .arg(format!("{host}:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(ca)
        .args(extra)
        .arg(format!("https://{host}:{port}/"))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}
