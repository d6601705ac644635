//! Where librdkafka may connect: every broker address is checked against
//! the outbound policy before librdkafka is asked to use it.
//!
//! librdkafka resolves and connects by itself, and rdkafka 0.39 binds
//! neither its resolve nor its connect callback (calling them would take
//! `unsafe`, which this crate forbids). So the scaler resolves first:
//!
//! - **Bootstrap servers** are resolved and checked before any client
//!   exists. Over `PLAINTEXT`/`SASL_PLAINTEXT` librdkafka gets the checked
//!   addresses themselves (refused ones dropped) and never resolves them.
//!   Over TLS it must dial the name (it verifies the broker's certificate
//!   against it), so every address of the name must be allowed.
//! - **Advertised brokers** (the `host:port` each broker publishes in the
//!   cluster metadata, which librdkafka dials for the group coordinator and
//!   the partition leaders) are resolved and checked before the
//!   consumer-group client exists, and again on every reading. librdkafka
//!   dials these by name, so every address must be allowed. Over
//!   `PLAINTEXT` the scaler asks for them itself (wire.rs), before any
//!   librdkafka client exists. With SASL or TLS it must ask through a
//!   librdkafka probe (no `group.id`), which may dial an advertised broker
//!   in the milliseconds between its metadata answer and the check.
//!
//! What this leaves to librdkafka: its own lookup of a name the scaler has
//! just checked (a DNS answer that changes between the two lookups), a
//! broker the cluster starts advertising between two readings, and with
//! SASL or TLS the probe's early dial above.

use std::net::SocketAddr;
use std::sync::Arc;

use rdkafka::ClientConfig;
use rdkafka::metadata::Metadata;

use super::wire::Advertised;
use crate::guard::credentials::KafkaClientSettings;
use crate::guard::outbound::{OutboundPolicy, ResolveError};
use crate::source::error::FailureKind;
use crate::source::http::names_no_such_name;

/// What a Kafka client is built from: the librdkafka settings (without
/// `bootstrap.servers` and `group.id`, which come after the checks), the
/// profile's secrets, and the policy.
pub(super) struct Recipe {
    /// Settings common to the probe and the consumer-group client.
    pub config: ClientConfig,
    /// The profile's settings (also in `config`), to scrub messages.
    pub secrets: KafkaClientSettings,
    /// Where the clients may connect.
    pub outbound: Arc<OutboundPolicy>,
}

impl Recipe {
    /// The checked bootstrap servers, as settings for a client (the
    /// consumer-group client adds `group.id`). Blocking.
    pub fn bootstrap(&self, servers: &[String]) -> Result<Bootstrap, Refused> {
        let protocol = self
            .secrets
            .settings
            .iter()
            .find(|(key, _)| *key == "security.protocol")
            .map_or("PLAINTEXT", |(_, value)| value.expose());
        // TLS verifies each broker's certificate against the name it dials.
        let tls = protocol.ends_with("SSL");
        let (servers, addrs) = bootstrap(&self.outbound, servers, tls)?;
        let mut config = self.config.clone();
        config.set("bootstrap.servers", servers.join(","));
        Ok(Bootstrap {
            config,
            plaintext: (protocol == "PLAINTEXT").then_some(addrs),
        })
    }
}

/// Checked bootstrap servers.
pub(super) struct Bootstrap {
    /// The recipe's settings with `bootstrap.servers`.
    pub config: ClientConfig,
    /// Over `PLAINTEXT`, the allowed bootstrap addresses, which the scaler
    /// asks for the advertised brokers itself.
    pub plaintext: Option<Vec<SocketAddr>>,
}

/// A broker address the policy refused, or whose name did not resolve.
#[derive(Debug)]
pub(super) struct Refused {
    /// What was being checked, e.g. "bootstrap server `kafka:9092`".
    pub what: String,
    /// Why.
    pub error: ResolveError,
}

impl Refused {
    /// `WHAT: WHY`, for the reading's error.
    pub fn describe(&self) -> String {
        format!("{}: {}", self.what, self.error)
    }

    /// A refusal, or a failed lookup.
    pub fn kind(&self) -> FailureKind {
        match &self.error {
            ResolveError::Denied(_) => FailureKind::Denied,
            ResolveError::Lookup { reason, .. } => FailureKind::Dns {
                no_such_name: reason == "no addresses" || names_no_such_name(reason),
            },
        }
    }
}

/// The `bootstrap.servers` to hand librdkafka: the checked addresses of
/// every server, or with `keep_names` (TLS) the servers as written once
/// every address of each is allowed; and the allowed addresses. Blocking
/// (getaddrinfo).
fn bootstrap(
    policy: &OutboundPolicy,
    servers: &[String],
    keep_names: bool,
) -> Result<(Vec<String>, Vec<SocketAddr>), Refused> {
    let mut out = Vec::new();
    let mut all = Vec::new();
    for server in servers {
        let what = || format!("bootstrap server `{server}`");
        let (host, port) = split(server).ok_or_else(|| Refused {
            what: what(),
            error: ResolveError::Lookup {
                host: server.clone(),
                reason: "not host:port".to_owned(),
            },
        })?;
        let resolved = if keep_names {
            policy.resolve_every_blocking(host, port)
        } else {
            policy.resolve_blocking(host, port)
        };
        let addrs = resolved.map_err(|error| Refused {
            what: what(),
            error,
        })?;
        if keep_names {
            out.push(server.clone());
        } else {
            out.extend(addrs.iter().map(SocketAddr::to_string));
        }
        all.extend(addrs);
    }
    out.dedup();
    all.dedup();
    Ok((out, all))
}

/// Check every broker librdkafka learned in `metadata`. Blocking.
pub(super) fn advertised(policy: &OutboundPolicy, metadata: &Metadata) -> Result<(), Refused> {
    let brokers: Vec<Advertised> = metadata
        .brokers()
        .iter()
        .map(|b| Advertised {
            id: b.id(),
            host: b.host().to_owned(),
            port: b.port(),
        })
        .collect();
    check_advertised(policy, &brokers)
}

/// Check every advertised broker: every address of its name. Blocking.
pub(super) fn check_advertised(
    policy: &OutboundPolicy,
    brokers: &[Advertised],
) -> Result<(), Refused> {
    for broker in brokers {
        let what = || {
            format!(
                "broker {} advertised as `{}:{}`",
                broker.id, broker.host, broker.port
            )
        };
        let port = u16::try_from(broker.port).map_err(|_| Refused {
            what: what(),
            error: ResolveError::Lookup {
                host: broker.host.clone(),
                reason: format!("port {} is out of range", broker.port),
            },
        })?;
        policy
            .resolve_every_blocking(&broker.host, port)
            .map_err(|error| Refused {
                what: what(),
                error,
            })?;
    }
    Ok(())
}

/// `host:port` or `[v6]:port` → (host without brackets, port).
fn split(server: &str) -> Option<(&str, u16)> {
    let (host, port) = server.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host, port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str]) -> OutboundPolicy {
        let allow: Vec<String> = allow.iter().map(|s| (*s).to_owned()).collect();
        OutboundPolicy::new(Some(&allow), false).expect("policy")
    }

    #[test]
    fn plaintext_bootstrap_gets_the_checked_addresses() {
        let servers = ["127.0.0.1:9092".to_owned(), "[::1]:9093".to_owned()];
        let (got, addrs) =
            bootstrap(&policy(&["127.0.0.0/8", "::1"]), &servers, false).expect("allowed");
        assert_eq!(got, ["127.0.0.1:9092", "[::1]:9093"]);
        assert_eq!(addrs.len(), 2);
        // `localhost` is admitted by name; only its loopback IPv4 address
        // is inside a CIDR, and only that address is handed on.
        let got = bootstrap(
            &policy(&["localhost", "127.0.0.0/8"]),
            &["localhost:9092".to_owned()],
            false,
        )
        .expect("allowed")
        .0;
        assert_eq!(got, ["127.0.0.1:9092"]);
    }

    #[test]
    fn a_refused_bootstrap_address_names_the_server_and_the_rule() {
        let refused = bootstrap(
            &policy(&["localhost", "10.0.0.0/8"]),
            &["localhost:9092".to_owned()],
            false,
        )
        .expect_err("127.0.0.1 is in no CIDR");
        let text = refused.describe();
        assert!(
            text.starts_with("bootstrap server `localhost:9092`: "),
            "{text}"
        );
        assert!(
            text.contains("127.0.0.1 (resolved from localhost)"),
            "{text}"
        );
        assert!(text.contains("no CIDR in the outbound allowlist"), "{text}");
        assert!(matches!(refused.error, ResolveError::Denied(_)));
    }

    #[test]
    fn tls_bootstrap_keeps_names_and_needs_every_address_allowed() {
        let servers = ["localhost:9093".to_owned()];
        // Only IPv4 loopback allowed: if `localhost` also resolves to ::1,
        // librdkafka could dial that, so the name is refused.
        let v4_only = policy(&["localhost", "127.0.0.0/8"]);
        let every = bootstrap(&v4_only, &servers, true);
        let resolves_v6 = std::net::ToSocketAddrs::to_socket_addrs(&("localhost", 9093))
            .is_ok_and(|mut addrs| addrs.any(|a| a.is_ipv6()));
        assert_eq!(every.is_err(), resolves_v6, "{every:?}");
        let both = policy(&["localhost", "127.0.0.0/8", "::1"]);
        assert_eq!(
            bootstrap(&both, &servers, true).expect("allowed").0,
            ["localhost:9093"]
        );
    }

    #[test]
    fn servers_split_into_host_and_port() {
        assert_eq!(split("kafka-0.kafka:9092"), Some(("kafka-0.kafka", 9092)));
        assert_eq!(split("[::1]:9092"), Some(("::1", 9092)));
        assert_eq!(split("kafka"), None);
    }
}
