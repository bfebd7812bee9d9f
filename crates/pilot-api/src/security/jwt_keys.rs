//! The JWT attributes an AuthorizationPolicy `when` condition may read
//! (`request.auth.*`), parsed: what a RequestAuthentication's accepted
//! token says about the request.

/// A `request.auth.*` attribute.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AuthAttribute {
    /// `request.auth.principal`: `<iss>/<sub>` of the token.
    Principal,
    /// `request.auth.audiences`: its `aud` claim (any of its values).
    Audiences,
    /// `request.auth.presenter`: its `azp` claim.
    Presenter,
    /// `request.auth.claims[A][B]…`: the claim at that path (a string,
    /// or any string of a list).
    Claims(Vec<String>),
}

impl AuthAttribute {
    /// Parses a `request.auth.*` key, as Istio's `ValidateAttribute`
    /// accepts it.
    ///
    /// ```
    /// use pilot_api::security::AuthAttribute;
    /// assert_eq!(AuthAttribute::parse("request.auth.principal"), Ok(AuthAttribute::Principal));
    /// assert_eq!(
    ///     AuthAttribute::parse("request.auth.claims[realm][roles]"),
    ///     Ok(AuthAttribute::Claims(vec!["realm".into(), "roles".into()]))
    /// );
    /// assert!(AuthAttribute::parse("request.auth.claims[]").is_err());
    /// assert!(AuthAttribute::parse("request.auth.claims.groups").is_err());
    /// assert!(AuthAttribute::parse("request.auth.issuer").is_err());
    /// ```
    pub fn parse(key: &str) -> Result<Self, String> {
        match key {
            "request.auth.principal" => return Ok(AuthAttribute::Principal),
            "request.auth.audiences" => return Ok(AuthAttribute::Audiences),
            "request.auth.presenter" => return Ok(AuthAttribute::Presenter),
            _ => {}
        }
        let Some(rest) = key.strip_prefix("request.auth.claims") else {
            return Err(format!(
                "unknown attribute {key:?}; the JWT attributes are request.auth.principal, request.auth.audiences, request.auth.presenter and request.auth.claims[NAME]"
            ));
        };
        let bad = || {
            Err(format!(
                "{key:?}: a claim is named in brackets, request.auth.claims[NAME], nested as request.auth.claims[A][B]"
            ))
        };
        let Some(inner) = rest.strip_prefix('[').and_then(|r| r.strip_suffix(']')) else {
            return bad();
        };
        let names: Vec<String> = inner.split("][").map(str::to_string).collect();
        if names.iter().any(|n| n.is_empty() || n.contains(['[', ']'])) {
            return bad();
        }
        Ok(AuthAttribute::Claims(names))
    }
}

/// Checks a `request.auth.*` key.
pub(crate) fn check_key(key: &str) -> Result<(), String> {
    AuthAttribute::parse(key).map(|_| ())
}
