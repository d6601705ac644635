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
