//! Several pilot-discovery replicas on one etcd: three real
//! replicas on a real three-member etcd cluster, six real Envoys whose ADS
//! cluster lists all three replicas.
//!
//! A write through replica 1 reaches all six Envoys; `pilotctl
//! proxy-status` through replica 3 lists all six with the replica serving
//! each (with its agent's process report, posted to one replica); every
//! object's status counts all six. Then the status writer
//! (replica 2, started first so it wins the election) is killed with
//! `kill -9`: its Envoys reconnect to the others, proxy-status shows them
//! there, another replica takes the election, status still counts six,
//! and no configuration is lost or duplicated.

use std::collections::BTreeMap;

use pilot_system_tests::{Mesh, Store, list, weighted};
use pilot_test_support::{Discovery, Envoy, EtcdCluster, eventually, pilotctl};
use serde_json::Value;

const ENVOYS: usize = 6;

const RULE_80_20: &str = "examples/bookinfo/route-rule-reviews-80-20.yaml";
const POLICY: &str = "examples/bookinfo/destination-policy-reviews-cb.yaml";

/// Envoy `i`'s node id; a restarted Envoy (`generation` > 0) gets a new
/// one, so its old stream cannot be taken for it.
fn node(i: usize, generation: usize) -> String {
    format!(
        "sidecar~10.0.{generation}.{}~replicas{i}-{generation}.default~default.svc.cluster.local",
        10 + i
    )
}

fn proxy_status(server: &Discovery) -> Value {
    let (code, body) = server.get("/debug/proxy-status");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Node -> replica, for the proxies `server` serves itself (from memory).
fn own_proxies(server: &Discovery) -> BTreeMap<String, String> {
    let status = proxy_status(server);
    let me = status["replica"].as_str().unwrap_or_default().to_string();
    status["proxies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["replica"] == me.as_str() && p["connected"] == true)
        .map(|p| (p["node"].as_str().unwrap_or_default().to_string(), me.clone()))
        .collect()
}

/// Node -> REPLICA column of `pilotctl proxy-status` through `server`,
/// for rows whose four types are SYNCED.
fn pilotctl_synced(server: &Discovery) -> BTreeMap<String, String> {
    let run = pilotctl(Some(&server.url), &["proxy-status"], &[], None);
    assert_eq!(run.code, 0, "{run:?}");
    if run.stdout.is_empty() {
        // No proxy seen yet: pilotctl says so on stderr.
        assert!(run.stderr.contains("No proxies"), "{run:?}");
        return BTreeMap::new();
    }
    let mut lines = run.stdout.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(
        header[..9],
        [
            "NAME", "CDS", "EDS", "LDS", "RDS", "SRDS", "WDS", "WADS", "REPLICA"
        ],
        "{run:?}"
    );
    // A sidecar's CDS, EDS, LDS and RDS (it is served no scopes: `-`).
    lines
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|words| words.len() >= 9 && words[1..5].iter().all(|w| *w == "SYNCED") && words[5] == "-")
        .map(|words| (words[0].to_string(), words[8].to_string()))
        .collect()
}

fn writer(server: &Discovery) -> Option<bool> {
    let (code, body) = server.get("/metrics");
    if code != 200 {
        return None;
    }
    body.lines()
        .find_map(|line| line.strip_prefix("pilot_status_writer "))
        .map(|value| value.trim() == "1")
}

fn objects(url: &str) -> Vec<Value> {
    ["routerules", "destinationpolicies"]
        .iter()
        .flat_map(|kind| list(Some(url), kind))
        .collect()
}

/// Every object's status is about its current version, with all six
/// proxies ACKed.
fn all_six(objects: &[Value]) -> bool {
    objects.iter().all(|o| {
        let status = &o["status"];
        status["observedVersion"] == o["metadata"]["resourceVersion"]
            && status["proxies"] == ENVOYS as u64
            && status["acked"] == ENVOYS as u64
    })
}

fn weights(envoy: &Envoy) -> Vec<(String, u64)> {
    let dump: Value = serde_json::from_str(&envoy.admin("/config_dump")).unwrap_or_default();
    weighted(&dump)
}

#[test]
fn three_replicas_on_one_etcd_serve_every_envoy_and_survive_kill_9() {
    let etcd = EtcdCluster::start(3).expect("a three-member etcd cluster (run scripts/install-deps)");
    let endpoints = etcd.endpoints().join(",");
    let store = Store::Etcd(&endpoints);
    let mesh = Mesh::bookinfo();

    // Replica 2 first: it campaigns first and becomes the status writer.
    let r2 = mesh.replica(&store, "replica-2");
    eventually("replica 2 to be the status writer", || writer(&r2) == Some(true));
    let r1 = mesh.replica(&store, "replica-1");
    let r3 = mesh.replica(&store, "replica-3");
    for server in [&r1, &r2, &r3] {
        eventually("every replica to see three replicas", || {
            proxy_status(server)["replicas"].as_array().map(Vec::len) == Some(3)
        });
    }
    assert_eq!(writer(&r1), Some(false));
    assert_eq!(writer(&r3), Some(false));

    // Six Envoys, each on whichever replica its ADS cluster picks; until
    // replica 2 serves at least one (so the kill moves some), an Envoy is
    // restarted and picks again.
    let xds_ports = [r1.xds_port, r2.xds_port, r3.xds_port];
    let envoy = |i: usize, generation: usize| {
        Envoy::ads_cluster(
            &node(i, generation),
            &[("INTERCEPTION_MODE", "NONE")],
            &xds_ports,
            false,
        )
        .unwrap()
    };
    let mut envoys: Vec<Envoy> = (0..ENVOYS).map(|i| envoy(i, 0)).collect();
    let placement = |r1: &Discovery, r2: &Discovery, r3: &Discovery| {
        let mut all = own_proxies(r1);
        all.extend(own_proxies(r2));
        all.extend(own_proxies(r3));
        all
    };
    let mut placed = BTreeMap::new();
    for attempt in 0.. {
        eventually("all six Envoys to connect", || {
            placed = placement(&r1, &r2, &r3);
            placed.len() == ENVOYS
        });
        if placed.values().any(|replica| replica == "replica-2") {
            break;
        }
        assert!(attempt < 20, "no Envoy ever picked replica 2: {placed:?}");
        let i = attempt % ENVOYS;
        envoys[i].kill();
        envoys[i] = envoy(i, attempt + 1);
    }

    // A write through replica 1 reaches all six Envoys.
    for file in [RULE_80_20, POLICY] {
        let applied = pilotctl(Some(&r1.url), &["apply", "-f", file], &[], None);
        assert_eq!(applied.code, 0, "{applied:?}");
    }
    let (v1, v2) = (mesh.reviews("v1"), mesh.reviews("v2"));
    for (i, envoy) in envoys.iter().enumerate() {
        eventually(&format!("Envoy {i} to get the 80/20 split"), || {
            let found = weights(envoy);
            found.contains(&(v1.clone(), 80)) && found.contains(&(v2.clone(), 20))
        });
    }

    // proxy-status through replica 3 lists all six, each with the replica
    // that serves it.
    let mut listed = BTreeMap::new();
    eventually(
        "replica 3's proxy-status to list all six SYNCED on their replicas",
        || {
            placed = placement(&r1, &r2, &r3);
            listed = pilotctl_synced(&r3);
            listed == placed
        },
    );
    assert_eq!(listed.len(), ENVOYS);

    // An agent's report posted to the replica its Envoy talks to travels
    // with that replica's record: every replica shows it.
    let (reported, serving) = placed.iter().next().map(|(n, r)| (n.clone(), r.clone())).unwrap();
    let to = [&r1, &r2, &r3]
        .into_iter()
        .find(|server| proxy_status(server)["replica"] == serving.as_str())
        .unwrap();
    let report = format!(
        r#"{{"node":"{reported}","kind":"exited","epoch":1,"restarts":1,"signal":9,"expected":false,"time_ms":1}}"#
    );
    let answer = pilot_test_support::http::request(
        ([127, 0, 0, 1], to.port).into(),
        "POST",
        "/v1/proxy-events",
        &[("content-type", "application/json")],
        report.as_bytes(),
    )
    .unwrap();
    assert_eq!(answer.code, 204, "{}", answer.text());
    for server in [&r1, &r2, &r3] {
        eventually("every replica to show the agent's report", || {
            proxy_status(server)["proxies"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| {
                    p["node"] == reported.as_str()
                        && p["process"]["restarts"] == 1
                        && p["process"]["last_exit"] == "signal 9 (SIGKILL)"
                })
        });
    }

    // Every object's status counts all six proxies, whichever replica
    // serves them.
    let mut before = Vec::new();
    eventually("every object's status to be 6/6", || {
        before = objects(&r3.url);
        before.len() == 2 && all_six(&before)
    });
    let table = pilotctl(Some(&r3.url), &["get", "rr"], &[], None);
    assert!(table.stdout.contains(" 6/6 "), "{table:?}");

    // kill -9 replica 2, the status writer.
    let moved: Vec<String> = placed
        .iter()
        .filter(|(_, replica)| *replica == "replica-2")
        .map(|(node, _)| node.clone())
        .collect();
    pilot_test_support::signal(r2.pid(), "KILL");
    eventually(
        "replica 2's Envoys to reconnect to replica 1 or 3, as proxy-status shows",
        || {
            listed = pilotctl_synced(&r3);
            listed.len() == ENVOYS && listed.values().all(|replica| replica != "replica-2")
        },
    );
    let mut survivors = own_proxies(&r1);
    survivors.extend(own_proxies(&r3));
    assert_eq!(listed, survivors, "{moved:?} moved");
    eventually("replica 2's record to expire", || {
        proxy_status(&r1)["replicas"].as_array().map(Vec::len) == Some(2)
            && proxy_status(&r3)["replicas"].as_array().map(Vec::len) == Some(2)
    });
    eventually("replica 1 or 3 to take the status writer election", || {
        [writer(&r1), writer(&r3)]
            .iter()
            .filter(|w| **w == Some(true))
            .count()
            == 1
    });

    // Status still counts six; nothing lost or duplicated.
    let mut after = Vec::new();
    eventually("every object's status to stay 6/6", || {
        after = objects(&r1.url);
        all_six(&after)
    });
    let names = |objects: &[Value]| {
        objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap_or_default().to_string(),
                    o["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                    o["metadata"]["resourceVersion"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(&after),
        names(&before),
        "objects lost, duplicated or changed"
    );
    for (i, envoy) in envoys.iter().enumerate() {
        let found = weights(envoy);
        assert!(
            found.contains(&(v1.clone(), 80)) && found.contains(&(v2.clone(), 20)),
            "Envoy {i} lost the 80/20 split: {found:?}"
        );
    }

    // The new writer writes: a change through replica 3 reaches all six
    // and its status counts them.
    let rule = std::fs::read_to_string(pilot_test_support::workspace().join(RULE_80_20)).unwrap();
    let rule = rule
        .replace("weight: 80", "weight: 50")
        .replace("weight: 20", "weight: 50");
    let applied = pilotctl(Some(&r3.url), &["apply", "-f", "-"], &[], Some(&rule));
    assert_eq!(applied.code, 0, "{applied:?}");
    for (i, envoy) in envoys.iter().enumerate() {
        eventually(&format!("Envoy {i} to get the 50/50 split"), || {
            let found = weights(envoy);
            found.contains(&(v1.clone(), 50)) && found.contains(&(v2.clone(), 50))
        });
    }
    eventually("the changed rule's status to be 6/6 at its new version", || {
        after = objects(&r1.url);
        all_six(&after) && names(&after) != names(&before)
    });
    assert_eq!(after.len(), 2, "{after:?}");

    drop(envoys);
    r1.terminate();
    r3.terminate();
    drop(etcd);
}
