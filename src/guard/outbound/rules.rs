//! The allowlist's two kinds of entry: CIDRs and host-name patterns.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An IP network: an address and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// A network; host bits of `addr` are cleared. `None` if `prefix` is too
    /// long for the address family.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Cidr> {
        let addr = match addr {
            IpAddr::V4(v4) if prefix <= 32 => {
                IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask32(prefix)))
            }
            IpAddr::V6(v6) if prefix <= 128 => {
                IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask128(prefix)))
            }
            _ => return None,
        };
        Some(Cidr { addr, prefix })
    }

    pub(super) const fn v4(a: u8, b: u8, c: u8, d: u8, prefix: u8) -> Cidr {
        Cidr {
            addr: IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
            prefix,
        }
    }

    pub(super) const fn v6(segments: [u16; 8], prefix: u8) -> Cidr {
        let [a, b, c, d, e, f, g, h] = segments;
        Cidr {
            addr: IpAddr::V6(Ipv6Addr::new(a, b, c, d, e, f, g, h)),
            prefix,
        }
    }

    /// Whether `ip` is inside this network (same family only).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                u32::from(ip) & mask32(self.prefix) == u32::from(net)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                u128::from(ip) & mask128(self.prefix) == u128::from(net)
            }
            _ => false,
        }
    }

    /// Whether every address of `self` is inside `other`.
    pub fn is_within(&self, other: &Cidr) -> bool {
        self.prefix >= other.prefix && other.contains(self.addr)
    }
}

fn mask32(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
}

fn mask128(prefix: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0)
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl std::str::FromStr for Cidr {
    type Err = String;

    /// `10.0.0.0/8`, `fd00::/8`, or a bare address (a single host).
    fn from_str(text: &str) -> Result<Cidr, String> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr = addr.trim_start_matches('[').trim_end_matches(']');
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("`{text}` is not an IP address or CIDR"))?;
        if let IpAddr::V6(v6) = addr
            && v6.to_ipv4_mapped().is_some()
        {
            return Err(format!(
                "`{text}` is an IPv4-mapped IPv6 address; write the IPv4 form"
            ));
        }
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("`{text}`: the prefix length must be 0 to {max}"))?,
        };
        Cidr::new(addr, prefix).ok_or_else(|| format!("`{text}` is not a valid CIDR"))
    }
}

/// A host pattern: labels, where a leading `*` label stands for one or more
/// labels and a `*` inside a label for any run of characters in that label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    text: String,
    labels: Vec<String>,
}

impl HostPattern {
    /// Parse a pattern; the error says what is wrong.
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let normalized = text.trim().trim_end_matches('.').to_ascii_lowercase();
        if normalized.is_empty() {
            return Err("an empty entry".to_owned());
        }
        let labels: Vec<String> = normalized.split('.').map(str::to_owned).collect();
        for label in &labels {
            let valid = !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'*'));
            if !valid {
                return Err(format!(
                    "`{text}` is neither a CIDR nor a host pattern (labels of letters, digits, `-`, `_` and `*`)"
                ));
            }
        }
        Ok(HostPattern {
            text: normalized,
            labels,
        })
    }

    /// Whether `name` matches (case-insensitive, trailing dot ignored).
    pub fn matches(&self, name: &str) -> bool {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let names: Vec<&str> = name.split('.').collect();
        let (first, rest) = match self.labels.split_first() {
            Some(split) => split,
            None => return false,
        };
        if first == "*" {
            // `*.a.b`: one or more labels, then exactly `a.b`.
            if names.len() <= rest.len() {
                return false;
            }
            let tail = &names[names.len() - rest.len()..];
            return rest.iter().zip(tail).all(|(p, n)| glob(p, n));
        }
        names.len() == self.labels.len() && self.labels.iter().zip(&names).all(|(p, n)| glob(p, n))
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `*` matches any run of characters (within one label).
pub(super) fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((star_p, star_t)) = star {
            pi = star_p + 1;
            ti = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|b| *b == b'*')
}
