//! Broker backlog `Q`: SQS, Kafka and RabbitMQ, counted as KEDA's built-in
//! scaler for each broker counts it, so that moving a trigger from KEDA's
//! scaler to this one changes nothing but the fusion.
//!
//! A trigger has at most one broker source ([`BrokerSource`]), chosen by the
//! key that names its endpoint: `queueURL` (SQS), `bootstrapServers`
//! (Kafka) or `rabbitmqHost` (RabbitMQ). Credentials never come from
//! metadata: `authProfile` names a profile of the scaler's own config
//! ([`super::credentials`]); without one, SQS uses the AWS default provider
//! chain, Kafka connects without SASL/TLS and RabbitMQ uses `guest`/`guest`.
//!
//! Like every source, a broker source takes ONE reading and never retries:
//! the poller owns timing. Broker clients are expensive to build, so they are
//! kept between readings: SQS clients in the shared [`BrokerContext`] (one per
//! region, endpoint and profile), Kafka consumers and AMQP connections in the
//! poller's [`BrokerMemory`] (they hold sockets and threads and must go away
//! with the poller). After a failed reading the source's client is rebuilt at
//! the next one, which also re-reads the profile's secrets.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use self::kafka::{KafkaMemory, KafkaSource};
use self::rabbitmq::{RabbitMqMemory, RabbitMqSource};
use self::sqs::{SqsClientKey, SqsMemory, SqsSource};
use super::SourceError;
use crate::guard::credentials::{ProfileError, Profiles, Section, valid_profile_name};
use crate::trigger::MetadataError;

pub mod kafka;
pub mod rabbitmq;
pub mod sqs;

/// Q for one trigger, as KEDA's built-in scaler for that broker would count it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerReading {
    /// `Q`, in messages, before `messageWeight`. Kafka: the total lag
    /// without persistent lag when `excludePersistentLag` is on (KEDA's
    /// scaling value; the total with it is `breakdown["lagWithPersistent"]`).
    pub messages: f64,
    /// Kafka: how many partitions bound the replica count (KEDA's
    /// `allowIdleConsumers: false` cap, `w·Q ≤ T × partitions`): every
    /// partition counted, or only those with lag under
    /// `limitToPartitionsWithLag`. `None` when no cap applies (other brokers,
    /// or `allowIdleConsumers: true`).
    pub partitions: Option<usize>,
    /// Where `messages` came from: SQS `visible`/`inFlight`/`delayed`,
    /// RabbitMQ `ready`/`unacked`, Kafka one `topic/partition` entry per
    /// partition (its lag) plus `lagWithPersistent`. Entries that were
    /// measured but not counted (e.g. `inFlight` with `scaleOnInFlight:
    /// false`) are listed too.
    pub breakdown: BTreeMap<String, f64>,
}

/// What to read; equal values share one poller. Holds the `authProfile`
/// name (never a secret), so triggers with different credentials never
/// share a reading.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BrokerSource {
    /// An SQS queue.
    Sqs(SqsSource),
    /// A Kafka consumer group's lag.
    Kafka(KafkaSource),
    /// A RabbitMQ queue.
    RabbitMq(RabbitMqSource),
}

/// A trigger's broker settings: the source plus how much one message weighs.
/// `messageWeight` is not part of the source identity (two triggers that
/// weigh the same queue differently share its poller).
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerTrigger {
    /// What to read (includes `authProfile`).
    pub source: BrokerSource,
    /// `w` (`messageWeight`): requests-equivalent per message, > 0. The
    /// fused demand adds `w·Q`.
    pub message_weight: f64,
}

/// Per-poller state kept between readings: clients that hold connections
/// (dropped with the poller) and Kafka's previous committed offsets for
/// `excludePersistentLag`. Start with `BrokerMemory::default()`.
#[derive(Debug, Default)]
pub struct BrokerMemory {
    pub(crate) sqs: SqsMemory,
    pub(crate) kafka: KafkaMemory,
    pub(crate) rabbitmq: RabbitMqMemory,
}

/// Default bound on one broker request (each of the few a reading makes).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What broker reads need from the server: credential profiles, the request
/// timeout, and shared clients. Cheap to clone (shared inside).
#[derive(Clone)]
pub struct BrokerContext {
    /// The `profiles` of the scaler config.
    pub profiles: Arc<Profiles>,
    /// Bound on each broker request. Keep it under the poller's read timeout
    /// so a slow broker is reported as what it is.
    pub request_timeout: Duration,
    pub(crate) http: reqwest::Client,
    pub(crate) sqs_clients: Arc<Mutex<HashMap<SqsClientKey, aws_sdk_sqs::Client>>>,
}

impl fmt::Debug for BrokerContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let clients = self.sqs_clients.lock().map(|c| c.len()).unwrap_or_default();
        f.debug_struct("BrokerContext")
            .field("profiles", &self.profiles.names().collect::<Vec<_>>())
            .field("request_timeout", &self.request_timeout)
            .field("sqs_clients", &clients)
            .finish_non_exhaustive()
    }
}

/// Why a [`BrokerContext`] could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the broker HTTP client: {0}")]
pub struct BrokerContextError(#[from] reqwest::Error);

impl BrokerContext {
    /// A context with these profiles; each broker request is bounded by
    /// `request_timeout`.
    pub fn new(
        profiles: Arc<Profiles>,
        request_timeout: Duration,
    ) -> Result<BrokerContext, BrokerContextError> {
        let http = reqwest::Client::builder()
            .timeout(request_timeout)
            .connect_timeout(request_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("backlog-scaler/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(BrokerContext {
            profiles,
            request_timeout,
            http,
            sqs_clients: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    /// The same context with another request timeout (shares clients).
    pub fn with_request_timeout(&self, request_timeout: Duration) -> BrokerContext {
        BrokerContext {
            request_timeout,
            ..self.clone()
        }
    }
}

impl BrokerSource {
    /// A short, stable, credential-free label for logs and self-metrics,
    /// e.g. `sqs us-east-1/jobs`, `kafka group/topic`,
    /// `rabbitmq amqp://10.0.0.5:5672 vhost=/ queue=jobs`.
    pub fn label(&self) -> String {
        match self {
            BrokerSource::Sqs(s) => s.label(),
            BrokerSource::Kafka(s) => s.label(),
            BrokerSource::RabbitMq(s) => s.label(),
        }
    }

    /// The `authProfile` this source reads with.
    pub fn auth_profile(&self) -> Option<&str> {
        match self {
            BrokerSource::Sqs(s) => s.auth_profile.as_deref(),
            BrokerSource::Kafka(s) => s.auth_profile.as_deref(),
            BrokerSource::RabbitMq(s) => s.auth_profile.as_deref(),
        }
    }

    /// The profile section this broker uses.
    pub fn profile_section(&self) -> Section {
        match self {
            BrokerSource::Sqs(_) => Section::Aws,
            BrokerSource::Kafka(_) => Section::Kafka,
            BrokerSource::RabbitMq(_) => Section::RabbitMq,
        }
    }

    /// Admit a trigger from `namespace`: its `authProfile` must exist, allow
    /// the namespace and have this broker's section. Call once when a
    /// trigger is registered; [`ProfileError::is_permission_denied`] tells
    /// `PERMISSION_DENIED` apart from configuration errors. No I/O.
    pub fn authorize(&self, profiles: &Profiles, namespace: &str) -> Result<(), ProfileError> {
        match self.auth_profile() {
            None => Ok(()),
            Some(name) => profiles
                .resolve(name, namespace)?
                .require(name, self.profile_section()),
        }
    }

    /// Take one reading.
    pub async fn read(
        &self,
        ctx: &BrokerContext,
        memory: &mut BrokerMemory,
    ) -> Result<BrokerReading, SourceError> {
        match self {
            BrokerSource::Sqs(s) => s.read(ctx, &mut memory.sqs).await,
            BrokerSource::Kafka(s) => s.read(ctx, &mut memory.kafka).await,
            BrokerSource::RabbitMq(s) => s.read(ctx, &mut memory.rabbitmq).await,
        }
    }
}

impl fmt::Display for BrokerSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// Tracing directives that must cap any log filter the operator sets:
/// lapin logs every outgoing AMQP frame at `trace`, including the
/// `connection.start-ok` frame that carries the SASL PLAIN password. Append
/// these to the `EnvFilter` (a more specific directive wins, so
/// `--log-level trace` still traces everything else).
pub const LOG_FILTER_CAPS: &[&str] = &["lapin=debug"];

/// Metadata keys of the broker sources, with KEDA's names and defaults where
/// KEDA's built-in scaler has the concept. `xFromEnv` is read as `x`.
pub mod keys {
    /// SQS: the queue, as a full URL
    /// (`https://sqs.REGION.amazonaws.com/ACCOUNT/NAME`) or its name (looked
    /// up once with GetQueueUrl). Selects the SQS source. Each reading is one
    /// `GetQueueAttributes` call; `Q = ApproximateNumberOfMessages` (+
    /// `…NotVisible` with `scaleOnInFlight`, + `…Delayed` with
    /// `scaleOnDelayed`), as KEDA's `aws-sqs-queue`.
    pub const QUEUE_URL: &str = "queueURL";
    /// SQS: the AWS region, e.g. `eu-west-1`. Required with `queueURL`.
    pub const AWS_REGION: &str = "awsRegion";
    /// SQS: endpoint of an SQS-compatible server, e.g. `http://moto:5000`.
    /// Default: AWS's endpoint for `awsRegion`.
    pub const AWS_ENDPOINT: &str = "awsEndpoint";
    /// SQS: count in-flight messages (received, not yet deleted:
    /// `ApproximateNumberOfMessagesNotVisible`). `true` or `false`, default
    /// `true` (KEDA's default).
    pub const SCALE_ON_IN_FLIGHT: &str = "scaleOnInFlight";
    /// SQS: count delayed messages (`ApproximateNumberOfMessagesDelayed`).
    /// `true` or `false`, default `false`.
    pub const SCALE_ON_DELAYED: &str = "scaleOnDelayed";

    /// Kafka: comma-separated `host:port` list. Selects the Kafka source.
    /// `Q` is the consumer group's lag, summed over partitions: high
    /// watermark − committed offset, as KEDA's `kafka` scaler.
    pub const BOOTSTRAP_SERVERS: &str = "bootstrapServers";
    /// Kafka: the consumer group whose committed offsets are read (the
    /// scaler never joins it). Required with `bootstrapServers`.
    pub const CONSUMER_GROUP: &str = "consumerGroup";
    /// Kafka: the topic. Default: every topic on which the group has
    /// committed an offset (internal `__` topics excluded).
    pub const TOPIC: &str = "topic";
    /// Kafka: lag of a partition without a committed offset: `latest`
    /// (default) counts 1, `earliest` counts the high watermark (every
    /// message would be read), as the consumer's `auto.offset.reset`.
    pub const OFFSET_RESET_POLICY: &str = "offsetResetPolicy";
    /// Kafka: `true` counts 0 for a partition without a committed offset,
    /// whatever `offsetResetPolicy` says. Default `false`.
    pub const SCALE_TO_ZERO_ON_INVALID_OFFSET: &str = "scaleToZeroOnInvalidOffset";
    /// Kafka: `true` lets replicas exceed the partition count (idle
    /// consumers). Default `false`: the broker term is capped at
    /// `targetBacklogPerReplica × partitions`, as KEDA caps replicas.
    pub const ALLOW_IDLE_CONSUMERS: &str = "allowIdleConsumers";
    /// Kafka: `true` counts 0 (for scaling) on a partition whose committed
    /// offset has not moved since the previous reading, e.g. a poison
    /// message; such lag still counts for activation, as in KEDA. Default `false`.
    pub const EXCLUDE_PERSISTENT_LAG: &str = "excludePersistentLag";
    /// Kafka: `true` caps replicas at the number of partitions that have
    /// lag, instead of all partitions. Needs `topic`; not with
    /// `allowIdleConsumers: true`. Default `false`.
    pub const LIMIT_TO_PARTITIONS_WITH_LAG: &str = "limitToPartitionsWithLag";

    /// RabbitMQ: `amqp://HOST:PORT[/VHOST]`, `amqps://…`, or the management
    /// API `http(s)://HOST:PORT[/VHOST]`, WITHOUT credentials (they come from
    /// `authProfile`; without one, `guest`/`guest`). Selects the RabbitMQ
    /// source. KEDA's `host`, renamed because `host` is too generic here.
    pub const RABBITMQ_HOST: &str = "rabbitmqHost";
    /// RabbitMQ: `auto` (default: from the scheme of `rabbitmqHost`), `amqp`
    /// or `http`. AMQP counts ready messages (a passive `queue.declare`);
    /// HTTP counts ready + unacknowledged (`messages` of
    /// `GET /api/queues/VHOST/QUEUE`).
    pub const PROTOCOL: &str = "protocol";
    /// RabbitMQ: the virtual host. Default: the path of `rabbitmqHost`
    /// (percent-decoded), or `/` when it has none.
    pub const VHOST_NAME: &str = "vhostName";
    /// RabbitMQ: the queue. Required with `rabbitmqHost`.
    pub const QUEUE_NAME: &str = "queueName";
    /// RabbitMQ (HTTP only): `true` counts ready messages only
    /// (`messages_ready`), not those delivered and unacknowledged. Default `false`.
    pub const EXCLUDE_UNACKNOWLEDGED: &str = "excludeUnacknowledged";

    /// `w`: requests-equivalent per broker message (e.g. `4` when each
    /// message is a batch of 4 prompts). A number > 0, default `1`. Needs a
    /// broker source.
    pub const MESSAGE_WEIGHT: &str = "messageWeight";
    /// Name of a credential profile in the scaler's `--config` (`profiles:`),
    /// used for the broker's credentials. The profile may restrict which
    /// namespaces use it (others get `PERMISSION_DENIED`). Needs a broker source.
    pub const AUTH_PROFILE: &str = "authProfile";

    /// SQS keys.
    pub const SQS: &[&str] = &[
        QUEUE_URL,
        AWS_REGION,
        AWS_ENDPOINT,
        SCALE_ON_IN_FLIGHT,
        SCALE_ON_DELAYED,
    ];
    /// Kafka keys.
    pub const KAFKA: &[&str] = &[
        BOOTSTRAP_SERVERS,
        CONSUMER_GROUP,
        TOPIC,
        OFFSET_RESET_POLICY,
        SCALE_TO_ZERO_ON_INVALID_OFFSET,
        ALLOW_IDLE_CONSUMERS,
        EXCLUDE_PERSISTENT_LAG,
        LIMIT_TO_PARTITIONS_WITH_LAG,
    ];
    /// RabbitMQ keys.
    pub const RABBITMQ: &[&str] = &[
        RABBITMQ_HOST,
        PROTOCOL,
        VHOST_NAME,
        QUEUE_NAME,
        EXCLUDE_UNACKNOWLEDGED,
    ];
    /// Keys of any broker.
    pub const COMMON: &[&str] = &[MESSAGE_WEIGHT, AUTH_PROFILE];
    /// Every broker key.
    pub const ALL: &[&str] = &[
        QUEUE_URL,
        AWS_REGION,
        AWS_ENDPOINT,
        SCALE_ON_IN_FLIGHT,
        SCALE_ON_DELAYED,
        BOOTSTRAP_SERVERS,
        CONSUMER_GROUP,
        TOPIC,
        OFFSET_RESET_POLICY,
        SCALE_TO_ZERO_ON_INVALID_OFFSET,
        ALLOW_IDLE_CONSUMERS,
        EXCLUDE_PERSISTENT_LAG,
        LIMIT_TO_PARTITIONS_WITH_LAG,
        RABBITMQ_HOST,
        PROTOCOL,
        VHOST_NAME,
        QUEUE_NAME,
        EXCLUDE_UNACKNOWLEDGED,
        MESSAGE_WEIGHT,
        AUTH_PROFILE,
    ];
}

/// Which broker a key belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sqs,
    Kafka,
    RabbitMq,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Sqs, Kind::Kafka, Kind::RabbitMq];

    fn anchor(self) -> &'static str {
        match self {
            Kind::Sqs => keys::QUEUE_URL,
            Kind::Kafka => keys::BOOTSTRAP_SERVERS,
            Kind::RabbitMq => keys::RABBITMQ_HOST,
        }
    }

    fn keys(self) -> &'static [&'static str] {
        match self {
            Kind::Sqs => keys::SQS,
            Kind::Kafka => keys::KAFKA,
            Kind::RabbitMq => keys::RABBITMQ,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Sqs => "SQS",
            Kind::Kafka => "Kafka",
            Kind::RabbitMq => "RabbitMQ",
        }
    }
}

/// Reads metadata for the broker parsers: `get(key)` → (key as sent, trimmed value).
pub(crate) struct Md<'g, 'a> {
    get: &'g dyn Fn(&'static str) -> Option<(&'a str, &'a str)>,
    pub(crate) errors: Vec<MetadataError>,
}

impl<'a> Md<'_, 'a> {
    pub(crate) fn get(&self, key: &'static str) -> Option<(&'a str, &'a str)> {
        (self.get)(key)
    }

    /// A present, non-empty value; an empty one is reported as invalid.
    pub(crate) fn non_empty(&mut self, key: &'static str) -> Option<(&'a str, &'a str)> {
        let (sent, value) = self.get(key)?;
        if value.is_empty() {
            self.invalid(sent, value, "a non-empty value");
            return None;
        }
        Some((sent, value))
    }

    pub(crate) fn required(
        &mut self,
        key: &'static str,
        allowed: &'static str,
    ) -> Option<(&'a str, &'a str)> {
        if self.get(key).is_none() {
            self.errors.push(MetadataError::Missing { key, allowed });
            return None;
        }
        self.non_empty(key)
    }

    /// Report an invalid value. A URL's `user:password@` is not echoed back.
    pub(crate) fn invalid(&mut self, sent: &str, value: &str, allowed: impl Into<String>) {
        self.errors.push(MetadataError::Invalid {
            key: sent.to_owned(),
            value: redact_userinfo(value),
            allowed: allowed.into(),
        });
    }

    /// KEDA's booleans (Go `strconv.ParseBool`).
    pub(crate) fn bool(&mut self, key: &'static str, default: bool) -> bool {
        let Some((sent, value)) = self.get(key) else {
            return default;
        };
        match value {
            "true" | "True" | "TRUE" | "t" | "T" | "1" => true,
            "false" | "False" | "FALSE" | "f" | "F" | "0" => false,
            _ => {
                self.invalid(sent, value, "`true` or `false`");
                default
            }
        }
    }
}

/// Parse a trigger's broker keys. `get(key)` returns the key as the user
/// sent it (a `…FromEnv` spelling is kept for error messages) and its
/// trimmed value; fold `xFromEnv` onto `x` before calling.
///
/// Returns `Ok(None)` when the trigger uses no broker key; otherwise the
/// broker named by `queueURL`, `bootstrapServers` or `rabbitmqHost` (at most
/// one) with its `messageWeight` (`authProfile` is inside the source, being
/// part of its identity). Every problem is reported at once. No I/O.
pub fn parse_metadata<'a>(
    get: &dyn Fn(&'static str) -> Option<(&'a str, &'a str)>,
) -> Result<Option<BrokerTrigger>, Vec<MetadataError>> {
    let mut md = Md {
        get,
        errors: Vec::new(),
    };
    let anchors: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| md.get(k.anchor()).is_some())
        .collect();
    let Some(&kind) = anchors.first() else {
        // No broker: any broker key is a mistake worth naming.
        for k in Kind::ALL {
            for key in k.keys() {
                if let Some((sent, value)) = md.get(key) {
                    md.invalid(
                        sent,
                        value,
                        format!("a {} key: set `{}` too", k.name(), k.anchor()),
                    );
                }
            }
        }
        // `authProfile` also serves the Prometheus path; only the weight
        // is meaningless without a broker.
        for key in [keys::MESSAGE_WEIGHT] {
            if let Some((sent, value)) = md.get(key) {
                md.invalid(
                    sent,
                    value,
                    "applies to a broker source: set `queueURL`, `bootstrapServers` or `rabbitmqHost`",
                );
            }
        }
        return if md.errors.is_empty() {
            Ok(None)
        } else {
            Err(md.errors)
        };
    };
    for other in &anchors[1..] {
        if let Some((sent, value)) = md.get(other.anchor()) {
            md.invalid(
                sent,
                value,
                format!(
                    "one broker per trigger: this one already reads {} (`{}`); use a second trigger",
                    kind.name(),
                    kind.anchor()
                ),
            );
        }
    }
    for k in Kind::ALL {
        if k == kind || anchors.contains(&k) {
            continue;
        }
        for key in k.keys() {
            if let Some((sent, value)) = md.get(key) {
                md.invalid(
                    sent,
                    value,
                    format!(
                        "a {} key, but this trigger reads {} (`{}`)",
                        k.name(),
                        kind.name(),
                        kind.anchor()
                    ),
                );
            }
        }
    }

    let message_weight = match md.get(keys::MESSAGE_WEIGHT) {
        None => 1.0,
        Some((sent, value)) => match value.parse::<f64>() {
            Ok(w) if w.is_finite() && w > 0.0 => w,
            _ => {
                md.invalid(sent, value, "a number greater than 0, e.g. `1` or `2.5`");
                1.0
            }
        },
    };
    let auth_profile = match md.get(keys::AUTH_PROFILE) {
        None => None,
        Some((_, value)) if valid_profile_name(value) => Some(value.to_owned()),
        Some((sent, value)) => {
            md.invalid(
                sent,
                value,
                "the name of a profile in the scaler config: 1 to 63 letters, digits, `.`, `_` or `-`",
            );
            None
        }
    };

    let source = match kind {
        Kind::Sqs => SqsSource::parse(&mut md, auth_profile).map(BrokerSource::Sqs),
        Kind::Kafka => KafkaSource::parse(&mut md, auth_profile).map(BrokerSource::Kafka),
        Kind::RabbitMq => RabbitMqSource::parse(&mut md, auth_profile).map(BrokerSource::RabbitMq),
    };
    match source {
        Some(source) if md.errors.is_empty() => Ok(Some(BrokerTrigger {
            source,
            message_weight,
        })),
        _ => Err(md.errors),
    }
}

/// `scheme://user:password@host…` → `scheme://[redacted]@host…`, so that an
/// error about a URL never repeats credentials someone put in metadata.
pub fn redact_userinfo(value: &str) -> String {
    let Some(scheme_end) = value.find("://") else {
        return value.to_owned();
    };
    let authority_start = scheme_end + 3;
    let rest = &value[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_len].rfind('@') {
        Some(at) => format!("{}[redacted]{}", &value[..authority_start], &rest[at..]),
        None => value.to_owned(),
    }
}

/// Turn a finished blocking task's failure into a source error.
pub(crate) fn join_error(label: &str, error: tokio::task::JoinError) -> SourceError {
    SourceError::Upstream {
        target: label.to_owned(),
        reason: format!("reading task failed: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::broker::kafka::OffsetResetPolicy;
    use crate::source::broker::rabbitmq::Protocol;

    fn parse(pairs: &[(&'static str, &'static str)]) -> Result<Option<BrokerTrigger>, String> {
        let map: BTreeMap<&'static str, &'static str> = pairs.iter().copied().collect();
        let get = |key: &'static str| map.get(key).map(|v| (key, *v));
        parse_metadata(&get).map_err(|errors| {
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    fn ok(pairs: &[(&'static str, &'static str)]) -> BrokerTrigger {
        match parse(pairs) {
            Ok(Some(t)) => t,
            other => panic!("{pairs:?}: {other:?}"),
        }
    }

    fn err(pairs: &[(&'static str, &'static str)]) -> String {
        match parse(pairs) {
            Err(e) => e,
            Ok(t) => panic!("{pairs:?}: expected an error, got {t:?}"),
        }
    }

    #[test]
    fn no_broker_keys_is_none() {
        assert_eq!(parse(&[]), Ok(None));
    }

    #[test]
    fn sqs_defaults_follow_keda() {
        let t = ok(&[
            (
                "queueURL",
                "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs",
            ),
            ("awsRegion", "eu-west-1"),
        ]);
        assert_eq!(t.message_weight, 1.0);
        let BrokerSource::Sqs(s) = &t.source else {
            panic!("{t:?}")
        };
        assert!(s.scale_on_in_flight);
        assert!(!s.scale_on_delayed);
        assert_eq!(s.queue_name(), "jobs");
        assert_eq!(t.source.label(), "sqs eu-west-1/jobs");
        let t = ok(&[
            ("queueURL", "jobs.fifo"),
            ("awsRegion", "us-east-1"),
            ("awsEndpoint", "http://127.0.0.1:5000"),
            ("scaleOnInFlight", "false"),
            ("scaleOnDelayed", "True"),
            ("messageWeight", "2.5"),
            ("authProfile", "team-a"),
        ]);
        assert_eq!(t.message_weight, 2.5);
        assert_eq!(t.source.auth_profile(), Some("team-a"));
        let BrokerSource::Sqs(s) = &t.source else {
            panic!("{t:?}")
        };
        assert!(!s.scale_on_in_flight && s.scale_on_delayed);
    }

    #[test]
    fn kafka_defaults_follow_keda() {
        let t = ok(&[
            ("bootstrapServers", "b2:9092, b1:9092,b1:9092"),
            ("consumerGroup", "workers"),
        ]);
        let BrokerSource::Kafka(k) = &t.source else {
            panic!("{t:?}")
        };
        assert_eq!(k.bootstrap_servers, ["b1:9092", "b2:9092"]);
        assert_eq!(k.offset_reset_policy, OffsetResetPolicy::Latest);
        assert!(!k.allow_idle_consumers && !k.exclude_persistent_lag);
        assert!(!k.scale_to_zero_on_invalid_offset && !k.limit_to_partitions_with_lag);
        assert_eq!(t.source.label(), "kafka workers/*");
        let t = ok(&[
            ("bootstrapServers", "127.0.0.1:9092"),
            ("consumerGroup", "workers"),
            ("topic", "prompts"),
            ("offsetResetPolicy", "earliest"),
            ("limitToPartitionsWithLag", "true"),
            ("excludePersistentLag", "true"),
            ("scaleToZeroOnInvalidOffset", "1"),
        ]);
        assert_eq!(t.source.label(), "kafka workers/prompts");
    }

    #[test]
    fn rabbitmq_vhost_and_protocol() {
        let t = ok(&[
            ("rabbitmqHost", "amqp://10.0.0.5:5672/prod"),
            ("queueName", "jobs"),
        ]);
        let BrokerSource::RabbitMq(r) = &t.source else {
            panic!("{t:?}")
        };
        assert_eq!((r.protocol, r.vhost.as_str()), (Protocol::Amqp, "prod"));
        assert_eq!(
            t.source.label(),
            "rabbitmq amqp://10.0.0.5:5672 vhost=prod queue=jobs"
        );
        for (host, vhost) in [
            ("amqp://h:5672", "/"),
            ("amqp://h:5672/", "/"),
            ("amqp://h:5672/%2F", "/"),
            ("http://h:15672/a%2Fb", "a/b"),
        ] {
            let t = ok(&[("rabbitmqHost", host), ("queueName", "q")]);
            let BrokerSource::RabbitMq(r) = &t.source else {
                panic!("{t:?}")
            };
            assert_eq!(r.vhost, vhost, "{host}");
        }
        let t = ok(&[
            ("rabbitmqHost", "http://h:15672/ignored"),
            ("vhostName", "other"),
            ("queueName", "q"),
            ("excludeUnacknowledged", "true"),
            ("protocol", "http"),
        ]);
        let BrokerSource::RabbitMq(r) = &t.source else {
            panic!("{t:?}")
        };
        assert_eq!(
            (r.protocol, r.vhost.as_str(), r.exclude_unacknowledged),
            (Protocol::Http, "other", true)
        );
    }

    /// Metadata pairs and the needles its error must contain.
    type Case = (
        &'static [(&'static str, &'static str)],
        &'static [&'static str],
    );

    #[test]
    fn mistakes_name_the_key_the_value_and_what_is_allowed() {
        let cases: &[Case] = &[
            (&[("queueURL", "jobs")], &["awsRegion", "required"]),
            (
                &[
                    ("queueURL", "https://sqs.x.amazonaws.com/jobs"),
                    ("awsRegion", "x"),
                ],
                &["queueURL", "ACCOUNT/NAME"],
            ),
            (
                &[
                    ("queueURL", "jobs"),
                    ("awsRegion", "x"),
                    ("scaleOnInFlight", "yes"),
                ],
                &["scaleOnInFlight", "`yes`", "`true` or `false`"],
            ),
            (
                &[
                    ("queueURL", "jobs"),
                    ("awsRegion", "x"),
                    ("awsEndpoint", "http://u:p@h:1"),
                ],
                &["awsEndpoint", "credentials"],
            ),
            (
                &[
                    ("queueURL", "jobs"),
                    ("awsRegion", "x"),
                    ("messageWeight", "0"),
                ],
                &["messageWeight", "`0`", "greater than 0"],
            ),
            (
                &[("bootstrapServers", "b:9092")],
                &["consumerGroup", "required"],
            ),
            (
                &[
                    ("bootstrapServers", "PLAINTEXT://b:9092"),
                    ("consumerGroup", "g"),
                ],
                &["bootstrapServers", "host:port"],
            ),
            (
                &[
                    ("bootstrapServers", "b:9092"),
                    ("consumerGroup", "g"),
                    ("limitToPartitionsWithLag", "true"),
                ],
                &["limitToPartitionsWithLag", "needs `topic`"],
            ),
            (
                &[
                    ("bootstrapServers", "b:9092"),
                    ("consumerGroup", "g"),
                    ("topic", "t"),
                    ("limitToPartitionsWithLag", "true"),
                    ("allowIdleConsumers", "true"),
                ],
                &["allowIdleConsumers", "limitToPartitionsWithLag"],
            ),
            (
                &[
                    ("bootstrapServers", "b:9092"),
                    ("consumerGroup", "g"),
                    ("offsetResetPolicy", "newest"),
                ],
                &["offsetResetPolicy", "`latest` or `earliest`"],
            ),
            (
                &[
                    ("bootstrapServers", "b:9092"),
                    ("consumerGroup", "g"),
                    ("topic", "a/b"),
                ],
                &["topic", "a/b"],
            ),
            (
                &[
                    ("rabbitmqHost", "amqp://guest:guest@h:5672"),
                    ("queueName", "q"),
                ],
                &["rabbitmqHost", "credentials", "authProfile"],
            ),
            (
                &[("rabbitmqHost", "amqp://h:5672")],
                &["queueName", "required"],
            ),
            (
                &[("rabbitmqHost", "redis://h:5672"), ("queueName", "q")],
                &["rabbitmqHost", "amqp"],
            ),
            (
                &[
                    ("rabbitmqHost", "amqp://h:5672"),
                    ("queueName", "q"),
                    ("protocol", "http"),
                ],
                &["protocol", "amqp"],
            ),
            (
                &[
                    ("rabbitmqHost", "amqp://h:5672"),
                    ("queueName", "q"),
                    ("excludeUnacknowledged", "true"),
                ],
                &["excludeUnacknowledged", "http"],
            ),
            (
                &[
                    ("queueURL", "jobs"),
                    ("awsRegion", "x"),
                    ("bootstrapServers", "b:1"),
                ],
                &["bootstrapServers", "one broker per trigger"],
            ),
            (
                &[("queueURL", "jobs"), ("awsRegion", "x"), ("queueName", "q")],
                &["queueName", "RabbitMQ key", "SQS"],
            ),
            (
                &[("consumerGroup", "g")],
                &["consumerGroup", "set `bootstrapServers` too"],
            ),
            (
                &[("messageWeight", "2")],
                &["messageWeight", "broker source"],
            ),
            (
                &[
                    ("queueURL", "jobs"),
                    ("awsRegion", "x"),
                    ("authProfile", "a b"),
                ],
                &["authProfile", "`a b`"],
            ),
        ];
        for (pairs, needles) in cases {
            let text = err(pairs);
            for needle in *needles {
                assert!(
                    text.contains(needle),
                    "{pairs:?}: {text:?} lacks {needle:?}"
                );
            }
        }
    }

    #[test]
    fn urls_in_errors_lose_their_credentials() {
        assert_eq!(
            redact_userinfo("amqp://user:pa@ss@h:5672/v?x=@"),
            "amqp://[redacted]@h:5672/v?x=@"
        );
        assert_eq!(redact_userinfo("http://h:1/a@b"), "http://h:1/a@b");
        assert_eq!(redact_userinfo("jobs"), "jobs");
        let text = err(&[
            ("rabbitmqHost", "amqp://guest:Sup3rS3cret@h:5672"),
            ("queueName", "q"),
        ]);
        assert!(!text.contains("Sup3rS3cret"), "{text}");
        assert!(text.contains("amqp://[redacted]@h:5672"), "{text}");
    }

    #[test]
    fn every_key_is_listed_once() {
        let mut all: Vec<&str> = keys::ALL.to_vec();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), keys::ALL.len());
        let grouped =
            keys::SQS.len() + keys::KAFKA.len() + keys::RABBITMQ.len() + keys::COMMON.len();
        assert_eq!(grouped, keys::ALL.len());
    }

    #[test]
    fn authorize_checks_profile_namespace_and_section() {
        let profiles: Profiles = serde_yaml_ng::from_str(
            "mq: { namespaces: [a], rabbitmq: { username: { value: u }, password: { value: pass } } }",
        )
        .expect("parses");
        let t = ok(&[
            ("rabbitmqHost", "amqp://h:5672"),
            ("queueName", "q"),
            ("authProfile", "mq"),
        ]);
        assert!(t.source.authorize(&profiles, "a").is_ok());
        assert!(
            t.source
                .authorize(&profiles, "b")
                .expect_err("ns")
                .is_permission_denied()
        );
        let t = ok(&[("queueURL", "q"), ("awsRegion", "x"), ("authProfile", "mq")]);
        let e = t.source.authorize(&profiles, "a").expect_err("no aws");
        assert!(e.to_string().contains("`aws`"), "{e}");
        let t = ok(&[
            ("queueURL", "q"),
            ("awsRegion", "x"),
            ("authProfile", "nope"),
        ]);
        assert!(t.source.authorize(&profiles, "a").is_err());
        let t = ok(&[("queueURL", "q"), ("awsRegion", "x")]);
        assert!(t.source.authorize(&profiles, "a").is_ok());
    }
}
