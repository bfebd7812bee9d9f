//! The shutdown signal: a `watch` channel that turns true once, which every
//! listener, stream and background task waits on.

use tokio::sync::watch;

/// Completes once `shutdown` turns true (or its sender is gone).
pub(crate) async fn closed(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|closing| *closing).await;
}
