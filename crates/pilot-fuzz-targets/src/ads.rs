//! The ADS port's request bodies: gRPC framing and discovery requests.

/// Request bodies as an ADS client sends them, cut where the input says,
/// through the port's own deframer (under a request budget) and its
/// state-of-the-world and delta decoders: every input is decoded or
/// refused, never a panic.
pub(crate) fn ads_requests(data: &[u8]) {
    pilot_ads::fuzzing::requests(data);
}
