//! Sources: each takes ONE reading of one upstream and returns it.
//!
//! Sources never sleep, retry or cache; the poller owns timing and failure
//! (ARCHITECTURE.md §1). A [`SourceSpec`] is also the identity of a source:
//! triggers whose specs are equal share one poller.

pub mod broker;
pub mod dcgm;
pub mod engine;
pub mod http;
pub mod prom_text;
pub mod prometheus;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::guard::credentials;
use crate::guard::outbound::{OutboundDenied, OutboundPolicy};
pub use broker::{BrokerContext, BrokerMemory, BrokerReading, BrokerSource};
pub use dcgm::{DcgmSource, GpuReading};
pub use engine::{Engine, EngineReading, EngineSource, PodReading};
pub use http::{HttpScraper, ScrapeTarget};
use crate::guard::credentials::RequestAuth;
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
    /// A message broker's backlog (SQS, Kafka, RabbitMQ).
    Broker(BrokerSource),
}

impl SourceSpec {
    /// A short, stable, credential-free label for logs and self-metrics.
    pub fn label(&self) -> String {
        match self {
            SourceSpec::Engine(source) => source.label(),
            SourceSpec::Dcgm(source) => source.label(),
            SourceSpec::Prometheus(query) => query.label(),
            SourceSpec::Broker(source) => source.label(),
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
            // The hosts a broker source names; librdkafka and the AWS SDK
            // resolve names themselves, so resolved addresses of brokers are
            // not checked (docs/decisions/0005).
            SourceSpec::Broker(source) => broker_hosts(source)
                .iter()
                .filter_map(|host| policy.check_host(host).err())
                .collect(),
        }
    }

    /// Take one reading. `memory` is the poller's state between readings
    /// (open broker connections, Kafka's previous offsets).
    pub async fn read(
        &self,
        ctx: &SourceContext,
        memory: &mut SourceMemory,
    ) -> Result<Reading, SourceError> {
        match self {
            SourceSpec::Engine(source) => source.read(ctx).await.map(Reading::Engine),
            SourceSpec::Dcgm(source) => source.read(ctx).await.map(Reading::Gpu),
            SourceSpec::Prometheus(query) => query.read(ctx).await.map(Reading::Query),
            SourceSpec::Broker(source) => source
                .read(&ctx.brokers, &mut memory.broker)
                .await
                .map(Reading::Broker),
        }
    }
}

/// Per-poller state a source keeps between readings.
#[derive(Debug, Default)]
pub struct SourceMemory {
    /// Broker connections and offsets.
    pub broker: BrokerMemory,
}

/// Host names (or `host:port`) a broker source connects to first.
fn broker_hosts(source: &BrokerSource) -> Vec<String> {
    let host_of = |url: &str| {
        reqwest::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
    };
    match source {
        BrokerSource::Sqs(sqs) => {
            let mut hosts = Vec::new();
            if let Some(endpoint) = sqs.endpoint.as_deref().and_then(host_of) {
                hosts.push(endpoint);
            }
            if let broker::sqs::QueueRef::Url { url, .. } = &sqs.queue
                && let Some(host) = host_of(url)
            {
                hosts.push(host);
            }
            hosts
        }
        BrokerSource::Kafka(kafka) => kafka
            .bootstrap_servers
            .iter()
            .map(|server| {
                // `host:port` or `[v6]:port`.
                let host = server.rsplit_once(':').map_or(server.as_str(), |(h, _)| h);
                host.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned()
            })
            .collect(),
        BrokerSource::RabbitMq(rabbit) => rabbit
            .url
            .host_str()
            .map(str::to_owned)
            .into_iter()
            .collect(),
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
    /// A broker's backlog.
    Broker(BrokerReading),
}

impl Reading {
    /// Lines of the upstream response that could not be parsed and were skipped.
    pub fn malformed_lines(&self) -> usize {
        match self {
            Reading::Engine(r) => r.malformed_lines,
            Reading::Gpu(r) => r.malformed_lines,
            Reading::Query(_) | Reading::Broker(_) => 0,
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
    /// Broker clients and credential profiles.
    pub brokers: BrokerContext,
}

impl SourceContext {
    /// A context with no credentials.
    pub fn new(http: HttpScraper) -> Result<SourceContext, broker::BrokerContextError> {
        Self::with_profiles(
            http,
            Arc::new(credentials::Profiles::default()),
            HashMap::new(),
        )
    }

    /// A context with credential profiles (Prometheus credentials read).
    pub fn with_profiles(
        http: HttpScraper,
        profiles: Arc<credentials::Profiles>,
        prometheus_auth: HashMap<String, RequestAuth>,
    ) -> Result<SourceContext, broker::BrokerContextError> {
        Ok(SourceContext {
            outbound: http.outbound().clone(),
            http,
            prometheus_auth: Arc::new(prometheus_auth),
            brokers: BrokerContext::new(profiles, broker::DEFAULT_REQUEST_TIMEOUT)?,
        })
    }

    /// The context a scaler config implies: every profile's secrets are
    /// read once now (a missing environment variable or file fails here, at
    /// start-up, not at the first poll).
    pub fn from_config(
        config: &crate::guard::config::ScalerConfig,
        http: HttpScraper,
    ) -> Result<SourceContext, String> {
        config.profiles.check_secrets().map_err(|e| e.to_string())?;
        let prometheus_auth = config
            .profiles
            .prometheus_auth()
            .map_err(|e| e.to_string())?;
        Self::with_profiles(http, Arc::new(config.profiles.clone()), prometheus_auth)
            .map_err(|e| e.to_string())
    }

    /// The credential profiles.
    pub fn profiles(&self) -> &credentials::Profiles {
        &self.brokers.profiles
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
