//! What reached the proxies, and the replicas that serve them: the
//! agents' reports of Envoy's process life ([`proxy_events`]), this
//! replica among the replicas of its store ([`replicas`]), and each
//! routing object's distribution status written back to the store
//! ([`status_writer`]).

pub(crate) mod proxy_events;
pub(crate) mod replicas;
pub mod status_writer;
