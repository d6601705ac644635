//! The engine source: every inference pod's `/metrics`, read as one
//! all-or-nothing reading of `W`, `R`, KV cache and TTFT per pod.
//!
//! Rule: one reading of one upstream, no metadata, no retries, no sleeps.
//! [`names`] is the per-engine table of metric names; [`pod`] parses one
//! pod's body against it and holds the reading types.

pub mod names;
pub mod pod;

pub use names::{Engine, EngineMetrics, HistogramName};
pub use pod::{Buckets, EngineReading, EngineSource, PodReading};
