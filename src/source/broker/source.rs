//! Which broker a trigger reads, and the per-poller state of each: the
//! one place that knows all three brokers.

use std::fmt;

use super::context::{BrokerContext, BrokerReading};
use super::kafka::{KafkaMemory, KafkaSource};
use super::rabbitmq::{RabbitMqMemory, RabbitMqSource};
use super::sqs::{SqsMemory, SqsSource};
use crate::guard::credentials::{ProfileError, Profiles, Section};
use crate::guard::redact::redact;
use crate::source::error::SourceError;

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

/// Per-poller state kept between readings: clients that hold connections
/// (dropped with the poller) and Kafka's previous committed offsets for
/// `excludePersistentLag`. Start with `BrokerMemory::default()`.
#[derive(Debug, Default)]
pub struct BrokerMemory {
    pub(crate) sqs: SqsMemory,
    pub(crate) kafka: KafkaMemory,
    pub(crate) rabbitmq: RabbitMqMemory,
}

impl BrokerSource {
    /// A short, stable, credential-free label for logs and self-metrics,
    /// e.g. `sqs us-east-1/jobs`, `kafka group/topic`,
    /// `rabbitmq amqp://10.0.0.5:5672 vhost=/ queue=jobs`. Each broker's
    /// label names no URL that could carry a credential (SQS the region and
    /// queue name, RabbitMQ scheme, host and port); redacted all the same.
    pub fn label(&self) -> String {
        redact(&match self {
            BrokerSource::Sqs(s) => s.label(),
            BrokerSource::Kafka(s) => s.label(),
            BrokerSource::RabbitMq(s) => s.label(),
        })
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
