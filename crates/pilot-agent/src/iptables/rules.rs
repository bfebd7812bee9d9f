//! The capture rules as `iptables-restore` input: pure functions of a
//! [`CaptureConfig`] (and, to stay idempotent, of what `iptables-save`
//! shows is already there).
//!
//! Rules are written as `iptables-save` prints them back (matches, comment,
//! target; no quote inside comments), so [`installed`] compares them.
//!
//! Layout (Istio's `tools/istio-iptables`, in the nat table):
//! - `PREROUTING -p tcp -j ISTIO_INBOUND`: inbound ports (all but the
//!   excluded ones, or a list) jump to `ISTIO_IN_REDIRECT`, which redirects
//!   to the inbound port;
//! - `OUTPUT -p tcp -j ISTIO_OUTPUT`: excluded ports return; the proxy's own
//!   connections to a non-loopback address over `lo` (an application calling
//!   itself through its service address, sent back by Envoy to this pod) go
//!   to the inbound side; other `lo` traffic of the application and all the
//!   proxy's own traffic return (no loop); `127.0.0.1` (`::1`) returns;
//!   excluded CIDRs return; included CIDRs (or everything) jump to
//!   `ISTIO_REDIRECT`, which redirects to the outbound port.

use std::fmt::Write as _;

use super::config::{CaptureConfig, Cidr, CidrSet, PortSet};

/// The chains this module owns; nothing else is touched.
pub const CHAINS: [&str; 4] = [
    "ISTIO_INBOUND",
    "ISTIO_IN_REDIRECT",
    "ISTIO_OUTPUT",
    "ISTIO_REDIRECT",
];

/// An address family: which program applies its rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// IPv4, through `iptables-restore`.
    V4,
    /// IPv6, through `ip6tables-restore`.
    V6,
}

impl Family {
    /// The `*-save` program of this family.
    pub fn save_program(self) -> &'static str {
        match self {
            Family::V4 => "iptables-save",
            Family::V6 => "ip6tables-save",
        }
    }

    /// The `*-restore` program of this family.
    pub fn restore_program(self) -> &'static str {
        match self {
            Family::V4 => "iptables-restore",
            Family::V6 => "ip6tables-restore",
        }
    }

    fn loopback(self) -> &'static str {
        match self {
            Family::V4 => "127.0.0.1/32",
            Family::V6 => "::1/128",
        }
    }

    fn holds(self, cidr: &Cidr) -> bool {
        cidr.is_ipv6() == (self == Family::V6)
    }
}

/// The rules of one family: `(chain, rule arguments)` in order.
pub fn rules(config: &CaptureConfig, family: Family) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = Vec::new();
    // As iptables-save prints them: matches, the comment, then the target.
    let mut add = |chain: &'static str, spec: String, comment: &str| {
        let (matches, target) = match spec.split_once("-j ") {
            Some((m, t)) => (m, t),
            None => ("", spec.as_str()),
        };
        out.push((
            chain,
            format!("{matches}-m comment --comment \"pilot: {comment}\" -j {target}"),
        ));
    };
    add(
        "ISTIO_REDIRECT",
        format!("-p tcp -j REDIRECT --to-ports {}", config.outbound_port),
        "captured outbound to the proxy",
    );
    add(
        "ISTIO_IN_REDIRECT",
        format!("-p tcp -j REDIRECT --to-ports {}", config.inbound_port),
        "captured inbound to the proxy",
    );

    // Inbound.
    let inbound = match &config.inbound_ports {
        PortSet::All => true,
        PortSet::List(ports) => !ports.is_empty(),
    };
    if inbound {
        add("PREROUTING", "-p tcp -j ISTIO_INBOUND".into(), "inbound capture");
        match &config.inbound_ports {
            PortSet::All => {
                for port in &config.exclude_inbound_ports {
                    add(
                        "ISTIO_INBOUND",
                        format!("-p tcp --dport {port} -j RETURN"),
                        "excluded inbound port",
                    );
                }
                add(
                    "ISTIO_INBOUND",
                    "-p tcp -j ISTIO_IN_REDIRECT".into(),
                    "every inbound port",
                );
            }
            PortSet::List(ports) => {
                for port in ports.iter().filter(|p| !config.exclude_inbound_ports.contains(p)) {
                    add(
                        "ISTIO_INBOUND",
                        format!("-p tcp --dport {port} -j ISTIO_IN_REDIRECT"),
                        "captured inbound port",
                    );
                }
            }
        }
    }

    // Outbound.
    add("OUTPUT", "-p tcp -j ISTIO_OUTPUT".into(), "outbound capture");
    for port in &config.exclude_outbound_ports {
        add(
            "ISTIO_OUTPUT",
            format!("-p tcp --dport {port} -j RETURN"),
            "excluded outbound port",
        );
    }
    let loopback = family.loopback();
    let mut owners = vec![format!("--uid-owner {}", config.proxy_uid)];
    if let Some(gid) = config.proxy_gid {
        owners.push(format!("--gid-owner {gid}"));
    }
    for owner in &owners {
        if inbound {
            add(
                "ISTIO_OUTPUT",
                format!("! -d {loopback} -o lo -m owner {owner} -j ISTIO_IN_REDIRECT"),
                "proxy to an address of this pod: the inbound side",
            );
        }
        add(
            "ISTIO_OUTPUT",
            format!("-o lo -m owner ! {owner} -j RETURN"),
            "application over loopback",
        );
        add(
            "ISTIO_OUTPUT",
            format!("-m owner {owner} -j RETURN"),
            "traffic of the proxy itself",
        );
    }
    add("ISTIO_OUTPUT", format!("-d {loopback} -j RETURN"), "loopback");
    for cidr in config.exclude_outbound_cidrs.iter().filter(|c| family.holds(c)) {
        add(
            "ISTIO_OUTPUT",
            format!("-d {cidr} -j RETURN"),
            "excluded outbound CIDR",
        );
    }
    match &config.include_outbound_cidrs {
        CidrSet::All => add(
            "ISTIO_OUTPUT",
            "-j ISTIO_REDIRECT".into(),
            "every outbound destination",
        ),
        CidrSet::List(cidrs) => {
            for cidr in cidrs.iter().filter(|c| family.holds(c)) {
                add(
                    "ISTIO_OUTPUT",
                    format!("-d {cidr} -j ISTIO_REDIRECT"),
                    "included outbound CIDR",
                );
            }
        }
    }
    out
}

/// The `iptables-restore --noflush` input that installs the rules of one
/// family. `existing` is what `iptables-save -t nat` shows now: jumps to our
/// chains already in the built-in chains are deleted in the same
/// transaction and our chains are flushed by their declaration, so running
/// it twice leaves the same rules.
pub fn apply_script(config: &CaptureConfig, family: Family, existing: &str) -> String {
    let mut script = String::from("*nat\n");
    for chain in CHAINS {
        let _ = writeln!(script, ":{chain} - [0:0]");
    }
    for jump in our_jumps(existing) {
        let _ = writeln!(script, "-D {jump}");
    }
    for (chain, spec) in rules(config, family) {
        let _ = writeln!(script, "-A {chain} {spec}");
    }
    script.push_str("COMMIT\n");
    script
}

/// The `iptables-restore --noflush` input that removes exactly our rules
/// (jumps from built-in chains, then our chains), or `None` when
/// `existing` has none.
pub fn cleanup_script(existing: &str) -> Option<String> {
    let ours: Vec<&str> = existing_chains(existing);
    let jumps = our_jumps(existing);
    if ours.is_empty() && jumps.is_empty() {
        return None;
    }
    let mut script = String::from("*nat\n");
    for jump in jumps {
        let _ = writeln!(script, "-D {jump}");
    }
    for chain in &ours {
        let _ = writeln!(script, "-F {chain}");
    }
    for chain in &ours {
        let _ = writeln!(script, "-X {chain}");
    }
    script.push_str("COMMIT\n");
    Some(script)
}

/// The rules of ours that `existing` (`iptables-save -t nat` output) holds,
/// in its order: our chains' rules and the jumps into them.
pub fn installed(existing: &str) -> Vec<String> {
    nat_lines(existing)
        .filter_map(|line| line.strip_prefix("-A "))
        .filter(|rule| {
            let chain = rule.split_whitespace().next().unwrap_or("");
            CHAINS.contains(&chain) || jumps_to_ours(rule)
        })
        .map(str::to_string)
        .collect()
}

/// Rules of built-in chains (`PREROUTING ...`, `OUTPUT ...`) jumping to one
/// of our chains.
fn our_jumps(existing: &str) -> Vec<&str> {
    nat_lines(existing)
        .filter_map(|line| line.strip_prefix("-A "))
        .filter(|rule| {
            let chain = rule.split_whitespace().next().unwrap_or("");
            !CHAINS.contains(&chain) && jumps_to_ours(rule)
        })
        .collect()
}

fn jumps_to_ours(rule: &str) -> bool {
    let mut words = rule.split_whitespace();
    while let Some(word) = words.next() {
        if word == "-j" || word == "-g" {
            return words.next().is_some_and(|target| CHAINS.contains(&target));
        }
    }
    false
}

fn existing_chains(existing: &str) -> Vec<&'static str> {
    let declared: Vec<&str> = nat_lines(existing)
        .filter_map(|line| line.strip_prefix(':'))
        .filter_map(|rest| rest.split_whitespace().next())
        .collect();
    CHAINS.into_iter().filter(|c| declared.contains(c)).collect()
}

/// The lines of the nat table's section of an `iptables-save` output.
fn nat_lines(existing: &str) -> impl Iterator<Item = &str> {
    let mut in_nat = false;
    existing.lines().filter(move |line| {
        let line = line.trim();
        if let Some(table) = line.strip_prefix('*') {
            in_nat = table == "nat";
            return false;
        }
        if line == "COMMIT" {
            in_nat = false;
            return false;
        }
        in_nat
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAVED: &str = "# Generated by iptables-save\n*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j ISTIO_INBOUND\nCOMMIT\n*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:ISTIO_OUTPUT - [0:0]\n:ISTIO_REDIRECT - [0:0]\n:KEEP - [0:0]\n-A PREROUTING -p tcp -j KEEP\n-A OUTPUT -p tcp -m comment --comment \"pilot: outbound capture\" -j ISTIO_OUTPUT\n-A ISTIO_OUTPUT -j ISTIO_REDIRECT\n-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001\nCOMMIT\n";

    #[test]
    fn apply_deletes_the_jumps_already_there_and_nothing_else() {
        let script = apply_script(&CaptureConfig::default(), Family::V4, SAVED);
        let deletes: Vec<&str> = script.lines().filter(|l| l.starts_with("-D ")).collect();
        assert_eq!(
            deletes,
            ["-D OUTPUT -p tcp -m comment --comment \"pilot: outbound capture\" -j ISTIO_OUTPUT"]
        );
    }

    #[test]
    fn cleanup_removes_only_our_chains_and_jumps() {
        let script = cleanup_script(SAVED).unwrap();
        assert_eq!(
            script,
            "*nat\n-D OUTPUT -p tcp -m comment --comment \"pilot: outbound capture\" -j ISTIO_OUTPUT\n-F ISTIO_OUTPUT\n-F ISTIO_REDIRECT\n-X ISTIO_OUTPUT\n-X ISTIO_REDIRECT\nCOMMIT\n"
        );
        assert_eq!(
            cleanup_script("*nat\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j KEEP\nCOMMIT\n"),
            None
        );
    }

    #[test]
    fn installed_lists_our_rules_from_the_nat_table_only() {
        assert_eq!(
            installed(SAVED),
            [
                "OUTPUT -p tcp -m comment --comment \"pilot: outbound capture\" -j ISTIO_OUTPUT",
                "ISTIO_OUTPUT -j ISTIO_REDIRECT",
                "ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001",
            ]
        );
    }

    #[test]
    fn the_proxy_never_captures_itself() {
        let rules = rules(&CaptureConfig::default(), Family::V4);
        let own = rules
            .iter()
            .position(|(c, r)| *c == "ISTIO_OUTPUT" && r.starts_with("-m owner --uid-owner 1337 -m comment"))
            .expect("a return for the proxy's uid");
        let redirect = rules
            .iter()
            .position(|(c, r)| {
                *c == "ISTIO_OUTPUT" && r.ends_with("-j ISTIO_REDIRECT") && r.starts_with("-m comment")
            })
            .expect("the catch-all redirect");
        assert!(own < redirect);
    }
}
