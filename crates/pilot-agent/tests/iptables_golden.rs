//! The capture rules for option combinations, pinned as golden files in
//! `tests/golden/iptables/` (`UPDATE_GOLDEN=1` rewrites them after a
//! deliberate change; review the diff).

use std::path::PathBuf;

use pilot_agent::iptables::config::{parse_cidr_set, parse_cidrs, parse_port_set, parse_ports};
use pilot_agent::iptables::{CaptureConfig, Family, PortSet, dry_run};

fn config(edit: impl FnOnce(&mut CaptureConfig)) -> CaptureConfig {
    let mut config = CaptureConfig::default();
    edit(&mut config);
    config
}

fn cases() -> Vec<(&'static str, CaptureConfig)> {
    vec![
        ("default", CaptureConfig::default()),
        ("default_ipv6", config(|c| c.ipv6 = true)),
        (
            "inbound_list",
            config(|c| c.inbound_ports = parse_port_set("i", "9080,9090").unwrap()),
        ),
        (
            "inbound_all_excluding",
            config(|c| c.exclude_inbound_ports = parse_ports("e", "22,15020").unwrap()),
        ),
        (
            "inbound_none",
            config(|c| c.inbound_ports = PortSet::List(vec![])),
        ),
        (
            "include_cidrs",
            config(|c| c.include_outbound_cidrs = parse_cidr_set("c", "10.96.0.0/12,10.244.0.0/16").unwrap()),
        ),
        (
            "exclude_cidrs",
            config(|c| c.exclude_outbound_cidrs = parse_cidrs("c", "10.77.2.0/24,169.254.169.254").unwrap()),
        ),
        (
            "exclude_outbound_ports",
            config(|c| c.exclude_outbound_ports = parse_ports("p", "7777,3306").unwrap()),
        ),
        (
            "ipv6_mixed_cidrs",
            config(|c| {
                c.ipv6 = true;
                c.include_outbound_cidrs = parse_cidr_set("c", "10.0.0.0/8,fd00::/8").unwrap();
                c.exclude_outbound_cidrs = parse_cidrs("c", "10.1.0.0/16,fd00:1::/64").unwrap();
            }),
        ),
        (
            "ipv6_inbound_list_excluding",
            config(|c| {
                c.ipv6 = true;
                c.inbound_ports = parse_port_set("i", "80,443,9080").unwrap();
                c.exclude_inbound_ports = vec![443];
                c.exclude_outbound_ports = vec![53];
            }),
        ),
        (
            "custom_ports_uid_no_gid",
            config(|c| {
                c.outbound_port = 15101;
                c.inbound_port = 15106;
                c.proxy_uid = 1500;
                c.proxy_gid = None;
            }),
        ),
        (
            "capture_test",
            config(|c| {
                c.exclude_outbound_cidrs = parse_cidrs("c", "10.77.2.0/24").unwrap();
                c.exclude_outbound_ports = vec![7777];
                c.inbound_ports = parse_port_set("i", "9080").unwrap();
            }),
        ),
    ]
}

fn render(config: &CaptureConfig) -> String {
    let mut out = String::new();
    for (family, script) in dry_run(config) {
        let program = match family {
            Family::V4 => "iptables-restore --noflush",
            Family::V6 => "ip6tables-restore --noflush",
        };
        out.push_str(&format!("# {program}\n{script}"));
    }
    out
}

#[test]
fn rules_match_the_golden_files() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/iptables");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut mismatched = Vec::new();
    for (name, config) in cases() {
        let path = dir.join(format!("{name}.rules"));
        let actual = render(&config);
        if update {
            std::fs::write(&path, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
        if expected != actual {
            mismatched.push(format!("{name}:\n--- expected\n{expected}--- actual\n{actual}"));
        }
    }
    assert!(
        mismatched.is_empty(),
        "rules differ from the golden files:\n{}",
        mismatched.join("\n")
    );
}

#[test]
fn every_golden_file_is_a_case() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/iptables");
    let names: Vec<&str> = cases().iter().map(|(n, _)| *n).collect();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        let name = file.trim_end_matches(".rules");
        assert!(names.contains(&name), "{file} has no case: delete it or add one");
    }
}
