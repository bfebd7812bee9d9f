//! The REST configuration API, a Kubernetes API as kube-apiserver serves
//! custom resources: discovery ([`discovery`]), the object routes ([`resources`], [`patch`]) with lists and
//! watches ([`list`]), label and field selectors ([`selector`]), the write
//! options ([`options`]), bodies ([`body`]), the `Table` form ([`table`]),
//! the OpenAPI documents kubectl reads ([`kube_openapi`]), server-side
//! apply ([`apply`]) and field ownership (`managed_fields`), the REST
//! OpenAPI document ([`openapi`]), and errors as `Status` bodies
//! ([`ApiError`]).

pub(crate) mod apply;
mod body;
pub(crate) mod discovery;
mod error;
pub(crate) mod kube_openapi;
mod list;
mod managed_fields;
pub(crate) mod openapi;
mod options;
pub(crate) mod patch;
pub(crate) mod resources;
mod selector;
mod table;

pub(crate) use error::ApiError;
