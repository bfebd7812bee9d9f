//! Pages for operators and `pilotctl`, under `/debug/`: every proxy's xDS
//! state and process reports ([`proxy_status`]), the registries' services
//! ([`registryz`]), the stored objects that fail validation
//! ([`quarantine`]), and what a proxy's scope holds and why ([`scope`]).

pub(crate) mod proxy_status;
pub(crate) mod quarantine;
pub(crate) mod registryz;
pub(crate) mod scope;
