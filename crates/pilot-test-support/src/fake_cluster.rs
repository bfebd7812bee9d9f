//! The fake Kubernetes API server where another process can reach it
//! (feature `kube`): served on a loopback port, with a kubeconfig file
//! naming it, for `pilot-discovery --store kubernetes` and `--registry
//! kubernetes`.

use std::ffi::OsStr;
use std::future::Future;
use std::path::{Path, PathBuf};

use pilot_kube_fake::{FakeApiServer, Listening};

/// A [`FakeApiServer`] served on a free 127.0.0.1 port and a kubeconfig
/// file whose current context is it. A `pilot-discovery` gets it through
/// [`env`](Self::env) (`KUBECONFIG`; the kube client reads it from the
/// environment, which a multi-threaded test must not change in its own
/// process). Stops serving when dropped.
pub struct FakeCluster {
    /// The fake; its clients talk to it in process.
    pub fake: FakeApiServer,
    listening: Option<Listening>,
    kubeconfig: PathBuf,
    runtime: Option<tokio::runtime::Runtime>,
    _dir: tempfile::TempDir,
}

impl FakeCluster {
    /// Serves a new fake on its own runtime, for a test that is not async.
    pub fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a Tokio runtime");
        let mut cluster = runtime.block_on(Self::serve(&FakeApiServer::new()));
        cluster.runtime = Some(runtime);
        cluster
    }

    /// Serves `fake` on the current Tokio runtime, for an async test.
    pub async fn serve(fake: &FakeApiServer) -> Self {
        let listening = fake.listen().await.expect("the fake API server listens");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, listening.kubeconfig()).expect("the kubeconfig file");
        FakeCluster {
            fake: fake.clone(),
            listening: Some(listening),
            kubeconfig,
            runtime: None,
            _dir: dir,
        }
    }

    /// The kubeconfig file.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `KUBECONFIG` naming the kubeconfig file, for
    /// [`Discovery::start_with_env`](crate::Discovery::start_with_env).
    pub fn env(&self) -> [(&'static str, &OsStr); 1] {
        [("KUBECONFIG", self.kubeconfig.as_os_str())]
    }

    /// A [`kube::Client`] of the fake, in process.
    pub fn client(&self) -> kube::Client {
        let _entered = self.runtime.as_ref().map(|r| r.enter());
        self.fake.client()
    }

    /// Runs `future` to completion on the cluster's runtime (one made by
    /// [`start`](Self::start)).
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime
            .as_ref()
            .expect("block_on needs a FakeCluster::start cluster, with a runtime of its own")
            .block_on(future)
    }
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        // Stop serving while the runtime that serves it still runs.
        drop(self.listening.take());
    }
}
