//! Trigger metadata → a validated [`TriggerSpec`]: the whole metadata
//! language, engine and broker keys alike.
//!
//! Rule: validation does no I/O, so `GetMetricSpec` can depend on it alone
//! and never fails because a source is down; every problem is reported at
//! once, each naming the key, the value (credentials redacted) and what is
//! allowed. KEDA forwards every key of a ScaledObject trigger's `metadata`
//! as `scalerMetadata`, its own keys included; [`keys`] is the user
//! reference for those keys.

pub mod broker;
mod defaults;
mod engine;
mod error;
mod gpu;
mod keda_names;
pub mod keys;
mod latency;
pub mod params;
mod policy;
mod spec;
mod values;

/// The redactor `invalid()` echoes values through (it lives in `guard/`,
/// where sources and telemetry can use it too).
pub use crate::guard::redact::redact;
pub use broker::BrokerTrigger;
pub use defaults::{
    DEFAULT_ARRIVAL_SMOOTHING_SECONDS, DEFAULT_DRAIN_HORIZON_SECONDS, DEFAULT_GPU_BUSY_PERCENT,
    DEFAULT_HEADROOM, DEFAULT_MAX_SIGNAL_AGE_POLLS, DEFAULT_PEAK_HOLD_SECONDS,
    DEFAULT_POLL_INTERVAL, DEFAULT_TTFT_QUANTILE, DEFAULT_TTFT_TOLERANCE, DEFAULT_TTFT_WINDOW,
};
pub use engine::{EngineInput, PromSignals};
pub use error::{MetadataError, MetadataErrors, Redacted, invalid};
pub use gpu::GpuInput;
pub use latency::TtftSettings;
pub use spec::{Mode, TriggerSpec};
pub use values::Metadata;
