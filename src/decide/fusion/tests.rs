//! Fusion tests: each term and guard by table, the capacity policy, saturation.

use super::*;

fn params(t: f64, c: Option<f64>, a: f64) -> FusionParams {
    FusionParams {
        running_per_replica: c,
        activation_backlog: a,
        ..FusionParams::with_target(t)
    }
}

fn signals(w: f64, r: f64, n: usize) -> Signals {
    Signals {
        waiting: w,
        running: Some(r),
        replicas_reporting: n,
        ..Signals::default()
    }
}

struct Case {
    name: &'static str,
    t: f64,
    c: Option<f64>,
    a: f64,
    w: f64,
    r: f64,
    backlog: f64,
    desired: u64,
    active: bool,
}

#[test]
fn demand_table() {
    let cases = [
        Case {
            name: "issue example: three pods, T=10, C=32",
            t: 10.0,
            c: Some(32.0),
            a: 0.0,
            w: 45.0,
            r: 94.0,
            backlog: 74.375,
            desired: 8,
            active: true,
        },
        Case {
            name: "architecture example: 10 full pods + 50 waiting",
            t: 10.0,
            c: Some(32.0),
            a: 0.0,
            w: 50.0,
            r: 320.0,
            backlog: 150.0,
            desired: 15,
            active: true,
        },
        Case {
            name: "running ignored without C",
            t: 10.0,
            c: None,
            a: 0.0,
            w: 7.0,
            r: 300.0,
            backlog: 7.0,
            desired: 1,
            active: true,
        },
        Case {
            name: "idle fleet is measured zero, inactive",
            t: 10.0,
            c: Some(32.0),
            a: 0.0,
            w: 0.0,
            r: 0.0,
            backlog: 0.0,
            desired: 0,
            active: false,
        },
        Case {
            name: "activation is strict: B == A is inactive",
            t: 10.0,
            c: None,
            a: 3.0,
            w: 3.0,
            r: 0.0,
            backlog: 3.0,
            desired: 1,
            active: false,
        },
        Case {
            name: "just above activation",
            t: 10.0,
            c: None,
            a: 3.0,
            w: 3.5,
            r: 0.0,
            backlog: 3.5,
            desired: 1,
            active: true,
        },
        Case {
            name: "exact multiple of T does not round up",
            t: 10.0,
            c: None,
            a: 0.0,
            w: 20.0,
            r: 0.0,
            backlog: 20.0,
            desired: 2,
            active: true,
        },
        Case {
            name: "garbage inputs read as zero",
            t: 10.0,
            c: Some(32.0),
            a: 0.0,
            w: f64::NAN,
            r: -4.0,
            backlog: 0.0,
            desired: 0,
            active: false,
        },
    ];
    for case in cases {
        let d = fuse(&params(case.t, case.c, case.a), &signals(case.w, case.r, 3));
        assert_eq!(d.backlog, case.backlog, "{}", case.name);
        assert_eq!(d.desired_replicas, case.desired, "{}", case.name);
        assert_eq!(d.active, case.active, "{}", case.name);
        assert_eq!(d.components.replicas_reporting, 3, "{}", case.name);
        assert_eq!(d.components.driver, Driver::Demand, "{}", case.name);
    }
}

#[test]
fn components_record_each_term() {
    let d = fuse(&params(10.0, Some(32.0), 0.0), &signals(45.0, 94.0, 3));
    assert_eq!(d.components.waiting, 45.0);
    assert_eq!(d.components.running, Some(94.0));
    assert_eq!(d.components.running_term, Some(29.375));
    assert_eq!(d.components.demand, 74.375);
    assert_eq!(d.components.latency_term, None);
    assert_eq!(d.components.kv_term, None);
}

#[test]
fn latency_guard_table() {
    // T=10, n=4, S=2 s, tolerance 0.1 → fires above 2.2 s; D = W (no C).
    let guard = FusionParams {
        latency: Some(LatencyGuard {
            slo_seconds: 2.0,
            tolerance: 0.1,
        }),
        ..FusionParams::with_target(10.0)
    };
    // (name, W, L, expected B, expected latency term, driver)
    type Case = (&'static str, f64, Option<f64>, f64, f64, Driver);
    let cases: [Case; 7] = [
        ("below the SLO", 5.0, Some(1.5), 5.0, 0.0, Driver::Demand),
        (
            "inside the tolerance band",
            5.0,
            Some(2.2),
            5.0,
            0.0,
            Driver::Demand,
        ),
        (
            "above the band: T·n·L/S",
            5.0,
            Some(3.0),
            60.0,
            60.0,
            Driver::Latency,
        ),
        (
            "clamped at 2×",
            5.0,
            Some(30.0),
            80.0,
            80.0,
            Driver::Latency,
        ),
        (
            "silent with nothing waiting, however high L",
            0.0,
            Some(30.0),
            0.0,
            0.0,
            Driver::Demand,
        ),
        (
            "no requests in the window: off",
            5.0,
            None,
            5.0,
            0.0,
            Driver::Demand,
        ),
        (
            "demand above the guard wins",
            100.0,
            Some(3.0),
            100.0,
            60.0,
            Driver::Demand,
        ),
    ];
    for (name, w, l, backlog, term, driver) in cases {
        let s = Signals {
            waiting: w,
            replicas_reporting: 4,
            ttft_seconds: l,
            ..Signals::default()
        };
        let d = fuse(&guard, &s);
        assert_eq!(d.backlog, backlog, "{name}");
        assert_eq!(d.components.latency_term, Some(term), "{name}");
        assert_eq!(d.components.driver, driver, "{name}");
    }
}

#[test]
fn kv_cache_table() {
    let p = FusionParams {
        kv_cache_target: Some(0.8),
        ..FusionParams::with_target(10.0)
    };
    // n = 4: T·n = 40 at kv == target.
    for (name, kv, backlog, driver) in [
        ("below target: demand rules", 0.4, 25.0, Driver::Demand),
        ("at target: holds the fleet", 0.8, 40.0, Driver::KvCache),
        ("above target: scales up", 0.96, 48.0, Driver::KvCache),
    ] {
        let s = Signals {
            waiting: 25.0,
            replicas_reporting: 4,
            kv_cache_usage: Some(kv),
            ..Signals::default()
        };
        let d = fuse(&p, &s);
        assert!((d.backlog - backlog).abs() < 1e-9, "{name}: {}", d.backlog);
        assert_eq!(d.components.driver, driver, "{name}");
    }
}

#[test]
fn gpu_guard_table() {
    let p = |idle: Option<f64>| FusionParams {
        running_per_replica: Some(32.0),
        gpu: Some(GpuGuard {
            busy_percent: Some(90.0),
            idle_percent: idle,
        }),
        ..FusionParams::with_target(10.0)
    };
    // n = 4, T·n = 40.
    // (name, idle veto, W, R, U, expected B, action)
    type Case = (
        &'static str,
        Option<f64>,
        f64,
        f64,
        f64,
        f64,
        Option<GpuAction>,
    );
    let cases: [Case; 7] = [
        (
            "busy hold: saturated fleet with work queued keeps T·n",
            None,
            2.0,
            64.0,
            97.0,
            40.0,
            Some(GpuAction::BusyHold),
        ),
        (
            "busy but nothing queued: no hold",
            None,
            0.0,
            64.0,
            97.0,
            20.0,
            None,
        ),
        (
            "busy below the threshold: no hold",
            None,
            2.0,
            64.0,
            80.0,
            22.0,
            None,
        ),
        (
            "busy never drives scale-up beyond T·n",
            None,
            100.0,
            128.0,
            99.0,
            140.0,
            None,
        ),
        (
            "idle veto off by default",
            None,
            100.0,
            128.0,
            5.0,
            140.0,
            None,
        ),
        (
            "idle veto caps at T·n when opted in",
            Some(10.0),
            100.0,
            128.0,
            5.0,
            40.0,
            Some(GpuAction::IdleVeto),
        ),
        (
            "idle veto needs queued work",
            Some(10.0),
            0.0,
            160.0,
            5.0,
            50.0,
            None,
        ),
    ];
    for (name, idle, w, r, u, backlog, action) in cases {
        let s = Signals {
            waiting: w,
            running: Some(r),
            replicas_reporting: 4,
            gpu_utilization: Some(u),
            ..Signals::default()
        };
        let d = fuse(&p(idle), &s);
        assert_eq!(d.backlog, backlog, "{name}");
        assert_eq!(d.components.gpu_action, action, "{name}");
    }
}

#[test]
fn capacity_policy_uses_the_estimate_and_guards_still_apply() {
    let cap = CapacityParams {
        drain_rate_per_replica: Some(2.0),
        arrival_smoothing_seconds: 15.0,
        peak_hold_seconds: 1200.0,
        headroom: 0.2,
        drain_horizon_seconds: 30.0,
        learn_drain_rate: false,
    };
    let p = FusionParams {
        policy: Policy::Capacity(cap),
        running_per_replica: Some(32.0),
        latency: Some(LatencyGuard {
            slo_seconds: 1.0,
            tolerance: 0.1,
        }),
        ..FusionParams::with_target(10.0)
    };
    let estimate = CapacityEstimate {
        arrival_rate: 6.0,
        smoothed_rate: 6.0,
        peak_rate: 6.0,
        peak_hold_seconds: 600.0,
        drain_rate: 2.0,
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
    };
    let s = Signals {
        waiting: 30.0,
        running: Some(64.0),
        replicas_reporting: 2,
        capacity: Some(estimate),
        ..Signals::default()
    };
    let d = fuse(&p, &s);
    // D = T·(3.6 + 0.5) = 41, not W + T·R/C = 50.
    assert!((d.components.demand - 41.0).abs() < 1e-9, "{d:?}");
    assert_eq!(d.components.capacity, Some(estimate));
    // TTFT 3 s with work waiting: D_lat = 10·2·2 = 40 < 41, demand still wins.
    let d = fuse(
        &p,
        &Signals {
            ttft_seconds: Some(3.0),
            ..s
        },
    );
    assert_eq!(d.components.driver, Driver::Demand);
    assert_eq!(d.components.latency_term, Some(40.0));
}

#[test]
fn huge_backlog_saturates_instead_of_overflowing() {
    let d = fuse(&FusionParams::with_target(1e-300), &signals(1e300, 0.0, 1));
    assert_eq!(d.desired_replicas, u64::MAX);
}

#[test]
fn activation_counts_the_broker_term_kafka_activation_counts() {
    let p = params(10.0, None, 0.0);
    // Kafka with excludePersistentLag: 0 for scaling, 3 with persistent lag.
    let s = Signals {
        broker_backlog: Some(0.0),
        broker_activation: Some(3.0),
        ..Signals::default()
    };
    let d = fuse(&p, &s);
    assert_eq!((d.backlog, d.desired_replicas), (0.0, 0));
    assert_eq!(d.activation_value, 3.0);
    assert!(d.active, "persistent lag still wakes the Deployment");
    assert_eq!(d.components.activation_broker_term, Some(3.0));
    // With engine work the activation value adds the same terms as B.
    let s = Signals {
        waiting: 2.0,
        broker_backlog: Some(0.0),
        broker_activation: Some(3.0),
        ..Signals::default()
    };
    let d = fuse(&params(10.0, None, 4.0), &s);
    assert_eq!((d.backlog, d.activation_value, d.active), (2.0, 5.0, true));
    // Equal terms change nothing: activation is B > A.
    let s = Signals {
        broker_backlog: Some(3.0),
        broker_activation: Some(3.0),
        ..Signals::default()
    };
    let d = fuse(&params(10.0, None, 3.0), &s);
    assert_eq!((d.activation_value, d.active), (3.0, false));
    assert_eq!(d.components.activation_broker_term, None);
}
