//! The decision code, pure: readings and time in, a `Decision` out.
//! [`freshness`] turns held readings ([`signal_state`]) into signals (or an
//! [`unavailable`] reason; [`quorum`] folds in a fleet's failing pods),
//! [`fusion`] applies the formula, [`capacity`]
//! estimates the arrival rate for the `capacity` policy, [`ttft_window`]
//! computes the TTFT quantile over a window of histogram snapshots.
//!
//! Rule: no I/O, no clock reads, no tasks; every function is tested with
//! tables, and the simulator runs this exact code. May use `trigger`,
//! `source` (reading types) and `guard`.

pub mod capacity;
pub mod freshness;
pub mod fusion;
pub mod quorum;
pub mod signal_state;
pub mod ttft_window;
pub mod unavailable;
