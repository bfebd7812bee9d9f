//! REST watchers share one watch of the store per kind (the watch cache)
//! and still each see exactly what a watch of their own showed: every
//! event in order, at the version of their URL, through their selector;
//! one that falls behind the cache's window is ended with `410 Expired`
//! while the others go on.

use std::io::BufReader;
use std::net::TcpStream;

use serde_json::{Value, json};

mod common;
use common::{TestServer, next_event};

const VIRTUAL_SERVICES: &str = "/apis/networking.istio.io/v1/namespaces/default/virtualservices";

fn virtual_service(name: &str, app: &str, padding: usize) -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": app},
            "annotations": {"padding": "x".repeat(padding)},
        },
        "spec": {
            "hosts": ["reviews"],
            "http": [{"route": [{"destination": {"host": "reviews"}}]}],
        },
    })
}

/// `(type, name, apiVersion)` of the next `n` events.
fn events(reader: &mut BufReader<TcpStream>, n: usize) -> Vec<(String, String, String)> {
    (0..n)
        .map(|i| {
            let event = next_event(reader).unwrap_or_else(|| panic!("the watch ended after {i} events"));
            (
                event["type"].as_str().unwrap().to_string(),
                event["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                event["object"]["apiVersion"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Creates VirtualService `name` labelled `app` (`padding` bytes of
/// annotation making it larger).
fn create(server: &TestServer, name: &str, app: &str, padding: usize) {
    write(
        server,
        "POST",
        VIRTUAL_SERVICES,
        Some(&virtual_service(name, app, padding)),
    );
}

fn write(server: &TestServer, method: &str, path: &str, body: Option<&Value>) {
    let (code, answer) = server.json(method, path, body);
    assert!((200..300).contains(&code), "{method} {path}: {code} {answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_watchers_see_every_event_at_their_version_and_through_their_selector() {
    let server = TestServer::start(&[]).await;
    create(&server, "before", "reviews", 0);

    // Ten watchers of every object at v1, five at v1beta1, five through a
    // label selector; all on one kind, so on one store watch.
    let mut all: Vec<_> = (0..10)
        .map(|_| server.watch(&format!("{VIRTUAL_SERVICES}?watch=true")))
        .collect();
    let mut older: Vec<_> = (0..5)
        .map(|_| {
            server.watch("/apis/networking.istio.io/v1beta1/namespaces/default/virtualservices?watch=true")
        })
        .collect();
    let mut selected: Vec<_> = (0..5)
        .map(|_| {
            server.watch(&format!(
                "{VIRTUAL_SERVICES}?watch=true&labelSelector=app%3Dratings"
            ))
        })
        .collect();
    // Each has its initial list before the changes start.
    for watch in all.iter_mut().chain(&mut older) {
        assert_eq!(events(watch, 1)[0].0, "ADDED");
    }

    let writes = 40;
    for i in 0..writes {
        create(&server, &format!("vs-{i}"), "reviews", 0);
    }
    // Into the selector, changed inside it, out of it, and back in.
    let path = format!("{VIRTUAL_SERVICES}/vs-0");
    for app in ["ratings", "ratings", "reviews", "ratings"] {
        let (_, mut current) = server.json("GET", &path, None);
        current["metadata"]["labels"]["app"] = json!(app);
        if app == "ratings" {
            current["metadata"]["annotations"]["touched"] = json!(current["metadata"]["resourceVersion"]);
        }
        write(&server, "PUT", &path, Some(&current));
    }
    write(&server, "DELETE", &path, None);

    let mut expected: Vec<(String, String)> = (0..writes)
        .map(|i| ("ADDED".to_string(), format!("vs-{i}")))
        .collect();
    for kind in ["MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"] {
        expected.push((kind.to_string(), "vs-0".to_string()));
    }
    for (watch, version) in all
        .iter_mut()
        .map(|w| (w, "networking.istio.io/v1"))
        .chain(older.iter_mut().map(|w| (w, "networking.istio.io/v1beta1")))
    {
        let seen = events(watch, expected.len());
        let kinds: Vec<(String, String)> = seen.iter().map(|(t, n, _)| (t.clone(), n.clone())).collect();
        assert_eq!(kinds, expected);
        assert!(seen.iter().all(|(_, _, v)| v == version), "{seen:?}");
    }
    // Through the selector: in (ADDED), changed (MODIFIED), out
    // (DELETED), in again (ADDED), deleted (DELETED).
    for watch in &mut selected {
        let seen: Vec<(String, String)> = events(watch, 5).into_iter().map(|(t, n, _)| (t, n)).collect();
        let names = ["ADDED", "MODIFIED", "DELETED", "ADDED", "DELETED"];
        assert_eq!(
            seen,
            names
                .iter()
                .map(|t| (t.to_string(), "vs-0".to_string()))
                .collect::<Vec<_>>()
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_resuming_inside_the_window_sees_what_followed() {
    let server = TestServer::start(&[]).await;
    // A watcher keeps the kind's cache running.
    let mut keeper = server.watch(&format!("{VIRTUAL_SERVICES}?watch=true"));
    create(&server, "a", "reviews", 0);
    let (_, created) = server.json("GET", &format!("{VIRTUAL_SERVICES}/a"), None);
    let version = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(events(&mut keeper, 1)[0].0, "ADDED");
    create(&server, "b", "reviews", 0);
    write(&server, "DELETE", &format!("{VIRTUAL_SERVICES}/a"), None);

    let mut resumed = server.watch(&format!(
        "{VIRTUAL_SERVICES}?watch=true&resourceVersion={version}"
    ));
    let seen: Vec<(String, String)> = events(&mut resumed, 2)
        .into_iter()
        .map(|(t, n, _)| (t, n))
        .collect();
    assert_eq!(
        seen,
        [
            ("ADDED".to_string(), "b".to_string()),
            ("DELETED".to_string(), "a".to_string())
        ]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_falls_behind_the_window_is_ended_with_410_and_the_others_go_on() {
    let server = TestServer::start(&["--watch-cache-events", "8"]).await;
    // One watcher reads nothing until the writes are done; another reads
    // as they come.
    let mut slow = server.watch(&format!("{VIRTUAL_SERVICES}?watch=true"));
    let mut fast = server.watch(&format!("{VIRTUAL_SERVICES}?watch=true"));
    // Until both are served (a watch answers its headers first).
    create(&server, "first", "reviews", 0);
    assert_eq!(events(&mut fast, 1)[0].1, "first");
    let writes = 400;
    let reader = std::thread::spawn(move || events(&mut fast, writes));
    // Large objects: the sockets' buffers fill, so the slow watcher's
    // stream stops being taken and its position falls behind.
    for i in 0..writes {
        create(&server, &format!("vs-{i}"), "reviews", 64 * 1024);
    }
    let fast_seen = reader.join().unwrap();
    assert_eq!(
        fast_seen.iter().map(|(_, n, _)| n.clone()).collect::<Vec<_>>(),
        (0..writes).map(|i| format!("vs-{i}")).collect::<Vec<_>>()
    );
    // The slow watcher reads on: what was in flight, then the end.
    let mut last = None;
    while let Some(event) = next_event(&mut slow) {
        last = Some(event);
    }
    let last = last.expect("the slow watch sent nothing");
    assert_eq!(last["type"], "ERROR", "{last}");
    assert_eq!(last["object"]["code"], 410, "{last}");
    assert_eq!(last["object"]["reason"], "Expired", "{last}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_holding_back_its_writes_is_not_passed_by_the_window() {
    // A write interval far longer than the writes take: only each half
    // window appended meanwhile gets the watcher to write again, before
    // its next event would leave the window.
    let server = TestServer::start(&["--watch-cache-events", "64", "--watch-write-interval", "60s"]).await;
    let mut watch = server.watch(&format!(
        "{VIRTUAL_SERVICES}?watch=true&labelSelector=app%3Dreviews"
    ));
    let writes = 300;
    for i in 0..writes {
        create(&server, &format!("vs-{i}"), "reviews", 0);
    }
    // Objects it does not select move the window on: the last half
    // window of its own events goes out with them.
    for i in 0..64 {
        create(&server, &format!("other-{i}"), "ratings", 0);
    }
    let seen = events(&mut watch, writes);
    assert!(seen.iter().all(|(kind, _, _)| kind == "ADDED"), "{seen:?}");
    assert_eq!(
        seen.into_iter().map(|(_, name, _)| name).collect::<Vec<_>>(),
        (0..writes).map(|i| format!("vs-{i}")).collect::<Vec<_>>()
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_cache_each_watch_reads_the_store() {
    let server = TestServer::start(&["--watch-cache-events", "0"]).await;
    let mut watch = server.watch(&format!("{VIRTUAL_SERVICES}?watch=true"));
    create(&server, "a", "reviews", 0);
    write(&server, "DELETE", &format!("{VIRTUAL_SERVICES}/a"), None);
    let seen: Vec<(String, String)> = events(&mut watch, 2)
        .into_iter()
        .map(|(t, n, _)| (t, n))
        .collect();
    assert_eq!(
        seen,
        [
            ("ADDED".to_string(), "a".to_string()),
            ("DELETED".to_string(), "a".to_string())
        ]
    );
    server.stop().await;
}
