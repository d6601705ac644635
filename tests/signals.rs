//! Latency, KV-cache and GPU signals through both input paths (direct pod
//! scrape and PromQL against a REAL Prometheus server), and every engine
//! profile parsed from its exposition fixture.

mod common;

use std::time::{Duration, Instant};

use backlog_scaler::fake::{EngineKind, FakeDcgmExporter, FakeVllmPod, ModelLoad, PodState};
use backlog_scaler::guard::config::ScalerConfig;
use common::prometheus::PrometheusServer;
use common::*;
use tonic::Code;

/// `/explain` JSON of one ScaledObject.
async fn explain(
    server: &backlog_scaler::api::server::RunningServer,
    name: &str,
) -> serde_json::Value {
    let (_, body) = http_get(&format!("http://{}/explain?name={name}", server.http_addr)).await;
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    json["triggers"][0].clone()
}

/// TTFT observations per second per pod: 90 % in (0.5, 1.0], 10 % at 1.6 s
/// (in (1.0, 2.5]), so the p95 lies inside the (1.0, 2.5] bucket.
fn drive_requests(pods: &[FakeVllmPod], step: u64) {
    for pod in pods {
        pod.update(|state| {
            for i in 0..20u64 {
                let ttft = if (i + step).is_multiple_of(10) {
                    1.6
                } else {
                    0.55 + 0.02 * (i % 20) as f64
                };
                state.record_request(MODEL, ttft, ttft + 2.0, 100, 50);
            }
        });
    }
}

#[tokio::test]
async fn ttft_p95_from_direct_scrape_and_from_promql_agree() {
    let pods = pods(&[(3.0, 10.0), (2.0, 12.0)]).await;
    let prometheus = PrometheusServer::start(
        &pods.iter().map(|p| p.addr()).collect::<Vec<_>>(),
        Duration::from_secs(1),
    )
    .await;
    prometheus
        .wait_for_targets_up(2, Duration::from_secs(15))
        .await;
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let common = [
        ("modelName", MODEL),
        ("targetBacklogPerReplica", "10"),
        ("ttftSloSeconds", "0.5"),
        ("ttftWindowSeconds", "12"),
        ("pollIntervalSeconds", "1"),
    ];
    let mut direct_md = vec![("vllmTargets", targets.as_str())];
    direct_md.extend(common);
    let prom_url = prometheus.url();
    let mut promql_md = vec![("prometheusAddress", prom_url.as_str())];
    promql_md.extend(common);
    let direct = object("direct", &direct_md);
    let promql = object("promql", &promql_md);

    // Steady traffic for long enough that both 12 s windows are full of it.
    let started = Instant::now();
    let mut step = 0;
    while started.elapsed() < Duration::from_secs(16) {
        drive_requests(&pods, step);
        step += 1;
        // Keep both triggers registered and polled.
        let _ = client.get_metrics(metrics_request(&direct, "")).await;
        let _ = client.get_metrics(metrics_request(&promql, "")).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let direct_ttft = explain(&server, "direct").await["components"]["ttftSeconds"].as_f64();
    let promql_ttft = explain(&server, "promql").await["components"]["ttftSeconds"].as_f64();
    let (Some(d), Some(p)) = (direct_ttft, promql_ttft) else {
        panic!(
            "both paths must report a TTFT: direct {:#}, promql {:#}",
            explain(&server, "direct").await,
            explain(&server, "promql").await
        );
    };
    // Both lie in the (1.0, 2.5] bucket, and agree within 5 % or one bucket width.
    assert!(
        (1.0..=2.5).contains(&d) && (1.0..=2.5).contains(&p),
        "direct {d}, promql {p}"
    );
    let close = (d - p).abs() <= 0.05 * p.max(d) || (d - p).abs() <= 1.5;
    assert!(close, "direct {d} vs promql {p}");

    // The guard fired on both (L > 0.55 with work waiting): D_lat = T·n·min(L/S, 2) = 10·2·2 = 40.
    for name in ["direct", "promql"] {
        let t = explain(&server, name).await;
        assert_eq!(t["components"]["driver"], "latency", "{name}: {t:#}");
        assert_eq!(t["value"], 40.0, "{name}: {t:#}");
        assert!(
            t["formula"].as_str().is_some_and(|f| f.contains("D_lat")),
            "{t:#}"
        );
    }
    let (_, metrics) = http_get(&format!("http://{}/metrics", server.http_addr)).await;
    assert!(metrics.contains("guard=\"latency\"} 1"), "{metrics}");
    assert!(metrics.contains("component=\"ttft_seconds\""), "{metrics}");
    server.shutdown().await;
}

#[tokio::test]
async fn promql_empty_result_is_unavailable_unless_replicas_say_zero() {
    let pods = pods(&[(1.0, 1.0)]).await;
    let prometheus = PrometheusServer::start(&[pods[0].addr()], Duration::from_secs(1)).await;
    prometheus
        .wait_for_targets_up(1, Duration::from_secs(15))
        .await;
    prometheus
        .wait_for_series("vllm:num_requests_waiting", Duration::from_secs(15))
        .await;
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let url = prometheus.url();

    // A model nobody serves: every query is empty and the replica count is unknown.
    let lost = object(
        "lost",
        &[
            ("prometheusAddress", url.as_str()),
            ("modelName", "no-such-model"),
            ("targetBacklogPerReplica", "10"),
        ],
    );
    let status = client
        .get_metrics(metrics_request(&lost, ""))
        .await
        .expect_err("lost target");
    assert_eq!(status.code(), Code::Unavailable);
    assert!(
        status.message().contains("lost target is not zero work"),
        "{}",
        status.message()
    );

    // The same, with a replica count that says 0 pods are up: a measured zero.
    let zero = object(
        "zero",
        &[
            ("prometheusAddress", url.as_str()),
            ("modelName", "no-such-model"),
            ("targetBacklogPerReplica", "10"),
            ("replicasQuery", "vector(0)"),
        ],
    );
    let value = client
        .get_metrics(metrics_request(&zero, ""))
        .await
        .expect("zero")
        .into_inner();
    assert_eq!(value.metric_values[0].metric_value_float, 0.0);
    assert!(
        !client
            .is_active(zero)
            .await
            .expect("inactive")
            .into_inner()
            .result
    );

    // And the live model reads through: W = 1.
    let live = object(
        "live",
        &[
            ("prometheusAddress", url.as_str()),
            ("modelName", MODEL),
            ("targetBacklogPerReplica", "10"),
        ],
    );
    let value = client
        .get_metrics(metrics_request(&live, ""))
        .await
        .expect("live")
        .into_inner();
    assert_eq!(value.metric_values[0].metric_value_float, 1.0);
    server.shutdown().await;
}

#[tokio::test]
async fn pod_restart_mid_window_gives_no_negative_or_huge_ttft() {
    let pods = pods(&[(2.0, 0.0)]).await;
    // Long-running pod: large lifetime counts in the fast buckets.
    pods[0].update(|state| {
        for _ in 0..5000 {
            state.record_request(MODEL, 0.07, 1.0, 10, 10);
        }
    });
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let object = object(
        "restart",
        &[
            ("vllmTargets", &targets),
            ("targetBacklogPerReplica", "10"),
            ("ttftSloSeconds", "5"),
            ("ttftWindowSeconds", "30"),
            ("pollIntervalSeconds", "1"),
        ],
    );
    client
        .get_metrics(metrics_request(&object, ""))
        .await
        .expect("first");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // The pod restarts: counters start again from zero, with a few slow requests.
    pods[0].update(|state| {
        *state = PodState::default();
        state.set_load(
            MODEL,
            ModelLoad {
                waiting: 2.0,
                running: 0.0,
                kv_cache_usage: 0.1,
            },
        );
        for _ in 0..10 {
            state.record_request(MODEL, 0.6, 2.0, 10, 10);
        }
    });
    let seen = eventually(Duration::from_secs(5), || async {
        explain(&server, "restart").await["components"]["ttftSeconds"].as_f64()
    })
    .await
    .expect("a TTFT after the restart");
    // Only the 10 post-restart requests in (0.5, 0.75] count: not negative, not the 5000 old ones.
    assert!(
        (0.5..=0.75).contains(&seen),
        "TTFT after a counter reset: {seen}"
    );
    let b = client
        .get_metrics(metrics_request(&object, ""))
        .await
        .expect("value")
        .into_inner();
    assert_eq!(
        b.metric_values[0].metric_value_float, 2.0,
        "guard silent below the SLO"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn every_engine_profile_reads_its_own_exposition() {
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    for kind in EngineKind::ALL {
        let pod = FakeVllmPod::start().await.expect("pod");
        pod.set_engine(kind);
        pod.update(|state| {
            state.tensor_parallel = 2; // SGLang repeats gauges per TP rank
            state.set_load(
                MODEL,
                ModelLoad {
                    waiting: 4.0,
                    running: 16.0,
                    kv_cache_usage: 0.25,
                },
            );
        });
        let url = pod.metrics_url();
        let mut md = vec![
            ("vllmTargets", url.as_str()),
            ("engine", kind.as_str()),
            ("targetBacklogPerReplica", "10"),
        ];
        // Triton has no running gauge; the others count R as T·R/C.
        let expected = if kind == EngineKind::Triton {
            4.0
        } else {
            md.push(("runningPerReplica", "32"));
            4.0 + 10.0 * 16.0 / 32.0
        };
        if kind != EngineKind::Tgi {
            md.push(("modelName", MODEL));
        }
        let object = object(&format!("engine-{}", kind.as_str()), &md);
        let value = client
            .get_metrics(metrics_request(&object, ""))
            .await
            .unwrap_or_else(|s| panic!("{kind:?}: {}", s.message()))
            .into_inner();
        assert_eq!(
            value.metric_values[0].metric_value_float, expected,
            "{kind:?}"
        );
        if matches!(kind, EngineKind::Vllm | EngineKind::Sglang) {
            let kv = object_with_kv(&md);
            let t = client
                .get_metrics(metrics_request(&kv, ""))
                .await
                .expect("kv")
                .into_inner();
            // D_kv = T·n·kv/kvCacheTarget = 10·1·0.25/0.125 = 20 wins over D = 9.
            assert_eq!(t.metric_values[0].metric_value_float, 20.0, "{kind:?}");
            let e = explain(&server, &kv.name).await;
            assert_eq!(e["components"]["kvCacheUsage"], 0.25, "{kind:?}: {e:#}");
            assert_eq!(e["components"]["kvTerm"], 20.0, "{kind:?}: {e:#}");
            assert_eq!(e["components"]["demand"], expected, "{kind:?}: {e:#}");
            assert_eq!(e["components"]["driver"], "kvCache", "{kind:?}: {e:#}");
        }
    }
    server.shutdown().await;
}

fn object_with_kv(md: &[(&str, &str)]) -> backlog_scaler::proto::ScaledObjectRef {
    let mut md = md.to_vec();
    // 0.125: exact in binary, and low enough that the KV term wins.
    md.push(("kvCacheTarget", "0.125"));
    let engine = md
        .iter()
        .find(|(k, _)| *k == "engine")
        .map(|(_, v)| *v)
        .unwrap_or("x");
    object(&format!("kv-{engine}"), &md)
}

#[tokio::test]
async fn gpu_busy_hold_keeps_a_saturated_fleet_from_shrinking() {
    let pods = pods(&[(1.0, 2.0), (1.0, 2.0)]).await;
    let dcgm = FakeDcgmExporter::start().await.expect("dcgm");
    dcgm.set_gpu(0, 97, Some(("inference", "llama-8b-abc", "vllm")));
    dcgm.set_gpu(1, 95, Some(("inference", "llama-8b-def", "vllm")));
    dcgm.set_gpu(2, 100, Some(("research", "trainer-0", "train")));
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let dcgm_url = dcgm.metrics_url();
    let object = object(
        "gpu",
        &[
            ("vllmTargets", &targets),
            ("targetBacklogPerReplica", "10"),
            ("runningPerReplica", "32"),
            ("dcgmTargets", &dcgm_url),
            ("namespace", "inference"),
            ("podSelectorRegex", "llama-8b-.*"),
        ],
    );
    // D = 2 + 10·4/32 = 3.25, but the GPUs are saturated with work queued: B = T·n = 20.
    let value = client
        .get_metrics(metrics_request(&object, ""))
        .await
        .expect("value")
        .into_inner();
    assert_eq!(value.metric_values[0].metric_value_float, 20.0);
    let t = explain(&server, "gpu").await;
    assert_eq!(t["components"]["gpuUtilization"], 96.0, "{t:#}");
    assert_eq!(t["components"]["gpuAction"], "busyHold", "{t:#}");
    server.shutdown().await;
}

#[tokio::test]
async fn capacity_policy_reads_arrivals_from_pod_counters() {
    let pods = pods(&[(0.0, 8.0), (0.0, 8.0)]).await;
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let object = object(
        "capacity",
        &[
            ("vllmTargets", &targets),
            ("modelName", MODEL),
            ("targetBacklogPerReplica", "10"),
            ("runningPerReplica", "32"),
            ("policy", "capacity"),
            ("drainRatePerReplica", "5"),
            ("arrivalSmoothingSeconds", "1"),
            ("pollIntervalSeconds", "1"),
        ],
    );
    client
        .get_metrics(metrics_request(&object, ""))
        .await
        .expect("first");
    // 10 finished per pod per second, gauges flat: 20 req/s arriving.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(6) {
        for pod in &pods {
            pod.update(|s| {
                for _ in 0..5 {
                    s.record_request(MODEL, 0.1, 1.0, 10, 10);
                }
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let t = explain(&server, "capacity").await;
    let rate = t["components"]["capacity"]["smoothedRate"]
        .as_f64()
        .expect("capacity terms");
    assert!(
        (14.0..=26.0).contains(&rate),
        "smoothed arrivals ≈ 20 req/s: {t:#}"
    );
    let value = t["value"].as_f64().expect("value");
    // D = T·(1.2·λ_peak/μ + Σ min(1, W_i/(μ·H))) ≈ 10·1.2·20/5 = 48, with
    // the pods' queues at 0 and λ_peak ≥ λ̂.
    let terms = &t["components"]["capacity"];
    let peak = terms["peakRate"].as_f64().expect("peak");
    assert!(peak >= rate, "{t:#}");
    assert_eq!(terms["podBacklogTerm"], 0.0, "{t:#}");
    let expected = 10.0 * (1.2 * peak / 5.0);
    assert!(
        (value - expected).abs() <= 1e-9 * expected,
        "B {value} against T·1.2·λ_peak/μ = {expected}: {t:#}"
    );
    assert!(
        t["formula"].as_str().is_some_and(|f| f.contains("λ_peak")),
        "{t:#}"
    );
    server.shutdown().await;
}

/// What the stand-in Prometheus saw of one request: the Authorization and
/// tenant headers, and when it arrived.
type Recorded = (String, String, Instant);

/// A stand-in Prometheus API that records the Authorization and tenant
/// headers it is sent and answers every instant query with `answer(query)`
/// as the result vector.
async fn stand_in_prometheus(
    answer: fn(&str) -> serde_json::Value,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<Recorded>>>,
) {
    use axum::http::HeaderMap;
    use std::collections::HashMap;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let app = axum::Router::new().route(
        "/api/v1/query",
        axum::routing::get(
            move |headers: HeaderMap, query: axum::extract::Query<HashMap<String, String>>| {
                let record = record.clone();
                async move {
                    let get = |name: &str| {
                        headers
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_owned()
                    };
                    record.lock().expect("lock").push((
                        get("authorization"),
                        get("x-scope-orgid"),
                        Instant::now(),
                    ));
                    let q = query.get("query").cloned().unwrap_or_default();
                    axum::Json(serde_json::json!({
                        "status": "success",
                        "data": {"resultType": "vector", "result": answer(&q)}
                    }))
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, seen)
}

/// The stand-in answering every query with one summed sample, `3`.
async fn recording_prometheus() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<Recorded>>>,
) {
    stand_in_prometheus(|_| serde_json::json!([{"metric": {}, "value": [1.0, "3"]}])).await
}

#[tokio::test]
async fn prometheus_credentials_come_from_the_scaler_profile() {
    let (addr, seen) = recording_prometheus().await;
    let config = ScalerConfig::parse(
        "profiles:\n  prom:\n    namespaces: [default]\n    prometheus:\n      bearerToken: {value: tok-123}\n      headers: {X-Scope-OrgID: {value: tenant-a}}\n",
    )
    .expect("config");
    let server = start_server(config).await;
    let mut client = client(&server).await;
    let url = format!("http://{addr}");
    let md = [
        ("prometheusAddress", url.as_str()),
        ("targetBacklogPerReplica", "10"),
        ("authProfile", "prom"),
        // Its stand-in Prometheus answers one summed series (no `pod`).
        ("policy", "backlog"),
    ];
    let value = client
        .get_metrics(metrics_request(&object("authed", &md), ""))
        .await
        .expect("value")
        .into_inner();
    assert_eq!(value.metric_values[0].metric_value_float, 3.0);
    let recorded = seen.lock().expect("lock").clone();
    assert!(!recorded.is_empty());
    assert!(
        recorded
            .iter()
            .all(|(auth, tenant, _)| auth == "Bearer tok-123" && tenant == "tenant-a"),
        "{recorded:?}"
    );
    let (_, explain) = http_get(&format!("http://{}/explain", server.http_addr)).await;
    assert!(
        !explain.contains("tok-123"),
        "the token leaked into /explain"
    );

    // A profile bound to `default` refuses another namespace; an unknown profile is invalid.
    let mut other = object("other", &md);
    other.namespace = "team-x".to_owned();
    assert_eq!(
        client
            .get_metric_spec(other)
            .await
            .expect_err("denied")
            .code(),
        Code::PermissionDenied
    );
    let unknown = [
        ("prometheusAddress", url.as_str()),
        ("targetBacklogPerReplica", "10"),
        ("authProfile", "nope"),
    ];
    let status = client
        .get_metric_spec(object("unknown", &unknown))
        .await
        .expect_err("unknown");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("nope"), "{}", status.message());
    server.shutdown().await;
}

#[tokio::test]
async fn a_rotated_prometheus_token_file_is_sent_from_the_next_query() {
    // A projected service-account token: the kubelet replaces the file
    // before the token expires; the scaler must send the new one without a
    // restart.
    let (addr, seen) = recording_prometheus().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("token");
    std::fs::write(&token, "first-token-aaaa\n").expect("write");
    let config = ScalerConfig::parse(&format!(
        "profiles:\n  prom:\n    prometheus:\n      bearerToken: {{file: {}}}\n",
        token.display()
    ))
    .expect("config");
    let server = start_server(config).await;
    let mut client = client(&server).await;
    let url = format!("http://{addr}");
    let md = [
        ("prometheusAddress", url.as_str()),
        ("targetBacklogPerReplica", "10"),
        ("authProfile", "prom"),
        ("pollIntervalSeconds", "1"),
        ("policy", "backlog"),
    ];
    let object = object("rotated", &md);
    let value = client
        .get_metrics(metrics_request(&object, ""))
        .await
        .expect("value")
        .into_inner();
    assert_eq!(value.metric_values[0].metric_value_float, 3.0);
    let count = || seen.lock().expect("lock").len();
    std::fs::write(&token, "second-token-bbbbbbbb\n").expect("rotate");
    let rotated = Instant::now();
    let rotated_at = count();
    // Every poller (one per query) polls again within its 1 s interval.
    eventually(Duration::from_secs(5), || async {
        let recorded = seen.lock().expect("lock").clone();
        let after = recorded
            .iter()
            .filter(|(_, _, at)| *at > rotated + Duration::from_millis(1500))
            .count();
        (after >= 2).then_some(())
    })
    .await
    .expect("queries after the rotation");
    let recorded = seen.lock().expect("lock").clone();
    let (old, new) = recorded.split_at(rotated_at);
    assert!(
        !old.is_empty()
            && old
                .iter()
                .all(|(auth, _, _)| auth == "Bearer first-token-aaaa"),
        "{old:?}"
    );
    // A query whose reading began just before the write may still carry the
    // old token; every one received later than 50 ms after it carries the new.
    let late: Vec<_> = new
        .iter()
        .filter(|(_, _, at)| *at > rotated + Duration::from_millis(50))
        .collect();
    assert!(late.len() >= 2, "{new:?}");
    assert!(
        late.iter()
            .all(|(auth, _, _)| auth == "Bearer second-token-bbbbbbbb"),
        "every query after the rotation carries the new token: {new:?}"
    );
    server.shutdown().await;
}

/// The stand-in answering every query with one series of pod `p1` (`0.5`
/// for the KV query, `3` otherwise).
async fn per_pod_prometheus() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<Recorded>>>,
) {
    stand_in_prometheus(|q| {
        let value = if q.contains("kv_cache") || q.contains("cache_usage") {
            "0.5"
        } else {
            "3"
        };
        serde_json::json!([{"metric": {"namespace": "default", "pod": "p1"}, "value": [1.0, value]}])
    })
    .await
}

/// The per-pod PromQL path (the default `capacity`) sends the profile's
/// credentials on every query, and registration refuses a namespace the
/// profile does not admit, as it does for the summed queries.
#[tokio::test]
async fn per_pod_prometheus_reads_use_the_profile_and_its_namespaces() {
    let (addr, seen) = per_pod_prometheus().await;
    let config = ScalerConfig::parse(
        "profiles:\n  prom:\n    namespaces: [default]\n    prometheus:\n      bearerToken: {value: tok-pod}\n",
    )
    .expect("config");
    let server = start_server(config).await;
    let mut client = client(&server).await;
    let url = format!("http://{addr}");
    let md = [
        ("prometheusAddress", url.as_str()),
        ("targetBacklogPerReplica", "10"),
        ("runningPerReplica", "32"),
        ("authProfile", "prom"),
    ];
    let value = client
        .get_metrics(metrics_request(&object("per-pod", &md), ""))
        .await
        .expect("a value from the per-pod path")
        .into_inner();
    // W = 3 and R = 3 on one pod: the backlog floor W + T·R/C while μ is unknown.
    assert!(
        value.metric_values[0].metric_value_float >= 3.0,
        "{value:?}"
    );
    let recorded = seen.lock().expect("lock").clone();
    assert!(recorded.len() >= 3, "per-pod queries: {recorded:?}");
    assert!(
        recorded.iter().all(|(auth, _, _)| auth == "Bearer tok-pod"),
        "{recorded:?}"
    );
    let mut elsewhere = object("per-pod", &md);
    elsewhere.namespace = "other".to_owned();
    let status = client
        .get_metric_spec(elsewhere)
        .await
        .expect_err("a namespace the profile does not admit");
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains("prom"), "{status:?}");
}
