//! The `capacity` policy's estimate per trigger, set with each decision:
//! the drain rate `μ` in use, how it was obtained and the unit it was
//! learned in, the smoothed and peak arrival rates, and whether the backlog
//! floor is in force. A `backlog` trigger has none of these series (its
//! decision carries no estimate).
//! The series are written by [`super::triggers`].

use crate::decide::capacity::learn::DrainRateSource;
use crate::decide::capacity::{CapacityEstimate, DrainRateUnit};

/// Every value of the drain rate's `source` label.
const SOURCES: [&str; 6] = ["configured", "prior", "samples", "fit", "bounds", "none"];
/// Every value of the drain rate's `unit` label.
const UNITS: [&str; 2] = ["requests", "tokens"];
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

/// The label a [`DrainRateUnit`] is exported as (its `/explain` spelling,
/// serde's camelCase).
fn unit_name(unit: DrainRateUnit) -> &'static str {
    match unit {
        DrainRateUnit::Requests => "requests",
        DrainRateUnit::Tokens => "tokens",
    }
}

/// What the capacity series show for one trigger. One `μ` series per
/// trigger, under its current source and unit: a dashboard must not draw a
/// stale `μ` under the previous source or unit beside the current one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct CapacityValues {
    pub drain_rate: f64,
    pub source: &'static str,
    /// The unit `μ` was learned in; `μ` itself is requests/s either way
    /// (a token fit is converted with the traffic's tokens per request).
    pub unit: &'static str,
    pub smoothed_rate: f64,
    pub peak_rate: f64,
    pub backlog_floor: bool,
}

impl From<&CapacityEstimate> for CapacityValues {
    fn from(e: &CapacityEstimate) -> Self {
        CapacityValues {
            drain_rate: e.drain_rate,
            source: source_name(e.drain_rate_source),
            unit: unit_name(e.drain_rate_unit),
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

/// Every value of the `unit` label.
pub(super) fn unit_names() -> &'static [&'static str] {
    &UNITS
}

/// Every value of the `kind` label.
pub(super) fn kind_names() -> &'static [&'static str] {
    &KINDS
}
