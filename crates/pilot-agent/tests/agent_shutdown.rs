//! SIGTERM: the agent drains Envoy, a slow request in flight completes,
//! the agent exits 0 and no Envoy is left.

mod common;

use common::{Agent, Backend, Discovery, eventually, free_port};

#[test]
fn sigterm_lets_a_slow_request_finish_then_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::start();
    let service_port = free_port();
    let services = common::services_file(dir.path(), service_port, backend.port);
    let discovery = Discovery::start(&["--services", services.to_str().unwrap()]);
    let mut agent = Agent::start(
        "sidecar",
        &[
            "--ip",
            "10.0.0.21",
            "--id",
            "client-2.default",
            "--interception-mode",
            "NONE",
            "--discovery-address",
            &format!("127.0.0.1:{}", discovery.xds_port),
            "--termination-drain-duration",
            "20s",
        ],
    );
    eventually("the outbound listener routing to the backend", || {
        common::get(service_port, "/") == (200, "ok".to_string())
    });
    assert_eq!(agent.envoy_pids().len(), 1);
    let slow = std::thread::spawn(move || common::http("GET", service_port, "/slow", &[], ""));
    backend
        .slow_started
        .recv_timeout(common::PATIENCE)
        .expect("the slow request reached the backend");
    agent.signal("TERM");
    let answer = slow.join().unwrap();
    assert_eq!(answer, Ok((200, "slow done".to_string())), "{}", agent.log());
    let code = agent.wait_exit();
    assert_eq!(code, 0, "{}", agent.log());
    assert!(agent.envoy_pids().is_empty(), "no Envoy left: {}", agent.log());
    assert!(
        agent.log().contains("drained and stopped on SIGTERM"),
        "{}",
        agent.log()
    );
}
