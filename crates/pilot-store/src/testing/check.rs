//! How the conformance suites fail: every check names the rule it enforces
//! (as the trait documentation states it), what the rule expects, and what
//! the implementation answered, e.g.
//! `list of an unregistered kind must fail with UnknownKind: expected
//! Err(StoreError::UnknownKind { .. }), got Ok([])`.
//!
//! The helpers are `#[track_caller]`: the panic's location is the suite's
//! line, whose doc comment describes the property.

use std::fmt::Debug;

/// Fails the test: `{rule}: expected {expected}, got {got:?}`.
#[track_caller]
pub(crate) fn fail(rule: &str, expected: &str, got: impl Debug) -> ! {
    panic!("{rule}: expected {expected}, got {got:?}")
}

/// The value inside `Ok`; an `Err` fails the test with `rule`.
#[track_caller]
pub(crate) fn ok<T, E: Debug>(result: Result<T, E>, rule: &str) -> T {
    match result {
        Ok(value) => value,
        Err(error) => fail(rule, "Ok(..)", Err::<(), E>(error)),
    }
}

/// The value inside `Some`; `None` fails the test with `rule`.
#[track_caller]
pub(crate) fn some<T>(option: Option<T>, rule: &str) -> T {
    match option {
        Some(value) => value,
        None => fail(rule, "Some(..)", None::<()>),
    }
}

/// The store's answer equals `expected`, or the test fails with `rule`.
#[track_caller]
pub(crate) fn equal<T: PartialEq + Debug>(got: T, expected: T, rule: &str) {
    if got != expected {
        fail(rule, &format!("{expected:?}"), got);
    }
}

/// `holds`, or the test fails with `rule` and what was `got`:
/// `{rule}, got {got:?}` (the rule says what was expected).
#[track_caller]
pub(crate) fn holds(holds: bool, rule: &str, got: impl Debug) {
    if !holds {
        panic!("{rule}, got {got:?}");
    }
}

/// Checks that a value (borrowed, so it can be looked into afterwards)
/// matches a pattern, else fails naming the rule, the pattern expected and
/// the value got:
/// `must_match!(store.list("Nope", None).await, Err(StoreError::UnknownKind { .. }), "rule")`.
macro_rules! must_match {
    ($value:expr, $pattern:pat, $rule:expr $(,)?) => {{
        let value = &$value;
        if !matches!(value, $pattern) {
            $crate::testing::check::fail($rule, stringify!($pattern), value);
        }
    }};
}

pub(crate) use must_match;

#[cfg(test)]
mod tests {
    use pilot_model::StoreError;

    #[test]
    #[should_panic(
        expected = "list of an unregistered kind must fail with UnknownKind: expected Err(StoreError::UnknownKind { .. }), got Ok([])"
    )]
    fn a_mismatch_names_the_rule_the_pattern_and_the_answer() {
        let answer: Result<Vec<u8>, StoreError> = Ok(Vec::new());
        must_match!(
            answer,
            Err(StoreError::UnknownKind { .. }),
            "list of an unregistered kind must fail with UnknownKind"
        );
    }

    #[test]
    #[should_panic(expected = "update must keep creation_timestamp: expected Some(7), got None")]
    fn an_inequality_shows_both_values() {
        super::equal(None, Some(7), "update must keep creation_timestamp");
    }
}
