//! The `capacity` policy: replicas from the arrival rate, not the queue.
//!
//! ARCHITECTURE.md §2, "The next policy: capacity":
//!
//! ```text
//! a      = Σ_pods (ΔF_i + ΔW_i + ΔR_i)            arrivals in the poll (F = finished counter)
//! λ̂     ← λ̂ + (1 − e^(−Δt/τ))·(a/Δt − λ̂)        τ = arrivalSmoothingSeconds
//! λ_peak = max of λ̂ over the hold: peakHoldSeconds within burstMemory of a
//!          burst (λ̂ rose by a burst's size, beyond its own noise, within
//!          BURST_RISE_SECONDS), 3× that
//!          (≤ burstMemory) after two bursts within it, else at most
//!          QUIET_PEAK_HOLD_SECONDS
//! D      = T·( (1 + headroom)·λ_peak/μ + Σ_pods min(1, W_i/(μ·H)) )      H = drainHorizonSeconds
//! ```
//!
//! Neither term grows during a cold start: `λ̂` is a rate, and each pod's
//! backlog term is capped at one pod. That is what stops the overshoot every
//! queue-based metric shows while new pods warm up. Pure: time is seconds on
//! any clock the caller chooses (the server's monotonic clock, or the
//! simulator's), so the simulator runs this exact code.
//!
//! Phantom arrivals are avoided: only pods present in both snapshots count,
//! and a pod whose finished counter went down (a restart) is read as new (no
//! contribution this poll). A pod leaving takes its queue with it, which is
//! not a negative arrival: the poll's total is floored at 0.

use std::collections::{HashMap, VecDeque};

use serde::Serialize;

use crate::source::engine::PodReading;
pub use crate::trigger::params::CapacityParams;

mod burst;
#[cfg(test)]
mod jitter;
pub mod learn;
pub mod tokens;

use burst::BurstTracker;
pub use burst::{BURST_MEMORY_SECONDS, BURST_RISE_SECONDS, QUIET_PEAK_HOLD_SECONDS};

use learn::{DrainRateLearner, DrainRateSource, PodPoint};
use tokens::{MixDelta, TokenLearner, TokenPoint};

/// One pod's counters and gauges at one reading.
#[derive(Debug, Clone, PartialEq)]
pub struct PodCounters {
    /// Pod identity (the scraped URL).
    pub pod: String,
    /// `W_i`.
    pub waiting: f64,
    /// `R_i`.
    pub running: f64,
    /// `F_i`: finished requests, all reasons, since the pod started; `None`
    /// when the pod did not expose it this poll.
    pub finished_total: Option<f64>,
    /// KV-cache usage 0–1, if reported (gives the full batch `R/kv`).
    pub kv_cache_usage: Option<f64>,
    /// `G_i`: generated tokens since the pod started, if exposed
    /// (`vllm:generation_tokens_total`): with `P_i`, `μ` is learned in tokens.
    pub generation_tokens_total: Option<f64>,
    /// `P_i`: prompt tokens since the pod started, if exposed
    /// (`vllm:prompt_tokens_total`).
    pub prompt_tokens_total: Option<f64>,
}

impl PodCounters {
    /// A scraped (or PromQL-read) pod's counters; no running gauge reads 0.
    pub fn from_reading(pod: &PodReading) -> PodCounters {
        PodCounters {
            pod: pod.target.clone(),
            waiting: pod.waiting,
            running: pod.running.unwrap_or(0.0),
            finished_total: pod.finished_total,
            kv_cache_usage: pod.kv_cache_usage,
            generation_tokens_total: pod.generation_tokens_total,
            prompt_tokens_total: pod.prompt_tokens_total,
        }
    }

    /// The token counters, when the pod exposes all of them this poll.
    fn token_point(&self) -> Option<TokenPoint> {
        Some(TokenPoint {
            running: self.running,
            finished_total: self.finished_total?,
            generation_tokens_total: self.generation_tokens_total?,
            prompt_tokens_total: self.prompt_tokens_total?,
        })
    }
}

/// The unit `μ` was learned in (docs/decisions/0027).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DrainRateUnit {
    /// Requests: the time in service against the batch (`S(k) = α + β·k`),
    /// or a configured / prior `μ`.
    Requests,
    /// Tokens: the engine's step cost fitted from its token counters,
    /// converted with the newest traffic's tokens per request.
    Tokens,
}

/// What the policy estimated at one reading: every number in the formula.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityEstimate {
    /// `a/Δt` of this poll, requests/s (0 on the first reading).
    pub arrival_rate: f64,
    /// `λ̂`, the smoothed arrival rate.
    pub smoothed_rate: f64,
    /// `λ_peak`.
    pub peak_rate: f64,
    /// The hold behind `λ_peak`, seconds: `peakHoldSeconds` within 30 min
    /// of a burst, three times that (at most 30 min) after two or more
    /// bursts within 30 min, else at most 120 s.
    pub peak_hold_seconds: f64,
    /// `μ` in use; 0 while nothing is known (the rate terms are then 0 and
    /// the backlog floor decides).
    pub drain_rate: f64,
    /// True when `μ` comes from the pods' counters (samples, fit or bounds).
    pub drain_rate_learned: bool,
    /// How `μ` was obtained.
    pub drain_rate_source: DrainRateSource,
    /// The unit it was learned in: `tokens` once the pods' token counters
    /// give a confident step cost, else `requests`.
    pub drain_rate_unit: DrainRateUnit,
    /// Relative standard error of the learned time in service at the full
    /// batch (0.05 is 5 %), when there are samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain_rate_relative_error: Option<f64>,
    /// Forgetting-weighted windows of samples behind the learned `μ`.
    pub drain_rate_samples: f64,
    /// Seconds since the newest sample, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain_rate_age_seconds: Option<f64>,
    /// `K`, the full batch `μ` is extrapolated to, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_batch: Option<f64>,
    /// `D` is at least the backlog formula `W + T·R/C`: `μ` is not
    /// confident yet, or a pod's counter is missing this poll.
    pub backlog_floor: bool,
    /// `(1 + headroom)·λ_peak/μ`, in replicas.
    pub rate_term: f64,
    /// `Σ_pods min(1, W_i/(μ·H))`, in replicas.
    pub pod_backlog_term: f64,
}

/// Below this fraction of `μ`, with no arrivals in the poll, the smoothed
/// rate is read as 0 (0.1 % of one pod's drain rate: far below any load
/// that needs a replica).
const IDLE_RATE_FRACTION: f64 = 1e-3;

/// Per-trigger state across readings.
#[derive(Debug, Clone, Default)]
pub struct CapacityState {
    previous: Option<(f64, HashMap<String, PodCounters>)>,
    smoothed: Option<f64>,
    /// (time, λ̂) with λ̂ strictly decreasing: the front is the window's max.
    peaks: VecDeque<(f64, f64)>,
    learner: DrainRateLearner,
    tokens: TokenLearner,
    /// `a/Δt` of the newest poll, repeated when the same reading is seen again.
    last_arrival_rate: f64,
    /// The newest poll lacked a pod's counter.
    incomplete: bool,
    /// When the first reading was taken: the rate estimate warms up from
    /// here ([`CapacityState::warming`]).
    first_at: Option<f64>,
    /// A rate has been measured (two readings with every counter).
    rate_measured: bool,
    /// Bursts seen, for the peak hold.
    bursts: BurstTracker,
}

/// Finishes a pod running `R` requests for `Δt` must show, at the learned
/// time in service, before a still counter is read as stale (a scrape of a
/// wedged exporter) rather than as requests that are merely long.
const STALE_EXPECTED_FINISHES: f64 = 10.0;

/// The counter stood still while the pod kept requests running long enough
/// that several should have finished.
fn stale(prev: &PodCounters, now: &PodCounters, dt: f64, service_seconds: f64) -> bool {
    let expected = prev.running.min(now.running) * dt / service_seconds.max(1e-9);
    prev.finished_total.is_some()
        && prev.finished_total == now.finished_total
        && expected >= STALE_EXPECTED_FINISHES
}

/// `μ` in use, and how it was obtained.
struct Drain {
    mu: Option<f64>,
    source: DrainRateSource,
    unit: DrainRateUnit,
    learned: learn::Learned,
}

/// Windows of samples before a bounds-only estimate replaces a configured prior.
const BOUNDS_OVER_PRIOR_SAMPLES: f64 = 3.0;

impl CapacityState {
    /// Fold in one reading taken at `t` seconds. `running_per_replica` (`C`)
    /// caps the full batch, and seeds the rate on the first reading as the
    /// fleet's current drain, `μ·ΣR/C`, so a restarted scaler does not start
    /// from zero demand (when `μ` is known).
    pub fn observe(
        &mut self,
        params: &CapacityParams,
        t: f64,
        pods: &[PodCounters],
        running_per_replica: Option<f64>,
    ) -> CapacityEstimate {
        let current: HashMap<String, PodCounters> =
            pods.iter().map(|p| (p.pod.clone(), p.clone())).collect();
        let mut incomplete = pods.iter().any(|p| p.finished_total.is_none());
        let mut arrival_rate = 0.0;
        // μ as the learners stand after this reading: computed once, as
        // every use below (the idle floor, the burst test, the estimate)
        // must see the same value.
        let drain;
        // The token learner's busy floor follows the full batch as the
        // request learner has it from the polls before this one.
        self.tokens.set_full_batch(self.learner.batch_cap());
        match self.previous.take() {
            Some((t0, before)) if t > t0 => {
                let dt = t - t0;
                let mut arrivals = 0.0;
                let mut mix = MixDelta::default();
                let mut mix_pods = 0;
                let service = self.learner.service_seconds();
                let mut stale_pods = Vec::new();
                for now in pods {
                    if let (Some(prev), Some(s)) = (before.get(&now.pod), service)
                        && stale(prev, now, dt, s)
                    {
                        incomplete = true;
                        stale_pods.push(now.pod.as_str());
                        continue;
                    }
                    let Some(prev) = before.get(&now.pod) else {
                        continue; // joined this poll: baseline only
                    };
                    let (Some(f_now), Some(f_prev)) = (now.finished_total, prev.finished_total)
                    else {
                        continue; // no counter on one side: nothing to diff
                    };
                    if f_now < f_prev {
                        continue; // counter reset: the pod restarted
                    }
                    let finished = f_now - f_prev;
                    // Requests that began decoding: finished, or still running.
                    let begun = finished + (now.running - prev.running);
                    if let (Some(a), Some(b)) = (now.token_point(), prev.token_point()) {
                        let generated = a.generation_tokens_total - b.generation_tokens_total;
                        let prompt = a.prompt_tokens_total - b.prompt_tokens_total;
                        if generated >= 0.0 && prompt >= 0.0 {
                            mix.generated += generated;
                            mix.prompt += prompt;
                            mix.finished += finished;
                            mix.begun += begun;
                            mix_pods += 1;
                        }
                    }
                    arrivals += begun + (now.waiting - prev.waiting);
                }
                if params.learn_drain_rate {
                    for pod in pods {
                        let fresh = !stale_pods.contains(&pod.pod.as_str());
                        let counter = pod.finished_total.filter(|_| fresh);
                        let point = counter.map(|finished_total| PodPoint {
                            waiting: pod.waiting,
                            running: pod.running,
                            finished_total,
                            kv_cache_usage: pod.kv_cache_usage,
                        });
                        self.learner.observe_pod(&pod.pod, t, point);
                        let tokens = pod.token_point().filter(|_| fresh);
                        self.tokens.observe_pod(&pod.pod, t, tokens);
                    }
                    self.tokens.observe_mix(t, (mix_pods > 0).then_some(mix));
                    self.learner.set_batch_cap(running_per_replica);
                    self.learner
                        .retain_pods(&|pod: &str| current.contains_key(pod));
                    self.tokens
                        .retain_pods(&|pod: &str| current.contains_key(pod));
                }
                drain = self.drain(params, running_per_replica);
                // A pod without its counter hides its arrivals: hold λ̂
                // rather than read the gap as less demand.
                if !incomplete {
                    arrival_rate = arrivals.max(0.0) / dt;
                    let mu = drain.mu.unwrap_or(1.0);
                    let alpha = 1.0 - (-dt / params.arrival_smoothing_seconds.max(1e-9)).exp();
                    let smoothed = self.smoothed.unwrap_or(arrival_rate);
                    let mut next = smoothed + alpha * (arrival_rate - smoothed);
                    // An EWMA only approaches 0; without a floor an idle
                    // Deployment would never become inactive (scale to zero).
                    if arrivals <= 0.0 && next < IDLE_RATE_FRACTION * mu {
                        next = 0.0;
                    }
                    self.smoothed = Some(next);
                    self.rate_measured = true;
                    self.bursts.note_rate(arrival_rate, dt, alpha);
                } else {
                    self.bursts.gap();
                }
            }
            Some((t0, before)) => {
                // Same or older timestamp (a re-evaluation): nothing new.
                self.previous = Some((t0, before));
                let drain = self.drain(params, running_per_replica);
                return self.estimate(params, t, pods, &drain);
            }
            None => {
                if params.learn_drain_rate {
                    for pod in pods {
                        let point = pod.finished_total.map(|finished_total| PodPoint {
                            waiting: pod.waiting,
                            running: pod.running,
                            finished_total,
                            kv_cache_usage: pod.kv_cache_usage,
                        });
                        self.learner.observe_pod(&pod.pod, t, point);
                        self.tokens.observe_pod(&pod.pod, t, pod.token_point());
                    }
                    self.learner.set_batch_cap(running_per_replica);
                }
                drain = self.drain(params, running_per_replica);
                let mu = drain.mu;
                // Without a seed, λ̂ starts at the first measured rate
                // rather than at 0: an EWMA from 0 is still 37 % low after
                // one time constant, long after the warm-up floor ends.
                self.smoothed = match (mu, running_per_replica) {
                    (Some(mu), Some(c)) => {
                        Some(mu * pods.iter().map(|p| p.running).sum::<f64>() / c)
                    }
                    _ => None,
                };
                self.first_at.get_or_insert(t);
            }
        }
        self.previous = Some((t, current));
        self.incomplete = incomplete;
        self.last_arrival_rate = arrival_rate;
        let smoothed = self.smoothed.unwrap_or(0.0);
        while self.peaks.back().is_some_and(|(_, v)| *v <= smoothed) {
            self.peaks.pop_back();
        }
        self.peaks.push_back((t, smoothed));
        // Before a rate is measured λ̂ reads 0: the first rate is no burst.
        if self.smoothed.is_some() {
            self.bursts.note(t, smoothed, drain.mu);
        }
        let hold = self.bursts.hold(params.peak_hold_seconds, t);
        while self.peaks.front().is_some_and(|(at, _)| *at < t - hold) {
            self.peaks.pop_front();
        }
        self.estimate(params, t, pods, &drain)
    }

    /// Seconds of warm-up left at `t`, or `None` once the rate estimate is
    /// valid: a rate has been measured and `arrivalSmoothingSeconds` have
    /// passed since the first reading. Until then a fresh trigger (a
    /// restarted or failed-over scaler) answers at least the backlog
    /// formula (docs/decisions/0021); no reading yet is warming too.
    pub fn warming(&self, params: &CapacityParams, t: f64) -> Option<f64> {
        let Some(first) = self.first_at else {
            return Some(params.arrival_smoothing_seconds);
        };
        let left = params.arrival_smoothing_seconds - (t - first);
        (left > 0.0 || !self.rate_measured).then_some(left.max(0.0))
    }

    fn drain(&self, params: &CapacityParams, running_per_replica: Option<f64>) -> Drain {
        let configured = params.drain_rate_per_replica;
        let learned = self.learner.estimate(running_per_replica);
        if !params.learn_drain_rate {
            return Drain {
                mu: configured,
                source: DrainRateSource::Configured,
                unit: DrainRateUnit::Requests,
                learned,
            };
        }
        let full = learned.full_batch.or(running_per_replica);
        if let Some(tokens) = self.tokens.estimate(full).filter(|e| e.confident()) {
            return Drain {
                mu: Some(tokens.drain_rate),
                source: DrainRateSource::Fit,
                unit: DrainRateUnit::Tokens,
                learned: learn::Learned {
                    relative_error: Some(tokens.relative_error),
                    ..learned
                },
            };
        }
        let unit = DrainRateUnit::Requests;
        match (learned.drain_rate, configured) {
            (Some(mu), _) if learned.confident() => Drain {
                mu: Some(mu),
                source: learned.source,
                unit,
                learned,
            },
            (Some(mu), None) => Drain {
                mu: Some(mu),
                source: DrainRateSource::Bounds,
                unit,
                learned,
            },
            (Some(mu), Some(_)) if learned.samples >= BOUNDS_OVER_PRIOR_SAMPLES => Drain {
                mu: Some(mu),
                source: DrainRateSource::Bounds,
                unit,
                learned,
            },
            (_, Some(prior)) => Drain {
                mu: Some(prior),
                source: DrainRateSource::Prior,
                unit,
                learned,
            },
            (None, None) => Drain {
                mu: None,
                source: DrainRateSource::None,
                unit,
                learned,
            },
        }
    }

    fn estimate(
        &self,
        params: &CapacityParams,
        t: f64,
        pods: &[PodCounters],
        drain: &Drain,
    ) -> CapacityEstimate {
        let smoothed = self.smoothed.unwrap_or(0.0);
        let peak = self
            .peaks
            .front()
            .map_or(smoothed, |(_, v)| *v)
            .max(smoothed);
        let (rate_term, pod_backlog_term) = match drain.mu {
            Some(mu) => {
                let horizon = mu * params.drain_horizon_seconds;
                let pods = pods
                    .iter()
                    .map(|p| {
                        if horizon > 0.0 {
                            (p.waiting / horizon).min(1.0)
                        } else {
                            1.0
                        }
                    })
                    .sum();
                ((1.0 + params.headroom) * peak / mu, pods)
            }
            None => (0.0, 0.0),
        };
        let unsure = matches!(
            drain.source,
            DrainRateSource::Bounds | DrainRateSource::None
        );
        CapacityEstimate {
            arrival_rate: self.last_arrival_rate,
            smoothed_rate: smoothed,
            peak_rate: peak,
            peak_hold_seconds: self.bursts.hold(params.peak_hold_seconds, t),
            drain_rate: drain.mu.unwrap_or(0.0),
            drain_rate_learned: matches!(
                drain.source,
                DrainRateSource::Samples | DrainRateSource::Fit | DrainRateSource::Bounds
            ),
            drain_rate_source: drain.source,
            drain_rate_unit: drain.unit,
            drain_rate_relative_error: drain.learned.relative_error,
            drain_rate_samples: drain.learned.samples,
            drain_rate_age_seconds: drain.learned.newest_sample_at.map(|at| (t - at).max(0.0)),
            full_batch: drain.learned.full_batch,
            backlog_floor: (params.learn_drain_rate && (unsure || self.incomplete))
                || self.warming(params, t).is_some(),
            rate_term,
            pod_backlog_term,
        }
    }
}

#[cfg(test)]
mod tests;
