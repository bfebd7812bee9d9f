//! HPACK integers (RFC 7541 §5.1): an N-bit prefix, then 7 bits per
//! continuation byte, least significant group first.

use super::HpackError;

/// The most continuation bytes a decoded integer may have (35 bits, enough
/// for every value up to [`MAX_INT`]).
const MAX_CONTINUATION: usize = 5;
/// The largest integer the decoder accepts.
const MAX_INT: u64 = u32::MAX as u64;

/// The encoded length of `value` with a `prefix`-bit prefix.
pub(crate) const fn int_len(value: usize, prefix: u32) -> usize {
    let max = (1usize << prefix) - 1;
    if value < max {
        return 1;
    }
    let mut rest = value - max;
    let mut n = 2;
    while rest >= 0x80 {
        rest >>= 7;
        n += 1;
    }
    n
}

/// Writes `value` with a `prefix`-bit prefix at `out[at..]`, the first byte's
/// high bits set to `flags`; returns the position after it.
pub(crate) const fn encode_int(value: usize, prefix: u32, flags: u8, out: &mut [u8], mut at: usize) -> usize {
    let max = (1usize << prefix) - 1;
    if value < max {
        out[at] = flags | value as u8;
        return at + 1;
    }
    out[at] = flags | max as u8;
    at += 1;
    let mut rest = value - max;
    while rest >= 0x80 {
        out[at] = 0x80 | (rest & 0x7f) as u8;
        rest >>= 7;
        at += 1;
    }
    out[at] = rest as u8;
    at + 1
}

/// Reads an integer with a `prefix`-bit prefix at `block[*pos..]` and
/// advances `pos` past it.
pub(crate) fn decode_int(block: &[u8], pos: &mut usize, prefix: u32) -> Result<usize, HpackError> {
    let max = ((1u16 << prefix) - 1) as u8;
    let first = *block.get(*pos).ok_or(HpackError::Truncated)? & max;
    *pos += 1;
    if first < max {
        return Ok(usize::from(first));
    }
    let mut value = u64::from(max);
    for shift in 0..MAX_CONTINUATION {
        let b = *block.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        value += u64::from(b & 0x7f) << (7 * shift);
        if b & 0x80 == 0 {
            return if value > MAX_INT {
                Err(HpackError::IntegerOverflow)
            } else {
                usize::try_from(value).map_err(|_| HpackError::IntegerOverflow)
            };
        }
    }
    Err(HpackError::IntegerOverflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(value: usize, prefix: u32) -> Vec<u8> {
        let mut out = vec![0; int_len(value, prefix)];
        let end = encode_int(value, prefix, 0, &mut out, 0);
        assert_eq!(end, out.len());
        out
    }

    #[test]
    fn rfc_examples() {
        // RFC 7541 C.1.1 to C.1.3.
        assert_eq!(enc(10, 5), [10]);
        assert_eq!(enc(1337, 5), [31, 154, 10]);
        assert_eq!(enc(42, 8), [42]);
        let mut pos = 0;
        assert_eq!(decode_int(&[31, 154, 10], &mut pos, 5), Ok(1337));
        assert_eq!(pos, 3);
    }

    #[test]
    fn round_trips() {
        for prefix in 1..=8 {
            for value in (0..300).chain([u32::MAX as usize - 1, u32::MAX as usize]) {
                let bytes = enc(value, prefix);
                let mut pos = 0;
                assert_eq!(
                    decode_int(&bytes, &mut pos, prefix),
                    Ok(value),
                    "{value} /{prefix}"
                );
                assert_eq!(pos, bytes.len());
            }
        }
    }

    #[test]
    fn rejects() {
        let mut pos = 0;
        assert_eq!(decode_int(&[], &mut pos, 5), Err(HpackError::Truncated));
        let mut pos = 0;
        assert_eq!(decode_int(&[31, 0x80], &mut pos, 5), Err(HpackError::Truncated));
        // 2^32 + 30.
        let mut pos = 0;
        assert_eq!(
            decode_int(&[31, 0xff, 0xff, 0xff, 0xff, 0x0f], &mut pos, 5),
            Err(HpackError::IntegerOverflow)
        );
        // Six continuation bytes, even of zeros.
        let mut pos = 0;
        assert_eq!(
            decode_int(&[31, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00], &mut pos, 5),
            Err(HpackError::IntegerOverflow)
        );
    }
}
