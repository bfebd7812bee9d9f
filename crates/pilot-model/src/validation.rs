//! Field-level validation: error collection with field paths, and the
//! DNS-1123 and label syntax checks shared by every kind.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One problem with one field of an object.
///
/// `path` uses the JSON field names of the document form, dotted, with list
/// indices in brackets: `spec.route[1].weight`, `metadata.name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    /// Where in the object the problem is, e.g. `spec.httpFault.abort.percent`.
    pub path: String,
    /// What is wrong, phrased so the user can fix the input.
    pub message: String,
}

impl FieldError {
    /// A field error at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Collects every field error of one object, so a user sees all mistakes at
/// once rather than one per attempt.
///
/// ```
/// use pilot_model::FieldErrors;
/// let mut errors = FieldErrors::new();
/// errors.push("spec.precedence", "must be >= 0");
/// errors.check_dns1123_label("metadata.name", "Bad_Name");
/// assert_eq!(errors.len(), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldErrors {
    errors: Vec<FieldError>,
    warnings: Vec<FieldError>,
}

impl FieldErrors {
    /// No errors yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an error at `path`.
    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FieldError::new(path, message));
    }

    /// Records a warning at `path`: the object is valid, but something
    /// written in it will not happen (a field the data plane ignores);
    /// clients show it (the REST API's `Warning` headers, the admission
    /// webhook's `warnings`, pilotctl) and the write goes through.
    ///
    /// ```
    /// use pilot_model::FieldErrors;
    /// let mut errors = FieldErrors::new();
    /// errors.warn("spec.http[0].websocketUpgrade", "ignored");
    /// assert!(errors.is_empty());
    /// assert_eq!(errors.warnings()[0].to_string(), "spec.http[0].websocketUpgrade: ignored");
    /// ```
    pub fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(FieldError::new(path, message));
    }

    /// The warnings recorded, in order.
    pub fn warnings(&self) -> &[FieldError] {
        &self.warnings
    }

    /// Gives up the errors and the warnings.
    pub fn into_parts(self) -> (Vec<FieldError>, Vec<FieldError>) {
        (self.errors, self.warnings)
    }

    /// True when no error was recorded (warnings do not count).
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// How many errors were recorded.
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// The recorded errors, in the order they were found.
    pub fn iter(&self) -> impl Iterator<Item = &FieldError> {
        self.errors.iter()
    }

    /// Gives up the collected errors.
    pub fn into_vec(self) -> Vec<FieldError> {
        self.errors
    }

    /// Records an error unless `value` is a DNS-1123 label (RFC 1123: at most
    /// 63 lowercase alphanumerics or `-`, starting and ending alphanumeric).
    pub fn check_dns1123_label(&mut self, path: &str, value: &str) {
        if let Err(message) = dns1123_label(value) {
            self.push(path, message);
        }
    }

    /// Records an error unless `value` is a DNS-1123 subdomain (at most 253
    /// characters of dot-separated DNS-1123 labels).
    pub fn check_dns1123_subdomain(&mut self, path: &str, value: &str) {
        if let Err(message) = dns1123_subdomain(value) {
            self.push(path, message);
        }
    }

    /// Records an error for every key or value in `labels` that is not valid
    /// Kubernetes label syntax; `path` is the map's path (e.g.
    /// `metadata.labels`).
    pub fn check_labels<'a>(
        &mut self,
        path: &str,
        labels: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) {
        for (key, value) in labels {
            let mut at = path.to_string();
            crate::push_key(&mut at, key);
            if let Err(message) = label_key(key) {
                self.push(at.clone(), message);
            }
            if let Err(message) = label_value(value) {
                self.push(at, message);
            }
        }
    }
}

impl IntoIterator for FieldErrors {
    type Item = FieldError;
    type IntoIter = std::vec::IntoIter<FieldError>;
    fn into_iter(self) -> Self::IntoIter {
        self.errors.into_iter()
    }
}

impl Extend<FieldError> for FieldErrors {
    fn extend<T: IntoIterator<Item = FieldError>>(&mut self, iter: T) {
        self.errors.extend(iter);
    }
}

const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;
const LABEL_NAME_MAX: usize = 63;

/// Checks that `value` is a DNS-1123 label; the error says why not.
///
/// ```
/// assert!(pilot_model::dns1123_label("reviews-v2").is_ok());
/// assert!(pilot_model::dns1123_label("-reviews").is_err());
/// ```
pub fn dns1123_label(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    if value.len() > DNS1123_LABEL_MAX {
        return Err(format!(
            "{value:?} is {} characters long; a DNS-1123 label has at most {DNS1123_LABEL_MAX}",
            value.len()
        ));
    }
    if !label_shape(value, |c| c.is_ascii_lowercase() || c.is_ascii_digit(), b"-") {
        return Err(format!(
            "{value:?} is not a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// Checks that `value` is a DNS-1123 subdomain; the error says why not.
///
/// ```
/// assert!(pilot_model::dns1123_subdomain("reviews.default.svc").is_ok());
/// assert!(pilot_model::dns1123_subdomain("reviews..svc").is_err());
/// ```
pub fn dns1123_subdomain(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        return Err(format!(
            "{value:?} is {} characters long; a DNS-1123 subdomain has at most {DNS1123_SUBDOMAIN_MAX}",
            value.len()
        ));
    }
    if !value
        .split('.')
        .all(|part| label_shape(part, |c| c.is_ascii_lowercase() || c.is_ascii_digit(), b"-"))
    {
        return Err(format!(
            "{value:?} is not a DNS-1123 subdomain: dot-separated parts of lowercase letters, digits and '-', each starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// Checks a Kubernetes-style label key: an optional DNS-1123 subdomain prefix
/// and `/`, then a name of at most 63 alphanumerics, `-`, `_` or `.` that
/// starts and ends alphanumeric.
pub fn label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        dns1123_subdomain(prefix).map_err(|e| format!("label key {key:?} has a bad prefix: {e}"))?;
    }
    if name.is_empty()
        || name.len() > LABEL_NAME_MAX
        || !label_shape(name, |c| c.is_ascii_alphanumeric(), b"-_.")
    {
        return Err(format!(
            "label key {key:?} is invalid: a name of at most {LABEL_NAME_MAX} letters, digits, '-', '_' or '.', starting and ending with a letter or digit, optionally behind a DNS subdomain prefix and '/'"
        ));
    }
    Ok(())
}

/// Checks a Kubernetes-style label value: empty, or at most 63 alphanumerics,
/// `-`, `_` or `.` starting and ending alphanumeric.
pub fn label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    if value.len() > LABEL_NAME_MAX || !label_shape(value, |c| c.is_ascii_alphanumeric(), b"-_.") {
        return Err(format!(
            "label value {value:?} is invalid: at most {LABEL_NAME_MAX} letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// True when `s` is non-empty, starts and ends with an `edge` character and
/// holds only `edge` characters and bytes from `inner`.
fn label_shape(s: &str, edge: impl Fn(char) -> bool, inner: &[u8]) -> bool {
    let (Some(first), Some(last)) = (s.chars().next(), s.chars().last()) else {
        return false;
    };
    edge(first)
        && edge(last)
        && s.chars()
            .all(|c| edge(c) || (c.is_ascii() && inner.contains(&(c as u8))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels() {
        for ok in ["a", "reviews", "reviews-v2", "0abc", &"a".repeat(63)] {
            assert!(dns1123_label(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(dns1123_label(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dns_subdomains() {
        for ok in ["a", "a.b", "reviews.default.svc.cluster.local"] {
            assert!(dns1123_subdomain(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".a", "a.", "a..b", "A.b", &"a.".repeat(127)] {
            assert!(dns1123_subdomain(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn labels() {
        assert!(label_key("version").is_ok());
        assert!(label_key("app.kubernetes.io/name").is_ok());
        assert!(label_key("Version_1.x").is_ok());
        assert!(label_key("").is_err());
        assert!(label_key("/name").is_err());
        assert!(label_key("a b").is_err());
        assert!(label_value("").is_ok());
        assert!(label_value("v2").is_ok());
        assert!(label_value("v2-").is_err());
        let mut errors = FieldErrors::new();
        let labels: std::collections::BTreeMap<String, String> = [
            ("ok".to_string(), "v1".to_string()),
            ("bad key".to_string(), "-".to_string()),
        ]
        .into();
        errors.check_labels("metadata.labels", &labels);
        assert_eq!(errors.len(), 2);
        assert!(errors.iter().all(|e| e.path == "metadata.labels[bad key]"));
        let mut errors = FieldErrors::new();
        let labels: std::collections::BTreeMap<String, String> =
            [("ver".to_string(), "-".to_string())].into();
        errors.check_labels("spec.labels", &labels);
        assert_eq!(errors.iter().next().unwrap().path, "spec.labels.ver");
    }
}
