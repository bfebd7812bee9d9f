//! Writing objects back as YAML documents that [`parse`](super::parse)
//! reads to the same objects.

use std::fmt::Write;

use saphyr_parser::ScalarStyle;
use serde_json::Value;

use super::tree::resolve;
use crate::DynConfig;

/// The objects as a stream of YAML documents separated by `---`.
///
/// ```
/// use pilot_model::{KindRegistry, KindSchema, document};
/// let registry = KindRegistry::new();
/// registry.register_schema(KindSchema::new("Quota", "quotas", "example.com", "v1", |_, _| {})).unwrap();
/// let text = "kind: Quota\napiVersion: example.com/v1\nmetadata: {name: q}\nspec: {limits: {cpu: 2}}\n";
/// let objects = document::parse("in.yaml", text, &registry).unwrap();
/// let yaml = document::to_yaml(&objects);
/// assert_eq!(document::parse("out.yaml", &yaml, &registry).unwrap(), objects);
/// ```
pub fn to_yaml(configs: &[DynConfig]) -> String {
    let mut out = String::new();
    for (i, config) in configs.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        let value = serde_json::to_value(config).unwrap_or(Value::Null);
        out.push_str(&to_yaml_value(&value));
    }
    out
}

/// Any JSON value as a YAML document (block style, keys in order).
pub fn to_yaml_value(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => write_map(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => write_seq(&mut out, items, 0),
        scalar => {
            out.push_str(&inline(scalar));
            out.push('\n');
        }
    }
    out
}

fn write_map(out: &mut String, map: &serde_json::Map<String, Value>, indent: usize) {
    for (key, value) in map {
        let _ = write!(out, "{:indent$}{}:", "", scalar_string(key));
        write_child(out, value, indent);
    }
}

fn write_seq(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        let _ = write!(out, "{:indent$}-", "");
        match item {
            Value::Object(map) if !map.is_empty() => {
                // The first entry shares the dash's line; the rest align with it.
                let mut nested = String::new();
                write_map(&mut nested, map, indent + 2);
                out.push(' ');
                out.push_str(&nested[indent + 2..]);
            }
            Value::Array(inner) if !inner.is_empty() => {
                out.push('\n');
                write_seq(out, inner, indent + 2);
            }
            scalar => {
                out.push(' ');
                out.push_str(&inline(scalar));
                out.push('\n');
            }
        }
    }
}

fn write_child(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write_map(out, map, indent + 2);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            write_seq(out, items, indent);
        }
        scalar => {
            out.push(' ');
            out.push_str(&inline(scalar));
            out.push('\n');
        }
    }
}

fn inline(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => scalar_string(s),
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
    }
}

/// A string as a plain scalar when that reads back as the same string,
/// otherwise double-quoted (JSON escapes are valid YAML escapes).
fn scalar_string(s: &str) -> String {
    if is_plain_safe(s) {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
    }
}

fn is_plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    let indicator = "-?:,[]{}#&*!|>'\"%@`".contains(first);
    let reads_back = matches!(resolve(s, ScalarStyle::Plain, None), Ok(Value::String(ref t)) if t == s);
    !indicator
        && reads_back
        && !other_type_elsewhere(s)
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with(':')
        && !s.starts_with(' ')
        && !s.ends_with(' ')
        && s.chars().all(|c| !c.is_control() && c != '\u{feff}')
}

/// Whether a YAML reader other than ours could take the plain scalar `s`
/// for something other than a string: YAML 1.1's booleans (`yes`, `no`,
/// `on`, `off`, `y`, `n` in any case), nulls (`~`, `null`), integers
/// (decimal, `0x`, `0b`, octal `0…`, sexagesimal `1:30`, with `_`), floats
/// (`1.5`, `.5`, `1e3`, `1.2.3` by 1.1's pattern, `.inf`, `.nan`),
/// timestamps (`2001-12-14…`), the merge key `<<` and the value key `=`;
/// YAML 1.2's are among them. PyYAML and Go's yaml (kubectl) read 1.1.
/// A superset, so that such strings are written quoted.
fn other_type_elsewhere(s: &str) -> bool {
    const WORDS: [&str; 11] = [
        "y", "n", "yes", "no", "true", "false", "on", "off", "null", "~", "<<",
    ];
    let lower = s.to_ascii_lowercase();
    if WORDS.contains(&lower.as_str()) || s == "=" {
        return true;
    }
    let unsigned = lower.strip_prefix(['+', '-']).unwrap_or(&lower);
    if matches!(unsigned, ".inf" | ".nan") {
        return true;
    }
    // A timestamp starts with a four-digit year and a dash.
    let bytes = s.as_bytes();
    if bytes.len() >= 5 && bytes[..4].iter().all(u8::is_ascii_digit) && bytes[4] == b'-' {
        return true;
    }
    // Numbers of either version: a digit or a point first, then only what
    // their patterns are made of.
    unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && unsigned
            .chars()
            .all(|c| c.is_ascii_hexdigit() || "xob_.:+-".contains(c))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Strings YAML 1.1 or 1.2 readers resolve to booleans, nulls, numbers
    /// or timestamps are quoted; ordinary strings stay plain.
    #[test]
    fn strings_another_reader_would_retype_are_quoted() {
        for s in [
            "yes",
            "Yes",
            "NO",
            "on",
            "Off",
            "y",
            "N",
            "true",
            "False",
            "~",
            "null",
            "NULL",
            "80",
            "-1",
            "+12",
            "0x1F",
            "0o17",
            "0755",
            "0b101",
            "1_000",
            "1:30",
            "1.5",
            ".5",
            "1e3",
            "1.2.3",
            "127.0.0.1",
            ".inf",
            "-.Inf",
            ".NaN",
            "2001-12-14",
            "2001-12-14t21:59:43.10-05:00",
            "<<",
            "=",
        ] {
            let text = to_yaml_value(&json!({ "v": s }));
            assert_eq!(text, format!("v: {}\n", serde_json::to_string(s).unwrap()), "{s}");
        }
        for s in [
            "reviews",
            "v1",
            "5s",
            "yesterday",
            "none",
            "off-mesh",
            "e1",
            ".hidden",
            "a.b.c",
            "ISTIO_MUTUAL",
        ] {
            assert_eq!(to_yaml_value(&json!({ "v": s })), format!("v: {s}\n"), "{s}");
        }
    }
}
