//! The REST configuration API, a Kubernetes API as kube-apiserver serves
//! custom resources: discovery ([`discovery`]), the object routes
//! ([`resources`], [`patch`]) with lists and watches ([`list`]), label and
//! field selectors ([`selector`]), the write options ([`options`]) and
//! delete options ([`delete_options`]), bodies ([`body`]) and their strict
//! decoding ([`strict`]), writes that change nothing ([`unchanged`]), the
//! `Table` form ([`table`]), the OpenAPI documents kubectl reads
//! ([`kube_openapi`]), server-side apply ([`apply`]) and field ownership
//! (`managed_fields`), the REST OpenAPI document ([`openapi`]), and errors
//! as `Status` bodies ([`ApiError`]).

pub(crate) mod apply;
mod body;
mod delete_options;
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
mod strict;
mod table;
mod unchanged;

pub(crate) use error::ApiError;
