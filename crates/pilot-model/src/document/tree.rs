//! YAML (and JSON, its subset) to JSON values, with the position of every
//! field, and bounds on hostile input.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};

/// A position in the source: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Position {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
}

impl Position {
    fn of(span: &Span) -> Self {
        Position {
            line: span.start.line(),
            column: span.start.col() + 1,
        }
    }
}

/// Bounds on what one input may cost to parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest input, in bytes.
    pub max_bytes: usize,
    /// Deepest nesting of mappings and sequences.
    pub max_depth: usize,
    /// Most nodes one document may hold, counting every alias expansion
    /// (this stops "billion laughs").
    pub max_nodes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 8 * 1024 * 1024,
            max_depth: 64,
            max_nodes: 1_000_000,
        }
    }
}

/// One parsed YAML document: its value, where each field came from, and
/// the problems found in its structure (duplicate keys and the like).
#[derive(Debug)]
pub(super) struct ParsedDocument {
    /// Where the document starts.
    pub start: Position,
    /// The document as JSON; `None` for an empty document.
    pub value: Option<serde_json::Value>,
    /// The position of every field and item, by path segments.
    pub positions: HashMap<Vec<String>, Position>,
    /// Problems with the document's structure, each with its position and
    /// path.
    pub problems: Vec<(Position, String, String)>,
}

/// Why the input as a whole could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fatal {
    /// Where reading stopped.
    pub position: Position,
    /// The 1-based index of the document being read.
    pub document: usize,
    /// What went wrong.
    pub message: String,
}

/// Parses every document in `text`. Documents before a fatal error are
/// returned with it, so their problems can be reported too. Positions of
/// fields are recorded only when `positions` is set: they are needed only
/// to report errors, and cost a quarter of the parse.
pub(super) fn parse(text: &str, limits: &Limits, positions: bool) -> (Vec<ParsedDocument>, Option<Fatal>) {
    let mut documents = Vec::new();
    if text.len() > limits.max_bytes {
        let fatal = Fatal {
            position: Position { line: 1, column: 1 },
            document: 1,
            message: format!("input is {} bytes; the limit is {}", text.len(), limits.max_bytes),
        };
        return (documents, Some(fatal));
    }
    let mut builder: Option<Builder> = None;
    for item in Parser::new_from_str(text) {
        let (event, span) = match item {
            Ok(item) => item,
            Err(error) => {
                let marker = error.marker();
                let fatal = Fatal {
                    position: Position {
                        line: marker.line(),
                        column: marker.col() + 1,
                    },
                    document: documents.len() + 1,
                    message: format!("YAML syntax error: {}", error.info()),
                };
                return (documents, Some(fatal));
            }
        };
        match event {
            Event::DocumentStart(_) => builder = Some(Builder::new(Position::of(&span), limits, positions)),
            Event::DocumentEnd => {
                if let Some(done) = builder.take() {
                    documents.push(done.finish());
                }
            }
            Event::StreamStart | Event::StreamEnd | Event::Nothing => {}
            event => {
                let Some(current) = builder.as_mut() else { continue };
                if let Err(message) = current.event(event, span) {
                    let fatal = Fatal {
                        position: Position::of(&span),
                        document: documents.len() + 1,
                        message,
                    };
                    return (documents, Some(fatal));
                }
            }
        }
    }
    (documents, None)
}

#[derive(Debug, Clone)]
struct Node {
    value: serde_json::Value,
    position: Position,
    /// Nodes in this subtree, for the expansion budget.
    size: usize,
}

enum Frame {
    Seq {
        items: Vec<serde_json::Value>,
        position: Position,
        anchor: usize,
        size: usize,
    },
    Map {
        entries: serde_json::Map<String, serde_json::Value>,
        position: Position,
        anchor: usize,
        size: usize,
        pending_key: Option<String>,
        seen: HashSet<String>,
    },
}

/// What a new node is to its parent.
enum Slot {
    /// The document's root.
    Root,
    /// The next item of a sequence, at this index.
    Item(usize),
    /// The key of the next mapping entry.
    Key,
    /// The value of the mapping entry with this key.
    Value(String),
}

struct Builder<'l> {
    limits: &'l Limits,
    start: Position,
    stack: Vec<Frame>,
    /// The path of the innermost open collection.
    path: Vec<String>,
    positions: HashMap<Vec<String>, Position>,
    record_positions: bool,
    root: Option<Node>,
    anchors: HashMap<usize, Node>,
    nodes: usize,
    problems: Vec<(Position, String, String)>,
}

impl<'l> Builder<'l> {
    fn new(start: Position, limits: &'l Limits, record_positions: bool) -> Self {
        Builder {
            limits,
            start,
            stack: Vec::new(),
            path: Vec::new(),
            positions: HashMap::new(),
            record_positions,
            root: None,
            anchors: HashMap::new(),
            nodes: 0,
            problems: Vec::new(),
        }
    }

    /// Takes one event; an `Err` stops the whole parse.
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), String> {
        let position = Position::of(&span);
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                self.count(1)?;
                let value = resolve(&text, style, tag.as_deref())
                    .map_err(|message| format!("{message} (at {}:{})", position.line, position.column))?;
                self.begin(position);
                self.complete(
                    Node {
                        value,
                        position,
                        size: 1,
                    },
                    anchor,
                )
            }
            Event::SequenceStart(anchor, tag) => {
                core_tag(tag.as_deref())?;
                self.open(position)?;
                self.stack.push(Frame::Seq {
                    items: Vec::new(),
                    position,
                    anchor,
                    size: 1,
                });
                Ok(())
            }
            Event::MappingStart(anchor, tag) => {
                core_tag(tag.as_deref())?;
                self.open(position)?;
                self.stack.push(Frame::Map {
                    entries: serde_json::Map::new(),
                    position,
                    anchor,
                    size: 1,
                    pending_key: None,
                    seen: HashSet::new(),
                });
                Ok(())
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Frame::Seq {
                        items,
                        position,
                        anchor,
                        size,
                    }) => (
                        Node {
                            value: serde_json::Value::Array(items),
                            position,
                            size,
                        },
                        anchor,
                    ),
                    Some(Frame::Map {
                        entries,
                        position,
                        anchor,
                        size,
                        ..
                    }) => (
                        Node {
                            value: serde_json::Value::Object(entries),
                            position,
                            size,
                        },
                        anchor,
                    ),
                    None => return Err("unbalanced YAML structure".into()),
                };
                if !self.stack.is_empty() {
                    self.path.pop();
                }
                self.complete(node, anchor)
            }
            Event::Alias(id) => {
                let size = self.anchors.get(&id).map(|node| node.size).ok_or_else(|| {
                    format!("alias at {}:{} names no anchor", position.line, position.column)
                })?;
                // Count before copying, so an expansion bomb is never built.
                self.count(size)?;
                let mut node = self.anchors[&id].clone();
                node.position = position;
                self.begin(position);
                self.complete(node, 0)
            }
            _ => Ok(()),
        }
    }

    /// Counts `n` more nodes against the document's budget.
    fn count(&mut self, n: usize) -> Result<(), String> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > self.limits.max_nodes {
            return Err(format!(
                "the document has more than {} nodes (counting alias expansions); refusing to expand it",
                self.limits.max_nodes
            ));
        }
        Ok(())
    }

    fn slot(&self) -> Slot {
        match self.stack.last() {
            None => Slot::Root,
            Some(Frame::Seq { items, .. }) => Slot::Item(items.len()),
            Some(Frame::Map {
                pending_key: None, ..
            }) => Slot::Key,
            Some(Frame::Map {
                pending_key: Some(key),
                ..
            }) => Slot::Value(key.clone()),
        }
    }

    /// Records where a sequence item starts (mapping entries are recorded
    /// at their key).
    fn begin(&mut self, position: Position) {
        if !self.record_positions {
            return;
        }
        if let Slot::Item(index) = self.slot() {
            let mut path = self.path.clone();
            path.push(index.to_string());
            self.positions.insert(path, position);
        }
    }

    /// Starts a collection: checks depth, records it, and descends.
    fn open(&mut self, position: Position) -> Result<(), String> {
        self.count(1)?;
        if self.stack.len() >= self.limits.max_depth {
            return Err(format!("nesting is deeper than {} levels", self.limits.max_depth));
        }
        self.begin(position);
        let segment = match self.slot() {
            Slot::Root => return Ok(()),
            Slot::Item(index) => index.to_string(),
            Slot::Value(key) => key,
            Slot::Key => {
                self.problems.push((
                    position,
                    render(&self.path),
                    "mapping keys must be strings".into(),
                ));
                "?".to_string()
            }
        };
        self.path.push(segment);
        Ok(())
    }

    /// Attaches a finished node to its parent (or makes it the root).
    fn complete(&mut self, node: Node, anchor: usize) -> Result<(), String> {
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        let slot = self.slot();
        let Some(parent) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        match (parent, slot) {
            (Frame::Seq { items, size, .. }, _) => {
                *size += node.size;
                items.push(node.value);
            }
            (
                Frame::Map {
                    pending_key, seen, ..
                },
                Slot::Key,
            ) => {
                let key = match node.value {
                    serde_json::Value::String(key) => key,
                    serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {
                        node.value.to_string()
                    }
                    _ => String::from("?"),
                };
                if !seen.insert(key.clone()) {
                    let mut path = self.path.clone();
                    path.push(key.clone());
                    self.problems
                        .push((node.position, render(&path), format!("duplicate key `{key}`")));
                }
                if self.record_positions {
                    let mut path = self.path.clone();
                    path.push(key.clone());
                    self.positions.insert(path, node.position);
                }
                *pending_key = Some(key);
            }
            (
                Frame::Map {
                    entries,
                    size,
                    pending_key,
                    ..
                },
                _,
            ) => {
                if let Some(key) = pending_key.take() {
                    *size += node.size;
                    entries.insert(key, node.value);
                }
            }
        }
        Ok(())
    }

    fn finish(self) -> ParsedDocument {
        // An empty document (a lone `---`) parses as a null scalar.
        let value = self.root.map(|root| root.value).filter(|v| !v.is_null());
        ParsedDocument {
            start: self.start,
            value,
            positions: self.positions,
            problems: self.problems,
        }
    }
}

/// Refuses tags outside YAML's core schema (`!!map`, `!!str`, ...).
fn core_tag(tag: Option<&Tag>) -> Result<(), String> {
    match tag {
        Some(tag) if tag.handle != "!!" && tag.handle != "tag:yaml.org,2002:" => {
            Err(format!("YAML tag {}{} is not supported", tag.handle, tag.suffix))
        }
        _ => Ok(()),
    }
}

/// A path's segments in pilot's path form (`spec.route[1].weight`).
pub(super) fn render(segments: &[String]) -> String {
    let mut path = String::new();
    for segment in segments {
        if segment.parse::<usize>().is_ok() {
            path.push_str(&format!("[{segment}]"));
        } else {
            crate::push_key(&mut path, segment);
        }
    }
    path
}

pub(crate) use crate::config::segments;

/// The value of a scalar under the YAML 1.2 core schema: plain scalars may
/// be null, booleans or numbers; quoted and block scalars are strings.
pub(super) fn resolve(
    text: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
) -> Result<serde_json::Value, String> {
    use serde_json::Value;
    core_tag(tag)?;
    if tag.is_some_and(|t| t.suffix == "str") {
        return Ok(Value::String(text.to_string()));
    }
    if style != ScalarStyle::Plain {
        return Ok(Value::String(text.to_string()));
    }
    Ok(match text {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "-.inf" | ".nan" | ".NaN" | ".NAN" => {
            return Err(format!("{text} is not a number JSON can hold"));
        }
        _ => match number(text) {
            Some(n) => Value::Number(n),
            None => Value::String(Cow::Borrowed(text).into_owned()),
        },
    })
}

/// A plain scalar as a JSON number, if it is one: decimal, `0x` and `0o`
/// integers, and decimal floats (`1.5`, `.5`, `1e3`).
fn number(text: &str) -> Option<serde_json::Number> {
    let negative = text.starts_with('-');
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    let radix = |body: &str, radix: u32| {
        i64::from_str_radix(body, radix)
            .ok()
            .map(|n| serde_json::Number::from(if negative { -n } else { n }))
    };
    if let Some(hex) = digits.strip_prefix("0x") {
        return radix(hex, 16);
    }
    if let Some(octal) = digits.strip_prefix("0o") {
        return radix(octal, 8);
    }
    let starts_like_a_number = digits.starts_with(|c: char| c.is_ascii_digit())
        || (digits.starts_with('.') && digits[1..].starts_with(|c: char| c.is_ascii_digit()));
    if !starts_like_a_number
        || !digits
            .bytes()
            .all(|b| b.is_ascii_digit() || b".eE+-".contains(&b))
    {
        return None;
    }
    if digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(n) = text.parse::<i64>() {
            return Some(n.into());
        }
        if let Ok(n) = digits.parse::<u64>()
            && !negative
        {
            return Some(n.into());
        }
    }
    serde_json::Number::from_f64(text.parse().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> ParsedDocument {
        let (mut docs, fatal) = parse(text, &Limits::default(), true);
        assert!(fatal.is_none(), "{fatal:?}");
        assert_eq!(docs.len(), 1);
        docs.remove(0)
    }

    fn at(doc: &ParsedDocument, path: &str) -> (usize, usize) {
        let p = doc.positions[&segments(path)];
        (p.line, p.column)
    }

    #[test]
    fn values_and_positions() {
        let doc = one("a: 1\nb:\n  - x: true\n    y: \"2\"\n  - ~\nc: [1.5, -3, 0x10]\nd: 'q'\n");
        assert_eq!(
            doc.value.as_ref().unwrap(),
            &serde_json::json!({"a": 1, "b": [{"x": true, "y": "2"}, null], "c": [1.5, -3, 16], "d": "q"})
        );
        assert_eq!(at(&doc, "a"), (1, 1));
        assert_eq!(at(&doc, "b[0].x"), (3, 5));
        assert_eq!(at(&doc, "b[0].y"), (4, 5));
        assert_eq!(at(&doc, "b[1]"), (5, 5));
        assert_eq!(at(&doc, "c[2]"), (6, 14));
    }

    #[test]
    fn json_is_read_too() {
        let doc = one("{\"kind\": \"RouteRule\",\n \"spec\": {\"precedence\": 2}}");
        assert_eq!(doc.value.unwrap()["spec"]["precedence"], 2);
        assert_eq!(doc.positions[&segments("spec.precedence")].line, 2);
    }

    #[test]
    fn duplicate_keys_are_problems_with_their_path() {
        let doc = one("spec:\n  a: 1\n  a: 2\n");
        assert_eq!(doc.problems.len(), 1);
        let (position, path, message) = &doc.problems[0];
        assert_eq!((position.line, position.column), (3, 3));
        assert_eq!(path, "spec.a");
        assert_eq!(message, "duplicate key `a`");
    }

    #[test]
    fn several_documents_and_empty_ones() {
        let (docs, fatal) = parse("a: 1\n---\n---\nb: 2\n", &Limits::default(), true);
        assert!(fatal.is_none());
        assert_eq!(docs.len(), 3);
        assert!(docs[1].value.is_none());
        assert_eq!(docs[2].start.line, 3);
    }

    #[test]
    fn hostile_input_is_refused() {
        let limits = Limits::default();
        let deep = "[".repeat(100_000);
        let (_, fatal) = parse(&deep, &limits, true);
        assert!(fatal.unwrap().message.contains("recursion limit"));
        let block: String = (0..100)
            .map(|depth| format!("{:width$}k{depth}:\n", "", width = depth * 2))
            .collect();
        let (_, fatal) = parse(&block, &limits, true);
        assert!(fatal.unwrap().message.contains("deeper than 64"));
        let mut laughs =
            String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
        for (i, name) in ["b", "c", "d", "e", "f", "g", "h", "i"].iter().enumerate() {
            let prev = ["a", "b", "c", "d", "e", "f", "g", "h"][i];
            laughs.push_str(&format!(
                "{name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
            ));
        }
        let (_, fatal) = parse(&laughs, &limits, true);
        assert!(
            fatal.unwrap().message.contains("counting alias expansions"),
            "billion laughs refused"
        );
        let big = "a: b\n".repeat(3_000_000);
        let (_, fatal) = parse(&big, &limits, true);
        assert!(fatal.unwrap().message.contains("the limit is"));
        let (_, fatal) = parse("a: [1, 2\nb: 3", &limits, true);
        let fatal = fatal.unwrap();
        assert!(fatal.message.starts_with("YAML syntax error"), "{fatal:?}");
    }

    #[test]
    fn small_aliases_are_fine() {
        let doc = one("base: &b {x: 1}\nother: *b\n");
        assert_eq!(doc.value.unwrap()["other"]["x"], 1);
    }

    #[test]
    fn path_segments() {
        assert_eq!(segments("spec.route[1].weight"), ["spec", "route", "1", "weight"]);
        assert_eq!(
            segments("metadata.labels[app.io/name]"),
            ["metadata", "labels", "app.io/name"]
        );
        assert_eq!(
            render(&segments("metadata.labels[app.io/name]")),
            "metadata.labels[app.io/name]"
        );
        assert_eq!(render(&segments("spec.route[1].weight")), "spec.route[1].weight");
    }
}
