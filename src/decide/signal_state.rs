//! How one source stands, as its poller publishes it and the decision reads
//! it: the last good reading, the last failure, and how many polls failed
//! since. Plain data: the poller (in `runtime`) stamps the times, this layer
//! only compares them.

use std::time::{Instant, SystemTime};

use crate::source::{Reading, SourceError};

/// A value with the time it was taken.
#[derive(Debug, Clone, PartialEq)]
pub struct Timed<T> {
    /// The value.
    pub value: T,
    /// Monotonic time, for ages.
    pub at: Instant,
    /// Wall time, for display.
    pub wall: SystemTime,
}

/// Everything a trigger needs to judge a source.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SignalState {
    /// The most recent successful reading.
    pub last_good: Option<Timed<Reading>>,
    /// The most recent failure.
    pub last_failure: Option<Timed<SourceError>>,
    /// Failures since the last success.
    pub consecutive_failures: u32,
}

impl SignalState {
    /// True while the newest poll failed.
    pub fn failing(&self) -> bool {
        self.consecutive_failures > 0
    }
}
