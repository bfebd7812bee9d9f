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

use std::collections::{BTreeMap, BTreeSet};

use super::parse::{Assert, Class, NON_GREEDY, Node};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inst {
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

/// RE2's `Prog::Flatten`, counting the instructions it emits.
fn flatten(insts: &[Inst], start_unanchored: usize, start: usize) -> usize {
    // Roots: Fail, both starts, and every exit of a consuming instruction.
    let mut roots: Vec<usize> = vec![0];
    let mut is_root: BTreeSet<usize> = [0].into();
    for s in [start_unanchored, start] {
        if is_root.insert(s) {
            roots.push(s);
        }
    }
    let mut preds: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut reachable = BTreeSet::new();
    let mut stack = vec![start_unanchored];
    while let Some(mut id) = stack.pop() {
        while reachable.insert(id) {
            match insts[id] {
                Inst::Alt(o, o1) | Inst::AltMatch(o, o1) => {
                    preds.entry(o).or_default().push(id);
                    preds.entry(o1).or_default().push(id);
                    stack.push(o1);
                    id = o;
                }
                Inst::ByteRange(_, _, o) | Inst::Capture(o) | Inst::Empty(o) => {
                    if is_root.insert(o) {
                        roots.push(o);
                    }
                    id = o;
                }
                Inst::Nop(o) => id = o,
                Inst::Match | Inst::Fail => break,
            }
        }
    }
    // Dominator roots, from the highest-numbered root down (not the
    // starts, not Fail).
    let mut sorted: Vec<usize> = is_root.iter().copied().collect();
    sorted.sort_unstable();
    for &root in sorted.iter().skip(1).rev() {
        if root == start_unanchored || root == start {
            continue;
        }
        let seen = epsilon_closure(insts, root, &is_root);
        for &id in &seen {
            if let Some(ps) = preds.get(&id)
                && ps.iter().any(|p| !seen.contains(p))
                && is_root.insert(id)
            {
                roots.push(id);
            }
        }
    }
    roots.iter().map(|&root| list_len(insts, root, &is_root)).sum()
}

/// What a list's walk from `root` visits: through Alts and Nops, stopping
/// at (but including) other roots and consuming instructions.
fn epsilon_closure(insts: &[Inst], root: usize, is_root: &BTreeSet<usize>) -> BTreeSet<usize> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![root];
    while let Some(mut id) = stack.pop() {
        while seen.insert(id) {
            if id != root && is_root.contains(&id) {
                break;
            }
            match insts[id] {
                Inst::Alt(o, o1) | Inst::AltMatch(o, o1) => {
                    stack.push(o1);
                    id = o;
                }
                Inst::Nop(o) => id = o,
                _ => break,
            }
        }
    }
    seen
}

/// How many instructions the list of `root` holds once flattened.
fn list_len(insts: &[Inst], root: usize, is_root: &BTreeSet<usize>) -> usize {
    epsilon_closure(insts, root, is_root)
        .into_iter()
        .map(|id| {
            if id != root && is_root.contains(&id) {
                return 1;
            }
            match insts[id] {
                Inst::AltMatch(..) => 1,
                Inst::Alt(..) | Inst::Nop(_) => 0,
                _ => 1,
            }
        })
        .sum()
}

/// RE2's `Regexp::RequiredPrefix`: `^` then a literal string is matched
/// apart; what follows is what is compiled.
fn required_prefix(node: &Node) -> Node {
    let Node::Concat(subs) = node else {
        return node.clone();
    };
    let anchors = subs
        .iter()
        .take_while(|s| matches!(s, Node::Assert(Assert::BeginText)))
        .count();
    if anchors == 0 || anchors >= subs.len() {
        return node.clone();
    }
    let Node::Literal { fold, .. } = subs[anchors] else {
        return node.clone();
    };
    let literals = subs[anchors..]
        .iter()
        .take_while(|s| matches!(s, Node::Literal { fold: f, .. } if *f == fold))
        .count();
    let rest: Vec<Node> = subs[anchors + literals..].to_vec();
    match rest.len() {
        0 => Node::Empty,
        1 => rest.into_iter().next().unwrap_or(Node::Empty),
        _ => Node::Concat(rest),
    }
}

/// RE2's `CoalesceWalker`: in a concatenation, a repeated character
/// followed by the same character (or a repetition of it) becomes one
/// counted repetition (`a+a?` is `a{1,2}`).
fn coalesce(node: &Node) -> Node {
    match node {
        Node::Capture(sub) => Node::Capture(Box::new(coalesce(sub))),
        Node::Alternate(subs) => Node::Alternate(subs.iter().map(coalesce).collect()),
        Node::Repeat {
            sub,
            min,
            max,
            flags,
            counted,
        } => Node::Repeat {
            sub: Box::new(coalesce(sub)),
            min: *min,
            max: *max,
            flags: *flags,
            counted: *counted,
        },
        Node::Concat(subs) => {
            let mut subs: Vec<Node> = subs.iter().map(coalesce).collect();
            if !(0..subs.len().saturating_sub(1)).any(|i| can_coalesce(&subs[i], &subs[i + 1])) {
                return Node::Concat(subs);
            }
            for i in 0..subs.len() - 1 {
                if !can_coalesce(&subs[i], &subs[i + 1]) {
                    continue;
                }
                let Node::Repeat {
                    sub, min, max, flags, ..
                } = std::mem::replace(&mut subs[i], Node::Empty)
                else {
                    continue;
                };
                let (add_min, add_max) = match &subs[i + 1] {
                    Node::Repeat { min, max, .. } => (*min, *max),
                    _ => (1, Some(1)),
                };
                let max = match (max, add_max) {
                    (Some(a), Some(b)) => Some(a + b),
                    _ => None,
                };
                subs[i + 1] = Node::Repeat {
                    sub,
                    min: min + add_min,
                    max,
                    flags,
                    counted: true,
                };
            }
            subs.retain(|s| *s != Node::Empty);
            Node::Concat(subs)
        }
        other => other.clone(),
    }
}

fn can_coalesce(r1: &Node, r2: &Node) -> bool {
    let Node::Repeat { sub, flags, .. } = r1 else {
        return false;
    };
    if !matches!(
        **sub,
        Node::Literal { .. } | Node::Class(_) | Node::AnyChar | Node::AnyByte
    ) {
        return false;
    }
    match r2 {
        Node::Repeat {
            sub: sub2,
            flags: flags2,
            ..
        } => sub == sub2 && (flags ^ flags2) & NON_GREEDY == 0,
        other => **sub == *other,
    }
}

/// RE2's simplification: counted repetitions expanded, repetitions of
/// empty-width assertions bounded, `x**` squashed.
fn simplify(node: &Node) -> Node {
    match node {
        Node::Capture(sub) => Node::Capture(Box::new(simplify(sub))),
        Node::Concat(subs) => Node::Concat(subs.iter().map(simplify).collect()),
        Node::Alternate(subs) => Node::Alternate(subs.iter().map(simplify).collect()),
        Node::Repeat {
            sub,
            min,
            max,
            flags,
            counted: false,
        } => {
            let sub = simplify(sub);
            if sub == Node::Empty {
                return Node::Empty;
            }
            if let Node::Repeat {
                min: m,
                max: x,
                flags: f,
                counted: false,
                ..
            } = &sub
                && (*m, *x) == (*min, *max)
                && f == flags
            {
                return sub;
            }
            Node::Repeat {
                sub: Box::new(sub),
                min: *min,
                max: *max,
                flags: *flags,
                counted: false,
            }
        }
        Node::Repeat {
            sub,
            min,
            max,
            flags,
            counted: true,
        } => {
            let sub = simplify(sub);
            if sub == Node::Empty {
                return Node::Empty;
            }
            let (mut min, mut max) = (*min, *max);
            if is_empty_op(&sub) {
                min = min.min(1);
                max = max.map(|m| m.min(1));
            }
            let flags = *flags;
            match max {
                None if min == 0 => star_plus_quest(sub, 0, None, flags),
                None if min == 1 => star_plus_quest(sub, 1, None, flags),
                None => {
                    let mut subs: Vec<Node> = (0..min - 1).map(|_| sub.clone()).collect();
                    subs.push(star_plus_quest(sub, 1, None, flags));
                    Node::Concat(subs)
                }
                Some(0) => Node::Empty,
                Some(1) if min == 1 => sub,
                Some(max) => {
                    let mut subs: Vec<Node> = (0..min).map(|_| sub.clone()).collect();
                    if max > min {
                        let mut suffix = star_plus_quest(sub.clone(), 0, Some(1), flags);
                        for _ in min + 1..max {
                            suffix =
                                star_plus_quest(Node::Concat(vec![sub.clone(), suffix]), 0, Some(1), flags);
                        }
                        subs.push(suffix);
                    }
                    if subs.len() == 1 {
                        subs.pop().unwrap_or(Node::Empty)
                    } else {
                        Node::Concat(subs)
                    }
                }
            }
        }
        other => other.clone(),
    }
}

/// RE2's `Regexp::Star`, `Plus` and `Quest`, which squash a repetition of
/// a repetition under the same flags (`(a*)?` is `a*`).
fn star_plus_quest(sub: Node, min: u32, max: Option<u32>, flags: u8) -> Node {
    if let Node::Repeat {
        sub: inner,
        min: m,
        max: x,
        flags: f,
        counted: false,
    } = &sub
        && *f == flags
    {
        if (*m, *x) == (min, max) || (*m, *x) == (0, None) {
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
        counted: false,
    }
}

/// RE2's `IsEmptyOp` as `SimplifyRepeat` uses it: an assertion, or a
/// concatenation or alternation of assertions only.
fn is_empty_op(node: &Node) -> bool {
    match node {
        Node::Assert(_) => true,
        Node::Concat(subs) | Node::Alternate(subs) => subs.iter().all(|s| matches!(s, Node::Assert(_))),
        _ => false,
    }
}

/// RE2's `IsAnchorStart`: a leading `^` (through concatenations and
/// groups, four deep) is removed and reported.
fn is_anchor_start(node: &mut Node, depth: usize) -> bool {
    if depth >= 4 {
        return false;
    }
    match node {
        Node::Concat(subs) => subs.first_mut().is_some_and(|s| is_anchor_start(s, depth + 1)),
        Node::Capture(sub) => is_anchor_start(sub, depth + 1),
        Node::Assert(Assert::BeginText) => {
            *node = Node::Empty;
            true
        }
        _ => false,
    }
}

/// RE2's `IsAnchorEnd`, for a trailing `$`.
fn is_anchor_end(node: &mut Node, depth: usize) -> bool {
    if depth >= 4 {
        return false;
    }
    match node {
        Node::Concat(subs) => subs.last_mut().is_some_and(|s| is_anchor_end(s, depth + 1)),
        Node::Capture(sub) => is_anchor_end(sub, depth + 1),
        Node::Assert(Assert::EndText) => {
            *node = Node::Empty;
            true
        }
        _ => false,
    }
}
