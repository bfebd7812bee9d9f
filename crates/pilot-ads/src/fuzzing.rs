//! Entry points for fuzzing what the ADS port parses (feature `fuzzing`,
//! off by default; not a stable API): the bytes of request bodies as a
//! client sends them, through the same gRPC deframer and request decoders
//! the port runs.

use bytes::Bytes;

use crate::stream::{Deframer, DeltaRequest, Request, RequestBudget, SotwRequest};

/// The request budget the entry point deframes under: small enough that
/// the fuzzer reaches the budget's refusals.
const BUDGET: usize = 64 * 1024;

/// Feeds `data` to a stream's gRPC deframer, in chunks whose boundaries
/// the data itself chooses, and decodes every whole message as a
/// state-of-the-world and as a delta request. Never panics: every input is
/// either decoded or refused with a status.
///
/// The first byte says how many of the following bytes (0 to 7) are chunk
/// lengths, used in turn (a zero length is taken as one); the rest is the
/// body.
pub fn requests(data: &[u8]) {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let count = usize::from(head % 8).min(rest.len());
    let (lengths, body) = rest.split_at(count);
    let budget = RequestBudget::new(BUDGET);
    let mut deframer = Deframer::new(Some(budget));
    let body = Bytes::copy_from_slice(body);
    let mut at = 0;
    let mut turn = 0;
    while at < body.len() {
        let length = lengths
            .get(turn % lengths.len().max(1))
            .map_or(body.len(), |&l| usize::from(l).max(1));
        turn += 1;
        let end = (at + length).min(body.len());
        if deframer.push(body.slice(at..end)).is_err() {
            return;
        }
        at = end;
        loop {
            match deframer.next() {
                Ok(Some(message)) => {
                    let _ = <SotwRequest as Request>::decode(message.clone());
                    let _ = <DeltaRequest as Request>::decode(message);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whole requests, requests cut anywhere, and garbage all pass through
    /// without a panic.
    #[test]
    fn requests_of_any_shape_do_not_panic() {
        use prost::Message;
        let request = envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest {
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
            resource_names: vec!["a".into(), "b".into()],
            ..Default::default()
        }
        .encode_to_vec();
        let mut framed = vec![0u8];
        framed.extend_from_slice(&u32::try_from(request.len()).unwrap().to_be_bytes());
        framed.extend_from_slice(&request);
        for cuts in [vec![0u8], vec![2, 1, 3], vec![7, 0, 0, 0, 0, 0, 0, 0]] {
            let mut data = cuts.clone();
            data.extend_from_slice(&framed);
            data.extend_from_slice(&framed);
            requests(&data);
            data.truncate(data.len() - 3);
            requests(&data);
        }
        requests(&[]);
        requests(&[1, 0, 0xff, 0xff, 0xff, 0xff, 0xff]);
        requests(&[0, 1, 0, 0, 0, 1]);
        requests(&[3, 1, 2, 3, 0, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff]);
    }
}
