//! An HTTP request through a router and what the Gateway API's
//! conformance expects of it, checked against what an
//! [`echo_upstream`](super::upstreams::echo_upstream) says it saw.

use serde_json::Value;

use super::conformance::{HOST, V1};

/// A request of a filter's case and what the conformance expects of it:
/// the status, the backend that answers, what it saw, the answer's
/// headers and a redirect's location.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    method: &'static str,
    host: &'static str,
    /// Whether the host is sent with the listener's port, as a client of
    /// a port other than its scheme's writes it.
    host_port: bool,
    path: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    /// Headers the backend is asked to answer with.
    backend_sends: Vec<(&'static str, &'static str)>,
    status: u16,
    /// The backend that answers ("" when none does).
    backend: &'static str,
    /// The path and host the backend saw.
    seen_path: &'static str,
    seen_host: &'static str,
    /// Headers the backend saw, and headers it must not have seen.
    seen: Vec<(&'static str, &'static str)>,
    unseen: Vec<&'static str>,
    /// Headers of the answer, and headers it must not have.
    answer: Vec<(&'static str, &'static str)>,
    unanswered: Vec<&'static str>,
    /// A redirect's `Location`: scheme, host, port and path.
    location: Option<(&'static str, &'static str, At, &'static str)>,
}

/// The port of a redirect's `Location`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum At {
    /// The scheme's own: written or not.
    Scheme,
    /// The port of the listener the request came to (the one it serves
    /// on, where the test moved it; written unless the scheme's own).
    Listener,
    Port(u16),
}

/// One request sent and its answer: method, Host, path and headers.
type Exchange<'a> = dyn Fn(&str, &str, &str, &[(&str, &str)]) -> super::Answer + 'a;

/// `GET path` with host `example.com`, expected to reach
/// infra-backend-v1 as sent.
pub(crate) fn case(path: &'static str) -> Case {
    Case {
        method: "GET",
        host: HOST,
        host_port: false,
        path,
        headers: Vec::new(),
        backend_sends: Vec::new(),
        status: 200,
        backend: V1,
        seen_path: path,
        seen_host: HOST,
        seen: Vec::new(),
        unseen: Vec::new(),
        answer: Vec::new(),
        unanswered: Vec::new(),
        location: None,
    }
}

impl Case {
    pub(crate) fn method(mut self, method: &'static str) -> Self {
        self.method = method;
        self
    }
    pub(crate) fn host(mut self, host: &'static str) -> Self {
        self.host = host;
        self.seen_host = host;
        self
    }
    pub(crate) fn header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((name, value));
        self
    }
    pub(crate) fn host_port(mut self) -> Self {
        self.host_port = true;
        self
    }
    pub(crate) fn backend_sends(mut self, name: &'static str, value: &'static str) -> Self {
        self.backend_sends.push((name, value));
        self
    }
    pub(crate) fn to(mut self, backend: &'static str) -> Self {
        self.backend = backend;
        self
    }
    pub(crate) fn seen_as(mut self, host: &'static str, path: &'static str) -> Self {
        self.seen_host = host;
        self.seen_path = path;
        self
    }
    pub(crate) fn seen(mut self, name: &'static str, value: &'static str) -> Self {
        self.seen.push((name, value));
        self
    }
    pub(crate) fn unseen(mut self, name: &'static str) -> Self {
        self.unseen.push(name);
        self
    }
    pub(crate) fn answer(mut self, name: &'static str, value: &'static str) -> Self {
        self.answer.push((name, value));
        self
    }
    pub(crate) fn unanswered(mut self, name: &'static str) -> Self {
        self.unanswered.push(name);
        self
    }
    /// Answered `status` by the router with a `Location` of `scheme`,
    /// `host`, `port` and `path`.
    pub(crate) fn redirect(
        mut self,
        status: u16,
        scheme: &'static str,
        host: &'static str,
        port: At,
        path: &'static str,
    ) -> Self {
        self.status = status;
        self.backend = "";
        self.location = Some((scheme, host, port, path));
        self
    }

    /// Sends the request to 127.0.0.1:`port`: what differs from the
    /// expectation, if anything.
    pub(crate) fn check(&self, port: u16) -> Result<(), String> {
        self.check_by(port, &|method, host, path, headers| {
            super::exchange(port, method, host, path, headers)
        })
    }

    /// [`check`](Self::check) over TLS: SNI `sni`, the router's
    /// certificate verified against `ca`.
    pub(crate) fn check_tls(&self, port: u16, sni: &str, ca: &std::path::Path) -> Result<(), String> {
        self.check_by(port, &|method, host, path, headers| {
            super::exchange_tls(port, sni, ca, method, host, path, headers)
        })
    }

    /// What the listener on `port` answers the case, through `exchange`
    /// (method, Host, path, headers), checked.
    fn check_by(&self, port: u16, exchange: &Exchange<'_>) -> Result<(), String> {
        let mut headers = self.headers.clone();
        let sends = self
            .backend_sends
            .iter()
            .map(|(n, v)| format!("{n}:{v}"))
            .collect::<Vec<_>>()
            .join(",");
        if !sends.is_empty() {
            headers.push(("x-echo-set-header", &sends));
        }
        let host = match self.host_port {
            true => format!("{}:{port}", self.host),
            false => self.host.to_string(),
        };
        let answer = exchange(self.method, &host, self.path, &headers);
        let wrong = |what: String| Err(format!("{what}\nthe answer: {answer:?}"));
        if answer.status != self.status {
            return wrong(format!("status {}, expected {}", answer.status, self.status));
        }
        for (name, value) in &self.answer {
            if answer.headers.get(&name.to_ascii_lowercase()).map(String::as_str) != Some(value) {
                return wrong(format!("the answer's {name} is not {value}"));
            }
        }
        for name in &self.unanswered {
            if answer.headers.contains_key(&name.to_ascii_lowercase()) {
                return wrong(format!("the answer has {name}"));
            }
        }
        if let Some((scheme, host, _, path)) = self.location {
            let Some(location) = answer.headers.get("location") else {
                return wrong("no location".into());
            };
            let (got_scheme, rest) = location.split_once("://").unwrap_or_default();
            let (authority, got_path) = rest.find('/').map_or((rest, "/"), |at| rest.split_at(at));
            let (got_host, got_port) = match authority.rsplit_once(':') {
                Some((h, p)) => (h, p.parse::<u16>().ok()),
                None => (authority, None),
            };
            let default = match scheme {
                "https" => 443,
                _ => 80,
            };
            let listener = port;
            let port_ok = match self.location.map(|(_, _, at, _)| at) {
                Some(At::Port(port)) => got_port == Some(port),
                Some(At::Listener) if listener != default => got_port == Some(listener),
                _ => got_port.is_none() || got_port == Some(default),
            };
            if (got_scheme, got_host, got_path) != (scheme, host, path) || !port_ok {
                return wrong(format!("location {location}, expected {:?}", self.location));
            }
        }
        if self.backend.is_empty() {
            return Ok(());
        }
        let Ok(echo) = serde_json::from_str::<Value>(&answer.body) else {
            return wrong("no backend answered".into());
        };
        let saw = |name: &str| {
            echo["headers"][name.to_ascii_lowercase()]
                .as_str()
                .map(str::to_string)
        };
        if echo["backend"] != self.backend {
            return wrong(format!("expected {}", self.backend));
        }
        if echo["path"] != self.seen_path || echo["host"] != self.seen_host {
            return wrong(format!(
                "the backend did not see {}{}",
                self.seen_host, self.seen_path
            ));
        }
        for (name, value) in self.headers.iter().chain(&self.seen) {
            // A header sent is seen as sent unless the case says what
            // becomes of it.
            let expected = self
                .seen
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map_or(*value, |(_, v)| *v);
            if self.unseen.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                continue;
            }
            if saw(name).as_deref() != Some(expected) {
                return wrong(format!("the backend did not see {name}: {expected}"));
            }
        }
        for name in &self.unseen {
            if saw(name).is_some() {
                return wrong(format!("the backend saw {name}"));
            }
        }
        Ok(())
    }
}

/// `cases`, and each again with the listener's port in its host (the
/// test's listeners are not on their scheme's port: a client writes it).
pub(crate) fn with_host_ports(cases: Vec<Case>) -> Vec<Case> {
    let ported: Vec<Case> = cases.iter().cloned().map(Case::host_port).collect();
    cases.into_iter().chain(ported).collect()
}

/// The cases of HTTPRouteRequestHeaderModifier, which
/// HTTPRouteBackendRequestHeaderModifier shares (its filters on the
/// backendRef).
pub(crate) fn request_header_cases() -> Vec<Case> {
    vec![
        case("/set")
            .header("Some-Other-Header", "val")
            .seen("X-Header-Set", "set-overwrites-values"),
        case("/set")
            .header("Some-Other-Header", "val")
            .header("X-Header-Set", "some-other-value")
            .seen("X-Header-Set", "set-overwrites-values"),
        case("/add")
            .header("Some-Other-Header", "val")
            .seen("X-Header-Add", "add-appends-values"),
        case("/add")
            .header("Some-Other-Header", "val")
            .header("X-Header-Add", "some-other-value")
            .seen("X-Header-Add", "some-other-value,add-appends-values"),
        case("/remove")
            .header("X-Header-Remove", "val")
            .unseen("X-Header-Remove"),
        case("/multiple")
            .header("X-Header-Set-2", "set-val-2")
            .header("X-Header-Add-2", "add-val-2")
            .header("X-Header-Remove-2", "remove-val-2")
            .header("Another-Header", "another-header-val")
            .seen("X-Header-Set-1", "header-set-1")
            .seen("X-Header-Set-2", "header-set-2")
            .seen("X-Header-Add-1", "header-add-1")
            .seen("X-Header-Add-2", "add-val-2,header-add-2")
            .seen("X-Header-Add-3", "header-add-3")
            .unseen("X-Header-Remove-1")
            .unseen("X-Header-Remove-2"),
        // The filter's names are canonical, the request's lowercase.
        case("/case-insensitivity")
            .header("x-header-set", "original-val-set")
            .header("x-header-add", "original-val-add")
            .header("x-header-remove", "original-val-remove")
            .header("Another-Header", "another-header-val")
            .seen("X-Header-Set", "header-set")
            .seen("X-Header-Add", "original-val-add,header-add")
            .unseen("X-Header-Remove"),
    ]
}

/// The request header changes of the cases that pair another filter
/// with a RequestHeaderModifier.
pub(crate) fn modified(case: Case) -> Case {
    case.header("X-Header-Remove", "remove-val")
        .header("X-Header-Add-Append", "append-val-1")
        .seen("X-Header-Add", "header-val-1")
        .seen("X-Header-Add-Append", "append-val-1,header-val-2")
        .seen("X-Header-Set", "set-overwrites-values")
        .unseen("X-Header-Remove")
}
