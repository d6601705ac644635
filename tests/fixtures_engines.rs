//! The non-vLLM fixtures: SGLang / Triton / TGI expositions of a `PodState`, the fake
//! dcgm-exporter, and the real-Prometheus harness scraping them.
//!
//! Golden snippets are written from `shared/reference/signals.md` §3–6 (same values, our labels
//! where the fake's differ: GPU UUIDs, TGI's failure reason).

mod common;

use std::time::{Duration, Instant};

use backlog_scaler::fake::{
    DCGM_FB_TOTAL_MIB, DcgmGpu, EngineKind, FakeDcgmExporter, FakeVllmPod, FinishReason, ModelLoad,
    PodState, SGLANG_MAX_TOTAL_NUM_TOKENS, TGI_DURATION_BUCKETS, TGI_MAX_BATCH_TOTAL_TOKENS,
    dcgm_gpu_uuid, render_dcgm_metrics, render_engine_metrics,
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

    // signals.md §3's example lists 0.1, 0.2 and +Inf; the real body has every bound.
    let ttft = r#"# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{engine_type="unified",model_name="Qwen/Qwen3-8B"} 0.15
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="0.1",model_name="Qwen/Qwen3-8B"} 0.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="0.2",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="0.4",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="0.6",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="0.8",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="1.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="2.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="4.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="6.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="8.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="10.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="20.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="40.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="60.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="80.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="100.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="200.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="400.0",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="+Inf",model_name="Qwen/Qwen3-8B"} 1.0
sglang:time_to_first_token_seconds_count{engine_type="unified",model_name="Qwen/Qwen3-8B"} 1.0
# HELP "#;
    let running = r#"# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="Qwen/Qwen3-8B",pp_rank="0",tp_rank="0"} 7.0
# HELP sglang:num_queue_reqs "#;
    let prompt = r#"# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{engine_type="unified",model_name="Qwen/Qwen3-8B"} 8.128902e+06
"#;
    for want in [ttft, running, prompt] {
        assert!(body.contains(want), "missing\n{want}\nin\n{body}");
    }
    assert!(body.starts_with(ttft));
    // Multiprocess mode: no `_created`, no default collectors; the mode-less gauge has a pid.
    assert!(!body.contains("_created") && !body.contains("python_") && !body.contains("process_"));
    assert!(body.contains(
        r#"sglang:num_retracted_reqs{engine_type="unified",model_name="Qwen/Qwen3-8B",pid="2817",pp_rank="0",tp_rank="0"} 0.0"#
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
        r#"sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="3"} 7.0"#
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
