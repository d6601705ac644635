//! Evaluation tests for what a copied KEDA trigger expects: Kafka's
//! persistent lag counts for activation, a `dns+` name with no
//! addresses among answering targets flags the value degraded, and a value
//! KEDA would read as 0 (infinite) is never handed on.

use std::time::SystemTime;

use super::*;
use crate::decide::signal_state::Timed;
use crate::source::broker::kafka::LAG_WITH_PERSISTENT;
use crate::source::{BrokerReading, Engine, PodReading};

fn spec(md: &[(&str, &str)]) -> TriggerSpec {
    TriggerSpec::from_metadata(md.iter().copied()).expect("valid")
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

fn good(value: Reading, at: Instant) -> SignalState {
    SignalState {
        last_good: Some(Timed {
            value,
            at,
            wall: SystemTime::now(),
        }),
        ..SignalState::default()
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

fn pod(waiting: f64) -> PodReading {
    PodReading {
        target: "http://10.0.0.7:8000/metrics".into(),
        waiting,
        running: Some(0.0),
        kv_cache_usage: None,
        ttft: None,
        finished_total: None,
        generation_tokens_total: None,
        prompt_tokens_total: None,
        read: Default::default(),
    }
}
#[test]
fn persistent_kafka_lag_activates_but_does_not_scale() {
    let now = Instant::now();
    // excludePersistentLag: partition stuck, so 0 lag for scaling and 3
    // with persistent lag (the reading's `lagWithPersistent`).
    let s = kafka_spec(&[("excludePersistentLag", "true"), ("activationBacklog", "5")]);
    let stuck = |with_persistent: f64| {
        let breakdown = [
            ("t/0".to_owned(), 0.0),
            (LAG_WITH_PERSISTENT.to_owned(), with_persistent),
        ];
        let reading = BrokerReading {
            messages: 0.0,
            partitions: Some(1),
            breakdown: breakdown.into_iter().collect(),
        };
        good(Reading::Broker(reading), now)
    };
    let decide = |state| {
        evaluate(
            &s,
            reports(&s, vec![state]),
            &mut TriggerMemory::default(),
            now,
            SystemTime::UNIX_EPOCH,
        )
        .decision_at(now)
        .expect("ready")
    };
    // w 2 × 3 = 6 > A 5: active, while the value KEDA scales on stays 0.
    let d = decide(stuck(3.0));
    assert_eq!((d.backlog, d.desired_replicas), (0.0, 0));
    assert_eq!(d.activation_value, 6.0);
    assert_eq!(d.components.activation_broker_term, Some(6.0));
    assert!(d.active, "{d:?}");
    // Strictly greater, as KEDA: 2 × 2.5 = 5 is not above 5.
    let d = decide(stuck(2.5));
    assert!(!d.active, "{d:?}");
    // Activation ignores the partition cap (KEDA's IsActive is uncapped):
    // 100 × 2 = 200 although B is capped at T × 1 = 10.
    let d = decide(good(
        Reading::Broker(BrokerReading {
            messages: 100.0,
            partitions: Some(1),
            breakdown: Default::default(),
        }),
        now,
    ));
    assert_eq!((d.backlog, d.activation_value), (10.0, 200.0));
}

#[test]
fn an_empty_name_among_answering_targets_is_degraded_not_dropped() {
    let now = Instant::now();
    let empty = "dns+http://llama-b-headless.inference:8000/metrics".to_owned();
    let s = spec(&[
        (
            "vllmTargets",
            "dns+http://llama-a-headless.inference:8000/metrics,dns+http://llama-b-headless.inference:8000/metrics",
        ),
        ("targetBacklogPerReplica", "10"),
    ]);
    let reading = |pods: Vec<PodReading>| {
        let reading = EngineReading {
            engine: Engine::Vllm,
            pods,
            malformed_lines: 0,
            empty_discovery: vec![empty.clone()],
        };
        good(Reading::Engine(reading), now)
    };
    let e = evaluate(
        &s,
        reports(&s, vec![reading(vec![pod(4.0)])]),
        &mut TriggerMemory::default(),
        now,
        SystemTime::UNIX_EPOCH,
    );
    assert_eq!(e.decision_at(now).expect("a value").backlog, 4.0);
    assert!(e.degraded);
    assert_eq!(e.kind(), "degraded");
    assert_eq!(e.empty_names, vec![empty.clone()]);
    // Every name empty (no broker): not degraded but lost, as before.
    let e = evaluate(
        &s,
        reports(&s, vec![reading(vec![])]),
        &mut TriggerMemory::default(),
        now,
        SystemTime::UNIX_EPOCH,
    );
    assert_eq!(e.kind(), "unavailable");
    assert!(e.empty_names.is_empty());
}

#[test]
fn an_empty_dcgm_name_among_answering_exporters_is_degraded_too() {
    use crate::source::dcgm::{GpuReading, GpuSample};
    let now = Instant::now();
    let empty = "dns+http://dcgm-b.gpu-operator:9400/metrics".to_owned();
    let s = spec(&[
        ("vllmTargets", "http://10.0.0.7:8000/metrics"),
        (
            "dcgmTargets",
            "dns+http://dcgm-a.gpu-operator:9400/metrics,dns+http://dcgm-b.gpu-operator:9400/metrics",
        ),
        ("podSelectorRegex", "llama-.*"),
        ("targetBacklogPerReplica", "10"),
    ]);
    let engine = good(
        Reading::Engine(EngineReading {
            engine: Engine::Vllm,
            pods: vec![pod(4.0)],
            malformed_lines: 0,
            empty_discovery: Vec::new(),
        }),
        now,
    );
    let gpus = good(
        Reading::Gpu(GpuReading {
            gpus: vec![GpuSample {
                target: "http://10.0.1.1:9400/metrics".into(),
                gpu: "0".into(),
                instance: None,
                pod: "llama-0".into(),
                utilization: 50.0,
                read: String::new(),
            }],
            malformed_lines: 0,
            empty_discovery: vec![empty.clone()],
        }),
        now,
    );
    let e = evaluate(
        &s,
        reports(&s, vec![engine, gpus]),
        &mut TriggerMemory::default(),
        now,
        SystemTime::UNIX_EPOCH,
    );
    assert_eq!(e.decision_at(now).expect("a value").backlog, 4.0);
    assert_eq!((e.kind(), e.empty_names.clone()), ("degraded", vec![empty]));
}

/// Gauges beyond any real fleet (a broken exporter's `1e308`) add up to an infinite `B`, which
/// KEDA reads as 0, or past what KEDA before v2.20 can carry: the trigger is unavailable with
/// the reason, never a silent scale-down.
#[test]
fn a_backlog_no_metric_can_carry_is_unavailable() {
    let now = Instant::now();
    let s = spec(&[
        ("vllmTargets", "http://10.0.0.7:8000/metrics"),
        ("targetBacklogPerReplica", "10"),
        ("policy", "backlog"),
    ]);
    let engine = |pods: Vec<PodReading>| {
        good(
            Reading::Engine(EngineReading {
                engine: Engine::Vllm,
                pods,
                malformed_lines: 0,
                empty_discovery: Vec::new(),
            }),
            now,
        )
    };
    let e = evaluate(
        &s,
        reports(&s, vec![engine(vec![pod(1e308), pod(1e308)])]),
        &mut TriggerMemory::default(),
        now,
        SystemTime::UNIX_EPOCH,
    );
    match e.decision_at(now) {
        Err(reason @ Unavailable::Unrepresentable { .. }) => assert!(
            reason
                .to_string()
                .contains("B = inf, more than KEDA can carry"),
            "{reason}"
        ),
        other => panic!("expected Unrepresentable, got {other:?}"),
    }
    // Past 1e15 KEDA before v2.20 overflows; up to it, a number (the HPA caps the replicas).
    let at = |waiting: f64| {
        evaluate(
            &s,
            reports(&s, vec![engine(vec![pod(waiting)])]),
            &mut TriggerMemory::default(),
            now,
            SystemTime::UNIX_EPOCH,
        )
        .decision_at(now)
    };
    assert_eq!(at(1e15).expect("a value").backlog, 1e15);
    assert!(
        matches!(at(2e15), Err(Unavailable::Unrepresentable { backlog }) if backlog == 2e15),
        "{:?}",
        at(2e15)
    );
}
