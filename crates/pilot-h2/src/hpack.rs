//! HPACK (RFC 7541): decoding a peer's header blocks and encoding ours.
