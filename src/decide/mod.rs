//! The decision code, pure: readings and time in, a `Decision` out.
//! [`freshness`] turns held readings into signals (or a reason they are
//! unavailable), [`fusion`] applies the formula, [`capacity`] estimates the
//! arrival rate for the `capacity` policy, [`ttft_window`] computes the TTFT
//! quantile over a window of histogram snapshots.
//!
//! Rule: no I/O, no clock reads, no tasks; every function is tested with
//! tables, and the simulator runs this exact code. May use `trigger`,
//! `source` (reading types) and `guard`.

pub mod capacity;
pub mod freshness;
pub mod fusion;
pub mod ttft_window;
