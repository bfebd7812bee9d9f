//! How to reach etcd.

use std::path::PathBuf;
use std::time::Duration;

use pilot_model::StoreError;

use crate::error::{Endpoints, EtcdError};

/// Connection settings for [`EtcdConfigStore`](crate::EtcdConfigStore) and
/// [`EtcdServiceRegistry`](crate::EtcdServiceRegistry).
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// Client URLs of the members, e.g. `http://127.0.0.1:2379`; requests
    /// are balanced over them and fail over between them.
    pub endpoints: Vec<String>,
    /// The key prefix everything lives under (default `/pilot/config`).
    pub prefix: String,
    /// User name and password, when etcd has authentication on.
    pub user: Option<(String, String)>,
    /// TLS: the CA that signed the members' certificates.
    pub ca_file: Option<PathBuf>,
    /// TLS client certificate and key (PEM), for client-certificate auth.
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// How long to wait for a connection.
    pub connect_timeout: Duration,
    /// How long one request may take.
    pub request_timeout: Duration,
    /// Objects per page when listing a kind.
    pub page_size: i64,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            prefix: "/pilot/config".into(),
            user: None,
            ca_file: None,
            client_cert: None,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            page_size: 500,
        }
    }
}

impl EtcdOptions {
    /// Options for these endpoints, with defaults for the rest.
    pub fn new<S: Into<String>>(endpoints: impl IntoIterator<Item = S>) -> Self {
        EtcdOptions {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    /// The same options under another key prefix.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Connects a client with these options.
    pub async fn connect(&self) -> Result<etcd_client::Client, StoreError> {
        let mut options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(self.connect_timeout)
            .with_timeout(self.request_timeout)
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5));
        if let Some((user, password)) = &self.user {
            options = options.with_user(user.clone(), password.clone());
        }
        if self.ca_file.is_some() || self.client_cert.is_some() {
            let mut tls = etcd_client::TlsOptions::new();
            if let Some(ca) = &self.ca_file {
                let pem = read(ca)?;
                tls = tls.ca_certificate(etcd_client::Certificate::from_pem(pem));
            }
            if let Some((cert, key)) = &self.client_cert {
                tls = tls.identity(etcd_client::Identity::from_pem(read(cert)?, read(key)?));
            }
            options = options.with_tls(tls);
        }
        etcd_client::Client::connect(&self.endpoints, Some(options))
            .await
            .map_err(|e| EtcdError::from_client(&Endpoints::new(&self.endpoints), "connect", e).into())
    }
}

fn read(path: &PathBuf) -> Result<Vec<u8>, EtcdError> {
    std::fs::read(path).map_err(|source| EtcdError::File {
        path: path.clone(),
        source,
    })
}
