//! The engine source: every inference pod's `/metrics`, read into `W`, `R`,
//! KV cache and TTFT per pod, each pod on its own ([`fanout`]): which pods
//! answered, and how each of the others failed.
//!
//! Rule: one reading of one upstream, no metadata, no retries, no sleeps.
//! [`names`] is the per-engine table of metric names; [`pod`] parses one
//! pod's body against it and holds the reading types; [`required`] says
//! which optional signals a pod must have; `select` decides which series of
//! a family count (DP groups, TP/PP ranks, priorities).

pub mod fanout;
pub mod names;
pub mod pod;
pub mod required;
mod select;

pub use fanout::{PodFailure, PodsRead};
pub use names::{Engine, EngineMetrics, HistogramName, LabelledGauge, SchedulerRanks};
pub use pod::{Buckets, EngineReading, EngineSource, PodReading, SeriesRead};
pub use required::{Missing, RequiredSignals};
