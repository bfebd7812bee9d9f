//! Supervision with restart epochs, after Istio's proxy agent: a desired
//! configuration and a reconcile loop.
//!
//! - A change of the desired configuration starts the epoch one above the
//!   highest running (`--restart-epoch`): Envoy's hot restart hands the listeners over,
//!   and the old epoch drains and leaves by itself.
//! - An epoch that exits unexpectedly aborts every epoch (hot restart
//!   races), and Envoy is started again at epoch 0 after an exponential
//!   backoff drawn from a retry budget; a change of the desired
//!   configuration refills the budget, and so does an Envoy that stayed
//!   ready (LIVE, configured) for `stable_after` (Istio's agent refilled it
//!   only on a change, so ten crashes over a pod's life ended it). A spent
//!   budget ends the agent with an
//!   error saying why, so the orchestrator restarts the pod.
//! - An epoch that exits cleanly while a newer one runs is a drained parent.
//! - Bootstrap files of exited epochs are removed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use pilot_proxy_api::{EventKind, ProxyEvent};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::AgentError;
use crate::bootstrap::{BootstrapConfig, bootstrap_path};
use crate::envoy::{Admin, EnvoyOptions, Exit};
use crate::report::{Reporter, WithExit};
use crate::status_port::AgentStatus;

/// What Envoy should run: the bootstrap's inputs, plus a generation that a
/// changed watched file or SIGHUP bumps (an input the bootstrap does not
/// show, such as a certificate's content).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    /// The bootstrap's inputs.
    pub config: BootstrapConfig,
    /// Bumped to force a hot restart with the same bootstrap.
    pub generation: u64,
}

/// The retry budget: `max_retries` starts after failures in a row, the
/// first after `initial_backoff`, each next one twice as late.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Exits tolerated in a row.
    pub max_retries: u32,
    /// The first delay.
    pub initial_backoff: Duration,
    /// How long Envoy must stay ready before the budget is refilled.
    pub stable_after: Duration,
}

impl RetryPolicy {
    /// The delay before retry number `attempt` (0-based).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let policy = pilot_agent::supervisor::RetryPolicy {
    ///     max_retries: 10,
    ///     initial_backoff: Duration::from_millis(200),
    ///     stable_after: Duration::from_secs(10),
    /// };
    /// assert_eq!(policy.delay(0), Duration::from_millis(200));
    /// assert_eq!(policy.delay(3), Duration::from_millis(1600));
    /// ```
    pub fn delay(&self, attempt: u32) -> Duration {
        self.initial_backoff.saturating_mul(1u32 << attempt.min(20))
    }
}

/// Runs Envoy for the agent.
pub struct Supervisor {
    /// How Envoy is run.
    pub envoy: EnvoyOptions,
    /// Restart after failures.
    pub retry: RetryPolicy,
    /// Envoy's admin endpoint (drain and quit on shutdown).
    pub admin: Admin,
    /// How long Envoy drains on SIGTERM at most.
    pub termination_drain: Duration,
    /// Counters for the status port.
    pub status: Arc<AgentStatus>,
    /// Where events go.
    pub reporter: Reporter,
}

struct Running {
    epoch: u32,
    abort: Option<oneshot::Sender<()>>,
}

struct ExitReport {
    run: u64,
    epoch: u32,
    exit: Exit,
    tail: String,
}

impl Supervisor {
    /// Supervises Envoy following `desired` until `shutdown` turns true
    /// (then drains and stops Envoy and returns `Ok`), or until the retry
    /// budget is spent (`Err(BudgetExhausted)`). Reports are flushed before
    /// it returns.
    pub async fn run(
        self,
        desired: watch::Receiver<Desired>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(), AgentError> {
        let Supervisor {
            envoy,
            retry,
            admin,
            termination_drain,
            status,
            reporter,
        } = self;
        let mut state = State {
            envoy,
            retry,
            status,
            reporter,
            live: BTreeMap::new(),
            aborted: Default::default(),
            next_run: 0,
            current: None,
            budget: retry.max_retries,
            retry_at: None,
            stable_at: None,
            pending_restart: false,
        };
        let (exit_tx, exit_rx) = mpsc::channel(16);
        let result = state
            .supervise(desired, shutdown, exit_tx, exit_rx, admin, termination_drain)
            .await;
        state.reporter.flush(Duration::from_secs(5)).await;
        result
    }
}

struct State {
    envoy: EnvoyOptions,
    retry: RetryPolicy,
    status: Arc<AgentStatus>,
    reporter: Reporter,
    live: BTreeMap<u64, Running>,
    /// Runs killed by the agent, not reaped yet.
    aborted: std::collections::BTreeSet<u64>,
    next_run: u64,
    current: Option<Desired>,
    budget: u32,
    retry_at: Option<Instant>,
    /// When the budget is refilled if nothing fails until then.
    stable_at: Option<Instant>,
    /// The next start follows a failure (counted as a restart).
    pending_restart: bool,
}

impl State {
    async fn supervise(
        &mut self,
        mut desired: watch::Receiver<Desired>,
        mut shutdown: watch::Receiver<bool>,
        exit_tx: mpsc::Sender<ExitReport>,
        mut exit_rx: mpsc::Receiver<ExitReport>,
        admin: Admin,
        termination_drain: Duration,
    ) -> Result<(), AgentError> {
        let (ready_tx, mut ready_rx) = mpsc::channel::<u64>(16);
        loop {
            if *shutdown.borrow() {
                let node = desired.borrow().config.identity.node_id();
                self.stop(&admin, termination_drain, &mut exit_rx, &node).await;
                return Ok(());
            }
            let want = desired.borrow().clone();
            if self.retry_at.is_none()
                && self.current.as_ref() != Some(&want)
                && let Some(run) = self.start(&want, &exit_tx)
            {
                tokio::spawn(watch_ready(admin, run, ready_tx.clone()));
            }
            let retry_at = self.retry_at;
            let stable_at = self.stable_at;
            tokio::select! {
                changed = desired.changed() => {
                    if changed.is_err() {
                        // The sender is gone: nothing will change any more;
                        // keep supervising until shutdown.
                        let _ = shutdown.changed().await;
                        continue;
                    }
                    self.budget = self.retry.max_retries;
                }
                Some(report) = exit_rx.recv() => {
                    let node = desired.borrow().config.identity.node_id();
                    self.exited(report, &node)?;
                }
                _ = sleep_until(retry_at), if retry_at.is_some() => {
                    self.retry_at = None;
                }
                Some(run) = ready_rx.recv() => {
                    if self.live.contains_key(&run) {
                        tracing::info!(run, "envoy ready");
                        if self.budget < self.retry.max_retries {
                            self.stable_at = Some(Instant::now() + self.retry.stable_after);
                        }
                    }
                }
                _ = sleep_until(stable_at), if stable_at.is_some() => {
                    self.stable_at = None;
                    self.budget = self.retry.max_retries;
                    tracing::info!("envoy stayed ready: retry budget refilled");
                }
                _ = shutdown.changed() => {}
            }
        }
    }

    /// Starts epoch = highest running + 1 with `want`; its run number
    /// when a process was started.
    fn start(&mut self, want: &Desired, exit_tx: &mpsc::Sender<ExitReport>) -> Option<u64> {
        let node = want.config.identity.node_id();
        let epoch = self.live.values().map(|r| r.epoch + 1).max().unwrap_or(0);
        let hot = epoch > 0;
        self.current = Some(want.clone());
        let spawned = want
            .config
            .write(&self.envoy.config_dir, epoch)
            .and_then(|path| crate::envoy::spawn(&self.envoy, epoch, &self.envoy.args(epoch, &path)));
        let run = self.next_run;
        self.next_run += 1;
        let (child, tail) = match spawned {
            Ok(spawned) => spawned,
            Err(e) => {
                // Counted like an exit: the budget decides whether to retry.
                let _ = exit_tx.try_send(ExitReport {
                    run,
                    epoch,
                    exit: Exit::Code(-1),
                    tail: e.to_string(),
                });
                self.live.insert(run, Running { epoch, abort: None });
                return None;
            }
        };
        let pid = child.id();
        let (abort_tx, abort_rx) = oneshot::channel();
        self.live.insert(
            run,
            Running {
                epoch,
                abort: Some(abort_tx),
            },
        );
        self.status.starts.fetch_add(1, Ordering::Relaxed);
        self.status.epoch.store(u64::from(epoch), Ordering::Relaxed);
        if hot {
            self.status.hot_restarts.fetch_add(1, Ordering::Relaxed);
        }
        if std::mem::take(&mut self.pending_restart) {
            self.status.restarts.fetch_add(1, Ordering::Relaxed);
        }
        let mut event = ProxyEvent::new(
            &node,
            EventKind::Started,
            epoch,
            self.status.restarts.load(Ordering::Relaxed),
        );
        event.pid = pid;
        event.expected = true;
        event.message = Some(if hot {
            format!("hot restart: epoch {epoch} takes over")
        } else {
            format!("epoch {epoch} started")
        });
        self.reporter.send(event);
        let exit_tx = exit_tx.clone();
        tokio::spawn(wait_child(child, tail, run, epoch, abort_rx, exit_tx));
        Some(run)
    }

    fn exited(&mut self, report: ExitReport, node: &str) -> Result<(), AgentError> {
        let Some(run) = self.live.remove(&report.run) else {
            // An epoch the agent aborted.
            self.aborted.remove(&report.run);
            self.cleanup(report.epoch);
            return Ok(());
        };
        self.cleanup(report.epoch);
        let restarts = self.status.restarts.load(Ordering::Relaxed);
        let newer = self.live.values().any(|r| r.epoch > run.epoch);
        if report.exit.is_clean() && newer {
            let mut event =
                ProxyEvent::new(node, EventKind::Exited, report.epoch, restarts).with_exit(&report.exit);
            event.expected = true;
            event.message = Some(format!(
                "epoch {} drained and left after a hot restart",
                report.epoch
            ));
            self.reporter.send(event);
            return Ok(());
        }
        let mut account = format!("epoch {} {}", report.epoch, report.exit);
        if !report.tail.is_empty() {
            account.push_str(": ");
            account.push_str(&report.tail);
        }
        self.status.unexpected_exits.fetch_add(1, Ordering::Relaxed);
        *self.status.last_exit.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{}", report.exit));
        let mut event =
            ProxyEvent::new(node, EventKind::Exited, report.epoch, restarts).with_exit(&report.exit);
        event.message = Some(account.clone());
        self.reporter.send(event);
        // Abort every other epoch: a hot restart racing a crash leaves
        // Envoys that cannot be trusted to hand over.
        self.abort_all();
        self.current = None;
        self.stable_at = None;
        if self.budget == 0 {
            let attempts = self.retry.max_retries + 1;
            let mut event = ProxyEvent::new(node, EventKind::BudgetExhausted, report.epoch, restarts)
                .with_exit(&report.exit);
            event.message = Some(format!(
                "retry budget of {} spent; last: {account}",
                self.retry.max_retries
            ));
            self.reporter.send(event);
            return Err(AgentError::BudgetExhausted {
                attempts,
                last_exit: account,
            });
        }
        let attempt = self.retry.max_retries - self.budget;
        self.budget -= 1;
        let delay = self.retry.delay(attempt);
        self.retry_at = Some(Instant::now() + delay);
        self.pending_restart = true;
        let mut event = ProxyEvent::new(node, EventKind::Restarting, 0, restarts);
        event.backoff_ms = Some(delay.as_millis() as u64);
        event.message = Some(format!(
            "restart {} of {} in {delay:?}",
            attempt + 1,
            self.retry.max_retries
        ));
        self.reporter.send(event);
        Ok(())
    }

    /// Removes an exited epoch's bootstrap unless a live epoch has the
    /// same number.
    fn cleanup(&self, epoch: u32) {
        if !self.live.values().any(|r| r.epoch == epoch) {
            let _ = std::fs::remove_file(bootstrap_path(&self.envoy.config_dir, epoch));
        }
    }

    /// SIGTERM: drain listeners, wait until no connection is left or the
    /// drain time is over, quit Envoy, make sure every epoch is gone.
    async fn stop(
        &mut self,
        admin: &Admin,
        drain: Duration,
        exit_rx: &mut mpsc::Receiver<ExitReport>,
        node: &str,
    ) {
        self.retry_at = None;
        let epoch = self.live.values().map(|r| r.epoch).max().unwrap_or(0);
        if !self.live.is_empty() {
            if let Err(e) = admin.post("/drain_listeners?graceful").await {
                tracing::warn!(error = %e, "drain request failed");
            }
            let deadline = Instant::now() + drain;
            while Instant::now() < deadline {
                match admin.active_connections().await {
                    Ok(0) => break,
                    Ok(open) => tracing::debug!(open, "draining"),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read connections while draining");
                        break;
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            if let Err(e) = admin.post("/quitquitquit").await {
                tracing::warn!(error = %e, "quit request failed");
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            // The newest epoch quits; older ones (still draining after a hot
            // restart) are aborted once it is gone.
            while !self.live.is_empty() {
                let newest = self.live.iter().max_by_key(|(_, r)| r.epoch).map(|(run, _)| *run);
                match tokio::time::timeout_at(deadline, exit_rx.recv()).await {
                    Ok(Some(report)) => {
                        self.live.remove(&report.run);
                        self.cleanup(report.epoch);
                        self.aborted.remove(&report.run);
                        if Some(report.run) == newest {
                            self.abort_all();
                        }
                    }
                    _ => {
                        tracing::warn!("envoy did not quit in time; killing it");
                        self.abort_all();
                    }
                }
            }
        }
        // Wait for aborted processes too (each reports once it is reaped).
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.aborted.is_empty() {
            match tokio::time::timeout_at(deadline, exit_rx.recv()).await {
                Ok(Some(report)) => {
                    self.aborted.remove(&report.run);
                    self.cleanup(report.epoch);
                }
                _ => break,
            }
        }
        let mut event = ProxyEvent::new(
            node,
            EventKind::Stopped,
            epoch,
            self.status.restarts.load(Ordering::Relaxed),
        );
        event.expected = true;
        event.message = Some("drained and stopped on SIGTERM".into());
        self.reporter.send(event);
    }

    /// Kills every live epoch; their exits are then expected.
    fn abort_all(&mut self) {
        for (run, mut other) in std::mem::take(&mut self.live) {
            if let Some(abort) = other.abort.take() {
                let _ = abort.send(());
                self.aborted.insert(run);
            }
        }
    }
}

/// Tells the supervisor once Envoy's admin says ready (gives up after ten
/// minutes, or when the supervisor is gone).
async fn watch_ready(admin: Admin, run: u64, ready_tx: mpsc::Sender<u64>) {
    let deadline = Instant::now() + Duration::from_secs(600);
    while Instant::now() < deadline && !ready_tx.is_closed() {
        if admin.readiness().await == crate::envoy::Readiness::Ready {
            let _ = ready_tx.send(run).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn wait_child(
    mut child: tokio::process::Child,
    tail: crate::envoy::LogTail,
    run: u64,
    epoch: u32,
    abort: oneshot::Receiver<()>,
    exit_tx: mpsc::Sender<ExitReport>,
) {
    let status = tokio::select! {
        status = child.wait() => status,
        _ = abort => {
            let _ = child.start_kill();
            child.wait().await
        }
    };
    let exit = match status {
        Ok(status) => Exit::from_status(status),
        Err(_) => Exit::Code(-1),
    };
    // Let the log reader catch Envoy's last lines.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let tail = tail
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect::<Vec<_>>()
        .join(" | ");
    let _ = exit_tx
        .send(ExitReport {
            run,
            epoch,
            exit,
            tail,
        })
        .await;
}
