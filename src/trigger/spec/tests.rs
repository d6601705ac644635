//! Metadata validation tests.

use super::*;
use crate::trigger::params::{GpuGuard, LatencyGuard};

fn parse(pairs: &[(&str, &str)]) -> Result<TriggerSpec, MetadataErrors> {
    TriggerSpec::from_metadata(pairs.iter().copied())
}

fn base() -> Vec<(&'static str, &'static str)> {
    vec![
        ("vllmTargets", "http://127.0.0.1:8000/metrics"),
        ("targetBacklogPerReplica", "10"),
    ]
}

fn error_text(pairs: &[(&str, &str)]) -> String {
    match parse(pairs) {
        Ok(spec) => panic!("expected an error, got {spec:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn minimal_metadata_gets_defaults() {
    let spec = parse(&base()).expect("valid");
    assert_eq!(spec.metric_name, "backlog");
    assert_eq!(spec.sources().len(), 1);
    assert!(
        spec.gpu.is_none()
            && spec.fusion.latency.is_none()
            && spec.fusion.kv_cache_target.is_none()
    );
    assert_eq!(spec.fusion.target_per_replica, 10.0);
    assert_eq!(spec.fusion.running_per_replica, None);
    assert_eq!(spec.fusion.activation_backlog, 0.0);
    assert_eq!(spec.poll_interval, Duration::from_secs(5));
    assert_eq!(spec.max_signal_age, Duration::from_secs(15));
}

#[test]
fn keda_keys_and_from_env_are_accepted() {
    let mut md = base();
    md.extend([
        ("scalerAddress", "backlog-scaler.keda:9090"),
        ("enableTLS", "false"),
        ("unsafeSsl", "false"),
        ("modelNameFromEnv", "meta-llama/Llama-3.1-8B-Instruct"),
    ]);
    let spec = parse(&md).expect("valid");
    assert_eq!(spec.metric_name, "backlog-meta-llama-llama-3-1-8b-instruct");
    let Some(EngineInput::Scrape(source)) = &spec.engine else {
        panic!("scrape")
    };
    assert_eq!(
        source.model_name.as_deref(),
        Some("meta-llama/Llama-3.1-8B-Instruct")
    );
}

#[test]
fn metric_names_carry_no_forbidden_characters() {
    let mut md = base();
    md.push(("modelName", "Qwen/Qwen2.5:7B (50%)"));
    let name = parse(&md).expect("valid").metric_name;
    assert!(!name.contains(['/', '.', ':', '%', '(', ')']), "{name}");
    assert_eq!(name, "backlog-qwen-qwen2-5-7b-50");
}

#[test]
fn bad_values_name_the_key_the_value_and_what_is_allowed() {
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case] = &[
        (
            &[("vllmTargets", "http://a:1/metrics")],
            &["targetBacklogPerReplica", "required", "from 0.001"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1/metrics"),
                ("targetBacklogPerReplica", "-1"),
            ],
            &["targetBacklogPerReplica", "`-1`", "from 0.001"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1/metrics"),
                ("targetBacklogPerReplica", "abc"),
            ],
            &["targetBacklogPerReplica", "`abc`"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1/metrics"),
                ("targetBacklogPerReplica", "NaN"),
            ],
            &["targetBacklogPerReplica", "`NaN`"],
        ),
        (
            &[
                ("vllmTargets", "http:///metrics"),
                ("targetBacklogPerReplica", "10"),
            ],
            &["vllmTargets", "http:///metrics", "host"],
        ),
        (
            &[
                ("vllmTargets", "ftp://a/metrics"),
                ("targetBacklogPerReplica", "10"),
            ],
            &["vllmTargets", "ftp://a/metrics", "http"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1/metrics"),
                ("targetBacklogPerReplica", "10"),
                ("pollIntervalSeconds", "0"),
            ],
            &["pollIntervalSeconds", "`0`", "1 to 300"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1/metrics"),
                ("targetBacklogPerReplica", "10"),
                ("pollIntervalSeconds", "10"),
                ("maxSignalAgeSeconds", "5"),
            ],
            &["maxSignalAgeSeconds", "`5`", "10 to 3600"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1/metrics"),
                ("targetBacklogPerReplica", "10"),
                ("activationBacklog", "-3"),
            ],
            &["activationBacklog", "`-3`", "≥ 0"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1/metrics"),
                ("targetBacklogPerReplica", "10"),
                ("metricName", "vllm:waiting"),
            ],
            &["metricName", "`vllm:waiting`", "letters, digits or `-`"],
        ),
        (
            &[("targetBacklogPerReplica", "10")],
            &["vllmTargets", "required"],
        ),
    ];
    for (md, needles) in cases {
        let text = error_text(md);
        for needle in *needles {
            assert!(text.contains(needle), "{text:?} lacks {needle:?}");
        }
    }
}

#[test]
fn unknown_keys_suggest_the_nearest_valid_key() {
    let mut md = base();
    md.push(("targetBacklogPerReplcia", "10"));
    let text = error_text(&md);
    assert!(
        text.contains("unknown metadata key `targetBacklogPerReplcia` (did you mean `targetBacklogPerReplica`?)"),
        "{text}"
    );
    let mut md = base();
    md.push(("concurrency", "5"));
    assert_eq!(error_text(&md), "unknown metadata key `concurrency`");
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = error_text(&[("targetBacklogPerReplica", "0"), ("colour", "blue")]);
    assert!(text.contains("colour"), "{text}");
    assert!(text.contains("`0`"), "{text}");
    assert!(text.contains("vllmTargets"), "{text}");
}

#[test]
fn targets_are_parsed_deduplicated_and_defaulted() {
    let mut md = base();
    md[0] = (
        "vllmTargets",
        " http://a:8000 , http://a:8000/metrics,dns+http://vllm-headless.ns:8000/metrics ",
    );
    let spec = parse(&md).expect("valid");
    let Some(EngineInput::Scrape(source)) = &spec.engine else {
        panic!("scrape")
    };
    assert_eq!(source.targets.len(), 2);
}

#[test]
fn latency_kv_and_gpu_keys_build_guards() {
    let mut md = base();
    md.extend([
        ("ttftSloSeconds", "2"),
        ("ttftWindowSeconds", "120"),
        ("ttftQuantile", "0.9"),
        ("kvCacheTarget", "0.8"),
        (
            "dcgmTargets",
            "dns+http://dcgm-exporter.gpu-operator:9400/metrics",
        ),
        ("podSelectorRegex", "llama-8b-.*"),
        ("namespace", "inference"),
        ("gpuIdlePercent", "10"),
    ]);
    let spec = parse(&md).expect("valid");
    assert_eq!(
        spec.fusion.latency,
        Some(LatencyGuard {
            slo_seconds: 2.0,
            tolerance: 0.1
        })
    );
    assert_eq!(
        spec.ttft,
        TtftSettings {
            window: Duration::from_secs(120),
            quantile: 0.9
        }
    );
    assert_eq!(spec.fusion.kv_cache_target, Some(0.8));
    assert_eq!(
        spec.fusion.gpu,
        Some(GpuGuard {
            busy_percent: Some(90.0),
            idle_percent: Some(10.0)
        })
    );
    assert!(
        matches!(&spec.gpu, Some(GpuInput::Scrape(d)) if d.namespace.as_deref() == Some("inference"))
    );
    assert_eq!(spec.sources().len(), 2);
}

#[test]
fn combinations_that_cannot_work_are_refused_with_the_reason() {
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case] = &[
        (
            &[
                ("vllmTargets", "http://a:1"),
                ("targetBacklogPerReplica", "1"),
                ("waitingQuery", "x"),
            ],
            &["waitingQuery", "needs `prometheusAddress`"],
        ),
        (
            &[
                ("prometheusAddress", "http://p:9090"),
                ("targetBacklogPerReplica", "1"),
                ("kvCacheQuery", "avg(x)"),
            ],
            &["kvCacheQuery", "has no effect without `kvCacheTarget`"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1"),
                ("targetBacklogPerReplica", "1"),
                ("engine", "triton"),
                ("runningPerReplica", "8"),
            ],
            &["runningPerReplica", "triton"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1"),
                ("targetBacklogPerReplica", "1"),
                ("engine", "tgi"),
                ("ttftSloSeconds", "2"),
            ],
            &["ttftSloSeconds", "TTFT histogram"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1"),
                ("targetBacklogPerReplica", "1"),
                ("engine", "tgi"),
                ("modelName", "x"),
            ],
            &["modelName", "no model label"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1"),
                ("targetBacklogPerReplica", "1"),
                ("engine", "llamacpp"),
            ],
            &["engine", "`llamacpp`", "sglang"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1"),
                ("targetBacklogPerReplica", "1"),
                ("dcgmTargets", "http://d:9400"),
            ],
            &["dcgmTargets", "podSelectorRegex"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1"),
                ("targetBacklogPerReplica", "1"),
                ("gpuBusyPercent", "80"),
            ],
            &["gpuBusyPercent", "needs a GPU signal"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1"),
                ("targetBacklogPerReplica", "1"),
                ("ttftWindowSeconds", "30"),
            ],
            &["ttftWindowSeconds", "without `ttftSloSeconds`"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1"),
                ("targetBacklogPerReplica", "1"),
                ("kvCacheTarget", "80"),
            ],
            &["kvCacheTarget", "`80`", "(0, 1]"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1"),
                ("targetBacklogPerReplica", "1"),
                ("ttftSloSeconds", "2"),
                ("ttftQuantile", "95"),
            ],
            &["ttftQuantile", "between 0 and 1"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1"),
                ("targetBacklogPerReplica", "1"),
                ("dcgmTargets", "http://d:9400"),
                ("podSelectorRegex", "("),
            ],
            &["podSelectorRegex", "regular expression"],
        ),
        (
            &[
                ("prometheusAddress", "http:///x"),
                ("targetBacklogPerReplica", "1"),
            ],
            &["prometheusAddress", "http:///x"],
        ),
        (
            &[
                ("prometheusAddress", "http://p:9090"),
                ("serverAddress", "http://p:9090"),
                ("targetBacklogPerReplica", "1"),
            ],
            &["serverAddress", "alias"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1"),
                ("prometheusAddress", "http://p:9090"),
                ("targetBacklogPerReplica", "1"),
            ],
            &["vllmTargets", "set one"],
        ),
        (
            &[
                ("prometheusAddress", "http://p:9090"),
                ("targetBacklogPerReplica", "1"),
                ("engine", "tgi"),
                ("ttftSloSeconds", "2"),
                ("policy", "backlog"),
            ],
            &["ttftQuery", "no default"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1"),
                ("targetBacklogPerReplica", "1"),
                ("dcgmTargets", "http://d:9400"),
                ("podSelectorRegex", "x"),
                ("gpuIdlePercent", "95"),
            ],
            &["gpuIdlePercent", "below `gpuBusyPercent`"],
        ),
    ];
    for (md, needles) in cases {
        let text = error_text(md);
        for needle in *needles {
            assert!(text.contains(needle), "{md:?}: {text:?} lacks {needle:?}");
        }
    }
}

#[test]
fn vllm_targets_with_prometheus_for_the_gpu_only_is_allowed() {
    let spec = parse(&[
        ("vllmTargets", "http://a:1"),
        ("prometheusAddress", "http://p:9090"),
        ("podSelectorRegex", "llama-.*"),
        ("targetBacklogPerReplica", "1"),
    ])
    .expect("valid");
    assert!(matches!(spec.engine, Some(EngineInput::Scrape(_))));
    assert!(matches!(spec.gpu, Some(GpuInput::Prometheus(_))));
}

#[test]
fn capacity_policy_keys() {
    let mut md = base();
    md.extend([
        ("policy", "capacity"),
        ("drainRatePerReplica", "2.5"),
        ("peakHoldSeconds", "600"),
        ("learnDrainRate", "true"),
    ]);
    let spec = parse(&md).expect("valid");
    let Policy::Capacity(p) = spec.fusion.policy else {
        panic!("capacity")
    };
    assert_eq!(p.drain_rate_per_replica, Some(2.5));
    assert_eq!(p.peak_hold_seconds, 600.0);
    assert_eq!(p.arrival_smoothing_seconds, 15.0);
    assert_eq!(p.headroom, 0.2);
    assert_eq!(p.drain_horizon_seconds, 30.0);
    assert!(p.learn_drain_rate);
    // Scraped pods, no policy and no μ: capacity, μ learned.
    let Policy::Capacity(p) = parse(&base()).expect("valid").fusion.policy else {
        panic!("capacity is the default for vllmTargets")
    };
    assert_eq!(p.drain_rate_per_replica, None);
    assert!(p.learn_drain_rate);
    // The PromQL path too (per-pod queries), unless summed queries are set.
    let promql = parse(&[
        ("prometheusAddress", "http://p:9090"),
        ("targetBacklogPerReplica", "1"),
    ])
    .expect("valid");
    assert!(matches!(promql.fusion.policy, Policy::Capacity(_)));
    let summed = parse(&[
        ("prometheusAddress", "http://p:9090"),
        ("targetBacklogPerReplica", "1"),
        ("waitingQuery", "sum(q)"),
    ])
    .expect("valid");
    assert_eq!(summed.fusion.policy, Policy::Backlog);
    let mut md = base();
    md.push(("policy", "backlog"));
    assert_eq!(parse(&md).expect("valid").fusion.policy, Policy::Backlog);

    let mut md = base();
    md.extend([("policy", "capacity"), ("learnDrainRate", "false")]);
    assert!(error_text(&md).contains("drainRatePerReplica"));
    let mut md = base();
    md.extend([("policy", "backlog"), ("peakHoldSeconds", "600")]);
    assert!(error_text(&md).contains("only applies to `policy: capacity`"));
    let mut md = base();
    md.push(("policy", "fastest"));
    assert!(error_text(&md).contains("`backlog` or `capacity`"));
    // A broker alone has no pods to learn from.
    let text = error_text(&[
        ("queueURL", "https://sqs.us-east-1.amazonaws.com/1/q"),
        ("targetBacklogPerReplica", "1"),
        ("policy", "capacity"),
        ("drainRatePerReplica", "2"),
    ]);
    assert!(text.contains("per-pod counters"), "{text}");
}

#[test]
fn a_drain_rate_alone_selects_capacity_with_the_documented_defaults() {
    let mut md = base();
    md.push(("drainRatePerReplica", "2"));
    let Policy::Capacity(p) = parse(&md).expect("valid").fusion.policy else {
        panic!("capacity is the default when μ is given")
    };
    assert_eq!(p.peak_hold_seconds, 600.0);
    let mut md = base();
    md.extend([("drainRatePerReplica", "2"), ("policy", "backlog")]);
    assert!(error_text(&md).contains("only applies to `policy: capacity`"));
}

#[test]
fn ip_family_rides_on_every_dns_target_and_needs_one() {
    use crate::source::ScrapeTarget;
    use crate::source::http::IpFamily;
    let spec = parse(&[
        (
            "vllmTargets",
            "dns+http://llama.inference:8000/metrics,http://10.0.0.9:8000/metrics",
        ),
        ("dcgmTargets", "dns+http://dcgm.gpu-operator:9400/metrics"),
        ("podSelectorRegex", "llama-.*"),
        ("targetBacklogPerReplica", "10"),
        ("ipFamily", "ipv6"),
    ])
    .expect("valid");
    let Some(EngineInput::Scrape(engine)) = &spec.engine else {
        panic!("scrape")
    };
    let Some(GpuInput::Scrape(dcgm)) = &spec.gpu else {
        panic!("dcgm")
    };
    for target in engine.targets.iter().chain(&dcgm.targets) {
        match target {
            ScrapeTarget::Dns { family, .. } => assert_eq!(*family, IpFamily::Ipv6),
            ScrapeTarget::Static(url) => assert_eq!(url.as_str(), "http://10.0.0.9:8000/metrics"),
        }
    }
    let mut md = base();
    md.push(("ipFamily", "ipv4"));
    assert_eq!(
        error_text(&md),
        "metadata key `ipFamily` has value `ipv4`: applies to `dns+` entries of `vllmTargets` or `dcgmTargets`; there is none"
    );
}

#[test]
fn mode_is_active_by_default_shadow_on_request_and_nothing_else() {
    assert_eq!(parse(&base()).expect("valid").mode, Mode::Active);
    let mut md = base();
    md.push(("mode", "shadow"));
    assert_eq!(parse(&md).expect("valid").mode, Mode::Shadow);
    md.pop();
    md.push(("mode", "Active"));
    assert_eq!(parse(&md).expect("valid").mode, Mode::Active);
    md.pop();
    md.push(("mode", "bogus"));
    let text = error_text(&md);
    for part in ["mode", "`bogus`", "`active` or `shadow`"] {
        assert!(text.contains(part), "{part} not in {text}");
    }
}

#[test]
fn min_reporting_fraction_is_a_fraction_in_zero_one_for_scraped_pods() {
    assert_eq!(parse(&base()).expect("valid").min_reporting_fraction, 0.5);
    for (value, expected) in [("1", 1.0), ("0.75", 0.75), ("0.01", 0.01)] {
        let mut md = base();
        md.push(("minReportingFraction", value));
        assert_eq!(
            parse(&md).expect(value).min_reporting_fraction,
            expected,
            "{value}"
        );
    }
    for value in ["0", "-0.5", "1.5", "NaN", "half", ""] {
        let mut md = base();
        md.push(("minReportingFraction", value));
        let text = error_text(&md);
        assert!(
            text.contains("minReportingFraction")
                && text.contains(&format!("`{value}`"))
                && text.contains("(0, 1]"),
            "{value}: {text}"
        );
    }
    // Scraped pods are counted under `policy: backlog` too (an outside audit found it refused).
    let mut md = base();
    md.extend([("policy", "backlog"), ("minReportingFraction", "1")]);
    assert_eq!(parse(&md).expect("backlog").min_reporting_fraction, 1.0);
    // The summed PromQL path has no per-pod answers to count.
    let text = error_text(&[
        ("prometheusAddress", "http://127.0.0.1:9090"),
        ("targetBacklogPerReplica", "10"),
        ("minReportingFraction", "0.5"),
        ("policy", "backlog"),
    ]);
    assert!(
        text.contains("minReportingFraction") && text.contains("vllmTargets"),
        "{text}"
    );
}
