//! RE2's `Prog::Flatten`, counting: the program becomes lists (one per
//! root: Fail, the starts, every exit of a consuming instruction, and
//! the dominator roots of loops), each holding the instructions its
//! root reaches through Alts and Nops, and a Nop for each other root.

use std::collections::{BTreeMap, BTreeSet};

use super::compile::Inst;

/// RE2's `Prog::Flatten`, counting the instructions it emits.
pub(crate) fn flatten(insts: &[Inst], start_unanchored: usize, start: usize) -> usize {
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
