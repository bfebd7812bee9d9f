//! Session persistence of HTTPRoute and GRPCRoute rules (experimental):
//! requests of one session go to one backend, by cookie or header, as
//! the Gateway API's `SessionPersistence` says it.

use pilot_model::FieldErrors;
use serde::{Deserialize, Serialize};

use super::checks::{self, at};
#[cfg(feature = "schema")]
use super::shapes;

/// How a rule keeps a session on one backend. Every field is optional:
/// `{}` is a cookie-based session with the implementation's name.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionPersistence {
    /// The name of the session's token: the cookie's name, or the
    /// header's (at most 128 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 128)))]
    pub session_name: Option<String>,
    /// How long a session lasts at most (a Gateway API duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(pattern(shapes::DURATION)))]
    pub absolute_timeout: Option<String>,
    /// Cookie or header ([`SessionPersistence::persistence_type`] gives
    /// the default, `Cookie`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_written: Option<SessionPersistenceType>,
    /// Settings of a cookie-based session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie_config: Option<CookieConfig>,
}

impl SessionPersistence {
    /// How the session is kept, `Cookie` when not written.
    pub fn persistence_type(&self) -> SessionPersistenceType {
        self.type_written.unwrap_or(SessionPersistenceType::Cookie)
    }

    /// `absoluteTimeout` as a duration; none when absent or not a Gateway
    /// API duration.
    pub fn absolute_timeout_duration(&self) -> Option<std::time::Duration> {
        self.absolute_timeout
            .as_deref()
            .and_then(super::patterns::duration_millis)
            .map(std::time::Duration::from_millis)
    }

    /// The cookie's lifetime, `Session` when not written.
    pub fn lifetime_type(&self) -> CookieLifetimeType {
        self.cookie_config
            .as_ref()
            .and_then(|c| c.lifetime_type_written)
            .unwrap_or(CookieLifetimeType::Session)
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

/// Settings of a cookie-based session.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CookieConfig {
    /// Whether the cookie outlives the browser session
    /// ([`SessionPersistence::lifetime_type`] gives the default,
    /// `Session`).
    #[serde(default, rename = "lifetimeType", skip_serializing_if = "Option::is_none")]
    pub lifetime_type_written: Option<CookieLifetimeType>,
}

/// A cookie's lifetime.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CookieLifetimeType {
    /// Ends with the browser session.
    Session,
    /// Lasts until the session's absolute timeout (`Expires`, `Max-Age`).
    Permanent,
}

pub(crate) fn check(errors: &mut FieldErrors, path: &str, persistence: &SessionPersistence) {
    if let Some(name) = &persistence.session_name {
        checks::length(errors, &at(path, "sessionName"), name, 0, 128);
    }
    if let Some(value) = &persistence.absolute_timeout {
        checks::duration(errors, &at(path, "absoluteTimeout"), value);
    }
    // The CRD's two rules, on the defaulted object.
    if persistence.lifetime_type() == CookieLifetimeType::Permanent && persistence.absolute_timeout.is_none()
    {
        errors.push(
            path,
            "AbsoluteTimeout must be specified when cookie lifetimeType is Permanent",
        );
    }
    if persistence.cookie_config.is_some() && persistence.persistence_type() != SessionPersistenceType::Cookie
    {
        errors.push(path, "cookieConfig can only be set with type Cookie");
    }
}
