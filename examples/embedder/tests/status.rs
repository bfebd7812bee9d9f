//! The status loop over the file store: with the embedded server running,
//! each routing object's distribution status is written into its file, at
//! the object's current version (no proxy connected here: none of zero;
//! `tests/envoy.rs` has a real Envoy ACK a rule).

use std::path::Path;
use std::time::{Duration, Instant};

use pilot_api::istio;
use pilot_embedder_example::FileConfigStore;
use pilot_model::{ConfigStore, document};
use serde_json::Value;
use tokio::net::TcpListener;

/// How long the test waits for the status (a hang becomes a failure;
/// nothing here asserts on speed).
const PATIENCE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_of_each_rule_is_written_into_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let rule = "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\n\
                metadata: {name: hello-v1, namespace: default}\n\
                spec: {destination: {name: hello}, route: [{labels: {version: v1}}]}\n";
    let store = FileConfigStore::open(&config_dir, istio::registry()).unwrap();
    for object in document::parse("hello-v1.yaml", rule, &istio::registry()).unwrap() {
        store.create(object).await.unwrap();
    }
    drop(store);
    let services = dir.path().join("services.json");
    std::fs::write(&services, r#"{"services": []}"#).unwrap();

    let xds = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rest = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn({
        let config_dir = config_dir.clone();
        async move {
            pilot_embedder_example::serve(&config_dir, &services, xds, rest, async {
                let _ = stopped.await;
            })
            .await
        }
    });

    let file = config_dir.join("RouteRule/default/hello-v1.json");
    let deadline = Instant::now() + PATIENCE;
    let stored = loop {
        let stored = read(&file);
        if !stored["status"].is_null() || Instant::now() >= deadline {
            break stored;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let _ = stop.send(());
    server.await.unwrap().expect("served until stopped");

    let status = &stored["status"];
    assert!(
        !status.is_null(),
        "no status written into {}: {stored}",
        file.display()
    );
    assert_eq!(
        status["observedVersion"], stored["metadata"]["resourceVersion"],
        "{stored}"
    );
    assert_eq!(
        (&status["proxies"], &status["acked"]),
        (&0.into(), &0.into()),
        "{stored}"
    );
}

/// The object's file as JSON (`Null` while unreadable, e.g. mid-rename).
fn read(file: &Path) -> Value {
    std::fs::read(file)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}
