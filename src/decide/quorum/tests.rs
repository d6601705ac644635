//! The quorum decision, as a table: answered and failing pods in, the value
//! (or the UNAVAILABLE reason) and each failing pod's standing out.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::*;
use crate::decide::freshness::{Evaluation, SignalReport, Status, TriggerMemory, evaluate};
use crate::decide::signal_state::{FailingPod, SignalState, Timed};
use crate::source::{Engine, FailureKind, PodReading, SourceError};
use crate::trigger::TriggerSpec;

const POLL: u64 = 5;
const MAX_AGE: u64 = 3 * POLL;

fn spec(fraction: Option<&str>) -> TriggerSpec {
    let mut md = vec![
        ("vllmTargets", "http://127.0.0.1:1/metrics"),
        ("targetBacklogPerReplica", "10"),
        ("runningPerReplica", "20"),
    ];
    if let Some(fraction) = fraction {
        md.push(("minReportingFraction", fraction));
    }
    TriggerSpec::from_metadata(md).expect("valid")
}

fn pod(target: &str, waiting: f64) -> PodReading {
    PodReading {
        target: target.into(),
        waiting,
        // R = 2·W, so the running term shows the same scaling.
        running: Some(2.0 * waiting),
        kv_cache_usage: Some(0.5),
        ttft: None,
        finished_total: Some(0.0),
        generation_tokens_total: None,
        prompt_tokens_total: None,
        read: Default::default(),
    }
}

/// How a failing pod stands: its last good `W` and the age of that
/// reading, or never read; and the kind of its newest failure.
struct Failing {
    target: &'static str,
    last_good: Option<(f64, u64)>,
    kind: FailureKind,
}

fn state(answered: &[(&str, f64)], failing: &[Failing], now: Instant) -> SignalState {
    let ago = |s: u64| now - Duration::from_secs(s);
    SignalState {
        last_good: Some(Timed {
            value: Reading::Engine(EngineReading {
                engine: Engine::Vllm,
                pods: answered.iter().map(|(t, w)| pod(t, *w)).collect(),
                malformed_lines: 0,
                empty_discovery: Vec::new(),
            }),
            at: ago(1),
            wall: SystemTime::now(),
        }),
        last_failure: None,
        consecutive_failures: 0,
        failing_pods: failing
            .iter()
            .map(|f| FailingPod {
                target: f.target.into(),
                last_good: f.last_good.map(|(w, age)| Timed {
                    value: pod(f.target, w),
                    at: ago(age),
                    wall: SystemTime::now(),
                }),
                last_failure: Timed {
                    value: SourceError::new(f.kind, f.target, "it failed"),
                    at: ago(1),
                    wall: SystemTime::now(),
                },
                consecutive_failures: 4,
            })
            .collect(),
    }
}

fn run(spec: &TriggerSpec, state: SignalState, now: Instant) -> Evaluation {
    let source = spec.sources()[0].clone();
    let report = SignalReport {
        label: source.label(),
        source,
        state: Arc::new(state),
    };
    evaluate(
        spec,
        vec![report],
        &mut TriggerMemory::default(),
        now,
        SystemTime::now(),
    )
}

enum Expect {
    /// `W` as counted (after extrapolation), `n`, and each failing pod's
    /// state in target order.
    Value {
        waiting: f64,
        n: usize,
        pods: &'static [PodState],
    },
    /// UNAVAILABLE, with this in the reason.
    Unavailable(&'static str),
}

fn hung(target: &'static str, last_good: Option<(f64, u64)>) -> Failing {
    Failing {
        target,
        last_good,
        kind: FailureKind::Timeout,
    }
}

#[test]
fn failing_pods_are_held_then_left_out_while_a_quorum_reports() {
    use PodState::{Held, LeftOut};
    let a = [("a", 3.0), ("b", 4.0)];
    /// Name, `minReportingFraction`, answered pods, failing pods, outcome.
    type Case<'a> = (
        &'a str,
        Option<&'a str>,
        &'a [(&'a str, f64)],
        Vec<Failing>,
        Expect,
    );
    let cases: Vec<Case> = vec![
        (
            "every pod answers: no fleet, not degraded",
            None,
            &[("a", 3.0), ("b", 4.0), ("c", 5.0)],
            vec![],
            Expect::Value {
                waiting: 12.0,
                n: 3,
                pods: &[],
            },
        ),
        (
            "one pod failing for 5 s: its last reading counts",
            None,
            &a,
            vec![hung("c", Some((6.0, 5)))],
            Expect::Value {
                waiting: 13.0,
                n: 3,
                pods: &[Held],
            },
        ),
        (
            "held up to maxSignalAgeSeconds inclusive",
            None,
            &a,
            vec![hung("c", Some((6.0, MAX_AGE)))],
            Expect::Value {
                waiting: 13.0,
                n: 3,
                pods: &[Held],
            },
        ),
        (
            "past maxSignalAgeSeconds: left out, 2 of 3 extrapolated to 3",
            None,
            &a,
            vec![hung("c", Some((60.0, MAX_AGE + 1)))],
            Expect::Value {
                waiting: 7.0 * 3.0 / 2.0,
                n: 3,
                pods: &[LeftOut],
            },
        ),
        (
            "never answered: left out at once",
            None,
            &a,
            vec![hung("c", None)],
            Expect::Value {
                waiting: 10.5,
                n: 3,
                pods: &[LeftOut],
            },
        ),
        (
            "one held and one left out: 2 of 3 report",
            None,
            &[("a", 3.0)],
            vec![hung("b", Some((6.0, 2))), hung("c", None)],
            Expect::Value {
                waiting: 9.0 * 3.0 / 2.0,
                n: 3,
                pods: &[Held, LeftOut],
            },
        ),
        (
            "1 of 2 is exactly the default quorum",
            None,
            &[("a", 3.0)],
            vec![hung("b", None)],
            Expect::Value {
                waiting: 6.0,
                n: 2,
                pods: &[LeftOut],
            },
        ),
        (
            "3 of 4 is exactly 0.75",
            Some("0.75"),
            &[("a", 1.0), ("b", 1.0), ("c", 1.0)],
            vec![hung("d", None)],
            Expect::Value {
                waiting: 4.0,
                n: 4,
                pods: &[LeftOut],
            },
        ),
        (
            "1 of 3 is below the default quorum",
            None,
            &[("a", 3.0)],
            vec![hung("b", None), hung("c", Some((6.0, MAX_AGE + 1)))],
            Expect::Unavailable(
                "1 of 3 discovered pods report, below minReportingFraction=0.5; left out: b: it failed (4 failed polls); c: it failed (4 failed polls)",
            ),
        ),
        (
            "fraction 1 needs every pod: a held pod still counts",
            Some("1"),
            &a,
            vec![hung("c", Some((6.0, 5)))],
            Expect::Value {
                waiting: 13.0,
                n: 3,
                pods: &[Held],
            },
        ),
        (
            "fraction 1 needs every pod: a left-out one makes it UNAVAILABLE",
            Some("1"),
            &a,
            vec![hung("c", None)],
            Expect::Unavailable("2 of 3 discovered pods report, below minReportingFraction=1"),
        ),
    ];
    let now = Instant::now() + Duration::from_secs(3600);
    for (name, fraction, answered, failing, expect) in cases {
        let spec = spec(fraction);
        let evaluation = run(&spec, state(answered, &failing, now), now);
        match expect {
            Expect::Value { waiting, n, pods } => {
                let Status::Ready { decision, .. } = &evaluation.status else {
                    panic!("{name}: {:?}", evaluation.status);
                };
                let c = &decision.components;
                assert_eq!(c.waiting, waiting, "{name}");
                assert_eq!(c.replicas_reporting, n, "{name}");
                // R = 2·W on every pod, scaled alike: D = W + T·R/C = 2·W.
                assert_eq!(c.running, Some(2.0 * waiting), "{name}");
                assert_eq!(decision.backlog, 2.0 * waiting, "{name}");
                assert_eq!(evaluation.degraded, !pods.is_empty(), "{name}");
                let states: Vec<PodState> = evaluation
                    .fleet
                    .iter()
                    .flat_map(|f| f.pods.iter().map(|p| p.state))
                    .collect();
                assert_eq!(states, pods, "{name}");
            }
            Expect::Unavailable(text) => {
                let Status::Unavailable(reason) = &evaluation.status else {
                    panic!("{name}: {:?}", evaluation.status);
                };
                assert!(matches!(reason, Unavailable::BelowQuorum { .. }), "{name}");
                assert!(reason.to_string().contains(text), "{name}: {reason}");
                assert!(
                    evaluation.fleet.is_some(),
                    "{name}: /explain shows the pods"
                );
            }
        }
    }
}

use crate::decide::unavailable::Unavailable;

#[test]
fn the_fleet_counts_pods_per_state_and_reason_and_rechecks_at_the_first_expiry() {
    let now = Instant::now() + Duration::from_secs(3600);
    let failing = [
        hung("b", Some((1.0, 5))),
        Failing {
            target: "c",
            last_good: Some((1.0, 10)),
            kind: FailureKind::Status(503),
        },
        Failing {
            target: "d",
            last_good: None,
            kind: FailureKind::Parse,
        },
        hung("e", None),
    ];
    let spec = spec(Some("0.2"));
    let state = state(&[("a", 1.0)], &failing, now);
    let (_, fleet) = merge(
        &spec.sources()[0],
        &state,
        now,
        spec.max_signal_age,
        spec.min_reporting_fraction,
    )
    .expect("failing pods");
    assert_eq!((fleet.discovered, fleet.reporting), (5, 3));
    assert_eq!(fleet.extrapolation, 5.0 / 3.0);
    let mut counts = fleet.counts();
    counts.sort_by_key(|(s, r, _)| (s.as_str(), *r));
    assert_eq!(
        counts,
        vec![
            (PodState::Held, "http_status", 1),
            (PodState::Held, "timeout", 1),
            (PodState::LeftOut, "parse", 1),
            (PodState::LeftOut, "timeout", 1),
        ]
    );
    // `c`'s reading (10 s old) expires first.
    assert_eq!(
        fleet.recheck_at,
        Some(now - Duration::from_secs(10) + spec.max_signal_age)
    );
    // Every pod answering: nothing to merge.
    let healthy = SignalState {
        failing_pods: Vec::new(),
        ..state
    };
    assert!(merge(&spec.sources()[0], &healthy, now, spec.max_signal_age, 0.5).is_none());
}

#[test]
fn extrapolation_scales_the_capacity_terms_and_leaves_means_alone() {
    use crate::decide::capacity::CapacityEstimate;
    let mut signals = Signals {
        waiting: 4.0,
        running: Some(8.0),
        replicas_reporting: 2,
        kv_cache_usage: Some(0.7),
        ttft_seconds: Some(1.5),
        capacity: Some(CapacityEstimate {
            arrival_rate: 2.0,
            smoothed_rate: 2.0,
            peak_rate: 3.0,
            peak_hold_seconds: 600.0,
            drain_rate: 1.0,
            drain_rate_learned: false,
            drain_rate_source: crate::decide::capacity::learn::DrainRateSource::Configured,
            drain_rate_unit: crate::decide::capacity::DrainRateUnit::Requests,
            drain_rate_relative_error: None,
            drain_rate_samples: 0.0,
            drain_rate_age_seconds: None,
            full_batch: None,
            backlog_floor: false,
            rate_term: 3.6,
            pod_backlog_term: 0.5,
        }),
        ..Signals::default()
    };
    let fleet = Fleet {
        discovered: 4,
        reporting: 2,
        min_reporting_fraction: 0.5,
        extrapolation: 2.0,
        pods: Vec::new(),
        recheck_at: None,
    };
    extrapolate(&mut signals, &fleet);
    assert_eq!(
        (signals.waiting, signals.running, signals.replicas_reporting),
        (8.0, Some(16.0), 4)
    );
    assert_eq!(
        (signals.kv_cache_usage, signals.ttft_seconds),
        (Some(0.7), Some(1.5))
    );
    let e = signals.capacity.expect("estimate");
    assert_eq!(
        (e.rate_term, e.pod_backlog_term, e.peak_rate, e.drain_rate),
        (7.2, 1.0, 6.0, 1.0)
    );
}
