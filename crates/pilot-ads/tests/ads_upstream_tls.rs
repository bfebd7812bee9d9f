//! A DestinationRule's client TLS through a real Envoy with real traffic:
//! `openssl s_server` stands in for a TLS upstream (a ServiceEntry's
//! `STATIC` endpoint) with a certificate from a test CA. `SIMPLE` with the
//! CA and the server's name answers; a name the certificate does not carry
//! fails the handshake (503, counted in Envoy's `ssl.fail_verify_san`); an
//! upstream requiring a client certificate refuses `SIMPLE` and accepts
//! `MUTUAL`, which presents the client certificate the upstream reports.

mod support;

use pilot_test_support::{Pki, certs, openssl_server};
use support::envoy::{eventually, free_port, request_to};
use support::mesh::Mesh;

/// Envoy's counter `name` of the outbound cluster of `host` on `port`.
fn cluster_counter(mesh: &Mesh, host: &str, port: u16, name: &str) -> u64 {
    let stat = format!("cluster.outbound|{port}||{host}.{name}: ");
    mesh.envoy
        .admin(&format!("/stats?filter={name}"))
        .lines()
        .find_map(|line| line.strip_prefix(&stat)?.trim().parse().ok())
        .unwrap_or(0)
}

fn service_entry(host: &str, port: u16, upstream: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  hosts: [{host}]\n  location: MESH_EXTERNAL\n  ports: [{{number: {port}, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  endpoints: [{{address: 127.0.0.1, ports: {{http: {upstream}}}}}]\n",
        name = host.split('.').next().unwrap_or(host),
    )
}

fn destination_rule(host: &str, tls: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  host: {host}\n  trafficPolicy:\n    tls: {tls}\n",
        name = host.split('.').next().unwrap_or(host),
    )
}

/// (status, body) of a request for `host` through Envoy's listener on
/// `port`, off the runtime once `check` holds for it.
async fn until(port: u16, host: &'static str, what: &'static str, check: fn(u16, &str) -> bool) {
    tokio::task::spawn_blocking(move || {
        eventually(what, || {
            let (status, body) = request_to(port, host, &[]);
            check(status, &body)
        })
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simple_verifies_the_server_and_mutual_presents_the_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let ca = pki.ca("ca").unwrap();
    let server = pki.leaf("server", "ca", certs::SERVER).unwrap();
    let client = pki.leaf("client", "ca", certs::CLIENT).unwrap();
    let (ca_file, client_cert, client_key) = (
        ca.cert.display().to_string(),
        client.cert.display().to_string(),
        client.key.display().to_string(),
    );
    let (simple_upstream, _simple) = openssl_server(&server, None);
    let (mutual_upstream, _mutual) = openssl_server(&server, Some(&ca.cert));
    let mesh = Mesh::start().await;
    let (simple_port, mutual_port) = (free_port(), free_port());
    const SIMPLE: &str = "simple.tls.test";
    const MUTUAL: &str = "mutual.tls.test";

    // SIMPLE with the CA and a name the server's certificate carries.
    mesh.put(&format!(
        "{}---\n{}",
        destination_rule(
            SIMPLE,
            &format!("{{mode: SIMPLE, caCertificates: {ca_file}, subjectAltNames: [localhost]}}")
        ),
        service_entry(SIMPLE, simple_port, simple_upstream),
    ))
    .await;
    until(simple_port, SIMPLE, "SIMPLE answers over TLS", |status, body| {
        status == 200 && body.contains("no client certificate available")
    })
    .await;

    // A name the certificate does not carry: the handshake fails.
    let failed_before = cluster_counter(&mesh, SIMPLE, simple_port, "ssl.fail_verify_san");
    mesh.put(&destination_rule(
        SIMPLE,
        &format!("{{mode: SIMPLE, caCertificates: {ca_file}, subjectAltNames: [other.tls.test]}}"),
    ))
    .await;
    until(simple_port, SIMPLE, "a wrong SAN fails with 503", |status, _| {
        status == 503
    })
    .await;
    let failed = cluster_counter(&mesh, SIMPLE, simple_port, "ssl.fail_verify_san");
    assert!(
        failed > failed_before,
        "Envoy counts the SAN failure ({failed_before} -> {failed})"
    );

    // An upstream requiring a client certificate refuses SIMPLE...
    // (The rule comes first: the host never has a plaintext cluster.)
    mesh.put(&format!(
        "{}---\n{}",
        destination_rule(MUTUAL, &format!("{{mode: SIMPLE, caCertificates: {ca_file}}}")),
        service_entry(MUTUAL, mutual_port, mutual_upstream),
    ))
    .await;
    until(
        mutual_port,
        MUTUAL,
        "SIMPLE without a client certificate fails",
        |status, _| status == 503,
    )
    .await;
    // ...and answers MUTUAL, which presents the client certificate.
    mesh.put(&destination_rule(
        MUTUAL,
        &format!(
            "{{mode: MUTUAL, clientCertificate: {client_cert}, privateKey: {client_key}, caCertificates: {ca_file}, subjectAltNames: [localhost]}}"
        ),
    ))
    .await;
    until(
        mutual_port,
        MUTUAL,
        "MUTUAL presents the client certificate",
        |status, body| status == 200 && body.contains("Subject: CN=client"),
    )
    .await;
}
