//! What every telemetry file shares: the per-trigger label set. A leaf,
//! so the family files need not import the registry that holds them.

use prometheus_client::encoding::EncodeLabelSet;

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
