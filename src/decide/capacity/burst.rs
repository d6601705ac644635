//! Bursts and the peak hold they set (docs/decisions/0025, 0029, 0030).
//!
//! A burst is `λ̂` rising, within [`BURST_RISE_SECONDS`], by at least two
//! pods' `μ`, half the rate it rose from, and [`BURST_NOISE_SIGMAS`] of its
//! own noise. The hold of `λ_peak` is `peakHoldSeconds` within
//! [`BURST_MEMORY_SECONDS`] of a burst, stretched on a load that bursts
//! again, and short on one that has not burst. Pure, used only by
//! [`super::CapacityState`].

use std::collections::VecDeque;

/// A burst is a rise of `λ̂` within this many seconds (about one cold start):
/// faster than new pods can be ready, so the next one is met only by pods
/// kept from the last.
pub const BURST_RISE_SECONDS: f64 = 120.0;
/// A rise is a burst when it is at least this many pods' drain rate ...
const BURST_MIN_PODS: f64 = 2.0;
/// ... and at least this fraction of the rate it rose from.
const BURST_MIN_FRACTION: f64 = 0.5;
/// After the last burst, the full `peakHoldSeconds` is kept this long: a
/// load that burst recently is expected to burst again (docs/decisions/0025).
pub const BURST_MEMORY_SECONDS: f64 = 1800.0;
/// A load that burst at least this many times within
/// [`BURST_MEMORY_SECONDS`] bursts recurrently: its gaps between bursts are
/// shorter than the memory, so the hold is stretched to cover them.
const RECURRENT_BURSTS: usize = 2;
/// A rise is a burst only when it is also this many standard deviations of
/// `λ̂`'s own noise. A load whose requests come in clumps (a client that
/// sends a dozen at once, a trace replayed several times over) swings `λ̂`
/// by more than two pods' `μ` within 120 s with no change in demand, and a
/// false burst holds that noise's highest value for `peakHoldSeconds`. In
/// the simulator such swings reach 8.7 σ (the `chat` trace, a smooth load
/// in clumps of 12) and real bursts 17–37 σ (`code-completion`, `bursty`,
/// `spike`): 12 lies between (docs/decisions/0030).
const BURST_NOISE_SIGMAS: f64 = 12.0;
/// Time constant of the arrival-rate noise estimate, seconds: long against
/// a burst, so a burst's own edges barely raise it.
const RATE_NOISE_SECONDS: f64 = 300.0;
/// On a recurrently bursting load the hold is this many times
/// `peakHoldSeconds`, at most [`BURST_MEMORY_SECONDS`] (docs/decisions/0029).
const RECURRENT_HOLD_FACTOR: f64 = 3.0;
/// The hold on a load with no burst in [`BURST_MEMORY_SECONDS`]: a ramp or a
/// diurnal curve does not come back within a cold start, and the HPA's own
/// scale-down window (300 s by default) keeps the fleet through its dips.
/// What the hold still does is size the fleet for the top of `λ̂`'s noise
/// while the load rises (with none, a noisy rise is met late: `chat` loses
/// 2.3 SLO points); a minute does that (60 s against 120 s: 0.7–6 % fewer
/// replica-hours on the smooth loads at the same SLO; docs/decisions/0025,
/// amendment).
pub const QUIET_PEAK_HOLD_SECONDS: f64 = 60.0;

/// What the hold knows of the load's bursts.
#[derive(Debug, Clone, Default)]
pub(super) struct BurstTracker {
    /// (time, λ̂) over the last [`BURST_RISE_SECONDS`], to see a burst.
    recent: VecDeque<(f64, f64)>,
    /// When `λ̂` last rose like a burst.
    last_burst_at: Option<f64>,
    /// When each distinct burst of the last [`BURST_MEMORY_SECONDS`] began
    /// (polls rising like a burst within [`BURST_RISE_SECONDS`] of each
    /// other are one burst), oldest first.
    burst_starts: VecDeque<f64>,
    /// The per-poll arrival rate's noise.
    noise: RateNoise,
    /// The smallest rise of `λ̂` its noise cannot explain
    /// ([`BURST_NOISE_SIGMAS`] of it), requests/s.
    noise_floor: f64,
}

impl BurstTracker {
    /// Fold in one poll's arrival rate `a/Δt`, `dt` seconds after the last,
    /// where `λ̂` moves by `alpha` of the difference.
    pub(super) fn note_rate(&mut self, rate: f64, dt: f64, alpha: f64) {
        // The noise as it stood before this poll: a burst's first rate must
        // not raise the bar it is tested against.
        self.noise_floor = BURST_NOISE_SIGMAS * self.noise.smoothed_sigma(alpha);
        self.noise.observe(rate, dt);
    }

    /// A poll without a rate (a pod's counter missing).
    pub(super) fn gap(&mut self) {
        self.noise.gap();
    }

    /// Records `λ̂` and whether it just rose like a burst: by at least
    /// [`BURST_MIN_PODS`] pods' `μ`, [`BURST_MIN_FRACTION`] of the lowest
    /// `λ̂` of the last [`BURST_RISE_SECONDS`] and [`BURST_NOISE_SIGMAS`] of
    /// its noise. Without a `μ` nothing is a
    /// burst (the backlog floor decides then anyway).
    pub(super) fn note(&mut self, t: f64, smoothed: f64, drain_rate: Option<f64>) {
        while self
            .recent
            .front()
            .is_some_and(|(at, _)| *at < t - BURST_RISE_SECONDS)
        {
            self.recent.pop_front();
        }
        self.recent.push_back((t, smoothed));
        let Some(mu) = drain_rate else {
            return;
        };
        let low = self
            .recent
            .iter()
            .map(|(_, v)| *v)
            .fold(f64::INFINITY, f64::min);
        let rise = smoothed - low;
        if rise >= BURST_MIN_PODS * mu
            && rise >= BURST_MIN_FRACTION * low
            && rise >= self.noise_floor
        {
            if self
                .last_burst_at
                .is_none_or(|at| t - at > BURST_RISE_SECONDS)
            {
                self.burst_starts.push_back(t);
            }
            self.last_burst_at = Some(t);
        }
        while self
            .burst_starts
            .front()
            .is_some_and(|at| *at < t - BURST_MEMORY_SECONDS)
        {
            self.burst_starts.pop_front();
        }
    }

    /// The peak hold in force at `t`: `peak_hold_seconds` within
    /// [`BURST_MEMORY_SECONDS`] of a burst, stretched by
    /// [`RECURRENT_HOLD_FACTOR`] when the load bursts recurrently, else at
    /// most [`QUIET_PEAK_HOLD_SECONDS`].
    pub(super) fn hold(&self, peak_hold_seconds: f64, t: f64) -> f64 {
        let recent_bursts = self
            .burst_starts
            .iter()
            .filter(|at| t - **at <= BURST_MEMORY_SECONDS)
            .count();
        match self.last_burst_at {
            Some(at) if t - at <= BURST_MEMORY_SECONDS && recent_bursts >= RECURRENT_BURSTS => {
                (RECURRENT_HOLD_FACTOR * peak_hold_seconds)
                    .min(BURST_MEMORY_SECONDS)
                    .max(peak_hold_seconds)
            }
            Some(at) if t - at <= BURST_MEMORY_SECONDS => peak_hold_seconds,
            _ => peak_hold_seconds.min(QUIET_PEAK_HOLD_SECONDS),
        }
    }
}

/// The variance of the per-poll arrival rate `a/Δt` around the demand,
/// from successive differences (von Neumann): a level shift adds one large
/// difference, not a run of them, so a burst barely moves it while the
/// clumping of arrivals shows in full.
#[derive(Debug, Clone, Copy, Default)]
struct RateNoise {
    /// The newest poll's rate.
    last_rate: Option<f64>,
    /// Smoothed `(Δrate)²/2`, (requests/s)².
    variance: Option<f64>,
}

impl RateNoise {
    /// Fold in the rate of a poll `dt` seconds after the previous one.
    fn observe(&mut self, rate: f64, dt: f64) {
        if let Some(last) = self.last_rate {
            let sample = 0.5 * (rate - last).powi(2);
            let keep = (-dt / RATE_NOISE_SECONDS).exp();
            self.variance = Some(match self.variance {
                Some(v) => keep * v + (1.0 - keep) * sample,
                None => sample,
            });
        }
        self.last_rate = Some(rate);
    }

    /// The standard deviation of `λ̂`, an EWMA of these rates with weight
    /// `alpha` per poll: `σ·√(α/(2−α))`; 0 before two rates are known.
    fn smoothed_sigma(&self, alpha: f64) -> f64 {
        let v = self.variance.unwrap_or(0.0);
        (v * alpha / (2.0 - alpha).max(1e-9)).max(0.0).sqrt()
    }

    /// A poll without a rate: the next one is not differenced across it.
    fn gap(&mut self) {
        self.last_rate = None;
    }
}

#[cfg(test)]
mod tests;
