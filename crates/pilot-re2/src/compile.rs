//! RE2's program size: the tree simplified (counted repetitions
//! expanded), compiled into RE2's instructions (Latin-1), optimized and
//! flattened as RE2 does, and the flattened instructions counted. This is
//! the number Envoy compares with `re2.max_program_size.error_level`.
//!
//! RE2's parser also factors common prefixes out of alternations and
//! merges alternated single characters into classes; that is not done
//! here, so with alternations the count is usually larger than RE2's
//! (checked against Envoy near the limit: `crates/pilot-xds/tests/
//! envoy_regex.rs`), and exact elsewhere.

use std::collections::BTreeSet;

use super::flatten::flatten;
use super::parse::{Class, NON_GREEDY, Node};
use super::simplify::{coalesce, is_anchor_end, is_anchor_start, is_empty_op, required_prefix, simplify};

/// Compiling stops past this many instructions.
const MAX_INSTRUCTIONS: usize = 4 * MAX_COUNTED;

/// Sizes over this are not computed: every consuming, capturing and
/// assertion instruction is in the flattened program at least once, so a
/// pattern with more of them is far over any limit.
pub(crate) const MAX_COUNTED: usize = 500;

/// The size of the program RE2 compiles `node` (a whole pattern) into;
/// `Err(())` when it is over [`MAX_COUNTED`].
pub(crate) fn program_size(node: &Node) -> Result<usize, ()> {
    // A pattern `^literal...` is compiled without its prefix (which RE2
    // matches separately).
    let node = required_prefix(node);
    if weight(&node) > MAX_COUNTED {
        return Err(());
    }
    let mut node = simplify(&coalesce(&node));
    let anchor_start = is_anchor_start(&mut node, 0);
    is_anchor_end(&mut node, 0);
    let mut c = Compiler {
        insts: vec![Inst::Fail],
        failed: false,
    };
    let all = c.compile(&node);
    let matched = c.push(Inst::Match);
    let m = Frag {
        begin: matched,
        end: Vec::new(),
        nullable: false,
    };
    let all = c.cat(all, m);
    let start = all.begin;
    let start_unanchored = if anchor_start {
        start
    } else {
        let dot_star = c.dot_star();
        c.cat(dot_star, all).begin
    };
    if c.failed {
        return Err(());
    }
    if start == 0 && start_unanchored == 0 {
        return Ok(1);
    }
    c.optimize(start);
    Ok(flatten(&c.insts, start_unanchored, start))
}

/// How many consuming, capturing and assertion instructions `node`
/// compiles into (repetitions expanded as [`simplify`] does), saturating.
fn weight(node: &Node) -> usize {
    match node {
        Node::NoMatch | Node::Empty => 0,
        Node::Literal { .. } | Node::Class(_) | Node::AnyChar | Node::AnyByte | Node::Assert(_) => 1,
        Node::Capture(sub) => weight(sub).saturating_add(2),
        Node::Concat(subs) if subs.contains(&Node::NoMatch) => 0,
        Node::Concat(subs) | Node::Alternate(subs) => subs.iter().fold(0, |w, s| w.saturating_add(weight(s))),
        Node::Repeat { sub, min, max, .. } => {
            let copies = if is_empty_op(sub) {
                1
            } else {
                max.unwrap_or(*min).max(1) as usize
            };
            weight(sub).saturating_mul(copies)
        }
    }
}

/// One of RE2's instructions (exits by index; 0 is Fail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inst {
    Fail,
    Match,
    Nop(usize),
    Alt(usize, usize),
    AltMatch(usize, usize),
    ByteRange(u8, u8, usize),
    Capture(usize),
    Empty(usize),
}

impl Inst {
    fn out(self) -> usize {
        match self {
            Inst::Fail | Inst::Match => 0,
            Inst::Nop(o) | Inst::ByteRange(_, _, o) | Inst::Capture(o) | Inst::Empty(o) => o,
            Inst::Alt(o, _) | Inst::AltMatch(o, _) => o,
        }
    }

    fn set_out(&mut self, to: usize) {
        match self {
            Inst::Fail | Inst::Match => {}
            Inst::Nop(o) | Inst::ByteRange(_, _, o) | Inst::Capture(o) | Inst::Empty(o) => *o = to,
            Inst::Alt(o, _) | Inst::AltMatch(o, _) => *o = to,
        }
    }
}

/// A hole to patch: an instruction and whether it is its second exit.
type Hole = (usize, bool);

struct Frag {
    begin: usize,
    end: Vec<Hole>,
    nullable: bool,
}

impl Frag {
    fn no_match() -> Self {
        Frag {
            begin: 0,
            end: Vec::new(),
            nullable: false,
        }
    }
}

struct Compiler {
    insts: Vec<Inst>,
    failed: bool,
}

impl Compiler {
    fn push(&mut self, inst: Inst) -> usize {
        if self.insts.len() >= MAX_INSTRUCTIONS {
            self.failed = true;
        }
        self.insts.push(inst);
        self.insts.len() - 1
    }

    fn patch(&mut self, holes: &[Hole], to: usize) {
        for &(id, second) in holes {
            match (&mut self.insts[id], second) {
                (Inst::Alt(_, o1) | Inst::AltMatch(_, o1), true) => *o1 = to,
                (inst, _) => inst.set_out(to),
            }
        }
    }

    fn hole(&mut self, inst: Inst, second: bool, nullable: bool) -> Frag {
        let id = self.push(inst);
        Frag {
            begin: id,
            end: vec![(id, second)],
            nullable,
        }
    }

    fn cat(&mut self, a: Frag, b: Frag) -> Frag {
        if a.begin == 0 || b.begin == 0 {
            return Frag::no_match();
        }
        if let Inst::Nop(0) = self.insts[a.begin]
            && a.end == [(a.begin, false)]
        {
            self.patch(&a.end, b.begin);
            return b;
        }
        self.patch(&a.end, b.begin);
        Frag {
            begin: a.begin,
            end: b.end,
            nullable: a.nullable && b.nullable,
        }
    }

    fn alt(&mut self, a: Frag, b: Frag) -> Frag {
        if a.begin == 0 {
            return b;
        }
        if b.begin == 0 {
            return a;
        }
        let id = self.push(Inst::Alt(a.begin, b.begin));
        let mut end = a.end;
        end.extend(b.end);
        Frag {
            begin: id,
            end,
            nullable: a.nullable || b.nullable,
        }
    }

    /// The Alt of a loop or option: `body` first when greedy.
    fn loop_alt(&mut self, body: usize, greedy: bool) -> (usize, Hole) {
        if greedy {
            let id = self.push(Inst::Alt(body, 0));
            (id, (id, true))
        } else {
            let id = self.push(Inst::Alt(0, body));
            (id, (id, false))
        }
    }

    fn plus(&mut self, a: Frag, greedy: bool) -> Frag {
        let (id, hole) = self.loop_alt(a.begin, greedy);
        self.patch(&a.end, id);
        Frag {
            begin: a.begin,
            end: vec![hole],
            nullable: a.nullable,
        }
    }

    fn star(&mut self, a: Frag, greedy: bool) -> Frag {
        if a.nullable {
            let plus = self.plus(a, greedy);
            return self.quest(plus, greedy);
        }
        let (id, hole) = self.loop_alt(a.begin, greedy);
        self.patch(&a.end, id);
        Frag {
            begin: id,
            end: vec![hole],
            nullable: true,
        }
    }

    fn quest(&mut self, a: Frag, greedy: bool) -> Frag {
        if a.begin == 0 {
            return self.hole(Inst::Nop(0), false, true);
        }
        let (id, hole) = self.loop_alt(a.begin, greedy);
        let mut end = vec![hole];
        end.extend(a.end);
        Frag {
            begin: id,
            end,
            nullable: true,
        }
    }

    fn byte_range(&mut self, lo: u8, hi: u8) -> Frag {
        self.hole(Inst::ByteRange(lo, hi, 0), false, false)
    }

    fn dot_star(&mut self) -> Frag {
        let any = self.byte_range(0, 0xff);
        self.star(any, false)
    }

    fn class(&mut self, class: &Class) -> Frag {
        let folds = folds_ascii(class);
        let mut begin = 0;
        let mut end = Vec::new();
        for &(lo, hi) in class {
            if folds && b'A' <= lo && hi <= b'Z' {
                continue;
            }
            let f = self.byte_range(lo, hi);
            end.extend(f.end);
            begin = if begin == 0 {
                f.begin
            } else {
                self.push(Inst::Alt(begin, f.begin))
            };
        }
        Frag {
            begin,
            end,
            nullable: false,
        }
    }

    fn compile(&mut self, node: &Node) -> Frag {
        if self.failed {
            return Frag::no_match();
        }
        match node {
            Node::NoMatch => Frag::no_match(),
            Node::Empty => self.hole(Inst::Nop(0), false, true),
            Node::Literal { byte, .. } => self.byte_range(*byte, *byte),
            Node::Class(class) => self.class(class),
            Node::AnyChar | Node::AnyByte => self.byte_range(0, 0xff),
            Node::Assert(_) => self.hole(Inst::Empty(0), false, true),
            Node::Capture(sub) => {
                let a = self.compile(sub);
                if a.begin == 0 {
                    return Frag::no_match();
                }
                let id = self.push(Inst::Capture(a.begin));
                let close = self.push(Inst::Capture(0));
                self.patch(&a.end, close);
                Frag {
                    begin: id,
                    end: vec![(close, false)],
                    nullable: a.nullable,
                }
            }
            Node::Concat(subs) => {
                let mut frags = subs
                    .iter()
                    .map(|s| self.compile(s))
                    .collect::<Vec<_>>()
                    .into_iter();
                let first = frags.next().unwrap_or_else(Frag::no_match);
                frags.fold(first, |f, g| self.cat(f, g))
            }
            Node::Alternate(subs) => {
                let mut frags = subs
                    .iter()
                    .map(|s| self.compile(s))
                    .collect::<Vec<_>>()
                    .into_iter();
                let first = frags.next().unwrap_or_else(Frag::no_match);
                frags.fold(first, |f, g| self.alt(f, g))
            }
            Node::Repeat {
                sub, min, max, flags, ..
            } => {
                let greedy = flags & NON_GREEDY == 0;
                let a = self.compile(sub);
                match (min, max) {
                    (0, None) => self.star(a, greedy),
                    (1, None) => self.plus(a, greedy),
                    _ => self.quest(a, greedy),
                }
            }
        }
    }

    /// RE2's `Prog::Optimize`: exits skip no-ops, and a `.*` loop that
    /// can also match becomes an AltMatch.
    fn optimize(&mut self, start: usize) {
        let skip = |insts: &[Inst], mut j: usize| {
            while j != 0
                && let Inst::Nop(next) = insts[j]
            {
                j = next;
            }
            j
        };
        let mut queue = vec![start];
        let mut seen: BTreeSet<usize> = [start].into();
        let mut i = 0;
        while i < queue.len() {
            let id = queue[i];
            i += 1;
            let out = skip(&self.insts, self.insts[id].out());
            self.insts[id].set_out(out);
            let mut next = vec![out];
            if let Inst::Alt(o, o1) = self.insts[id] {
                let o1 = skip(&self.insts, o1);
                self.insts[id] = Inst::Alt(o, o1);
                next.push(o1);
            }
            for n in next {
                if n != 0 && seen.insert(n) {
                    queue.push(n);
                }
            }
        }
        for &id in &queue {
            if let Inst::Alt(o, o1) = self.insts[id] {
                let loops = |x: usize| matches!(self.insts[x], Inst::ByteRange(0, 0xff, back) if back == id);
                if (loops(o) && self.is_match(o1)) || (self.is_match(o) && loops(o1)) {
                    self.insts[id] = Inst::AltMatch(o, o1);
                }
            }
        }
    }

    fn is_match(&self, mut id: usize) -> bool {
        loop {
            match self.insts[id] {
                Inst::Capture(o) | Inst::Nop(o) => id = o,
                Inst::Match => return true,
                _ => return false,
            }
        }
    }
}

/// RE2's `CharClass::FoldsASCII`: the class holds each ASCII letter in
/// both cases or in neither.
fn folds_ascii(class: &Class) -> bool {
    let has = |c: u8| class.iter().any(|&(lo, hi)| lo <= c && c <= hi);
    (b'A'..=b'Z').all(|c| has(c) == has(c + 32))
}
