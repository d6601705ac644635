//! Where sources may connect: the outbound allowlist (`outbound` in the
//! `--config` file) and the refused defaults.
//!
//! Any ScaledObject author can name a target in trigger metadata, and the
//! scaler, which runs in KEDA's namespace, will connect to it. The operator
//! bounds that here. Two kinds of entry, in one `allow` list:
//!
//! - **host patterns** (`vllm-*.inference.svc`, `*.svc.cluster.local`,
//!   `localhost`) are matched against the name a target is written with. A
//!   leading `*.` matches one or more labels; a `*` anywhere else matches
//!   within one label. Matching ignores case and a trailing dot.
//! - **CIDRs** (`10.0.0.0/8`, `127.0.0.1/32`, `fd00::/8`; a bare address is a
//!   single host) are matched against addresses.
//!
//! The rules, with an allowlist configured:
//!
//! 1. A target written as a **name** must match a host pattern. If the list
//!    has no host pattern at all, names pass and their addresses decide.
//! 2. A target written as an **IP address** must be inside a CIDR.
//! 3. Every **address connected to** (what a name resolved to, at connect
//!    time, after DNS) must be inside a CIDR. If the list has no CIDR at all,
//!    addresses of names admitted by rule 1 pass.
//! 4. The **refused defaults** ([`REFUSED_BY_DEFAULT`]: link-local and cloud
//!    metadata addresses, the unspecified address) apply to every address,
//!    with or without an allowlist. One is lifted by `allowLinkLocal: true`
//!    (the link-local and metadata ranges) or by an `allow` CIDR that lies
//!    inside it (`169.254.169.254/32`); a broad CIDR such as `0.0.0.0/0` does
//!    not lift it.
//!
//! Without an allowlist only rule 4 applies (the server warns once at
//! start-up). Rules 1–2 are checked when a trigger is registered, so a
//! refused target in metadata is `PERMISSION_DENIED` at GetMetricSpec time;
//! rules 3–4 are checked by the HTTP client's resolver and before every
//! connection to an IP address, so a name cannot smuggle in a forbidden
//! address.
//!
//! Every client applies rules 3–4 where it connects: the HTTP scraper and
//! the RabbitMQ management client resolve through [`PolicyResolver`]; AMQP
//! dials what [`OutboundPolicy::resolve`] returned; the SQS client and the
//! AWS credential providers use [`aws::http_client`]; Kafka checks every
//! bootstrap and advertised broker address before librdkafka may dial it
//! ([`OutboundPolicy::resolve_blocking`],
//! [`OutboundPolicy::resolve_every_blocking`]). Registration checks what
//! the metadata names with [`OutboundPolicy::check_url`] or
//! [`OutboundPolicy::check_host`].

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;
use serde::Deserialize;

pub use self::rules::{Cidr, HostPattern};

/// The `outbound` section of the `--config` file.
///
/// ```yaml
/// outbound:
///   allow:
///     - "*.svc.cluster.local"
///     - "vllm-*.inference.svc"
///     - 10.0.0.0/8
///     - 127.0.0.1/32
///   allowLinkLocal: false
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutboundConfig {
    /// Host patterns and CIDRs that sources may connect to. A name target
    /// must match a host pattern (`*.svc.cluster.local`: a leading `*.` is
    /// one or more labels, another `*` stays within a label); an IP target
    /// and every address a name resolves to must be inside a CIDR
    /// (`10.0.0.0/8`; a bare address is one host). A list without host
    /// patterns lets any name through whose addresses are all inside a CIDR;
    /// a list without CIDRs leaves the addresses of allowed names unchecked
    /// (but for the refused defaults). Absent: every target is allowed except
    /// the refused defaults, and the server warns at start-up. Present but
    /// empty: every target is refused.
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    /// Lift the default refusal of link-local and cloud metadata addresses
    /// (`169.254.0.0/16`, `fe80::/10`, `fd00:ec2::254`). Default `false`.
    /// Prefer an explicit `allow` entry (`169.254.10.0/24`) that lifts only
    /// the addresses you mean.
    #[serde(default)]
    pub allow_link_local: bool,
}

impl OutboundConfig {
    /// Validate the entries and build the policy. The error names the entry.
    pub fn policy(&self) -> Result<OutboundPolicy, String> {
        OutboundPolicy::new(self.allow.as_deref(), self.allow_link_local)
    }
}

/// A range refused unless explicitly allowed.
#[derive(Debug, Clone, Copy)]
pub struct RefusedRange {
    /// The network.
    pub network: Cidr,
    /// What it is, for the error message.
    pub what: &'static str,
    /// Lifted by `allowLinkLocal: true`.
    pub link_local: bool,
}

/// Addresses no source connects to unless the config explicitly allows them:
/// link-local and cloud metadata endpoints (credentials of the node or its
/// cloud identity live there) and the unspecified address (which reaches the
/// scaler's own host).
pub const REFUSED_BY_DEFAULT: &[RefusedRange] = &[
    RefusedRange {
        network: Cidr::v4(169, 254, 0, 0, 16),
        what: "IPv4 link-local; 169.254.169.254 is the cloud metadata service",
        link_local: true,
    },
    RefusedRange {
        network: Cidr::v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),
        what: "IPv6 link-local",
        link_local: true,
    },
    RefusedRange {
        network: Cidr::v6([0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254], 128),
        what: "the AWS metadata service over IPv6",
        link_local: true,
    },
    RefusedRange {
        network: Cidr::v4(0, 0, 0, 0, 8),
        what: "the unspecified IPv4 range, which reaches this host",
        link_local: false,
    },
    RefusedRange {
        network: Cidr::v6([0, 0, 0, 0, 0, 0, 0, 0], 128),
        what: "the unspecified IPv6 address, which reaches this host",
        link_local: false,
    },
];

/// A refused connection: the target and the rule that refused it. Build it
/// with [`OutboundDenied::new`], which redacts the target: the refusal is
/// quoted in `PERMISSION_DENIED`, logs and `check`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("outbound connection to `{target}` refused: {rule}")]
pub struct OutboundDenied {
    /// What was refused: a name, an address, or `address (from name)`.
    pub target: String,
    /// The rule, in words an operator can act on.
    pub rule: String,
}

impl OutboundDenied {
    /// `target` refused by `rule`; credential-shaped parts of `target` (a
    /// URL's userinfo or token parameter) are redacted.
    pub fn new(target: impl AsRef<str>, rule: impl Into<String>) -> OutboundDenied {
        OutboundDenied {
            target: super::redact::redact(target.as_ref()),
            rule: rule.into(),
        }
    }
}

/// The compiled `outbound` config: which hosts and addresses sources may
/// connect to. Cheap to share (`Arc`); checks do no I/O except the
/// resolving ones ([`OutboundPolicy::resolve`] and its blocking variants).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboundPolicy {
    /// `None`: no allowlist configured (only the refused defaults apply).
    allow: Option<Allow>,
    allow_link_local: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Allow {
    hosts: Vec<HostPattern>,
    networks: Vec<Cidr>,
}

const SEE_CONFIG: &str = "see `outbound.allow` in the scaler's --config";
const EMPTY_LIST: &str = "the outbound allowlist is empty, so every target is refused";

impl OutboundPolicy {
    /// Compile a policy. `allow: None` means no allowlist; `Some(&[])` refuses
    /// everything. The error names the first bad entry.
    pub fn new(allow: Option<&[String]>, allow_link_local: bool) -> Result<OutboundPolicy, String> {
        let allow = match allow {
            None => None,
            Some(entries) => {
                let mut compiled = Allow::default();
                for entry in entries {
                    let entry = entry.trim();
                    let as_ip = entry.trim_start_matches('[').trim_end_matches(']');
                    if entry.contains('/') || as_ip.parse::<IpAddr>().is_ok() {
                        compiled
                            .networks
                            .push(entry.parse().map_err(|e| format!("outbound.allow: {e}"))?);
                    } else {
                        compiled.hosts.push(
                            HostPattern::parse(entry)
                                .map_err(|e| format!("outbound.allow: {e}"))?,
                        );
                    }
                }
                Some(compiled)
            }
        };
        Ok(OutboundPolicy {
            allow,
            allow_link_local,
        })
    }

    /// No allowlist: everything but the refused defaults is allowed.
    pub fn allow_all() -> OutboundPolicy {
        OutboundPolicy::default()
    }

    /// True when an allowlist is configured.
    pub fn is_restricted(&self) -> bool {
        self.allow.is_some()
    }

    /// A one-line description for the start-up log.
    pub fn summary(&self) -> String {
        let link_local = if self.allow_link_local {
            "; link-local and metadata addresses allowed"
        } else {
            ""
        };
        match &self.allow {
            None => format!("no allowlist: any target except the refused defaults{link_local}"),
            Some(allow) => format!(
                "allowlist of {} host pattern(s) and {} network(s){link_local}",
                allow.hosts.len(),
                allow.networks.len()
            ),
        }
    }

    /// Check a target host as written in metadata: a name (rule 1) or an IP
    /// literal, bracketed or not (rules 2 and 4). Does no DNS: the addresses
    /// of a name are checked at connect time with [`Self::check_addr`].
    pub fn check_host(&self, host: &str) -> Result<(), OutboundDenied> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return self.check_ip_target(ip);
        }
        let Some(allow) = &self.allow else {
            return Ok(());
        };
        if allow.hosts.iter().any(|p| p.matches(host)) {
            return Ok(());
        }
        if allow.hosts.is_empty() && !allow.networks.is_empty() {
            // No host pattern at all: names pass; their addresses decide at
            // connect time.
            return Ok(());
        }
        let rule = if allow.hosts.is_empty() {
            EMPTY_LIST.to_owned()
        } else {
            format!("no host pattern in the outbound allowlist matches it ({SEE_CONFIG})")
        };
        Err(OutboundDenied::new(host, rule))
    }

    /// Check the host of a URL (see [`Self::check_host`]).
    pub fn check_url(&self, url: &Url) -> Result<(), OutboundDenied> {
        match url.host_str() {
            Some(host) => self.check_host(host),
            None => Err(OutboundDenied::new(url.as_str(), "the URL has no host")),
        }
    }

    /// An IP literal target: rule 4, and inside a CIDR when restricted.
    fn check_ip_target(&self, ip: IpAddr) -> Result<(), OutboundDenied> {
        let ip = ip.to_canonical();
        self.check_refused(ip, &ip.to_string())?;
        match &self.allow {
            Some(allow) if !allow.networks.iter().any(|n| n.contains(ip)) => Err(OutboundDenied {
                target: ip.to_string(),
                rule: format!(
                    "no CIDR in the outbound allowlist contains this address ({SEE_CONFIG})"
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Check an address about to be connected to (rules 3 and 4): what a
    /// name resolved to, or an IP literal already admitted by
    /// [`Self::check_host`]. IPv4-mapped IPv6 addresses are checked as IPv4.
    pub fn check_addr(&self, ip: IpAddr) -> Result<(), OutboundDenied> {
        self.check_addr_named(ip, None)
    }

    fn check_addr_named(&self, ip: IpAddr, name: Option<&str>) -> Result<(), OutboundDenied> {
        let ip = ip.to_canonical();
        let target = match name {
            Some(name) => format!("{ip} (resolved from {name})"),
            None => ip.to_string(),
        };
        self.check_refused(ip, &target)?;
        let Some(allow) = &self.allow else {
            return Ok(());
        };
        if allow.networks.iter().any(|n| n.contains(ip)) {
            return Ok(());
        }
        if allow.networks.is_empty() && !allow.hosts.is_empty() {
            return Ok(());
        }
        Err(OutboundDenied {
            target,
            rule: if allow.networks.is_empty() {
                EMPTY_LIST.to_owned()
            } else {
                format!("no CIDR in the outbound allowlist contains this address ({SEE_CONFIG})")
            },
        })
    }

    fn check_refused(&self, ip: IpAddr, target: &str) -> Result<(), OutboundDenied> {
        for range in REFUSED_BY_DEFAULT {
            if !range.network.contains(ip) {
                continue;
            }
            if range.link_local && self.allow_link_local {
                continue;
            }
            let lifted = self.allow.as_ref().is_some_and(|allow| {
                allow
                    .networks
                    .iter()
                    .any(|n| n.is_within(&range.network) && n.contains(ip))
            });
            if lifted {
                continue;
            }
            let how = if range.link_local {
                format!(
                    "set `outbound.allowLinkLocal: true` or add an `outbound.allow` CIDR inside {}",
                    range.network
                )
            } else {
                format!("add an `outbound.allow` CIDR inside {}", range.network)
            };
            return Err(OutboundDenied {
                target: target.to_owned(),
                rule: format!(
                    "{} ({}) is refused by default; to allow it, {how}",
                    range.network, range.what
                ),
            });
        }
        Ok(())
    }

    /// Keep the addresses `name` resolved to that may be connected to. An
    /// error when some were given and none is allowed; it names the first
    /// refused address and its rule.
    pub fn filter_resolved(
        &self,
        name: &str,
        addrs: impl IntoIterator<Item = SocketAddr>,
    ) -> Result<Vec<SocketAddr>, OutboundDenied> {
        let mut allowed = Vec::new();
        let mut first_denied = None;
        for addr in addrs {
            match self.check_addr_named(addr.ip(), Some(name)) {
                Ok(()) => allowed.push(addr),
                Err(denied) => {
                    first_denied.get_or_insert(denied);
                }
            }
        }
        match (allowed.is_empty(), first_denied) {
            (true, Some(denied)) => Err(denied),
            _ => Ok(allowed),
        }
    }

    /// Check `host`, resolve it, and return the allowed addresses (for
    /// sources that open their own connections, e.g. brokers). An IP literal
    /// is returned as is after [`Self::check_host`].
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, ResolveError> {
        self.check_host(host)?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| ResolveError::Lookup {
                host: host.to_owned(),
                reason: e.to_string(),
            })?
            .collect();
        if addrs.is_empty() {
            return Err(ResolveError::Lookup {
                host: host.to_owned(),
                reason: "no addresses".to_owned(),
            });
        }
        Ok(self.filter_resolved(host, addrs)?)
    }

    /// [`Self::resolve`] for code already on a blocking thread (a librdkafka
    /// call in `spawn_blocking`): the lookup is std's `getaddrinfo`, here.
    pub fn resolve_blocking(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, ResolveError> {
        match self.lookup_blocking(host, port)? {
            Lookup::Literal(addr) => Ok(vec![addr]),
            Lookup::Resolved(addrs) => Ok(self.filter_resolved(host, addrs)?),
        }
    }

    /// Check `host`, resolve it (blocking, like [`Self::resolve_blocking`])
    /// and require **every** address to be allowed: for a client that
    /// resolves the name again itself and may connect to any of its
    /// addresses (librdkafka), where dropping the refused ones would not
    /// keep it away from them. The error names the first refused address.
    pub fn resolve_every_blocking(
        &self,
        host: &str,
        port: u16,
    ) -> Result<Vec<SocketAddr>, ResolveError> {
        match self.lookup_blocking(host, port)? {
            Lookup::Literal(addr) => Ok(vec![addr]),
            Lookup::Resolved(addrs) => {
                for addr in &addrs {
                    self.check_addr_named(addr.ip(), Some(host))?;
                }
                Ok(addrs)
            }
        }
    }

    /// [`Self::check_host`], then an IP literal as is (it passed the CIDR
    /// check there) or the name's addresses from `getaddrinfo`.
    fn lookup_blocking(&self, host: &str, port: u16) -> Result<Lookup, ResolveError> {
        use std::net::ToSocketAddrs;
        self.check_host(host)?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(Lookup::Literal(SocketAddr::new(ip, port)));
        }
        let failed = |reason: String| ResolveError::Lookup {
            host: host.to_owned(),
            reason,
        };
        let addrs: Vec<SocketAddr> = (bare, port)
            .to_socket_addrs()
            .map_err(|e| failed(e.to_string()))?
            .collect();
        if addrs.is_empty() {
            return Err(failed("no addresses".to_owned()));
        }
        Ok(Lookup::Resolved(addrs))
    }
}

/// What [`OutboundPolicy::lookup_blocking`] found.
enum Lookup {
    /// The host was an IP literal.
    Literal(SocketAddr),
    /// The addresses a name resolved to (at least one).
    Resolved(Vec<SocketAddr>),
}

/// Why [`OutboundPolicy::resolve`] gave no address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The policy refused the host or every address.
    #[error(transparent)]
    Denied(#[from] OutboundDenied),
    /// DNS failed.
    #[error("DNS lookup of `{host}` failed: {reason}")]
    Lookup {
        /// The name.
        host: String,
        /// What DNS said.
        reason: String,
    },
}

/// A reqwest DNS resolver that applies the policy after resolution: the
/// name must be admitted, and only allowed addresses are handed to the
/// connector (an error naming the refused address when none is left).
/// IP-literal URLs do not go through a resolver: check those with
/// [`OutboundPolicy::check_addr`] before the request.
#[derive(Debug, Clone)]
pub struct PolicyResolver {
    policy: Arc<OutboundPolicy>,
}

impl PolicyResolver {
    /// A resolver enforcing `policy`.
    pub fn new(policy: Arc<OutboundPolicy>) -> PolicyResolver {
        PolicyResolver { policy }
    }
}

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // reqwest puts the URL's port on every address it gets back.
            let addrs = policy.resolve(&host, 0).await?;
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

pub mod aws;
mod rules;
#[cfg(test)]
mod tests;
