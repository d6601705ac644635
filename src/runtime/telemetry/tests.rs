//! The capacity and gRPC series: set with a decision, one `μ` series per
//! trigger, removed with the trigger's other value series.

use std::time::Duration;

use super::{Telemetry, TriggerLabels};
use crate::decide::capacity::learn::DrainRateSource;
use crate::decide::capacity::{CapacityEstimate, DrainRateUnit};
use crate::decide::fusion::{Decision, FusionParams, Signals, fuse};
use crate::trigger::params::{CapacityParams, Policy};

fn labels(name: &str) -> TriggerLabels {
    TriggerLabels {
        namespace: "ns".into(),
        name: name.into(),
        metric: "m".into(),
    }
}

fn estimate(source: DrainRateSource, mu: f64, floor: bool) -> CapacityEstimate {
    CapacityEstimate {
        arrival_rate: 3.0,
        smoothed_rate: 2.5,
        peak_rate: 4.0,
        peak_hold_seconds: 600.0,
        drain_rate: mu,
        drain_rate_learned: !matches!(source, DrainRateSource::Configured | DrainRateSource::Prior),
        drain_rate_source: source,
        drain_rate_unit: DrainRateUnit::Requests,
        drain_rate_relative_error: None,
        drain_rate_samples: 0.0,
        drain_rate_age_seconds: None,
        full_batch: None,
        backlog_floor: floor,
        rate_term: 1.0,
        pod_backlog_term: 0.0,
    }
}

fn capacity_decision(estimate: CapacityEstimate) -> Decision {
    let mut params = FusionParams::with_target(10.0);
    params.policy = Policy::Capacity(CapacityParams {
        drain_rate_per_replica: Some(2.0),
        arrival_smoothing_seconds: 60.0,
        peak_hold_seconds: 300.0,
        headroom: 0.2,
        drain_horizon_seconds: 30.0,
        learn_drain_rate: true,
    });
    let signals = Signals {
        waiting: 4.0,
        running: Some(8.0),
        replicas_reporting: 1,
        capacity: Some(estimate),
        ..Signals::default()
    };
    let decision = fuse(&params, &signals);
    assert_eq!(decision.components.capacity, Some(estimate));
    decision
}

/// Every sample line of `family` (no `# HELP`/`# TYPE`).
fn samples(telemetry: &Telemetry, family: &str) -> Vec<String> {
    telemetry
        .encode()
        .lines()
        .filter(|l| l.starts_with(family) && l[family.len()..].starts_with('{'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_capacity_decision_sets_mu_by_source_lambda_and_the_floor() {
    let t = Telemetry::new();
    let so = labels("so");
    t.record_decision(
        &so,
        &capacity_decision(estimate(DrainRateSource::Prior, 2.0, true)),
        false,
    );
    assert_eq!(
        samples(&t, "backlog_scaler_capacity_drain_rate"),
        [
            r#"backlog_scaler_capacity_drain_rate{namespace="ns",name="so",metric="m",source="prior",unit="requests"} 2.0"#
        ]
    );
    let mut arrival = samples(&t, "backlog_scaler_capacity_arrival_rate");
    arrival.sort();
    assert_eq!(
        arrival,
        [
            r#"backlog_scaler_capacity_arrival_rate{namespace="ns",name="so",metric="m",kind="peak"} 4.0"#,
            r#"backlog_scaler_capacity_arrival_rate{namespace="ns",name="so",metric="m",kind="smoothed"} 2.5"#,
        ]
    );
    assert_eq!(
        samples(&t, "backlog_scaler_capacity_backlog_floor"),
        [r#"backlog_scaler_capacity_backlog_floor{namespace="ns",name="so",metric="m"} 1"#]
    );

    // Learned and confident: the prior's series goes, the floor is off.
    t.record_decision(
        &so,
        &capacity_decision(estimate(DrainRateSource::Fit, 3.5, false)),
        false,
    );
    assert_eq!(
        samples(&t, "backlog_scaler_capacity_drain_rate"),
        [
            r#"backlog_scaler_capacity_drain_rate{namespace="ns",name="so",metric="m",source="fit",unit="requests"} 3.5"#
        ]
    );
    assert_eq!(
        samples(&t, "backlog_scaler_capacity_backlog_floor"),
        [r#"backlog_scaler_capacity_backlog_floor{namespace="ns",name="so",metric="m"} 0"#]
    );
}

#[test]
fn a_unit_change_leaves_one_mu_series_under_the_new_unit() {
    let t = Telemetry::new();
    let so = labels("so");
    let fit = |unit, mu| CapacityEstimate {
        drain_rate_unit: unit,
        ..estimate(DrainRateSource::Fit, mu, false)
    };
    // Requests, then the token fit takes over (same source), then back, as
    // when the token counters stop answering: one series each time.
    for (unit, mu, expected) in [
        (
            DrainRateUnit::Requests,
            3.5,
            r#"backlog_scaler_capacity_drain_rate{namespace="ns",name="so",metric="m",source="fit",unit="requests"} 3.5"#,
        ),
        (
            DrainRateUnit::Tokens,
            4.25,
            r#"backlog_scaler_capacity_drain_rate{namespace="ns",name="so",metric="m",source="fit",unit="tokens"} 4.25"#,
        ),
        (
            DrainRateUnit::Requests,
            3.0,
            r#"backlog_scaler_capacity_drain_rate{namespace="ns",name="so",metric="m",source="fit",unit="requests"} 3.0"#,
        ),
    ] {
        t.record_decision(&so, &capacity_decision(fit(unit, mu)), false);
        assert_eq!(
            samples(&t, "backlog_scaler_capacity_drain_rate"),
            [expected]
        );
    }
    assert_eq!(Telemetry::drain_rate_unit_names(), ["requests", "tokens"]);
    let help = t
        .encode()
        .lines()
        .find(|l| l.starts_with("# HELP backlog_scaler_capacity_drain_rate "))
        .map(str::to_owned);
    assert!(
        help.as_deref()
            .is_some_and(|h| h.contains("unit: requests, tokens")),
        "{help:?}"
    );
}

#[test]
fn capacity_series_go_with_unavailable_with_the_trigger_and_for_backlog() {
    let families = [
        "backlog_scaler_capacity_drain_rate",
        "backlog_scaler_capacity_arrival_rate",
        "backlog_scaler_capacity_backlog_floor",
    ];
    let t = Telemetry::new();
    let (a, b) = (labels("a"), labels("b"));
    let decision = capacity_decision(estimate(DrainRateSource::Samples, 2.0, false));
    t.record_decision(&a, &decision, false);
    t.record_decision(&b, &decision, false);
    let only_b = |t: &Telemetry| {
        for family in families {
            let lines = samples(t, family);
            assert!(!lines.is_empty(), "{family}");
            assert!(lines.iter().all(|l| l.contains(r#"name="b""#)), "{lines:?}");
        }
    };

    t.record_unavailable(&a);
    only_b(&t);
    t.record_decision(&a, &decision, false);
    t.forget_trigger(&a);
    only_b(&t);
    // A trigger switched to (or built with) the backlog policy has none.
    let backlog = fuse(&FusionParams::with_target(10.0), &Signals::default());
    assert_eq!(backlog.components.capacity, None);
    t.record_decision(&a, &decision, false);
    t.record_decision(&a, &backlog, false);
    only_b(&t);
    assert!(
        t.encode()
            .contains(r#"backlog_scaler_backlog{namespace="ns",name="a""#)
    );
}

#[test]
fn every_drain_rate_source_has_its_label() {
    let t = Telemetry::new();
    let so = labels("so");
    for (source, name) in [
        (DrainRateSource::Configured, "configured"),
        (DrainRateSource::Prior, "prior"),
        (DrainRateSource::Samples, "samples"),
        (DrainRateSource::Fit, "fit"),
        (DrainRateSource::Bounds, "bounds"),
        (DrainRateSource::None, "none"),
    ] {
        t.record_decision(&so, &capacity_decision(estimate(source, 1.0, true)), false);
        let lines = samples(&t, "backlog_scaler_capacity_drain_rate");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains(&format!("source=\"{name}\"")),
            "{lines:?}"
        );
        assert!(Telemetry::drain_rate_source_names().contains(&name));
    }
    assert_eq!(Telemetry::drain_rate_source_names().len(), 6);
    assert_eq!(Telemetry::arrival_rate_kind_names(), ["smoothed", "peak"]);
}

#[test]
fn grpc_durations_fall_in_sub_millisecond_to_second_buckets() {
    let t = Telemetry::new();
    t.record_grpc("GetMetrics", tonic::Code::Ok);
    t.record_grpc_duration("GetMetrics", Duration::from_micros(80));
    t.record_grpc_duration("GetMetrics", Duration::from_millis(1500));
    let text = t.encode();
    let bucket = |le: &str| {
        let prefix = format!(
            "backlog_scaler_grpc_request_duration_seconds_bucket{{le=\"{le}\",method=\"GetMetrics\"}} "
        );
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no bucket {le}:\n{text}"))
            .to_owned()
    };
    assert_eq!(bucket("0.0001"), "1");
    assert_eq!(bucket("1.0"), "1");
    assert_eq!(bucket("2.5"), "2");
    assert_eq!(bucket("+Inf"), "2");
    assert!(
        text.contains(r#"backlog_scaler_grpc_requests_total{method="GetMetrics",code="OK"} 1"#),
        "{text}"
    );
    for method in Telemetry::grpc_methods() {
        assert!(
            ["IsActive", "StreamIsActive", "GetMetricSpec", "GetMetrics"].contains(method),
            "{method}"
        );
    }
}

#[test]
fn every_trigger_family_is_described_before_any_trigger_exists() {
    let text = Telemetry::new().encode();
    for family in [
        "backlog",
        "backlog_component",
        "guard_fired",
        "desired_replicas",
        "shadow_desired_replicas",
        "active",
        "replicas_reporting",
        "trigger_available",
        "trigger_degraded",
        "trigger_degraded_pods",
        "capacity_drain_rate",
        "capacity_arrival_rate",
        "capacity_backlog_floor",
    ] {
        assert!(
            text.contains(&format!("# TYPE backlog_scaler_{family} gauge\n")),
            "{family}:\n{text}"
        );
    }
}

#[test]
fn a_decision_writes_each_value_series_once_and_unavailable_leaves_availability() {
    let t = Telemetry::new();
    let so = labels("so");
    let signals = Signals {
        waiting: 25.0,
        running: Some(4.0),
        replicas_reporting: 2,
        ..Signals::default()
    };
    let decision = fuse(&FusionParams::with_target(10.0), &signals);
    t.record_decision(&so, &decision, true);
    t.record_shadow(&so, &decision);
    let trigger = r#"{namespace="ns",name="so",metric="m"}"#;
    let text = t.encode();
    for (family, value) in [
        ("backlog", format!("{:?}", decision.backlog)),
        ("desired_replicas", decision.desired_replicas.to_string()),
        (
            "shadow_desired_replicas",
            decision.desired_replicas.to_string(),
        ),
        ("active", u8::from(decision.active).to_string()),
        ("replicas_reporting", "2".to_owned()),
        ("trigger_available", "1".to_owned()),
        ("trigger_degraded", "1".to_owned()),
    ] {
        let line = format!("backlog_scaler_{family}{trigger} {value}");
        assert_eq!(
            text.lines().filter(|l| *l == line).count(),
            1,
            "{line}:\n{text}"
        );
    }
    // Configured terms only: no TTFT, KV or GPU series for this trigger.
    let components = samples(&t, "backlog_scaler_backlog_component");
    assert!(
        components
            .iter()
            .any(|l| l.ends_with(r#"component="waiting"} 25.0"#)),
        "{components:?}"
    );
    assert!(!components.iter().any(|l| l.contains("ttft_seconds")));
    assert_eq!(samples(&t, "backlog_scaler_guard_fired").len(), 4);

    t.record_unavailable(&so);
    let left: Vec<String> = t
        .encode()
        .lines()
        .filter(|l| l.contains(r#"name="so""#))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        left,
        [
            format!("backlog_scaler_trigger_available{trigger} 0"),
            format!("backlog_scaler_trigger_degraded{trigger} 0"),
        ]
    );
    t.forget_trigger(&so);
    assert!(!t.encode().contains(r#"name="so""#));
}

#[test]
fn degraded_pod_series_follow_the_counts() {
    use crate::decide::quorum::PodState;
    let t = Telemetry::new();
    let so = labels("so");
    let family = "backlog_scaler_trigger_degraded_pods";
    t.record_degraded_pods(&so, &[]);
    assert!(!t.encode().contains(r#"name="so""#));
    t.record_degraded_pods(
        &so,
        &[
            (PodState::Held, "timeout", 2),
            (PodState::LeftOut, "parse", 1),
        ],
    );
    let mut lines = samples(&t, family);
    lines.sort();
    assert_eq!(
        lines,
        [
            r#"backlog_scaler_trigger_degraded_pods{namespace="ns",name="so",metric="m",state="held",reason="timeout"} 2"#,
            r#"backlog_scaler_trigger_degraded_pods{namespace="ns",name="so",metric="m",state="left_out",reason="parse"} 1"#,
        ]
    );
    t.record_degraded_pods(&so, &[(PodState::LeftOut, "parse", 3)]);
    assert_eq!(
        samples(&t, family),
        [
            r#"backlog_scaler_trigger_degraded_pods{namespace="ns",name="so",metric="m",state="left_out",reason="parse"} 3"#
        ]
    );
    // Every pod answers again: no series, and nothing left of a trigger
    // that had no other.
    t.record_degraded_pods(&so, &[]);
    assert!(!t.encode().contains(r#"name="so""#));
}
