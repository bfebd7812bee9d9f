//! Debounced pushes: Controller and registry events in, snapshots out.
//! A proxy's rejection of some objects (`feedback/rejections.rs`) also
//! pushes: the same rules and registry state, with those objects left out
//! of the configuration of the proxies that rejected them.

use std::sync::{Arc, Weak};

use futures::{FutureExt, StreamExt};
use pilot_model::{ServiceDiscovery, ServiceEvent};
use pilot_store::Controller;
use tokio::time::Instant;

use super::certificates::SdsCertificates;
use super::generation_cache::{Changes, GeneratedCache};
use super::inputs::PushObjects;
use super::snapshot::{MeshSnapshot, PUSHED_KINDS, PushClock, PushInfo, READ_KINDS};
use crate::feedback::Rejections;
use crate::options::XdsOptions;
use crate::state::ServerState;

/// One event the pipeline waits for.
enum Change {
    Config,
    Registry(ServiceEvent),
    /// A proxy rejected objects: they are to be left out for it.
    Rejected,
    /// The credentials (Secrets) changed: which edge servers' certificates
    /// come may have.
    Credentials,
    /// A stream ended: the server is going away.
    Closed,
}

impl Changes {
    fn record(&mut self, change: &Change) {
        match change {
            Change::Config | Change::Closed => {
                self.full = true;
                self.rules = true;
            }
            Change::Registry(ServiceEvent::Instance(event)) => {
                if let pilot_model::Event::Updated { old, .. } = event {
                    self.endpoints.insert(old.service.hostname.clone());
                }
                self.endpoints.insert(event.object().service.hostname.clone());
            }
            // A workload listed by itself backs no service: only
            // ztunnels are served it (the push's new registry state),
            // Envoys' configurations are kept.
            Change::Registry(ServiceEvent::Workload(_)) => {}
            Change::Registry(_) => self.full = true,
            // The same rules and registry: everything generated is kept,
            // only the proxies that rejected something get a reduced
            // configuration.
            Change::Rejected => self.rejected = true,
            // Everything generated is kept but the edge classes: which
            // servers terminating TLS they are served depends on whether
            // their certificates come.
            Change::Credentials => self.credentials = true,
        }
    }
}

/// What the pipeline waits on besides the Controller and the registry.
struct Others {
    rejections: Arc<Rejections>,
    /// Ticks once per change of the server's credentials.
    credentials: tokio::sync::watch::Receiver<u64>,
}

/// The next configuration, registry, rejection or credential change,
/// whichever comes first.
async fn next_change<C, R>(config_events: &mut C, registry_events: &mut R, others: &mut Others) -> Change
where
    C: futures::Stream + Unpin,
    R: futures::Stream<Item = ServiceEvent> + Unpin,
{
    tokio::select! {
        event = config_events.next() => event.map_or(Change::Closed, |_| Change::Config),
        event = registry_events.next() => event.map_or(Change::Closed, Change::Registry),
        () = others.rejections.recorded() => Change::Rejected,
        changed = others.credentials.changed() => match changed {
            Ok(()) => Change::Credentials,
            Err(_) => Change::Closed,
        },
    }
}

/// Whether a batch that changed the credentials alone is to be pushed:
/// when some edge server of the last push terminates TLS with a secret
/// (else nothing generated depends on the credentials; their own stream
/// sends the changed secrets).
fn pushes(changes: &Changes, server: &Weak<ServerState>) -> bool {
    let credentials_alone = changes.credentials
        && !changes.full
        && !changes.rules
        && !changes.rejected
        && changes.endpoints.is_empty();
    if !credentials_alone {
        return true;
    }
    let Some(server) = server.upgrade() else {
        return true;
    };
    let snapshot = server.snapshots.borrow();
    snapshot.as_ref().is_none_or(|snapshot| {
        snapshot
            .rules
            .model()
            .ingress_servers()
            .iter()
            .any(|s| s.terminates_tls() && s.tls.as_ref().is_some_and(|tls| tls.credential_name.is_some()))
    })
}

pub(crate) async fn run(
    server: Weak<ServerState>,
    controller: Arc<Controller>,
    registry: Arc<dyn ServiceDiscovery>,
    options: XdsOptions,
) {
    let Some(mut others) = server.upgrade().map(|s| Others {
        rejections: Arc::clone(&s.rejections),
        credentials: s.credential_changes.subscribe(),
    }) else {
        return;
    };
    let mut config_events = controller.subscribe_all();
    // A registry whose stream ends (an empty aggregate, a static registry)
    // has no more changes; configuration changes still push.
    let mut registry_events = registry.subscribe().chain(futures::stream::pending());
    // Nothing is served before the cache and the registry have synced.
    // Both signal it; only a registry that overrides `has_synced` without
    // `wait_synced` (whose default is ready at once) is looked at again.
    controller.wait_synced().await;
    registry.wait_synced().await;
    while !registry.has_synced() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut version = 1;
    // What changed since the last push (kept when a push is skipped).
    let mut changes = Changes {
        full: true,
        rules: true,
        ..Default::default()
    };
    if !publish(
        &server,
        &controller,
        &*registry,
        &mut registry_events,
        version,
        None,
        &mut changes,
    ) {
        return;
    }
    // When the last change was seen: a change seen `debounce_quiet` or
    // more after it, and not queued while a push was built, came alone.
    // The first push is the burst of everything there was at start: what
    // trails it (a registry deriving its services from the objects, say)
    // is debounced with it.
    let mut last_change = Instant::now();
    loop {
        // A change made while the last push was built is waiting already:
        // it belongs to the changes that push carried (a burst).
        let (first, queued) =
            match next_change(&mut config_events, &mut registry_events, &mut others).now_or_never() {
                Some(change) => (change, true),
                None => (
                    next_change(&mut config_events, &mut registry_events, &mut others).await,
                    false,
                ),
            };
        if matches!(first, Change::Closed) {
            return;
        }
        changes.record(&first);
        let started = Instant::now();
        let alone = !queued && started - last_change >= options.debounce_quiet;
        last_change = if options.debounce_leading && alone {
            // Nothing to wait for: what is queued goes with it, what comes
            // next waits for the push after.
            while let Some(change) =
                next_change(&mut config_events, &mut registry_events, &mut others).now_or_never()
            {
                if matches!(change, Change::Closed) {
                    break;
                }
                changes.record(&change);
            }
            started
        } else {
            debounce(
                &options,
                started,
                &mut changes,
                &mut config_events,
                &mut registry_events,
                &mut others,
            )
            .await
        };
        if !pushes(&changes, &server) {
            changes.credentials = false;
            continue;
        }
        version += 1;
        if !publish(
            &server,
            &controller,
            &*registry,
            &mut registry_events,
            version,
            Some(started),
            &mut changes,
        ) {
            return;
        }
    }
}

/// Waits until no change has arrived for `debounce_quiet`, or
/// `debounce_max` after `started`, recording the changes meanwhile; when
/// the last of them was seen.
async fn debounce<C, R>(
    options: &XdsOptions,
    started: Instant,
    changes: &mut Changes,
    config_events: &mut C,
    registry_events: &mut R,
    others: &mut Others,
) -> Instant
where
    C: futures::Stream + Unpin,
    R: futures::Stream<Item = ServiceEvent> + Unpin,
{
    let mut last = started;
    loop {
        let left = options.debounce_max.saturating_sub(started.elapsed());
        if left.is_zero() {
            return last;
        }
        let quiet = options.debounce_quiet.min(left);
        let more = tokio::time::timeout(quiet, next_change(config_events, registry_events, others)).await;
        match more {
            Ok(Change::Closed) | Err(_) => return last,
            Ok(change) => {
                changes.record(&change);
                last = Instant::now();
            }
        }
    }
}

/// Decodes the rules once, freezes the registry, and publishes both; false
/// when the server is gone. `changed`: when the first change this push
/// carries arrived; `changes`: what changed since the last push, taken
/// when the push is published.
fn publish(
    server: &Weak<ServerState>,
    controller: &Controller,
    registry: &dyn ServiceDiscovery,
    registry_events: &mut (impl futures::Stream<Item = ServiceEvent> + Unpin),
    version: u64,
    changed: Option<Instant>,
    changes: &mut Changes,
) -> bool {
    let Some(server) = server.upgrade() else {
        return false;
    };
    let building = Instant::now();
    if let Some(changed) = changed {
        server.timings.debounce.record(building - changed);
    }
    let previous = server.snapshots.borrow().clone();
    // Endpoints moving leave the rules as they were: no list and decode of
    // every rule per push (a twentieth of an endpoint push's CPU at 5,000
    // rules). Then the revisions stay the last push's too: they say which
    // writes the rules hold.
    let kept = previous.as_ref().filter(|_| !changes.rules).map(|p| {
        (
            Arc::clone(&p.revisions),
            Arc::clone(&p.objects),
            Arc::clone(&p.rules),
        )
    });
    let (revisions, objects, rules, rules_changed) = match kept {
        Some((revisions, objects, rules)) => (revisions, objects, rules, Some(Default::default())),
        None => {
            let kinds: Vec<&str> = PUSHED_KINDS.iter().chain(&READ_KINDS).copied().collect();
            // Read before the cache is: the push holds at least every write
            // up to these (objects' status is counted against them).
            let revisions: Arc<pilot_model::KindRevisions> = Arc::new(
                kinds
                    .iter()
                    .filter_map(|kind| Some((kind.to_string(), controller.applied_revision(kind)?)))
                    .collect(),
            );
            let mut configs = Vec::new();
            for kind in kinds {
                // A Controller that does not watch a kind has none of it to
                // push (an embedder's Controller over fewer kinds).
                // Objects labelled for another control-plane revision are
                // that revision's to serve.
                configs.extend(
                    controller
                        .list_cached(kind, None)
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|c| pilot_model::in_revision(&c.meta.labels, &server.options.revision)),
                );
            }
            // Compiled once here, for every proxy of the push, from the
            // last push's rules.
            let previous_rules = previous.as_ref().map(|p| &*p.rules);
            match crate::cpu_bound(|| super::recompile::rules(&configs, previous_rules, &server.options)) {
                Ok((rules, changed)) => (
                    revisions,
                    Arc::new(PushObjects::new(configs)),
                    Arc::new(rules),
                    changed,
                ),
                Err(error) => {
                    tracing::error!(%error, "cannot decode the routing configuration; keeping the last push");
                    return true;
                }
            }
        }
    };
    // The registry's own immutable state, shared (not copied) with it.
    let frozen = registry.snapshot();
    // Registries send a change's event before readers see the change (the
    // service cache sends under its write lock, and its snapshot is taken
    // under its read lock), so every change the snapshot holds has its
    // event queued by now: take them into this push, so that what is
    // reused from the last push is exactly what did not change.
    while let Some(Some(event)) = registry_events.next().now_or_never() {
        changes.record(&Change::Registry(event));
    }
    let mut changes = std::mem::take(changes);
    let mut same_ingress = false;
    changes.touched = previous.as_ref().and_then(|p| {
        super::scopes::touched_hosts(
            (&p.rules, &p.registry),
            (&rules, &frozen),
            rules_changed.as_ref(),
            &mut same_ingress,
        )
    });
    changes.same_ingress = same_ingress;
    changes.same_services = previous
        .as_ref()
        .is_some_and(|p| super::scopes::same_services(&p.registry, &frozen));
    changes.steady = previous.as_ref().is_some_and(|p| {
        super::scopes::steady(&p.rules, &rules, changes.touched.as_ref(), changes.same_services)
    });
    // Rules changed in some gateway hosts' routes alone: edge classes are
    // patched.
    changes.edge_hosts = previous
        .as_ref()
        .filter(|p| changes.same_services && !Arc::ptr_eq(&p.rules, &rules))
        .and_then(|p| rules.model().changed_edge_hosts(p.rules.model()))
        .map(Arc::new);
    if let (Some(p), Some(touched)) = (previous.as_ref().filter(|_| changes.steady), &changes.touched) {
        changes.moved = super::own_instances::moved_addresses(&p.registry, &frozen, touched);
    }
    let certificates = SdsCertificates {
        source: server.credentials.get().cloned(),
        rules: Arc::clone(&rules),
    };
    let generated = GeneratedCache::new(
        previous.as_deref().map(|p| &p.generated),
        &changes,
        server.options.incremental,
    )
    .with_certificates(Some(Arc::new(certificates)));
    tracing::debug!(
        version,
        full = changes.full,
        endpoints = changes.endpoints.len(),
        "pushing"
    );
    // What the proxies rejected is left out only while the push holds it
    // at the version rejected.
    server.rejections.forget_stale(&objects);
    let rejected = Arc::new(server.rejections.of_push(&objects));
    server
        .revisions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .record(version, Arc::clone(&revisions));
    let registry_version = frozen.version();
    let snapshot = Arc::new(MeshSnapshot {
        version,
        revisions,
        objects,
        rules,
        registry: frozen,
        generated,
        reduced: Default::default(),
        incremental: server.options.incremental,
        rejected,
        published: PushClock {
            published: Instant::now(),
            changed,
        },
    });
    server.timings.build.record(building.elapsed());
    server.snapshots.send_replace(Some(Arc::clone(&snapshot)));
    // Published first: a stream parking from now on sees it (`parked.rs`).
    server.parking.published(&snapshot);
    // Nobody listening is fine.
    let _ = server.pushes.send(PushInfo {
        version,
        latency: changed.map(|c| c.elapsed()),
        registry_version,
    });
    true
}
