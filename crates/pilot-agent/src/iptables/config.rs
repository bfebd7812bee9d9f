//! What to capture: the options of `pilot-agent iptables`, with Istio's
//! defaults (outbound and inbound to 15001, proxy uid and gid 1337, every
//! inbound port, every outbound address).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use super::IptablesError;

/// The proxy's own uid and gid (Istio's 1337): its traffic is never captured.
pub const PROXY_ID: u32 = 1337;

/// The port captured connections are redirected to (the virtual listener).
pub const CAPTURE_PORT: u16 = 15001;

/// What `pilot-agent iptables` captures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureConfig {
    /// Where outbound TCP goes (Envoy's virtual listener).
    pub outbound_port: u16,
    /// Where inbound TCP goes (the same virtual listener by default: it
    /// dispatches on the original destination, inbound or outbound).
    pub inbound_port: u16,
    /// The proxy's uid: its connections are never captured.
    pub proxy_uid: u32,
    /// The proxy's gid, if its group's connections are to be left alone too.
    pub proxy_gid: Option<u32>,
    /// Inbound ports to capture.
    pub inbound_ports: PortSet,
    /// Inbound ports never captured (with `PortSet::All`).
    pub exclude_inbound_ports: Vec<u16>,
    /// Outbound destinations to capture.
    pub include_outbound_cidrs: CidrSet,
    /// Outbound destinations never captured.
    pub exclude_outbound_cidrs: Vec<Cidr>,
    /// Outbound destination ports never captured.
    pub exclude_outbound_ports: Vec<u16>,
    /// Also write the IPv6 rules (through ip6tables).
    pub ipv6: bool,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        Self {
            outbound_port: CAPTURE_PORT,
            inbound_port: CAPTURE_PORT,
            proxy_uid: PROXY_ID,
            proxy_gid: Some(PROXY_ID),
            inbound_ports: PortSet::All,
            exclude_inbound_ports: Vec::new(),
            include_outbound_cidrs: CidrSet::All,
            exclude_outbound_cidrs: Vec::new(),
            exclude_outbound_ports: Vec::new(),
            ipv6: false,
        }
    }
}

/// A set of ports: all (`*`) or a list (empty: none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortSet {
    /// Every port (`*`).
    All,
    /// These ports only (none when empty).
    List(Vec<u16>),
}

/// A set of destinations: all (`*`) or a list of CIDRs (empty: none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CidrSet {
    /// Every destination (`*`).
    All,
    /// These CIDRs only (none when empty).
    List(Vec<Cidr>),
}

/// An address block such as `10.0.0.0/8` or `fd00::/8`; a bare address is
/// a host (`/32`, `/128`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The block's address.
    pub address: IpAddr,
    /// The prefix length.
    pub prefix: u8,
}

impl Cidr {
    /// Whether this is an IPv6 block.
    pub fn is_ipv6(&self) -> bool {
        self.address.is_ipv6()
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix)
    }
}

impl FromStr for Cidr {
    type Err = IptablesError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| IptablesError::Option {
            option: "cidr",
            value: text.to_string(),
            reason: reason.to_string(),
        };
        let (address, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let address: IpAddr = address
            .trim()
            .parse()
            .map_err(|_| bad("not an IPv4 or IPv6 address"))?;
        let max = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .map_err(|_| bad("the prefix length is not a number"))?,
            None => max,
        };
        if prefix > max {
            return Err(bad(&format!("the prefix length is over {max}")));
        }
        Ok(Cidr { address, prefix })
    }
}

/// Parses a port list option: `*` (every port), `` (none) or
/// `80,8080` (these).
pub fn parse_port_set(option: &'static str, text: &str) -> Result<PortSet, IptablesError> {
    if text.trim() == "*" {
        return Ok(PortSet::All);
    }
    parse_ports(option, text).map(PortSet::List)
}

/// Parses a comma-separated port list (`` is none).
pub fn parse_ports(option: &'static str, text: &str) -> Result<Vec<u16>, IptablesError> {
    let mut ports = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let port = item
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| IptablesError::Option {
                option,
                value: text.to_string(),
                reason: format!("{item:?} is not a port (1-65535)"),
            })?;
        if !ports.contains(&port) {
            ports.push(port);
        }
    }
    Ok(ports)
}

/// Parses a CIDR list option: `*` (every destination), `` (none) or
/// `10.0.0.0/8,fd00::/8` (these).
pub fn parse_cidr_set(option: &'static str, text: &str) -> Result<CidrSet, IptablesError> {
    if text.trim() == "*" {
        return Ok(CidrSet::All);
    }
    parse_cidrs(option, text).map(CidrSet::List)
}

/// Parses a comma-separated CIDR list (`` is none).
pub fn parse_cidrs(option: &'static str, text: &str) -> Result<Vec<Cidr>, IptablesError> {
    let mut cidrs = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let cidr = item.parse::<Cidr>().map_err(|e| match e {
            IptablesError::Option { reason, .. } => IptablesError::Option {
                option,
                value: text.to_string(),
                reason: format!("{item:?}: {reason}"),
            },
            other => other,
        })?;
        if !cidrs.contains(&cidr) {
            cidrs.push(cidr);
        }
    }
    Ok(cidrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_cidrs_parse_with_errors_naming_the_option() {
        assert_eq!(parse_port_set("p", "*").unwrap(), PortSet::All);
        assert_eq!(parse_port_set("p", "").unwrap(), PortSet::List(vec![]));
        assert_eq!(
            parse_port_set("p", "80, 8080,80").unwrap(),
            PortSet::List(vec![80, 8080])
        );
        let err = parse_ports("--exclude-inbound-ports", "80,http")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--exclude-inbound-ports") && err.contains("\"http\""),
            "{err}"
        );
        assert!(parse_ports("p", "0").is_err());
        assert!(parse_ports("p", "65536").is_err());

        let cidrs = parse_cidrs("c", "10.0.0.0/8, 192.168.1.1,fd00::/8").unwrap();
        let shown: Vec<String> = cidrs.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["10.0.0.0/8", "192.168.1.1/32", "fd00::/8"]);
        let err = parse_cidrs("--exclude-outbound-cidrs", "10.0.0.0/33")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--exclude-outbound-cidrs") && err.contains("over 32"),
            "{err}"
        );
        assert!(parse_cidrs("c", "10.0.0/8").is_err());
        assert_eq!(parse_cidr_set("c", "*").unwrap(), CidrSet::All);
    }
}
