//! The flags of `pilot-agent iptables` and the command itself.

use clap::Args;

use super::config::{self, CaptureConfig};
use super::{IptablesError, rules::Family};

/// `pilot-agent iptables`: install (or remove, or print) the rules that send
/// this network namespace's TCP traffic to the sidecar.
#[derive(Debug, Clone, Args)]
pub struct IptablesArgs {
    /// Where captured outbound TCP is redirected (Envoy's virtual listener).
    #[arg(long, default_value_t = config::CAPTURE_PORT, value_name = "PORT")]
    pub outbound_port: u16,
    /// Where captured inbound TCP is redirected.
    #[arg(long, default_value_t = config::CAPTURE_PORT, value_name = "PORT")]
    pub inbound_port: u16,
    /// The proxy's uid: its traffic is never captured.
    #[arg(long, default_value_t = config::PROXY_ID, value_name = "UID")]
    pub proxy_uid: u32,
    /// The proxy's gid: its traffic is never captured (`` for none).
    #[arg(long, default_value = "1337", value_name = "GID")]
    pub proxy_gid: String,
    /// Inbound ports to capture: `*` (all), a comma-separated list, or ``
    /// (none).
    #[arg(long, default_value = "*", value_name = "PORTS")]
    pub inbound_ports: String,
    /// Inbound ports never captured (with `--inbound-ports '*'`).
    #[arg(long, default_value = "", value_name = "PORTS")]
    pub exclude_inbound_ports: String,
    /// Outbound destinations to capture: `*` (all), comma-separated CIDRs,
    /// or `` (none).
    #[arg(long, default_value = "*", value_name = "CIDRS")]
    pub include_outbound_cidrs: String,
    /// Outbound destinations never captured (comma-separated CIDRs).
    #[arg(long, default_value = "", value_name = "CIDRS")]
    pub exclude_outbound_cidrs: String,
    /// Outbound destination ports never captured.
    #[arg(long, default_value = "", value_name = "PORTS")]
    pub exclude_outbound_ports: String,
    /// Also capture IPv6 (through ip6tables).
    #[arg(long)]
    pub ipv6: bool,
    /// Print the `iptables-restore` input instead of applying it.
    #[arg(long, conflicts_with = "cleanup")]
    pub dry_run: bool,
    /// Remove exactly the rules and chains this command installs.
    #[arg(long)]
    pub cleanup: bool,
}

impl IptablesArgs {
    /// The capture configuration the flags describe; errors name the flag.
    pub fn config(&self) -> Result<CaptureConfig, IptablesError> {
        let proxy_gid = match self.proxy_gid.trim() {
            "" => None,
            gid => Some(gid.parse::<u32>().map_err(|_| IptablesError::Option {
                option: "--proxy-gid",
                value: self.proxy_gid.clone(),
                reason: "not a group id".into(),
            })?),
        };
        Ok(CaptureConfig {
            outbound_port: self.outbound_port,
            inbound_port: self.inbound_port,
            proxy_uid: self.proxy_uid,
            proxy_gid,
            inbound_ports: config::parse_port_set("--inbound-ports", &self.inbound_ports)?,
            exclude_inbound_ports: config::parse_ports(
                "--exclude-inbound-ports",
                &self.exclude_inbound_ports,
            )?,
            include_outbound_cidrs: config::parse_cidr_set(
                "--include-outbound-cidrs",
                &self.include_outbound_cidrs,
            )?,
            exclude_outbound_cidrs: config::parse_cidrs(
                "--exclude-outbound-cidrs",
                &self.exclude_outbound_cidrs,
            )?,
            exclude_outbound_ports: config::parse_ports(
                "--exclude-outbound-ports",
                &self.exclude_outbound_ports,
            )?,
            ipv6: self.ipv6,
        })
    }

    /// Runs the command; what it did (or would do) goes to `out`.
    pub fn run(&self, out: &mut dyn std::io::Write) -> Result<(), IptablesError> {
        let write = |out: &mut dyn std::io::Write, text: String| {
            // Output is best effort: a closed stdout does not undo the rules.
            let _ = out.write_all(text.as_bytes());
        };
        if self.cleanup {
            let removed = super::cleanup(self.ipv6)?;
            if removed.is_empty() {
                write(out, "no capture rules of pilot-agent were installed\n".into());
            }
            for (family, script) in removed {
                write(
                    out,
                    format!("# removed with {} --noflush\n{script}", family.restore_program()),
                );
            }
            return Ok(());
        }
        let config = self.config()?;
        let scripts = if self.dry_run {
            super::dry_run(&config)
        } else {
            super::apply(&config)?
        };
        for (family, script) in scripts {
            let verb = if self.dry_run { "would apply" } else { "applied" };
            let program = match family {
                Family::V4 => "iptables-restore",
                Family::V6 => "ip6tables-restore",
            };
            write(out, format!("# {verb} with {program} --noflush\n{script}"));
        }
        Ok(())
    }
}
