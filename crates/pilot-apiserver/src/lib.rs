//! pilot's REST configuration API: a Kubernetes API, as kube-apiserver
//! serves custom resources, over any [`ConfigWatch`] store and the kinds
//! of its [`KindRegistry`], as an [`axum::Router`]. kubectl, the
//! Kubernetes clients and `pilotctl` speak to it.
//!
//! [`ApiServer`] configures it and [`ApiServer::into_router`] makes the
//! router; serve that router on a listener of your own, beside routes of
//! your own ([`axum::Router::merge`]) and behind layers of your own
//! (authentication, request metrics, body deadlines). What it serves:
//!
//! - discovery (`/version`, `/api`, `/apis`, `/apis/{group}[/{version}]`,
//!   aggregated discovery when asked for), so kubectl finds every kind,
//!   including kinds registered while it runs (`discovery.rs`);
//! - per kind, `/apis/{group}/{version}/namespaces/{ns}/{plural}[/{name}]`
//!   and `/apis/{group}/{version}/{plural}`: get, create, replace, delete,
//!   delete a collection, `dryRun`, strict field validation and warnings
//!   (`resources.rs`, `body.rs`, `strict.rs`, `options.rs`,
//!   `delete_options.rs`), writes that change nothing left unmade
//!   (`unchanged.rs`); JSON merge patch, JSON patch and server-side apply
//!   with field ownership (`patch.rs`, `apply.rs`, `managed_fields.rs`);
//!   lists and watches with label and field selectors, `resourceVersion`,
//!   `timeoutSeconds` and bookmarks (`list.rs`, `selector.rs`); the `Table`
//!   form kubectl asks for (`table.rs`);
//! - `/openapi.json` (OpenAPI 3, for other clients, with the routes an
//!   embedder documents beside it: `openapi.rs`), `/openapi/v2` and
//!   `/openapi/v3` (what `kubectl explain` and `kubectl apply` read:
//!   `kube_openapi.rs`);
//! - every refusal as a Kubernetes `Status` body ([`ApiError`]).
//!
//! [`admission::validate_review`] is the validating admission webhook's
//! logic (an `AdmissionReview` in and out) by the same decoding and
//! validation as the create and replace routes; serve it where the API
//! server can call it (pilot-discovery serves it as `POST /validate` on its
//! webhook listener).
//!
//! Writes go to the store, or through a cache in front of it
//! ([`ApiServer::cache`]: pilot-discovery writes through its Controller,
//! so a write answers once the cache that feeds xDS has it); lists and
//! watches read the store itself, so a list's `resourceVersion` is a
//! revision a watch resumes after.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use pilot_apiserver::ApiServer;
//! use pilot_apiserver::axum::body::Body;
//! use pilot_apiserver::axum::http::{Request, StatusCode};
//! use pilot_store_memory::MemoryConfigStore;
//! use tower::ServiceExt;
//!
//! let store = Arc::new(MemoryConfigStore::new(pilot_api::istio::registry()));
//! let api = ApiServer::new(store).into_router();
//!
//! let rule = r#"{"apiVersion": "config.istio.io/v1alpha2", "kind": "RouteRule",
//!   "metadata": {"name": "reviews-default"},
//!   "spec": {"destination": {"name": "reviews"}, "route": [{"labels": {"version": "v1"}}]}}"#;
//! let create = Request::post("/apis/config.istio.io/v1alpha2/namespaces/default/routerules")
//!     .header("content-type", "application/json")
//!     .body(Body::from(rule))
//!     .unwrap();
//! let created = api.clone().oneshot(create).await.unwrap();
//! assert_eq!(created.status(), StatusCode::CREATED);
//!
//! let get = Request::get("/apis/config.istio.io/v1alpha2/namespaces/default/routerules/reviews-default")
//!     .body(Body::empty())
//!     .unwrap();
//! let found = api.oneshot(get).await.unwrap();
//! assert_eq!(found.status(), StatusCode::OK);
//! # });
//! ```
//!
//! [`ConfigWatch`]: pilot_model::ConfigWatch
//! [`KindRegistry`]: pilot_model::KindRegistry

#![forbid(unsafe_code)]
// A `pub` item is part of this face; everything else says `pub(crate)`.
#![warn(unreachable_pub)]

pub mod admission;
mod apply;
mod body;
mod delete_options;
mod discovery;
mod error;
mod kube_openapi;
mod list;
mod managed_fields;
mod openapi;
mod options;
mod patch;
mod resources;
mod router;
mod selector;
mod server;
mod strict;
mod table;
mod unchanged;
mod watch_cache;

pub use error::ApiError;
pub use server::{ApiOptions, ApiServer, WatchObserver};

/// The axum this crate is built with: [`ApiServer::into_router`] returns
/// its `Router`. Use it to merge routes and add layers, so the versions
/// always match.
pub use axum;

/// The serde_json of [`ApiOptions::documented_routes`] and of
/// [`ApiError::body`].
pub use serde_json;
