//! What a request-level trace holds, in the numbers `simulate` prints before a run:
//! how many requests, over how long, how fast on average and at its busiest minute,
//! and the token mix that sets a pod's speed.

use std::fmt;

use super::TraceRequest;

/// The width of the bins behind [`minute_rates`] and the peak rate.
const MINUTE_SECONDS: f64 = 60.0;

/// The length of a trace, seconds: its last arrival (times start at the trace's start);
/// 0 for no requests.
pub fn duration_seconds(requests: &[TraceRequest]) -> f64 {
    requests
        .iter()
        .map(|r| r.arrival_seconds)
        .fold(0.0, f64::max)
}

/// Requests per second over the whole trace ([`duration_seconds`]); 0 when the trace
/// lasts no time (a single instant has no rate).
pub fn mean_rate(requests: &[TraceRequest]) -> f64 {
    let duration = duration_seconds(requests);
    if duration > 0.0 {
        requests.len() as f64 / duration
    } else {
        0.0
    }
}

/// Requests per second in each minute `[60k, 60(k+1))` from the trace's start, up to
/// the minute of the last arrival (the last bin may be partly past the trace's end and
/// is still divided by 60 s). `minute_rates(r)[0]` is the rate a warm start needs.
pub fn minute_rates(requests: &[TraceRequest]) -> Vec<f64> {
    if requests.is_empty() {
        return Vec::new();
    }
    let bins = (duration_seconds(requests) / MINUTE_SECONDS).floor() as usize + 1;
    let mut counts = vec![0_u64; bins];
    for r in requests {
        // Arrivals are ≥ 0 and ≤ the duration, so the index is in range; `min` guards
        // the last bin against rounding.
        let bin = ((r.arrival_seconds.max(0.0) / MINUTE_SECONDS) as usize).min(bins - 1);
        counts[bin] += 1;
    }
    counts
        .into_iter()
        .map(|c| c as f64 / MINUTE_SECONDS)
        .collect()
}

/// The headline numbers of a request-level trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceSummary {
    /// Number of requests.
    pub requests: usize,
    /// [`duration_seconds`].
    pub duration_seconds: f64,
    /// [`mean_rate`], requests/s.
    pub mean_rate: f64,
    /// The busiest of [`minute_rates`], requests/s.
    pub peak_minute_rate: f64,
    /// The first of [`minute_rates`], requests/s (what the fleet is warmed for).
    pub first_minute_rate: f64,
    /// Mean prompt length, tokens.
    pub mean_input_tokens: f64,
    /// Mean generated length, tokens.
    pub mean_output_tokens: f64,
}

/// The summary of `requests` (all zeros for none).
pub fn summarize(requests: &[TraceRequest]) -> TraceSummary {
    let rates = minute_rates(requests);
    let n = requests.len();
    let mean_of = |tokens: fn(&TraceRequest) -> u32| {
        if n == 0 {
            return 0.0;
        }
        let total: u64 = requests.iter().map(|r| u64::from(tokens(r))).sum();
        total as f64 / n as f64
    };
    TraceSummary {
        requests: n,
        duration_seconds: duration_seconds(requests),
        mean_rate: mean_rate(requests),
        peak_minute_rate: rates.iter().copied().fold(0.0, f64::max),
        first_minute_rate: rates.first().copied().unwrap_or(0.0),
        mean_input_tokens: mean_of(|r| r.input_tokens),
        mean_output_tokens: mean_of(|r| r.output_tokens),
    }
}

impl fmt::Display for TraceSummary {
    /// One line: `7203 requests over 1799.6 s; 4.00 req/s mean, 6.52 peak minute, 3.10
    /// first minute; 1712 input / 41 output tokens mean`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} requests over {:.1} s; {:.2} req/s mean, {:.2} peak minute, {:.2} first minute; \
             {:.0} input / {:.0} output tokens mean",
            self.requests,
            self.duration_seconds,
            self.mean_rate,
            self.peak_minute_rate,
            self.first_minute_rate,
            self.mean_input_tokens,
            self.mean_output_tokens
        )
    }
}
