//! [`Duration`]: a protobuf-style duration that also accepts the forms
//! operators type.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use pilot_model::FieldErrors;

/// A non-negative duration with nanosecond resolution.
///
/// Accepts protobuf JSON (`"1.5s"`, `"0.100s"`) and the unit forms operators
/// type (`"100ms"`, `"2m"`, `"1h30m"`, `"250us"`); always serializes in one
/// canonical protobuf form: seconds with 0, 3, 6 or 9 fractional digits.
///
/// ```
/// use pilot_api::primitives::Duration;
/// let d: Duration = "1m30s".parse().unwrap();
/// assert_eq!(d.to_string(), "90s");
/// assert_eq!("100ms".parse::<Duration>().unwrap().to_string(), "0.100s");
/// assert_eq!("1.5s".parse::<Duration>().unwrap(), "1500ms".parse().unwrap());
/// assert!("5 parsecs".parse::<Duration>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(std::time::Duration);

impl Duration {
    /// The longest duration Envoy accepts, in whole seconds (about 292
    /// years: Envoy refuses from `i64::MAX` nanoseconds on as "Duration
    /// out-of-range", measured on Envoy 1.40 for timeouts, retries and
    /// outlier detection).
    pub const MAX_SECONDS: u64 = (i64::MAX / 1_000_000_000 - 1) as u64;

    /// A duration of `millis` milliseconds.
    pub const fn from_millis(millis: u64) -> Self {
        Duration(std::time::Duration::from_millis(millis))
    }

    /// The standard-library duration.
    pub fn as_std(self) -> std::time::Duration {
        self.0
    }

    /// Records an error at `path` unless the duration is at least 1 ms, a
    /// whole number of milliseconds (what Envoy's timeouts honour) and at
    /// most [`Duration::MAX_SECONDS`] (Envoy's limit).
    pub fn check_millis(self, path: &str, errors: &mut FieldErrors) {
        if self.0.as_secs() > Self::MAX_SECONDS {
            errors.push(
                path,
                format!(
                    "duration {self} is longer than the maximum of {}s",
                    Self::MAX_SECONDS
                ),
            );
        } else if self.0 < std::time::Duration::from_millis(1) {
            errors.push(
                path,
                format!("duration {self} is shorter than the minimum of 1ms"),
            );
        } else if !self.0.subsec_nanos().is_multiple_of(1_000_000) {
            errors.push(
                path,
                format!("duration {self} has more than millisecond precision"),
            );
        }
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Duration(d)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs();
        let nanos = self.0.subsec_nanos();
        if nanos == 0 {
            write!(f, "{secs}s")
        } else if nanos.is_multiple_of(1_000_000) {
            write!(f, "{secs}.{:03}s", nanos / 1_000_000)
        } else if nanos.is_multiple_of(1_000) {
            write!(f, "{secs}.{:06}s", nanos / 1_000)
        } else {
            write!(f, "{secs}.{nanos:09}s")
        }
    }
}

/// Why a duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseDurationError(String);

impl fmt::Display for ParseDurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseDurationError {}

const UNITS: [(&str, u128); 6] = [
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

impl FromStr for Duration {
    type Err = ParseDurationError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || {
            ParseDurationError(format!(
                "{text:?} is not a duration: use a number and a unit, such as \"1.5s\", \"100ms\", \"2m\" or \"1h30m\""
            ))
        };
        let mut rest = text.trim();
        if rest.is_empty() {
            return Err(bad());
        }
        let mut total: u128 = 0;
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(bad)?;
            let (number, tail) = rest.split_at(digits);
            let unit_len = tail
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(tail.len());
            let (unit, tail) = tail.split_at(unit_len);
            let scale = UNITS
                .iter()
                .find(|(u, _)| *u == unit)
                .map(|(_, s)| *s)
                .ok_or_else(bad)?;
            total = total
                .checked_add(scaled(number, scale).ok_or_else(bad)?)
                .ok_or_else(bad)?;
            rest = tail;
        }
        let secs = u64::try_from(total / 1_000_000_000).map_err(|_| bad())?;
        let nanos = (total % 1_000_000_000) as u32;
        Ok(Duration(std::time::Duration::new(secs, nanos)))
    }
}

/// `number` (decimal, at most one point) times `scale` nanoseconds, exactly
/// when that is a whole number of nanoseconds.
fn scaled(number: &str, scale: u128) -> Option<u128> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.len() > 18 || whole.len() > 20 {
        return None;
    }
    let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    let denominator = 10u128.pow(fraction.len() as u32);
    let fraction: u128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().ok()?
    };
    let fractional_nanos = fraction.checked_mul(scale)?;
    if !fractional_nanos.is_multiple_of(denominator) {
        return None;
    }
    whole
        .checked_mul(scale)?
        .checked_add(fractional_nanos / denominator)
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for Duration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A duration such as `1.5s`, `300ms` or `2m`.",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Duration {
        text.parse().unwrap()
    }

    #[test]
    fn forms_and_canonical_output() {
        for (input, canonical) in [
            ("1s", "1s"),
            ("1.5s", "1.500s"),
            ("0.100s", "0.100s"),
            ("100ms", "0.100s"),
            ("2m", "120s"),
            ("1h30m", "5400s"),
            ("250us", "0.000250s"),
            ("7ns", "0.000000007s"),
            (".5s", "0.500s"),
        ] {
            assert_eq!(d(input).to_string(), canonical, "{input}");
            assert_eq!(d(canonical), d(input), "canonical form parses back");
        }
        for bad in [
            "",
            "s",
            "1",
            "1x",
            "-1s",
            "1.2.3s",
            "1.5ns",
            "ms100",
            "1 s",
            "99999999999999999999999h",
        ] {
            assert!(bad.parse::<Duration>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn millisecond_rules() {
        let mut errors = FieldErrors::new();
        d("1ms").check_millis("a", &mut errors);
        d("2.5s").check_millis("b", &mut errors);
        assert!(errors.is_empty());
        d("0s").check_millis("c", &mut errors);
        d("1500us").check_millis("d", &mut errors);
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["c", "d"]);
    }
}
