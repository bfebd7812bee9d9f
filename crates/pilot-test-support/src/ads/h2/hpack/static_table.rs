//! The static table (RFC 7541 Appendix A): 61 fields every HPACK peer knows,
//! indexed from 1.

/// The static table, index 1 first.
pub(crate) const STATIC_TABLE: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// How a field matches the static table, for the encoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StaticMatch {
    /// Name and value are the entry at this index.
    Field(usize),
    /// The name is the entry at this index (the first with that name).
    Name(usize),
    /// The name is not in the table.
    None,
}

/// Looks `(name, value)` up in the static table (usable in `const` items).
pub(crate) const fn find(name: &[u8], value: &[u8]) -> StaticMatch {
    let mut found = StaticMatch::None;
    let mut i = 0;
    while i < STATIC_TABLE.len() {
        let (n, v) = STATIC_TABLE[i];
        if bytes_eq(n, name) {
            if bytes_eq(v, value) {
                return StaticMatch::Field(i + 1);
            }
            if let StaticMatch::None = found {
                found = StaticMatch::Name(i + 1);
            }
        }
        i += 1;
    }
    found
}

/// Slice equality in a `const fn`.
const fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups() {
        assert_eq!(find(b":status", b"200"), StaticMatch::Field(8));
        assert_eq!(find(b":status", b"201"), StaticMatch::Name(8));
        assert_eq!(find(b"content-type", b"application/grpc"), StaticMatch::Name(31));
        assert_eq!(find(b"www-authenticate", b""), StaticMatch::Field(61));
        assert_eq!(find(b"grpc-status", b"0"), StaticMatch::None);
        assert_eq!(find(b"", b""), StaticMatch::None);
    }
}
