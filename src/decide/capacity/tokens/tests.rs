//! The token learner on readings of a steady-state step model
//! (`a + b·k + c·p`, the simulator's A100 constants), table-driven.

use super::*;
use crate::decide::capacity::jitter::Jitter;
use crate::decide::capacity::{CapacityParams, CapacityState, DrainRateUnit, PodCounters};

const STEP: [f64; 3] = [0.012_731, 0.000_119_1, 0.000_060_56];

#[derive(Clone, Copy)]
struct Mix {
    input: f64,
    output: f64,
    full: f64,
}

/// The simulator's ramp mix and its outputs doubled (μ 7.58 → 4.86).
const RAMP: Mix = Mix {
    input: 1150.0,
    output: 263.0,
    full: 108.0,
};
const RAMP_DOUBLED: Mix = Mix {
    input: 1150.0,
    output: 526.0,
    full: 91.0,
};
/// Prefill-heavy: the code-completion trace (μ 8.48 at a full decoding batch, the balance
/// the learner converts with; the simulated pod's step budget holds it to 8.17).
const CODE: Mix = Mix {
    input: 1751.0,
    output: 44.0,
    full: 85.0,
};

/// Requests/s at a steady batch `k` (the pod model's balance).
fn throughput(mix: Mix, k: f64) -> f64 {
    1.0 / (mix.output * STEP[0] / k + mix.output * STEP[1] + mix.input * STEP[2])
}

fn mu(mix: Mix) -> f64 {
    throughput(mix, mix.full)
}

/// Pods' counters over 5 s polls: pod `i` runs a batch that swings with
/// time (an ordinary day's load: a third to two thirds of the full batch),
/// its counters grow at the steady throughput of that batch with 10 %
/// jitter. `mix_at(t)` is the traffic's mix at `t`.
struct Pods {
    totals: Vec<[f64; 3]>,
    jitter: Jitter,
}

impl Pods {
    fn new(n: usize) -> Pods {
        Pods {
            totals: vec![[0.0; 3]; n],
            jitter: Jitter(11),
        }
    }

    fn poll(&mut self, t: f64, mix: Mix, tokens: bool) -> Vec<PodCounters> {
        let mut out = Vec::new();
        for (i, total) in self.totals.iter_mut().enumerate() {
            let phase = t / 900.0 + i as f64;
            let k = (mix.full * (0.5 + 0.17 * phase.sin())).round().max(1.0);
            let x = throughput(mix, k) * 5.0 * (1.0 + 0.1 * self.jitter.next());
            total[0] += x;
            total[1] += x * mix.output;
            total[2] += x * mix.input;
            out.push(PodCounters {
                pod: format!("pod-{i}"),
                waiting: 0.0,
                running: k,
                finished_total: Some(total[0].floor()),
                kv_cache_usage: Some(k / mix.full),
                generation_tokens_total: tokens.then_some(total[1].floor()),
                prompt_tokens_total: tokens.then_some(total[2].floor()),
            });
        }
        out
    }
}

fn params() -> CapacityParams {
    CapacityParams {
        drain_rate_per_replica: None,
        arrival_smoothing_seconds: 15.0,
        peak_hold_seconds: 600.0,
        headroom: 0.2,
        drain_horizon_seconds: 30.0,
        learn_drain_rate: true,
    }
}

#[test]
fn the_step_cost_gives_mu_at_the_full_batch_within_five_percent() {
    for (name, mix) in [("ramp", RAMP), ("code-completion", CODE)] {
        let mut state = CapacityState::default();
        let mut pods = Pods::new(6);
        let mut last = None;
        for i in 0..180 {
            let t = 5.0 * i as f64;
            last = Some(state.observe(&params(), t, &pods.poll(t, mix, true), Some(256.0)));
        }
        let e = last.expect("polled");
        let error = e.drain_rate / mu(mix) - 1.0;
        assert_eq!(e.drain_rate_unit, DrainRateUnit::Tokens, "{name}: {e:?}");
        assert!(
            error.abs() <= 0.05,
            "{name}: μ {} vs {}",
            e.drain_rate,
            mu(mix)
        );
        assert!(!e.backlog_floor, "{name}: a confident fit needs no floor");
    }
}

#[test]
fn outputs_doubling_move_mu_within_ten_percent_in_six_minutes() {
    let mut state = CapacityState::default();
    let mut pods = Pods::new(6);
    let change = 1200.0;
    let mut worst_after = 0.0f64;
    for i in 0..480 {
        let t = 5.0 * i as f64;
        let mix = if t < change { RAMP } else { RAMP_DOUBLED };
        let e = state.observe(&params(), t, &pods.poll(t, mix, true), Some(256.0));
        if t >= change + 360.0 {
            assert_eq!(e.drain_rate_unit, DrainRateUnit::Tokens, "t {t}: {e:?}");
            worst_after = worst_after.max((e.drain_rate / mu(RAMP_DOUBLED) - 1.0).abs());
        }
    }
    assert!(
        worst_after <= 0.10,
        "worst error from 6 min after: {worst_after}"
    );
}

#[test]
fn token_counters_lost_fall_back_to_the_request_unit_at_once() {
    // Learned in tokens for 15 minutes, then the exporter stops showing
    // them: from that poll on, μ is exactly what the request unit learned
    // from the same readings (a state that never saw a token counter).
    let mut state = CapacityState::default();
    let mut bare = CapacityState::default();
    let mut pods = Pods::new(6);
    for i in 0..300 {
        let t = 5.0 * i as f64;
        let tokens = t < 900.0;
        let full = pods.poll(t, RAMP, tokens);
        let stripped: Vec<PodCounters> = full
            .iter()
            .map(|p| PodCounters {
                generation_tokens_total: None,
                prompt_tokens_total: None,
                ..p.clone()
            })
            .collect();
        let e = state.observe(&params(), t, &full, Some(256.0));
        let r = bare.observe(&params(), t, &stripped, Some(256.0));
        assert_eq!(r.drain_rate_unit, DrainRateUnit::Requests, "t {t}");
        if t == 895.0 {
            assert_eq!(e.drain_rate_unit, DrainRateUnit::Tokens, "learned first");
        }
        if !tokens {
            assert_eq!(e.drain_rate_unit, DrainRateUnit::Requests, "t {t}");
            assert_eq!(
                (e.drain_rate, e.drain_rate_source, e.backlog_floor),
                (r.drain_rate, r.drain_rate_source, r.backlog_floor),
                "t {t}"
            );
        }
    }
}

#[test]
fn missing_reset_or_still_token_counters_drop_the_window() {
    // (case, what pod-0's generated-token counter reads at poll i)
    type Reading = fn(usize, f64) -> Option<f64>;
    let cases: [(&str, Reading); 3] = [
        ("missing every other poll", |i, g| (i % 2 == 0).then_some(g)),
        ("reset every 10 polls", |i, g| {
            Some(g * ((i % 10) as f64) / 10.0)
        }),
        ("still", |_, _| Some(1000.0)),
    ];
    for (name, read) in cases {
        let mut learner = TokenLearner::default();
        let mut pods = Pods::new(1);
        for i in 0..240 {
            let t = 5.0 * i as f64;
            let pod = &pods.poll(t, RAMP, true)[0];
            let point = read(i, pod.generation_tokens_total.unwrap_or(0.0)).map(|g| TokenPoint {
                running: pod.running,
                finished_total: pod.finished_total.unwrap_or(0.0),
                generation_tokens_total: g,
                prompt_tokens_total: pod.prompt_tokens_total.unwrap_or(0.0),
            });
            learner.observe_pod("pod-0", t, point);
        }
        assert_eq!(learner.w, 0.0, "{name}: no window may be folded");
    }
}

/// One pod running `running` requests finishes `x` requests of the ramp mix by `t`: its
/// counters (`total`: finished, generated, prompt) and the fleet's mix, fed to `learner`.
fn one_pod_finishes(
    learner: &mut TokenLearner,
    total: &mut [f64; 3],
    t: f64,
    running: f64,
    x: f64,
) {
    total[0] += x;
    total[1] += x * RAMP.output;
    total[2] += x * RAMP.input;
    learner.observe_pod(
        "pod-0",
        t,
        Some(TokenPoint {
            running,
            finished_total: total[0],
            generation_tokens_total: total[1],
            prompt_tokens_total: total[2],
        }),
    );
    learner.observe_mix(
        t,
        Some(MixDelta {
            generated: x * RAMP.output,
            prompt: x * RAMP.input,
            finished: x,
            begun: x,
        }),
    );
}

#[test]
fn one_batch_and_one_mix_are_not_enough_to_be_confident() {
    // Every window at the same batch and mix pins one combination of the
    // three costs, not μ at another batch: exact counters (the normal matrix
    // singular) and counters with 5 % jitter (the prior from the
    // non-negative constraints bounds the loose direction, and the batch is
    // too far from the full one for that bound to be tight).
    for jitter_amplitude in [0.0, 0.05] {
        let mut learner = TokenLearner::default();
        let mut total = [0.0; 3];
        let mut jitter = Jitter(3);
        for i in 0..400 {
            let t = 5.0 * i as f64;
            let x = throughput(RAMP, 40.0) * 5.0 * (1.0 + jitter_amplitude * jitter.next());
            one_pod_finishes(&mut learner, &mut total, t, 40.0, x);
        }
        let e = learner.estimate(Some(RAMP.full)).expect("a fit");
        assert!(!e.confident(), "jitter {jitter_amplitude}: {e:?}");
    }
}

#[test]
fn a_pod_idling_between_a_few_requests_is_not_read_as_slow_steps() {
    // Two minutes at an ordinary batch (a third to two thirds of the full batch), then two
    // minutes of a burst's tail: two requests running at every poll, but the pod busy only
    // 40 % of the time (it finishes them and idles until the next arrives). Read as busy,
    // that idle time is step time and μ comes out low; below an eighth of the full batch
    // the interval is left out.
    // (full batch given to the learner, within 5 % of the model's μ)
    let cases = [(Some(RAMP.full), true), (None, false)];
    for (full, accurate) in cases {
        let mut learner = TokenLearner::default();
        learner.set_full_batch(full);
        let mut total = [0.0; 3];
        let mut jitter = Jitter(5);
        for i in 0..720 {
            let t = 5.0 * i as f64;
            let sparse = (i / 24) % 2 == 1;
            let (k, x) = if sparse {
                (2.0, 0.4 * throughput(RAMP, 2.0) * 5.0)
            } else {
                let k = (RAMP.full * (0.5 + 0.17 * (t / 300.0).sin())).round();
                (k, throughput(RAMP, k) * 5.0 * (1.0 + 0.05 * jitter.next()))
            };
            one_pod_finishes(&mut learner, &mut total, t, k, x);
        }
        let e = learner.estimate(Some(RAMP.full)).expect("a fit");
        let error = e.drain_rate / mu(RAMP) - 1.0;
        assert_eq!(
            error.abs() <= 0.05,
            accurate,
            "full batch {full:?}: μ {:.3} vs {:.3} ({error:+.3})",
            e.drain_rate,
            mu(RAMP)
        );
    }
}

#[test]
fn the_busy_floor_is_an_eighth_of_the_full_batch_within_one_and_sixteen_requests() {
    // (full batch, requests a busy interval needs at both ends)
    let cases = [
        (None, 1.0),
        (Some(4.0), 1.0),
        (Some(85.0), 10.625),
        (Some(256.0), 16.0),
    ];
    for (full, floor) in cases {
        let mut learner = TokenLearner::default();
        learner.set_full_batch(full);
        assert_eq!(learner.busy_floor, floor, "full batch {full:?}");
    }
}

#[test]
fn confidence_is_what_the_windows_and_the_constraints_pin_at_the_mix_converted() {
    // Windows at batches a third to two thirds of the full one, every one at the ramp mix's
    // prompt-to-output ratio: `b·ō + c·ī` is pinned only along that ratio. A conversion a
    // hair off it (the running gauge's growth in `ī`'s count) is as certain as at it; one
    // with twice the prompts per request is not, since how the cost splits between `b` and
    // `c` was never seen. Before the prior from the non-negative constraints, a 0.02 %
    // offset read as 10 % uncertain (decision 0027).
    // (prompts per request over the windows', confident)
    let cases = [(1.0, true), (1.0002, true), (0.999, true), (2.0, false)];
    let mut learner = TokenLearner::default();
    learner.set_full_batch(Some(RAMP.full));
    let mut total = [0.0; 3];
    let mut jitter = Jitter(7);
    for i in 0..720 {
        let t = 5.0 * i as f64;
        let k = (RAMP.full * (0.5 + 0.17 * (t / 300.0).sin())).round();
        let x = throughput(RAMP, k) * 5.0 * (1.0 + 0.05 * jitter.next());
        one_pod_finishes(&mut learner, &mut total, t, k, x);
    }
    for (ratio, confident) in cases {
        learner.mix = MixDelta {
            generated: RAMP.output,
            prompt: RAMP.input * ratio,
            finished: 1.0,
            begun: 1.0,
        };
        let e = learner.estimate(Some(RAMP.full)).expect("a fit");
        assert_eq!(e.confident(), confident, "prompts ×{ratio}: {e:?}");
    }
}

#[test]
fn a_mix_delta_that_is_not_a_number_leaves_the_mix_as_it_was() {
    // (field set to the bad value: generated, prompt, finished, begun)
    let bad = [f64::NAN, f64::INFINITY, -1.0];
    for field in 0..4 {
        for value in bad {
            if field == 3 && value == -1.0 {
                continue; // `begun` falls when the running gauge drains
            }
            let mut learner = TokenLearner::default();
            learner.observe_mix(
                0.0,
                Some(MixDelta {
                    generated: 263.0,
                    prompt: 1150.0,
                    finished: 1.0,
                    begun: 1.0,
                }),
            );
            let before = learner.mix;
            let mut delta = [263.0, 1150.0, 1.0, 1.0];
            delta[field] = value;
            let [generated, prompt, finished, begun] = delta;
            learner.observe_mix(
                5.0,
                Some(MixDelta {
                    generated,
                    prompt,
                    finished,
                    begun,
                }),
            );
            assert_eq!(learner.mix, before, "field {field} = {value}");
            assert!(!learner.fresh, "field {field} = {value}: not a fresh mix");
        }
    }
}
