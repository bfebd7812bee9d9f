//! `pilot-agent proxy router` as an ingress gateway with real traffic:
//! pilot-discovery with a backend service, a `Gateway` selecting the
//! router by its labels and a VirtualService bound to it; requests through
//! the gateway's port reach the backend by their Host, a host the gateway
//! does not serve gets 404, and the HTTPS server terminates TLS with its
//! certificate files (offering h2 by ALPN); a server host `ns1/*` serves
//! ns1's VirtualService and answers 404 for ns2's; TCP, TLS (terminated)
//! and PASSTHROUGH servers route
//! connections to backends, and a MUTUAL server admits only the client
//! identities it lists; two ports serving the same hundred hostnames each
//! route by their own scoped route configurations; servers naming a `credentialName` end TLS with
//! that Secret of the router's namespace (from `--credentials-dir`, over
//! SDS; MUTUAL verifies clients with its `ca.crt`), and another
//! namespace's Secret is never sent to the router (such a server is left
//! out of its listeners).

mod common;

use std::path::Path;
use std::process::Command;

use common::tls::curl_https;
use common::{Agent, Backend, Discovery, eventually, free_port};
use pilot_test_support::certs::Pki;
use pilot_test_support::openssl_server;

#[test]
fn a_router_serves_a_gateway_over_http_and_https() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let ca = pki.ca("ca").unwrap();
    let server = pki
        .leaf(
            "secure",
            "ca",
            "subjectAltName=DNS:secure.example.com\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
    let backend = Backend::start();
    let services = common::services_file(dir.path(), free_port(), backend.port);
    let discovery = Discovery::start(&["--services", services.to_str().unwrap()]);
    let (http_port, https_port) = (free_port(), free_port());
    let agent = router(
        dir.path(),
        &discovery,
        format!(
            r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: edge, namespace: default}}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: {http_port}, name: http, protocol: HTTP}}
    hosts: [bookinfo.example.com]
  - port: {{number: {https_port}, name: https, protocol: HTTPS}}
    hosts: [secure.example.com]
    tls: {{mode: SIMPLE, serverCertificate: {cert}, privateKey: {key}}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: backend, namespace: default}}
spec:
  hosts: [bookinfo.example.com, secure.example.com]
  gateways: [edge]
  http:
  - route: [{{destination: {{host: backend}}}}]
"#,
            cert = server.cert.display(),
            key = server.key.display(),
        ),
        "10.0.0.40",
        "gateway-1.default",
    );
    let through = |host: &str| {
        pilot_test_support::http::request(
            ([127, 0, 0, 1], http_port).into(),
            "GET",
            "/",
            &[("host", host)],
            b"",
        )
        .map(|a| (a.code, a.text()))
        .unwrap_or((0, String::new()))
    };
    eventually("the gateway routing bookinfo.example.com to the backend", || {
        through("bookinfo.example.com") == (200, "ok".to_string())
    });
    assert_eq!(
        through("bookinfo.example.com:80"),
        (200, "ok".to_string()),
        "the port in Host is ignored"
    );
    assert_eq!(through("other.example.com").0, 404, "{}", agent.log());

    eventually("the gateway terminating TLS for secure.example.com", || {
        curl_https("secure.example.com", https_port, &ca.cert, &[]) == (true, "ok".to_string())
    });
    // ALPN offers h2: an HTTP/2 client speaks HTTP/2 to the gateway.
    let h2: Vec<&std::ffi::OsStr> = ["--http2", "-w", "\n%{http_version}"]
        .iter()
        .map(std::ffi::OsStr::new)
        .collect();
    assert_eq!(
        curl_https("secure.example.com", https_port, &ca.cert, &h2),
        (true, "ok\n2".to_string())
    );
    // Plain HTTP on the TLS port is refused: TLS really is required.
    let plain = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://127.0.0.1:{https_port}/"))
        .output()
        .unwrap();
    assert_ne!(String::from_utf8_lossy(&plain.stdout), "200");
}

#[test]
fn a_server_host_namespace_binds_only_that_namespaces_virtual_services() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::start();
    let services = common::services_file(dir.path(), free_port(), backend.port);
    let discovery = Discovery::start(&["--services", services.to_str().unwrap()]);
    let http_port = free_port();
    // A server for any host of ns1; a VirtualService in ns1 and one in
    // ns2, both bound to the gateway, both routing to the backend.
    let bound = |namespace: &str, host: &str| {
        format!(
            r#"---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: {host}, namespace: {namespace}}}
spec:
  hosts: [{host}]
  gateways: [default/edge]
  http:
  - route: [{{destination: {{host: backend.default.svc.cluster.local}}}}]
"#
        )
    };
    let agent = router(
        dir.path(),
        &discovery,
        format!(
            r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: edge, namespace: default}}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: {http_port}, name: http, protocol: HTTP}}
    hosts: ["ns1/*"]
{}{}"#,
            bound("ns1", "one.example.com"),
            bound("ns2", "two.example.com"),
        ),
        "10.0.0.42",
        "gateway-3.default",
    );
    let through = |host: &str| {
        pilot_test_support::http::request(
            ([127, 0, 0, 1], http_port).into(),
            "GET",
            "/",
            &[("host", host)],
            b"",
        )
        .map(|a| a.code)
        .unwrap_or(0)
    };
    eventually("ns1's VirtualService routed through ns1/*", || {
        through("one.example.com") == 200
    });
    assert_eq!(
        through("two.example.com"),
        404,
        "ns2's VirtualService does not bind through ns1/*: {}",
        agent.log()
    );
}

/// Applies `objects` (YAML) to `discovery` with pilotctl, then starts
/// `pilot-agent proxy router` at `ip` with id `id`, labelled
/// `istio=ingressgateway` (what the Gateways select), fed by `discovery`.
/// Two ports of one router, each with enough hostnames for its routes to
/// be one route configuration per hostname (pilot-xds's
/// `SCOPED_MIN_HOSTS`), the same hostnames on both: the scopes Envoy is
/// sent are the router's, and each port's requests find that port's.
#[test]
fn two_ports_with_the_same_many_hostnames_each_route_by_their_own_scopes() {
    const HOSTS: usize = 100;
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::start();
    let services = common::services_file(dir.path(), free_port(), backend.port);
    let discovery = Discovery::start(&["--services", services.to_str().unwrap()]);
    let (one, two) = (free_port(), free_port());
    let mut objects = format!(
        "apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: edge, namespace: default}}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: {one}, name: http-one, protocol: HTTP}}
    hosts: [\"*\"]
  - port: {{number: {two}, name: http-two, protocol: HTTP}}
    hosts: [\"*\"]
"
    );
    for i in 0..HOSTS {
        objects.push_str(&format!(
            "---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: host-{i}, namespace: default}}
spec:
  hosts: [host-{i}.example.com]
  gateways: [edge]
  http:
  - match: [{{port: {one}}}]
    directResponse: {{status: 200, body: {{string: \"{i} on one\"}}}}
  - match: [{{port: {two}}}]
    directResponse: {{status: 200, body: {{string: \"{i} on two\"}}}}
"
        ));
    }
    let agent = router(dir.path(), &discovery, objects, "10.0.0.41", "gateway-2.default");
    // Read by length: Envoy keeps a connection open after an answer of
    // its own.
    let get = |port: u16, host: &str| common::get_by_length(port, host, "/");
    let expected = |i: usize, port: u16| (200, format!("{i} on {}", if port == one { "one" } else { "two" }));
    eventually("both ports to answer for every host", || {
        (0..HOSTS).all(|i| {
            [one, two]
                .iter()
                .all(|&port| get(port, &format!("host-{i}.example.com")) == expected(i, port))
        })
    });
    // Whatever the case of the host, and a host no one serves has no route.
    assert_eq!(get(two, "HOST-7.Example.Com"), expected(7, two));
    assert_eq!(get(one, "host-7.example.com:80"), expected(7, one));
    assert_eq!(get(one, "host-100.example.com").0, 404);
    let (_, dump) = common::get(agent.admin_port, "/config_dump");
    for port in [one, two] {
        assert!(
            dump.contains(&format!("\"http.{port}/host-42.example.com\"")),
            "no scope for port {port}:\n{}",
            agent.log()
        );
    }
    // pilotctl proxy-status shows the router's scopes ACKed with the rest:
    // NAME CDS EDS LDS RDS SRDS, then ztunnel's types (`-`).
    eventually("proxy-status: the router synced on all five types", || {
        let run = pilot_test_support::pilotctl(Some(&discovery.url), &["proxy-status"], &[], None);
        assert_eq!(run.code, 0, "{run:?}");
        run.stdout.lines().any(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            words.len() > 7
                && words[0].starts_with("router~10.0.0.41~")
                && words[1..6].iter().all(|w| *w == "SYNCED")
                && words[6..8] == ["-", "-"]
        })
    });
}

fn router(dir: &Path, discovery: &Discovery, objects: String, ip: &str, id: &str) -> Agent {
    let config = dir.join("gateway.yaml");
    std::fs::write(&config, objects).unwrap();
    let applied = pilot_test_support::pilotctl(
        Some(&discovery.url),
        &["apply", "-f", config.to_str().unwrap()],
        &[],
        None,
    );
    assert_eq!(applied.code, 0, "{}{}", applied.stdout, applied.stderr);
    Agent::start(
        "router",
        &[
            "--ip",
            ip,
            "--id",
            id,
            "--label",
            "istio=ingressgateway",
            "--discovery-address",
            &format!("127.0.0.1:{}", discovery.xds_port),
        ],
    )
}

#[test]
fn a_router_serves_tcp_tls_passthrough_and_mutual_servers() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let ca = pki.ca("ca").unwrap();
    let gateway_cert = pki
        .leaf(
            "gateway",
            "ca",
            "subjectAltName=DNS:terminated.example.com,DNS:mutual.example.com\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
    let upstream_cert = pki
        .leaf(
            "upstream",
            "ca",
            "subjectAltName=DNS:passthrough.example.com\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
    let client = |name: &str| {
        pki.leaf(
            name,
            "ca",
            &pilot_test_support::certs::client_with_uri(&format!(
                "spiffe://cluster.local/ns/default/sa/{name}"
            )),
        )
        .unwrap()
    };
    let (good, bad) = (client("good"), client("bad"));
    let backend = Backend::start();
    let (tls_port, _tls_backend) = openssl_server(&upstream_cert, None);
    let services = dir.path().join("services.yaml");
    std::fs::write(
        &services,
        format!(
            "services:\n- hostname: backend.default.svc.cluster.local\n  ports: [{{name: http, port: {}, protocol: HTTP}}]\n  instances:\n  - {{address: 127.0.0.1, port: {}, labels: {{app: backend}}}}\n- hostname: tlsbackend.default.svc.cluster.local\n  ports: [{{name: tls, port: {}, protocol: TCP}}]\n  instances:\n  - {{address: 127.0.0.1, port: {tls_port}, labels: {{app: tlsbackend}}}}\n",
            free_port(),
            backend.port,
            free_port(),
        ),
    )
    .unwrap();
    let discovery = Discovery::start(&["--services", services.to_str().unwrap()]);
    let (tcp_port, passthrough_port, terminated_port, mutual_port) =
        (free_port(), free_port(), free_port(), free_port());
    let agent = router(
        dir.path(),
        &discovery,
        format!(
            r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: edge, namespace: default}}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: {tcp_port}, name: tcp, protocol: TCP}}
    hosts: [tcp.example.com]
  - port: {{number: {passthrough_port}, name: tls-passthrough, protocol: TLS}}
    hosts: [passthrough.example.com]
    tls: {{mode: PASSTHROUGH}}
  - port: {{number: {terminated_port}, name: tls-terminated, protocol: TLS}}
    hosts: [terminated.example.com]
    tls: {{mode: SIMPLE, serverCertificate: {cert}, privateKey: {key}}}
  - port: {{number: {mutual_port}, name: https-mutual, protocol: HTTPS}}
    hosts: [mutual.example.com]
    tls:
      mode: MUTUAL
      serverCertificate: {cert}
      privateKey: {key}
      caCertificates: {ca}
      subjectAltNames: [spiffe://cluster.local/ns/default/sa/good]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: tcp, namespace: default}}
spec:
  hosts: [tcp.example.com, terminated.example.com]
  gateways: [edge]
  tcp:
  - route: [{{destination: {{host: backend}}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: passthrough, namespace: default}}
spec:
  hosts: [passthrough.example.com]
  gateways: [edge]
  tls:
  - match: [{{sniHosts: [passthrough.example.com]}}]
    route: [{{destination: {{host: tlsbackend}}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: mutual, namespace: default}}
spec:
  hosts: [mutual.example.com]
  gateways: [edge]
  http:
  - route: [{{destination: {{host: backend}}}}]
"#,
            cert = gateway_cert.cert.display(),
            key = gateway_cert.key.display(),
            ca = ca.cert.display(),
        ),
        "10.0.0.41",
        "gateway-2.default",
    );

    // TCP: every connection goes to the backend, whatever its Host says
    // (an HTTP server would answer 404 for a host it does not serve).
    eventually("the TCP server proxying to the backend", || {
        pilot_test_support::http::request(
            ([127, 0, 0, 1], tcp_port).into(),
            "GET",
            "/",
            &[("host", "unknown.example.org")],
            b"",
        )
        .is_ok_and(|a| a.code == 200 && a.text() == "ok")
    });

    // PASSTHROUGH: the client's TLS reaches the upstream, whose certificate
    // (for passthrough.example.com, which the gateway has no key for) the
    // client verifies; the page is the upstream's.
    eventually("TLS passed through to the upstream by SNI", || {
        let (ok, body) = curl_https("passthrough.example.com", passthrough_port, &ca.cert, &[]);
        ok && body.contains("no client certificate available")
    });

    // TLS SIMPLE: terminated with the gateway's certificate, then TCP to
    // the plain HTTP backend.
    eventually("TLS terminated, then proxied to the backend", || {
        curl_https("terminated.example.com", terminated_port, &ca.cert, &[]) == (true, "ok".to_string())
    });

    // MUTUAL with subjectAltNames: only a client certificate carrying the
    // listed identity is admitted.
    let with = |pair: &pilot_test_support::certs::Pair| {
        curl_https(
            "mutual.example.com",
            mutual_port,
            &ca.cert,
            &[
                "--cert".as_ref(),
                pair.cert.as_os_str(),
                "--key".as_ref(),
                pair.key.as_os_str(),
            ],
        )
    };
    eventually("MUTUAL admitting the listed identity", || {
        with(&good) == (true, "ok".to_string())
    });
    let refused = with(&bad);
    assert!(
        !refused.0,
        "an identity not listed is refused: {refused:?}\n{}",
        agent.log()
    );
    let anonymous = curl_https("mutual.example.com", mutual_port, &ca.cert, &[]);
    assert!(!anonymous.0, "no client certificate is refused: {anonymous:?}");
}

#[test]
fn credential_names_are_secrets_of_the_routers_namespace_sent_over_sds() {
    // An Istio Gateway's `credentialName`: the Secret of the gateway
    // workload's namespace (`--credentials-dir DIR/default/<name>`), its
    // `ca.crt` verifying clients for MUTUAL (`<name>-cacert`); a Secret of
    // another namespace with the same name is not the router's.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let ca = pki.ca("ca").unwrap();
    let client_ca = pki.ca("client-ca").unwrap();
    let server = pki
        .leaf(
            "secure",
            "ca",
            "subjectAltName=DNS:secure.example.com,DNS:mutual.example.com\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
    let client = pki
        .leaf(
            "client",
            "client-ca",
            "subjectAltName=URI:spiffe://example.org/client\nextendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
    let credentials = dir.path().join("credentials");
    let write = |namespace: &str, name: &str, with_ca: bool| {
        let secret = credentials.join(namespace).join(name);
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::copy(&server.cert, secret.join("tls.crt")).unwrap();
        std::fs::copy(&server.key, secret.join("tls.key")).unwrap();
        if with_ca {
            std::fs::copy(&client_ca.cert, secret.join("ca.crt")).unwrap();
        }
    };
    write("default", "secure-certificate", true);
    write("elsewhere", "elsewhere-only", false);

    let backend = Backend::start();
    let services = common::services_file(dir.path(), free_port(), backend.port);
    let discovery = Discovery::start(&[
        "--services",
        services.to_str().unwrap(),
        "--credentials-dir",
        credentials.to_str().unwrap(),
    ]);
    let (simple, mutual, foreign, control) = (free_port(), free_port(), free_port(), free_port());
    let agent = router(
        dir.path(),
        &discovery,
        format!(
            r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: edge, namespace: default}}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: {simple}, name: https, protocol: HTTPS}}
    hosts: [secure.example.com]
    tls: {{mode: SIMPLE, credentialName: secure-certificate}}
  - port: {{number: {mutual}, name: https-mutual, protocol: HTTPS}}
    hosts: [mutual.example.com]
    tls: {{mode: MUTUAL, credentialName: secure-certificate}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: backend, namespace: default}}
spec:
  hosts: [secure.example.com, mutual.example.com]
  gateways: [edge, foreign]
  http:
  - route: [{{destination: {{host: backend}}}}]
"#
        ),
        "10.0.0.41",
        "gateway-2.default",
    );
    eventually("TLS ended with the Secret for secure.example.com", || {
        curl_https("secure.example.com", simple, &ca.cert, &[]) == (true, "ok".to_string())
    });
    let identity: Vec<&std::ffi::OsStr> = vec![
        std::ffi::OsStr::new("--cert"),
        client.cert.as_os_str(),
        std::ffi::OsStr::new("--key"),
        client.key.as_os_str(),
    ];
    eventually("MUTUAL served with the Secret's CA", || {
        curl_https("mutual.example.com", mutual, &ca.cert, &identity) == (true, "ok".to_string())
    });
    assert!(
        !curl_https("mutual.example.com", mutual, &ca.cert, &[]).0,
        "a client without a certificate the Secret's ca.crt signed is refused"
    );
    // A server naming another namespace's Secret: it is never sent to the
    // router, so that server is left out of the router's listeners (its
    // port refuses connections rather than wait for a certificate), while
    // the others keep serving.
    let foreign_gateway = dir.path().join("foreign.yaml");
    std::fs::write(
        &foreign_gateway,
        format!(
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: foreign, namespace: default}}\n\
             spec:\n  selector: {{istio: ingressgateway}}\n  servers:\n  \
             - port: {{number: {foreign}, name: https-foreign, protocol: HTTPS}}\n    hosts: [secure.example.com]\n    \
             tls: {{mode: SIMPLE, credentialName: elsewhere-only}}\n  \
             - port: {{number: {control}, name: https-control, protocol: HTTPS}}\n    hosts: [secure.example.com]\n    \
             tls: {{mode: SIMPLE, credentialName: secure-certificate}}\n"
        ),
    )
    .unwrap();
    let applied = pilot_test_support::pilotctl(
        Some(&discovery.url),
        &["apply", "-f", foreign_gateway.to_str().unwrap()],
        &[],
        None,
    );
    assert_eq!(applied.code, 0, "{}{}", applied.stdout, applied.stderr);
    // The control server, added with it, names the router's own Secret:
    // once it serves, the Secrets both listeners asked for were answered.
    eventually("the control server added beside it to serve", || {
        curl_https("secure.example.com", control, &ca.cert, &[]) == (true, "ok".to_string())
    });
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", foreign)).is_err(),
        "the server without a Secret the router can be sent accepted a connection\n{}",
        agent.log()
    );
    let (_, listeners) = common::get(agent.admin_port, "/config_dump?resource=dynamic_listeners");
    assert!(
        listeners.contains(&format!("0.0.0.0_{control}"))
            && !listeners.contains(&format!("0.0.0.0_{foreign}")),
        "the server without a Secret the router can be sent has a listener: {listeners}"
    );
    let (_, secrets) = common::get(agent.admin_port, "/config_dump?resource=dynamic_active_secrets");
    assert!(
        !secrets.contains("elsewhere-only"),
        "another namespace's Secret was sent: {secrets}"
    );
    assert_eq!(
        curl_https("secure.example.com", simple, &ca.cert, &[]),
        (true, "ok".to_string())
    );
}
