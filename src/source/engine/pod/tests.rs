use super::*;
use crate::source::error::FailureKind;

const BODY: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="a"} 3.0
vllm:num_requests_running{engine="1",model_name="a"} 4.0
vllm:num_requests_running{engine="0",model_name="b"} 30.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="a"} 1.0
vllm:num_requests_waiting{engine="1",model_name="a"} 2.0
vllm:num_requests_waiting{engine="0",model_name="b"} 10.0
vllm:kv_cache_usage_perc{engine="0",model_name="a"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="a"} 0.7
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="a"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="a"} 5.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="a"} 6.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.5",model_name="a"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="1.0",model_name="a"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="a"} 1.0
"#;

fn source(engine: Engine, model: Option<&str>) -> EngineSource {
    EngineSource {
        engine,
        targets: vec![],
        model_name: model.map(str::to_owned),
        prometheus: None,
        requires: RequiredSignals::default(),
    }
}

#[test]
fn sums_engines_and_filters_models() {
    let (pod, malformed) = source(Engine::Vllm, Some("a"))
        .parse_pod("t", BODY)
        .expect("parses");
    assert_eq!((pod.waiting, pod.running, malformed), (3.0, Some(7.0), 0));
    assert!((pod.kv_cache_usage.expect("kv") - 0.6).abs() < 1e-12);
    let ttft = pod.ttft.expect("ttft");
    assert_eq!(ttft.bounds, vec![0.5, 1.0, f64::INFINITY]);
    assert_eq!(ttft.counts, vec![3.0, 6.0, 7.0]);
    let (pod, _) = source(Engine::Vllm, None)
        .parse_pod("t", BODY)
        .expect("parses");
    assert_eq!((pod.waiting, pod.running), (13.0, Some(37.0)));
}

#[test]
fn a_pod_without_a_required_signal_is_a_parse_error_naming_it() {
    let body = |skip: &str| -> String {
        BODY.lines()
            .filter(|l| !l.contains(skip))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let requiring = |requires: RequiredSignals| EngineSource {
        requires,
        ..source(Engine::Vllm, Some("a"))
    };
    let running = RequiredSignals {
        running: true,
        ..RequiredSignals::default()
    };
    let kv = RequiredSignals {
        kv_cache: true,
        ..RequiredSignals::default()
    };
    let finished = RequiredSignals {
        finished: true,
        ..RequiredSignals::default()
    };
    // Not required: the pod reads without it.
    let (pod, _) = source(Engine::Vllm, Some("a"))
        .parse_pod("t", &body("num_requests_running"))
        .expect("R is optional");
    assert_eq!(pod.running, None);
    for (requires, skip, text) in [
        (
            running,
            "num_requests_running",
            "t: no running-requests gauge (runningPerReplica is set): no vllm:num_requests_running sample with model_name=\"a\"",
        ),
        (
            kv,
            "kv_cache_usage_perc",
            "t: no KV-cache usage gauge (kvCacheTarget is set): no vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc sample with model_name=\"a\"",
        ),
        (
            finished,
            // BODY has no finished counter at all.
            "nothing to skip",
            "t: no finished-requests counter (policy capacity needs it with learnDrainRate: false): no vllm:request_success_total sample with model_name=\"a\"",
        ),
    ] {
        let err = requiring(requires)
            .parse_pod("t", &body(skip))
            .expect_err(text);
        assert_eq!(err.kind(), FailureKind::Parse, "{err}");
        assert_eq!(err.to_string(), text);
    }
    // Present, it reads as before.
    let every = RequiredSignals {
        running: true,
        kv_cache: true,
        finished: false,
    };
    let (pod, _) = requiring(every).parse_pod("t", BODY).expect("has R and KV");
    assert_eq!(pod.running, Some(7.0));
    // Triton names its labelled gauge first.
    let triton = EngineSource {
        requires: kv,
        ..source(Engine::Triton, None)
    };
    let err = triton
        .parse_pod("t", "nv_inference_pending_request_count 1\n")
        .expect_err("no KV");
    assert!(
        err.to_string().ends_with(
            "no nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\"} sample"
        ),
        "{err}"
    );
}

#[test]
fn missing_model_or_gauge_is_a_parse_error_not_zero() {
    let err = source(Engine::Vllm, Some("c"))
        .parse_pod("t", BODY)
        .expect_err("no model c");
    assert!(err.to_string().contains("model_name=\"c\""), "{err}");
    let err = source(Engine::Vllm, None)
        .parse_pod("t", "<html>oops</html>")
        .expect_err("garbage");
    assert_eq!(err.kind(), FailureKind::Parse, "{err}");
    assert!(err.to_string().contains("malformed"), "{err}");
}

#[test]
fn nan_or_negative_gauges_are_errors() {
    let body = "vllm:num_requests_waiting{model_name=\"a\"} NaN\nvllm:num_requests_running{model_name=\"a\"} 1.0\n";
    let err = source(Engine::Vllm, None)
        .parse_pod("t", body)
        .expect_err("NaN");
    assert!(err.to_string().contains("NaN"), "{err}");
}

/// KV-cache usage is a fraction on every engine (vLLM's `_perc` too): 85 is a broken exporter
/// or a percentage, a parse error, not a pod at 8500 % that `kvCacheTarget` scales on.
#[test]
fn kv_cache_usage_above_one_is_an_error() {
    for (body, ok) in [
        (
            "vllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 85\n",
            false,
        ),
        (
            "vllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 1.0\n",
            true,
        ),
        ("sglang:num_queue_reqs 0\nsglang:token_usage 1.5\n", false),
    ] {
        let engine = if body.starts_with("sglang") {
            Engine::Sglang
        } else {
            Engine::Vllm
        };
        match source(engine, None).parse_pod("t", body) {
            Ok(_) => assert!(ok, "{body}"),
            Err(err) => {
                assert!(!ok, "{body}: {err}");
                assert!(err.kind() == FailureKind::Parse, "{err:?}");
                assert!(
                    err.to_string().contains("not a fraction from 0 to 1"),
                    "{err}"
                );
            }
        }
    }
}

#[test]
fn underscore_spelling_and_old_kv_name_are_accepted() {
    let body = "vllm_num_requests_waiting{model_name=\"a\"} 2.0\nvllm_num_requests_running{model_name=\"a\"} 1.0\nvllm:gpu_cache_usage_perc{model_name=\"a\"} 0.25\n# EOF\n";
    let (pod, _) = source(Engine::Vllm, None)
        .parse_pod("t", body)
        .expect("parses");
    assert_eq!(
        (pod.waiting, pod.running, pod.kv_cache_usage),
        (2.0, Some(1.0), Some(0.25))
    );
    assert_eq!(pod.ttft, None);
}

#[test]
fn new_kv_name_wins_over_the_deprecated_one() {
    let body = "vllm:num_requests_waiting 0.0\nvllm:gpu_cache_usage_perc 0.9\nvllm:kv_cache_usage_perc 0.3\n";
    let (pod, _) = source(Engine::Vllm, None)
        .parse_pod("t", body)
        .expect("parses");
    assert_eq!(pod.kv_cache_usage, Some(0.3));
}

#[test]
fn sglang_reads_rank_zero_only() {
    let body = r#"sglang:num_queue_reqs{engine_type="unified",model_name="q",pp_rank="0",tp_rank="0"} 4.0
sglang:num_queue_reqs{engine_type="unified",model_name="q",pp_rank="0",tp_rank="1"} 4.0
sglang:num_running_reqs{engine_type="unified",model_name="q",pp_rank="0",tp_rank="0"} 7.0
sglang:num_running_reqs{engine_type="unified",model_name="q",pp_rank="0",tp_rank="1"} 7.0
sglang:token_usage{engine_type="unified",model_name="q",pp_rank="0",tp_rank="0"} 0.4
sglang:time_to_first_token_seconds_sum{engine_type="unified",model_name="q"} 0.15
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="0.1",model_name="q"} 0.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="0.2",model_name="q"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="+Inf",model_name="q"} 1.0
"#;
    let (pod, _) = source(Engine::Sglang, Some("q"))
        .parse_pod("t", body)
        .expect("parses");
    assert_eq!(
        (pod.waiting, pod.running, pod.kv_cache_usage),
        (4.0, Some(7.0), Some(0.4))
    );
    assert_eq!(pod.ttft.expect("ttft").counts, vec![0.0, 1.0, 1.0]);
}

#[test]
fn triton_histogram_is_converted_to_seconds() {
    let body = r#"nv_inference_pending_request_count{model="simple",version="1"} 3
nv_inference_first_response_histogram_ms_count{model="simple",version="1"} 37
nv_inference_first_response_histogram_ms_sum{model="simple",version="1"} 10771
nv_inference_first_response_histogram_ms_bucket{model="simple",version="1",le="100"} 8
nv_inference_first_response_histogram_ms_bucket{model="simple",version="1",le="500"} 30
nv_inference_first_response_histogram_ms_bucket{model="simple",version="1",le="+Inf"} 37
"#;
    let (pod, _) = source(Engine::Triton, Some("simple"))
        .parse_pod("t", body)
        .expect("parses");
    assert_eq!((pod.waiting, pod.running), (3.0, None));
    assert_eq!(
        pod.ttft.expect("ttft").bounds,
        vec![0.1, 0.5, f64::INFINITY]
    );
}

#[test]
fn tgi_has_no_model_label() {
    let body = "# TYPE tgi_queue_size gauge\ntgi_queue_size 5\n\n# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size 12\n\n";
    let (pod, _) = source(Engine::Tgi, Some("ignored"))
        .parse_pod("t", body)
        .expect("parses");
    assert_eq!((pod.waiting, pod.running), (5.0, Some(12.0)));
}

#[test]
fn histogram_without_inf_is_an_error() {
    let body =
        "vllm:num_requests_waiting 0.0\nvllm:time_to_first_token_seconds_bucket{le=\"1.0\"} 2.0\n";
    let err = source(Engine::Vllm, None)
        .parse_pod("t", body)
        .expect_err("no +Inf");
    assert!(err.to_string().contains("+Inf"), "{err}");
}

#[test]
fn malformed_lines_are_counted_and_skipped() {
    let body = format!("{BODY}vllm:num_requests_waiting{{model_name=\"a\" 5\ngarbage line\n");
    let (pod, malformed) = source(Engine::Vllm, Some("a"))
        .parse_pod("t", &body)
        .expect("parses");
    assert_eq!(pod.waiting, 3.0);
    assert!(malformed >= 1);
}

/// Lines SGLang 0.5.23's own `SchedulerMetricsCollector` wrote with
/// `--enable-priority-scheduling` (prometheus_client 0.26 multiprocess):
/// the total under `priority=""`, the breakdown under `priority="<n>"`.
const SGLANG_PRIORITY: &str = r#"# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",priority="",tp_rank="0"} 10.0
sglang:num_running_reqs{engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",priority="0",tp_rank="0"} 6.0
sglang:num_running_reqs{engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",priority="5",tp_rank="0"} 4.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",priority="",tp_rank="0"} 15.0
sglang:num_queue_reqs{engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",priority="0",tp_rank="0"} 10.0
sglang:num_queue_reqs{engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",priority="5",tp_rank="0"} 5.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",priority="",tp_rank="0"} 0.4
# HELP sglang:num_requests_total Number of requests processed.
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{engine_type="unified",is_streaming="true",model_name="Qwen/Qwen3-8B",priority="0"} 1.0
sglang:num_requests_total{engine_type="unified",is_streaming="false",model_name="Qwen/Qwen3-8B",priority="5"} 1.0
"#;

/// The same collector under DP attention (dp 2 × attention-TP 4, EP 8): only
/// each group's attention-TP rank 0 logs, with its global `tp_rank`.
const SGLANG_DP_ATTENTION: &str = r#"# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="4",pp_rank="0",tp_rank="4"} 3.0
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 5.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="1",engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="4",pp_rank="0",tp_rank="4"} 8.0
sglang:num_queue_reqs{dp_rank="0",engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 12.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="1",engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="4",pp_rank="0",tp_rank="4"} 0.75
sglang:token_usage{dp_rank="0",engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.25
"#;

/// `B = W + T·R/C` with `T = 1`, `C = 4`: the issue's numbers.
fn backlog(pod: &PodReading) -> f64 {
    pod.waiting + pod.running.expect("running") / 4.0
}

#[test]
fn sglang_priority_reads_the_total_once() {
    let (pod, _) = source(Engine::Sglang, Some("Qwen/Qwen3-8B"))
        .parse_pod("t", SGLANG_PRIORITY)
        .expect("parses");
    assert_eq!((pod.waiting, pod.running), (15.0, Some(10.0)));
    // Summing every series (the old reading) gives 30 + 20/4 = 35.
    assert_eq!(backlog(&pod), 17.5);
    assert_eq!(pod.kv_cache_usage, Some(0.4));
    assert_eq!(pod.finished_total, Some(2.0), "counters: every series once");
    assert_eq!(
        pod.read.waiting,
        r#"sglang:num_queue_reqs{priority=""} ×1 group (tp_rank 0)"#
    );

    // No total written (only the breakdown): the breakdown is summed.
    let breakdown: String = SGLANG_PRIORITY
        .lines()
        .filter(|l| !l.contains(r#"priority="","#))
        .map(|l| format!("{l}\n"))
        .collect();
    let (pod, _) = source(Engine::Sglang, None)
        .parse_pod("t", &breakdown)
        .expect("parses");
    assert_eq!((pod.waiting, pod.running), (15.0, Some(10.0)));
    assert!(
        pod.read.waiting.contains(r#"priority!="" summed"#),
        "{}",
        pod.read.waiting
    );
    assert_eq!(
        pod.kv_cache_usage, None,
        "token_usage is only logged as a total"
    );
}

#[test]
fn sglang_dp_attention_counts_every_group_by_its_global_rank() {
    let (pod, _) = source(Engine::Sglang, Some("Qwen/Qwen3-8B"))
        .parse_pod("t", SGLANG_DP_ATTENTION)
        .expect("parses");
    assert_eq!((pod.waiting, pod.running), (20.0, Some(8.0)));
    // Only tp_rank="0" (the old reading) gives 12 + 5/4 = 13.25.
    assert_eq!(backlog(&pod), 22.0);
    assert_eq!(
        pod.kv_cache_usage,
        Some(0.5),
        "mean over the groups' caches"
    );
    assert_eq!(
        pod.read.waiting,
        "sglang:num_queue_reqs ×2 groups (tp_rank 0,4)"
    );
    assert_eq!(
        pod.read.kv_cache_usage.as_deref(),
        Some("sglang:token_usage mean of 2 groups (tp_rank 0,4)")
    );
}

#[test]
fn sglang_every_scheduler_logging_counts_one_rank_per_group() {
    // `--enable-metrics-for-all-schedulers`, DP attention 2 × 2, PP 2, with
    // priority: every rank and stage of a group holds the same requests.
    let mut body = String::new();
    for (dp, w) in [(0, 3.0), (1, 6.0)] {
        for pp in 0..2 {
            for local in 0..2 {
                let tp = dp * 2 + local;
                for (priority, v) in [("", w), ("1", w - 1.0), ("2", 1.0)] {
                    body.push_str(&format!(
                        "sglang:num_queue_reqs{{dp_rank=\"{dp}\",engine_type=\"unified\",model_name=\"q\",moe_ep_rank=\"{tp}\",pp_rank=\"{pp}\",priority=\"{priority}\",tp_rank=\"{tp}\"}} {v}\n"
                    ));
                }
            }
        }
    }
    let (pod, _) = source(Engine::Sglang, None)
        .parse_pod("t", &body)
        .expect("parses");
    assert_eq!(pod.waiting, 9.0, "{}", pod.read.waiting);
    assert_eq!(
        pod.read.waiting,
        r#"sglang:num_queue_reqs{priority=""} ×2 groups (tp_rank 0,2)"#
    );
    // Older SGLang: no rank labels at all.
    let (pod, _) = source(Engine::Sglang, None)
        .parse_pod("t", "sglang:num_queue_reqs{model_name=\"q\"} 4.0\n")
        .expect("parses");
    assert_eq!(pod.waiting, 4.0);
}

/// vLLM 0.33.0's own `PrometheusStatLogger` (prometheus_client 0.26), two
/// data-parallel engines: engine 0 has 3 requests waiting for capacity and 2
/// deferred (LoRA budget / KV transfer), engine 1 has 5 and 0.
const VLLM_033: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 6.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 5.0
vllm:num_requests_waiting{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 5.0
# HELP vllm:num_requests_waiting_by_reason Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct",reason="capacity"} 3.0
vllm:num_requests_waiting_by_reason{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct",reason="capacity"} 5.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct",reason="deferred"} 2.0
vllm:num_requests_waiting_by_reason{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct",reason="deferred"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.25
"#;

#[test]
fn vllm_033_counts_requests_waiting_for_capacity_not_deferred_ones() {
    let (pod, _) = source(Engine::Vllm, Some("meta-llama/Llama-3.1-8B-Instruct"))
        .parse_pod("t", VLLM_033)
        .expect("parses");
    assert_eq!(pod.waiting, 8.0, "the total (10) includes 2 deferred");
    assert_eq!(pod.running, Some(10.0));
    assert_eq!(
        pod.kv_cache_usage,
        Some(0.375),
        "no gpu_cache_usage_perc in 0.33"
    );
    assert_eq!(
        pod.read.waiting,
        r#"vllm:num_requests_waiting_by_reason{reason="capacity"} ×2 series"#
    );
    assert_eq!(
        pod.read.kv_cache_usage.as_deref(),
        Some("vllm:kv_cache_usage_perc mean of 2 series")
    );
    // Before the by-reason gauge: the total.
    let old: String = VLLM_033
        .lines()
        .filter(|l| !l.contains("by_reason"))
        .map(|l| format!("{l}\n"))
        .collect();
    let (pod, _) = source(Engine::Vllm, None)
        .parse_pod("t", &old)
        .expect("parses");
    assert_eq!(pod.waiting, 10.0);
    assert_eq!(pod.read.waiting, "vllm:num_requests_waiting ×2 series");
}

/// Triton with the TensorRT-LLM backend (prometheus-cpp, `le`-less gauges;
/// labels as the backend's `custom_metrics_reporter.cc` creates them).
const TRITON_TRT_LLM: &str = r#"# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="tensorrt_llm",version="1"} 0
nv_inference_pending_request_count{model="ensemble",version="1"} 0
# HELP nv_trt_llm_request_metrics TRT LLM request metrics
# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="active",version="1"} 12
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="max",version="1"} 256
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="scheduled",version="1"} 12
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="context",version="1"} 2
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="waiting",version="1"} 7
# HELP nv_trt_llm_kv_cache_block_metrics TRT LLM KV cache block metrics
# TYPE nv_trt_llm_kv_cache_block_metrics gauge
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="tensorrt_llm",version="1"} 6400
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",model="tensorrt_llm",version="1"} 0.625
"#;

#[test]
fn triton_trt_llm_reads_the_in_flight_batcher_queue() {
    let (pod, _) = source(Engine::Triton, None)
        .parse_pod("t", TRITON_TRT_LLM)
        .expect("parses");
    assert_eq!(pod.waiting, 7.0, "not the pending count (0)");
    assert_eq!(pod.running, Some(12.0));
    assert_eq!(pod.kv_cache_usage, Some(0.625));
    assert_eq!(
        pod.read.waiting,
        r#"nv_trt_llm_request_metrics{request_type="waiting"} ×1 series"#
    );
    assert_eq!(
        pod.read.running.as_deref(),
        Some(r#"nv_trt_llm_request_metrics{request_type="scheduled"} ×1 series"#)
    );
    // An older backend without the `waiting` type, or another model picked:
    // Triton's own queue.
    let old: String = TRITON_TRT_LLM
        .lines()
        .filter(|l| !l.contains(r#"request_type="waiting""#))
        .map(|l| format!("{l}\n"))
        .collect();
    let (pod, _) = source(Engine::Triton, None)
        .parse_pod("t", &old)
        .expect("parses");
    assert_eq!(
        pod.read.waiting,
        "nv_inference_pending_request_count ×2 series"
    );
    let (pod, _) = source(Engine::Triton, Some("ensemble"))
        .parse_pod("t", TRITON_TRT_LLM)
        .expect("parses");
    assert_eq!((pod.waiting, pod.running), (0.0, None));
}

#[test]
fn the_series_read_are_in_the_explain_json_next_to_the_old_fields() {
    let (pod, _) = source(Engine::Sglang, None)
        .parse_pod("http://10.0.0.1:30000/metrics", SGLANG_DP_ATTENTION)
        .expect("parses");
    let json = serde_json::to_value(&pod).expect("serializes");
    assert_eq!(json["target"], "http://10.0.0.1:30000/metrics");
    assert_eq!(json["waiting"], 20.0);
    assert_eq!(json["running"], 8.0);
    assert_eq!(json["kvCacheUsage"], 0.5);
    assert_eq!(
        json["read"]["waiting"],
        "sglang:num_queue_reqs ×2 groups (tp_rank 0,4)"
    );
    assert_eq!(
        json["read"]["running"],
        "sglang:num_running_reqs ×2 groups (tp_rank 0,4)"
    );
    // A reading built elsewhere (the simulator) has no `read` at all.
    let bare = PodReading {
        read: SeriesRead::default(),
        ..pod
    };
    assert!(
        serde_json::to_value(&bare)
            .expect("json")
            .get("read")
            .is_none()
    );
}

#[test]
fn token_counters_are_read_where_the_engine_has_them() {
    // (engine, body, generated, prompt): a bad token counter costs only the
    // token unit, never the pod's reading.
    let cases: [(Engine, &str, Option<f64>, Option<f64>); 5] = [
        (
            Engine::Vllm,
            "vllm:num_requests_waiting{engine=\"0\"} 1\n\
             vllm:generation_tokens_total{engine=\"0\"} 100\n\
             vllm:generation_tokens_total{engine=\"1\"} 50\n\
             vllm:generation_tokens_created{engine=\"0\"} 1.7e9\n\
             vllm:prompt_tokens_total{engine=\"0\"} 900\n",
            Some(150.0),
            Some(900.0),
        ),
        (
            Engine::Vllm,
            "vllm:num_requests_waiting 1\nvllm:prompt_tokens_total NaN\n\
             vllm:generation_tokens_total 7\n",
            Some(7.0),
            None,
        ),
        (Engine::Vllm, "vllm:num_requests_waiting 1\n", None, None),
        (
            // client_python's OpenMetrics escaping writes `_` for `:`.
            Engine::Sglang,
            "sglang:num_queue_reqs 0\nsglang_generation_tokens_total 12\n\
             sglang_prompt_tokens_total 34\n",
            Some(12.0),
            Some(34.0),
        ),
        (
            Engine::Tgi,
            "tgi_queue_size 0\ntgi_batch_current_size 1\n\
             tgi_request_generated_tokens_sum 99\n",
            None,
            None,
        ),
    ];
    for (engine, body, generated, prompt) in cases {
        let (pod, _) = source(engine, None)
            .parse_pod("t", body)
            .unwrap_or_else(|e| panic!("{engine}: {e}"));
        assert_eq!(
            (pod.generation_tokens_total, pod.prompt_tokens_total),
            (generated, prompt),
            "{engine}: {body}"
        );
    }
}
