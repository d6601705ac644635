//! Sources: each takes ONE reading of one upstream and returns it.
//!
//! Sources never sleep, retry or cache; the poller owns timing and failure
//! (ARCHITECTURE.md §1). A [`SourceSpec`] is also the identity of a source:
//! triggers whose specs are equal share one poller.

pub mod broker;
pub mod credentials;
pub mod dcgm;
pub mod engine;
pub mod http;
pub mod kafka;
pub mod outbound;
pub mod prom_text;
pub mod prometheus;
pub mod rabbitmq;
pub mod sqs;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

pub use dcgm::{DcgmSource, GpuReading};
pub use engine::{Engine, EngineReading, EngineSource, PodReading};
pub use http::{HttpScraper, RequestAuth, ScrapeTarget};
pub use outbound::{OutboundDenied, OutboundPolicy};
pub use prometheus::{PromQuery, QueryReading};

/// What to read. Equal specs share one poller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SourceSpec {
    /// Engine pods' `/metrics`, scraped directly.
    Engine(EngineSource),
    /// dcgm-exporter endpoints, scraped directly.
    Dcgm(DcgmSource),
    /// One PromQL instant query.
    Prometheus(PromQuery),
}

impl SourceSpec {
    /// A short, stable, credential-free label for logs and self-metrics.
    pub fn label(&self) -> String {
        match self {
            SourceSpec::Engine(source) => source.label(),
            SourceSpec::Dcgm(source) => source.label(),
            SourceSpec::Prometheus(query) => query.label(),
        }
    }

    /// Check every host this source names against the outbound allowlist
    /// (no DNS; resolved addresses are checked at connect time). Returns
    /// every refusal, empty when all are allowed.
    pub fn check_outbound(&self, policy: &OutboundPolicy) -> Vec<OutboundDenied> {
        let targets = |targets: &[ScrapeTarget]| -> Vec<OutboundDenied> {
            targets
                .iter()
                .filter_map(|t| t.check_outbound(policy).err())
                .collect()
        };
        match self {
            SourceSpec::Engine(source) => targets(&source.targets),
            SourceSpec::Dcgm(source) => targets(&source.targets),
            SourceSpec::Prometheus(query) => {
                policy.check_url(&query.address).err().into_iter().collect()
            }
        }
    }

    /// Take one reading.
    pub async fn read(&self, ctx: &SourceContext) -> Result<Reading, SourceError> {
        match self {
            SourceSpec::Engine(source) => source.read(ctx).await.map(Reading::Engine),
            SourceSpec::Dcgm(source) => source.read(ctx).await.map(Reading::Gpu),
            SourceSpec::Prometheus(query) => query.read(ctx).await.map(Reading::Query),
        }
    }
}

impl fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// One reading of one source.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Reading {
    /// Per-pod engine signals.
    Engine(EngineReading),
    /// Selected GPUs' utilisation.
    Gpu(GpuReading),
    /// A PromQL result.
    Query(QueryReading),
}

impl Reading {
    /// Lines of the upstream response that could not be parsed and were skipped.
    pub fn malformed_lines(&self) -> usize {
        match self {
            Reading::Engine(r) => r.malformed_lines,
            Reading::Gpu(r) => r.malformed_lines,
            Reading::Query(_) => 0,
        }
    }
}

/// What sources share: HTTP client, limits and scaler-side credentials.
#[derive(Debug, Clone)]
pub struct SourceContext {
    /// Scrapes HTTP endpoints with timeouts and a body cap.
    pub http: HttpScraper,
    /// Credentials for Prometheus servers, by profile name.
    pub prometheus_auth: Arc<HashMap<String, RequestAuth>>,
    /// Where sources may connect (the `outbound` config); the same policy
    /// `http` enforces. Sources with their own connections (brokers) call
    /// its checks before connecting.
    pub outbound: Arc<OutboundPolicy>,
}

impl SourceContext {
    /// A context with no credentials.
    pub fn new(http: HttpScraper) -> SourceContext {
        SourceContext {
            outbound: http.outbound().clone(),
            http,
            prometheus_auth: Arc::new(HashMap::new()),
        }
    }

    /// The credentials of a profile, if it has Prometheus ones.
    pub fn prometheus_auth(&self, profile: Option<&str>) -> Option<&RequestAuth> {
        profile.and_then(|p| self.prometheus_auth.get(p))
    }
}

/// Why a reading failed. Maps to the `outcome` label of the poll counter.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SourceError {
    /// The reading took longer than the poller allows.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The upstream could not be reached or answered with an error.
    #[error("{target}: {reason}")]
    Upstream {
        /// What was contacted (a URL without credentials).
        target: String,
        /// What went wrong.
        reason: String,
    },
    /// The upstream answered, but not with what we need.
    #[error("{target}: {reason}")]
    Parse {
        /// What was contacted.
        target: String,
        /// What was wrong with the data.
        reason: String,
    },
}

/// Outcome of one poll, as counted in `backlog_scaler_polls_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PollOutcome {
    /// A reading was taken.
    Ok,
    /// The reading timed out.
    Timeout,
    /// The upstream failed.
    UpstreamError,
    /// The upstream's data was unusable.
    ParseError,
}

impl PollOutcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            PollOutcome::Ok => "ok",
            PollOutcome::Timeout => "timeout",
            PollOutcome::UpstreamError => "upstream_error",
            PollOutcome::ParseError => "parse_error",
        }
    }
}

impl SourceError {
    /// How this failure is counted.
    pub fn outcome(&self) -> PollOutcome {
        match self {
            SourceError::Timeout(_) => PollOutcome::Timeout,
            SourceError::Upstream { .. } => PollOutcome::UpstreamError,
            SourceError::Parse { .. } => PollOutcome::ParseError,
        }
    }
}
