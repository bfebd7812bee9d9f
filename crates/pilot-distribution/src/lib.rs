//! pilot's status loop: what reached the proxies, written back to the
//! store. It runs beside an ADS server (`pilot_ads::XdsServer`) and its
//! Controller, over any store that keeps status
//! (`ConfigStore::keeps_status`), and knows nothing of HTTP.
//!
//! - [`StatusWriter`]: once per interval, each routing object's
//!   distribution status (`pilot_model::ConfigStatus`: how many of the
//!   proxies that should have it ACKed or NACKed its current version),
//!   computed from the proxies' records ([`ProxyRecords`]) and written to
//!   the store only when its counts changed (`status_writer.rs`).
//! - [`Findings`]: what analysis says of each object, given by the
//!   embedder; the writer adds it to each status as a `Reconciled`
//!   condition and `validationMessages` (`findings.rs`).
//! - [`Replicas`]: this replica among the replicas of its store, through
//!   the store's `pilot_model::Membership`: its record published, the
//!   others' read, the status-writer election campaigned for; as a
//!   [`ProxyRecords`] source, every live replica's proxies, so the elected
//!   replica writes one status over the whole mesh (`replicas.rs`).
//! - [`ProxyEvents`]: pilot-agent's reports of Envoy's process life,
//!   published with each proxy's record (`proxy_events.rs`).
//!
//! The store-facing types (`ConfigStatus`, `ProxyDistribution`,
//! `Membership`, `ReplicaRecord`, `LocalMembership`) are pilot-model's:
//! every backend implements them.
//!
//! The loop over an in-memory store, one replica: the routing objects get
//! a status (here with no proxy connected: none of zero).
//!
//! ```
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use pilot_ads::{XdsOptions, XdsServer};
//! use pilot_distribution::{ProxyEvents, Replicas, StatusWriter};
//! use pilot_model::{ConfigKey, ConfigStore, LocalMembership, document};
//! use pilot_store::Controller;
//! use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
//!
//! let kinds = pilot_api::istio::registry();
//! let store = Arc::new(MemoryConfigStore::new(kinds.clone()));
//! let rule = "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\n\
//!             metadata: {name: reviews-default, namespace: default}\n\
//!             spec: {destination: {name: reviews}, route: [{labels: {version: v1}}]}\n";
//! for object in document::parse("rule.yaml", rule, &kinds).unwrap() {
//!     store.create(object).await.unwrap();
//! }
//! let controller = Arc::new(Controller::new(store.clone()));
//! controller.run();
//! let xds = XdsServer::new(Arc::clone(&controller), Arc::new(MemoryServiceRegistry::new()), XdsOptions::default());
//!
//! // This replica (alone on the store), and the status writer over every
//! // live replica's proxies.
//! let replicas = Arc::new(
//!     Replicas::new(Arc::new(LocalMembership::new("pilot-0")), xds.clone())
//!         .with_proxy_events(Arc::new(ProxyEvents::default())),
//! );
//! let writer = StatusWriter::new(Arc::clone(&controller), store.clone(), replicas.clone())
//!     .interval(Duration::from_millis(20));
//! let (stop, stopped) = tokio::sync::watch::channel(false);
//! let until_stopped = move || {
//!     let mut stopped = stopped.clone();
//!     async move { let _ = stopped.wait_for(|stop| *stop).await; }
//! };
//! let tasks = [
//!     tokio::spawn(replicas.run(until_stopped())),
//!     tokio::spawn(writer.run(until_stopped())),
//! ];
//!
//! let key = ConfigKey::new("RouteRule", "default", "reviews-default");
//! let status = loop {
//!     if let Some(status) = store.get(&key).await.unwrap().unwrap().meta.status.clone() {
//!         break status;
//!     }
//!     tokio::time::sleep(Duration::from_millis(20)).await;
//! };
//! assert_eq!((status.proxies, status.acked), (0, 0));
//!
//! stop.send_replace(true);
//! for task in tasks {
//!     task.await.unwrap();
//! }
//! # });
//! ```

#![forbid(unsafe_code)]
// A `pub` item is part of this face; everything else says `pub(crate)`.
#![warn(unreachable_pub)]

mod findings;
mod proxy_events;
mod replicas;
mod status_writer;

pub use findings::Findings;
pub use proxy_events::{ProxyEventCounts, ProxyEvents};
pub use replicas::{CHANGE_POLL, REFRESH, ReplicaCounts, Replicas};
pub use status_writer::{HOLD_ROUNDS, ProxyRecords, StatusWriter, WriterCounts};
