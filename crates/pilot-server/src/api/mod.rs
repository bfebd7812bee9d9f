//! The REST configuration API, Kubernetes-style: the object routes
//! ([`resources`]) with label selectors ([`selector`]), their OpenAPI v3
//! document ([`openapi`]), and errors as `Status` bodies ([`ApiError`]).

mod error;
pub(crate) mod openapi;
pub(crate) mod resources;
mod selector;

pub(crate) use error::ApiError;
