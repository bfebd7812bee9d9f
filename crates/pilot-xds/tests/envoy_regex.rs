//! pilot's RE2 checks (`pilot_api::primitives::check_regex`) against the real
//! Envoy 1.40: program sizes over a generated corpus, as Envoy reports
//! them, and verdicts at Envoy's default limit around the boundary.

use std::process::Command;

use pilot_api::primitives::{MAX_PROGRAM_SIZE, check_regex, regex_program_size};
use pilot_test_support::envoy_binary;

/// A bootstrap with one route per pattern (a path regex) and the runtime's
/// program-size limits; `envoy --mode validate` on it.
fn envoy_validate(patterns: &[String], error_level: Option<u64>, warn_level: Option<u64>) -> (bool, String) {
    let routes: Vec<serde_json::Value> = patterns
        .iter()
        .enumerate()
        .map(|(i, p)| {
            serde_json::json!({
                "name": format!("r{i}"),
                "match": {"safe_regex": {"regex": p}},
                "direct_response": {"status": 200}
            })
        })
        .collect();
    let mut layer = serde_json::Map::new();
    if let Some(level) = error_level {
        layer.insert("re2.max_program_size.error_level".into(), level.into());
    }
    if let Some(level) = warn_level {
        layer.insert("re2.max_program_size.warn_level".into(), level.into());
    }
    let bootstrap = serde_json::json!({
        "layered_runtime": {"layers": [{"name": "static", "static_layer": layer}]},
        "static_resources": {"listeners": [{
            "name": "l",
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": 1}},
            "filter_chains": [{"filters": [{
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "stat_prefix": "regex",
                    "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
                    "route_config": {"virtual_hosts": [{"name": "v", "domains": ["*"], "routes": routes}]}
                }
            }]}]
        }]}
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bootstrap.json");
    std::fs::write(&path, bootstrap.to_string()).unwrap();
    let output = Command::new(envoy_binary())
        .args(["--mode", "validate", "--log-level", "warn", "-c"])
        .arg(&path)
        .output()
        .expect("run envoy (scripts/install-deps installs it)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// Envoy's reported program size of each pattern, in order (every
/// pattern must be one RE2 accepts).
fn envoy_sizes(patterns: &[String]) -> Vec<usize> {
    let (ok, text) = envoy_validate(patterns, Some(1_000_000), Some(0));
    assert!(ok, "{text}");
    let sizes: Vec<usize> = text
        .lines()
        .filter_map(|line| {
            let (_, rest) = line.split_once("RE2 program size of ")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .collect();
    assert_eq!(sizes.len(), patterns.len(), "{text}");
    sizes
}

/// A small deterministic generator (xorshift) of RE2 patterns.
struct Patterns(u64);

impl Patterns {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn atom(&mut self, depth: u32, alternation: bool) -> String {
        const ATOMS: &[&str] = &[
            "a",
            "b",
            "x",
            "/",
            "-",
            "\\.",
            ".",
            "(?s:.)",
            "\\d",
            "\\w",
            "\\s",
            "\\W",
            "[a-z]",
            "[^/]",
            "[0-9a-f]",
            "[A-Za-z_]",
            "\\b",
            "^",
            "$",
            "é",
            "[[:alpha:]]",
            "\\pL",
            "\\C",
        ];
        match self.next(if depth > 2 { 3 } else { 6 }) {
            0..=2 => ATOMS[self.next(ATOMS.len() as u64) as usize].to_string(),
            3 => format!("({})", self.concat(depth + 1, alternation)),
            4 => format!("(?:{})", self.concat(depth + 1, alternation)),
            _ if alternation => format!(
                "(?:{}|{})",
                self.concat(depth + 1, alternation),
                self.concat(depth + 1, alternation)
            ),
            _ => format!("(?i:{})", self.concat(depth + 1, alternation)),
        }
    }

    fn piece(&mut self, depth: u32, alternation: bool) -> String {
        let atom = self.atom(depth, alternation);
        let op = match self.next(12) {
            0 => "*".to_string(),
            1 => "+".to_string(),
            2 => "?".to_string(),
            3 => "*?".to_string(),
            4 => format!("{{{}}}", self.next(4) + 1),
            5 => format!("{{{},{}}}", self.next(3), self.next(3) + 3),
            6 => format!("{{{},}}", self.next(3) + 1),
            _ => String::new(),
        };
        if atom == "^" || atom == "$" || atom == "\\b" {
            return atom;
        }
        atom + &op
    }

    fn concat(&mut self, depth: u32, alternation: bool) -> String {
        let n = self.next(4) + 1;
        (0..n).map(|_| self.piece(depth, alternation)).collect()
    }
}

#[test]
fn program_sizes_are_envoys_over_a_generated_corpus() {
    let mut generator = Patterns(0x9e37_79b9_7f4a_7c15);
    // Patterns too large to count (far over the limit) are left out.
    let exact: Vec<String> = (0..400)
        .map(|_| generator.concat(0, false))
        .filter(|p| regex_program_size(p).is_ok())
        .collect();
    assert!(exact.len() > 300, "{}", exact.len());
    let ours: Vec<usize> = exact.iter().map(|p| regex_program_size(p).unwrap()).collect();
    let envoy = envoy_sizes(&exact);
    let wrong: Vec<String> = exact
        .iter()
        .zip(ours.iter().zip(&envoy))
        .filter(|(_, (ours, envoy))| ours != envoy)
        .map(|(p, (ours, envoy))| format!("{p:?}: Envoy {envoy}, pilot {ours}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {} differ: {wrong:#?}",
        wrong.len(),
        exact.len()
    );

    // With alternations (which RE2 factors) the count may differ; it is
    // never below Envoy's where that could change the verdict.
    let alternations: Vec<String> = (0..250)
        .map(|_| generator.concat(0, true))
        .filter(|p| regex_program_size(p).is_ok())
        .collect();
    assert!(alternations.len() > 150, "{}", alternations.len());
    let envoy = envoy_sizes(&alternations);
    let below: Vec<String> = alternations
        .iter()
        .zip(envoy)
        .filter_map(|(p, envoy)| {
            let ours = regex_program_size(p).unwrap();
            (ours < envoy && ours <= 2 * MAX_PROGRAM_SIZE)
                .then(|| format!("{p:?}: Envoy {envoy}, pilot {ours}"))
        })
        .collect();
    assert!(below.is_empty(), "{below:#?}");
}

#[test]
fn envoy_accepts_what_pilot_accepts_and_refuses_what_it_refuses_at_the_limit() {
    // Families whose size grows with n, across the default limit.
    let families: [fn(usize) -> String; 6] = [
        |n| format!("[0-9a-f]{{{n}}}"),
        |n| format!("a{{{n}}}"),
        |n| format!("^/api/v[0-9]+/{}$", "[a-z]".repeat(n)),
        |n| format!("(x.){{{n}}}"),
        |n| format!("(?i)user={}", "x?".repeat(n)),
        |n| format!("(GET|POST){{{n}}}"),
    ];
    let mut accepted = Vec::new();
    let mut refused = Vec::new();
    for family in families {
        for n in 1..120 {
            let pattern = family(n);
            let Ok(size) = regex_program_size(&pattern) else {
                continue;
            };
            if size.abs_diff(MAX_PROGRAM_SIZE) > 6 {
                continue;
            }
            if check_regex(&pattern).is_ok() {
                accepted.push(pattern);
            } else {
                refused.push(pattern);
            }
        }
    }
    assert!(
        accepted.len() > 10 && refused.len() > 10,
        "{accepted:?} {refused:?}"
    );
    let (ok, text) = envoy_validate(&accepted, None, None);
    assert!(ok, "Envoy refused a pattern pilot accepts: {text}");
    for pattern in refused.iter().filter(|p| !p.contains('|')) {
        let (ok, text) = envoy_validate(std::slice::from_ref(pattern), None, None);
        assert!(!ok && text.contains("program size"), "{pattern:?}: {text}");
    }
}

#[test]
fn envoy_refuses_what_pilot_refuses_as_syntax() {
    for pattern in [
        "(", "(?=x)a", "(?!x)", "(?<=a)b", "\\1", "a{1001}", "a**", "\\Z", "[z-a]", "\\x{100}", "(?P=n)",
    ] {
        let ours = check_regex(pattern);
        assert!(ours.is_err(), "{pattern:?}");
        let (ok, text) = envoy_validate(&[pattern.to_string()], None, None);
        assert!(!ok, "{pattern:?}: {text}");
    }
}
