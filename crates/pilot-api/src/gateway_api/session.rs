//! Session persistence of HTTPRoute and GRPCRoute rules (experimental):
//! requests of one session go to one backend, by cookie or header.

use pilot_model::FieldErrors;
use serde::{Deserialize, Serialize};

use super::checks::{self, at};

/// How a rule keeps a session on one backend.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionPersistence {
    /// Cookie or header ([`SessionPersistence::persistence_type`] gives
    /// the default, `Cookie`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_written: Option<SessionPersistenceType>,
    /// How long a session lasts at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absolute_timeout: Option<String>,
    /// The session cookie, for type `Cookie`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie: Option<SessionCookie>,
    /// The session header, for type `Header`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<SessionHeader>,
}

impl SessionPersistence {
    /// How the session is kept, `Cookie` when not written.
    pub fn persistence_type(&self) -> SessionPersistenceType {
        self.type_written.unwrap_or(SessionPersistenceType::Cookie)
    }
}

/// How a session is recognised.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SessionPersistenceType {
    /// By a cookie.
    Cookie,
    /// By a header.
    Header,
}

/// A session cookie.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionCookie {
    /// The cookie's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The cookie's path ([`SessionCookie::path`] gives the default, `/`).
    #[serde(default, rename = "path", skip_serializing_if = "Option::is_none")]
    pub path_written: Option<String>,
    /// Whether the cookie outlives the browser session
    /// ([`SessionCookie::lifetime_type`] gives the default, `Session`).
    #[serde(default, rename = "lifetimeType", skip_serializing_if = "Option::is_none")]
    pub lifetime_type_written: Option<CookieLifetimeType>,
}

impl SessionCookie {
    /// The cookie's path, `/` when not written.
    pub fn path(&self) -> &str {
        self.path_written.as_deref().unwrap_or("/")
    }

    /// The cookie's lifetime, `Session` when not written.
    pub fn lifetime_type(&self) -> CookieLifetimeType {
        self.lifetime_type_written.unwrap_or(CookieLifetimeType::Session)
    }
}

/// A session header.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionHeader {
    /// The header's name (required).
    #[serde(default)]
    pub name: String,
}

/// A cookie's lifetime.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CookieLifetimeType {
    /// Ends with the browser session.
    Session,
    /// Lasts until the session's absolute timeout.
    Permanent,
}

pub(crate) fn check(errors: &mut FieldErrors, path: &str, persistence: &SessionPersistence) {
    if let Some(value) = &persistence.absolute_timeout {
        checks::duration(errors, &at(path, "absoluteTimeout"), value);
    }
    if let Some(cookie) = &persistence.cookie {
        let path = at(path, "cookie");
        if let Some(name) = &cookie.name {
            checks::header_name(errors, &at(&path, "name"), name);
        }
        if let Some(cookie_path) = &cookie.path_written {
            checks::length(errors, &at(&path, "path"), cookie_path, 0, 1024);
        }
    }
    if let Some(header) = &persistence.header {
        checks::header_name(errors, &at(&at(path, "header"), "name"), &header.name);
    }
    let permanent = persistence.cookie.as_ref().and_then(|c| c.lifetime_type_written)
        == Some(CookieLifetimeType::Permanent);
    if permanent && persistence.absolute_timeout.is_none() {
        errors.push(path, "a Permanent cookie needs an absoluteTimeout");
    }
    let kind = persistence.persistence_type();
    match (kind, persistence.cookie.is_some(), persistence.header.is_some()) {
        (SessionPersistenceType::Cookie, false, _) => errors.push(path, "type Cookie needs cookie"),
        (SessionPersistenceType::Header, _, false) => errors.push(path, "type Header needs header"),
        _ => {}
    }
    if kind != SessionPersistenceType::Cookie && persistence.cookie.is_some() {
        errors.push(path, "cookie is only for type Cookie");
    }
    if kind != SessionPersistenceType::Header && persistence.header.is_some() {
        errors.push(path, "header is only for type Header");
    }
}
