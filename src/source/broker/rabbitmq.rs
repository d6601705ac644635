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
use std::net::IpAddr;
use std::sync::Arc;

use lapin::auth::AuthProvider;
use lapin::options::QueueDeclareOptions;
use lapin::tcp::OwnedTLSConfig;
use lapin::types::{FieldTable, LongString, ShortString};
use lapin::uri::{AMQPAuthority, AMQPQueryString, AMQPScheme, AMQPUri, AMQPUserInfo};
use lapin::{AsyncTcpStream, Channel, Connection, ConnectionProperties};
use reqwest::Url;

use super::context::{BrokerContext, BrokerReading};
use crate::guard::credentials::{RabbitMqCredentials, Secret, Section};
use crate::guard::outbound::{OutboundPolicy, ResolveError};
use crate::source::error::{FailureKind, SourceError};
use crate::source::http::{
    classify_reqwest, describe_reqwest_error, names_no_such_name, resolution_failure,
};

/// Tracing directives that must cap any log filter the operator sets:
/// lapin logs every outgoing AMQP frame at `trace`, including the
/// `connection.start-ok` frame that carries the SASL PLAIN password. Append
/// these to the `EnvFilter` (a more specific directive wins, so
/// `--log-level trace` still traces everything else).
pub const LOG_FILTER_CAPS: &[&str] = &["lapin=debug"];

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
            .map_err(|e| self.failure(FailureKind::Config, e.to_string()))?;
        match &profile.rabbitmq {
            Some(section) => section
                .credentials(name)
                .map_err(|e| self.failure(FailureKind::Config, e.to_string())),
            None => Err(self.failure(
                FailureKind::Config,
                format!("credential profile `{name}` has no `rabbitmq` section"),
            )),
        }
    }

    fn failure(&self, kind: FailureKind, detail: String) -> SourceError {
        SourceError::new(kind, self.label(), detail)
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
                        Err(_) => Err(SourceError::timeout(ctx.request_timeout)),
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
            let connection = connect_checked(uri, properties, ctx.outbound.clone())
                .await
                .map_err(|e| {
                    self.failure(
                        classify_amqp(&e),
                        scrub(format!("AMQP connection failed: {e}")),
                    )
                })?;
            let channel = connection.create_channel().await.map_err(|e| {
                self.failure(
                    classify_amqp(&e),
                    scrub(format!("AMQP channel failed: {e}")),
                )
            })?;
            memory.amqp = Some((connection, channel));
        }
        let Some((_, channel)) = &memory.amqp else {
            return Err(self.failure(FailureKind::Internal, "no AMQP channel".to_owned()));
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
                self.failure(
                    classify_amqp(&e),
                    match &password {
                        Some(p) => p.scrub(&text),
                        None => text,
                    },
                )
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
            .map_err(|()| self.failure(FailureKind::Config, "not a base URL".to_owned()))?
            .clear()
            .extend(["api", "queues", &self.vhost, &self.queue]);
        Ok(url)
    }

    async fn read_http(&self, ctx: &BrokerContext) -> Result<BrokerReading, SourceError> {
        let credentials = self.credentials(ctx)?;
        let password: &Secret = &credentials.password;
        let url = self.api_url()?;
        // Names resolve through the policy in the client; an IP-literal URL
        // never reaches a resolver, so its address is checked here.
        let literal = url
            .host_str()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']'));
        if let Some(ip) = literal.and_then(|h| h.parse::<IpAddr>().ok())
            && let Err(denied) = ctx.outbound.check_addr(ip)
        {
            return Err(SourceError::denied(self.label(), &denied));
        }
        let failed =
            |kind: FailureKind, detail: String| self.failure(kind, password.scrub(&detail));
        let request_failed =
            |e: reqwest::Error| failed(classify_reqwest(&e), describe_reqwest_error(&e));
        let mut response = ctx
            .http
            .get(url.clone())
            .basic_auth(
                credentials.username.expose(),
                Some(credentials.password.expose()),
            )
            .send()
            .await
            .map_err(request_failed)?;
        let status = response.status();
        if !status.is_success() {
            let hint = match status.as_u16() {
                401 => " (check the user and password of the authProfile)",
                403 => " (the user lacks the `monitoring` tag or access to the vhost)",
                404 => " (no such vhost or queue)",
                _ => "",
            };
            return Err(failed(
                FailureKind::of_status(status.as_u16()),
                format!("GET {url}: HTTP status {status}{hint}"),
            ));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(request_failed)? {
            if body.len() + chunk.len() > MAX_HTTP_BODY {
                return Err(failed(
                    FailureKind::Rejected,
                    format!("response exceeds {MAX_HTTP_BODY} bytes"),
                ));
            }
            body.extend_from_slice(&chunk);
        }
        let parse = |reason: String| SourceError::parse(self.label(), reason);
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

/// Open an AMQP connection to an address resolved and checked by `policy`
/// (the default connect would resolve the name itself, out of the policy's
/// sight). Every connect lapin makes goes through here. `amqps` keeps the
/// host name for SNI and certificate verification.
async fn connect_checked(
    uri: AMQPUri,
    properties: ConnectionProperties,
    policy: Arc<OutboundPolicy>,
) -> Result<Connection, lapin::Error> {
    let runtime = lapin::runtime::default_runtime()?;
    Connection::connector(
        uri,
        runtime,
        async move |uri: AMQPUri, runtime| {
            let host = uri.authority.host.clone();
            let addrs = policy
                .resolve(&host, uri.authority.port)
                .await
                .map_err(std::io::Error::other)?;
            let stream = AsyncTcpStream::connect(&runtime, addrs).await?;
            Ok(match uri.scheme {
                AMQPScheme::AMQP => stream,
                AMQPScheme::AMQPS => {
                    let tls = OwnedTLSConfig::default();
                    stream.into_tls(&host, tls.as_ref()).await?
                }
            })
        },
        properties,
    )
    .await
}

/// The kind of a lapin failure. The broker's reply code says most:
/// ACCESS_REFUSED (403, also a refused login) and NOT_ALLOWED (530, a vhost
/// the user may not open) are credentials, NOT_FOUND (404) a queue or vhost
/// that does not exist.
fn classify_amqp(error: &lapin::Error) -> FailureKind {
    match error.kind() {
        lapin::ErrorKind::ProtocolError(amqp) => match amqp.get_id() {
            403 | 530 => FailureKind::Auth,
            404 => FailureKind::Rejected,
            _ => FailureKind::Unreachable,
        },
        lapin::ErrorKind::AuthProviderError(_) => FailureKind::Auth,
        lapin::ErrorKind::IOError(io) => {
            // A refusal or failed lookup of [`connect_checked`] travels as
            // the I/O error's payload (which `source()` skips).
            match io.get_ref().and_then(|e| e.downcast_ref::<ResolveError>()) {
                Some(ResolveError::Denied(_)) => FailureKind::Denied,
                Some(ResolveError::Lookup { reason, .. }) => FailureKind::Dns {
                    no_such_name: reason == "no addresses" || names_no_such_name(reason),
                },
                None => resolution_failure(io.as_ref()).unwrap_or(FailureKind::Unreachable),
            }
        }
        lapin::ErrorKind::InvalidProtocolVersion(_) => FailureKind::Rejected,
        _ => FailureKind::Unreachable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amqp_failures_are_classified_by_reply_code() {
        use lapin::protocol::{AMQPError, AMQPErrorKind, AMQPHardError, AMQPSoftError};
        let protocol = |kind| {
            lapin::Error::from(lapin::ErrorKind::ProtocolError(AMQPError::new(
                kind,
                "reply".into(),
            )))
        };
        for (error, kind) in [
            (
                protocol(AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED)),
                FailureKind::Auth,
            ),
            (
                protocol(AMQPErrorKind::Hard(AMQPHardError::NOTALLOWED)),
                FailureKind::Auth,
            ),
            (
                protocol(AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND)),
                FailureKind::Rejected,
            ),
            (
                protocol(AMQPErrorKind::Hard(AMQPHardError::CONNECTIONFORCED)),
                FailureKind::Unreachable,
            ),
            (
                lapin::Error::from(lapin::ErrorKind::IOError(std::sync::Arc::new(
                    std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
                ))),
                FailureKind::Unreachable,
            ),
            (
                lapin::Error::from(lapin::ErrorKind::IOError(std::sync::Arc::new(
                    std::io::Error::other(
                        "failed to lookup address information: Name or service not known",
                    ),
                ))),
                FailureKind::Dns { no_such_name: true },
            ),
        ] {
            assert_eq!(classify_amqp(&error), kind, "{error}");
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
}
