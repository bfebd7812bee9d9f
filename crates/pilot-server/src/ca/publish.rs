//! The mesh's trust bundle in every namespace (`--root-cert-configmap
//! NAME`, Istio's `istio-ca-root-cert`): a ConfigMap `NAME` with key
//! `root-cert.pem` holding every root workloads must trust (the signing
//! root first; during a root renewal the old one too). Injected sidecars
//! mount it to verify pilot-discovery's ADS certificate
//! (`--xds-tls-dns-names`) and the certificates the CA gives them.
//!
//! Namespaces are watched: a new one gets the ConfigMap as soon as the
//! watch reports it. The bundle is compared every `check` and written to
//! every namespace when it changes; each namespace is written again every
//! [`REPAIR`] (server-side apply, a no-op when nothing changed), which
//! puts back a ConfigMap someone deleted or edited. Writes are
//! server-side applies by the field manager `pilot-discovery`, so
//! replicas writing the same bundle agree; a failed write is logged and
//! retried at the next check.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use super::SharedCa;

/// The key of the bundle in the ConfigMap.
pub(crate) const KEY: &str = "root-cert.pem";
/// How often every namespace is written again whatever changed.
const REPAIR: Duration = Duration::from_secs(600);

/// Publishes until `shutdown` turns true.
pub(crate) async fn run(
    client: kube::Client,
    name: String,
    ca: SharedCa,
    check: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut events = watcher::watcher(namespaces, watcher::Config::default())
        .default_backoff()
        .boxed();
    // Each namespace known, with the bundle last written there (None:
    // not yet, or the write failed) and when.
    let mut written: BTreeMap<String, Option<(String, Instant)>> = BTreeMap::new();
    let mut ticks = tokio::time::interval(check.max(Duration::from_millis(100)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(Event::Apply(namespace) | Event::InitApply(namespace))) => {
                    if let Some(ns) = namespace.metadata.name
                        && namespace.metadata.deletion_timestamp.is_none()
                    {
                        written.entry(ns).or_insert(None);
                    }
                }
                Some(Ok(Event::Delete(namespace))) => {
                    if let Some(ns) = namespace.metadata.name {
                        written.remove(&ns);
                    }
                }
                Some(Ok(Event::Init | Event::InitDone)) => {}
                Some(Err(error)) => {
                    tracing::warn!(%error, "watching namespaces for the root certificate ConfigMap");
                    continue;
                }
                None => return,
            },
            _ = ticks.tick() => {}
            () = crate::shutdown::closed(&mut shutdown) => return,
        }
        let bundle = ca.current().trust_bundle_pem().to_string();
        for (namespace, last) in &mut written {
            let current = matches!(last, Some((b, at)) if *b == bundle && at.elapsed() < REPAIR);
            if current {
                continue;
            }
            match write(&client, namespace, &name, &bundle).await {
                Ok(()) => *last = Some((bundle.clone(), Instant::now())),
                Err(error) => {
                    *last = None;
                    tracing::warn!(%namespace, configmap = %name, %error, "cannot write the root certificate ConfigMap; retrying");
                }
            }
        }
    }
}

/// Applies the ConfigMap in `namespace`.
async fn write(client: &kube::Client, namespace: &str, name: &str, bundle: &str) -> Result<(), kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let object = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "pilot-discovery"},
        },
        "data": {KEY: bundle},
    });
    api.patch(
        name,
        &PatchParams::apply("pilot-discovery").force(),
        &Patch::Apply(&object),
    )
    .await
    .map(drop)
}
