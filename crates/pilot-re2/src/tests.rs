//! Program sizes and refusals, as Envoy 1.40 reported them (its
//! `re2.max_program_size` messages, the runtime limits lowered to see
//! every size).

use super::*;

/// (pattern, the program size Envoy reported).
pub(crate) const SIZES: &[(&str, usize)] = &[
    ("a", 5),
    ("abc", 7),
    ("^(.*?;)?(user=jason)(;.*)?$", 26),
    (".", 6),
    ("[a-z]+", 6),
    ("^a", 4),
    ("a$", 5),
    ("^a$", 4),
    ("a*", 5),
    ("a+", 6),
    ("a?", 6),
    ("(a)", 7),
    ("(?:a)", 5),
    ("a*b", 6),
    ("a+b", 7),
    ("a?b", 7),
    ("ab*c", 7),
    ("[ab]", 5),
    ("[a-c]", 5),
    ("[a-cx-z]", 6),
    ("\\d", 5),
    ("\\w", 7),
    ("\\s", 7),
    ("[^a]", 6),
    ("é", 6),
    ("(?i)a", 5),
    ("(?i)ab", 6),
    ("a{3}", 7),
    ("a{2,4}", 10),
    ("a{2,}", 7),
    ("\\b", 5),
    ("x\\by", 7),
    ("a.b", 8),
    ("(?s).a", 6),
    ("/api/v[0-9]+/users/[0-9]+", 21),
    ("a*?", 5),
    (".*", 6),
    ("^.*$", 4),
    ("abcdefghij", 14),
    ("[0-9a-f]{8}", 20),
    ("ab", 6),
    ("[^\\n]", 6),
    ("(?s).", 5),
    ("[α-ω]", 6),
    ("α", 6),
    ("[a-zα]", 7),
    ("a.b.c", 11),
    ("(?:ab)*", 6),
    ("(?:a*)*", 5),
    ("(a*)+", 8),
    ("x*y*z*", 9),
    ("\\pL", 11),
    ("\\x{41}", 5),
    ("\\x41", 5),
    ("\\x{FF}", 5),
    ("Ā", 6),
    ("\\p{Greek}", 1),
    ("\\C", 5),
    ("(?P<n>a)", 7),
    ("(?<n>a)", 7),
    ("[[:alpha:]]", 5),
    ("\\Q.\\E", 5),
    ("a{300}", 304),
    ("a{2,300}", 602),
    ("\\z", 4),
    ("(?U)a*", 5),
    ("[a&&b]", 6),
    ("\\pN", 8),
    ("\\b{start}", 12),
    ("[[a]]", 7),
    ("\\<", 5),
    ("\\0", 5),
];

/// Alternations: RE2 factors them, so the count here is an upper bound.
const ALTERNATIONS: &[(&str, usize)] = &[
    ("ab|cd", 8),
    ("a|b", 5),
    ("(a|b|c|d)", 7),
    ("(ab|ac)", 8),
    ("a|bc", 7),
    ("abc|abd", 7),
];

/// Patterns RE2 refuses, with the start of Envoy's message.
const REFUSED: &[(&str, &str)] = &[
    ("(unclosed", "missing )"),
    ("a{1001}", "invalid repetition size"),
    ("(?=x)a", "invalid perl operator"),
    ("\\x{100}", "invalid escape sequence"),
    ("\\x{FFF}", "invalid escape sequence"),
    ("a**", "bad repetition operator"),
    ("\\Z", "invalid escape sequence"),
    ("x{1,2}{3}", "bad repetition operator"),
    ("(?x)a b", "invalid perl operator"),
    ("\\u0041", "invalid escape sequence"),
    ("\\8", "invalid escape sequence"),
];

#[test]
fn sizes_far_over_the_limit_are_refused_without_counting() {
    // Envoy: 1004 and 2002.
    for pattern in ["a{1000}", "a{2,1000}", "(?:a?){0,1000}", "(((a{10}){10}){10})"] {
        let err = regex_program_size(pattern).unwrap_err();
        assert!(err.contains("too complex"), "{pattern}: {err}");
    }
}

#[test]
fn a_literal_prefix_is_not_in_the_program() {
    let long = format!("^{}$", "a".repeat(600));
    assert_eq!(regex_program_size(&long), Ok(4));
}

#[test]
fn sizes_are_envoys() {
    let wrong: Vec<String> = SIZES
        .iter()
        .filter_map(|&(pattern, envoy)| {
            let ours = regex_program_size(pattern);
            (ours != Ok(envoy)).then(|| format!("{pattern:?}: Envoy {envoy}, here {ours:?}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn alternations_are_never_counted_smaller() {
    for &(pattern, envoy) in ALTERNATIONS {
        let ours = regex_program_size(pattern).unwrap();
        assert!(ours >= envoy, "{pattern:?}: Envoy {envoy}, here {ours}");
    }
}

#[test]
fn refusals_are_envoys() {
    for &(pattern, message) in REFUSED {
        let err = check_regex(pattern).expect_err(pattern);
        assert!(err.starts_with(message), "{pattern:?}: {err}");
    }
}
