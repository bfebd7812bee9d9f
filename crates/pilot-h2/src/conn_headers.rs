//! A request's header block decoded and checked (RFC 9113 §8.2, §8.3): the
//! pseudo-headers a gRPC request needs, lowercase names, no
//! connection-specific fields; then the gRPC checks (POST,
//! `application/grpc` content type).

use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::grpc::{ConnectionInfo, RequestHead};
use crate::hpack::{self, HpackError};

/// What a decoded header block turned out to be.
pub(crate) enum Decoded {
    /// A well-formed gRPC request.
    Request(Head),
    /// Larger than SETTINGS_MAX_HEADER_LIST_SIZE (answered 431).
    TooLarge,
    /// Malformed (RFC 9113 §8.1.1): a stream error PROTOCOL_ERROR.
    Malformed,
    /// Well-formed but not a gRPC request: answered with this HTTP status.
    Refused(&'static [u8]),
}

/// A request head before it is given its stream.
pub(crate) struct Head {
    path: String,
    authority: Option<String>,
    headers: HeaderMap,
}

impl Head {
    /// The application's view of the head.
    pub(crate) fn into_head(self, stream_id: u32, connection: Arc<ConnectionInfo>) -> RequestHead {
        RequestHead {
            stream_id,
            path: self.path,
            authority: self.authority,
            headers: self.headers,
            connection,
        }
    }
}

#[derive(Default)]
struct Collect {
    method: Option<Vec<u8>>,
    scheme: bool,
    path: Option<String>,
    authority: Option<String>,
    headers: HeaderMap,
    regular_seen: bool,
    malformed: Option<&'static str>,
}

impl Collect {
    fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.malformed.is_some() {
            return;
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            if self.regular_seen {
                self.malformed = Some("a pseudo-header after a regular field");
                return;
            }
            let duplicate = match pseudo {
                b"method" => self.method.replace(value.to_vec()).is_some(),
                b"scheme" => std::mem::replace(&mut self.scheme, true),
                b"path" => self
                    .path
                    .replace(String::from_utf8_lossy(value).into_owned())
                    .is_some(),
                b"authority" => self
                    .authority
                    .replace(String::from_utf8_lossy(value).into_owned())
                    .is_some(),
                _ => {
                    self.malformed = Some("an unknown pseudo-header");
                    return;
                }
            };
            if duplicate {
                self.malformed = Some("a repeated pseudo-header");
            }
            return;
        }
        self.regular_seen = true;
        if name.iter().any(u8::is_ascii_uppercase) {
            self.malformed = Some("an uppercase field name");
            return;
        }
        match name {
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade" => {
                self.malformed = Some("a connection-specific field");
                return;
            }
            b"te" if value != b"trailers" => {
                self.malformed = Some("TE other than \"trailers\"");
                return;
            }
            _ => {}
        }
        match (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            (Ok(name), Ok(value)) => {
                self.headers.append(name, value);
            }
            _ => self.malformed = Some("an invalid field name or value"),
        }
    }
}

/// Decodes a request's header block. `Err` only when HPACK failed (a
/// connection error COMPRESSION_ERROR): the block is decoded even for
/// streams that will be refused, to keep the decoder's table in step.
pub(crate) fn decode_request(
    decoder: &mut hpack::Decoder,
    block: &[u8],
    max_list: usize,
) -> Result<Decoded, ()> {
    let mut collect = Collect::default();
    match decoder.decode(block, max_list, |name, value| collect.field(name, value)) {
        Ok(()) => {}
        Err(HpackError::HeaderListTooLarge { .. }) => return Ok(Decoded::TooLarge),
        Err(_) => return Err(()),
    }
    if collect.malformed.is_some() {
        return Ok(Decoded::Malformed);
    }
    let (Some(method), true, Some(path)) = (collect.method, collect.scheme, collect.path) else {
        return Ok(Decoded::Malformed);
    };
    if path.is_empty() {
        return Ok(Decoded::Malformed);
    }
    if method != b"POST" {
        return Ok(Decoded::Refused(b"405"));
    }
    let grpc = collect
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if !grpc {
        return Ok(Decoded::Refused(b"415"));
    }
    Ok(Decoded::Request(Head {
        path,
        authority: collect.authority,
        headers: collect.headers,
    }))
}
