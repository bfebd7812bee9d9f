//! TLS helpers of the gateway tests: an `openssl s_server` upstream and a
//! curl client that resolves any host name to loopback.

use std::process::{Command, Stdio};

use super::{eventually, free_port};

/// `openssl s_server -www` on a free loopback port with `pair`: a TLS
/// upstream whose answer is a page describing the session.
pub fn tls_backend(pair: &pilot_test_support::certs::Pair) -> (u16, pilot_test_support::ProcessGuard) {
    let port = free_port();
    let guard = pilot_test_support::ProcessGuard::spawn(
        Command::new("openssl")
            .args(["s_server", "-www", "-accept", &format!("127.0.0.1:{port}")])
            .arg("-cert")
            .arg(&pair.cert)
            .arg("-key")
            .arg(&pair.key)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .expect("openssl runs (scripts/install-deps installs it)");
    eventually("the TLS backend listening", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    (port, guard)
}

/// curl to `https://host:port/` resolved to 127.0.0.1, trusting `ca`,
/// with `extra` arguments: (success, body).
pub fn curl_https(host: &str, port: u16, ca: &std::path::Path, extra: &[&std::ffi::OsStr]) -> (bool, String) {
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
