//! Bearer-token authentication: tokens from a file, each read-only or
//! read-write. With tokens configured, every endpoint but `/healthz` and
//! `/readyz` needs a valid token, and writes need a read-write one.

use std::path::Path;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::status::ApiError;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// GET only.
    ReadOnly,
    /// Everything.
    ReadWrite,
}

/// The accepted tokens.
#[derive(Debug, Clone, Default)]
pub struct Tokens(Vec<(String, Access, String)>);

impl Tokens {
    /// Reads a token file: one token per line, `TOKEN ro|rw [NAME]`; blank
    /// lines and lines starting with `#` are skipped.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// [`Tokens::load`] on text; `source` names it in errors.
    pub fn parse(source: &str, text: &str) -> Result<Self, String> {
        let mut tokens = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.split_whitespace();
            let token = fields.next().unwrap_or_default();
            let access = match fields.next() {
                Some("ro") => Access::ReadOnly,
                Some("rw") => Access::ReadWrite,
                other => {
                    return Err(format!(
                        "{source}:{}: expected `TOKEN ro|rw [NAME]`, found access {:?}",
                        number + 1,
                        other.unwrap_or("")
                    ));
                }
            };
            if token.len() < 16 {
                return Err(format!(
                    "{source}:{}: tokens must be at least 16 characters long",
                    number + 1
                ));
            }
            let name = fields.next().unwrap_or("unnamed").to_string();
            tokens.push((token.to_string(), access, name));
        }
        if tokens.is_empty() {
            return Err(format!(
                "{source}: no tokens; add lines of the form `TOKEN ro|rw [NAME]`"
            ));
        }
        Ok(Tokens(tokens))
    }

    /// The access of `token`, comparing every token in constant time.
    pub fn check(&self, token: &str) -> Option<(Access, &str)> {
        let mut found = None;
        for (known, access, name) in &self.0 {
            if constant_time_eq(known.as_bytes(), token.as_bytes()) {
                found = Some((*access, name.as_str()));
            }
        }
        found
    }
}

/// Middleware: refuses requests without a valid token (401), and writes
/// with a read-only one (403).
pub async fn require(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(tokens) = &state.tokens else {
        return next.run(request).await;
    };
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let unauthorized = |message: &str| {
        let mut response = ApiError::new(StatusCode::UNAUTHORIZED, "Unauthorized", message).into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        response
    };
    let Some(token) = token else {
        return unauthorized(
            "this server requires a bearer token (pilotctl --token, or token: in its config file)",
        );
    };
    match tokens.check(token) {
        None => unauthorized("the bearer token is not valid"),
        Some((Access::ReadOnly, name)) if !matches!(*request.method(), Method::GET | Method::HEAD) => {
            ApiError::new(
                StatusCode::FORBIDDEN,
                "Forbidden",
                format!("token {name:?} is read-only; writes need a read-write token"),
            )
            .into_response()
        }
        Some(_) => next.run(request).await,
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut difference = a.len() ^ b.len();
    for (i, byte) in a.iter().enumerate() {
        difference |= usize::from(byte ^ b.get(i).copied().unwrap_or(0));
    }
    difference == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_lines_and_their_errors() {
        let tokens = Tokens::parse(
            "t",
            "# comment\n0123456789abcdef-rw rw admin\n\n0123456789abcdef-ro ro viewer\n",
        )
        .unwrap();
        assert_eq!(
            tokens.check("0123456789abcdef-rw"),
            Some((Access::ReadWrite, "admin"))
        );
        assert_eq!(
            tokens.check("0123456789abcdef-ro"),
            Some((Access::ReadOnly, "viewer"))
        );
        assert_eq!(tokens.check("0123456789abcdef-r"), None);
        assert_eq!(
            Tokens::parse("t", "0123456789abcdef admin\n").unwrap_err(),
            "t:1: expected `TOKEN ro|rw [NAME]`, found access \"admin\""
        );
        assert!(
            Tokens::parse("t", "short rw\n")
                .unwrap_err()
                .contains("16 characters")
        );
    }
}
