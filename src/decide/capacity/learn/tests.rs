//! Convergence of the learned `μ` on readings from a simple pod model, in a
//! closed loop (the fleet is sized from the `μ` in use, as the HPA would).

use super::DrainRateSource;
use crate::decide::capacity::jitter::Jitter;
use crate::decide::capacity::{CapacityParams, CapacityState, PodCounters};

/// `S(k) = α + β·k`, full batch `K` (from the KV gauge), cap `C`.
#[derive(Clone, Copy)]
struct Model {
    alpha: f64,
    beta: f64,
    full: f64,
}

impl Model {
    fn mu(&self) -> f64 {
        self.full / (self.alpha + self.beta * self.full)
    }
    /// Steady batch at per-pod throughput `x` (below μ): `k = x·S(k)`.
    fn batch(&self, x: f64) -> f64 {
        (x * self.alpha / (1.0 - x * self.beta)).min(self.full)
    }
}

/// The simulator's ramp mix on its A100 pod (decision 0014): μ ≈ 7.6.
const RAMP: Model = Model {
    alpha: 3.35,
    beta: 0.101,
    full: 108.0,
};
/// A short-context mix capped by `max-num-seqs` rather than the KV cache.
const CHAT: Model = Model {
    alpha: 1.4,
    beta: 0.02,
    full: 256.0,
};

fn params(prior: Option<f64>) -> CapacityParams {
    CapacityParams {
        drain_rate_per_replica: prior,
        arrival_smoothing_seconds: 15.0,
        peak_hold_seconds: 600.0,
        headroom: 0.2,
        drain_horizon_seconds: 30.0,
        learn_drain_rate: true,
    }
}

struct Fleet {
    finished: Vec<f64>,
    waiting: Vec<f64>,
}

/// Run `minutes` of 5 s polls; the fleet is resized every minute to
/// `ceil(1.2·λ/μ)` from the estimate in use (a prior-less start sizes it
/// from the true μ with the same headroom, as the simulator's warm start).
/// Returns the estimates at the end of each minute.
fn closed_loop(
    model: Model,
    prior: Option<f64>,
    load: &dyn Fn(f64) -> f64,
    minutes: usize,
) -> Vec<crate::decide::capacity::CapacityEstimate> {
    let p = params(prior);
    let mut state = CapacityState::default();
    let mut jitter = Jitter(7);
    let mu_true = model.mu();
    let size = |rate: f64, mu: f64| ((1.2 * rate / mu).ceil() as usize).max(1);
    let mut n = size(load(0.0), prior.unwrap_or(mu_true));
    let mut fleet = Fleet {
        finished: vec![0.0; n],
        waiting: vec![0.0; n],
    };
    let mut out = Vec::new();
    let mut t = 0.0;
    for _ in 0..minutes {
        let mut last = None;
        for _ in 0..12 {
            t += 5.0;
            let rate = load(t);
            let per_pod = rate / n as f64;
            let mut pods = Vec::with_capacity(n);
            for i in 0..n {
                // Work in a pod's queue is served first when it can be.
                let demand = per_pod + fleet.waiting[i] / 5.0;
                let x = demand.min(mu_true);
                fleet.waiting[i] = (fleet.waiting[i] + (per_pod - x) * 5.0).max(0.0);
                let k = if fleet.waiting[i] > 0.0 {
                    model.full
                } else {
                    model.batch(x)
                };
                let running = (k * (1.0 + 0.05 * jitter.next())).round();
                fleet.finished[i] += (x * 5.0 * (1.0 + 0.2 * jitter.next())).max(0.0);
                pods.push(PodCounters {
                    pod: format!("pod-{i}"),
                    waiting: fleet.waiting[i].round(),
                    running,
                    finished_total: Some(fleet.finished[i].floor()),
                    kv_cache_usage: Some(running / model.full),
                    generation_tokens_total: None,
                    prompt_tokens_total: None,
                });
            }
            last = Some(state.observe(&p, t, &pods, Some(256.0)));
        }
        let e = last.expect("polled");
        let mu = if e.drain_rate > 0.0 {
            e.drain_rate
        } else {
            mu_true
        };
        let next = size(load(t), mu);
        fleet.finished.resize(next, 0.0);
        fleet.waiting.resize(next, 0.0);
        n = next;
        out.push(e);
    }
    out
}

#[test]
fn converges_from_both_sides_within_ten_percent_in_fifteen_minutes() {
    let mut failures = Vec::new();
    for (name, model) in [("ramp", RAMP), ("chat", CHAT)] {
        let mu = model.mu();
        // Load for about eight pods, steady or swinging ±50 % over 30 min.
        let steady = move |_: f64| 8.0 * mu;
        let diurnal =
            move |t: f64| 8.0 * mu * (1.0 + 0.5 * (t / 1800.0 * std::f64::consts::TAU).sin());
        let loads: [(&str, &dyn Fn(f64) -> f64); 2] = [("steady", &steady), ("diurnal", &diurnal)];
        for (load_name, load) in loads {
            for prior in [None, Some(2.0 * mu), Some(0.5 * mu)] {
                let estimates = closed_loop(model, prior, load, 15);
                let e = estimates.last().expect("estimates");
                let error = (e.drain_rate - mu) / mu;
                if error.abs() > 0.10 || !e.drain_rate_learned {
                    failures.push(format!(
                        "{name}/{load_name}, prior {prior:?}: μ {:.2} against {mu:.2} ({:+.1} %), {:?} ±{:?}",
                        e.drain_rate,
                        100.0 * error,
                        e.drain_rate_source,
                        e.drain_rate_relative_error
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn saturation_makes_the_estimate_confident_and_drops_the_floor() {
    // A prior twice too high: the fleet is too small, pods queue, and the
    // saturated samples measure μ at the full batch.
    let mu = RAMP.mu();
    let estimates = closed_loop(RAMP, Some(2.0 * mu), &|_| 40.0, 10);
    let e = estimates.last().expect("estimates");
    assert!(
        matches!(
            e.drain_rate_source,
            DrainRateSource::Samples | DrainRateSource::Fit
        ),
        "{e:?}"
    );
    assert!(!e.backlog_floor, "{e:?}");
    assert!((e.drain_rate - mu).abs() <= 0.05 * mu, "{e:?}");
}

#[test]
fn without_a_prior_the_floor_holds_until_there_are_samples() {
    let estimates = closed_loop(RAMP, None, &|_| 40.0, 2);
    let first = estimates.first().expect("estimates");
    assert_eq!(first.drain_rate_source, DrainRateSource::None, "{first:?}");
    assert!(first.backlog_floor, "{first:?}");
    assert_eq!((first.rate_term, first.pod_backlog_term), (0.0, 0.0));
}

#[test]
fn idle_or_underloaded_pods_leave_the_learned_rate_where_it_was() {
    for model in [RAMP, CHAT] {
        let mu = model.mu();
        // Fifteen minutes at about eight pods' load, then thirty nearly idle.
        let load = move |t: f64| if t < 900.0 { 8.0 * mu } else { 0.2 * mu };
        let estimates = closed_loop(model, None, &load, 45);
        let learned = estimates[14].drain_rate;
        for (minute, e) in estimates.iter().enumerate().skip(15) {
            assert!(
                e.drain_rate >= 0.97 * learned,
                "minute {minute}: μ̂ fell from {learned} to {} while idle: {e:?}",
                e.drain_rate
            );
        }
    }
}

#[test]
fn a_quieter_window_never_lowers_a_bounds_estimate() {
    use super::{DrainRateLearner, PodPoint};
    let model = RAMP;
    let mut learner = DrainRateLearner::default();
    let mut finished = 0.0;
    let mut t = 0.0;
    let mut previous: Option<f64> = None;
    let mut last_k: f64 = 25.0;
    // One pod: busy minutes (k = 25, below α/β, where the bounds' middle
    // grows with k), then twenty quiet ones (k = 3), 5 s polls.
    let batches = [25.0, 25.0, 25.0]
        .into_iter()
        .chain(std::iter::repeat_n(3.0, 20));
    for (minute, k) in batches.enumerate() {
        let x = k / (model.alpha + model.beta * k);
        for _ in 0..12 {
            t += 5.0;
            // Requests that leave the batch leave by finishing.
            finished += x * 5.0 + (last_k - k).max(0.0);
            last_k = k;
            let point = PodPoint {
                waiting: 0.0,
                running: k,
                finished_total: finished,
                kv_cache_usage: Some(k / model.full),
            };
            learner.observe_pod("pod-0", t, Some(point));
            learner.set_batch_cap(Some(256.0));
        }
        let e = learner.estimate(Some(256.0));
        if let (Some(before), Some(now)) = (previous, e.drain_rate) {
            assert!(
                now >= 0.99 * before,
                "minute {minute}: {before} → {now}: {e:?}"
            );
        }
        previous = e.drain_rate.or(previous);
    }
    assert!(previous.is_some(), "learned something");
}
