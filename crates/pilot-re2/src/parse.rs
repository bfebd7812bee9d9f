//! RE2's syntax as Envoy compiles it: Perl-like flags, Latin-1 (every byte
//! of the pattern is one character, as Envoy's RE2 reads it), parsed into
//! the tree RE2's parser builds (single-character classes collapsed into
//! literals, classes clipped to 0x00-0xFF). Errors name what RE2 names.

use super::class::{fold, negate, normalize, posix_class};
use super::unicode::unicode_class;

/// A character class: sorted, merged, non-empty byte ranges.
pub(crate) type Class = Vec<(u8, u8)>;

/// A parsed regular expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    /// Matches nothing (an empty class).
    NoMatch,
    /// Matches the empty string.
    Empty,
    /// One character; `fold` when case-insensitive.
    Literal { byte: u8, fold: bool },
    /// A character class (more than one character).
    Class(Class),
    /// `(?s).`: any character.
    AnyChar,
    /// `\C`: any byte.
    AnyByte,
    /// An empty-width assertion.
    Assert(Assert),
    /// A numbered group.
    Capture(Box<Node>),
    /// A sequence.
    Concat(Vec<Node>),
    /// Alternatives.
    Alternate(Vec<Node>),
    /// `*` (0, None), `+` (1, None), `?` (0, Some(1)), or `{n,m}`
    /// (`counted`; `max` `None`: unbounded), with the parse flags in force
    /// ([`FOLD`], [`MULTI_LINE`], [`DOT_NL`], [`NON_GREEDY`]).
    Repeat {
        sub: Box<Node>,
        min: u32,
        max: Option<u32>,
        flags: u8,
        counted: bool,
    },
}

/// Parse flag: case-insensitive.
pub(crate) const FOLD: u8 = 1;
/// Parse flag: `^` and `$` match at lines.
pub(crate) const MULTI_LINE: u8 = 2;
/// Parse flag: `.` matches a newline.
pub(crate) const DOT_NL: u8 = 4;
/// Parse flag: a repetition prefers fewer.
pub(crate) const NON_GREEDY: u8 = 8;

/// The empty-width assertions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Assert {
    /// `^` (without `m`), `\A`.
    BeginText,
    /// `$` (without `m`), `\z`.
    EndText,
    /// `^` with `m`.
    BeginLine,
    /// `$` with `m`.
    EndLine,
    /// `\b`.
    WordBoundary,
    /// `\B`.
    NotWordBoundary,
}

/// RE2's limit on a counted repetition (and on nested ones multiplied).
pub(crate) const MAX_REPEAT: u32 = 1000;

#[derive(Clone, Copy, Default)]
struct Flags {
    fold: bool,
    multi_line: bool,
    dot_nl: bool,
    ungreedy: bool,
}

impl Flags {
    fn bits(self) -> u8 {
        let mut bits = 0;
        for (on, bit) in [
            (self.fold, FOLD),
            (self.multi_line, MULTI_LINE),
            (self.dot_nl, DOT_NL),
            (self.ungreedy, NON_GREEDY),
        ] {
            if on {
                bits |= bit;
            }
        }
        bits
    }
}

/// Parses `pattern` as RE2 does; `Err` is RE2's kind of message.
pub(crate) fn parse(pattern: &str) -> Result<Node, String> {
    let mut parser = Parser {
        s: pattern.as_bytes(),
        pos: 0,
        names: Vec::new(),
    };
    let node = parser.alternation(Flags::default(), 0)?;
    if parser.pos < parser.s.len() {
        // Only a `)` stops the top level early.
        return Err(format!("unexpected ): {pattern}"));
    }
    if repetition_budget(&node, MAX_REPEAT) == 0 {
        return Err(format!("invalid repetition size: {pattern}"));
    }
    Ok(node)
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    names: Vec<Vec<u8>>,
}

/// Groups nested deeper than this are refused (RE2 allows 1000; a
/// pattern that deep is unreadable, and the limit bounds recursion here).
const MAX_DEPTH: usize = 200;

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn rest(&self) -> String {
        String::from_utf8_lossy(&self.s[self.pos..]).into_owned()
    }

    fn text(&self, from: usize, to: usize) -> String {
        String::from_utf8_lossy(&self.s[from..to.min(self.s.len())]).into_owned()
    }

    /// Alternatives up to a `)` or the end; `flags` may be changed by
    /// `(?i)` inside, for the rest of the group.
    fn alternation(&mut self, mut flags: Flags, depth: usize) -> Result<Node, String> {
        if depth > MAX_DEPTH {
            return Err(format!("groups nested more than {MAX_DEPTH} deep"));
        }
        let mut branches = Vec::new();
        let mut items: Vec<Node> = Vec::new();
        // Where the last repetition operator started, if the last thing
        // parsed was one (RE2 refuses `a**`).
        let mut last_repeat: Option<usize> = None;
        while let Some(c) = self.peek() {
            let start = self.pos;
            match c {
                b')' => break,
                b'|' => {
                    self.pos += 1;
                    branches.push(concat(std::mem::take(&mut items)));
                    last_repeat = None;
                    continue;
                }
                b'*' | b'+' | b'?' | b'{' => {
                    let (min, max) = match c {
                        b'*' => (0, None),
                        b'+' => (1, None),
                        b'?' => (0, Some(1)),
                        _ => match self.counted() {
                            Some(range) => range,
                            None => {
                                // Not a repetition: a literal `{`.
                                self.pos = start + 1;
                                items.push(literal(b'{', flags));
                                last_repeat = None;
                                continue;
                            }
                        },
                    };
                    if c != b'{' {
                        self.pos += 1;
                    }
                    let mut bits = flags.bits();
                    if self.peek() == Some(b'?') {
                        self.pos += 1;
                        bits ^= NON_GREEDY;
                    }
                    let op = self.text(start, self.pos);
                    if let Some(previous) = last_repeat {
                        return Err(format!(
                            "bad repetition operator: {}",
                            self.text(previous, self.pos)
                        ));
                    }
                    let Some(sub) = items.pop() else {
                        return Err(format!("missing argument to repetition operator: {op}"));
                    };
                    if let Some(max) = max
                        && (min > MAX_REPEAT || max > MAX_REPEAT || min > max)
                    {
                        return Err(format!("invalid repetition size: {op}"));
                    }
                    if min > MAX_REPEAT {
                        return Err(format!("invalid repetition size: {op}"));
                    }
                    items.push(repeat(sub, min, max, bits, c == b'{'));
                    last_repeat = Some(start);
                    continue;
                }
                b'(' => {
                    self.pos += 1;
                    if self.peek() == Some(b'?') {
                        self.pos += 1;
                        match self.group_options(start, &mut flags)? {
                            GroupStart::Flags => {
                                last_repeat = None;
                                continue;
                            }
                            GroupStart::NonCapturing(inner) => {
                                let sub = self.alternation(inner, depth + 1)?;
                                self.close(start)?;
                                items.push(sub);
                            }
                            GroupStart::Named => {
                                let sub = self.alternation(flags, depth + 1)?;
                                self.close(start)?;
                                items.push(Node::Capture(Box::new(sub)));
                            }
                        }
                    } else {
                        let sub = self.alternation(flags, depth + 1)?;
                        self.close(start)?;
                        items.push(Node::Capture(Box::new(sub)));
                    }
                }
                b'[' => items.push(self.class(flags)?),
                b'.' => {
                    self.pos += 1;
                    items.push(if flags.dot_nl {
                        Node::AnyChar
                    } else {
                        Node::Class(vec![(0, b'\n' - 1), (b'\n' + 1, 0xff)])
                    });
                }
                b'^' => {
                    self.pos += 1;
                    items.push(Node::Assert(if flags.multi_line {
                        Assert::BeginLine
                    } else {
                        Assert::BeginText
                    }));
                }
                b'$' => {
                    self.pos += 1;
                    items.push(Node::Assert(if flags.multi_line {
                        Assert::EndLine
                    } else {
                        Assert::EndText
                    }));
                }
                b'\\' => self.escape_atom(flags, &mut items)?,
                _ => {
                    self.pos += 1;
                    items.push(literal(c, flags));
                }
            }
            last_repeat = None;
        }
        branches.push(concat(items));
        Ok(if branches.len() == 1 {
            branches.pop().unwrap_or(Node::Empty)
        } else {
            Node::Alternate(branches)
        })
    }

    fn close(&mut self, start: usize) -> Result<(), String> {
        if self.peek() == Some(b')') {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("missing ): {}", self.text(start, self.s.len())))
        }
    }

    /// `{n}`, `{n,}` or `{n,m}` at the cursor, consumed; `None` (cursor
    /// unspecified) when the text is not a repetition.
    fn counted(&mut self) -> Option<(u32, Option<u32>)> {
        self.pos += 1;
        let min = self.number()?;
        let max = if self.peek() == Some(b',') {
            self.pos += 1;
            if self.peek() == Some(b'}') {
                None
            } else {
                Some(self.number()?)
            }
        } else {
            Some(min)
        };
        (self.peek() == Some(b'}')).then(|| {
            self.pos += 1;
            (min, max)
        })
    }

    /// Decimal digits (RE2 allows no leading zeros beyond a single 0 and
    /// caps the value; anything over the limit is refused later).
    fn number(&mut self) -> Option<u32> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits = &self.s[start..self.pos];
        if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') {
            return None;
        }
        if digits.len() > 8 {
            return Some(u32::MAX);
        }
        std::str::from_utf8(digits).ok()?.parse().ok()
    }

    /// After `(?`: flags, a flag group, or a named group.
    fn group_options(&mut self, start: usize, flags: &mut Flags) -> Result<GroupStart, String> {
        let rest = &self.s[self.pos..];
        let named = if rest.starts_with(b"P<") {
            Some(2)
        } else if rest.starts_with(b"<") && !rest.starts_with(b"<=") && !rest.starts_with(b"<!") {
            Some(1)
        } else {
            None
        };
        if let Some(skip) = named {
            let name_start = self.pos + skip;
            let Some(end) = self.s[name_start..].iter().position(|&c| c == b'>') else {
                return Err(format!(
                    "invalid named capture group: {}",
                    self.text(start, self.s.len())
                ));
            };
            let name = &self.s[name_start..name_start + end];
            let valid = !name.is_empty() && name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
            if !valid {
                return Err(format!(
                    "invalid named capture group: {}",
                    self.text(start, name_start + end + 1)
                ));
            }
            if self.names.iter().any(|n| n == name) {
                return Err(format!(
                    "duplicate capture group name: {}",
                    String::from_utf8_lossy(name)
                ));
            }
            self.names.push(name.to_vec());
            self.pos = name_start + end + 1;
            return Ok(GroupStart::Named);
        }
        let mut new = *flags;
        let mut negated = false;
        let mut saw_flag = false;
        loop {
            let Some(c) = self.peek() else {
                return Err(format!("missing ): {}", self.text(start, self.s.len())));
            };
            self.pos += 1;
            match c {
                b'i' | b'm' | b's' | b'U' => {
                    saw_flag = true;
                    let value = !negated;
                    match c {
                        b'i' => new.fold = value,
                        b'm' => new.multi_line = value,
                        b's' => new.dot_nl = value,
                        _ => new.ungreedy = value,
                    }
                }
                b'-' if !negated => negated = true,
                b':' | b')' if !negated || saw_flag => {
                    if c == b')' {
                        *flags = new;
                        return Ok(GroupStart::Flags);
                    }
                    return Ok(GroupStart::NonCapturing(new));
                }
                _ => {
                    return Err(format!("invalid perl operator: {}", self.text(start, self.pos)));
                }
            }
        }
    }

    /// A backslash outside a class.
    fn escape_atom(&mut self, flags: Flags, items: &mut Vec<Node>) -> Result<(), String> {
        let start = self.pos;
        let next = self.s.get(self.pos + 1).copied();
        let assert = match next {
            Some(b'A') => Some(Assert::BeginText),
            Some(b'z') => Some(Assert::EndText),
            Some(b'b') => Some(Assert::WordBoundary),
            Some(b'B') => Some(Assert::NotWordBoundary),
            _ => None,
        };
        if let Some(assert) = assert {
            self.pos += 2;
            items.push(Node::Assert(assert));
            return Ok(());
        }
        match next {
            Some(b'C') => {
                self.pos += 2;
                items.push(Node::AnyByte);
                return Ok(());
            }
            Some(b'Q') => {
                self.pos += 2;
                let end = find(&self.s[self.pos..], b"\\E").map_or(self.s.len(), |i| self.pos + i);
                for &c in &self.s[self.pos..end] {
                    items.push(literal(c, flags));
                }
                self.pos = (end + 2).min(self.s.len());
                return Ok(());
            }
            _ => {}
        }
        if let Some(class) = self.class_escape(flags)? {
            items.push(class_node(class));
            return Ok(());
        }
        let byte = self.escape(start)?;
        items.push(literal(byte, flags));
        Ok(())
    }

    /// `\d`, `\pL` and the like at the cursor, consumed; `None` if the
    /// escape is not a class.
    fn class_escape(&mut self, flags: Flags) -> Result<Option<Class>, String> {
        let start = self.pos;
        let Some(&c) = self.s.get(self.pos + 1) else {
            return Err("trailing \\".into());
        };
        let perl: Option<&[(u8, u8)]> = match c.to_ascii_lowercase() {
            b'd' => Some(&[(b'0', b'9')]),
            b's' => Some(&[(b'\t', b'\n'), (0x0c, b'\r'), (b' ', b' ')]),
            b'w' => Some(&[(b'0', b'9'), (b'A', b'Z'), (b'_', b'_'), (b'a', b'z')]),
            _ => None,
        };
        if let Some(ranges) = perl {
            self.pos += 2;
            let class = normalize(ranges.to_vec());
            return Ok(Some(if c.is_ascii_uppercase() {
                negate(&class)
            } else {
                class
            }));
        }
        if c != b'p' && c != b'P' {
            return Ok(None);
        }
        self.pos += 2;
        let name = if self.peek() == Some(b'{') {
            let Some(end) = self.s[self.pos..].iter().position(|&b| b == b'}') else {
                return Err(format!(
                    "invalid character class range: {}",
                    self.text(start, self.s.len())
                ));
            };
            let name = self.text(self.pos + 1, self.pos + end);
            self.pos += end + 1;
            name
        } else {
            let Some(letter) = self.peek() else {
                return Err(format!(
                    "invalid character class range: {}",
                    self.text(start, self.pos)
                ));
            };
            self.pos += 1;
            (letter as char).to_string()
        };
        let (negated, bare) = match name.strip_prefix('^') {
            Some(bare) => (c == b'p', bare),
            None => (c == b'P', name.as_str()),
        };
        let Some(class) = unicode_class(bare) else {
            return Err(format!(
                "invalid character class range: {}",
                self.text(start, self.pos)
            ));
        };
        let class = if flags.fold { fold(&class) } else { class };
        Ok(Some(if negated { negate(&class) } else { class }))
    }

    /// A single-character escape at the cursor (after RE2's rules), consumed.
    fn escape(&mut self, start: usize) -> Result<u8, String> {
        let bad = |p: &Self, end: usize| format!("invalid escape sequence: {}", p.text(start, end));
        self.pos += 1;
        let Some(c) = self.peek() else {
            return Err("trailing \\".into());
        };
        self.pos += 1;
        match c {
            b'1'..=b'7' if !self.peek().is_some_and(|d| (b'0'..=b'7').contains(&d)) => {
                Err(bad(self, self.pos))
            }
            b'0'..=b'7' => {
                let mut code = u32::from(c - b'0');
                for _ in 0..2 {
                    match self.peek() {
                        Some(d @ b'0'..=b'7') => {
                            code = code * 8 + u32::from(d - b'0');
                            self.pos += 1;
                        }
                        _ => break,
                    }
                }
                u8::try_from(code).map_err(|_| bad(self, self.pos))
            }
            b'x' => {
                if self.peek() == Some(b'{') {
                    self.pos += 1;
                    let mut code: u32 = 0;
                    let mut digits = 0;
                    while let Some(d) = self.peek().filter(u8::is_ascii_hexdigit) {
                        self.pos += 1;
                        digits += 1;
                        code = code * 16 + (d as char).to_digit(16).unwrap_or(0);
                        if code > 0xff {
                            return Err(bad(self, self.pos));
                        }
                    }
                    if digits == 0 || self.peek() != Some(b'}') {
                        return Err(bad(self, self.pos + 1));
                    }
                    self.pos += 1;
                    return u8::try_from(code).map_err(|_| bad(self, self.pos));
                }
                let hex = self
                    .s
                    .get(self.pos..self.pos + 2)
                    .filter(|h| h.iter().all(u8::is_ascii_hexdigit));
                let Some(hex) = hex else {
                    return Err(bad(self, self.pos + 2));
                };
                self.pos += 2;
                u8::from_str_radix(&String::from_utf8_lossy(hex), 16).map_err(|_| bad(self, self.pos))
            }
            b'a' => Ok(0x07),
            b'f' => Ok(0x0c),
            b'n' => Ok(b'\n'),
            b'r' => Ok(b'\r'),
            b't' => Ok(b'\t'),
            b'v' => Ok(0x0b),
            _ if c < 0x80 && !c.is_ascii_alphanumeric() => Ok(c),
            _ => Err(bad(self, self.pos)),
        }
    }

    /// A bracketed class at the cursor.
    fn class(&mut self, flags: Flags) -> Result<Node, String> {
        let start = self.pos;
        self.pos += 1;
        let negated = self.peek() == Some(b'^');
        if negated {
            self.pos += 1;
        }
        let mut ranges: Vec<(u8, u8)> = Vec::new();
        let mut first = true;
        loop {
            let Some(c) = self.peek() else {
                return Err(format!("missing ]: {}", self.text(start, self.s.len())));
            };
            if c == b']' && !first {
                self.pos += 1;
                break;
            }
            first = false;
            if c == b'['
                && self.s.get(self.pos + 1) == Some(&b':')
                && let Some(end) = find(&self.s[self.pos + 2..], b":]")
            {
                let name = self.text(self.pos + 2, self.pos + 2 + end);
                let Some(class) = posix_class(&name) else {
                    return Err(format!(
                        "invalid character class range: {}",
                        self.text(self.pos, self.pos + end + 4)
                    ));
                };
                ranges.extend(class);
                self.pos += end + 4;
                continue;
            }
            if c == b'\\'
                && let Some(class) = self.class_escape(Flags::default())?
            {
                ranges.extend(class);
                continue;
            }
            let lo = self.class_char()?;
            if self.peek() == Some(b'-') && self.s.get(self.pos + 1).is_some_and(|&n| n != b']') {
                let dash = self.pos;
                self.pos += 1;
                let hi = self.class_char()?;
                if hi < lo {
                    return Err(format!(
                        "invalid character class range: {}",
                        self.text(dash - 1, self.pos)
                    ));
                }
                ranges.push((lo, hi));
            } else {
                ranges.push((lo, lo));
            }
        }
        let mut class = normalize(ranges);
        if flags.fold {
            class = fold(&class);
        }
        if negated {
            class = negate(&class);
        }
        Ok(class_node(class))
    }

    fn class_char(&mut self) -> Result<u8, String> {
        let start = self.pos;
        match self.peek() {
            None => Err(format!("missing ]: {}", self.rest())),
            Some(b'\\') => self.escape(start),
            Some(c) => {
                self.pos += 1;
                Ok(c)
            }
        }
    }
}

enum GroupStart {
    Flags,
    NonCapturing(Flags),
    Named,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn concat(items: Vec<Node>) -> Node {
    // RE2 flattens nested concatenations.
    let mut items: Vec<Node> = items
        .into_iter()
        .flat_map(|item| match item {
            Node::Concat(subs) => subs,
            other => vec![other],
        })
        .collect();
    match items.len() {
        0 => Node::Empty,
        1 => items.pop().unwrap_or(Node::Empty),
        _ => Node::Concat(items),
    }
}

fn repeat(sub: Node, min: u32, max: Option<u32>, flags: u8, counted: bool) -> Node {
    // RE2 squashes `(?:a*)*` into `a*`, and `(?:a+)?` (any two of `*`,
    // `+`, `?`) into `a*`, under the same flags.
    if !counted
        && let Node::Repeat {
            sub: inner,
            min: m,
            max: x,
            flags: f,
            counted: false,
        } = &sub
        && *f == flags
    {
        if (*m, *x) == (min, max) {
            return sub;
        }
        return Node::Repeat {
            sub: inner.clone(),
            min: 0,
            max: None,
            flags,
            counted: false,
        };
    }
    Node::Repeat {
        sub: Box::new(sub),
        min,
        max,
        flags,
        counted,
    }
}

/// A literal byte as RE2's parser pushes it (in Latin-1, only ASCII
/// letters have another case).
fn literal(byte: u8, flags: Flags) -> Node {
    Node::Literal {
        byte,
        fold: flags.fold,
    }
}

/// A class as RE2's parser pushes it: one character, or an ASCII letter
/// in both cases, becomes a literal; an empty one matches nothing.
fn class_node(class: Class) -> Node {
    match class.as_slice() {
        [] => Node::NoMatch,
        [(lo, hi)] if lo == hi => Node::Literal {
            byte: *lo,
            fold: false,
        },
        [(a, a2), (b, b2)]
            if a == a2 && b == b2 && a.is_ascii_uppercase() && *b == a.to_ascii_lowercase() =>
        {
            Node::Literal { byte: *b, fold: true }
        }
        _ => Node::Class(class),
    }
}

/// RE2's check of nested counted repetitions: 1000 divided by each
/// enclosing count must stay above zero.
fn repetition_budget(node: &Node, budget: u32) -> u32 {
    match node {
        Node::Repeat { sub, min, max, .. } => {
            let counted = !matches!((min, max), (0, None) | (1, None) | (0, Some(1)));
            let m = if counted { max.unwrap_or(*min) } else { 0 };
            let budget = budget.checked_div(m).unwrap_or(budget);
            repetition_budget(sub, budget).min(budget)
        }
        Node::Capture(sub) => repetition_budget(sub, budget),
        Node::Concat(subs) | Node::Alternate(subs) => subs
            .iter()
            .map(|s| repetition_budget(s, budget))
            .min()
            .unwrap_or(budget)
            .min(budget),
        _ => budget,
    }
}
