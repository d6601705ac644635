//! RabbitMQ queue backlog, as KEDA's `rabbitmq` scaler counts it in
//! `QueueLength` mode.
//!
//! - AMQP (`amqp://`, `amqps://`): a passive `queue.declare`; its
//!   `message-count` is the queue's *ready* messages (AMQP cannot see
//!   unacknowledged ones). The connection and channel are kept between
//!   readings (in the poller's memory) and rebuilt after a failure.
//! - HTTP (`http://`, `https://`, the management plugin):
//!   `GET /api/queues/VHOST/QUEUE`; `messages` (ready + unacknowledged), or
//!   `messages_ready` with `excludeUnacknowledged`. The management API
//!   refreshes these every `collect_statistics_interval` (5 s by default),
//!   and omits them for a queue it has not sampled yet: that is an error,
//!   not 0.
//!
//! Credentials come from the trigger's `authProfile` (`rabbitmq` section)
//! or default to `guest`/`guest`. They never appear in labels, errors or
//! logs: AMQP authenticates through an auth provider (the URI lapin holds
//! carries no password) and error text is scrubbed of the password.

use std::collections::BTreeMap;
use std::fmt;

use lapin::auth::AuthProvider;
use lapin::options::QueueDeclareOptions;
use lapin::types::{FieldTable, LongString, ShortString};
use lapin::uri::{AMQPAuthority, AMQPQueryString, AMQPScheme, AMQPUri, AMQPUserInfo};
use lapin::{Channel, Connection, ConnectionProperties};
use reqwest::Url;

use super::{BrokerContext, BrokerReading, Md, keys};
use crate::guard::credentials::{RabbitMqCredentials, Secret, Section};
use crate::source::SourceError;

/// Longest AMQP short string (queue and vhost names).
const MAX_NAME_LEN: usize = 255;
/// Largest management API answer accepted for one queue.
const MAX_HTTP_BODY: usize = 1024 * 1024;

/// How the queue is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// AMQP 0-9-1: ready messages.
    Amqp,
    /// Management HTTP API: ready + unacknowledged.
    Http,
}

/// Identity of a RabbitMQ source.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RabbitMqSource {
    /// `rabbitmqHost` reduced to scheme, host and port.
    pub url: Url,
    /// `protocol`, resolved (`auto` → from the scheme).
    pub protocol: Protocol,
    /// The virtual host, decoded (`/` by default).
    pub vhost: String,
    /// `queueName`.
    pub queue: String,
    /// `excludeUnacknowledged` (HTTP only).
    pub exclude_unacknowledged: bool,
    /// `authProfile`.
    pub auth_profile: Option<String>,
}

/// Per-poller RabbitMQ state: the AMQP connection and channel.
#[derive(Default)]
pub(crate) struct RabbitMqMemory {
    amqp: Option<(Connection, Channel)>,
}

impl fmt::Debug for RabbitMqMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitMqMemory")
            .field("connected", &self.amqp.is_some())
            .finish()
    }
}

/// SASL PLAIN from a profile, so that no URI or configuration lapin keeps
/// (and might print) holds the password.
struct PlainAuth(RabbitMqCredentials);

impl AuthProvider for PlainAuth {
    fn mechanism(&self) -> ShortString {
        "PLAIN".into()
    }

    fn auth_starter(&self) -> Result<LongString, String> {
        Ok(format!(
            "\0{}\0{}",
            self.0.username.expose(),
            self.0.password.expose()
        )
        .into())
    }
}

impl RabbitMqSource {
    /// Parse the RabbitMQ keys (`rabbitmqHost` is present).
    pub(crate) fn parse(
        md: &mut Md<'_, '_>,
        auth_profile: Option<String>,
    ) -> Option<RabbitMqSource> {
        let host =
            md.non_empty(keys::RABBITMQ_HOST)
                .and_then(|(sent, value)| match parse_host(value) {
                    Ok(parsed) => Some(parsed),
                    Err(reason) => {
                        md.invalid(sent, value, reason);
                        None
                    }
                });
        let protocol = match (md.get(keys::PROTOCOL), &host) {
            (None | Some((_, "auto")), Some((_, scheme_protocol, _))) => Some(*scheme_protocol),
            (None | Some((_, "auto")), None) => None,
            (Some((sent, value @ ("amqp" | "http"))), host) => {
                let wanted = if value == "amqp" {
                    Protocol::Amqp
                } else {
                    Protocol::Http
                };
                match host {
                    Some((_, scheme_protocol, _)) if *scheme_protocol != wanted => {
                        md.invalid(
                            sent,
                            value,
                            "must match the scheme of `rabbitmqHost` (amqp/amqps → `amqp`, http/https → `http`), or `auto`",
                        );
                        None
                    }
                    _ => Some(wanted),
                }
            }
            (Some((sent, value)), _) => {
                md.invalid(sent, value, "`auto`, `amqp` or `http`");
                None
            }
        };
        let vhost = match md.non_empty(keys::VHOST_NAME) {
            Some((sent, value)) if value.len() > MAX_NAME_LEN => {
                md.invalid(sent, value, "at most 255 bytes");
                None
            }
            Some((_, value)) => Some(value.to_owned()),
            None => host.as_ref().map(|(_, _, vhost)| vhost.clone()),
        };
        let queue = md
            .required(keys::QUEUE_NAME, "the queue whose messages are counted")
            .and_then(|(sent, value)| {
                if value.len() > MAX_NAME_LEN {
                    md.invalid(sent, value, "at most 255 bytes");
                    None
                } else {
                    Some(value.to_owned())
                }
            });
        let exclude_unacknowledged = md.bool(keys::EXCLUDE_UNACKNOWLEDGED, false);
        if exclude_unacknowledged
            && protocol == Some(Protocol::Amqp)
            && let Some((sent, value)) = md.get(keys::EXCLUDE_UNACKNOWLEDGED)
        {
            md.invalid(
                sent,
                value,
                "needs the http protocol (AMQP counts ready messages only anyway)",
            );
        }
        let (url, _, _) = host?;
        Some(RabbitMqSource {
            url,
            protocol: protocol?,
            vhost: vhost?,
            queue: queue?,
            exclude_unacknowledged,
            auth_profile,
        })
    }

    /// `rabbitmq SCHEME://HOST:PORT vhost=V queue=Q`.
    pub fn label(&self) -> String {
        format!(
            "rabbitmq {}://{}:{} vhost={} queue={}",
            self.url.scheme(),
            self.url.host_str().unwrap_or_default(),
            self.port(),
            self.vhost,
            self.queue
        )
    }

    fn port(&self) -> u16 {
        self.url
            .port_or_known_default()
            .unwrap_or(match self.url.scheme() {
                "amqps" => 5671,
                _ => 5672,
            })
    }

    fn credentials(&self, ctx: &BrokerContext) -> Result<RabbitMqCredentials, SourceError> {
        let Some(name) = &self.auth_profile else {
            return Ok(RabbitMqCredentials::guest());
        };
        let profile = ctx
            .profiles
            .get(name)
            .and_then(|p| p.require(name, Section::RabbitMq).map(|()| p))
            .map_err(|e| self.upstream(e.to_string()))?;
        match &profile.rabbitmq {
            Some(section) => section
                .credentials(name)
                .map_err(|e| self.upstream(e.to_string())),
            None => Err(self.upstream(format!(
                "credential profile `{name}` has no `rabbitmq` section"
            ))),
        }
    }

    fn upstream(&self, reason: String) -> SourceError {
        SourceError::Upstream {
            target: self.label(),
            reason,
        }
    }

    /// One reading.
    pub(crate) async fn read(
        &self,
        ctx: &BrokerContext,
        memory: &mut RabbitMqMemory,
    ) -> Result<BrokerReading, SourceError> {
        match self.protocol {
            Protocol::Http => self.read_http(ctx).await,
            Protocol::Amqp => {
                let result =
                    match tokio::time::timeout(ctx.request_timeout, self.read_amqp(ctx, memory))
                        .await
                    {
                        Ok(result) => result,
                        Err(_) => Err(SourceError::Timeout(ctx.request_timeout)),
                    };
                if result.is_err() {
                    // Reconnect (and re-read credentials) next time.
                    memory.amqp = None;
                }
                result
            }
        }
    }

    async fn read_amqp(
        &self,
        ctx: &BrokerContext,
        memory: &mut RabbitMqMemory,
    ) -> Result<BrokerReading, SourceError> {
        let usable = memory.amqp.as_ref().is_some_and(|(connection, channel)| {
            connection.status().connected() && channel.status().connected()
        });
        let mut password = None;
        if !usable {
            memory.amqp = None;
            let credentials = self.credentials(ctx)?;
            password = Some(credentials.password.clone());
            let scrub = |text: String| credentials.password.scrub(&text);
            let uri = AMQPUri {
                scheme: if self.url.scheme() == "amqps" {
                    AMQPScheme::AMQPS
                } else {
                    AMQPScheme::AMQP
                },
                authority: AMQPAuthority {
                    // Not used: PlainAuth authenticates. Kept empty so the URI holds no secret.
                    userinfo: AMQPUserInfo {
                        username: String::new(),
                        password: String::new(),
                    },
                    host: self.url.host_str().unwrap_or_default().to_owned(),
                    port: self.port(),
                },
                vhost: self.vhost.clone(),
                query: AMQPQueryString {
                    connection_timeout: Some(ctx.request_timeout.as_millis() as u64),
                    ..AMQPQueryString::default()
                },
            };
            let properties = ConnectionProperties::default()
                .with_connection_name("backlog-scaler".into())
                .with_auth_provider(PlainAuth(credentials.clone()));
            let connection = Connection::connect_uri(uri, properties)
                .await
                .map_err(|e| self.upstream(scrub(format!("AMQP connection failed: {e}"))))?;
            let channel = connection
                .create_channel()
                .await
                .map_err(|e| self.upstream(scrub(format!("AMQP channel failed: {e}"))))?;
            memory.amqp = Some((connection, channel));
        }
        let Some((_, channel)) = &memory.amqp else {
            return Err(self.upstream("no AMQP channel".to_owned()));
        };
        let queue = channel
            .queue_declare(
                self.queue.as_str().into(),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(|e| {
                let text = format!("passive queue.declare failed: {e}");
                self.upstream(match &password {
                    Some(p) => p.scrub(&text),
                    None => text,
                })
            })?;
        let ready = f64::from(queue.message_count());
        Ok(BrokerReading {
            messages: ready,
            partitions: None,
            breakdown: BTreeMap::from([("ready".to_owned(), ready)]),
        })
    }

    /// The management API URL of the queue.
    pub fn api_url(&self) -> Result<Url, SourceError> {
        let mut url = self.url.clone();
        url.path_segments_mut()
            .map_err(|()| self.upstream("not a base URL".to_owned()))?
            .clear()
            .extend(["api", "queues", &self.vhost, &self.queue]);
        Ok(url)
    }

    async fn read_http(&self, ctx: &BrokerContext) -> Result<BrokerReading, SourceError> {
        let credentials = self.credentials(ctx)?;
        let password: &Secret = &credentials.password;
        let url = self.api_url()?;
        let upstream = |reason: String| self.upstream(password.scrub(&reason));
        let mut response = ctx
            .http
            .get(url.clone())
            .basic_auth(
                credentials.username.expose(),
                Some(credentials.password.expose()),
            )
            .send()
            .await
            .map_err(|e| upstream(crate::source::http::describe_reqwest_error(&e)))?;
        let status = response.status();
        if !status.is_success() {
            let hint = match status.as_u16() {
                401 => " (check the user and password of the authProfile)",
                403 => " (the user lacks the `monitoring` tag or access to the vhost)",
                404 => " (no such vhost or queue)",
                _ => "",
            };
            return Err(upstream(format!("GET {url}: HTTP status {status}{hint}")));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| upstream(crate::source::http::describe_reqwest_error(&e)))?
        {
            if body.len() + chunk.len() > MAX_HTTP_BODY {
                return Err(upstream(format!("response exceeds {MAX_HTTP_BODY} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        let parse = |reason: String| SourceError::Parse {
            target: self.label(),
            reason,
        };
        let json: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| parse(format!("management API answer is not JSON: {e}")))?;
        let field = |name: &str| -> Result<f64, SourceError> {
            match json.get(name) {
                Some(value) => value
                    .as_f64()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| parse(format!("`{name}` is {value}, not a count"))),
                None => Err(parse(format!(
                    "no `{name}` in the management API answer yet (the queue's statistics are not collected yet)"
                ))),
            }
        };
        let ready = field("messages_ready")?;
        let unacked = field("messages_unacknowledged")?;
        let messages = if self.exclude_unacknowledged {
            ready
        } else {
            field("messages")?
        };
        Ok(BrokerReading {
            messages,
            partitions: None,
            breakdown: BTreeMap::from([
                ("ready".to_owned(), ready),
                ("unacked".to_owned(), unacked),
            ]),
        })
    }
}

/// `rabbitmqHost` → (scheme/host/port URL, protocol, vhost from the path).
fn parse_host(value: &str) -> Result<(Url, Protocol, String), String> {
    let mut url = Url::parse(value).map_err(|e| {
        format!("not a URL ({e}); e.g. `amqp://rabbitmq.ns:5672` or `http://rabbitmq.ns:15672`")
    })?;
    let protocol = match url.scheme() {
        "amqp" | "amqps" => Protocol::Amqp,
        "http" | "https" => Protocol::Http,
        _ => return Err("the scheme must be amqp, amqps, http or https".to_owned()),
    };
    if url.host_str().is_none_or(str::is_empty) {
        return Err("the URL has no host".to_owned());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "credentials do not belong in metadata; remove `user:password@` and name an `authProfile`"
                .to_owned(),
        );
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("no query or fragment".to_owned());
    }
    let path = url.path().strip_prefix('/').unwrap_or(url.path());
    let vhost = percent_decode(path)
        .ok_or_else(|| "the vhost in the path is not valid UTF-8".to_owned())?;
    let vhost = if vhost.is_empty() {
        "/".to_owned()
    } else {
        vhost
    };
    if vhost.len() > MAX_NAME_LEN {
        return Err("the vhost is longer than 255 bytes".to_owned());
    }
    url.set_path("");
    Ok((url, protocol, vhost))
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(byte) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_vhosts() {
        let (url, protocol, vhost) = parse_host("amqps://mq.ns:5671/prod%2Feu").expect("valid");
        assert_eq!((protocol, vhost.as_str()), (Protocol::Amqp, "prod/eu"));
        assert_eq!(url.as_str(), "amqps://mq.ns:5671");
        let (url, protocol, vhost) = parse_host("http://mq.ns:15672").expect("valid");
        assert_eq!((protocol, vhost.as_str()), (Protocol::Http, "/"));
        assert_eq!(url.as_str(), "http://mq.ns:15672/");
        for bad in [
            "mq.ns:5672",
            "amqp://guest:guest@mq:5672",
            "amqp://:pw@mq:5672",
            "redis://mq:6379",
            "amqp://mq:5672/?heartbeat=10",
        ] {
            assert!(parse_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn api_urls_encode_the_vhost() {
        let source = RabbitMqSource {
            url: Url::parse("http://127.0.0.1:15672").expect("url"),
            protocol: Protocol::Http,
            vhost: "/".into(),
            queue: "a b/c".into(),
            exclude_unacknowledged: false,
            auth_profile: None,
        };
        assert_eq!(
            source.api_url().expect("url").as_str(),
            "http://127.0.0.1:15672/api/queues/%2F/a%20b%2Fc"
        );
        assert_eq!(
            source.label(),
            "rabbitmq http://127.0.0.1:15672 vhost=/ queue=a b/c"
        );
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("%2F").as_deref(), Some("/"));
        assert_eq!(percent_decode("a%2").as_deref(), Some("a%2"));
        assert_eq!(percent_decode("%zz").as_deref(), Some("%zz"));
    }
}
