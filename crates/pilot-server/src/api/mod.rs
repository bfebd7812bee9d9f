//! The REST configuration API, a Kubernetes API as kube-apiserver serves
//! custom resources: discovery ([`discovery`]), the object routes ([`resources`], [`patch`]) with lists and
//! watches ([`list`]), label and field selectors ([`selector`]), the write
//! options ([`options`]), bodies ([`body`]), the `Table` form ([`table`]),
//! the OpenAPI documents kubectl reads ([`kube_openapi`]), the REST
//! OpenAPI document ([`openapi`]), and errors as `Status` bodies
//! ([`ApiError`]).

mod body;
pub(crate) mod discovery;
mod error;
pub(crate) mod kube_openapi;
mod list;
pub(crate) mod openapi;
mod options;
pub(crate) mod patch;
pub(crate) mod resources;
mod selector;
mod table;

pub(crate) use error::ApiError;
