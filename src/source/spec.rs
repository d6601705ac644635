//! What to read ([`SourceSpec`], also a poller's identity), what a reading
//! is ([`Reading`]), and which hosts a source names, for the outbound
//! allowlist.

use std::fmt;

use serde::Serialize;

use super::broker::context::BrokerReading;
use super::broker::source::{BrokerMemory, BrokerSource};
use super::broker::sqs::QueueRef;
use super::dcgm::{DcgmSource, GpuReading};
use super::engine::pod::{EngineReading, EngineSource};
use super::http::ScrapeTarget;
use super::prometheus::{PromQuery, QueryReading};
use crate::guard::outbound::{OutboundDenied, OutboundPolicy};

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
    /// A short, stable label for logs, `/explain` and self-metrics; each
    /// source's label is redacted when built (`crate::guard::redact`).
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
            // The hosts a broker source names, as for every source: a name
            // against the host patterns, an IP literal against the CIDRs.
            // Their addresses, and the brokers a Kafka cluster advertises,
            // are only known after DNS or a metadata answer, so the broker
            // clients check them at connect time (docs/decisions/0005).
            SourceSpec::Broker(source) => broker_hosts(source)
                .iter()
                .filter_map(|host| policy.check_host(host).err())
                .collect(),
        }
    }
}

/// Per-poller state a source keeps between readings.
#[derive(Debug, Default)]
pub struct SourceMemory {
    /// Broker connections and offsets.
    pub broker: BrokerMemory,
}

/// The hosts (names or IP literals, without ports) a broker source names:
/// SQS `awsEndpoint` and the host of a `queueURL`, every Kafka bootstrap
/// server, the RabbitMQ host.
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
            if let QueueRef::Url { url, .. } = &sqs.queue
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
