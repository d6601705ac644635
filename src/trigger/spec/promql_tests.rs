//! The PromQL path: the summed queries of `policy: backlog`, and with
//! `policy: capacity` the per-pod queries and the keys that select and
//! override them (docs/decisions/0024).

use super::*;
use crate::source::ScrapeTarget;
use crate::source::prometheus::PodQueries;

fn parse(pairs: &[(&str, &str)]) -> Result<TriggerSpec, MetadataErrors> {
    TriggerSpec::from_metadata(pairs.iter().copied())
}

fn error_text(pairs: &[(&str, &str)]) -> String {
    match parse(pairs) {
        Ok(spec) => panic!("expected an error, got {spec:?}"),
        Err(e) => e.to_string(),
    }
}

fn pod_queries(spec: &TriggerSpec) -> &PodQueries {
    match &spec.engine {
        Some(EngineInput::Scrape(source)) => source.prometheus.as_deref().expect("per-pod PromQL"),
        other => panic!("not the per-pod path: {other:?}"),
    }
}

const PROM: (&str, &str) = ("prometheusAddress", "http://prometheus.monitoring:9090");
const T: (&str, &str) = ("targetBacklogPerReplica", "10");

#[test]
fn capacity_is_the_default_and_reads_per_pod_vectors() {
    let spec = parse(&[
        PROM,
        T,
        ("modelName", "m"),
        ("namespace", "inference"),
        ("ttftSloSeconds", "2"),
    ])
    .expect("valid");
    assert!(matches!(spec.fusion.policy, Policy::Capacity(_)));
    let q = pod_queries(&spec);
    let sel = r#"model_name="m",namespace="inference""#;
    assert_eq!(q.pod_label, "pod");
    assert_eq!(
        q.waiting,
        format!(
            r#"sum by (namespace, pod) (vllm:num_requests_waiting_by_reason{{{sel},reason="capacity"}}) or sum by (namespace, pod) (vllm:num_requests_waiting{{{sel}}})"#
        )
    );
    assert_eq!(
        q.running.as_deref(),
        Some(format!("sum by (namespace, pod) (vllm:num_requests_running{{{sel}}})").as_str())
    );
    // Raw counter values: the policy takes its own per-pod deltas.
    assert_eq!(
        q.finished,
        format!("sum by (namespace, pod) (vllm:request_success_total{{{sel}}})")
    );
    // Tokens: the same raw counters per pod, so μ is learned in tokens.
    assert_eq!(
        q.generation_tokens.as_deref(),
        Some(format!("sum by (namespace, pod) (vllm:generation_tokens_total{{{sel}}})").as_str())
    );
    assert_eq!(
        q.prompt_tokens.as_deref(),
        Some(format!("sum by (namespace, pod) (vllm:prompt_tokens_total{{{sel}}})").as_str())
    );
    assert_eq!(
        q.kv_cache.as_deref(),
        Some(
            format!(
                "avg by (namespace, pod) (vllm:kv_cache_usage_perc{{{sel}}} or vllm:gpu_cache_usage_perc{{{sel}}})"
            )
            .as_str()
        )
    );
    assert_eq!(
        q.ttft.as_deref(),
        Some(
            format!(
                "sum by (namespace, pod, le) (vllm:time_to_first_token_seconds_bucket{{{sel}}})"
            )
            .as_str()
        )
    );
    let Some(EngineInput::Scrape(source)) = &spec.engine else {
        unreachable!()
    };
    // The address stands in the targets for the outbound check.
    assert_eq!(
        source.targets,
        vec![ScrapeTarget::Static(
            "http://prometheus.monitoring:9090".parse().expect("url")
        )]
    );
    assert!(source.label().contains("per pod"), "{}", source.label());
    assert_eq!(spec.sources().len(), 1);
    // A credentials profile rides on the engine source itself (registration
    // authorizes it there): still one source, no extra query.
    let spec = parse(&[PROM, T, ("authProfile", "prom")]).expect("valid");
    assert_eq!(pod_queries(&spec).auth_profile.as_deref(), Some("prom"));
    assert_eq!(spec.sources().len(), 1);
    // The quorum counts these pods too.
    let spec = parse(&[PROM, T, ("minReportingFraction", "0.5")]).expect("valid");
    assert_eq!(spec.min_reporting_fraction, 0.5);
}

#[test]
fn other_engines_use_their_own_names_per_pod() {
    let q = parse(&[PROM, T, ("engine", "triton")]).expect("valid");
    let q = pod_queries(&q);
    assert_eq!(
        q.running.as_deref(),
        Some(r#"sum by (namespace, pod) (nv_trt_llm_request_metrics{request_type="scheduled"})"#)
    );
    assert_eq!(
        q.finished,
        r#"sum by (namespace, pod) ({__name__=~"nv_inference_request_success|nv_inference_request_failure"})"#
    );
    assert!(
        q.kv_cache
            .as_deref()
            .is_some_and(|k| k.starts_with("avg by (namespace, pod) (nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\"})")),
        "{:?}",
        q.kv_cache
    );
    let s = parse(&[
        PROM,
        T,
        ("engine", "sglang"),
        ("podLabel", "kubernetes_pod_name"),
    ])
    .expect("valid");
    let s = pod_queries(&s);
    assert_eq!(
        s.waiting,
        r#"sum by (namespace, kubernetes_pod_name) (max without (pp_rank, tp_rank, moe_ep_rank, pid) (sglang:num_queue_reqs{priority=""})) or sum by (namespace, kubernetes_pod_name) (max without (pp_rank, tp_rank, moe_ep_rank, pid) (sglang:num_queue_reqs{priority!=""}))"#
    );
    assert_eq!(
        s.generation_tokens.as_deref(),
        Some("sum by (namespace, kubernetes_pod_name) (sglang:generation_tokens_total{})")
    );
    let tgi = parse(&[PROM, T, ("engine", "tgi")]).expect("valid");
    assert_eq!(pod_queries(&tgi).kv_cache, None);
    // No token counters: no token query (μ stays in requests).
    for engine in ["tgi", "triton"] {
        let spec = parse(&[PROM, T, ("engine", engine)]).expect("valid");
        let q = pod_queries(&spec);
        assert_eq!((&q.generation_tokens, &q.prompt_tokens), (&None, &None));
    }
}

#[test]
fn per_pod_queries_can_be_overridden() {
    let spec = parse(&[
        PROM,
        T,
        ("policy", "capacity"),
        ("podLabel", "pod_name"),
        ("podWaitingQuery", "sum by (pod_name) (my_waiting)"),
        ("podRunningQuery", "sum by (pod_name) (my_running)"),
        ("podFinishedQuery", "sum by (pod_name) (my_done_total)"),
        (
            "podGenerationTokensQuery",
            "sum by (pod_name) (my_out_total)",
        ),
        ("podPromptTokensQuery", "sum by (pod_name) (my_in_total)"),
        ("podKvCacheQuery", "avg by (pod_name) (my_kv)"),
    ])
    .expect("valid");
    let q = pod_queries(&spec);
    assert_eq!(q.pod_label, "pod_name");
    assert_eq!(q.waiting, "sum by (pod_name) (my_waiting)");
    assert_eq!(q.running.as_deref(), Some("sum by (pod_name) (my_running)"));
    assert_eq!(q.finished, "sum by (pod_name) (my_done_total)");
    assert_eq!(q.kv_cache.as_deref(), Some("avg by (pod_name) (my_kv)"));
    let tokens = (q.generation_tokens.as_deref(), q.prompt_tokens.as_deref());
    assert_eq!(
        tokens,
        (
            Some("sum by (pod_name) (my_out_total)"),
            Some("sum by (pod_name) (my_in_total)")
        )
    );
    // An engine without token counters can be given queries for them.
    let tgi = parse(&[
        PROM,
        T,
        ("engine", "tgi"),
        ("podGenerationTokensQuery", "sum by (pod) (out_total)"),
    ])
    .expect("valid");
    let q = pod_queries(&tgi);
    assert_eq!(
        q.generation_tokens.as_deref(),
        Some("sum by (pod) (out_total)")
    );
    assert_eq!(q.prompt_tokens, None);
}

#[test]
fn what_cannot_work_is_refused_naming_key_value_and_what_is_allowed() {
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case] = &[
        // Summed queries with per-pod capacity: say what to write instead.
        (
            &[PROM, T, ("policy", "capacity"), ("waitingQuery", "sum(q)")],
            &[
                "waitingQuery",
                "summed",
                "podWaitingQuery",
                "policy: backlog",
            ],
        ),
        (
            &[
                PROM,
                T,
                ("drainRatePerReplica", "2"),
                ("replicasQuery", "vector(0)"),
            ],
            &["replicasQuery", "summed"],
        ),
        // Per-pod keys where nothing reads them.
        (
            &[PROM, T, ("policy", "backlog"), ("podLabel", "pod")],
            &["podLabel", "only applies to `policy: capacity`"],
        ),
        (
            &[("vllmTargets", "http://a:1"), T, ("podFinishedQuery", "x")],
            &["podFinishedQuery", "needs `prometheusAddress`"],
        ),
        (
            &[
                ("vllmTargets", "http://a:1"),
                T,
                ("podGenerationTokensQuery", "x"),
                ("podPromptTokensQuery", "y"),
            ],
            &[
                "podGenerationTokensQuery",
                "podPromptTokensQuery",
                "needs `prometheusAddress`",
            ],
        ),
        (
            &[
                PROM,
                T,
                ("policy", "backlog"),
                ("podPromptTokensQuery", "y"),
            ],
            &["podPromptTokensQuery", "only applies to `policy: capacity`"],
        ),
        (
            &[PROM, T, ("podGenerationTokensQuery", " ")],
            &["podGenerationTokensQuery", "one series per pod"],
        ),
        // Bad values.
        (
            &[PROM, T, ("podLabel", "1pod")],
            &["podLabel", "`1pod`", "a Prometheus label name"],
        ),
        (
            &[PROM, T, ("podLabel", "namespace")],
            &["podLabel", "`namespace`", "not `namespace` or `le`"],
        ),
        (
            &[PROM, T, ("podWaitingQuery", " ")],
            &["podWaitingQuery", "one series per pod"],
        ),
        // Signals the engine does not have.
        (
            &[PROM, T, ("engine", "tgi"), ("kvCacheTarget", "0.8")],
            &["kvCacheTarget", "podKvCacheQuery"],
        ),
        (
            &[PROM, T, ("engine", "tgi"), ("ttftSloSeconds", "2")],
            &["ttftSloSeconds", "TTFT histogram", "ttftQuery"],
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
fn prometheus_path_builds_one_query_per_needed_signal() {
    let md = [
        ("serverAddress", "http://prometheus.monitoring:9090"),
        ("modelName", "m"),
        ("namespace", "inference"),
        ("targetBacklogPerReplica", "10"),
        ("runningPerReplica", "32"),
        ("ttftSloSeconds", "2"),
        ("podSelectorRegex", "llama-.*"),
        ("authProfile", "prom"),
        ("policy", "backlog"),
    ];
    let spec = parse(&md).expect("valid");
    let Some(EngineInput::Prometheus(q)) = &spec.engine else {
        panic!("prometheus")
    };
    assert_eq!(
        q.waiting.query,
        r#"sum(vllm:num_requests_waiting_by_reason{model_name="m",namespace="inference",reason="capacity"}) or sum(vllm:num_requests_waiting{model_name="m",namespace="inference"})"#
    );
    assert!(q.running.is_some() && q.ttft.is_some() && q.kv_cache.is_none());
    assert_eq!(
        q.replicas.query,
        r#"count(max without (engine) (vllm:num_requests_waiting{model_name="m",namespace="inference"}))"#
    );
    assert_eq!(q.waiting.auth_profile.as_deref(), Some("prom"));
    assert!(
        matches!(&spec.gpu, Some(GpuInput::Prometheus(g)) if g.query.contains("pod=~\"llama-.*\""))
    );
    // waiting, running, ttft, replicas, gpu
    assert_eq!(spec.sources().len(), 5);
    let overridden = parse(&[
        ("prometheusAddress", "http://p:9090"),
        ("targetBacklogPerReplica", "10"),
        ("waitingQuery", "sum(my_queue)"),
    ])
    .expect("valid");
    let Some(EngineInput::Prometheus(q)) = &overridden.engine else {
        panic!("prometheus")
    };
    assert_eq!(q.waiting.query, "sum(my_queue)");
}
