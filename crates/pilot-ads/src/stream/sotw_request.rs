//! A state-of-the-world request as the server reads it: the fields of
//! `envoy.service.discovery.v3.DiscoveryRequest`, but with
//! `resource_names` left encoded.
//!
//! Envoy answers every EDS response with the full list of the load
//! assignments it subscribes to: 4,000 names (about 100 KB) per sidecar in
//! a 1,000-service mesh, 20,000 at 5,000 services. Decoded as
//! `DiscoveryRequest`, each ACK allocates a `String` per name and the
//! server then looks every one up in the subscription's set, only to find
//! (almost always) the same names as before. Here decoding only checks
//! the names and takes a digest of them, reading them where they lie in
//! the request's frames: an ACK naming what the previous request named
//! (same names, same order) is recognised by its digest and count, and the
//! names are read again (from the request, kept) only when they differ.

use std::hash::{BuildHasher, Hasher};
use std::ops::Range;
use std::sync::OnceLock;

use foldhash::fast::{FixedState, FoldHasher};

use bytes::{Buf, BufMut, Bytes};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::ResourceLocator;
use envoy_types::pb::google::rpc::Status;
use prost::encoding::{self, DecodeContext, WireType};
use prost::{DecodeError, Message};

use super::transport::{Frames, Request};

/// `DiscoveryRequest`, its `resource_names` kept encoded
/// ([`EncodedNames`]). Encodes to the same bytes it was decoded from
/// (field order aside). Decoded with [`Request::decode`], which keeps the
/// request for its names (`prost::Message::decode` would not).
#[derive(Debug, Default, Clone)]
pub(crate) struct SotwRequest {
    /// Field 1.
    pub(crate) version_info: String,
    /// Field 2.
    pub(crate) node: Option<Node>,
    /// Field 3, `resource_names`.
    pub(crate) resource_names: EncodedNames,
    /// Field 4.
    pub(crate) type_url: String,
    /// Field 5.
    pub(crate) response_nonce: String,
    /// Field 6.
    pub(crate) error_detail: Option<Status>,
    /// Field 7.
    pub(crate) resource_locators: Vec<ResourceLocator>,
}

/// A request's `resource_names`: how many, a digest of them in order, and
/// the request they are read from when needed.
#[derive(Clone)]
pub(crate) struct EncodedNames {
    count: usize,
    /// foldhash with a fixed seed: several times SipHash's speed on
    /// names (SipHash was a tenth of the server's CPU in an endpoint
    /// push to 2,000 state-of-the-world clients); the digest only tells a
    /// stream's own requests apart.
    hasher: FoldHasher<'static>,
    /// The request the names were decoded from, as its frames.
    message: Frames,
    /// The request as one buffer and where each name is in it, the first
    /// time the names are read.
    read: OnceLock<(Bytes, Vec<Range<usize>>)>,
}

impl std::fmt::Debug for EncodedNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncodedNames")
            .field("names", &self.iter().collect::<Vec<_>>())
            .field("key", &self.key())
            .finish()
    }
}

impl Default for EncodedNames {
    fn default() -> Self {
        EncodedNames {
            count: 0,
            hasher: FixedState::with_seed(0).build_hasher(),
            message: Frames::default(),
            read: OnceLock::new(),
        }
    }
}

/// What identifies a list of names without holding it: a digest of the
/// names in order, and how many there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NamesKey {
    digest: u64,
    count: usize,
}

impl EncodedNames {
    /// How many names.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// True when there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The digest and count of the names, in request order.
    pub(crate) fn key(&self) -> NamesKey {
        NamesKey {
            digest: self.hasher.finish(),
            count: self.count,
        }
    }

    /// The request as one buffer and the names' places in it.
    fn places(&self) -> &(Bytes, Vec<Range<usize>>) {
        self.read.get_or_init(|| {
            let bytes = self.message.contiguous();
            let mut places = Vec::with_capacity(self.count);
            let mut rest: &[u8] = &bytes;
            // Decoded once already: every field reads.
            while let Ok((tag, wire_type)) = encoding::decode_key(&mut rest) {
                if tag == 3 && wire_type == WireType::LengthDelimited {
                    let Ok(len) = encoding::decode_varint(&mut rest) else {
                        break;
                    };
                    let start = bytes.len() - rest.len();
                    let Some(end) = usize::try_from(len).ok().and_then(|len| start.checked_add(len)) else {
                        break;
                    };
                    if end > bytes.len() {
                        break;
                    }
                    places.push(start..end);
                    rest = &bytes[end..];
                } else if encoding::skip_field(wire_type, tag, &mut rest, DecodeContext::default()).is_err() {
                    break;
                }
            }
            debug_assert_eq!(places.len(), self.count, "decoded with Request::decode");
            (bytes, places)
        })
    }

    /// The names in request order (every one was checked UTF-8 when the
    /// request was decoded).
    fn iter(&self) -> impl Iterator<Item = &str> {
        let (bytes, places) = self.places();
        places
            .iter()
            .filter_map(|place| std::str::from_utf8(&bytes[place.clone()]).ok())
    }

    /// The names, decoded.
    pub(crate) fn decode(&self) -> std::collections::BTreeSet<String> {
        self.iter().map(str::to_owned).collect()
    }

    /// The names, sorted and without repeats, borrowed from the request.
    pub(crate) fn sorted(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.iter().collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Reads a name of a request being decoded: checked, counted, digested.
    fn read_name(&mut self, name: &[u8]) -> Result<(), DecodeError> {
        if std::str::from_utf8(name).is_err() {
            // prost's own words for a string field that is not UTF-8
            // (its error kinds are private).
            #[allow(
                deprecated,
                reason = "prost's DecodeError::new is deprecated but its error kinds are private: its own words for the error"
            )]
            return Err(DecodeError::new(
                "invalid string value: data is not UTF-8 encoded",
            ));
        }
        // The length first, so that ["ab", "c"] and ["a", "bc"] differ.
        self.hasher.write_usize(name.len());
        self.hasher.write(name);
        self.count += 1;
        Ok(())
    }
}

impl Request for SotwRequest {
    fn decode(message: Frames) -> Result<Self, DecodeError> {
        let kept = message.clone();
        let mut request = <Self as Message>::decode(message)?;
        request.resource_names.message = kept;
        Ok(request)
    }
}

impl Message for SotwRequest {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if !self.version_info.is_empty() {
            encoding::string::encode(1, &self.version_info, buf);
        }
        if let Some(node) = &self.node {
            encoding::message::encode(2, node, buf);
        }
        for name in self.resource_names.iter() {
            encoding::encode_key(3, WireType::LengthDelimited, buf);
            encoding::encode_varint(name.len() as u64, buf);
            buf.put_slice(name.as_bytes());
        }
        if !self.type_url.is_empty() {
            encoding::string::encode(4, &self.type_url, buf);
        }
        if !self.response_nonce.is_empty() {
            encoding::string::encode(5, &self.response_nonce, buf);
        }
        if let Some(error) = &self.error_detail {
            encoding::message::encode(6, error, buf);
        }
        encoding::message::encode_repeated(7, &self.resource_locators, buf);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        match tag {
            1 => encoding::string::merge(wire_type, &mut self.version_info, buf, ctx),
            2 => encoding::message::merge(wire_type, self.node.get_or_insert_with(Node::default), buf, ctx),
            3 => {
                // Read where it lies (copied only across two frames).
                encoding::check_wire_type(WireType::LengthDelimited, wire_type)?;
                let len = encoding::decode_varint(buf)?;
                let Some(len) = usize::try_from(len).ok().filter(|&len| len <= buf.remaining()) else {
                    #[allow(
                        deprecated,
                        reason = "prost's DecodeError::new is deprecated but its error kinds are private: its own words for the error"
                    )]
                    return Err(DecodeError::new("buffer underflow"));
                };
                if buf.chunk().len() >= len {
                    self.resource_names.read_name(&buf.chunk()[..len])?;
                    buf.advance(len);
                    Ok(())
                } else {
                    let mut name = vec![0; len];
                    buf.copy_to_slice(&mut name);
                    self.resource_names.read_name(&name)
                }
            }
            4 => encoding::string::merge(wire_type, &mut self.type_url, buf, ctx),
            5 => encoding::string::merge(wire_type, &mut self.response_nonce, buf, ctx),
            6 => encoding::message::merge(
                wire_type,
                self.error_detail.get_or_insert_with(Status::default),
                buf,
                ctx,
            ),
            7 => encoding::message::merge_repeated(wire_type, &mut self.resource_locators, buf, ctx),
            _ => encoding::skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        let string = |tag: u32, value: &String| {
            if value.is_empty() {
                0
            } else {
                encoding::string::encoded_len(tag, value)
            }
        };
        string(1, &self.version_info)
            + self
                .node
                .as_ref()
                .map_or(0, |node| encoding::message::encoded_len(2, node))
            + self
                .resource_names
                .iter()
                .map(|name| {
                    encoding::key_len(3) + encoding::encoded_len_varint(name.len() as u64) + name.len()
                })
                .sum::<usize>()
            + string(4, &self.type_url)
            + string(5, &self.response_nonce)
            + self
                .error_detail
                .as_ref()
                .map_or(0, |error| encoding::message::encoded_len(6, error))
            + encoding::message::encoded_len_repeated(7, &self.resource_locators)
    }

    fn clear(&mut self) {
        *self = SotwRequest::default();
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;

    use super::*;

    fn request(names: &[&str]) -> DiscoveryRequest {
        DiscoveryRequest {
            version_info: "v1".into(),
            node: Some(Node {
                id: "sidecar~10.0.0.1~a.default~default.svc.cluster.local".into(),
                ..Default::default()
            }),
            resource_names: names.iter().map(|n| n.to_string()).collect(),
            type_url: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment".into(),
            response_nonce: "7".into(),
            error_detail: Some(Status {
                code: 3,
                message: "rejected".into(),
                details: Vec::new(),
            }),
            resource_locators: vec![ResourceLocator {
                name: "x".into(),
                ..Default::default()
            }],
        }
    }

    fn lazy(request: &DiscoveryRequest) -> SotwRequest {
        <SotwRequest as Request>::decode(Frames::from(Bytes::from(request.encode_to_vec()))).expect("decodes")
    }

    /// The request in frames of `size` bytes (the last shorter).
    fn in_frames(request: &DiscoveryRequest, size: usize) -> SotwRequest {
        let bytes = request.encode_to_vec();
        let mut frames = Frames::default();
        for chunk in bytes.chunks(size) {
            frames.push(Bytes::copy_from_slice(chunk));
        }
        <SotwRequest as Request>::decode(frames).expect("decodes")
    }

    #[test]
    fn a_request_reads_the_same_however_its_frames_split_it() {
        let original = request(&[
            "outbound|9080||reviews.default.svc.cluster.local",
            "b",
            "",
            "outbound|80||c",
        ]);
        let whole = lazy(&original);
        for size in [1, 2, 3, 5, 7, 16, 64] {
            let split = in_frames(&original, size);
            assert_eq!(
                split.resource_names.key(),
                whole.resource_names.key(),
                "frames of {size}"
            );
            assert_eq!(
                split.resource_names.sorted(),
                whole.resource_names.sorted(),
                "frames of {size}"
            );
            assert_eq!(split.version_info, original.version_info);
            assert_eq!(split.node, original.node);
            assert_eq!(split.response_nonce, original.response_nonce);
            assert_eq!(split.error_detail, original.error_detail);
        }
    }

    #[test]
    fn many_names_read_the_same_however_frames_cut_them() {
        // Names of 1 to 299 bytes: lengths of one and two varint bytes.
        let names: Vec<String> = (0..600)
            .map(|i| {
                format!("outbound|80||svc-{i}.default.svc.cluster.local").repeat(7)[..(i % 299) + 1]
                    .to_string()
            })
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let original = request(&names);
        let whole = lazy(&original);
        assert_eq!(whole.resource_names.len(), names.len());
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(whole.resource_names.sorted(), sorted);
        for size in [1, 13, 128, 1000, 4096, 16384] {
            let split = in_frames(&original, size);
            assert_eq!(
                split.resource_names.key(),
                whole.resource_names.key(),
                "frames of {size}"
            );
            assert_eq!(split.resource_names.sorted(), sorted, "frames of {size}");
            assert_eq!(split.response_nonce, original.response_nonce, "frames of {size}");
        }
        // One name fewer, or one byte changed, is another key.
        let fewer = lazy(&request(&names[1..]));
        assert_ne!(fewer.resource_names.key(), whole.resource_names.key());
        let mut changed: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        changed[300].replace_range(0..1, "x");
        let changed: Vec<&str> = changed.iter().map(String::as_str).collect();
        assert_ne!(
            lazy(&request(&changed)).resource_names.key(),
            whole.resource_names.key()
        );
    }

    #[test]
    fn every_field_reads_as_a_discovery_request_and_encodes_back() {
        let original = request(&["outbound|9080||b", "outbound|9080||a"]);
        let read = lazy(&original);
        assert_eq!(read.version_info, original.version_info);
        assert_eq!(read.node, original.node);
        assert_eq!(read.type_url, original.type_url);
        assert_eq!(read.response_nonce, original.response_nonce);
        assert_eq!(read.error_detail, original.error_detail);
        assert_eq!(read.resource_locators, original.resource_locators);
        assert_eq!(read.resource_names.len(), 2);
        assert_eq!(
            read.resource_names.decode(),
            original.resource_names.iter().cloned().collect()
        );
        assert_eq!(read.encoded_len(), original.encoded_len());
        let back = DiscoveryRequest::decode(Bytes::from(read.encode_to_vec())).expect("decodes");
        assert_eq!(back, original);
    }

    #[test]
    fn the_key_tells_lists_apart_by_names_order_and_boundaries() {
        let key = |names: &[&str]| lazy(&request(names)).resource_names.key();
        assert_eq!(key(&["a", "b"]), key(&["a", "b"]));
        assert_ne!(key(&["a", "b"]), key(&["b", "a"]));
        assert_ne!(key(&["ab", "c"]), key(&["a", "bc"]));
        assert_ne!(key(&["a"]), key(&["a", "a"]));
        assert_ne!(key(&[]), key(&[""]));
    }

    #[test]
    fn a_name_that_is_not_utf8_is_an_undecodable_request() {
        let mut bytes = Vec::new();
        encoding::encode_key(3, WireType::LengthDelimited, &mut bytes);
        encoding::encode_varint(2, &mut bytes);
        bytes.extend_from_slice(&[0xff, 0xfe]);
        let read = |bytes: Vec<u8>| <SotwRequest as Request>::decode(Frames::from(Bytes::from(bytes)));
        let error = read(bytes).expect_err("not UTF-8");
        assert!(error.to_string().contains("UTF-8"), "{error}");
        // A truncated name too.
        let mut short = Vec::new();
        encoding::encode_key(3, WireType::LengthDelimited, &mut short);
        encoding::encode_varint(10, &mut short);
        short.extend_from_slice(b"abc");
        assert!(read(short).is_err());
    }
}
