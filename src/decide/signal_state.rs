//! How one source stands, as its poller publishes it and the decision reads
//! it: the last good reading, the last failure, and how many polls failed
//! since; for a pod-scrape source, also each discovered pod whose newest
//! scrape failed while others answered. Plain data: the poller (in
//! `runtime`) stamps the times, this layer only compares them.

use std::time::{Instant, SystemTime};

use crate::source::{PodReading, Reading, SourceError};

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
    /// The most recent successful reading. For a pod-scrape source: the
    /// pods that answered that poll (the others are in `failing_pods`).
    pub last_good: Option<Timed<Reading>>,
    /// The most recent failure.
    pub last_failure: Option<Timed<SourceError>>,
    /// Failures since the last success.
    pub consecutive_failures: u32,
    /// Pods discovered by the newest successful poll that did not answer
    /// it, sorted by target. Whether each still counts is the trigger's
    /// call (`maxSignalAgeSeconds` is per trigger).
    pub failing_pods: Vec<FailingPod>,
}

impl SignalState {
    /// True while the newest poll failed.
    pub fn failing(&self) -> bool {
        self.consecutive_failures > 0
    }
}

/// A discovered pod whose newest scrape failed while other pods answered.
#[derive(Debug, Clone, PartialEq)]
pub struct FailingPod {
    /// The URL scraped (credential-shaped parts redacted).
    pub target: String,
    /// Its newest good reading, with the time of that poll; `None` if it
    /// has not answered since the poller started.
    pub last_good: Option<Timed<PodReading>>,
    /// Its newest failure.
    pub last_failure: Timed<SourceError>,
    /// Its failed scrapes in a row.
    pub consecutive_failures: u32,
}
