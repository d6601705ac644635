//! Unit tests of the text view over fixed `/explain` answers, shaped as
//! `src/api/explain.rs` serialises them.

use serde_json::json;

use super::*;

fn engine_source(label: &str, age: f64) -> Value {
    json!({
        "source": label,
        "lastGoodAgeSeconds": age,
        "consecutiveFailures": 0,
        "reading": {
            "kind": "engine",
            "engine": "vllm",
            "malformedLines": 0,
            "pods": [
                {"target": "http://10.0.0.1:8000/metrics", "waiting": 10.0, "running": 32.0,
                 "kvCacheUsage": 0.5, "read": {"waiting": "vllm:num_requests_waiting ×1 series"}},
                {"target": "http://10.0.0.2:8000/metrics", "waiting": 35.0, "running": 62.0,
                 "kvCacheUsage": 0.25}
            ]
        }
    })
}

fn backlog_params() -> Value {
    json!({
        "targetPerReplica": 10.0, "runningPerReplica": 32.0, "activationBacklog": 0.0,
        "latency": null, "kvCacheTarget": null, "gpu": null, "policy": {"name": "backlog"}
    })
}

fn ok_trigger() -> Value {
    json!({
        "namespace": "inference", "name": "llama-8b", "metricName": "backlog",
        "state": "ok", "value": 74.375, "active": true, "desiredReplicas": 8,
        "formula": "D = W + T·R/C = 45 + 10·94/32 = 74.375; max → D; B = 74.375",
        "components": {
            "waiting": 45.0, "running": 94.0, "runningTerm": 29.375, "demand": 74.375,
            "capacity": null, "brokerTerm": null, "ttftSeconds": null, "latencyTerm": null,
            "kvCacheUsage": 0.375, "kvTerm": null, "gpuUtilization": null, "gpuAction": null,
            "replicasReporting": 2, "driver": "demand"
        },
        "params": backlog_params(),
        "pollIntervalSeconds": 5, "maxSignalAgeSeconds": 15, "validForSeconds": 13.61,
        "evaluatedAtUnix": 1796120282.2,
        "sources": [engine_source("vllm http://10.0.0.1:8000/metrics +1", 1.39)]
    })
}

fn one(trigger: Value) -> String {
    render(&json!({ "triggers": [trigger] }))
}

#[test]
fn an_ok_trigger_shows_the_formula_decision_components_and_pods() {
    let text = one(ok_trigger());
    let expected = "\
inference/llama-8b  (metric backlog)
  state:      ok
  formula:    D = W + T·R/C = 45 + 10·94/32 = 74.375; max → D; B = 74.375
  decision:   B = D = 74.375 → desired ceil(74.375/10) = 8 replicas; active (B > A=0)
  timing:     value valid for 13.6 s, poll every 5 s, max signal age 15 s
  components:
    W (waiting)                45
    R (running)                94
    T·R/C (running term)       29.375  (10·94/32)
    D (demand)                 74.375
    KV-cache usage             0.375
    n (replicas reporting)     2
    driver (won the max)       D
  sources (1):
    vllm http://10.0.0.1:8000/metrics +1
      last good reading 1.4 s ago
      2 pods (vllm) in the last good reading
        http://10.0.0.1:8000/metrics  W=10 R=32 kv=0.5
        http://10.0.0.2:8000/metrics  W=35 R=62 kv=0.25
";
    assert_eq!(text, expected);
}

#[test]
fn guards_make_the_decision_a_max_and_an_idle_trigger_reads_inactive() {
    let mut t = ok_trigger();
    t["value"] = json!(0.0);
    t["active"] = json!(false);
    t["desiredReplicas"] = json!(0);
    t["components"]["demand"] = json!(0.0);
    t["components"]["latencyTerm"] = json!(0.0);
    t["components"]["kvTerm"] = json!(0.0);
    t["components"]["ttftSeconds"] = json!(0.12);
    t["params"]["latency"] = json!({"sloSeconds": 2.0, "tolerance": 0.1});
    t["params"]["kvCacheTarget"] = json!(0.8);
    t["params"]["gpu"] = json!({"busyPercent": 90.0, "idlePercent": 10.0});
    t["components"]["gpuUtilization"] = json!(5.0);
    t["components"]["gpuAction"] = json!("idleVeto");
    let text = one(t);
    assert!(
        text.contains(
            "decision:   B = max(D=0, D_lat=0, D_kv=0), capped by the GPU idle veto = 0 → desired ceil(0/10) = 0 replicas; inactive (B ≤ A=0)"
        ),
        "{text}"
    );
    assert!(
        text.contains("L (TTFT, s)                0.12  (SLO 2 s)"),
        "{text}"
    );
    assert!(
        text.contains("KV-cache usage             0.375  (target 0.8)"),
        "{text}"
    );
    assert!(text.contains("D_kv (KV-cache term)       0\n"), "{text}");
    assert!(text.contains("D_lat (latency term)       0\n"), "{text}");
    assert!(
        text.contains(
            "GPU guard                  idle veto capped B at T·n  (busy ≥ 90 %, idle ≤ 10 %)"
        ),
        "{text}"
    );
    assert!(text.contains("U (GPU utilisation, %)     5\n"), "{text}");
}

#[test]
fn a_degraded_trigger_shows_the_reason_the_failing_source_and_empty_names() {
    let mut t = ok_trigger();
    t["state"] = json!("degraded");
    t["reason"] =
        json!("a source is failing; its last good reading is held until maxSignalAgeSeconds");
    t["sources"][0]["consecutiveFailures"] = json!(2);
    t["sources"][0]["lastGoodAgeSeconds"] = json!(10.04);
    t["sources"][0]["lastError"] = json!("http_status: http://10.0.0.2:8000/metrics answered 503");
    t["sources"][0]["reading"]["emptyDiscovery"] = json!(["dns+http://gone.svc:8000/metrics"]);
    t["sources"][0]["reading"]["malformedLines"] = json!(3);
    let text = one(t);
    assert!(
        text.contains(
            "state:      degraded: a source is failing; its last good reading is held until maxSignalAgeSeconds\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("last good reading 10 s ago, 2 failed polls since\n"),
        "{text}"
    );
    assert!(
        text.contains("last error: http_status: http://10.0.0.2:8000/metrics answered 503\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "no addresses (pods behind it not counted): dns+http://gone.svc:8000/metrics\n"
        ),
        "{text}"
    );
    assert!(text.contains("malformed lines skipped: 3\n"), "{text}");
    assert!(
        text.contains(
            "http://10.0.0.2:8000/metrics  W=35 R=62 kv=0.25  ← failing (see last error)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("http://10.0.0.1:8000/metrics  W=10 R=32 kv=0.5\n"),
        "{text}"
    );
}

#[test]
fn an_unavailable_trigger_has_no_decision_but_every_source() {
    let t = json!({
        "namespace": "inference", "name": "llama-8b", "metricName": "backlog",
        "state": "unavailable",
        "reason": "signal lost: vllm http://10.0.0.1:8000/metrics: no good reading for 31 s",
        "params": backlog_params(),
        "pollIntervalSeconds": 5, "maxSignalAgeSeconds": 15,
        "evaluatedAtUnix": 1796120282.2,
        "sources": [{
            "source": "vllm http://10.0.0.1:8000/metrics", "consecutiveFailures": 1,
            "lastError": "connect: connection refused"
        }]
    });
    let text = one(t);
    assert!(
        text.contains(
            "state:      unavailable: signal lost: vllm http://10.0.0.1:8000/metrics: no good reading for 31 s\n"
        ),
        "{text}"
    );
    assert!(!text.contains("decision:"), "{text}");
    assert!(!text.contains("components:"), "{text}");
    assert!(!text.contains("formula:"), "{text}");
    assert!(
        text.contains("timing:     poll every 5 s, max signal age 15 s\n"),
        "{text}"
    );
    assert!(
        text.contains("no good reading yet, 1 failed poll since\n      last error: connect: connection refused\n"),
        "{text}"
    );
}

#[test]
fn broker_and_engine_show_w_q_the_breakdown_and_kafkas_activation_term() {
    let mut t = ok_trigger();
    t["value"] = json!(174.375);
    t["desiredReplicas"] = json!(18);
    t["components"]["brokerTerm"] = json!(100.0);
    t["components"]["activationBrokerTerm"] = json!(150.0);
    t["components"]["demand"] = json!(174.375);
    t["sources"].as_array_mut().expect("sources").push(json!({
        "source": "kafka orders/llm-workers", "lastGoodAgeSeconds": 0.5,
        "consecutiveFailures": 0,
        "reading": {"kind": "broker", "messages": 100.0, "partitions": 4,
                    "breakdown": {"lagWithPersistent": 150.0, "orders/0": 60.0, "orders/1": 40.0}}
    }));
    let text = one(t);
    assert!(text.contains("w·Q (broker)               100\n"), "{text}");
    assert!(text.contains("w·Q (activation counts)    150\n"), "{text}");
    assert!(
        text.contains("active (B' (with w·Q=150 as activation counts it) > A=0)"),
        "{text}"
    );
    assert!(text.contains("sources (2):"), "{text}");
    assert!(
        text.contains(
            "    kafka orders/llm-workers\n      last good reading 0.5 s ago\n      Q = 100 messages (capped at T × 4 partitions)\n      breakdown: lagWithPersistent=150 orders/0=60 orders/1=40\n"
        ),
        "{text}"
    );
}

#[test]
fn capacity_shows_lambda_mu_and_each_term() {
    let mut t = ok_trigger();
    t["params"]["policy"] = json!({"name": "capacity", "drainRatePerReplica": 2.0,
        "arrivalSmoothingSeconds": 60.0, "peakHoldSeconds": 300.0, "headroom": 0.2,
        "drainHorizonSeconds": 30.0, "learnDrainRate": true});
    t["components"]["capacity"] = json!({"arrivalRate": 3.5, "smoothedRate": 3.0,
        "peakRate": 4.0, "peakHoldSeconds": 120.0, "drainRate": 2.1, "drainRateLearned": true,
        "rateTerm": 2.2857142857, "podBacklogTerm": 0.75});
    let text = one(t);
    for row in [
        "λ now (arrivals, req/s)    3.5\n",
        "λ smoothed (req/s)         3\n",
        "λ_peak (req/s)             4\n",
        "peak held for (s)          120\n",
        "μ (drain per replica)      2.1 (learned)\n",
        "(1+headroom)·λ_peak/μ      2.2857\n",
        "Σ min(1, W_i/(μ·H))        0.75\n",
    ] {
        assert!(text.contains(row), "{row:?} in\n{text}");
    }
}

#[test]
fn mu_says_how_it_was_obtained() {
    for (source, mu, row) in [
        ("fit", 4.5, "μ (drain per replica)      4.5 (fit)\n"),
        (
            "configured",
            2.0,
            "μ (drain per replica)      2 (configured)\n",
        ),
        (
            "none",
            0.0,
            "μ (drain per replica)      none yet (not configured, not learned)\n",
        ),
    ] {
        let mut t = ok_trigger();
        t["components"]["capacity"] = json!({"arrivalRate": 3.5, "drainRate": mu,
            "drainRateSource": source, "drainRateLearned": source == "fit"});
        let text = one(t);
        assert!(text.contains(row), "{row:?} in\n{text}");
    }
}

#[test]
fn a_mode_field_is_shown_when_present_and_gpu_and_query_sources_render() {
    let mut t = ok_trigger();
    t["mode"] = json!("shadow");
    t["sources"] = json!([
        {"source": "dcgm http://10.0.0.9:9400/metrics", "lastGoodAgeSeconds": 2.0,
         "consecutiveFailures": 0,
         "reading": {"kind": "gpu", "malformedLines": 0, "gpus": [
            {"target": "http://10.0.0.9:9400/metrics", "gpu": "0", "pod": "llama-0",
             "utilization": 97.0, "read": "DCGM_FI_DEV_GPU_UTIL{pod,namespace}"}]}},
        {"source": "prometheus sum(queue)", "lastGoodAgeSeconds": 2.0,
         "consecutiveFailures": 0,
         "reading": {"kind": "query", "query": "sum(queue)", "series": [
            {"labels": "{}", "value": 12.0}, {"labels": "{job=\"x\"}", "value": "NaN"}]}}
    ]);
    let text = one(t);
    assert!(
        text.contains(
            "  state:      ok\n  mode:       shadow: GetMetrics answers 0 and IsActive false; below is what it would answer\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("1 GPUs\n        GPU 0 pod llama-0  U=97 %\n"),
        "{text}"
    );
    assert!(
        text.contains("query sum(queue): 2 series\n        {} = 12\n        {job=\"x\"} = NaN\n"),
        "{text}"
    );
    // `active` is shown as is; without the field there is no mode line.
    let mut t = ok_trigger();
    t["mode"] = json!("active");
    assert!(one(t).contains("  state:      ok\n  mode:       active\n"));
    assert!(!one(ok_trigger()).contains("mode:"));
}

#[test]
fn no_triggers_says_so_and_several_are_separated() {
    assert!(render(&json!({"triggers": []})).starts_with("no triggers"));
    let mut other = ok_trigger();
    other["name"] = json!("qwen");
    let text = render(&json!({"triggers": [ok_trigger(), other]}));
    assert!(
        text.contains("B = 74.375\n\ninference/qwen  (metric backlog)\n")
            || text.contains("kv=0.25\n\ninference/qwen  (metric backlog)\n"),
        "{text}"
    );
}

#[test]
fn numbers_read_as_a_person_writes_them() {
    assert_eq!(num(74.375), "74.375");
    assert_eq!(num(0.072_581_152), "0.0726");
    assert_eq!(num(-0.0), "0");
    assert_eq!(num(8.0), "8");
    assert_eq!(secs_of(&json!(0.903_84)).as_deref(), Some("0.9"));
}

#[test]
fn failing_pods_are_listed_held_or_left_out_with_reason_and_age() {
    let mut t = ok_trigger();
    t["state"] = json!("degraded");
    t["reason"] = json!("2 of 3 pods failing (…)");
    t["pods"] = json!({
        "discovered": 3, "reporting": 2, "minReportingFraction": 0.5, "extrapolation": 1.5,
        "pods": [
            {"target": "http://10.0.0.3:8000/metrics", "state": "left_out", "reason": "http_status",
             "error": "http://10.0.0.3:8000/metrics: HTTP status 503 Service Unavailable",
             "failedPolls": 7, "lastGoodAgeSeconds": 16.04},
            {"target": "http://10.0.0.4:8000/metrics", "state": "held", "reason": "timeout",
             "error": "http://10.0.0.4:8000/metrics: no answer within 3.6s",
             "failedPolls": 1, "lastGoodAgeSeconds": 5.0},
            {"target": "http://10.0.0.5:8000/metrics", "state": "left_out", "reason": "parse",
             "error": "vllm:num_requests_waiting missing", "failedPolls": 2}
        ]
    });
    let text = one(t.clone());
    let block = "\
  pods:       2 of 3 discovered pods report (minReportingFraction 0.5); the sums are scaled by 3/2 = 1.5
    left out  http://10.0.0.3:8000/metrics  (http_status, 7 failed polls, last good reading 16 s ago): HTTP status 503 Service Unavailable
    held      http://10.0.0.4:8000/metrics  (timeout, 1 failed poll, last good reading 5 s ago): no answer within 3.6s
    left out  http://10.0.0.5:8000/metrics  (parse, 2 failed polls, never answered): vllm:num_requests_waiting missing
  sources (1):
";
    assert!(text.contains(block), "{text}");
    // The answering pods of the source are not marked: the source's poll
    // succeeded, so there is no last error naming one.
    assert!(!text.contains("← failing"), "{text}");

    // Below the quorum the view says UNAVAILABLE, and scales nothing.
    t["state"] = json!("unavailable");
    t["pods"]["reporting"] = json!(1);
    t["pods"]["extrapolation"] = json!(3.0);
    let text = one(t);
    assert!(
        text.contains(
            "  pods:       1 of 3 discovered pods report (minReportingFraction 0.5); below it: UNAVAILABLE\n"
        ),
        "{text}"
    );
    assert!(!text.contains("scaled by"), "{text}");

    // Without failing pods there is no `pods` field and no block.
    assert!(!one(ok_trigger()).contains("  pods:"));
}

#[test]
fn a_warming_trigger_and_a_backing_off_source_say_why_and_for_how_long() {
    let mut t = ok_trigger();
    t["warming"] = json!({"state": "warming", "secondsLeft": 11.04,
        "reason": "the arrival rate is not yet measured; B is at least the backlog formula"});
    t["sources"] = json!([{"source": "vllm http://10.0.0.7:8000/metrics", "consecutiveFailures": 4,
        "lastError": "HTTP 404 Not Found",
        "backoff": {"state": "backing off", "nextAttemptInSeconds": 37.25, "delaySeconds": 40.0,
            "reason": "HTTP 404 does not go away by itself"}}]);
    let text = one(t);
    for row in [
        "  warming:    11 s left: the arrival rate is not yet measured; B is at least the backlog formula\n",
        "      backing off: next poll in 37.3 s; HTTP 404 does not go away by itself\n",
    ] {
        assert!(text.contains(row), "{row:?} in\n{text}");
    }
    // Neither line without its field.
    let plain = one(ok_trigger());
    assert!(
        !plain.contains("warming:") && !plain.contains("backing off"),
        "{plain}"
    );
}
