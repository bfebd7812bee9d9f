//! Character classes as RE2 builds them in Latin-1: sorted byte ranges,
//! complements within 0x00-0xFF, ASCII-only case folding, POSIX names.

use super::parse::Class;

/// The other case of an ASCII letter (RE2 folds only those in Latin-1).
fn ascii_partner(byte: u8) -> Option<u8> {
    match byte {
        b'A'..=b'Z' => Some(byte + 0x20),
        b'a'..=b'z' => Some(byte - 0x20),
        _ => None,
    }
}

/// Sorted, merged ranges.
pub(crate) fn normalize(mut ranges: Vec<(u8, u8)>) -> Class {
    ranges.sort_unstable();
    let mut out: Class = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if u16::from(lo) <= u16::from(last.1) + 1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// The complement within 0x00-0xFF.
pub(crate) fn negate(class: &Class) -> Class {
    let mut out = Vec::new();
    let mut next: u16 = 0;
    for &(lo, hi) in class {
        if u16::from(lo) > next {
            out.push((next as u8, lo - 1));
        }
        next = u16::from(hi) + 1;
    }
    if next <= 0xff {
        out.push((next as u8, 0xff));
    }
    out
}

/// The class with both cases of every letter in it.
pub(crate) fn fold(class: &Class) -> Class {
    let mut ranges = class.clone();
    for &(lo, hi) in class {
        for byte in lo..=hi {
            if let Some(other) = ascii_partner(byte) {
                ranges.push((other, other));
            }
        }
    }
    normalize(ranges)
}

pub(crate) fn posix_class(name: &str) -> Option<Class> {
    let (negated, name) = match name.strip_prefix('^') {
        Some(n) => (true, n),
        None => (false, name),
    };
    let ranges: &[(u8, u8)] = match name {
        "alnum" => &[(b'0', b'9'), (b'A', b'Z'), (b'a', b'z')],
        "alpha" => &[(b'A', b'Z'), (b'a', b'z')],
        "ascii" => &[(0, 0x7f)],
        "blank" => &[(b'\t', b'\t'), (b' ', b' ')],
        "cntrl" => &[(0, 0x1f), (0x7f, 0x7f)],
        "digit" => &[(b'0', b'9')],
        "graph" => &[(b'!', b'~')],
        "lower" => &[(b'a', b'z')],
        "print" => &[(b' ', b'~')],
        "punct" => &[(b'!', b'/'), (b':', b'@'), (b'[', b'`'), (b'{', b'~')],
        "space" => &[(b'\t', b'\r'), (b' ', b' ')],
        "upper" => &[(b'A', b'Z')],
        "word" => &[(b'0', b'9'), (b'A', b'Z'), (b'a', b'z'), (b'_', b'_')],
        "xdigit" => &[(b'0', b'9'), (b'A', b'F'), (b'a', b'f')],
        _ => return None,
    };
    let class = normalize(ranges.to_vec());
    Some(if negated { negate(&class) } else { class })
}
