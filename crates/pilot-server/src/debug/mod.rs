//! Pages for operators and `pilotctl`, under `/debug/`: every proxy's xDS
//! state and process reports ([`proxy_status`]), the registries' services
//! ([`registryz`]), the stored objects that fail validation
//! ([`quarantine`]), what a proxy's scope holds and why ([`scope`]), and
//! the certificates the CA issued ([`certificates`]).

pub(crate) mod certificates;
pub(crate) mod proxy_status;
pub(crate) mod quarantine;
pub(crate) mod registryz;
pub(crate) mod scope;
