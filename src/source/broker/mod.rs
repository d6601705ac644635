//! Broker backlog `Q`: SQS, Kafka and RabbitMQ, counted as KEDA's built-in
//! scaler for each broker counts it, so that moving a trigger from KEDA's
//! scaler to this one changes nothing but the fusion.
//!
//! Rule: one reading of one upstream, no metadata, no retries, no sleeps;
//! the three brokers never import each other (what they share is in
//! [`context`], the one place that knows all three is [`source`]).
//!
//! A trigger has at most one broker source ([`BrokerSource`]), chosen by the
//! key that names its endpoint: `queueURL` (SQS), `bootstrapServers`
//! (Kafka) or `rabbitmqHost` (RabbitMQ). Credentials never come from
//! metadata: `authProfile` names a profile of the scaler's own config
//! ([`crate::guard::credentials`]); without one, SQS uses the AWS default
//! provider chain, Kafka connects without SASL/TLS and RabbitMQ uses
//! `guest`/`guest`.
//!
//! The poller owns timing. Broker clients are expensive to build, so they
//! are kept between readings: SQS clients in the shared [`BrokerContext`]
//! (one per region, endpoint and profile), Kafka consumers and AMQP
//! connections in the poller's [`BrokerMemory`] (they hold sockets and
//! threads and must go away with the poller). After a failed reading the
//! source's client is rebuilt at the next one, which also re-reads the
//! profile's secrets.

pub mod context;
pub mod kafka;
pub mod rabbitmq;
pub mod source;
pub mod sqs;

pub use context::{BrokerContext, BrokerContextError, BrokerReading, DEFAULT_REQUEST_TIMEOUT};
pub use rabbitmq::LOG_FILTER_CAPS;
pub use source::{BrokerMemory, BrokerSource};
