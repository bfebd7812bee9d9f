//! The configuration store and the service registries the flags choose
//! ([`open`]), and the one registry this crate implements: a file of
//! services and instances, followed as it changes ([`services_file`]).

mod open;
pub mod services_file;

pub(crate) use open::{kube_client, open_registries, open_store};
