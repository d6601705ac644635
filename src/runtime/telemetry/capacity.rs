//! The `capacity` policy's estimate per trigger, set with each decision:
//! the drain rate `μ` in use and how it was obtained, the smoothed and peak
//! arrival rates, and whether the backlog floor is in force. A `backlog`
//! trigger has none of these series (its decision carries no estimate).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::labels::{FloatGauge, TriggerLabels};
use crate::decide::capacity::CapacityEstimate;
use crate::decide::capacity::learn::DrainRateSource;

/// Every value of the drain rate's `source` label.
const SOURCES: [&str; 6] = ["configured", "prior", "samples", "fit", "bounds", "none"];
/// Every value of the arrival rate's `kind` label.
const KINDS: [&str; 2] = ["smoothed", "peak"];

/// The label a [`DrainRateSource`] is exported as (its `/explain` spelling).
fn source_name(source: DrainRateSource) -> &'static str {
    match source {
        DrainRateSource::Configured => "configured",
        DrainRateSource::Prior => "prior",
        DrainRateSource::Samples => "samples",
        DrainRateSource::Fit => "fit",
        DrainRateSource::Bounds => "bounds",
        DrainRateSource::None => "none",
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DrainRateLabels {
    namespace: String,
    name: String,
    metric: String,
    source: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ArrivalLabels {
    namespace: String,
    name: String,
    metric: String,
    kind: &'static str,
}

fn drain_labels(labels: &TriggerLabels, source: &'static str) -> DrainRateLabels {
    DrainRateLabels {
        namespace: labels.namespace.clone(),
        name: labels.name.clone(),
        metric: labels.metric.clone(),
        source,
    }
}

fn arrival_labels(labels: &TriggerLabels, kind: &'static str) -> ArrivalLabels {
    ArrivalLabels {
        namespace: labels.namespace.clone(),
        name: labels.name.clone(),
        metric: labels.metric.clone(),
        kind,
    }
}

/// The capacity families.
#[derive(Debug, Default)]
pub(super) struct CapacityMetrics {
    drain_rate: Family<DrainRateLabels, FloatGauge>,
    arrival_rate: Family<ArrivalLabels, FloatGauge>,
    backlog_floor: Family<TriggerLabels, Gauge>,
}

impl CapacityMetrics {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "capacity_drain_rate",
            "capacity policy: the drain rate mu in use, requests/s one replica finishes at a full batch, by how it was obtained (source: configured, prior, samples, fit, bounds, none; 0 with none)",
            self.drain_rate.clone(),
        );
        registry.register(
            "capacity_arrival_rate",
            "capacity policy: the arrival rate, requests/s, smoothed (kind=smoothed) and its peak over peakHoldSeconds (kind=peak)",
            self.arrival_rate.clone(),
        );
        registry.register(
            "capacity_backlog_floor",
            "capacity policy: 1 while the demand is floored at the backlog formula (mu not confident yet, a pod's counter missing, or warming up)",
            self.backlog_floor.clone(),
        );
    }

    /// Set a trigger's series from its decision's estimate; `None` (a
    /// `backlog` trigger) removes any it had.
    pub(super) fn record(&self, labels: &TriggerLabels, estimate: Option<&CapacityEstimate>) {
        let Some(e) = estimate else {
            self.remove(labels);
            return;
        };
        let source = source_name(e.drain_rate_source);
        // One series per trigger: the one under the previous source goes,
        // or the dashboard would draw a stale μ beside the current one.
        for other in SOURCES.into_iter().filter(|s| *s != source) {
            self.drain_rate.remove(&drain_labels(labels, other));
        }
        self.drain_rate
            .get_or_create(&drain_labels(labels, source))
            .set(e.drain_rate);
        for (kind, value) in KINDS.into_iter().zip([e.smoothed_rate, e.peak_rate]) {
            self.arrival_rate
                .get_or_create(&arrival_labels(labels, kind))
                .set(value);
        }
        self.backlog_floor
            .get_or_create(labels)
            .set(i64::from(e.backlog_floor));
    }

    pub(super) fn remove(&self, labels: &TriggerLabels) {
        for source in SOURCES {
            self.drain_rate.remove(&drain_labels(labels, source));
        }
        for kind in KINDS {
            self.arrival_rate.remove(&arrival_labels(labels, kind));
        }
        self.backlog_floor.remove(labels);
    }
}

/// Every value of the `source` label.
pub(super) fn source_names() -> &'static [&'static str] {
    &SOURCES
}

/// Every value of the `kind` label.
pub(super) fn kind_names() -> &'static [&'static str] {
    &KINDS
}
