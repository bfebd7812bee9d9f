//! Hot restart under steady traffic through Envoy's outbound listener:
//! SIGHUP, a changed watched file, then changed labels, each start a new
//! epoch; no request fails; the old Envoy drains and leaves after the
//! parent-shutdown time.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{Agent, Backend, Discovery, eventually, free_port};

#[test]
fn hot_restart_under_traffic_loses_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::start();
    let service_port = free_port();
    let services = common::services_file(dir.path(), service_port, backend.port);
    let discovery = Discovery::start(&["--services", services.to_str().unwrap()]);
    let cert = dir.path().join("cert.pem");
    std::fs::write(&cert, "first").unwrap();
    let labels = dir.path().join("labels");
    std::fs::write(&labels, "app=\"client\"\n").unwrap();
    let agent = Agent::start(
        "sidecar",
        &[
            "--ip",
            "10.0.0.20",
            "--id",
            "client-1.default",
            "--interception-mode",
            "NONE",
            "--discovery-address",
            &format!("127.0.0.1:{}", discovery.xds_port),
            "--drain-duration",
            "2s",
            "--parent-shutdown-duration",
            "4s",
            "--watch-file",
            cert.to_str().unwrap(),
            "--watch-interval",
            "200ms",
            "--labels-file",
            labels.to_str().unwrap(),
        ],
    );
    eventually("the agent ready", || agent.ready());
    eventually("the outbound listener routing to the backend", || {
        common::get(service_port, "/") == (200, "ok".to_string())
    });
    assert_eq!(agent.metric("pilot_agent_envoy_epoch"), Some(0));
    let first = agent.envoy_pids();
    assert_eq!(first.len(), 1);

    // 50 requests a second, each on a new connection, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let load = {
        let (stop, ok, failures) = (stop.clone(), ok.clone(), failures.clone());
        std::thread::spawn(move || {
            let mut workers = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let (ok, failures) = (ok.clone(), failures.clone());
                workers.push(std::thread::spawn(move || {
                    match common::http("GET", service_port, "/", &[], "") {
                        Ok((200, body)) if body == "ok" => {
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                        other => failures.lock().unwrap().push(format!("{other:?}")),
                    }
                }));
                std::thread::sleep(Duration::from_millis(20));
            }
            for worker in workers {
                worker.join().unwrap();
            }
        })
    };

    std::thread::sleep(Duration::from_secs(2));
    agent.signal("HUP");
    eventually("epoch 1 ready", || {
        agent.metric("pilot_agent_envoy_epoch") == Some(1) && agent.ready()
    });
    eventually("epoch 0 gone after the parent-shutdown time", || {
        !agent.envoy_pids().contains(&first[0])
    });
    eventually("epoch 0's bootstrap cleaned up", || {
        !agent.config_dir.join("envoy-rev0.json").exists()
    });
    assert!(agent.config_dir.join("envoy-rev1.json").exists());
    let second = agent.envoy_pids();
    assert_eq!(second.len(), 1, "{second:?}");

    // A changed certificate: epoch 2.
    std::fs::write(&cert, "second").unwrap();
    eventually("epoch 2 ready", || {
        agent.metric("pilot_agent_envoy_epoch") == Some(2) && agent.ready()
    });
    eventually("epoch 1 gone", || !agent.envoy_pids().contains(&second[0]));
    let third = agent.envoy_pids();

    // New labels from the downward API: epoch 3, with them in its node.
    std::fs::write(&labels, "app=\"client\"\nversion=\"v2\"\n").unwrap();
    eventually("epoch 3 ready", || {
        agent.metric("pilot_agent_envoy_epoch") == Some(3) && agent.ready()
    });
    eventually("epoch 2 gone", || !agent.envoy_pids().contains(&third[0]));
    let (_, dump) = common::get(agent.admin_port, "/config_dump");
    let dump: serde_json::Value = serde_json::from_str(&dump).unwrap();
    let node = dump["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|c| c.get("bootstrap"))
        .map(|b| b["node"].clone())
        .unwrap();
    assert_eq!(node["metadata"]["LABELS"]["version"], "v2", "{node}");
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();

    let failures = failures.lock().unwrap();
    let ok = ok.load(Ordering::Relaxed);
    assert!(
        failures.is_empty(),
        "{} of {} requests failed: {:?}\n{}",
        failures.len(),
        ok + failures.len() as u64,
        &failures[..failures.len().min(5)],
        agent.log()
    );
    assert!(ok > 100, "the load ran through both restarts ({ok} requests)");
    assert_eq!(agent.metric("pilot_agent_envoy_hot_restarts_total"), Some(3));
    assert_eq!(
        agent.metric("pilot_agent_envoy_restarts_total"),
        Some(0),
        "no crash restart: {}",
        agent.log()
    );
    assert_eq!(
        agent.metric("pilot_agent_envoy_unexpected_exits_total"),
        Some(0),
        "{}",
        agent.log()
    );
}
