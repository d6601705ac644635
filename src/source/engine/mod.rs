//! The engine source: every inference pod's `/metrics`, read as one
//! all-or-nothing reading of `W`, `R`, KV cache and TTFT per pod.
//!
//! Rule: one reading of one upstream, no metadata, no retries, no sleeps.
//! [`names`] is the per-engine table of metric names; [`pod`] parses one
//! pod's body against it and holds the reading types; `select` decides
//! which series of a family count (DP groups, TP/PP ranks, priorities).

pub mod names;
pub mod pod;
mod select;

pub use names::{Engine, EngineMetrics, HistogramName, LabelledGauge, SchedulerRanks};
pub use pod::{Buckets, EngineReading, EngineSource, PodReading, SeriesRead};
