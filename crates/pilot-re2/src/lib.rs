//! Regular expressions as Envoy compiles them: Google RE2, reading the
//! pattern as Latin-1 (each byte one character), and refusing a program
//! larger than `re2.max_program_size.error_level` (100 unless the
//! operator changes Envoy's runtime).
//!
//! [`check_regex`] refuses what Envoy would refuse: RE2's syntax (no
//! look-around, no backreferences, no `\Z`, repetition counts up to 1000,
//! nested ones multiplied), and the program size, computed as RE2 computes
//! it (`parse.rs` builds RE2's tree, `simplify.rs` rewrites it as RE2 does,
//! `compile.rs` compiles it and `flatten.rs` counts the flattened program).
//!
//! ```
//! use pilot_re2::{check_regex, regex_program_size};
//! assert!(check_regex("^(.*?;)?(user=jason)(;.*)?$").is_ok());
//! assert_eq!(regex_program_size("^(.*?;)?(user=jason)(;.*)?$"), Ok(26));
//! assert!(check_regex("(?=x)a").unwrap_err().contains("invalid perl operator"));
//! assert!(check_regex("a{1001}").unwrap_err().contains("invalid repetition size"));
//! assert!(check_regex("[0-9a-f]{49}").unwrap_err().contains("program size"));
//! ```

mod class;
mod compile;
mod flatten;
mod parse;
mod simplify;
mod unicode;

/// Envoy's default `re2.max_program_size.error_level`: a larger program
/// is refused.
pub const MAX_PROGRAM_SIZE: usize = 100;

/// The size of the program RE2 compiles `pattern` into, as Envoy reads
/// it, or why RE2 refuses the pattern. Exact except for alternations,
/// where it is usually larger than RE2's (RE2 factors alternatives). Sizes
/// far over any limit are not computed: the error says so.
pub fn regex_program_size(pattern: &str) -> Result<usize, String> {
    let node = parse::parse(pattern)?;
    compile::program_size(&node).map_err(|()| {
        format!(
            "regular expression too complex: its RE2 program size is over {}, Envoy's limit is {MAX_PROGRAM_SIZE}",
            compile::MAX_COUNTED
        )
    })
}

/// `Ok` when Envoy accepts `pattern` as a regular expression; else what
/// is wrong with it.
pub fn check_regex(pattern: &str) -> Result<(), String> {
    let size = regex_program_size(pattern)?;
    if size > MAX_PROGRAM_SIZE {
        return Err(format!(
            "regular expression too complex: its RE2 program size is {size}, over Envoy's limit of {MAX_PROGRAM_SIZE}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
