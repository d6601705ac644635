//! Sources: each takes ONE reading of one upstream and returns it.
//!
//! Sources never sleep, retry or cache; the poller owns timing and failure
//! (ARCHITECTURE.md §1). A [`SourceSpec`] is also the identity of a source:
//! triggers whose specs are equal share one poller.

pub mod http;
pub mod prom_text;
pub mod vllm;

use std::fmt;
use std::time::Duration;

use serde::Serialize;

pub use http::{HttpScraper, ScrapeTarget};
pub use vllm::{EngineReading, PodReading, VllmSource};

/// What to read. Equal specs share one poller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SourceSpec {
    /// Engine pods' `/metrics`, scraped directly.
    Vllm(VllmSource),
}

impl SourceSpec {
    /// A short, stable, credential-free label for logs and self-metrics.
    pub fn label(&self) -> String {
        match self {
            SourceSpec::Vllm(source) => source.label(),
        }
    }

    /// Take one reading.
    pub async fn read(&self, ctx: &SourceContext) -> Result<Reading, SourceError> {
        match self {
            SourceSpec::Vllm(source) => source.read(ctx).await.map(Reading::Engine),
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
    /// Per-pod engine gauges.
    Engine(EngineReading),
}

impl Reading {
    /// Lines of the upstream response that could not be parsed and were skipped.
    pub fn malformed_lines(&self) -> usize {
        match self {
            Reading::Engine(r) => r.malformed_lines,
        }
    }
}

/// What sources share: HTTP client and limits.
#[derive(Debug, Clone)]
pub struct SourceContext {
    /// Scrapes HTTP endpoints with timeouts and a body cap.
    pub http: HttpScraper,
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
