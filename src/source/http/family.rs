//! `ipFamily`: which addresses of a `dns+` name are its pods.

use std::net::IpAddr;

/// Which of a name's addresses are its pods (`ipFamily`). A dual-stack
/// headless Service answers an A and an AAAA record for every ready pod;
/// scraping both would count each pod twice, so one family is read per name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum IpFamily {
    /// IPv4 when the name has any A record, else IPv6.
    #[default]
    Auto,
    /// Only A records; a name with AAAA records only is an error.
    Ipv4,
    /// Only AAAA records; a name with A records only is an error.
    Ipv6,
}

impl IpFamily {
    /// `auto`, `ipv4` or `ipv6`.
    pub fn parse(text: &str) -> Option<IpFamily> {
        match text {
            "auto" => Some(IpFamily::Auto),
            "ipv4" => Some(IpFamily::Ipv4),
            "ipv6" => Some(IpFamily::Ipv6),
            _ => None,
        }
    }

    /// The metadata spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            IpFamily::Auto => "auto",
            IpFamily::Ipv4 => "ipv4",
            IpFamily::Ipv6 => "ipv6",
        }
    }

    /// The addresses of `addrs` that are pods under this choice, sorted and
    /// deduplicated; `Err` names the family that was asked for and found
    /// missing while the other one answered (`addrs` not empty).
    pub fn select(self, addrs: &[IpAddr]) -> Result<Vec<IpAddr>, &'static str> {
        let has_v4 = addrs.iter().any(IpAddr::is_ipv4);
        let want_v4 = match self {
            IpFamily::Auto => has_v4,
            IpFamily::Ipv4 => true,
            IpFamily::Ipv6 => false,
        };
        let mut chosen: Vec<IpAddr> = addrs
            .iter()
            .copied()
            .filter(|a| a.is_ipv4() == want_v4)
            .collect();
        chosen.sort();
        chosen.dedup();
        if chosen.is_empty() && !addrs.is_empty() {
            return Err(if want_v4 { "IPv4" } else { "IPv6" });
        }
        Ok(chosen)
    }
}
