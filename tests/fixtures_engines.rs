//! The non-vLLM fixtures: SGLang / Triton / TGI expositions of a `PodState`, the fake
//! dcgm-exporter, and the real-Prometheus harness scraping them.
//!
//! Golden snippets are written from `shared/reference/signals.md` §3–6 (same values, our labels
//! where the fake's differ: GPU UUIDs, TGI's failure reason), except where the engines' own
//! metric code wrote them: `tests/golden/` holds bodies SGLang 0.5.23's collectors and vLLM
//! 0.33.0's `PrometheusStatLogger` printed (`tests/golden/generate/generate.sh`), and the fakes
//! must reproduce their engine families line for line. The second half of the file puts those
//! bodies and the fakes behind the real server and a real Prometheus: each engine counted as
//! upstream emits it (`engines_are_counted_as_upstream_emits_them_through_the_server`).

mod common;

use std::time::{Duration, Instant};

use backlog_scaler::fake::{
    DCGM_FB_TOTAL_MIB, DcgmGpu, EngineKind, FakeDcgmExporter, FakeVllmPod, FinishReason, ModelLoad,
    PodState, PriorityLoad, SGLANG_MAX_TOTAL_NUM_TOKENS, TGI_DURATION_BUCKETS,
    TGI_MAX_BATCH_TOTAL_TOKENS, VLLM_033_CONTENT_TYPE, dcgm_gpu_uuid, engine_content_type,
    render_dcgm_metrics, render_dcgm_metrics_old_namespace, render_engine_metrics,
};
use backlog_scaler::source::prom_text::{Sample, parse_all};
use common::prometheus::{JOB, PrometheusServer};

const M: &str = "meta-llama/Llama-3.1-8B-Instruct";

/// Parse `body`, insisting on a clean parse.
fn parse<'a>(kind: &str, body: &'a str) -> Vec<Sample<'a>> {
    let (samples, stats) = parse_all(body);
    assert_eq!(
        stats.malformed_lines, 0,
        "{kind}: malformed line {:?}\n{body}",
        stats.first_error
    );
    assert!(!samples.is_empty(), "{kind}: no samples");
    samples
}

/// The values of every sample called `name` carrying all of `labels`.
fn values(samples: &[Sample<'_>], name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.label(k).is_some_and(|got| got == *v))
        })
        .map(|s| s.value)
        .collect()
}

/// The one sample called `name` with `labels`.
fn value(samples: &[Sample<'_>], name: &str, labels: &[(&str, &str)]) -> f64 {
    match values(samples, name, labels).as_slice() {
        [v] => *v,
        other => panic!("{name}{labels:?}: expected one sample, got {other:?}"),
    }
}

/// A pod with a queue, a batch, and four finished requests (two ok, one aborted, one failed).
fn driven_state() -> PodState {
    let mut s = PodState::with_start_time(1_756_304_599.12);
    s.set_load(
        M,
        ModelLoad {
            waiting: 5.0,
            running: 12.0,
            kv_cache_usage: 0.625,
        },
    );
    s.record_request(M, 0.3, 2.5, 200, 40);
    s.record_request(M, 0.7, 4.0, 500, 60);
    s.record_finished(M, 0, FinishReason::Abort, 1.5, 1.5, 100, 1);
    s.record_finished(M, 0, FinishReason::Error, 0.2, 0.4, 50, 2);
    s.gpu_utilization = 0.5;
    s.triton_histogram_latencies = true;
    s
}

#[test]
fn every_engine_renders_and_parses_cleanly_with_the_driven_values() {
    let state = driven_state();
    for kind in EngineKind::ALL {
        let body = render_engine_metrics(kind, &state);
        parse(kind.as_str(), &body);
        // Only vLLM runs prometheus_client in single-process mode.
        assert_eq!(
            body.contains("_created"),
            kind == EngineKind::Vllm,
            "{kind}"
        );
    }

    let body = render_engine_metrics(EngineKind::Vllm, &state);
    let s = parse("vllm", &body);
    let m = [("model_name", M)];
    assert_eq!(value(&s, "vllm:num_requests_waiting", &m), 5.0);
    assert_eq!(value(&s, "vllm:num_requests_running", &m), 12.0);
    assert_eq!(value(&s, "vllm:kv_cache_usage_perc", &m), 0.625);
    assert_eq!(value(&s, "vllm:time_to_first_token_seconds_count", &m), 4.0);

    let body = render_engine_metrics(EngineKind::Sglang, &state);
    let s = parse("sglang", &body);
    let m = [("model_name", M), ("engine_type", "unified")];
    assert_eq!(value(&s, "sglang:num_queue_reqs", &m), 5.0);
    assert_eq!(value(&s, "sglang:num_running_reqs", &m), 12.0);
    assert_eq!(value(&s, "sglang:token_usage", &m), 0.625);
    assert_eq!(
        value(&s, "sglang:num_used_tokens", &m),
        (0.625 * SGLANG_MAX_TOTAL_NUM_TOKENS).round()
    );
    assert_eq!(
        value(&s, "sglang:time_to_first_token_seconds_count", &m),
        4.0
    );
    assert_eq!(value(&s, "sglang:time_to_first_token_seconds_sum", &m), 2.7);
    assert_eq!(value(&s, "sglang:num_requests_total", &m), 3.0);
    assert_eq!(value(&s, "sglang:num_aborted_requests_total", &m), 1.0);
    assert_eq!(value(&s, "sglang:prompt_tokens_total", &m), 850.0);
    assert_eq!(value(&s, "sglang:generation_tokens_total", &m), 103.0);

    let body = render_engine_metrics(EngineKind::Triton, &state);
    let s = parse("triton", &body);
    let m = [("model", M), ("version", "1")];
    assert_eq!(value(&s, "nv_inference_pending_request_count", &m), 5.0);
    assert_eq!(value(&s, "nv_inference_request_success", &m), 2.0);
    let failure = |reason| {
        value(
            &s,
            "nv_inference_request_failure",
            &[("model", M), ("reason", reason)],
        )
    };
    assert_eq!(failure("CANCELED"), 1.0);
    assert_eq!(failure("BACKEND"), 1.0);
    assert_eq!(failure("REJECTED"), 0.0);
    assert_eq!(value(&s, "nv_inference_queue_duration_us", &m), 2_700_000.0);
    assert_eq!(
        value(&s, "nv_inference_request_duration_us", &m),
        8_400_000.0
    );
    assert_eq!(
        value(&s, "nv_inference_first_response_histogram_ms_count", &m),
        4.0
    );
    let le = |b| {
        value(
            &s,
            "nv_inference_first_response_histogram_ms_bucket",
            &[("model", M), ("le", b)],
        )
    };
    assert_eq!(
        (le("100"), le("500"), le("2000"), le("+Inf")),
        (0.0, 2.0, 4.0, 4.0)
    );
    assert_eq!(
        value(&s, "nv_gpu_utilization", &[("gpu_uuid", &dcgm_gpu_uuid(0))]),
        0.5
    );

    let body = render_engine_metrics(EngineKind::Tgi, &state);
    let s = parse("tgi", &body);
    assert_eq!(value(&s, "tgi_queue_size", &[]), 5.0);
    assert_eq!(value(&s, "tgi_batch_current_size", &[]), 12.0);
    assert_eq!(
        value(&s, "tgi_batch_current_max_tokens", &[]),
        0.625 * TGI_MAX_BATCH_TOTAL_TOKENS
    );
    assert_eq!(value(&s, "tgi_request_count", &[]), 4.0);
    assert_eq!(value(&s, "tgi_request_success", &[]), 2.0);
    assert_eq!(value(&s, "tgi_request_failure", &[("err", "dropped")]), 1.0);
    assert_eq!(
        value(&s, "tgi_request_failure", &[("err", "generation")]),
        1.0
    );
    assert_eq!(value(&s, "tgi_request_queue_duration_count", &[]), 4.0);
    assert_eq!(value(&s, "tgi_request_input_length_sum", &[]), 850.0);
    assert!(s.iter().all(|s| s.label("model_name").is_none()));
}

#[test]
fn ttft_observations_are_rebucketed_per_engine() {
    let mut state = PodState::with_start_time(1.7e9);
    state.triton_histogram_latencies = true;
    for ttft in [0.05, 0.15, 0.45, 0.6, 0.75, 3.0] {
        state.record_request(M, ttft, ttft + 1.0, 100, 10);
    }
    // Cumulative count at `le` for each engine's TTFT-like histogram.
    let check = |kind: EngineKind, bucket: &str, extra: &[(&str, &str)], want: &[(&str, f64)]| {
        let body = render_engine_metrics(kind, &state);
        let s = parse(kind.as_str(), &body);
        for (le, n) in want {
            let mut labels = extra.to_vec();
            labels.push(("le", le));
            assert_eq!(value(&s, bucket, &labels), *n, "{kind} le={le}");
        }
    };
    check(
        EngineKind::Vllm,
        "vllm:time_to_first_token_seconds_bucket",
        &[("model_name", M)],
        &[
            ("0.06", 1.0),
            ("0.25", 2.0),
            ("0.5", 3.0),
            ("0.75", 5.0),
            ("5.0", 6.0),
        ],
    );
    check(
        EngineKind::Sglang,
        "sglang:time_to_first_token_seconds_bucket",
        &[("model_name", M)],
        &[
            ("0.1", 1.0),
            ("0.2", 2.0),
            ("0.4", 2.0),
            ("0.6", 4.0),
            ("0.8", 5.0),
            ("2.0", 5.0),
            ("4.0", 6.0),
        ],
    );
    check(
        EngineKind::Triton,
        "nv_inference_first_response_histogram_ms_bucket",
        &[("model", M)],
        &[("100", 1.0), ("500", 3.0), ("2000", 5.0), ("5000", 6.0)],
    );
    // TGI has no TTFT: the fake's TTFT is its queue time.
    check(
        EngineKind::Tgi,
        "tgi_request_queue_duration_bucket",
        &[],
        &[
            ("0.0656840835571289", 1.0),
            ("0.14778918800354002", 1.0),
            ("0.22168378200531003", 2.0),
            ("0.49878850951194753", 3.0),
            ("0.7481827642679213", 4.0),
            ("1.122274146401882", 5.0),
            ("3.787675244106352", 6.0),
        ],
    );
}

#[test]
fn sglang_golden_matches_signals_md() {
    let model = "Qwen/Qwen3-8B";
    let mut state = PodState::with_start_time(1.7e9);
    state.set_load(
        model,
        ModelLoad {
            waiting: 0.0,
            running: 7.0,
            kv_cache_usage: 0.0,
        },
    );
    let empty_tokenizer = render_engine_metrics(EngineKind::Sglang, &state);
    assert!(
        empty_tokenizer.starts_with("# HELP sglang:num_running_reqs "),
        "tokenizer families appear only after the first request:\n{empty_tokenizer}"
    );
    assert_eq!(
        render_engine_metrics(EngineKind::Sglang, &PodState::with_start_time(1.7e9)),
        ""
    );

    state.record_request(model, 0.15, 1.0, 8_128_902, 1);
    let body = render_engine_metrics(EngineKind::Sglang, &state);

    // signals.md §3's example lists 0.1, 0.2 and +Inf; the real body has every bound, and
    // SGLang 0.5.23 adds `is_streaming` (tests/golden/sglang-0.5.23-*.txt).
    let ttft = r#"# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{engine_type="unified",is_streaming="false",model_name="Qwen/Qwen3-8B"} 0.15
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="0.1",model_name="Qwen/Qwen3-8B"} 0.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="0.2",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="0.4",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="0.6",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="0.8",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="1.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="2.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="4.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="6.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="8.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="10.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="20.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="40.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="60.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="80.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="100.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="200.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="400.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="+Inf",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_count{engine_type="unified",is_streaming="false",model_name="Qwen/Qwen3-8B"} 1.0
# HELP "#;
    let running = r#"# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 7.0
# HELP sglang:num_queue_reqs "#;
    let prompt = r#"# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{engine_type="unified",is_streaming="false",model_name="Qwen/Qwen3-8B"} 8.128902e+06
"#;
    for want in [ttft, running, prompt] {
        assert!(body.contains(want), "missing\n{want}\nin\n{body}");
    }
    assert!(body.starts_with(ttft));
    // Multiprocess mode: no `_created`, no default collectors; the mode-less gauge has a pid.
    assert!(!body.contains("_created") && !body.contains("python_") && !body.contains("process_"));
    assert!(body.contains(
        r#"sglang:num_retracted_reqs{engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pid="2817",pp_rank="0",tp_rank="0"} 0.0"#
    ));
    // Every histogram family starts with `_sum`.
    let lines: Vec<&str> = body.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("# TYPE ") && l.ends_with(" histogram") {
            assert!(lines[i + 1].contains("_sum{"), "{}", lines[i + 1]);
        }
    }
    assert_eq!(
        render_engine_metrics(EngineKind::Sglang, &state),
        body,
        "deterministic"
    );
}

#[test]
fn sglang_tensor_parallel_repeats_scheduler_gauges_not_tokenizer_series() {
    let mut state = PodState::with_start_time(1.7e9);
    let load = ModelLoad {
        waiting: 9.0,
        running: 7.0,
        kv_cache_usage: 0.5,
    };
    state.set_load(M, load.clone());
    state.record_request(M, 0.3, 1.0, 10, 5);
    state.tensor_parallel = 4;
    // SGLang 0.5.23 logs from attention-TP rank 0 only...
    let body = render_engine_metrics(EngineKind::Sglang, &state);
    let s = parse("sglang tp=4", &body);
    assert_eq!(
        values(&s, "sglang:num_queue_reqs", &[("model_name", M)]),
        [9.0]
    );
    // ...unless every scheduler logs.
    state.sglang.metrics_for_all_schedulers = true;
    let body = render_engine_metrics(EngineKind::Sglang, &state);
    let s = parse("sglang tp=4", &body);
    let queue = values(&s, "sglang:num_queue_reqs", &[("model_name", M)]);
    assert_eq!(queue, [9.0; 4], "one identical series per TP rank");
    let ranks: Vec<String> = s
        .iter()
        .filter(|s| s.name == "sglang:num_queue_reqs")
        .filter_map(|s| s.label("tp_rank").map(|r| r.into_owned()))
        .collect();
    assert_eq!(ranks, ["0", "1", "2", "3"]);
    // A scraper that sums over tp_rank would read 36 queued requests instead of 9.
    assert_eq!(queue.iter().sum::<f64>(), 36.0);
    assert_eq!(values(&s, "sglang:num_requests_total", &[]), [1.0]);
    assert_eq!(
        values(&s, "sglang:time_to_first_token_seconds_count", &[]),
        [1.0]
    );

    // Data parallel on top: `dp_rank` joins the scheduler labels; every process has its own pid.
    state.set_engine_load(M, 1, load);
    let body = render_engine_metrics(EngineKind::Sglang, &state);
    let s = parse("sglang dp=2 tp=4", &body);
    assert_eq!(
        values(&s, "sglang:num_queue_reqs", &[("dp_rank", "1")]),
        [9.0; 4]
    );
    assert!(body.contains(
        r#"sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",moe_ep_rank="0",pp_rank="0",tp_rank="3"} 7.0"#
    ));
    let mut pids: Vec<String> = s
        .iter()
        .filter(|s| s.name == "sglang:num_retracted_reqs")
        .filter_map(|s| s.label("pid").map(|p| p.into_owned()))
        .collect();
    pids.sort();
    pids.dedup();
    assert_eq!(pids.len(), 8);
    assert_eq!(values(&s, "sglang:num_requests_total", &[]), [1.0]);

    // Neither vLLM nor Triton multiply per-model series by TP; Triton lists each GPU.
    let vllm = render_engine_metrics(EngineKind::Vllm, &state);
    let s = parse("vllm", &vllm);
    assert_eq!(values(&s, "vllm:num_requests_waiting", &[]), [9.0, 9.0]);
    let triton = render_engine_metrics(EngineKind::Triton, &state);
    let s = parse("triton", &triton);
    assert_eq!(
        values(&s, "nv_inference_pending_request_count", &[]),
        [18.0]
    );
    assert_eq!(values(&s, "nv_gpu_utilization", &[]).len(), 4);
}

#[test]
fn triton_golden_matches_signals_md() {
    let mut state = PodState::with_start_time(1.7e9);
    state.set_load("simple", ModelLoad::default());
    let m = state.model_mut("simple");
    *m.success_mut(FinishReason::Stop) = 161.0;
    m.ttft.set(&[], 0.01111);
    state.gpu_utilization = 0.87;
    let plain = render_engine_metrics(EngineKind::Triton, &state);
    assert!(
        !plain.contains("nv_inference_first_response_histogram_ms"),
        "the histogram is opt-in"
    );
    state.triton_histogram_latencies = true;
    state
        .model_mut("simple")
        .engine_histograms
        .triton_first_response_ms
        .set(&[8, 20, 5, 3, 1], 10771.0);
    let body = render_engine_metrics(EngineKind::Triton, &state);
    let uuid = dcgm_gpu_uuid(0);
    let snippets = [
        "# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model=\"simple\",version=\"1\"} 161
"
        .to_owned(),
        "# HELP nv_inference_queue_duration_us Cumulative inference queuing duration in microseconds (includes cached requests)
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{model=\"simple\",version=\"1\"} 11110
"
        .to_owned(),
        "# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model=\"simple\",version=\"1\"} 0
"
        .to_owned(),
        format!(
            "# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{{gpu_uuid=\"{uuid}\"}} 0.87
"
        ),
        // signals.md §5 shows le="100" and +Inf; the real body has every bound.
        "# HELP nv_inference_first_response_histogram_ms Duration from request to first response in milliseconds
# TYPE nv_inference_first_response_histogram_ms histogram
nv_inference_first_response_histogram_ms_count{model=\"simple\",version=\"1\"} 37
nv_inference_first_response_histogram_ms_sum{model=\"simple\",version=\"1\"} 10771
nv_inference_first_response_histogram_ms_bucket{model=\"simple\",version=\"1\",le=\"100\"} 8
nv_inference_first_response_histogram_ms_bucket{model=\"simple\",version=\"1\",le=\"500\"} 28
nv_inference_first_response_histogram_ms_bucket{model=\"simple\",version=\"1\",le=\"2000\"} 33
nv_inference_first_response_histogram_ms_bucket{model=\"simple\",version=\"1\",le=\"5000\"} 36
nv_inference_first_response_histogram_ms_bucket{model=\"simple\",version=\"1\",le=\"+Inf\"} 37
"
        .to_owned(),
    ];
    for want in &snippets {
        assert!(body.contains(want.as_str()), "missing\n{want}\nin\n{body}");
    }
    assert!(body.contains(&format!(
        "nv_gpu_power_usage{{gpu_uuid=\"{uuid}\"}} 557.2\n"
    )));
    assert!(body.contains("nv_gpu_memory_total_bytes{gpu_uuid=\""));
    // prometheus-cpp never writes `.0`, never `_created`; counters, then gauges, then histograms.
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        assert!(!line.ends_with(".0"), "{line}");
    }
    assert!(!body.contains("_created"));
    let kinds: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.rsplit(' ').next())
        .collect();
    let mut sorted = kinds.clone();
    sorted.sort_by_key(|k| match *k {
        "counter" => 0,
        "gauge" => 1,
        _ => 2,
    });
    assert_eq!(kinds, sorted);
    parse("triton", &body);
}

#[test]
fn tgi_golden_matches_signals_md() {
    // signals.md §4's bounds, printed with Rust's `Display`.
    let les: Vec<String> = TGI_DURATION_BUCKETS.iter().map(f64::to_string).collect();
    assert_eq!(
        les[..6],
        [
            "0.00015000000000000001",
            "0.00022500000000000002",
            "0.0003375",
            "0.00050625",
            "0.000759375",
            "0.0011390624999999999"
        ]
    );
    assert_eq!(
        les[32..],
        [
            "64.71598249109837",
            "97.07397373664756",
            "145.61096060497135"
        ]
    );

    let mut state = PodState::with_start_time(1.7e9);
    for _ in 0..41 {
        state.record_request(M, 0.2, 1.4, 100, 30);
    }
    state.record_finished(M, 0, FinishReason::Abort, 5.0, 5.0, 100, 0);
    let mut counts = [0u64; 36];
    counts[24] = 41;
    state
        .model_mut(M)
        .engine_histograms
        .tgi_request_duration
        .set(&counts, 57.213);
    let body = render_engine_metrics(EngineKind::Tgi, &state);

    // The example's failure is `validation`; the fake's abort maps to `dropped`.
    let head = "# HELP tgi_request_count Total number of requests
# TYPE tgi_request_count counter
tgi_request_count 42

# HELP tgi_request_success Number of successful requests
# TYPE tgi_request_success counter
tgi_request_success 41

# TYPE tgi_request_failure counter
tgi_request_failure{err=\"dropped\"} 1

# HELP tgi_queue_size Current queue size
# TYPE tgi_queue_size gauge
tgi_queue_size 0

";
    assert!(body.starts_with(head), "{body}");
    let duration_head = "# HELP tgi_request_duration Total time spent processing the request
# TYPE tgi_request_duration histogram
tgi_request_duration_bucket{le=\"0.00015000000000000001\"} 0
";
    let duration_tail = "tgi_request_duration_bucket{le=\"145.61096060497135\"} 41
tgi_request_duration_bucket{le=\"+Inf\"} 41
tgi_request_duration_sum 57.213
tgi_request_duration_count 41

";
    assert!(
        body.contains(duration_head) && body.contains(duration_tail),
        "{body}"
    );
    // A blank line after every family, the last one included.
    assert_eq!(
        body.matches("# TYPE ").count(),
        body.matches("\n\n").count()
    );
    assert!(body.ends_with("\n\n"));
    assert!(!body.contains(':'), "TGI names have no colon");
    parse("tgi", &body);

    // Before any request only the gauges exist.
    let idle = render_engine_metrics(EngineKind::Tgi, &PodState::with_start_time(1.7e9));
    assert!(idle.starts_with("# HELP tgi_queue_size Current queue size\n"));
    assert!(!idle.contains("histogram") && !idle.contains("counter"));
}

fn two_gpus() -> Vec<DcgmGpu> {
    let mut g0 = DcgmGpu::new(
        0,
        87,
        Some(("inference", "vllm-llama-7f9d8c6b5-x2k4p", "vllm")),
    );
    g0.gr_engine_active = 0.853211;
    g0.power_watts = 612.345;
    vec![g0, DcgmGpu::new(1, 0, None)]
}

#[test]
fn dcgm_golden_matches_signals_md() {
    let (u0, u1) = (dcgm_gpu_uuid(0), dcgm_gpu_uuid(1));
    let body = render_dcgm_metrics(&two_gpus(), "gpu-node-01");
    let g0 = format!(
        "gpu=\"0\",UUID=\"{u0}\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu-node-01\",DCGM_FI_DRIVER_VERSION=\"550.90.07\",container=\"vllm\",namespace=\"inference\",pod=\"vllm-llama-7f9d8c6b5-x2k4p\""
    );
    let g1 = format!(
        "gpu=\"1\",UUID=\"{u1}\",pci_bus_id=\"00000000:2A:00.0\",device=\"nvidia1\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu-node-01\",DCGM_FI_DRIVER_VERSION=\"550.90.07\""
    );
    let util = format!(
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{{g0}}} 87
DCGM_FI_DEV_GPU_UTIL{{{g1}}} 0
# HELP "
    );
    let active = format!(
        "# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{g0}}} 0.853211
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{g1}}} 0.000000
"
    );
    let power = format!(
        "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{{{g0}}} 612.345000
"
    );
    for want in [&util, &active, &power] {
        assert!(body.contains(want.as_str()), "missing\n{want}\nin\n{body}");
    }
    assert!(body.starts_with("# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).\n"));
    assert!(!body.contains("\n\n"));
    assert!(
        body.lines()
            .filter(|l| !l.starts_with('#'))
            .all(|l| !l.contains(", ")),
        "no space after commas"
    );

    let s = parse("dcgm", &body);
    for family in [
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_DEV_POWER_USAGE",
    ] {
        assert_eq!(values(&s, family, &[]).len(), 2, "{family}");
    }
    let fb = |name, gpu| value(&s, name, &[("gpu", gpu)]);
    for gpu in ["0", "1"] {
        assert_eq!(
            fb("DCGM_FI_DEV_FB_USED", gpu)
                + fb("DCGM_FI_DEV_FB_FREE", gpu)
                + fb("DCGM_FI_DEV_FB_RESERVED", gpu),
            DCGM_FB_TOTAL_MIB as f64
        );
    }
    assert!(
        s.iter()
            .filter(|s| s.label("gpu").as_deref() == Some("1"))
            .all(|s| s.label("pod").is_none() && s.label("namespace").is_none())
    );

    // UUIDs: deterministic, distinct, shaped like NVML's.
    let uuids: Vec<String> = (0..8).map(dcgm_gpu_uuid).collect();
    assert_eq!(uuids[0], u0);
    let mut unique = uuids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 8);
    for u in &uuids {
        let parts: Vec<usize> = u
            .trim_start_matches("GPU-")
            .split('-')
            .map(str::len)
            .collect();
        assert!(u.starts_with("GPU-") && parts == [8, 4, 4, 4, 12], "{u}");
    }

    // `--no-hostname`.
    let bare = render_dcgm_metrics(&two_gpus(), "");
    assert!(
        !bare.contains("Hostname=")
            && bare.contains("modelName=\"NVIDIA H100 80GB HBM3\",DCGM_FI_DRIVER_VERSION=")
    );
}

async fn get(url: &str) -> reqwest::Response {
    reqwest::get(url).await.expect("scrape")
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

#[tokio::test]
async fn fake_pod_serves_each_engine_with_its_content_type() {
    let pod = FakeVllmPod::start_with_state(driven_state())
        .await
        .expect("pod");
    assert_eq!(pod.engine(), EngineKind::Vllm);
    for (kind, content_type) in [
        (EngineKind::Vllm, "text/plain; version=0.0.4; charset=utf-8"),
        (
            EngineKind::Sglang,
            "text/plain; version=0.0.4; charset=utf-8",
        ),
        (EngineKind::Triton, "text/plain; charset=utf-8"),
        (EngineKind::Tgi, "text/plain; charset=utf-8"),
    ] {
        pod.set_engine(kind);
        assert_eq!(kind.content_type(), content_type);
        let response = get(&pod.metrics_url()).await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "content-type"), content_type, "{kind}");
        let body = response.text().await.expect("body");
        assert_eq!(body, pod.render(), "{kind}");
        assert_eq!(body, render_engine_metrics(kind, &pod.state()));
    }
    pod.set_status_override(Some(503));
    assert_eq!(get(&pod.metrics_url()).await.status(), 503);
    assert_eq!(pod.scrapes(), 5);
}

#[tokio::test]
async fn fake_dcgm_exporter_serves_reshuffled_families_and_stops_and_restarts() {
    let mut dcgm = FakeDcgmExporter::start().await.expect("dcgm");
    assert!(dcgm.metrics_url().starts_with("http://127.0.0.1:"));
    assert_eq!(
        get(&dcgm.metrics_url()).await.text().await.expect("body"),
        ""
    );
    for gpu in two_gpus() {
        let pod = gpu.pod.clone();
        dcgm.set_gpu(
            gpu.index,
            gpu.util_percent,
            pod.as_ref()
                .map(|p| (p.namespace.as_str(), p.pod.as_str(), p.container.as_str())),
        );
        dcgm.update_gpu(gpu.index, |g| *g = gpu.clone());
    }
    assert_eq!(
        dcgm.render(),
        render_dcgm_metrics(&two_gpus(), "gpu-node-01")
    );

    let first = get(&dcgm.metrics_url()).await;
    assert_eq!(header(&first, "content-type"), "text/plain; charset=utf-8");
    assert_eq!(header(&first, "x-content-type-options"), "nosniff");
    let first = first.text().await.expect("body");
    let second = get(&dcgm.metrics_url()).await.text().await.expect("body");
    let families = |b: &str| -> Vec<String> {
        b.lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(str::to_owned)
            .collect()
    };
    assert_ne!(families(&first), families(&second), "Go map order changes");
    let sorted = |b: &str| {
        let mut l: Vec<String> = b.lines().map(str::to_owned).collect();
        l.sort();
        l
    };
    assert_eq!(sorted(&first), sorted(&dcgm.render()));
    assert_eq!(sorted(&second), sorted(&dcgm.render()));
    dcgm.set_shuffle_families(false);
    assert_eq!(
        get(&dcgm.metrics_url()).await.text().await.expect("body"),
        dcgm.render()
    );

    dcgm.set_gpu(0, 12, None);
    dcgm.set_hostname("node-b");
    let body = get(&dcgm.metrics_url()).await.text().await.expect("body");
    assert!(body.contains("Hostname=\"node-b\"") && !body.contains("pod="));
    dcgm.remove_gpu(1);
    assert_eq!(dcgm.gpus().len(), 1);

    let other = get(&format!("http://{}/", dcgm.addr())).await;
    assert_eq!(other.status(), 404);
    assert_eq!(other.text().await.expect("body"), "404 page not found\n");

    dcgm.stop().await;
    assert!(!dcgm.is_running());
    assert!(reqwest::get(dcgm.metrics_url()).await.is_err());
    dcgm.restart().await.expect("restart");
    assert_eq!(get(&dcgm.metrics_url()).await.status(), 200);
    assert_eq!(dcgm.scrapes(), 6);
}

/// Real Prometheus scraping one pod per engine and a dcgm-exporter; PromQL over the results.
#[tokio::test]
async fn real_prometheus_scrapes_fakes_and_computes_ttft_quantile() {
    let started = Instant::now();
    let mut pods = Vec::new();
    for kind in EngineKind::ALL {
        let mut state = PodState::default();
        state.triton_histogram_latencies = true;
        state.set_load(
            M,
            ModelLoad {
                waiting: 3.0,
                running: 8.0,
                kv_cache_usage: 0.5,
            },
        );
        let pod = FakeVllmPod::start_with_state(state).await.expect("pod");
        pod.set_engine(kind);
        pods.push(pod);
    }
    let dcgm = FakeDcgmExporter::start().await.expect("dcgm");
    dcgm.set_gpu(0, 87, Some(("inference", "vllm-0", "vllm")));
    dcgm.set_gpu(1, 0, None);

    let mut targets: Vec<_> = pods
        .iter()
        .zip(EngineKind::ALL)
        .map(|(pod, kind)| {
            (
                pod.addr(),
                vec![
                    ("namespace".to_owned(), "inference".to_owned()),
                    ("pod".to_owned(), format!("{kind}-0")),
                ],
            )
        })
        .collect();
    // No target labels for the exporter: honor_labels keeps its own pod/namespace.
    targets.push((dcgm.addr(), Vec::new()));
    let prom = PrometheusServer::start_with_labels(&targets, Duration::from_secs(1)).await;
    prom.wait_for_targets_up(targets.len(), Duration::from_secs(15))
        .await;

    let waiting = prom
        .wait_for_series(
            "vllm:num_requests_waiting{pod=\"vllm-0\"}",
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(waiting.len(), 1);
    let w = &waiting[0];
    assert_eq!(w.value, 3.0);
    assert_eq!(w.label("namespace"), Some("inference"));
    assert_eq!(w.label("job"), Some(JOB));
    assert_eq!(w.label("model_name"), Some(M));
    assert_eq!(w.label("engine"), Some("0"));
    assert_eq!(
        w.label("instance"),
        Some(pods[0].addr().to_string().as_str())
    );
    for (query, want) in [
        ("sglang:num_queue_reqs{pod=\"sglang-0\"}", 3.0),
        ("nv_inference_pending_request_count{pod=\"triton-0\"}", 3.0),
        ("tgi_queue_size{pod=\"tgi-0\"}", 3.0),
        (
            "DCGM_FI_DEV_GPU_UTIL{namespace=\"inference\",pod=\"vllm-0\"}",
            87.0,
        ),
    ] {
        let got = prom.wait_for_series(query, Duration::from_secs(5)).await;
        assert_eq!(got.len(), 1, "{query}: {got:?}");
        assert_eq!(got[0].value, want, "{query}");
    }
    let idle = prom.query_vector("DCGM_FI_DEV_GPU_UTIL{gpu=\"1\"}").await;
    assert_eq!(idle.len(), 1);
    assert_eq!(idle[0].label("pod"), None, "an unassigned GPU has no pod");
    assert_eq!(idle[0].label("Hostname"), Some("gpu-node-01"));
    // The GPU joins to its pod's engine series on (namespace, pod).
    let joined = prom
        .query_vector(
            "max by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL) and on (namespace, pod) vllm:num_requests_waiting",
        )
        .await;
    assert_eq!(joined.len(), 1);
    assert_eq!(joined[0].value, 87.0);

    // Drive TTFTs of 0.6 s, inside vLLM's (0.5, 0.75] bucket, until rate() sees them.
    let quantile =
        |metric: &str| format!("histogram_quantile(0.95, sum by (le) (rate({metric}[30s])))");
    let checks = [
        // (query, lower, upper, interpolated expectation)
        (
            quantile("vllm:time_to_first_token_seconds_bucket"),
            0.5,
            0.75,
            0.7375,
        ),
        (
            quantile("sglang:time_to_first_token_seconds_bucket"),
            0.4,
            0.6,
            0.59,
        ),
        (
            quantile("nv_inference_first_response_histogram_ms_bucket"),
            500.0,
            2000.0,
            1925.0,
        ),
        (
            quantile("tgi_request_queue_duration_bucket"),
            0.49878850951194753,
            0.7481827642679213,
            0.49878850951194753 + 0.95 * (0.7481827642679213 - 0.49878850951194753),
        ),
    ];
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut results = Vec::new();
    loop {
        for pod in &pods {
            pod.update(|s| {
                for _ in 0..4 {
                    s.record_request(M, 0.6, 1.5, 120, 16);
                }
            });
        }
        results.clear();
        for (query, ..) in &checks {
            results.push(prom.query_vector(query).await.first().map(|s| s.value));
        }
        let done = checks
            .iter()
            .zip(&results)
            .all(|((_, lo, hi, _), got)| got.is_some_and(|v| v > *lo && v <= *hi));
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "quantiles never settled: {results:?}\n{}",
            prom.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for ((query, _, _, want), got) in checks.iter().zip(&results) {
        let got = got.unwrap_or(f64::NAN);
        assert!(
            (got - want).abs() < 1e-6 * want.abs().max(1.0),
            "{query}: {got} vs {want}"
        );
    }

    // Prometheus found nothing to complain about in any exposition.
    let self_metrics = get(&format!("{}/metrics", prom.url()))
        .await
        .text()
        .await
        .expect("prometheus /metrics");
    let (s, _) = parse_all(&self_metrics);
    for name in [
        "prometheus_target_scrapes_sample_duplicate_timestamp_total",
        "prometheus_target_scrapes_sample_out_of_order_total",
        "prometheus_target_scrapes_sample_out_of_bounds_total",
    ] {
        assert_eq!(value(&s, name, &[]), 0.0, "{name}");
    }
    let up = prom.query_vector("up == 0").await;
    assert!(up.is_empty(), "{up:?}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
}

// ---- Engines as upstream emits them (issue 11 §3) ---------------------------------------------

const QWEN: &str = "Qwen/Qwen3-8B";
const SGLANG_PRIORITY_GOLDEN: &str = include_str!("golden/sglang-0.5.23-priority.txt");
const SGLANG_DP_GOLDEN: &str = include_str!("golden/sglang-0.5.23-dp-attention.txt");
const VLLM_033_GOLDEN: &str = include_str!("golden/vllm-0.33.0-dp2.txt");

/// The `# HELP`/`# TYPE` lines and samples of family `name`, sorted (multiprocess mode orders
/// series by file, i.e. arbitrarily).
fn family_lines(body: &str, name: &str) -> Vec<String> {
    let mut out: Vec<String> = body
        .lines()
        .filter(|l| {
            l.strip_prefix("# HELP ")
                .or_else(|| l.strip_prefix("# TYPE "))
                .unwrap_or(l)
                .split(['{', ' '])
                .next()
                == Some(name)
        })
        .map(str::to_owned)
        .collect();
    out.sort();
    out
}

fn load(waiting: f64, running: f64, kv_cache_usage: f64) -> ModelLoad {
    ModelLoad {
        waiting,
        running,
        kv_cache_usage,
    }
}

/// The golden's priority scheduling: 15 waiting (10 at priority 0, 5 at 5), 10 running.
fn sglang_priority_state() -> PodState {
    let mut state = PodState::with_start_time(1.7e9);
    state.sglang.priority_scheduling = true;
    state.set_load(QWEN, load(15.0, 10.0, 0.4));
    state.model_mut(QWEN).priority_breakdown = vec![
        PriorityLoad {
            priority: 0,
            waiting: 10.0,
            running: 6.0,
        },
        PriorityLoad {
            priority: 5,
            waiting: 5.0,
            running: 4.0,
        },
    ];
    state
}

/// The golden's DP attention: 2 groups × attention-TP 4, EP 8; (12, 5) and (8, 3).
fn sglang_dp_state() -> PodState {
    let mut state = PodState::with_start_time(1.7e9);
    state.tensor_parallel = 4;
    state.sglang.dp_attention = true;
    state.sglang.expert_parallel = 8;
    state.sglang.streaming = true;
    state.set_engine_load(QWEN, 0, load(12.0, 5.0, 0.25));
    state.set_engine_load(QWEN, 1, load(8.0, 3.0, 0.75));
    state
}

/// The golden's vLLM: engine 0 has 3 waiting for capacity and 2 deferred, engine 1 has 5.
fn vllm_033_state() -> PodState {
    let mut state = PodState::with_start_time(1.7e9);
    state.vllm_033 = true;
    state.set_engine_load(M, 0, load(3.0, 4.0, 0.5));
    state.series_mut(M, 0).waiting_deferred = 2.0;
    state.set_engine_load(M, 1, load(5.0, 6.0, 0.25));
    state
}

#[test]
fn fakes_write_the_engines_own_bytes() {
    // SGLang 0.5.23, priority scheduling and DP attention: the scheduler families line for line.
    for (state, golden) in [
        (sglang_priority_state(), SGLANG_PRIORITY_GOLDEN),
        (sglang_dp_state(), SGLANG_DP_GOLDEN),
    ] {
        let body = render_engine_metrics(EngineKind::Sglang, &state);
        for family in [
            "sglang:num_running_reqs",
            "sglang:num_queue_reqs",
            "sglang:token_usage",
        ] {
            let want = family_lines(golden, family);
            assert!(want.len() >= 3, "{family} not in the golden");
            assert_eq!(family_lines(&body, family), want, "{family}");
        }
    }
    // The tokenizer side with `is_streaming`: the golden's streamed request (TTFT 0.15 s, e2e
    // 1 s, 100 prompt and 10 generated tokens).
    let mut state = sglang_dp_state();
    state.record_request(QWEN, 0.15, 1.0, 100, 10);
    let body = render_engine_metrics(EngineKind::Sglang, &state);
    let mut compared = 0;
    for line in SGLANG_DP_GOLDEN
        .lines()
        .filter(|l| l.contains(r#"is_streaming="true""#))
    {
        assert!(
            body.lines().any(|l| l == line),
            "missing {line}\nin\n{body}"
        );
        compared += 1;
    }
    assert!(compared > 40, "TTFT and e2e buckets, counters: {compared}");
    assert!(!body.contains(r#"is_streaming="false""#));

    // vLLM 0.33.0, two data-parallel engines: the gauges, contiguous, byte for byte.
    let block = |body: &str| -> String {
        let start = body
            .find("# HELP vllm:num_requests_running ")
            .expect("running gauge");
        let end = body
            .find("# HELP vllm:prefix_cache_queries_total ")
            .expect("first counter");
        body[start..end].to_owned()
    };
    let state = vllm_033_state();
    let body = render_engine_metrics(EngineKind::Vllm, &state);
    assert_eq!(block(&body), block(VLLM_033_GOLDEN));
    assert!(block(&body).contains(r#"reason="deferred"} 2.0"#));
    assert!(!body.contains("gpu_cache_usage_perc") && !VLLM_033_GOLDEN.contains("gpu_cache"));
    assert_eq!(
        engine_content_type(EngineKind::Vllm, &state),
        VLLM_033_CONTENT_TYPE
    );
    // The default fake is still the older release: no by-reason gauge.
    let mut older = state.clone();
    older.vllm_033 = false;
    assert!(!render_engine_metrics(EngineKind::Vllm, &older).contains("by_reason"));
}

/// Triton with the TensorRT-LLM backend: 7 waiting, 12 in flight, a 62.5 % KV pool.
fn triton_trt_llm_state() -> PodState {
    let mut state = PodState::with_start_time(1.7e9);
    state.triton_trt_llm = true;
    state.set_load("tensorrt_llm", load(7.0, 12.0, 0.625));
    state
}

#[test]
fn triton_trt_llm_and_dcgm_variants_have_the_upstream_label_sets() {
    // `custom_metrics_reporter.cc`'s families through prometheus-cpp (`std::map` label order,
    // `%.16g` values); Triton's own queue stays empty.
    let body = render_engine_metrics(EngineKind::Triton, &triton_trt_llm_state());
    for want in [
        "# HELP nv_trt_llm_request_metrics TRT LLM request metrics\n# TYPE nv_trt_llm_request_metrics gauge\nnv_trt_llm_request_metrics{model=\"tensorrt_llm\",request_type=\"active\",version=\"1\"} 12\nnv_trt_llm_request_metrics{model=\"tensorrt_llm\",request_type=\"max\",version=\"1\"} 256\nnv_trt_llm_request_metrics{model=\"tensorrt_llm\",request_type=\"scheduled\",version=\"1\"} 12\nnv_trt_llm_request_metrics{model=\"tensorrt_llm\",request_type=\"context\",version=\"1\"} 0\nnv_trt_llm_request_metrics{model=\"tensorrt_llm\",request_type=\"waiting\",version=\"1\"} 7\n",
        "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"used\",model=\"tensorrt_llm\",version=\"1\"} 4000\n",
        "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\",model=\"tensorrt_llm\",version=\"1\"} 0.625\n",
        "nv_inference_pending_request_count{model=\"tensorrt_llm\",version=\"1\"} 0\n",
        "nv_trt_llm_disaggregated_serving_metrics{disaggregated_serving_type=\"request_count\",model=\"tensorrt_llm\",version=\"1\"} 0\n",
    ] {
        assert!(body.contains(want), "missing\n{want}\nin\n{body}");
    }
    // Custom families follow Triton's own in each type group.
    let pos = |needle: &str| body.find(needle).expect(needle);
    assert!(pos("# TYPE nv_cpu_memory_used_bytes") < pos("# TYPE nv_trt_llm_request_metrics"));
    assert!(pos("# TYPE nv_energy_consumption") < pos("# TYPE nv_trt_llm_disaggregated_serving"));
    parse("triton trt-llm", &body);

    // dcgm-exporter on MIG: the instance labels after `modelName`, no GPU_UTIL for an instance.
    let mig = DcgmGpu::mig(0, 3, "1g.10gb", 0.45, Some(("inference", "vllm-a", "vllm")));
    let whole = DcgmGpu::new(1, 60, Some(("inference", "vllm-c", "vllm")));
    let body = render_dcgm_metrics(&[mig.clone(), whole.clone()], "gpu-node-01");
    let u0 = dcgm_gpu_uuid(0);
    let line = format!(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu=\"0\",UUID=\"{u0}\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"3\",Hostname=\"gpu-node-01\",DCGM_FI_DRIVER_VERSION=\"550.90.07\",container=\"vllm\",namespace=\"inference\",pod=\"vllm-a\"}} 0.450000\n"
    );
    assert!(body.contains(&line), "missing {line}in\n{body}");
    let s = parse("dcgm mig", &body);
    assert_eq!(
        values(&s, "DCGM_FI_DEV_GPU_UTIL", &[]),
        [60.0],
        "none for the instance"
    );
    // `--use-old-namespace`.
    let body = render_dcgm_metrics_old_namespace(&[whole], "gpu-node-01");
    let u1 = dcgm_gpu_uuid(1);
    assert!(body.contains(&format!(
        "DCGM_FI_DEV_GPU_UTIL{{gpu=\"1\",uuid=\"{u1}\",pci_bus_id=\"00000000:2A:00.0\",device=\"nvidia1\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu-node-01\",DCGM_FI_DRIVER_VERSION=\"550.90.07\",container_name=\"vllm\",pod_name=\"vllm-c\",pod_namespace=\"inference\"}} 60\n"
    )));
    assert!(!body.contains("UUID=") && !body.contains(",pod=\""));
}

/// `B` from GetMetrics for a trigger over one pod, `T = 1` and (when the engine has R)
/// `C = 4`: the issue's `B = W + R/4`.
async fn backlog_of(
    client: &mut backlog_scaler::proto::external_scaler_client::ExternalScalerClient<
        tonic::transport::Channel,
    >,
    name: &str,
    engine: &str,
    url: &str,
    extra: &[(&str, &str)],
) -> f64 {
    let mut md = vec![
        ("vllmTargets", url),
        ("engine", engine),
        ("targetBacklogPerReplica", "1"),
    ];
    if engine != "triton" {
        md.push(("runningPerReplica", "4"));
    }
    md.extend_from_slice(extra);
    let object = common::object(name, &md);
    client
        .get_metrics(common::metrics_request(&object, ""))
        .await
        .unwrap_or_else(|s| panic!("{name}: {}", s.message()))
        .into_inner()
        .metric_values[0]
        .metric_value_float
}

/// `/explain`'s entry for trigger `name`.
async fn explained(
    server: &backlog_scaler::api::server::RunningServer,
    name: &str,
) -> serde_json::Value {
    let (status, body) = common::http_get(&format!(
        "http://{}/explain?namespace=default&name={name}",
        server.http_addr
    ))
    .await;
    assert_eq!(status, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    json["triggers"][0].clone()
}

#[tokio::test]
async fn engines_are_counted_as_upstream_emits_them_through_the_server() {
    let server = common::start_server(Default::default()).await;
    let mut client = common::client(&server).await;

    // (trigger, engine, what the pod serves, B). Each fake and each golden body written by the
    // engine's own code; the old reading is in the comment.
    let goldens = [
        ("sglang-priority-golden", SGLANG_PRIORITY_GOLDEN),
        ("sglang-dp-golden", SGLANG_DP_GOLDEN),
        ("vllm-033-golden", VLLM_033_GOLDEN),
    ];
    let cases: [(&str, EngineKind, PodState, Option<&str>, f64); 7] = [
        // Every series summed: W 30, R 20 → 35.
        (
            "sglang-priority",
            EngineKind::Sglang,
            sglang_priority_state(),
            None,
            17.5,
        ),
        (
            "sglang-priority-golden",
            EngineKind::Sglang,
            PodState::default(),
            Some(goldens[0].1),
            17.5,
        ),
        // tp_rank="0" only: W 12, R 5 → 13.25.
        (
            "sglang-dp",
            EngineKind::Sglang,
            sglang_dp_state(),
            None,
            22.0,
        ),
        (
            "sglang-dp-golden",
            EngineKind::Sglang,
            PodState::default(),
            Some(goldens[1].1),
            22.0,
        ),
        // The total (10, deferred included) → 12.5.
        (
            "vllm-033",
            EngineKind::Vllm,
            vllm_033_state(),
            None,
            8.0 + 10.0 / 4.0,
        ),
        (
            "vllm-033-golden",
            EngineKind::Vllm,
            PodState::default(),
            Some(goldens[2].1),
            8.0 + 10.0 / 4.0,
        ),
        // Triton's pending count (0) → 0.
        (
            "triton-trt-llm",
            EngineKind::Triton,
            triton_trt_llm_state(),
            None,
            7.0,
        ),
    ];
    let mut pods = Vec::new();
    for (name, kind, state, body, want) in cases {
        let pod = FakeVllmPod::start_with_state(state).await.expect("pod");
        pod.set_engine(kind);
        pod.set_body_override(body.map(str::to_owned));
        let got = backlog_of(&mut client, name, kind.as_str(), &pod.metrics_url(), &[]).await;
        assert_eq!(got, want, "{name}");
        pods.push(pod);
    }

    // `/explain` says which series were read, next to the numbers it always had.
    let t = explained(&server, "sglang-dp").await;
    let pod = &t["sources"][0]["reading"]["pods"][0];
    assert_eq!(
        (pod["waiting"].as_f64(), pod["running"].as_f64()),
        (Some(20.0), Some(8.0))
    );
    assert_eq!(
        pod["read"]["waiting"],
        "sglang:num_queue_reqs ×2 groups (tp_rank 0,4)"
    );
    assert_eq!(t["components"]["waiting"], 20.0);
    let t = explained(&server, "sglang-priority-golden").await;
    assert_eq!(
        t["sources"][0]["reading"]["pods"][0]["read"]["running"],
        r#"sglang:num_running_reqs{priority=""} ×1 group (tp_rank 0)"#
    );
    let t = explained(&server, "vllm-033").await;
    assert_eq!(
        t["sources"][0]["reading"]["pods"][0]["read"]["waiting"],
        r#"vllm:num_requests_waiting_by_reason{reason="capacity"} ×2 series"#
    );
    let t = explained(&server, "triton-trt-llm").await;
    let pod = &t["sources"][0]["reading"]["pods"][0];
    assert_eq!(
        pod["read"]["waiting"],
        r#"nv_trt_llm_request_metrics{request_type="waiting"} ×1 series"#
    );
    assert_eq!(
        (pod["running"].as_f64(), pod["kvCacheUsage"].as_f64()),
        (Some(12.0), Some(0.625))
    );

    // DCGM on MIG (no GPU_UTIL for an instance) and with `--use-old-namespace`.
    let (mig, old) = dcgm_pair().await;
    let vllm = FakeVllmPod::start().await.expect("pod");
    vllm.set_load(M, load(3.0, 0.0, 0.1));
    let dcgm = format!("{},{}", mig.metrics_url(), old.metrics_url());
    let md = [
        ("dcgmTargets", dcgm.as_str()),
        ("podSelectorRegex", "vllm-.*"),
        ("namespace", "inference"),
        ("gpuBusyPercent", "90"),
    ];
    backlog_of(&mut client, "gpus", "vllm", &vllm.metrics_url(), &md).await;
    let t = explained(&server, "gpus").await;
    assert_eq!(t["components"]["gpuUtilization"], 70.0, "{t}");
    let gpus: Vec<(String, f64, String)> = t["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .filter_map(|s| s["reading"]["gpus"].as_array())
        .flatten()
        .map(|g| {
            (
                g["pod"].as_str().unwrap_or_default().to_owned(),
                g["utilization"].as_f64().unwrap_or(f64::NAN),
                g["read"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        gpus,
        [
            (
                "vllm-a".to_owned(),
                45.0,
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE ×100{pod,namespace} (MIG 1g.10gb, GPU_I_ID 3)"
                    .to_owned()
            ),
            (
                "vllm-b".to_owned(),
                95.0,
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE ×100{pod,namespace} (MIG 1g.10gb, GPU_I_ID 4)"
                    .to_owned()
            ),
            (
                "vllm-c".to_owned(),
                60.0,
                "DCGM_FI_DEV_GPU_UTIL{pod,namespace}".to_owned()
            ),
            (
                "vllm-d".to_owned(),
                80.0,
                "DCGM_FI_DEV_GPU_UTIL{pod_name,pod_namespace}".to_owned()
            ),
        ]
    );
    server.shutdown().await;
}

/// Two dcgm-exporters: one with two MIG instances of GPU 0 (45 % and 95 % busy) and a whole
/// GPU 1 at 60 %, one with `--use-old-namespace` and a GPU at 80 %; plus another namespace's
/// GPU that never counts. Their mean over `vllm-.*` in `inference` is 70.
async fn dcgm_pair() -> (FakeDcgmExporter, FakeDcgmExporter) {
    let mig = FakeDcgmExporter::start().await.expect("dcgm");
    mig.put_gpu(DcgmGpu::mig(
        0,
        3,
        "1g.10gb",
        0.45,
        Some(("inference", "vllm-a", "vllm")),
    ));
    mig.put_gpu(DcgmGpu::mig(
        0,
        4,
        "1g.10gb",
        0.95,
        Some(("inference", "vllm-b", "vllm")),
    ));
    mig.set_gpu(1, 60, Some(("inference", "vllm-c", "vllm")));
    mig.set_gpu(2, 100, Some(("research", "vllm-x", "train")));
    let old = FakeDcgmExporter::start().await.expect("dcgm");
    old.set_use_old_namespace(true);
    old.set_hostname("gpu-node-02");
    old.set_gpu(0, 80, Some(("inference", "vllm-d", "vllm")));
    (mig, old)
}

/// The default PromQL queries over a real Prometheus scraping the same fakes give the numbers
/// the scrape path gives.
#[tokio::test]
async fn default_promql_queries_count_as_the_scrape_path_does() {
    use backlog_scaler::source::Engine;
    use backlog_scaler::source::prometheus::DefaultQueries;

    let states = [
        ("sglang-dp", EngineKind::Sglang, sglang_dp_state()),
        ("sglang-prio", EngineKind::Sglang, sglang_priority_state()),
        ("vllm", EngineKind::Vllm, vllm_033_state()),
        ("triton", EngineKind::Triton, triton_trt_llm_state()),
    ];
    let mut pods = Vec::new();
    let mut targets = Vec::new();
    for (namespace, kind, state) in states {
        let pod = FakeVllmPod::start_with_state(state).await.expect("pod");
        pod.set_engine(kind);
        targets.push((
            pod.addr(),
            vec![
                ("namespace".to_owned(), namespace.to_owned()),
                ("pod".to_owned(), format!("{namespace}-0")),
            ],
        ));
        pods.push(pod);
    }
    let (mig, old) = dcgm_pair().await;
    targets.push((mig.addr(), Vec::new()));
    targets.push((old.addr(), Vec::new()));
    let prom = PrometheusServer::start_with_labels(&targets, Duration::from_secs(1)).await;
    prom.wait_for_targets_up(targets.len(), Duration::from_secs(15))
        .await;
    prom.wait_for_series(
        "DCGM_FI_DEV_GPU_UTIL{pod_name=\"vllm-d\"}",
        Duration::from_secs(10),
    )
    .await;

    let one = |rows: Vec<common::prometheus::PromSample>, what: &str| -> f64 {
        assert_eq!(rows.len(), 1, "{what}: {rows:?}");
        rows[0].value
    };
    for (engine, namespace, waiting, running, replicas) in [
        (Engine::Sglang, "sglang-dp", 20.0, Some(8.0), 1.0),
        (Engine::Sglang, "sglang-prio", 15.0, Some(10.0), 1.0),
        (Engine::Vllm, "vllm", 8.0, Some(10.0), 1.0),
        (Engine::Triton, "triton", 7.0, None, 1.0),
    ] {
        let q = DefaultQueries::new(engine, None, Some(namespace));
        let w = q.waiting();
        let got = prom
            .wait_for_value(&w, Duration::from_secs(10), |v| v == waiting)
            .await;
        assert_eq!(got, waiting, "{w}");
        if let Some(running) = running {
            let r = q.running().expect("running");
            assert_eq!(one(prom.query_vector(&r).await, &r), running, "{r}");
        }
        let n = q.replicas();
        assert_eq!(one(prom.query_vector(&n).await, &n), replicas, "{n}");
    }
    let kv = DefaultQueries::new(Engine::Sglang, None, Some("sglang-dp"))
        .kv_cache()
        .expect("kv");
    assert_eq!(one(prom.query_vector(&kv).await, &kv), 0.5, "{kv}");
    let gpu = DefaultQueries::gpu_util(Some("inference"), Some("vllm-.*"));
    assert_eq!(one(prom.query_vector(&gpu).await, &gpu), 70.0, "{gpu}");
}
