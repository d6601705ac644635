//! Sources: each takes one reading of one upstream and returns it.
//!
//! Rule: one reading of one upstream, no metadata, no retries, no sleeps.
//! A source gets a typed target built by `trigger/`, never metadata, and
//! may use only `guard/`; the poller owns timing and failure
//! (ARCHITECTURE.md §1). A [`SourceSpec`] is also the identity of a source:
//! triggers whose specs are equal share one poller.
//!
//! | file | job |
//! |---|---|
//! | [`spec`] | what to read ([`SourceSpec`]) and what a reading is ([`Reading`]) |
//! | [`context`] | what readings share: HTTP client, outbound policy, credentials |
//! | [`error`] | why a reading failed ([`SourceError`], [`FailureKind`]) and how it is counted |
//! | [`http`] | target syntax, DNS discovery, the pod fan-out and one bounded GET |
//! | [`engine`] | per-engine metric names and the pod parser |
//! | [`dcgm`] | dcgm-exporter GPU utilisation |
//! | [`prometheus`] | one PromQL instant query |
//! | [`broker`] | SQS, Kafka and RabbitMQ backlog |
//! | [`prom_text`] | the exposition-format parser |

pub mod broker;
pub mod context;
pub mod dcgm;
pub mod engine;
pub mod error;
pub mod http;
pub mod prom_text;
pub mod prometheus;
pub mod spec;

pub use broker::{BrokerContext, BrokerMemory, BrokerReading, BrokerSource};
pub use context::SourceContext;
pub use dcgm::{DcgmSource, GpuReading};
pub use engine::{Engine, EngineReading, EngineSource, PodReading, RequiredSignals};
pub use error::{FailureKind, PollOutcome, SourceError};
pub use http::{HttpScraper, ScrapeTarget};
pub use prometheus::{PromQuery, QueryReading};
pub use spec::{Reading, SourceMemory, SourceSpec};
