use super::*;
use crate::source::Engine;

fn query() -> PromQuery {
    PromQuery {
        address: Url::parse("http://127.0.0.1:9090").expect("url"),
        query: "sum(x)".into(),
        auth_profile: None,
        answer: Answer::Raw,
    }
}

#[test]
fn parses_vectors_scalars_and_special_values() {
    let r = query()
        .parse_response(r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a"},"value":[1.5,"3"]},{"metric":{},"value":[1.5,"NaN"]}]}}"#)
        .expect("vector");
    assert_eq!(r.series.len(), 2);
    assert_eq!(r.series[0].value, 3.0);
    assert_eq!(r.series[0].labels, "{pod=\"a\"}");
    assert!(r.series[1].value.is_nan());
    let r = query()
        .parse_response(
            r#"{"status":"success","data":{"resultType":"scalar","result":[1.5,"+Inf"]}}"#,
        )
        .expect("scalar");
    assert_eq!(r.series[0].value, f64::INFINITY);
    let r = query()
        .parse_response(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#)
        .expect("empty");
    assert!(r.series.is_empty());
}

#[test]
fn errors_name_the_query() {
    let err = query()
        .parse_response(r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#)
        .expect_err("error");
    assert!(
        err.to_string().contains("sum(x)") && err.to_string().contains("parse error"),
        "{err}"
    );
    let err = query().parse_response("<html>").expect_err("garbage");
    assert!(err.to_string().contains("sum(x)"), "{err}");
    let err = query()
        .parse_response(r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#)
        .expect_err("matrix");
    assert!(err.to_string().contains("instant vector"), "{err}");
}

#[test]
fn default_queries_use_engine_names_and_filters() {
    let q = DefaultQueries::new(Engine::Vllm, Some("m\"x"), Some("inference"));
    // vLLM 0.33: requests waiting for capacity, else (older) the total.
    assert_eq!(
        q.waiting(),
        r#"sum(vllm:num_requests_waiting_by_reason{model_name="m\"x",namespace="inference",reason="capacity"}) or sum(vllm:num_requests_waiting{model_name="m\"x",namespace="inference"})"#
    );
    assert_eq!(
        q.ttft(0.95, 60).expect("vllm has ttft"),
        r#"histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{model_name="m\"x",namespace="inference"}[60s])))"#
    );
    assert!(
        q.kv_cache()
            .expect("kv")
            .contains(" or vllm:gpu_cache_usage_perc{")
    );
    // Data-parallel engines of one pod are one replica.
    assert_eq!(
        q.replicas(),
        r#"count(max without (engine) (vllm:num_requests_waiting{model_name="m\"x",namespace="inference"}))"#
    );
    let t = DefaultQueries::new(Engine::Triton, None, None);
    assert!(t.ttft(0.5, 30).expect("triton").ends_with("* 0.001"));
    assert_eq!(t.running(), None);
    assert_eq!(
        t.waiting(),
        r#"sum(nv_trt_llm_request_metrics{request_type="waiting"}) or sum(nv_inference_pending_request_count{})"#
    );
    let s = DefaultQueries::new(Engine::Sglang, None, None);
    // One scheduler per data-parallel group; the priority="" total, else
    // the breakdown (never both).
    assert_eq!(
        s.waiting(),
        r#"sum(max without (pp_rank, tp_rank, moe_ep_rank, pid) (sglang:num_queue_reqs{priority=""})) or sum(max without (pp_rank, tp_rank, moe_ep_rank, pid) (sglang:num_queue_reqs{priority!=""}))"#
    );
    assert_eq!(
        s.replicas(),
        r#"count(max without (dp_rank, pp_rank, tp_rank, moe_ep_rank, pid, priority) (sglang:num_queue_reqs{}))"#
    );
    assert_eq!(
        s.kv_cache().expect("kv"),
        r#"avg(max without (pp_rank, tp_rank, moe_ep_rank, pid) (sglang:token_usage{}))"#
    );
    let gpu = DefaultQueries::gpu_util(Some("inference"), Some("vllm-.*"));
    assert!(gpu.starts_with(
        r#"avg((DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace="inference",pod=~"vllm-.*",GPU_I_ID!=""} * 100) or (DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod_namespace="inference",pod_name=~"vllm-.*",GPU_I_ID!=""} * 100) or "#
    ), "{gpu}");
    for part in [
        r#" or DCGM_FI_DEV_GPU_UTIL{namespace="inference",pod=~"vllm-.*"} or "#,
        r#" or DCGM_FI_DEV_GPU_UTIL{exported_namespace="inference",exported_pod=~"vllm-.*"} or "#,
        r#" or (DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod_namespace="inference",pod_name=~"vllm-.*"} * 100) or "#,
    ] {
        assert!(gpu.contains(part), "{part} in {gpu}");
    }
    assert_eq!(gpu.matches(" or ").count(), 8, "3 label forms × 3 fields");
}

#[test]
fn default_token_queries_are_raw_counters_per_pod_where_the_engine_has_them() {
    let v = DefaultQueries::new(Engine::Vllm, Some("m"), Some("ns"));
    assert_eq!(
        v.pod_generation_tokens("pod").as_deref(),
        Some(
            r#"sum by (namespace, pod) (vllm:generation_tokens_total{model_name="m",namespace="ns"})"#
        )
    );
    assert_eq!(
        v.pod_prompt_tokens("pod").as_deref(),
        Some(
            r#"sum by (namespace, pod) (vllm:prompt_tokens_total{model_name="m",namespace="ns"})"#
        )
    );
    // Built as the finished counter's default is.
    assert_eq!(
        v.pod_finished("pod"),
        r#"sum by (namespace, pod) (vllm:request_success_total{model_name="m",namespace="ns"})"#
    );
    let s = DefaultQueries::new(Engine::Sglang, None, None);
    assert_eq!(
        s.pod_generation_tokens("kubernetes_pod_name").as_deref(),
        Some("sum by (namespace, kubernetes_pod_name) (sglang:generation_tokens_total{})")
    );
    assert_eq!(
        s.pod_prompt_tokens("kubernetes_pod_name").as_deref(),
        Some("sum by (namespace, kubernetes_pod_name) (sglang:prompt_tokens_total{})")
    );
    for engine in [Engine::Triton, Engine::Tgi] {
        let q = DefaultQueries::new(engine, None, None);
        assert_eq!(q.pod_generation_tokens("pod"), None, "{engine}");
        assert_eq!(q.pod_prompt_tokens("pod"), None, "{engine}");
    }
}

#[test]
fn an_answer_its_signal_cannot_read_is_a_parse_error_naming_key_and_query() {
    let waiting = PromQuery {
        query: r#"sum(w{token="S3CRET"})"#.into(),
        answer: Answer::Summed("waitingQuery"),
        ..query()
    };
    let nan = waiting
        .parse_response(r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1.5,"NaN"]}]}}"#)
        .expect("parses");
    let err = waiting.check(&nan).expect_err("NaN is no count");
    assert_eq!(err.kind(), FailureKind::Parse);
    assert_eq!(
        err.to_string(),
        r#"prometheus http://127.0.0.1:9090/ sum(w{token="[redacted]"}): waitingQuery `sum(w{token="[redacted]"})` returned NaN for {}, not a count"#
    );
    // The same answer is a valid TTFT quantile (no requests in the window).
    let ttft = PromQuery {
        answer: Answer::Quantile("ttftQuery"),
        ..waiting.clone()
    };
    assert!(ttft.check(&nan).is_ok());
    // Empty is the evaluation's to judge (replicasQuery may say 0).
    let empty = waiting
        .parse_response(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#)
        .expect("parses");
    assert!(waiting.check(&empty).is_ok());
}

/// `/explain` serves a reading's query: a credential-shaped matcher is shown redacted there,
/// as in every other channel (an outside audit found it raw).
#[test]
fn a_readings_query_is_serialized_redacted() {
    let reading = QueryReading {
        query: "sum(x{a=\"Bearer S3CR3T\"})".to_owned(),
        series: Vec::new(),
    };
    let json = serde_json::to_string(&reading).expect("json");
    assert!(
        !json.contains("S3CR3T") && json.contains("Bearer [redacted]"),
        "{json}"
    );
    // The value itself keeps the query as sent.
    assert!(reading.query.contains("S3CR3T"));
}
