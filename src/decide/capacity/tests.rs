//! The capacity policy's estimator: rates, resets, joins, the peak hold, the floors.
use super::*;

fn params() -> CapacityParams {
    CapacityParams {
        drain_rate_per_replica: Some(2.0),
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
        finished_total: Some(finished),
        kv_cache_usage: None,
        generation_tokens_total: None,
        prompt_tokens_total: None,
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
fn a_missing_counter_holds_the_rate_and_raises_the_floor() {
    let p = CapacityParams {
        learn_drain_rate: true,
        ..params()
    };
    let mut state = CapacityState::default();
    let mut finished = 0.0;
    for i in 0..20 {
        finished += 30.0;
        state.observe(&p, 5.0 * i as f64, &[pod("a", 0.0, 8.0, finished)], None);
    }
    let before = state.observe(&p, 100.0, &[pod("a", 0.0, 8.0, finished + 30.0)], None);
    assert!(!before.backlog_floor, "prior in use: {before:?}");
    // The counter vanishes: the gap is not zero arrivals.
    let mut gone = pod("a", 0.0, 8.0, 0.0);
    gone.finished_total = None;
    for i in 0..10 {
        let e = state.observe(
            &p,
            105.0 + 5.0 * i as f64,
            std::slice::from_ref(&gone),
            None,
        );
        assert!(e.backlog_floor, "{e:?}");
        assert_eq!(e.smoothed_rate, before.smoothed_rate, "held: {e:?}");
        assert!(e.rate_term >= before.rate_term, "{e:?}");
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

#[test]
fn a_fresh_state_warms_up_under_the_backlog_floor() {
    let p = params(); // arrivalSmoothingSeconds 15
    let mut state = CapacityState::default();
    assert_eq!(state.warming(&p, 0.0), Some(15.0), "no reading yet");
    // (t, finished so far, warming left, floor)
    let mut rows = Vec::new();
    for (i, t) in [100.0, 105.0, 110.0, 115.0, 120.0].into_iter().enumerate() {
        let e = state.observe(&p, t, &[pod("a", 4.0, 8.0, 30.0 * i as f64)], None);
        rows.push((t, state.warming(&p, t), e.backlog_floor, e.smoothed_rate));
    }
    assert_eq!(
        rows,
        vec![
            // First reading: no rate yet (and no seed without `C`).
            (100.0, Some(15.0), true, 0.0),
            // λ̂ starts at the first measured rate, not from 0.
            (105.0, Some(10.0), true, 6.0),
            (110.0, Some(5.0), true, 6.0),
            (115.0, None, false, 6.0),
            (120.0, None, false, 6.0),
        ]
    );
    // Counters that never give a rate keep it warming past the time.
    let mut state = CapacityState::default();
    let mut missing = pod("a", 4.0, 8.0, 0.0);
    missing.finished_total = None;
    let learn = CapacityParams {
        learn_drain_rate: true,
        ..p
    };
    for t in [0.0, 5.0, 10.0, 15.0, 20.0] {
        state.observe(&learn, t, std::slice::from_ref(&missing), None);
    }
    assert_eq!(state.warming(&learn, 20.0), Some(0.0));
}

/// Drives one pod at `rates[i]` req/s for 5 s each, from `t = 0`.
fn drive(state: &mut CapacityState, p: &CapacityParams, rates: &[f64]) -> Vec<CapacityEstimate> {
    let mut finished = 0.0;
    let mut out = vec![state.observe(p, 0.0, &[pod("a", 0.0, 8.0, 0.0)], None)];
    for (i, rate) in rates.iter().enumerate() {
        finished += rate * 5.0;
        let t = 5.0 * (i + 1) as f64;
        out.push(state.observe(p, t, &[pod("a", 0.0, 8.0, finished)], None));
    }
    out
}

#[test]
fn the_hold_is_short_on_a_load_that_never_burst_and_full_after_a_burst() {
    // μ = 2 req/s: a burst is a rise of λ̂ by ≥ 4 req/s and ≥ 50 % within
    // 120 s. Rows: the load, then the hold in force and the peak 300 s
    // after the load fell from 20 to 1 req/s.
    let p = CapacityParams {
        peak_hold_seconds: 600.0,
        arrival_smoothing_seconds: 5.0,
        ..params()
    };
    // A slow ramp 10 → 20 req/s over 1000 s (+1.2 req/s per 120 s, 12 %),
    // held, then a fall to 1 req/s.
    let ramp: Vec<f64> = (0..200).map(|i| 10.0 + 10.0 * i as f64 / 200.0).collect();
    // A jump 1 → 20 req/s, held as long.
    let jump: Vec<f64> = (0..200).map(|i| if i < 10 { 1.0 } else { 20.0 }).collect();
    for (name, rise, hold, peak_after_fall) in [
        ("ramp", ramp, QUIET_PEAK_HOLD_SECONDS, (0.9, 1.5)),
        ("burst", jump, 600.0, (19.0, 21.0)),
    ] {
        let mut state = CapacityState::default();
        let mut rates = vec![10.0; 40];
        if name == "burst" {
            rates = vec![1.0; 40];
        }
        rates.extend(rise);
        rates.extend(vec![20.0; 10]);
        rates.extend(vec![1.0; 60]); // 300 s after the fall
        let e = *drive(&mut state, &p, &rates).last().expect("estimate");
        assert_eq!(e.peak_hold_seconds, hold, "{name}: {e:?}");
        assert!(
            (peak_after_fall.0..peak_after_fall.1).contains(&e.peak_rate),
            "{name}: the peak 300 s after the fall: {e:?}"
        );
    }
}

#[test]
fn a_burst_is_forgotten_after_thirty_minutes_of_quiet_load() {
    let p = CapacityParams {
        peak_hold_seconds: 600.0,
        arrival_smoothing_seconds: 5.0,
        ..params()
    };
    let mut rates = vec![1.0; 20];
    rates.extend(vec![20.0; 20]); // the burst
    // The rise stays a burst while its start is within the last 120 s.
    let steady = ((BURST_MEMORY_SECONDS + BURST_RISE_SECONDS) / 5.0) as usize + 1;
    rates.extend(vec![20.0; steady]);
    let mut state = CapacityState::default();
    let e = drive(&mut state, &p, &rates);
    let at_burst_end = e[40];
    assert_eq!(at_burst_end.peak_hold_seconds, 600.0, "{at_burst_end:?}");
    let last = e.last().expect("estimate");
    assert_eq!(last.peak_hold_seconds, QUIET_PEAK_HOLD_SECONDS, "{last:?}");
}

#[test]
fn a_load_that_bursts_again_within_thirty_minutes_keeps_its_peak_longer() {
    // μ = 2 req/s; each burst is 60 s at 20 req/s on a 1 req/s base. Rows:
    // peakHoldSeconds, the quiet gaps between bursts (s), the hold in force
    // after the last burst, and whether the burst's peak is still held
    // 1000 s after it (an 1800 s hold) or let go (600 s, 900 s).
    let table: [(&str, f64, &[f64], f64, bool); 6] = [
        ("one burst", 600.0, &[], 600.0, false),
        ("again after 10 min", 600.0, &[600.0], 1800.0, true),
        (
            "again after 35 min: the first is forgotten",
            600.0,
            &[2100.0],
            600.0,
            false,
        ),
        (
            "three within 30 min, a 300 s hold",
            300.0,
            &[300.0, 300.0],
            900.0,
            false,
        ),
        (
            "a configured hold longer than 30 min is kept",
            3600.0,
            &[600.0],
            3600.0,
            true,
        ),
        ("no hold configured stays none", 0.0, &[600.0], 0.0, false),
    ];
    let burst = |rates: &mut Vec<f64>| rates.extend(vec![20.0; 12]);
    let quiet = |rates: &mut Vec<f64>, seconds: f64| {
        rates.extend(vec![1.0; (seconds / 5.0) as usize]);
    };
    for (name, hold, gaps, expected_hold, still_held) in table {
        let p = CapacityParams {
            peak_hold_seconds: hold,
            arrival_smoothing_seconds: 5.0,
            ..params()
        };
        let mut rates = vec![1.0; 40];
        burst(&mut rates);
        for gap in gaps {
            quiet(&mut rates, *gap);
            burst(&mut rates);
        }
        quiet(&mut rates, 1000.0);
        let mut state = CapacityState::default();
        let e = *drive(&mut state, &p, &rates).last().expect("estimate");
        assert_eq!(e.peak_hold_seconds, expected_hold, "{name}: {e:?}");
        assert_eq!(
            e.peak_rate > 15.0,
            still_held,
            "{name}: the peak 1000 s after: {e:?}"
        );
    }
}

#[test]
fn clumped_arrivals_are_no_burst_and_a_real_burst_on_them_still_is() {
    // μ = 2 req/s: by size alone a burst is a rise of λ̂ by ≥ 4 req/s and
    // ≥ 50 % within 120 s. A clumped load (every fourth poll a clump, 30
    // req/s for 5 s, on 6 req/s) swings λ̂ by ~7 req/s with no change in
    // demand; its noise, once measured, keeps those swings from being
    // bursts (without the noise test the hold is 600 s at the end: a burst
    // every 20 s). Rows: the load after 40 min of clumps, and the
    // hold in force at its end.
    let p = CapacityParams {
        peak_hold_seconds: 600.0,
        ..params()
    };
    let polls = ((BURST_MEMORY_SECONDS + 600.0) / 5.0) as usize;
    let clumped: Vec<f64> = (0..polls)
        .map(|i| if i % 4 == 3 { 30.0 } else { 6.0 })
        .collect();
    let table: [(&str, Vec<f64>, f64); 3] = [
        ("clumps only", vec![], QUIET_PEAK_HOLD_SECONDS),
        ("then 120 s at 150 req/s", vec![150.0; 24], 600.0),
        (
            "then 120 s at 14 req/s",
            vec![14.0; 24],
            QUIET_PEAK_HOLD_SECONDS,
        ),
    ];
    for (name, tail, hold) in table {
        let mut rates = clumped.clone();
        rates.extend(tail);
        let mut state = CapacityState::default();
        let e = *drive(&mut state, &p, &rates).last().expect("estimate");
        assert_eq!(e.peak_hold_seconds, hold, "{name}: {e:?}");
    }
}
