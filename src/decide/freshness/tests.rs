//! Evaluation tests: freshness, holding, the PromQL empty-result rule, the
//! TTFT window across evaluations.

use std::time::{Duration, SystemTime};

use super::*;
use crate::decide::signal_state::Timed;
use crate::source::engine::Buckets;
use crate::source::prometheus::SeriesValue;
use crate::source::{Engine, FailureKind, PodReading, QueryReading, SourceError};

fn spec(md: &[(&str, &str)]) -> TriggerSpec {
    TriggerSpec::from_metadata(md.iter().copied()).expect("valid")
}

fn scrape_spec() -> TriggerSpec {
    spec(&[
        ("vllmTargets", "http://127.0.0.1:1/metrics"),
        ("targetBacklogPerReplica", "10"),
        ("runningPerReplica", "32"),
        ("pollIntervalSeconds", "5"),
    ])
}

fn pod(waiting: f64, running: f64) -> PodReading {
    PodReading {
        target: "t".into(),
        waiting,
        running: Some(running),
        kv_cache_usage: Some(0.5),
        ttft: None,
        finished_total: Some(0.0),
        generation_tokens_total: None,
        prompt_tokens_total: None,
        read: Default::default(),
    }
}

fn engine_reading(pods: Vec<PodReading>, at: Instant) -> Timed<Reading> {
    Timed {
        value: Reading::Engine(EngineReading {
            engine: Engine::Vllm,
            pods,
            malformed_lines: 0,
            empty_discovery: Vec::new(),
        }),
        at,
        wall: SystemTime::now(),
    }
}

fn failure(at: Instant) -> Timed<SourceError> {
    Timed {
        value: SourceError::new(
            FailureKind::Unreachable,
            "t",
            "connect failed: Connection refused",
        ),
        at,
        wall: SystemTime::now(),
    }
}

fn reports(spec: &TriggerSpec, states: Vec<SignalState>) -> Vec<SignalReport> {
    spec.sources()
        .into_iter()
        .zip(states)
        .map(|(source, state)| SignalReport {
            label: source.label(),
            source,
            state: Arc::new(state),
        })
        .collect()
}

fn good(value: Timed<Reading>) -> SignalState {
    SignalState {
        last_good: Some(value),
        ..SignalState::default()
    }
}

#[test]
fn fresh_reading_is_ready() {
    let now = Instant::now();
    let s = scrape_spec();
    let e = evaluate(
        &s,
        reports(&s, vec![good(engine_reading(vec![pod(10.0, 32.0)], now))]),
        &mut TriggerMemory::default(),
        now,
        SystemTime::UNIX_EPOCH,
    );
    let d = e.decision_at(now).expect("ready");
    assert_eq!(d.backlog, 20.0);
    assert!(!e.degraded);
    assert_eq!(e.kind(), "ok");
}

#[test]
fn failing_source_holds_last_good_until_max_age_then_unavailable() {
    let t0 = Instant::now();
    let s = scrape_spec();
    let state = SignalState {
        last_good: Some(engine_reading(vec![pod(10.0, 0.0)], t0)),
        last_failure: Some(failure(t0 + Duration::from_secs(5))),
        consecutive_failures: 1,
        failing_pods: Vec::new(),
    };
    let mut memory = TriggerMemory::default();
    let held = evaluate(
        &s,
        reports(&s, vec![state.clone()]),
        &mut memory,
        t0 + Duration::from_secs(5),
        SystemTime::UNIX_EPOCH,
    );
    assert!(held.degraded);
    assert_eq!(
        held.decision_at(t0 + Duration::from_secs(5))
            .expect("held")
            .backlog,
        10.0
    );
    // The held value expires at max age even if nobody re-evaluates.
    assert!(held.decision_at(t0 + Duration::from_secs(16)).is_err());
    let lost = evaluate(
        &s,
        reports(&s, vec![state]),
        &mut memory,
        t0 + Duration::from_secs(16),
        SystemTime::UNIX_EPOCH,
    );
    let err = lost
        .decision_at(t0 + Duration::from_secs(16))
        .expect_err("stale");
    assert!(err.to_string().contains("maxSignalAgeSeconds=15"), "{err}");
    assert!(err.to_string().contains("Connection refused"), "{err}");
}

#[test]
fn no_reading_yet_is_pending_and_first_failure_is_unavailable() {
    let now = Instant::now();
    let s = scrape_spec();
    let pending = evaluate(
        &s,
        reports(&s, vec![SignalState::default()]),
        &mut TriggerMemory::default(),
        now,
        SystemTime::UNIX_EPOCH,
    );
    assert_eq!(pending.status, Status::Pending);
    let failed = evaluate(
        &s,
        reports(
            &s,
            vec![SignalState {
                last_failure: Some(failure(now)),
                consecutive_failures: 1,
                ..SignalState::default()
            }],
        ),
        &mut TriggerMemory::default(),
        now,
        SystemTime::UNIX_EPOCH,
    );
    let err = failed.decision_at(now).expect_err("unavailable");
    assert!(
        err.to_string().contains("no successful reading yet"),
        "{err}"
    );
}

#[test]
fn a_lost_source_carries_its_typed_error() {
    let now = Instant::now();
    let s = scrape_spec();
    let failed = evaluate(
        &s,
        reports(
            &s,
            vec![SignalState {
                last_failure: Some(failure(now)),
                consecutive_failures: 2,
                ..SignalState::default()
            }],
        ),
        &mut TriggerMemory::default(),
        now,
        SystemTime::UNIX_EPOCH,
    );
    match failed.decision_at(now).expect_err("unavailable") {
        Unavailable::NeverRead {
            failed_polls: 2,
            last_error: Some(error),
            ..
        } => assert_eq!(error.kind(), FailureKind::Unreachable),
        other => panic!("{other:?}"),
    }
}

/// What the metadata asks of the pods is part of the engine source, so the
/// source fails a pod without it when it reads the pod.
#[test]
fn the_engine_source_requires_what_the_metadata_needs_of_every_pod() {
    let requires = |extra: &[(&'static str, &'static str)]| {
        let mut md = vec![
            ("vllmTargets", "http://127.0.0.1:1/metrics"),
            ("targetBacklogPerReplica", "10"),
        ];
        md.extend_from_slice(extra);
        match spec(&md).engine {
            Some(EngineInput::Scrape(source)) => source.requires,
            other => panic!("{other:?}"),
        }
    };
    let none = crate::source::RequiredSignals::default();
    assert_eq!(requires(&[("policy", "backlog")]), none);
    let r = requires(&[
        ("policy", "backlog"),
        ("runningPerReplica", "32"),
        ("kvCacheTarget", "0.8"),
    ]);
    assert!(r.running && r.kv_cache && !r.finished, "{r:?}");
    // A learned μ holds λ̂ without a pod's counter; a fixed one cannot.
    assert_eq!(requires(&[("policy", "capacity")]), none);
    let r = requires(&[
        ("policy", "capacity"),
        ("drainRatePerReplica", "2"),
        ("learnDrainRate", "false"),
    ]);
    assert!(r.finished && !r.running && !r.kv_cache, "{r:?}");
}

/// A reading built by hand (the simulator's, a test's): a polled one never
/// lacks a required gauge, because the source fails that pod. The
/// decision still refuses it rather than read no KV usage as none.
#[test]
fn required_gauges_missing_on_a_pod_make_the_trigger_unavailable() {
    let now = Instant::now();
    let s = spec(&[
        ("vllmTargets", "http://127.0.0.1:1/metrics"),
        ("targetBacklogPerReplica", "10"),
        ("kvCacheTarget", "0.8"),
    ]);
    let mut p = pod(1.0, 1.0);
    p.kv_cache_usage = None;
    let e = evaluate(
        &s,
        reports(&s, vec![good(engine_reading(vec![p], now))]),
        &mut TriggerMemory::default(),
        now,
        SystemTime::UNIX_EPOCH,
    );
    let err = e.decision_at(now).expect_err("no kv");
    assert!(err.to_string().contains("KV-cache"), "{err}");
}

fn ttft_pod(counts: &[f64]) -> PodReading {
    PodReading {
        ttft: Some(Buckets {
            bounds: vec![0.5, 1.0, 2.0, 4.0, f64::INFINITY],
            counts: counts.to_vec(),
        }),
        ..pod(5.0, 0.0)
    }
}

#[test]
fn ttft_window_feeds_the_latency_guard_across_evaluations() {
    let t0 = Instant::now();
    let s = spec(&[
        ("vllmTargets", "http://127.0.0.1:1/metrics"),
        ("targetBacklogPerReplica", "10"),
        ("ttftSloSeconds", "1"),
        ("pollIntervalSeconds", "5"),
    ]);
    let mut memory = TriggerMemory::default();
    let first = evaluate(
        &s,
        reports(
            &s,
            vec![good(engine_reading(
                vec![ttft_pod(&[0.0, 0.0, 0.0, 0.0, 0.0])],
                t0,
            ))],
        ),
        &mut memory,
        t0,
        SystemTime::UNIX_EPOCH,
    );
    let d = first.decision_at(t0).expect("ready");
    assert_eq!(
        d.components.ttft_seconds, None,
        "one snapshot: no window yet"
    );
    assert_eq!(d.backlog, 5.0);
    let t1 = t0 + Duration::from_secs(5);
    // 20 requests, all in (2, 4]: p95 = 2 + 2·19/20 = 3.9 s > 1.1 → guard: T·n·min(3.9, 2) = 20
    let second = evaluate(
        &s,
        reports(
            &s,
            vec![good(engine_reading(
                vec![ttft_pod(&[0.0, 0.0, 0.0, 20.0, 20.0])],
                t1,
            ))],
        ),
        &mut memory,
        t1,
        SystemTime::UNIX_EPOCH,
    );
    let d = second.decision_at(t1).expect("ready");
    assert_eq!(d.components.ttft_seconds, Some(3.9));
    assert_eq!(d.backlog, 20.0);
    // Re-evaluating the same reading (a tick) does not double-count.
    let again = evaluate(
        &s,
        reports(
            &s,
            vec![good(engine_reading(
                vec![ttft_pod(&[0.0, 0.0, 0.0, 20.0, 20.0])],
                t1,
            ))],
        ),
        &mut memory,
        t1,
        SystemTime::UNIX_EPOCH,
    );
    assert_eq!(
        again
            .decision_at(t1)
            .expect("ready")
            .components
            .ttft_seconds,
        Some(3.9)
    );
}

fn prom_spec() -> TriggerSpec {
    spec(&[
        ("prometheusAddress", "http://127.0.0.1:9/"),
        ("targetBacklogPerReplica", "10"),
        ("runningPerReplica", "32"),
        // The summed-signal path these tests pin; PromQL's default is now
        // `capacity` per pod (docs/decisions/0024).
        ("policy", "backlog"),
    ])
}

fn query_state(query: &str, values: &[f64], at: Instant) -> SignalState {
    good(Timed {
        value: Reading::Query(QueryReading {
            query: query.to_owned(),
            series: values
                .iter()
                .map(|v| SeriesValue {
                    labels: "{}".into(),
                    value: *v,
                })
                .collect(),
        }),
        at,
        wall: SystemTime::now(),
    })
}

/// States for waiting, running, replicas (the order of `sources()`).
fn prom_eval(waiting: &[f64], running: &[f64], replicas: &[f64]) -> Result<Decision, Unavailable> {
    let now = Instant::now();
    let s = prom_spec();
    let states = vec![
        query_state("w", waiting, now),
        query_state("r", running, now),
        query_state("n", replicas, now),
    ];
    evaluate(
        &s,
        reports(&s, states),
        &mut TriggerMemory::default(),
        now,
        SystemTime::UNIX_EPOCH,
    )
    .decision_at(now)
}

#[test]
fn prometheus_sums_series_of_summed_signals() {
    let d = prom_eval(&[3.0, 4.0], &[32.0, 32.0], &[2.0]).expect("ready");
    assert_eq!(d.backlog, 7.0 + 20.0);
    assert_eq!(d.components.replicas_reporting, 2);
}

#[test]
fn prometheus_empty_result_is_zero_only_when_replicas_say_zero() {
    // Explicit 0 replicas: empty W and R are a measured zero → inactive.
    let d = prom_eval(&[], &[], &[0.0]).expect("zero replicas");
    assert_eq!(d.backlog, 0.0);
    assert!(!d.active);
    // Replicas unknown (empty): a lost target is not zero work.
    let err = prom_eval(&[], &[], &[]).expect_err("lost");
    assert!(
        err.to_string().contains("waitingQuery") && err.to_string().contains("lost target"),
        "{err}"
    );
    // Replicas up but W empty: also lost.
    let err = prom_eval(&[], &[5.0], &[3.0]).expect_err("lost");
    assert!(err.to_string().contains("waitingQuery"), "{err}");
}

/// Several series where one is meant, or a value that is no count, is the
/// query's failed reading (the source checks the answer its signal needs):
/// counted, logged and held as any failed poll, never a reading that
/// reaches the decision.
#[test]
fn each_prometheus_query_carries_the_answer_its_signal_reads() {
    use crate::source::prometheus::Answer;
    use crate::trigger::{EngineInput, GpuInput};
    let s = spec(&[
        ("prometheusAddress", "http://127.0.0.1:9/"),
        ("targetBacklogPerReplica", "10"),
        ("runningPerReplica", "32"),
        ("policy", "backlog"),
        ("kvCacheTarget", "0.8"),
        ("ttftSloSeconds", "1"),
        ("podSelectorRegex", "llama-.*"),
    ]);
    let Some(EngineInput::Prometheus(q)) = &s.engine else {
        panic!("{:?}", s.engine);
    };
    let answers = [
        Some(&q.waiting),
        q.running.as_ref(),
        q.kv_cache.as_ref(),
        q.ttft.as_ref(),
        Some(&q.replicas),
    ]
    .map(|q| q.map(|q| q.answer));
    assert_eq!(
        answers,
        [
            Some(Answer::Summed("waitingQuery")),
            Some(Answer::Summed("runningQuery")),
            Some(Answer::Fraction("kvCacheQuery")),
            Some(Answer::Quantile("ttftQuery")),
            Some(Answer::Count("replicasQuery")),
        ]
    );
    let Some(GpuInput::Prometheus(gpu)) = &s.gpu else {
        panic!("{:?}", s.gpu);
    };
    assert_eq!(gpu.answer, Answer::Value("gpuUtilQuery"));
}

fn broker_state(messages: f64, partitions: Option<usize>, at: Instant) -> SignalState {
    good(Timed {
        value: Reading::Broker(crate::source::BrokerReading {
            messages,
            partitions,
            breakdown: Default::default(),
        }),
        at,
        wall: SystemTime::now(),
    })
}

fn kafka_spec(extra: &[(&str, &str)]) -> TriggerSpec {
    let mut md = vec![
        ("bootstrapServers", "127.0.0.1:9092"),
        ("consumerGroup", "g"),
        ("topic", "t"),
        ("targetBacklogPerReplica", "10"),
        ("messageWeight", "2"),
    ];
    md.extend_from_slice(extra);
    spec(&md)
}

#[test]
fn broker_only_trigger_activates_from_weighted_backlog() {
    let now = Instant::now();
    let s = kafka_spec(&[]);
    let states = vec![broker_state(7.0, None, now)];
    let d = evaluate(
        &s,
        reports(&s, states),
        &mut TriggerMemory::default(),
        now,
        SystemTime::UNIX_EPOCH,
    )
    .decision_at(now)
    .expect("ready");
    assert_eq!(d.backlog, 14.0);
    assert_eq!(d.components.broker_term, Some(14.0));
    assert!(d.active);
}

#[test]
fn kafka_backlog_is_capped_at_t_times_partitions() {
    let now = Instant::now();
    let s = kafka_spec(&[]);
    // 500 lag × w 2 = 1000, but 3 partitions allow at most 3 consumers: T·3 = 30.
    let states = vec![broker_state(500.0, Some(3), now)];
    let d = evaluate(
        &s,
        reports(&s, states),
        &mut TriggerMemory::default(),
        now,
        SystemTime::UNIX_EPOCH,
    )
    .decision_at(now)
    .expect("ready");
    assert_eq!(d.backlog, 30.0);
}

fn engine_and_broker_spec() -> TriggerSpec {
    spec(&[
        (
            "vllmTargets",
            "dns+http://llama-headless.inference:8000/metrics",
        ),
        ("queueURL", "http://127.0.0.1:9/000000000000/jobs"),
        ("awsRegion", "us-east-1"),
        ("targetBacklogPerReplica", "10"),
    ])
}

fn no_pods(at: Instant) -> SignalState {
    good(Timed {
        value: Reading::Engine(EngineReading {
            engine: Engine::Vllm,
            pods: vec![],
            malformed_lines: 0,
            empty_discovery: vec!["dns+http://llama-headless.inference:8000/metrics".into()],
        }),
        at,
        wall: SystemTime::now(),
    })
}

#[test]
fn a_name_with_no_addresses_is_zero_pods_only_with_a_broker() {
    let now = Instant::now();
    // With a broker: zero pods, and the queue alone activates.
    let s = engine_and_broker_spec();
    let states: Vec<SignalState> = s
        .sources()
        .iter()
        .map(|source| match source {
            SourceSpec::Engine(_) => no_pods(now),
            _ => broker_state(4.0, None, now),
        })
        .collect();
    let d = evaluate(
        &s,
        reports(&s, states),
        &mut TriggerMemory::default(),
        now,
        SystemTime::UNIX_EPOCH,
    )
    .decision_at(now)
    .expect("zero pods is a reading");
    assert_eq!(
        (d.backlog, d.components.replicas_reporting, d.active),
        (4.0, 0, true)
    );

    // Without a broker: the same answer is a lost signal (a typo looks the same).
    let s = spec(&[
        (
            "vllmTargets",
            "dns+http://llama-headless.inference:8000/metrics",
        ),
        ("targetBacklogPerReplica", "10"),
    ]);
    let err = evaluate(
        &s,
        reports(&s, vec![no_pods(now)]),
        &mut TriggerMemory::default(),
        now,
        SystemTime::UNIX_EPOCH,
    )
    .decision_at(now)
    .expect_err("lost");
    assert!(
        err.to_string().contains("no addresses") && err.to_string().contains("not zero pods"),
        "{err}"
    );
}
