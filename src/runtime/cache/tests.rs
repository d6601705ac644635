//! Unit tests of the decision cache: degraded reasons, settings, draining.

use super::*;

#[test]
fn a_degraded_transition_names_what_is_held_and_what_is_empty() {
    use crate::decide::freshness::SignalReport;
    use crate::decide::signal_state::{SignalState, Timed};
    use crate::source::{FailureKind, SourceError, SourceSpec};
    let spec = TriggerSpec::from_metadata([
        ("targetBacklogPerReplica", "10"),
        ("vllmTargets", "http://127.0.0.1:9/metrics"),
    ])
    .expect("valid");
    let source: SourceSpec = spec.sources()[0].clone();
    let failure = Timed {
        value: SourceError::new(
            FailureKind::Unreachable,
            "http://127.0.0.1:9/metrics",
            "connection refused",
        ),
        at: Instant::now(),
        wall: SystemTime::now(),
    };
    let state = SignalState {
        last_good: None,
        last_failure: Some(failure),
        consecutive_failures: 2,
        failing_pods: Vec::new(),
    };
    let mut evaluation = Evaluation::pending(SystemTime::now());
    evaluation.degraded = true;
    evaluation.signals = vec![SignalReport {
        label: source.label(),
        source,
        state: Arc::new(state),
    }];
    evaluation.empty_names = vec!["dns+http://b.ns:8000/metrics".into()];
    let reason = degraded_reason(&evaluation);
    assert_eq!(
        reason,
        format!(
            "{}: holding its last reading (http://127.0.0.1:9/metrics: connection refused); dns+http://b.ns:8000/metrics: no addresses while the other targets answer",
            evaluation.signals[0].label
        )
    );
}
use crate::guard::config::ScalerConfig;

#[test]
fn settings_come_from_the_config_keys() {
    let config =
        ScalerConfig::parse("idleTimeoutSeconds: 60\ncoldStartBudgetMillis: 500\n").expect("valid");
    assert_eq!(
        CacheSettings::from_config(&config),
        CacheSettings {
            cold_start_budget: Duration::from_millis(500),
            idle_timeout: Duration::from_secs(60),
            max_triggers: 100_000,
        }
    );
    // An empty config file and no config file mean the same.
    assert_eq!(
        CacheSettings::from_config(&ScalerConfig::default()),
        CacheSettings::default()
    );
}
