//! RE2's rewrites of the parsed tree before compiling: the required
//! literal prefix taken apart, repeated characters coalesced, counted
//! repetitions expanded, repetitions of repetitions squashed, and the
//! anchors at either end removed.

use super::parse::{Assert, NON_GREEDY, Node};

/// RE2's `Regexp::RequiredPrefix`: `^` then a literal string is matched
/// apart; what follows is what is compiled.
pub(crate) fn required_prefix(node: &Node) -> Node {
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
pub(crate) fn coalesce(node: &Node) -> Node {
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
pub(crate) fn simplify(node: &Node) -> Node {
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
pub(crate) fn is_empty_op(node: &Node) -> bool {
    match node {
        Node::Assert(_) => true,
        Node::Concat(subs) | Node::Alternate(subs) => subs.iter().all(|s| matches!(s, Node::Assert(_))),
        _ => false,
    }
}

/// RE2's `IsAnchorStart`: a leading `^` (through concatenations and
/// groups, four deep) is removed and reported.
pub(crate) fn is_anchor_start(node: &mut Node, depth: usize) -> bool {
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
pub(crate) fn is_anchor_end(node: &mut Node, depth: usize) -> bool {
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
