//! What owns time, tasks and state: one poller task per distinct source,
//! the decision cache (latest evaluation per trigger, cold start, idle
//! drop), the self-metrics, and the shutdown signal.
//!
//! Rule: sources and decisions are called from here, never the other way
//! round. May use `decide`, `trigger`, `source` and `guard`.

pub mod backoff;
pub mod cache;
pub mod poller;
pub mod retry;
pub mod shutdown;
pub mod telemetry;
