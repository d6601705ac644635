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

#[test]
fn a_degraded_transition_names_each_failing_pod_and_what_is_done_with_it() {
    use crate::decide::quorum::{DegradedPod, Fleet};
    let pod = |target: &str, state| DegradedPod {
        target: target.into(),
        state,
        reason: "timeout",
        error: format!("{target}: no answer within 720ms"),
        failed_polls: 3,
        last_good_age_seconds: Some(2.0),
    };
    let mut evaluation = Evaluation::pending(SystemTime::now());
    evaluation.degraded = true;
    evaluation.fleet = Some(Fleet {
        discovered: 4,
        reporting: 3,
        min_reporting_fraction: 0.5,
        extrapolation: 4.0 / 3.0,
        pods: vec![
            pod("http://a", PodState::Held),
            pod("http://b", PodState::LeftOut),
        ],
        recheck_at: None,
    });
    assert_eq!(
        degraded_reason(&evaluation),
        "http://a: no answer within 720ms: holding the pod's last reading; http://b: no answer within 720ms: pod left out (3 of 4 pods report)"
    );
}

/// Draining: a registered trigger is still served, a new one is refused
/// before its metadata is even read, and closing drops every trigger.
#[tokio::test]
async fn a_draining_cache_refuses_new_triggers_and_close_drops_them_all() {
    use crate::runtime::poller::PollerRegistry;
    use crate::runtime::telemetry::Telemetry;
    use crate::source::context::SourceContext;
    use crate::source::http::HttpScraper;
    let telemetry = Arc::new(Telemetry::new());
    let http = HttpScraper::new(Duration::from_secs(1), 1 << 20).expect("client");
    let cache = DecisionCache::new(
        PollerRegistry::new(
            SourceContext::new(http).expect("context"),
            telemetry.clone(),
        ),
        telemetry,
        CacheSettings::default(),
    );
    let register = |name: &str, metadata: &[(&str, &str)]| {
        cache.get_or_register(
            "ns".into(),
            name.into(),
            metadata
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<Vec<_>>(),
        )
    };
    let md = [
        ("vllmTargets", "http://127.0.0.1:1/metrics"),
        ("targetBacklogPerReplica", "10"),
    ];
    let held = register("held", &md).expect("registered");
    cache.start_draining();
    assert!(cache.is_draining());
    let again = register("held", &md).expect("a registered trigger is still served");
    assert!(Arc::ptr_eq(&held, &again));
    assert_eq!(
        register("new", &md).expect_err("refused"),
        RegisterError::ShuttingDown
    );
    // Invalid metadata is not even read: the answer is "go elsewhere".
    assert_eq!(
        register("bad", &[("nonsense", "1")]).expect_err("refused"),
        RegisterError::ShuttingDown
    );
    drop((held, again));
    assert_eq!(cache.close(), 1);
    assert!(cache.entries().is_empty());
}
