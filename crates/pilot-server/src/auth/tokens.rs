//! Bearer tokens: the `--token-file`, each token read-only, read-write or
//! xDS-only, and how a request's `Authorization` header names one. The
//! REST listener checks them in [`super::rest`], ADS streams in
//! [`super::xds`].

use std::path::Path;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// GET only.
    ReadOnly,
    /// Everything.
    ReadWrite,
    /// ADS streams only, optionally bound to a namespace
    /// (`namespace=NS`): its proxies may only claim node ids there.
    Xds,
}

/// One accepted token.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    secret: String,
    /// What it may do.
    pub access: Access,
    /// Its name, for logs and errors.
    pub name: String,
    /// For [`Access::Xds`] tokens: the namespace its proxies must be in.
    pub namespace: Option<String>,
    /// For [`Access::Xds`] tokens with a namespace: the service account
    /// (node metadata `SERVICE_ACCOUNT`) its proxies must have.
    pub service_account: Option<String>,
    /// For [`Access::Xds`] tokens with `node=NODE`: its holder is the node
    /// proxy (ztunnel) of that node.
    pub node: Option<String>,
}

impl Token {
    /// The node ids this token's holder may claim.
    pub(crate) fn scope(&self) -> pilot_ads::NodeScope {
        if let (Access::Xds, Some(node)) = (self.access, &self.node) {
            return pilot_ads::NodeScope::Node(node.clone());
        }
        match (self.access, &self.namespace, &self.service_account) {
            (Access::Xds, Some(namespace), Some(account)) => pilot_ads::NodeScope::ServiceAccount {
                namespace: namespace.clone(),
                account: account.clone(),
            },
            (Access::Xds, Some(namespace), None) => pilot_ads::NodeScope::Namespace(namespace.clone()),
            _ => pilot_ads::NodeScope::Any,
        }
    }

    /// The identity of the token's holder itself, `(namespace, service
    /// account)`, when it names both.
    pub(crate) fn identity(&self) -> Option<(String, String)> {
        match (self.access, &self.namespace, &self.service_account) {
            (Access::Xds, Some(namespace), Some(account)) => Some((namespace.clone(), account.clone())),
            _ => None,
        }
    }
}

/// The accepted tokens.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tokens(Vec<Token>);

impl Tokens {
    /// Reads a token file: one token per line, `TOKEN ro|rw [NAME]` or
    /// `TOKEN xds [NAME] [namespace=NS [serviceAccount=SA]] [node=NODE]`
    /// (`node=`: the node proxy, ztunnel, of that Kubernetes node); blank
    /// lines and lines starting with `#` are skipped.
    pub(crate) fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// [`Tokens::load`] on text; `source` names it in errors.
    pub(crate) fn parse(source: &str, text: &str) -> Result<Self, String> {
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
                Some("xds") => Access::Xds,
                other => {
                    return Err(format!(
                        "{source}:{}: expected `TOKEN ro|rw|xds [NAME]`, found access {:?}",
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
            let mut namespace = None;
            let mut service_account = None;
            let mut node = None;
            for field in fields {
                if access == Access::Xds
                    && let Some(value) = field.strip_prefix("node=")
                {
                    if value.is_empty() {
                        return Err(format!("{source}:{}: `node=` needs a node name", number + 1));
                    }
                    node = Some(value.to_string());
                    continue;
                }
                if access == Access::Xds
                    && let Some(account) = field.strip_prefix("serviceAccount=")
                {
                    if account.is_empty() {
                        return Err(format!(
                            "{source}:{}: `serviceAccount=` needs a service account",
                            number + 1
                        ));
                    }
                    service_account = Some(account.to_string());
                    continue;
                }
                match field.strip_prefix("namespace=") {
                    Some(ns) if access == Access::Xds && !ns.is_empty() => namespace = Some(ns.to_string()),
                    Some(_) if access == Access::Xds => {
                        return Err(format!("{source}:{}: `namespace=` needs a namespace", number + 1));
                    }
                    _ => {
                        return Err(format!(
                            "{source}:{}: unexpected {field:?}; only xds tokens take `namespace=NS`, \
                             `serviceAccount=SA` and `node=NODE`",
                            number + 1
                        ));
                    }
                }
            }
            // They become the identity of the certificates the token's
            // holder gets: the SPIFFE path rules apply.
            for (field, value) in [("namespace", &namespace), ("serviceAccount", &service_account)] {
                if let Some(value) = value {
                    pilot_ca::SpiffeId::check_path_segment(field, value)
                        .map_err(|e| format!("{source}:{}: `{field}=`: {e}", number + 1))?;
                }
            }
            if service_account.is_some() && namespace.is_none() {
                return Err(format!(
                    "{source}:{}: `serviceAccount=SA` needs `namespace=NS` too",
                    number + 1
                ));
            }
            tokens.push(Token {
                secret: token.to_string(),
                access,
                name,
                namespace,
                service_account,
                node,
            });
        }
        if tokens.is_empty() {
            return Err(format!(
                "{source}: no tokens; add lines of the form `TOKEN ro|rw [NAME]`"
            ));
        }
        Ok(Tokens(tokens))
    }

    /// The access of `token`, comparing every token in constant time.
    #[cfg(test)]
    pub(crate) fn check(&self, token: &str) -> Option<(Access, &str)> {
        self.find(token).map(|t| (t.access, t.name.as_str()))
    }

    /// The entry of `token`, comparing every token in constant time.
    pub(crate) fn find(&self, token: &str) -> Option<&Token> {
        let mut found = None;
        for known in &self.0 {
            if constant_time_eq(known.secret.as_bytes(), token.as_bytes()) {
                found = Some(known);
            }
        }
        found
    }
}

/// The token of an `Authorization: Bearer TOKEN` value; the scheme is case
/// insensitive (RFC 7235).
pub(crate) fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
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
            "t:1: expected `TOKEN ro|rw|xds [NAME]`, found access \"admin\""
        );
        let bound = Tokens::parse(
            "t",
            "0123456789abcdef-sa xds reviews namespace=default serviceAccount=bookinfo-reviews\n",
        )
        .unwrap();
        assert_eq!(
            bound.find("0123456789abcdef-sa").unwrap().scope(),
            pilot_ads::NodeScope::ServiceAccount {
                namespace: "default".into(),
                account: "bookinfo-reviews".into()
            }
        );
        assert!(
            Tokens::parse("t", "0123456789abcdef-sa xds reviews serviceAccount=x\n")
                .unwrap_err()
                .contains("needs `namespace=NS` too")
        );
        let xds = Tokens::parse("t", "0123456789abcdef-xds xds reviews namespace=default\n").unwrap();
        let token = xds.find("0123456789abcdef-xds").unwrap();
        assert_eq!(
            (token.access, token.namespace.as_deref()),
            (Access::Xds, Some("default"))
        );
        assert!(
            Tokens::parse("t", "0123456789abcdef-rw rw admin namespace=default\n")
                .unwrap_err()
                .contains("only xds tokens")
        );
        for (line, expected) in [
            (
                "0123456789abcdef-sa xds r namespace=default serviceAccount=..",
                "t:1: `serviceAccount=`: \"..\" breaks the SPIFFE ID rules: the serviceAccount is \"..\", a relative path segment",
            ),
            (
                "0123456789abcdef-sa xds r namespace=a;b,c=d\"e",
                "t:1: `namespace=`: \"a;b,c=d\\\"e\" breaks the SPIFFE ID rules: the namespace a;b,c=d\"e has ';'",
            ),
        ] {
            let error = Tokens::parse("t", line).unwrap_err();
            assert!(error.starts_with(expected), "{error}");
        }
        let ztunnel = Tokens::parse(
            "t",
            "0123456789abcdef-zt xds ztunnel-1 namespace=istio-system serviceAccount=ztunnel node=node-1\n",
        )
        .unwrap();
        let token = ztunnel.find("0123456789abcdef-zt").unwrap();
        assert_eq!(token.scope(), pilot_ads::NodeScope::Node("node-1".into()));
        assert_eq!(token.identity(), Some(("istio-system".into(), "ztunnel".into())));
        assert!(
            Tokens::parse("t", "0123456789abcdef-zt xds z node=\n")
                .unwrap_err()
                .contains("`node=` needs a node name")
        );
        assert!(
            Tokens::parse("t", "0123456789abcdef-zt ro z node=n\n")
                .unwrap_err()
                .contains("only xds tokens")
        );
        assert_eq!(bearer("bearer abc"), Some("abc"));
        assert_eq!(bearer("BEARER  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert!(
            Tokens::parse("t", "short rw\n")
                .unwrap_err()
                .contains("16 characters")
        );
    }
}
