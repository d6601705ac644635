//! Scenarios: rates follow their curves, seeds are deterministic, warm-up and traces.

use super::*;

fn count(scenario: &Scenario, seed: u64, from: f64, to: f64) -> usize {
    scenario
        .arrivals(seed)
        .expect("arrivals")
        .filter(|r| r.arrival >= from && r.arrival < to)
        .count()
}

#[test]
fn step_rates_match_the_curve() {
    let s = Scenario::builtin(Builtin::Step, None);
    // 20 req/s for the first 10 min, 100 req/s from 10 to 60 min.
    let before = count(&s, 1, 0.0, 600.0) as f64 / 600.0;
    let during = count(&s, 1, 900.0, 3000.0) as f64 / 2100.0;
    assert!((before - 20.0).abs() < 0.7, "{before}");
    assert!((during - 100.0).abs() < 1.0, "{during}");
}

#[test]
fn same_seed_same_requests() {
    let s = Scenario::builtin(Builtin::Bursty, Some(600.0));
    let a: Vec<Request> = s.arrivals(3).expect("a").collect();
    let b: Vec<Request> = s.arrivals(3).expect("b").collect();
    let c: Vec<Request> = s.arrivals(4).expect("c").collect();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(a.windows(2).all(|w| w[0].arrival <= w[1].arrival));
}

#[test]
fn bursty_spends_about_a_fifth_of_the_time_high() {
    let s = Scenario::builtin(Builtin::Bursty, Some(200_000.0));
    let mut arrivals = s.arrivals(9).expect("arrivals");
    let high = (0..200_000)
        .filter(|t| arrivals.rate_at(f64::from(*t)) == BURSTY_HIGH)
        .count() as f64;
    let share = high / 200_000.0;
    assert!((share - 0.2).abs() < 0.05, "{share}");
}

#[test]
fn drift_doubles_the_output_length_halfway() {
    let s = Scenario::builtin(Builtin::Drift, Some(1200.0));
    let requests: Vec<Request> = s.arrivals(2).expect("arrivals").collect();
    let mean_output = |from: f64, to: f64| {
        let chosen: Vec<f64> = requests
            .iter()
            .filter(|r| r.arrival >= from && r.arrival < to)
            .map(|r| f64::from(r.output_tokens))
            .collect();
        chosen.iter().sum::<f64>() / chosen.len() as f64
    };
    let ratio = mean_output(600.0, 1200.0) / mean_output(0.0, 600.0);
    assert!((ratio - 2.0).abs() < 0.1, "{ratio}");
}

#[test]
fn rate_points_interpolate() {
    let s = Scenario::from_rates(
        "t",
        vec![(0.0, 2.0), (100.0, 12.0), (200.0, 12.0)],
        TokenMix::CHAT,
        None,
    )
    .expect("valid");
    assert_eq!(s.duration_seconds, 200.0);
    assert_eq!(s.deterministic_rate(50.0), 7.0);
    assert_eq!(s.peak_rate(), 12.0);
    assert_eq!(s.initial_rate(), 2.0);
    assert!(Scenario::from_rates("t", Vec::new(), TokenMix::CHAT, None).is_err());
}

#[test]
fn warmup_is_a_steady_load_at_the_first_rate_before_zero() {
    let s = Scenario::builtin(Builtin::Step, None);
    let warm = s.warmup(4, 600.0);
    let rate = warm.len() as f64 / 600.0;
    assert!((rate - 20.0).abs() < 0.8, "{rate}");
    assert!(warm.iter().all(|r| (-600.0..0.0).contains(&r.arrival)));
    assert!(warm.windows(2).all(|w| w[0].arrival <= w[1].arrival));
}

#[test]
fn a_request_trace_replays_its_requests_scaled() {
    let requests: Vec<TraceRequest> = (0..600)
        .map(|i| TraceRequest {
            arrival_seconds: f64::from(i) * 0.1,
            input_tokens: 100 + i as u32,
            output_tokens: 10,
        })
        .collect();
    let s = Scenario::from_requests("r", requests.clone(), 3.0, 0.001, None).expect("valid");
    assert!(s.is_request_level());
    let replayed: Vec<Request> = s.arrivals(0).expect("arrivals").collect();
    assert_eq!(replayed.len(), 1800);
    assert!(
        (s.initial_rate() - 30.0).abs() < 1e-9,
        "{}",
        s.initial_rate()
    );
    assert!((s.peak_rate() - 30.0).abs() < 1e-9);
    // The warm-up reuses the first minute's lengths.
    let warm = s.warmup(0, 60.0);
    assert!(
        warm.iter()
            .all(|r| r.output_tokens == 10 && r.input_tokens >= 100)
    );
    assert!(Scenario::from_requests("r", requests, 0.0, 0.001, None).is_err());
}
