//! `openssl s_server -www` as a TLS upstream for tests that send TLS
//! through Envoy (gateways, upstream TLS origination).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::{ProcessGuard, certs, eventually, free_port};

/// `openssl s_server -www` on a free loopback port with the certificate
/// `pair`, once it listens; with `client_ca`, it requires a client
/// certificate that CA signed. Each answer is a page describing the
/// session, naming the client's certificate if one was presented. The
/// server stops when the guard drops.
pub fn openssl_server(pair: &certs::Pair, client_ca: Option<&Path>) -> (u16, ProcessGuard) {
    serve(pair, client_ca, None)
}

/// [`openssl_server`] that completes a handshake only when the client
/// sends `server_name` as its SNI: another name is answered with a fatal
/// alert (one sent without SNI is served).
pub fn openssl_sni_server(pair: &certs::Pair, server_name: &str) -> (u16, ProcessGuard) {
    serve(pair, None, Some(server_name))
}

fn serve(pair: &certs::Pair, client_ca: Option<&Path>, server_name: Option<&str>) -> (u16, ProcessGuard) {
    let port = free_port();
    let mut command = Command::new("openssl");
    command
        .args(["s_server", "-www", "-accept", &format!("127.0.0.1:{port}")])
        .arg("-cert")
        .arg(&pair.cert)
        .arg("-key")
        .arg(&pair.key)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(ca) = client_ca {
        command.args(["-Verify", "1", "-CAfile"]).arg(ca);
    }
    if let Some(name) = server_name {
        command
            .args(["-servername", name, "-servername_fatal", "-cert2"])
            .arg(&pair.cert)
            .arg("-key2")
            .arg(&pair.key);
    }
    let guard = ProcessGuard::spawn(&mut command).expect("openssl runs (scripts/install-deps installs it)");
    eventually("the openssl TLS server listening", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    (port, guard)
}
