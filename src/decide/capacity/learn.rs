//! `μ` learned from the pods' own counters (docs/decisions/0022).
//!
//! Little's law per pod over a window of polls: the request-seconds in
//! service `A = ∫R dt` and the requests that left service `N` (finished, plus
//! half the change of `R`, so a window that ends fuller than it began is not
//! read as faster) give the mean time in service `S = A/N` at the mean batch
//! `k = A/Δt`. A continuous-batching engine's step grows linearly with its
//! batch (`ITL(k) = a + b·k`, the form llm-d's WVA fits), so the time in
//! service is linear too:
//!
//! ```text
//! S(k) = α + β·k        fitted by weighted least squares (weight N, forgotten over τ)
//! μ    = K / S(K)       K = the full batch: min(runningPerReplica, R/kv)
//! ```
//!
//! `K` comes from the KV-cache gauge (`R/kv` is the batch at which the cache
//! is full with the current mix) capped by `runningPerReplica`. With α ≥ 0
//! and β ≥ 0, the data bound `μ` whatever the fit: at the centroid
//! `(k̄, S̄)`, `μ ≥ k̄/S̄` (throughput never falls as the batch grows) and
//! `μ ≤ K/S̄` (a request never gets faster in a fuller batch). The fit is
//! used once the standard error of `S(K)` is small; before that, the
//! geometric mean of the bounds, which moves the fleet towards a fuller
//! batch, where the bounds close on `μ` (and the caller keeps the backlog
//! formula as a floor meanwhile). A saturated pod (requests waiting at both
//! ends of its window) runs at `K`: its samples sit where the prediction is
//! made, so saturation makes the fit confident at once.

use std::collections::HashMap;

use serde::Serialize;

/// Time constant of the forgetting, seconds: the mix may drift, and an
/// estimate 2τ old carries an eighth of its weight.
const FORGET_SECONDS: f64 = 300.0;
/// A pod's window: long enough that `N` is tens of requests and the
/// trapezoid `∫R dt` smooths the gauge's noise.
const WINDOW_SECONDS: f64 = 60.0;
/// Confident when the standard error of `S(K)` is at most this fraction.
const CONFIDENT_RELATIVE_ERROR: f64 = 0.05;
/// And when the samples weigh at least this many windows.
const CONFIDENT_SAMPLES: f64 = 6.0;
/// A window with fewer requests leaving service says little (and an idle
/// pod nothing).
const MIN_REQUESTS: f64 = 5.0;

/// How the `μ` in use was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DrainRateSource {
    /// `drainRatePerReplica` with `learnDrainRate: false`: fixed.
    Configured,
    /// `drainRatePerReplica` as the prior: no samples yet.
    Prior,
    /// From saturated pods: measured at the full batch.
    Samples,
    /// Extrapolated to the full batch from the fitted latency curve.
    Fit,
    /// Not confident yet: the geometric mean of what the samples allow.
    Bounds,
    /// Nothing known: the rate terms are 0 and the backlog formula decides.
    None,
}

/// What the learner knows about `μ`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Learned {
    /// `μ`, requests/s per pod at a full batch, when anything is known.
    pub drain_rate: Option<f64>,
    /// Its source: `samples`, `fit`, `bounds` or `none`.
    pub source: DrainRateSource,
    /// Standard error of `S(K)`, relative (0.05 is 5 %); `None` without a fit.
    pub relative_error: Option<f64>,
    /// `K`, the full batch the estimate extrapolates to.
    pub full_batch: Option<f64>,
    /// Windows of samples behind it (forgetting-weighted).
    pub samples: f64,
    /// Time of the newest sample, seconds on the caller's clock.
    pub newest_sample_at: Option<f64>,
}

impl Learned {
    /// Confident enough to decide without the backlog floor.
    pub fn confident(&self) -> bool {
        matches!(self.source, DrainRateSource::Samples | DrainRateSource::Fit)
    }
}

/// An estimate with its bounds' middle and upper bound.
struct Raw {
    learned: Learned,
    bounds: Option<f64>,
    upper: Option<f64>,
}

/// One pod's reading, as far as learning goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodPoint {
    /// `W_i`.
    pub waiting: f64,
    /// `R_i`.
    pub running: f64,
    /// `F_i`.
    pub finished_total: f64,
    /// KV-cache usage 0–1, if reported.
    pub kv_cache_usage: Option<f64>,
}

#[derive(Debug, Clone)]
struct Window {
    start: f64,
    start_running: f64,
    last_t: f64,
    last: PodPoint,
    area: f64,
    finished: f64,
    saturated: bool,
}

/// Forgetting-weighted sums of the samples `(k, S)` with weight `N`.
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    w: f64,
    w2: f64,
    k: f64,
    kk: f64,
    s: f64,
    ks: f64,
    ss: f64,
    /// Σ kv and Σ R over pods reporting both (for `K`).
    kv: f64,
    running: f64,
    /// Σ w and Σ w·X of saturated windows.
    saturated_w: f64,
    saturated_x: f64,
}

impl Sums {
    fn decay(&mut self, factor: f64) {
        for v in [
            &mut self.w,
            &mut self.w2,
            &mut self.k,
            &mut self.kk,
            &mut self.s,
            &mut self.ks,
            &mut self.ss,
            &mut self.kv,
            &mut self.running,
            &mut self.saturated_w,
            &mut self.saturated_x,
        ] {
            *v *= factor;
        }
    }
}

/// Per-trigger learner of `μ`.
#[derive(Debug, Clone, Default)]
pub struct DrainRateLearner {
    windows: HashMap<String, Window>,
    sums: Sums,
    decayed_at: Option<f64>,
    newest_sample_at: Option<f64>,
    /// The full batch as last estimated, to weigh samples by occupancy.
    cap_hint: Option<f64>,
    /// The highest bounds-only estimate seen, forgotten with the sums.
    bounds_held: f64,
}

impl DrainRateLearner {
    /// Fold in one pod's reading at `t`. A pod whose counter went down
    /// restarted: its window starts again. `None` (no counter this poll)
    /// drops the pod's window: a gap is never read as zero throughput.
    pub fn observe_pod(&mut self, pod: &str, t: f64, point: Option<PodPoint>) {
        let Some(point) = point else {
            self.windows.remove(pod);
            return;
        };
        let fresh = Window {
            start: t,
            start_running: point.running,
            last_t: t,
            last: point,
            area: 0.0,
            finished: 0.0,
            saturated: point.waiting > 0.0,
        };
        let Some(window) = self.windows.get_mut(pod) else {
            self.windows.insert(pod.to_owned(), fresh);
            return;
        };
        if t <= window.last_t {
            return;
        }
        if point.finished_total < window.last.finished_total {
            *window = fresh;
            return;
        }
        let dt = t - window.last_t;
        window.area += 0.5 * (window.last.running + point.running) * dt;
        window.finished += point.finished_total - window.last.finished_total;
        window.saturated &= point.waiting > 0.0;
        window.last_t = t;
        window.last = point;
        if t - window.start < WINDOW_SECONDS {
            return;
        }
        let done = std::mem::replace(window, fresh);
        self.fold(t, &done, point.kv_cache_usage);
    }

    fn fold(&mut self, t: f64, window: &Window, kv: Option<f64>) {
        let span = window.last_t - window.start;
        let left = window.finished + 0.5 * (window.last.running - window.start_running);
        if span <= 0.0 || left < MIN_REQUESTS || window.area <= 0.0 {
            return;
        }
        let k = window.area / span;
        let s = window.area / left;
        // Evidence about the full batch is what is forgotten: a window far
        // below the occupancy already seen forgets in proportion, so an
        // idle or underloaded fleet leaves μ̂ where it was.
        let top = if self.sums.w > 0.0 {
            self.sums.k / self.sums.w
        } else {
            k
        };
        let pace = if top > 0.0 { (k / top).min(1.0) } else { 1.0 };
        let mut forget = 1.0;
        if let Some(at) = self.decayed_at {
            forget = (-(t - at).max(0.0) * pace / FORGET_SECONDS).exp();
            self.sums.decay(forget);
        }
        self.bounds_held *= forget;
        self.decayed_at = Some(t);
        // Weighted by the requests behind it (`S`'s precision) and by its
        // occupancy: the fit is used at the full batch, and bursts
        // at a low batch (prompts queueing for the step's token budget) sit
        // above the steady curve.
        let occupancy = match self.cap_hint {
            Some(cap) if cap > 0.0 => (k / cap).min(1.0),
            _ => 1.0,
        };
        let w = left * occupancy;
        if w <= 0.0 {
            return;
        }
        let sums = &mut self.sums;
        sums.w += w;
        sums.w2 += w * w;
        sums.k += w * k;
        sums.kk += w * k * k;
        sums.s += w * s;
        sums.ks += w * k * s;
        sums.ss += w * s * s;
        if let Some(kv) = kv.filter(|kv| *kv > 0.0 && kv.is_finite()) {
            sums.kv += kv;
            sums.running += window.last.running;
        }
        if window.saturated {
            // Measured at the full batch: `μ` itself, what a trigger with
            // neither `C` nor a KV gauge can still learn.
            sums.saturated_w += w;
            sums.saturated_x += w * left / span;
        }
        self.newest_sample_at = Some(t);
        // The bounds' middle falls with the occupancy it is computed at:
        // hold its highest value (forgotten as the sums are), so a quieter
        // fleet never reads as a slower one.
        if let Some(geo) = self.raw(self.cap_hint).bounds {
            self.bounds_held = self.bounds_held.max(geo);
        }
    }

    /// `C`, the batch cap, as the trigger sets it (weighs samples by
    /// occupancy together with the KV gauge).
    pub fn set_batch_cap(&mut self, running_per_replica: Option<f64>) {
        let kv_batch = (self.sums.kv > 0.0 && self.sums.running > 0.0)
            .then(|| self.sums.running / self.sums.kv);
        self.cap_hint = match (running_per_replica, kv_batch) {
            (Some(c), Some(b)) => Some(c.min(b)),
            (c, b) => c.or(b),
        };
    }

    /// The batch cap set by the newest [`DrainRateLearner::set_batch_cap`]:
    /// `min(C, R/kv)`, the full batch as far as it is known.
    pub fn batch_cap(&self) -> Option<f64> {
        self.cap_hint
    }

    /// The mean time in service of the samples, seconds, when known: how
    /// long a frozen counter may stay still before it is read as stale.
    pub fn service_seconds(&self) -> Option<f64> {
        (self.sums.w > 0.0).then(|| self.sums.s / self.sums.w)
    }

    /// Forget pods no longer read (gone from the fleet).
    pub fn retain_pods(&mut self, present: &dyn Fn(&str) -> bool) {
        self.windows.retain(|pod, _| present(pod));
    }

    /// The estimate, with `running_per_replica` (`C`) as the batch cap.
    pub fn estimate(&self, running_per_replica: Option<f64>) -> Learned {
        let raw = self.raw(running_per_replica);
        let mut learned = raw.learned;
        if learned.source == DrainRateSource::Bounds
            && let (Some(mu), Some(upper)) = (learned.drain_rate, raw.upper)
        {
            learned.drain_rate = Some(mu.max(self.bounds_held.min(upper)));
        }
        learned
    }

    fn raw(&self, running_per_replica: Option<f64>) -> Raw {
        let learned = self.fit(running_per_replica);
        let s = &self.sums;
        let (bounds, upper) = match (learned.full_batch, s.w > 0.0) {
            (Some(full), true) if s.s > 0.0 && s.k > 0.0 => {
                let (k_mean, s_mean) = (s.k / s.w, s.s / s.w);
                (Some((k_mean * full).sqrt() / s_mean), Some(full / s_mean))
            }
            _ => (None, None),
        };
        Raw {
            learned,
            bounds,
            upper,
        }
    }

    fn fit(&self, running_per_replica: Option<f64>) -> Learned {
        let s = &self.sums;
        let none = Learned {
            drain_rate: None,
            source: DrainRateSource::None,
            relative_error: None,
            full_batch: None,
            samples: 0.0,
            newest_sample_at: self.newest_sample_at,
        };
        if s.w <= 0.0 {
            return none;
        }
        let samples = s.w * s.w / s.w2.max(f64::MIN_POSITIVE);
        let k_mean = s.k / s.w;
        let s_mean = s.s / s.w;
        if s_mean <= 0.0 || k_mean <= 0.0 {
            return none;
        }
        let kv_batch = (s.kv > 0.0 && s.running > 0.0).then(|| s.running / s.kv);
        let cap = match (running_per_replica, kv_batch) {
            (Some(c), Some(b)) => Some(c.min(b)),
            (c, b) => c.or(b),
        };
        let Some(cap) = cap else {
            // No batch to extrapolate to: saturated pods only.
            if s.saturated_w <= 0.0 {
                return Learned { samples, ..none };
            }
            let confident = s.saturated_w / s.w * samples >= CONFIDENT_SAMPLES;
            return Learned {
                drain_rate: Some(s.saturated_x / s.saturated_w),
                source: if confident {
                    DrainRateSource::Samples
                } else {
                    DrainRateSource::Bounds
                },
                samples,
                ..none
            };
        };
        let full = cap.max(k_mean);
        let sxx = (s.kk - s.w * k_mean * k_mean).max(0.0);
        let sxy = s.ks - s.w * k_mean * s_mean;
        let syy = (s.ss - s.w * s_mean * s_mean).max(0.0);
        let beta = if sxx > 0.0 { sxy / sxx } else { 0.0 };
        let beta = beta.clamp(0.0, s_mean / k_mean);
        let alpha = s_mean - beta * k_mean;
        let predicted = alpha + beta * full;
        let rss = (syy - 2.0 * beta * sxy + beta * beta * sxx).max(0.0);
        let sigma2 = rss / (samples - 2.0).max(1.0);
        let leverage = if sxx > 0.0 {
            (full - k_mean).powi(2) / sxx
        } else if full - k_mean <= 1e-9 * full {
            0.0
        } else {
            f64::INFINITY
        };
        let relative = (sigma2 * (1.0 / s.w + leverage)).sqrt() / predicted;
        let confident = relative <= CONFIDENT_RELATIVE_ERROR && samples >= CONFIDENT_SAMPLES;
        let (drain_rate, source) = if confident {
            let saturated = full - k_mean <= 0.05 * full;
            let source = if saturated {
                DrainRateSource::Samples
            } else {
                DrainRateSource::Fit
            };
            (full / predicted, source)
        } else {
            let lower = k_mean / s_mean;
            let upper = full / s_mean;
            ((lower * upper).sqrt(), DrainRateSource::Bounds)
        };
        Learned {
            drain_rate: Some(drain_rate).filter(|m| m.is_finite() && *m > 0.0),
            source,
            relative_error: Some(relative).filter(|r| r.is_finite()),
            full_batch: Some(full),
            samples,
            newest_sample_at: self.newest_sample_at,
        }
    }
}

#[cfg(test)]
mod tests;
