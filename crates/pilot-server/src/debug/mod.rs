//! Pages for operators and `pilotctl`, under `/debug/`: every proxy's xDS
//! state and process reports ([`proxy_status`]), the registries' services
//! ([`registryz`]), and the stored objects that fail validation
//! ([`quarantine`]).

pub(crate) mod proxy_status;
pub(crate) mod quarantine;
pub(crate) mod registryz;
