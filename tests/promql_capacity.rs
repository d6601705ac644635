//! `policy: capacity` on the PromQL path against a REAL Prometheus: the same
//! fake vLLM pods read directly by one trigger and through Prometheus
//! (per-pod queries, the `pod` label from the scrape config) by another
//! agree on λ̂, μ and D and read the same token totals per pod (μ in
//! tokens, decision 0027); a token query that fails costs only the tokens;
//! and a finished counter that disappears from Prometheus never lowers B
//! (docs/decisions/0024).

mod common;

use std::time::{Duration, Instant};

use backlog_scaler::fake::FakeVllmPod;
use backlog_scaler::guard::config::ScalerConfig;
use common::prometheus::PrometheusServer;
use common::*;

/// Prometheus scrapes the pods every second; the triggers poll every second.
const SCRAPE: Duration = Duration::from_secs(1);

/// `/explain` JSON of one ScaledObject's trigger.
async fn explain(
    server: &backlog_scaler::api::server::RunningServer,
    name: &str,
) -> serde_json::Value {
    let (_, body) = http_get(&format!("http://{}/explain?name={name}", server.http_addr)).await;
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    json["triggers"][0].clone()
}

/// What the capacity policy estimated: (λ̂, λ_peak, μ, D).
fn estimate(t: &serde_json::Value) -> (f64, f64, f64, f64) {
    let c = &t["components"]["capacity"];
    let get = |v: &serde_json::Value| {
        v.as_f64()
            .unwrap_or_else(|| panic!("capacity terms: {t:#}"))
    };
    (
        get(&c["smoothedRate"]),
        get(&c["peakRate"]),
        get(&c["drainRate"]),
        get(&t["value"]),
    )
}

/// Per pod of a trigger's engine reading in `/explain`: (target, finished,
/// generated tokens, prompt tokens).
fn pod_totals(t: &serde_json::Value) -> Vec<(String, f64, Option<f64>, Option<f64>)> {
    let source = t["sources"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["reading"]["kind"] == "engine"))
        .unwrap_or_else(|| panic!("an engine reading: {t:#}"));
    let pods = source["reading"]["pods"].as_array().expect("pods");
    pods.iter()
        .map(|p| {
            (
                p["target"].as_str().expect("target").to_owned(),
                p["finishedTotal"].as_f64().expect("finished"),
                p["generationTokensTotal"].as_f64(),
                p["promptTokensTotal"].as_f64(),
            )
        })
        .collect()
}

/// 2 requests per pod every 100 ms (20 req/s a pod), finished with vLLM's
/// own counter; the gauges stay where `set` put them.
fn drive(pods: &[FakeVllmPod]) {
    for pod in pods {
        pod.update(|s| {
            for _ in 0..2 {
                s.record_request(MODEL, 0.2, 1.0, 100, 50);
            }
        });
    }
}

/// Pod `pod`'s exposition without its finished counter (as an exporter
/// that lost it would serve it).
fn hide_counter(pod: &FakeVllmPod) {
    let body: String = pod
        .render()
        .lines()
        .filter(|l| !l.contains("vllm:request_success"))
        .map(|l| format!("{l}\n"))
        .collect();
    pod.set_body_override(Some(body));
}

#[tokio::test]
async fn promql_capacity_agrees_with_direct_scrapes_and_a_lost_counter_never_lowers_b() {
    let pods = pods(&[(2.0, 8.0), (1.0, 8.0)]).await;
    let prometheus =
        PrometheusServer::start(&pods.iter().map(|p| p.addr()).collect::<Vec<_>>(), SCRAPE).await;
    prometheus
        .wait_for_targets_up(2, Duration::from_secs(15))
        .await;
    // Load first, so both triggers start on a steady rate.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        drive(&pods);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    prometheus
        .wait_for_value(
            "count(sum by (pod) (vllm:request_success_total))",
            Duration::from_secs(15),
            |v| v == 2.0,
        )
        .await;

    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let url = prometheus.url();
    let common = [
        ("modelName", MODEL),
        ("targetBacklogPerReplica", "10"),
        ("runningPerReplica", "32"),
        // The prior μ (learning stays on: it is used until 3 windows of
        // samples, 3 minutes, longer than this test).
        ("drainRatePerReplica", "5"),
        ("arrivalSmoothingSeconds", "10"),
        ("pollIntervalSeconds", "1"),
    ];
    // No `policy`: capacity is the default on both paths.
    let mut direct_md = vec![("vllmTargets", targets.as_str())];
    direct_md.extend(common);
    let mut promql_md = vec![("prometheusAddress", url.as_str())];
    promql_md.extend(common);
    let direct = object("direct", &direct_md);
    let promql = object("promql", &promql_md);
    // A token query Prometheus refuses (a parse error, HTTP 400).
    let mut broken_md = promql_md.clone();
    broken_md.push(("podGenerationTokensQuery", "sum by (namespace, pod) (("));
    let broken = object("broken", &broken_md);

    // 25 s of steady load: 40 req/s over the two pods.
    let mut readings: Vec<(f64, f64)> = Vec::new();
    let started = Instant::now();
    let mut last_poll = Instant::now() - Duration::from_secs(1);
    while started.elapsed() < Duration::from_secs(25) {
        drive(&pods);
        if last_poll.elapsed() >= Duration::from_secs(1) {
            last_poll = Instant::now();
            let _ = client.get_metrics(metrics_request(&direct, "")).await;
            let _ = client.get_metrics(metrics_request(&promql, "")).await;
            let _ = client.get_metrics(metrics_request(&broken, "")).await;
            let t = explain(&server, "promql").await;
            if t["components"]["capacity"].is_object() {
                readings.push((estimate(&t).0, estimate(&t).3));
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let d = explain(&server, "direct").await;
    let p = explain(&server, "promql").await;
    assert!(
        p["sources"].to_string().contains("per pod"),
        "the PromQL trigger reads per pod: {p:#}"
    );
    assert!(
        readings.len() >= 10,
        "several PromQL readings: {readings:?}"
    );
    let (d_rate, d_peak, d_mu, d_value) = estimate(&d);
    let (p_rate, p_peak, p_mu, p_value) = estimate(&p);
    eprintln!(
        "direct λ̂ {d_rate:.2} peak {d_peak:.2} μ {d_mu} D {d_value:.2}; PromQL λ̂ {p_rate:.2} peak {p_peak:.2} μ {p_mu} D {p_value:.2}"
    );
    // Both see the pods' ≤ 40 req/s (the drive loop's own time makes it
    // less: 34–35 req/s on an idle machine).
    assert!((20.0..=44.0).contains(&d_rate), "direct λ̂ {d_rate}: {d:#}");
    // The tolerance is the scrape lag: Prometheus holds each counter as
    // of its last scrape (≤ 1 s old), and a 1 s poll sees 0 or 2 new
    // scrapes now and then; the EWMA (τ = 10 s) passes ~10 % of such a
    // step to λ̂, and the peak holds the highest of them.
    let close = |a: f64, b: f64, tolerance: f64| (a - b).abs() <= tolerance * a.max(b);
    assert!(
        close(d_rate, p_rate, 0.15),
        "λ̂ direct {d_rate} vs PromQL {p_rate}\n{d:#}\n{p:#}"
    );
    assert!(
        close(d_peak, p_peak, 0.25),
        "λ_peak direct {d_peak} vs PromQL {p_peak}"
    );
    assert_eq!(d_mu, p_mu, "μ: the same prior, the same (no) samples yet");
    assert!(
        close(d_value, p_value, 0.25),
        "D direct {d_value} vs PromQL {p_value}\n{d:#}\n{p:#}"
    );
    // And D is the rate's, far above the backlog formula W + T·R/C = 3 + 10·16/32 = 8.
    assert!(p_value > 50.0, "{p:#}");

    // Token totals per pod: each request adds 100 prompt and 50 generated
    // tokens with its finished count, and Prometheus scrapes a pod's page
    // at once, so on both paths G = 50·F and P = 100·F exactly; across the
    // paths the totals differ by the scrape lag and the moments of the two
    // polls (≤ 4 s of one pod's 20 req/s).
    let direct_pods = pod_totals(&d);
    let promql_pods = pod_totals(&p);
    assert_eq!(promql_pods.len(), 2, "{p:#}");
    for (i, pod) in pods.iter().enumerate() {
        let by_target = |all: &[(String, f64, Option<f64>, Option<f64>)], target: &str| {
            all.iter()
                .find(|(t, ..)| t == target)
                .cloned()
                .unwrap_or_else(|| panic!("{target} in {all:?}"))
        };
        let (_, d_f, d_g, d_p) = by_target(&direct_pods, &pod.metrics_url());
        let (_, p_f, p_g, p_p) = by_target(&promql_pods, &format!("default/pod-{i}"));
        eprintln!(
            "pod {i}: direct F {d_f} G {d_g:?} P {d_p:?}; PromQL F {p_f} G {p_g:?} P {p_p:?}"
        );
        assert!(p_f > 100.0, "pod {i} finished {p_f}");
        for (path, f, g, p) in [("direct", d_f, d_g, d_p), ("PromQL", p_f, p_g, p_p)] {
            assert_eq!(g, Some(50.0 * f), "{path} pod {i} generated tokens");
            assert_eq!(p, Some(100.0 * f), "{path} pod {i} prompt tokens");
        }
        assert!(
            (d_f - p_f).abs() <= 80.0,
            "pod {i}: F direct {d_f} vs PromQL {p_f}"
        );
    }
    // The refused token query: that trigger reads every pod, without
    // generated tokens (μ stays in requests), and decides as the other.
    let b = explain(&server, "broken").await;
    let broken_pods = pod_totals(&b);
    assert_eq!(broken_pods.len(), 2, "{b:#}");
    for (target, f, g, p) in &broken_pods {
        assert_eq!(*g, None, "{target}: {b:#}");
        assert_eq!(*p, Some(100.0 * f), "{target}: prompt tokens still read");
    }
    let (_, _, _, b_value) = estimate(&b);
    assert!(
        close(b_value, p_value, 0.25),
        "D with a refused token query {b_value} vs {p_value}\n{b:#}"
    );
    assert_eq!(b["components"]["capacity"]["backlogFloor"], false, "{b:#}");

    // Pod 1's counter disappears from its exposition, so from Prometheus
    // (a staleness marker at the next scrape): λ̂ is held, B never falls.
    let before = p_value;
    let lost_at = Instant::now();
    let mut lowest = f64::INFINITY;
    let mut last_poll = Instant::now() - Duration::from_secs(1);
    while lost_at.elapsed() < Duration::from_secs(8) {
        drive(&pods);
        hide_counter(&pods[1]);
        if last_poll.elapsed() >= Duration::from_secs(1) {
            last_poll = Instant::now();
            let value = client
                .get_metrics(metrics_request(&promql, ""))
                .await
                .expect("a value while the counter is lost")
                .into_inner()
                .metric_values[0]
                .metric_value_float;
            lowest = lowest.min(value);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let series = prometheus
        .query_vector(r#"vllm:request_success_total{pod="pod-1"}"#)
        .await;
    assert!(
        series.is_empty(),
        "the counter is gone from Prometheus: {series:?}"
    );
    let p = explain(&server, "promql").await;
    eprintln!("B before the counter was lost {before:.2}, lowest after {lowest:.2}");
    assert!(
        lowest >= 0.97 * before,
        "B fell from {before} to {lowest} with a counter missing\n{p:#}"
    );
    assert_eq!(
        p["components"]["capacity"]["backlogFloor"], true,
        "a missing counter floors D at the backlog formula: {p:#}"
    );
    server.shutdown().await;
}
