//! The crate's modules import in one direction: no file imports, through
//! others, a file that imports it, and each layer imports only the
//! layers below it:
//!
//! 0. the vocabulary generation takes and gives (`error`, `names`,
//!    `proxy`, `resources`, `mesh`);
//! 1. leaf builders: Envoy messages from the model, no assembly
//!    (`build/`: clusters, listener and filter chain primitives, routes,
//!    TLS, RBAC, mutual TLS);
//! 2. sidecar assembly (`sidecar/`): a sidecar's listeners, outbound and
//!    inbound, and its Sidecar's own;
//! 3. gateway assembly (`gateway/`): an edge proxy's listeners and
//!    SNI-DNAT clusters;
//! 4. on top: scopes (`scope/`), proxyless gRPC (`grpcgen`), whole
//!    generation (`generate`), what pilot-ads assembles from
//!    (`serving`), Envoy's own check (`testing`), and what ztunnel is
//!    served (`ambient`).
//!
//! The check reads each file of `src/` (but `lib.rs`, the crate's face,
//! and unit tests: `tests.rs` files and what follows `#[cfg(test)]`, which
//! may reach anything they test), finds every path it names that starts
//! with `crate::` or `super::` (in `use` trees, braces included, and in
//! code), and takes the file each path leads to: the deepest module file
//! the path names, or, for an item `lib.rs` re-exports (`crate::Proxy`),
//! the file it re-exports it from. A failure lists every import that goes
//! up a layer and every circle of files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first, by the crate's top-level module.
const LAYERS: [&[&str]; 5] = [
    &["error", "names", "proxy", "resources", "mesh"],
    &["build"],
    &["sidecar"],
    &["gateway"],
    &["scope", "grpcgen", "generate", "serving", "testing", "ambient"],
];

#[test]
fn no_file_imports_a_file_that_imports_it_and_layers_import_downwards() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = Graph::read(&src);
    let mut problems = Vec::new();
    for (from, imports) in &graph.edges {
        for (to, path) in imports {
            let (Some(a), Some(b)) = (layer(from), layer(to)) else {
                problems.push(format!("{from} or {to} is in no layer (LAYERS in this test)"));
                continue;
            };
            if b > a {
                problems.push(format!(
                    "{from} (layer {a}) imports {to} (layer {b}) through `{path}`"
                ));
            }
        }
    }
    for circle in graph.circles() {
        problems.push(format!("a circle of imports: {}", circle.join(" -> ")));
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// The check finds what it is meant to find: a circle of three files, an
/// import up a layer, paths in braces, `super::super::` and re-exported
/// items.
#[test]
fn the_check_finds_circles_and_imports_up_a_layer() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "mod build;\nmod names;\npub use names::{Name, other};\n",
    );
    write(
        "names.rs",
        "use crate::build::a::f; // crate::scope in a comment\nconst S: &str = \"crate::generate\";\n",
    );
    write("build/mod.rs", "mod a;\nmod b;\n");
    write(
        "build/a.rs",
        "use super::{b::{g, h}, c};\nfn f() -> crate::Name { todo!() }\n",
    );
    write(
        "build/b.rs",
        "use super::super::names;\n#[cfg(test)]\nmod tests { use crate::generate; }\n",
    );
    write("build/c.rs", "");
    write("build/tests.rs", "use crate::generate;\n");
    let graph = Graph::read(dir.path());
    let edges: BTreeSet<(String, String)> = graph
        .edges
        .iter()
        .flat_map(|(from, to)| to.keys().map(move |to| (from.clone(), to.clone())))
        .collect();
    let expected: BTreeSet<(String, String)> = [
        ("names", "build::a"),
        ("build::a", "build::b"),
        ("build::a", "build::c"),
        ("build::a", "names"),
        ("build::b", "names"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(edges, expected);
    let circles = graph.circles();
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].contains(&"names".to_string()) && circles[0].contains(&"build::a".to_string()));
    assert!(layer("names").unwrap() < layer("build::a").unwrap());
}

/// The layer of a module, by its first segment.
fn layer(module: &str) -> Option<usize> {
    let top = module.split("::").next()?;
    LAYERS.iter().position(|layer| layer.contains(&top))
}

/// Each file's module and the modules (files) it imports, with a path
/// naming each.
struct Graph {
    edges: BTreeMap<String, BTreeMap<String, String>>,
}

impl Graph {
    fn read(src: &Path) -> Self {
        let mut files = BTreeMap::new();
        collect(src, src, &mut files);
        let modules: BTreeSet<String> = files.keys().cloned().collect();
        let reexports = files
            .get("")
            .map(|text| reexports(&code(text)))
            .unwrap_or_default();
        let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for (module, text) in &files {
            if module.is_empty() {
                continue;
            }
            let imports = edges.entry(module.clone()).or_default();
            let mut text = code(text);
            if let Some(at) = text.find("#[cfg(test)]") {
                text.truncate(at);
            }
            for path in paths(&text) {
                let Some(absolute) = absolute(module, &path) else {
                    continue;
                };
                let Some(target) = resolve(&absolute, &modules, &reexports) else {
                    continue;
                };
                if &target != module {
                    imports.entry(target).or_insert_with(|| path.join("::"));
                }
            }
        }
        Graph { edges }
    }

    /// Every circle: the strongly connected components of more than one
    /// file (Tarjan's algorithm).
    fn circles(&self) -> Vec<Vec<String>> {
        struct State<'a> {
            graph: &'a Graph,
            index: BTreeMap<&'a str, usize>,
            low: BTreeMap<&'a str, usize>,
            stack: Vec<&'a str>,
            on_stack: BTreeSet<&'a str>,
            found: Vec<Vec<String>>,
        }
        fn visit<'a>(state: &mut State<'a>, node: &'a str) {
            let n = state.index.len();
            state.index.insert(node, n);
            state.low.insert(node, n);
            state.stack.push(node);
            state.on_stack.insert(node);
            let graph = state.graph;
            for next in graph.edges.get(node).into_iter().flat_map(|e| e.keys()) {
                let next = next.as_str();
                if !state.index.contains_key(next) {
                    visit(state, next);
                    let low = state.low[node].min(state.low[next]);
                    state.low.insert(node, low);
                } else if state.on_stack.contains(next) {
                    let low = state.low[node].min(state.index[next]);
                    state.low.insert(node, low);
                }
            }
            if state.low[node] == state.index[node] {
                let mut component = Vec::new();
                while let Some(top) = state.stack.pop() {
                    state.on_stack.remove(top);
                    component.push(top.to_string());
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    state.found.push(component);
                }
            }
        }
        let mut state = State {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            found: Vec::new(),
        };
        for node in self.edges.keys() {
            if !state.index.contains_key(node.as_str()) {
                visit(&mut state, node);
            }
        }
        state.found
    }
}

/// The `.rs` files under `dir`, by module path (`""` for `lib.rs`,
/// `security` for `security/mod.rs`), but unit test files.
fn collect(root: &Path, dir: &Path, files: &mut BTreeMap<String, String>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(root, &path, files);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") || path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let relative = path.strip_prefix(root).unwrap().with_extension("");
        let mut segments: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if segments.last().is_some_and(|s| s == "mod" || s == "lib") {
            segments.pop();
        }
        files.insert(segments.join("::"), std::fs::read_to_string(&path).unwrap());
    }
}

/// `text` without comments and the contents of string and character
/// literals (a path written in one is no import).
fn code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident(chars.get(i.wrapping_sub(1)))
        {
            // A raw string: r"..." or r#"..."#.
            let mut hashes = 0;
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal (not a lifetime).
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident(c: Option<&char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// Every path starting with `crate::` or `super::` in `code`, a `use`
/// tree's braces expanded: `crate::a::{b, c::d}` gives `crate::a::b` and
/// `crate::a::c::d`.
fn paths(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = ["crate::", "super::"].iter().any(|p| {
            chars[i..].iter().take(p.len()).copied().eq(p.chars()) && !ident(chars.get(i.wrapping_sub(1)))
        }) && chars.get(i.wrapping_sub(1)) != Some(&':');
        if starts {
            let mut at = i;
            tree(&chars, &mut at, Vec::new(), &mut out);
            i = at.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// Reads a use tree at `at` after the segments `prefix`, adding each path
/// it ends in to `out`.
fn tree(chars: &[char], at: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    loop {
        skip_space(chars, at);
        if chars.get(*at) == Some(&'{') {
            *at += 1;
            loop {
                skip_space(chars, at);
                match chars.get(*at) {
                    Some('}') => {
                        *at += 1;
                        return;
                    }
                    Some(',') => *at += 1,
                    None => return,
                    _ => tree(chars, at, path.clone(), out),
                }
            }
        }
        let start = *at;
        while ident(chars.get(*at)) {
            *at += 1;
        }
        if start == *at {
            // `*`, or the end of the path.
            if chars.get(*at) == Some(&'*') {
                *at += 1;
            }
            out.push(path);
            return;
        }
        path.push(chars[start..*at].iter().collect());
        skip_space(chars, at);
        if chars.get(*at) == Some(&':') && chars.get(*at + 1) == Some(&':') {
            *at += 2;
            continue;
        }
        out.push(path);
        return;
    }
}

fn skip_space(chars: &[char], at: &mut usize) {
    while chars.get(*at).is_some_and(|c| c.is_whitespace()) {
        *at += 1;
    }
}

/// `path`, written in `module`, from the crate root (`crate::` and
/// `super::` resolved, `self` dropped).
fn absolute(module: &str, path: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = module.split("::").map(str::to_string).collect();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// The file (module) an absolute path leads to: the deepest module it
/// names, or the module `lib.rs` re-exports its first segment from.
fn resolve(
    path: &[String],
    modules: &BTreeSet<String>,
    reexports: &BTreeMap<String, String>,
) -> Option<String> {
    for len in (1..=path.len()).rev() {
        let candidate = path[..len].join("::");
        if modules.contains(&candidate) {
            return Some(candidate);
        }
    }
    let first = path.first()?;
    let module = reexports.get(first)?;
    resolve(
        &module.split("::").map(str::to_string).collect::<Vec<_>>(),
        modules,
        &BTreeMap::new(),
    )
}

/// The items `lib.rs` re-exports from its modules (`pub use a::{B, c}`):
/// by name, the module path they come from.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for statement in lib.split(';') {
        let statement = statement.trim();
        let Some(tree_text) = statement
            .strip_prefix("pub use ")
            .or_else(|| statement.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let chars: Vec<char> = format!("crate::{tree_text}").chars().collect();
        let mut found = Vec::new();
        tree(&chars, &mut 0, Vec::new(), &mut found);
        for path in found {
            // `crate::module::...::Item`: the item by its name.
            if let Some((item, module)) = path[1..].split_last()
                && !module.is_empty()
            {
                out.insert(item.clone(), module.join("::"));
            }
        }
    }
    out
}
