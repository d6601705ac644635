//! The `capacity` policy's estimate per trigger, set with each decision:
//! the drain rate `μ` in use and how it was obtained, the smoothed and peak
//! arrival rates, and whether the backlog floor is in force. A `backlog`
//! trigger has none of these series (its decision carries no estimate).
//! The series are written by [`super::triggers`].

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

/// What the capacity series show for one trigger. One `μ` series per
/// trigger, under its current source: a dashboard must not draw a stale
/// `μ` under the previous source beside the current one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct CapacityValues {
    pub drain_rate: f64,
    pub source: &'static str,
    pub smoothed_rate: f64,
    pub peak_rate: f64,
    pub backlog_floor: bool,
}

impl From<&CapacityEstimate> for CapacityValues {
    fn from(e: &CapacityEstimate) -> Self {
        CapacityValues {
            drain_rate: e.drain_rate,
            source: source_name(e.drain_rate_source),
            smoothed_rate: e.smoothed_rate,
            peak_rate: e.peak_rate,
            backlog_floor: e.backlog_floor,
        }
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
