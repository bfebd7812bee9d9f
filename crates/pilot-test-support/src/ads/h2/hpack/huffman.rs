//! The HPACK Huffman code (RFC 7541 §5.2, Appendix B).
//!
//! The code is canonical: the codes of one length are consecutive integers,
//! in symbol order, and each length's first code follows the last code of the
//! length before. The decoder therefore needs no tree: it looks at the next 32
//! bits, finds the code's length as the first length whose left-aligned limit
//! lies above them, and the symbol by the offset from that length's first code.
//! The tables below are derived from [`CODES`] at compile time, and the
//! derivation fails to compile if the code is not canonical.

use super::HpackError;
use super::huffman_table::CODES;

/// The longest code (EOS), in bits.
const MAX_BITS: usize = 30;
/// The symbol index of EOS.
const EOS: u16 = 256;

/// Per code length: the first code, the number of codes, and where the
/// length's symbols start in [`SYMBOLS`].
#[derive(Clone, Copy)]
struct Length {
    /// The left-aligned (32-bit) limit: every window below it and at or above
    /// the previous length's limit holds a code of this length.
    limit: u64,
    first: u32,
    offset: u16,
}

/// Symbols ordered by (code length, code).
const SYMBOLS: [u16; 257] = canonical().0;
/// Lengths 0..=30 (0 unused).
const LENGTHS: [Length; MAX_BITS + 1] = canonical().1;

/// Derives [`SYMBOLS`] and [`LENGTHS`] from [`CODES`], checking that the code
/// is canonical.
const fn canonical() -> ([u16; 257], [Length; MAX_BITS + 1]) {
    let mut symbols = [0u16; 257];
    let mut lengths = [Length {
        limit: 0,
        first: 0,
        offset: 0,
    }; MAX_BITS + 1];
    let mut n = 0usize;
    let mut next_first: u32 = 0;
    let mut bits = 1;
    while bits <= MAX_BITS {
        let first = next_first;
        let start = n;
        // Symbols of this length, in symbol order.
        let mut sym = 0;
        while sym < 257 {
            if CODES[sym].1 as usize == bits {
                symbols[n] = sym as u16;
                n += 1;
            }
            sym += 1;
        }
        // Canonical: the k-th symbol of this length has code `first + k`.
        let mut k = start;
        while k < n {
            assert!(
                CODES[symbols[k] as usize].0 == first + (k - start) as u32,
                "the Huffman code is not canonical"
            );
            k += 1;
        }
        let end = first + (n - start) as u32;
        lengths[bits] = Length {
            limit: (end as u64) << (32 - bits),
            first,
            offset: start as u16,
        };
        next_first = end << 1;
        bits += 1;
    }
    assert!(n == 257, "every symbol has a code of 1 to 30 bits");
    // The code is complete: the last (EOS) code is all ones.
    assert!(lengths[MAX_BITS].limit == 1 << 32, "the code is complete");
    (symbols, lengths)
}

/// The length in bytes of `src` Huffman-coded, padding included.
pub(crate) const fn encoded_len(src: &[u8]) -> usize {
    let mut bits = 0usize;
    let mut i = 0;
    while i < src.len() {
        bits += CODES[src[i] as usize].1 as usize;
        i += 1;
    }
    bits.div_ceil(8)
}

/// Writes `src` Huffman-coded into `out` (exactly [`encoded_len`] bytes),
/// padded with the most significant bits of EOS (ones).
pub(crate) const fn encode_into(src: &[u8], out: &mut [u8]) {
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    let mut at = 0;
    let mut i = 0;
    while i < src.len() {
        let (code, len) = CODES[src[i] as usize];
        acc = (acc << len) | code as u64;
        bits += len as u32;
        while bits >= 8 {
            bits -= 8;
            out[at] = (acc >> bits) as u8;
            at += 1;
        }
        acc &= (1 << bits) - 1;
        i += 1;
    }
    if bits > 0 {
        let pad = 8 - bits;
        out[at] = ((acc << pad) | ((1 << pad) - 1)) as u8;
    }
}

/// Appends the Huffman decoding of `src` to `out`.
///
/// Fails on an EOS symbol, on padding longer than 7 bits, and on padding that
/// is not the most significant bits of EOS (RFC 7541 §5.2).
pub(crate) fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    // Every code is at least 5 bits long.
    out.reserve(src.len() * 8 / 5);
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    let mut input = src.iter();
    loop {
        while bits <= 56 {
            match input.next() {
                Some(&b) => {
                    acc = (acc << 8) | u64::from(b);
                    bits += 8;
                }
                None => break,
            }
        }
        if bits == 0 {
            return Ok(());
        }
        // The next 32 bits, left-aligned; past the end, ones (as if padded
        // with EOS).
        let window = if bits >= 32 {
            (acc >> (bits - 32)) as u32
        } else {
            let missing = 32 - bits;
            ((acc << missing) as u32) | ((1u32 << missing) - 1)
        };
        let (symbol, len) = lookup(window);
        if len > bits {
            // Only padding is left: at most 7 bits, all ones.
            if bits > 7 {
                return Err(HpackError::HuffmanPaddingTooLong);
            }
            if acc != (1 << bits) - 1 {
                return Err(HpackError::HuffmanPaddingNotEos);
            }
            return Ok(());
        }
        if symbol == EOS {
            return Err(HpackError::HuffmanEos);
        }
        out.push(symbol as u8);
        bits -= len;
        acc &= (1 << bits) - 1;
    }
}

/// The symbol and code length at the start of a left-aligned 32-bit window.
fn lookup(window: u32) -> (u16, u32) {
    let w = u64::from(window);
    // The shortest codes are 5 bits long.
    let mut bits = 5;
    while bits < MAX_BITS && w >= LENGTHS[bits].limit {
        bits += 1;
    }
    let l = LENGTHS[bits];
    let index = usize::from(l.offset) + ((window >> (32 - bits)) - l.first) as usize;
    (SYMBOLS[index], bits as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(src: &[u8]) -> Vec<u8> {
        let mut out = vec![0; encoded_len(src)];
        encode_into(src, &mut out);
        out
    }

    fn dec(src: &[u8]) -> Result<Vec<u8>, HpackError> {
        let mut out = Vec::new();
        decode(src, &mut out).map(|()| out)
    }

    #[test]
    fn every_byte_round_trips() {
        for b in 0..=255u8 {
            for n in 1..=9 {
                let src = vec![b; n];
                assert_eq!(dec(&enc(&src)).unwrap(), src, "byte {b} x{n}");
            }
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(dec(&enc(&all)).unwrap(), all);
        let rev: Vec<u8> = (0..=255).rev().collect();
        assert_eq!(dec(&enc(&rev)).unwrap(), rev);
    }

    #[test]
    fn rfc_examples() {
        // RFC 7541 C.4.1.
        assert_eq!(
            enc(b"www.example.com"),
            [
                0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff
            ]
        );
        // C.4.2, C.6.1.
        assert_eq!(enc(b"no-cache"), [0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf]);
        assert_eq!(enc(b"302"), [0x64, 0x02]);
        assert_eq!(dec(&[0x64, 0x02]).unwrap(), b"302");
        assert_eq!(dec(&[]).unwrap(), b"");
    }

    #[test]
    fn rejects_eos() {
        // EOS (30 ones), then padding.
        assert_eq!(dec(&[0xff, 0xff, 0xff, 0xff]), Err(HpackError::HuffmanEos));
        // 'a' (00011) then EOS.
        assert_eq!(dec(&[0x1f, 0xff, 0xff, 0xff, 0xff]), Err(HpackError::HuffmanEos));
    }

    #[test]
    fn rejects_bad_padding() {
        // '0' (00000) then 000: padding not ones.
        assert_eq!(dec(&[0x00]), Err(HpackError::HuffmanPaddingNotEos));
        // '0' then 110.
        assert_eq!(dec(&[0x06]), Err(HpackError::HuffmanPaddingNotEos));
        // A whole byte of padding.
        assert_eq!(dec(&[0xff]), Err(HpackError::HuffmanPaddingTooLong));
        // '0' (5 bits) + 11 ones: 11 bits of padding.
        assert_eq!(dec(&[0x07, 0xff]), Err(HpackError::HuffmanPaddingTooLong));
        // '0' + 111 is valid.
        assert_eq!(dec(&[0x07]).unwrap(), b"0");
    }
}
