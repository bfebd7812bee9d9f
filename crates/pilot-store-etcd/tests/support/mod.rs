//! Test helpers: a TCP proxy whose connections can be cut, writes that
//! retry through outages, and waiting for a Controller to match etcd.

#![allow(
    dead_code,
    reason = "each test binary uses its own part of the shared support module"
)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pilot_model::{ConfigKey, ConfigStore, DynConfig, StoreError};
use pilot_store::Controller;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A loopback TCP proxy in front of one address. `cut` drops every
/// connection and refuses new ones until `restore`, as a partition would.
pub(crate) struct Proxy {
    pub port: u16,
    state: Arc<Mutex<ProxyState>>,
    acceptor: JoinHandle<()>,
}

#[derive(Default)]
struct ProxyState {
    cut: bool,
    connections: Vec<JoinHandle<()>>,
}

impl Proxy {
    pub(crate) async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(ProxyState::default()));
        let shared = Arc::clone(&state);
        let acceptor = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut state = shared.lock().unwrap();
                if state.cut {
                    continue;
                }
                let target = target.clone();
                state.connections.push(tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                }));
            }
        });
        Proxy {
            port,
            state,
            acceptor,
        }
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn cut(&self) {
        let mut state = self.state.lock().unwrap();
        state.cut = true;
        for connection in state.connections.drain(..) {
            connection.abort();
        }
    }

    pub(crate) fn restore(&self) {
        self.state.lock().unwrap().cut = false;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.acceptor.abort();
    }
}

/// Retries a write through outages until etcd gives a definite answer.
/// A create whose first attempt may have landed counts as acknowledged when
/// the retry finds the object there.
pub(crate) async fn create_acknowledged(store: &dyn ConfigStore, config: DynConfig) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match store.create(config.clone()).await {
            Ok(_) | Err(StoreError::AlreadyExists { .. }) => return true,
            Err(StoreError::Unavailable { .. } | StoreError::Indeterminate { .. })
                if Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(other) => panic!("create failed for good: {other}"),
        }
    }
}

/// Retries a delete through outages; a delete that finds nothing after a
/// lost answer has also happened.
pub(crate) async fn delete_acknowledged(store: &dyn ConfigStore, key: &ConfigKey) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match store.delete(key, None).await {
            Ok(()) | Err(StoreError::NotFound { .. }) => return,
            Err(StoreError::Unavailable { .. } | StoreError::Indeterminate { .. })
                if Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(other) => panic!("delete failed for good: {other}"),
        }
    }
}

/// Reads a kind from etcd, retrying through outages.
pub(crate) async fn etcd_content(store: &dyn ConfigStore, kind: &str) -> BTreeMap<ConfigKey, DynConfig> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match store.list(kind, None).await {
            Ok(items) => return items.iter().map(|c| (c.key(), (**c).clone())).collect(),
            Err(error) if Instant::now() < deadline => {
                eprintln!("list failed, retrying: {error}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("{error}"),
        }
    }
}

/// Waits (up to 60 s) until the Controller's cache of `kind` equals etcd's
/// content, and returns that content.
pub(crate) async fn wait_cache_equals_etcd(
    controller: &Controller,
    store: &dyn ConfigStore,
    kind: &str,
) -> BTreeMap<ConfigKey, DynConfig> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let etcd = etcd_content(store, kind).await;
        let cached: BTreeMap<ConfigKey, DynConfig> = controller
            .list_cached(kind, None)
            .unwrap()
            .iter()
            .map(|c| (c.key(), (**c).clone()))
            .collect();
        if cached == etcd {
            return etcd;
        }
        assert!(
            Instant::now() < deadline,
            "the cache never caught up with etcd: {} cached, {} in etcd",
            cached.len(),
            etcd.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
