//! The configuration store and the service registries the flags choose
//! ([`open`]), and the one registry this crate implements: a file of
//! services and instances, followed as it changes ([`services_file`]);
//! and the credential source of `--credentials-dir` ([`credentials_dir`]).

pub(crate) mod credentials_dir;
mod in_cluster;
mod open;
pub mod services_file;

pub(crate) use in_cluster::{kube_client, kube_client_without_retries};
pub(crate) use open::{open_registries, open_store};
