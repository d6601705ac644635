//! The `capacity` policy: replicas from the arrival rate, not the queue.
//!
//! ARCHITECTURE.md §2, "The next policy: capacity":
//!
//! ```text
//! a      = Σ_pods (ΔF_i + ΔW_i + ΔR_i)            arrivals in the poll (F = finished counter)
//! λ̂     ← λ̂ + (1 − e^(−Δt/τ))·(a/Δt − λ̂)        τ = arrivalSmoothingSeconds
//! λ_peak = max of λ̂ over peakHoldSeconds
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

pub use crate::trigger::params::CapacityParams;

/// One pod's counters and gauges at one reading.
#[derive(Debug, Clone, PartialEq)]
pub struct PodCounters {
    /// Pod identity (the scraped URL).
    pub pod: String,
    /// `W_i`.
    pub waiting: f64,
    /// `R_i`.
    pub running: f64,
    /// `F_i`: finished requests, all reasons, since the pod started.
    pub finished_total: f64,
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
    /// `μ` in use (configured, or learned within bounds).
    pub drain_rate: f64,
    /// True when `μ` is the learned value.
    pub drain_rate_learned: bool,
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
    learned: Option<f64>,
    /// `a/Δt` of the newest poll, repeated when the same reading is seen again.
    last_arrival_rate: f64,
}

impl CapacityState {
    /// Fold in one reading taken at `t` seconds. `running_per_replica` (`C`)
    /// seeds the rate on the first reading as the fleet's current drain,
    /// `μ·ΣR/C`, so a restarted scaler does not start from zero demand.
    pub fn observe(
        &mut self,
        params: &CapacityParams,
        t: f64,
        pods: &[PodCounters],
        running_per_replica: Option<f64>,
    ) -> CapacityEstimate {
        let configured = params.drain_rate_per_replica;
        let current: HashMap<String, PodCounters> =
            pods.iter().map(|p| (p.pod.clone(), p.clone())).collect();
        let mut arrival_rate = 0.0;
        match self.previous.take() {
            Some((t0, before)) if t > t0 => {
                let dt = t - t0;
                let mut arrivals = 0.0;
                let mut saturated_drain = Vec::new();
                for now in pods {
                    let Some(prev) = before.get(&now.pod) else {
                        continue; // joined this poll: baseline only
                    };
                    if now.finished_total < prev.finished_total {
                        continue; // counter reset: the pod restarted
                    }
                    let finished = now.finished_total - prev.finished_total;
                    arrivals +=
                        finished + (now.waiting - prev.waiting) + (now.running - prev.running);
                    if prev.waiting > 0.0 && now.waiting > 0.0 {
                        saturated_drain.push(finished / dt);
                    }
                }
                arrival_rate = arrivals.max(0.0) / dt;
                let alpha = 1.0 - (-dt / params.arrival_smoothing_seconds.max(1e-9)).exp();
                let smoothed = self.smoothed.unwrap_or(arrival_rate);
                let mut next = smoothed + alpha * (arrival_rate - smoothed);
                // An EWMA only approaches 0; without a floor an idle
                // Deployment would never become inactive (scale to zero).
                if arrivals <= 0.0 && next < IDLE_RATE_FRACTION * configured {
                    next = 0.0;
                }
                self.smoothed = Some(next);
                if params.learn_drain_rate && !saturated_drain.is_empty() {
                    let observed =
                        saturated_drain.iter().sum::<f64>() / saturated_drain.len() as f64;
                    let learned = self.learned.unwrap_or(configured);
                    let next = learned + alpha * (observed - learned);
                    self.learned = Some(next.clamp(0.5 * configured, 1.5 * configured));
                }
            }
            Some((t0, before)) => {
                // Same or older timestamp (a re-evaluation): nothing new.
                self.previous = Some((t0, before));
                return self.estimate(params, t, pods, self.last_arrival_rate);
            }
            None => {
                let seed = running_per_replica
                    .map(|c| configured * pods.iter().map(|p| p.running).sum::<f64>() / c)
                    .unwrap_or(0.0);
                self.smoothed = Some(seed);
            }
        }
        self.previous = Some((t, current));
        self.last_arrival_rate = arrival_rate;
        let smoothed = self.smoothed.unwrap_or(0.0);
        while self.peaks.back().is_some_and(|(_, v)| *v <= smoothed) {
            self.peaks.pop_back();
        }
        self.peaks.push_back((t, smoothed));
        while self
            .peaks
            .front()
            .is_some_and(|(at, _)| *at < t - params.peak_hold_seconds)
        {
            self.peaks.pop_front();
        }
        self.estimate(params, t, pods, arrival_rate)
    }

    fn estimate(
        &self,
        params: &CapacityParams,
        _t: f64,
        pods: &[PodCounters],
        arrival_rate: f64,
    ) -> CapacityEstimate {
        let mu = self.learned.unwrap_or(params.drain_rate_per_replica);
        let smoothed = self.smoothed.unwrap_or(0.0);
        let peak = self
            .peaks
            .front()
            .map_or(smoothed, |(_, v)| *v)
            .max(smoothed);
        let horizon = mu * params.drain_horizon_seconds;
        let pod_backlog_term = pods
            .iter()
            .map(|p| {
                if horizon > 0.0 {
                    (p.waiting / horizon).min(1.0)
                } else {
                    1.0
                }
            })
            .sum();
        CapacityEstimate {
            arrival_rate,
            smoothed_rate: smoothed,
            peak_rate: peak,
            drain_rate: mu,
            drain_rate_learned: self.learned.is_some(),
            rate_term: (1.0 + params.headroom) * peak / mu,
            pod_backlog_term,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> CapacityParams {
        CapacityParams {
            drain_rate_per_replica: 2.0,
            arrival_smoothing_seconds: 15.0,
            peak_hold_seconds: 1200.0,
            headroom: 0.2,
            drain_horizon_seconds: 30.0,
            learn_drain_rate: false,
        }
    }

    fn pod(name: &str, waiting: f64, running: f64, finished: f64) -> PodCounters {
        PodCounters {
            pod: name.to_owned(),
            waiting,
            running,
            finished_total: finished,
        }
    }

    #[test]
    fn steady_arrivals_converge_to_the_rate() {
        let mut state = CapacityState::default();
        let p = params();
        // 6 req/s, steady: each 5 s poll 30 more finished, gauges flat.
        let mut last = None;
        for i in 0..60 {
            let t = 5.0 * i as f64;
            last = Some(state.observe(&p, t, &[pod("a", 0.0, 8.0, 30.0 * i as f64)], None));
        }
        let e = last.expect("estimate");
        assert!((e.smoothed_rate - 6.0).abs() < 0.01, "{e:?}");
        assert!((e.rate_term - 1.2 * 6.0 / 2.0).abs() < 0.01, "{e:?}");
    }

    #[test]
    fn counter_reset_is_not_a_negative_or_huge_rate() {
        let mut state = CapacityState::default();
        let p = params();
        state.observe(&p, 0.0, &[pod("a", 0.0, 4.0, 100_000.0)], None);
        state.observe(&p, 5.0, &[pod("a", 0.0, 4.0, 100_010.0)], None);
        // Restart: the counter starts again from 0.
        let e = state.observe(&p, 10.0, &[pod("a", 0.0, 4.0, 3.0)], None);
        assert_eq!(e.arrival_rate, 0.0, "reset poll is a baseline");
        let e = state.observe(&p, 15.0, &[pod("a", 0.0, 4.0, 13.0)], None);
        assert_eq!(e.arrival_rate, 2.0);
        assert!(e.smoothed_rate >= 0.0 && e.smoothed_rate < 5.0, "{e:?}");
    }

    #[test]
    fn pods_joining_or_leaving_make_no_phantom_arrivals() {
        let mut state = CapacityState::default();
        let p = params();
        state.observe(
            &p,
            0.0,
            &[pod("a", 5.0, 8.0, 10.0), pod("gone", 40.0, 8.0, 10.0)],
            None,
        );
        // "gone" left with its 48 requests; "new" joined with a lifetime of 9000 finished.
        let e = state.observe(
            &p,
            5.0,
            &[pod("a", 5.0, 8.0, 20.0), pod("new", 0.0, 8.0, 9000.0)],
            None,
        );
        assert_eq!(e.arrival_rate, 2.0, "only a's 10 finished in 5 s");
    }

    #[test]
    fn per_pod_backlog_term_is_capped_at_one_pod() {
        let mut state = CapacityState::default();
        let p = params();
        // μ·H = 60: 30 waiting is half a pod, 6000 waiting is one pod, not 100.
        let e = state.observe(
            &p,
            0.0,
            &[pod("a", 30.0, 8.0, 0.0), pod("b", 6000.0, 8.0, 0.0)],
            None,
        );
        assert!((e.pod_backlog_term - 1.5).abs() < 1e-12, "{e:?}");
    }

    #[test]
    fn peak_hold_keeps_the_max_for_its_window_then_lets_go() {
        let mut state = CapacityState::default();
        let p = CapacityParams {
            peak_hold_seconds: 100.0,
            arrival_smoothing_seconds: 1.0,
            ..params()
        };
        let mut finished = 0.0;
        let mut t = 0.0;
        let mut step = |state: &mut CapacityState, rate: f64| {
            t += 5.0;
            finished += rate * 5.0;
            state.observe(&p, t, &[pod("a", 0.0, 8.0, finished)], None)
        };
        state.observe(&p, 0.0, &[pod("a", 0.0, 8.0, 0.0)], None);
        for _ in 0..10 {
            step(&mut state, 10.0);
        }
        let e = (0..10)
            .map(|_| step(&mut state, 1.0))
            .last()
            .expect("estimate");
        assert!(e.smoothed_rate < 1.5 && e.peak_rate > 9.0, "held: {e:?}");
        let e = (0..20)
            .map(|_| step(&mut state, 1.0))
            .last()
            .expect("estimate");
        assert!(e.peak_rate < 1.5, "released after the window: {e:?}");
    }

    #[test]
    fn learned_drain_rate_stays_within_half_and_one_and_a_half() {
        let p = CapacityParams {
            learn_drain_rate: true,
            ..params()
        };
        for (observed_per_poll, bound) in [(100.0, 3.0), (0.5, 1.0)] {
            let mut state = CapacityState::default();
            let mut finished = 0.0;
            let mut last = None;
            for i in 0..200 {
                finished += observed_per_poll;
                // Queue persists across polls: the pod is saturated.
                last = Some(state.observe(
                    &p,
                    5.0 * i as f64,
                    &[pod("a", 20.0, 32.0, finished)],
                    None,
                ));
            }
            let e = last.expect("estimate");
            assert!(e.drain_rate_learned);
            assert!(
                (e.drain_rate - bound).abs() < 1e-9,
                "{observed_per_poll}: {e:?}"
            );
        }
    }

    #[test]
    fn an_idle_deployment_decays_to_exactly_zero_after_the_hold() {
        let mut state = CapacityState::default();
        let p = CapacityParams {
            peak_hold_seconds: 300.0,
            ..params()
        };
        let mut finished = 0.0;
        for i in 0..20 {
            finished += 10.0;
            state.observe(&p, 5.0 * i as f64, &[pod("a", 0.0, 4.0, finished)], None);
        }
        // Traffic stops: no arrivals, nothing running.
        let mut last = None;
        for i in 20..200 {
            last = Some(state.observe(&p, 5.0 * i as f64, &[pod("a", 0.0, 0.0, finished)], None));
        }
        let e = last.expect("estimate");
        assert_eq!(
            (e.smoothed_rate, e.peak_rate, e.rate_term),
            (0.0, 0.0, 0.0),
            "{e:?}"
        );
    }

    #[test]
    fn first_reading_seeds_from_the_current_drain() {
        let mut state = CapacityState::default();
        let e = state.observe(
            &params(),
            0.0,
            &[pod("a", 0.0, 16.0, 0.0), pod("b", 0.0, 16.0, 0.0)],
            Some(32.0),
        );
        // μ·ΣR/C = 2·32/32 = 2 req/s.
        assert_eq!(e.smoothed_rate, 2.0);
    }
}
