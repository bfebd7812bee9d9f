//! The CORS filter of HTTPRoute: the origins, methods and headers a
//! browser may use across origins, with the CRD's shapes of each and its
//! rule that `*` stands alone.

use pilot_model::FieldErrors;
use serde::{Deserialize, Serialize};

use super::checks::{self, at, index};
use super::filters::HttpMethod;
use super::patterns;
#[cfg(feature = "schema")]
use super::shapes;

/// Cross-origin resource sharing.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cors {
    /// Origins allowed (`*`, or scheme, host and optional port; at most
    /// 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "set"), inner(length(min = 1, max = 253), pattern(r#"(^\*$)|(^(http(s)?):\/\/(((\*\.)?([a-zA-Z0-9\-]+\.)*[a-zA-Z0-9-]+|\*)(:([0-9]{1,5}))?)$)"#))))]
    pub allow_origins: Option<Vec<String>>,
    /// Whether credentials are allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_credentials: Option<bool>,
    /// Methods allowed (at most 9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 9), extend("x-kubernetes-list-type" = "set")))]
    pub allow_methods: Option<Vec<CorsMethod>>,
    /// Request headers allowed (at most 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "set"), inner(length(min = 1, max = 256), pattern(shapes::HEADER_NAME))))]
    pub allow_headers: Option<Vec<String>>,
    /// Response headers exposed (at most 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "set"), inner(length(min = 1, max = 256), pattern(shapes::HEADER_NAME))))]
    pub expose_headers: Option<Vec<String>>,
    /// Seconds a preflight may be cached ([`Cors::max_age`] gives the
    /// default, 5).
    #[serde(default, rename = "maxAge", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_age_written: Option<i32>,
}

impl Cors {
    /// The preflight cache time in seconds, 5 when not written.
    pub fn max_age(&self) -> i32 {
        self.max_age_written.unwrap_or(5)
    }
}

/// A method CORS allows: one method or every one (`*`).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CorsMethod {
    /// One method.
    Method(HttpMethod),
    /// Every method.
    Any(AnyMethod),
}

/// `*`: every method.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AnyMethod {
    /// `*`.
    #[serde(rename = "*")]
    Any,
}

pub(crate) fn check(errors: &mut FieldErrors, path: &str, cors: &Cors) {
    let origins = at(path, "allowOrigins");
    checks::items(errors, &origins, checks::list(&cors.allow_origins).len(), 0, 64);
    checks::unique_items(errors, &origins, checks::list(&cors.allow_origins));
    for (i, origin) in checks::list(&cors.allow_origins).iter().enumerate() {
        let path = index(&origins, i);
        checks::length(errors, &path, origin, 1, 253);
        if !origin.is_empty() && !patterns::is_cors_origin(origin) {
            errors.push(
                path,
                format!("{origin:?} is not an origin: \"*\", or http:// or https:// and a host with an optional port, nothing after"),
            );
        }
    }
    star_alone(
        errors,
        &origins,
        checks::list(&cors.allow_origins).iter().any(|o| o == "*"),
        checks::list(&cors.allow_origins).len(),
        "origins",
    );
    let methods = at(path, "allowMethods");
    checks::items(errors, &methods, checks::list(&cors.allow_methods).len(), 0, 9);
    checks::unique_items(errors, &methods, checks::list(&cors.allow_methods));
    let any_method = checks::list(&cors.allow_methods)
        .iter()
        .any(|m| matches!(m, CorsMethod::Any(_)));
    star_alone(
        errors,
        &methods,
        any_method,
        checks::list(&cors.allow_methods).len(),
        "methods",
    );
    for (field, headers) in [
        ("allowHeaders", checks::list(&cors.allow_headers)),
        ("exposeHeaders", checks::list(&cors.expose_headers)),
    ] {
        let path = at(path, field);
        checks::items(errors, &path, headers.len(), 0, 64);
        checks::unique_items(errors, &path, headers);
        for (i, header) in headers.iter().enumerate() {
            checks::header_name(errors, &index(&path, i), header);
        }
    }
    star_alone(
        errors,
        &at(path, "allowHeaders"),
        checks::list(&cors.allow_headers).iter().any(|h| h == "*"),
        checks::list(&cors.allow_headers).len(),
        "headers",
    );
    if let Some(age) = cors.max_age_written {
        checks::range(errors, &at(path, "maxAge"), age.into(), 1, i64::MAX);
    }
}

fn star_alone(errors: &mut FieldErrors, path: &str, star: bool, len: usize, what: &str) {
    if star && len > 1 {
        errors.push(
            path,
            format!("\"*\" allows every one of the {what}: it must be the list's only entry"),
        );
    }
}
