//! What every telemetry file shares: the per-trigger label set and the
//! float gauge type. A leaf, so the family files need not import the
//! registry that holds them.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::gauge::Gauge;

/// Labels of per-trigger series.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TriggerLabels {
    /// ScaledObject namespace.
    pub namespace: String,
    /// ScaledObject name.
    pub name: String,
    /// The trigger's metric name.
    pub metric: String,
}

/// A gauge holding an `f64`.
pub(crate) type FloatGauge = Gauge<f64, AtomicU64>;
