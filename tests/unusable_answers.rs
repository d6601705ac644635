//! An upstream that answers, but not with what the trigger needs, is a
//! failed reading like any other, against the real binary: a pod without
//! a gauge its trigger's metadata needs (`runningPerReplica`,
//! `kvCacheTarget`) is that pod's `parse` failure, held then left out
//! under the quorum, or, alone, the source's `parse_error`; a summed PromQL
//! answer that is not a count (NaN) is the query's `parse_error`. Each is
//! counted in `backlog_scaler_polls_total`, logged once, and shown as every
//! other failed poll is.

mod common;

use std::time::{Duration, Instant};

use backlog_scaler::fake::FakeVllmPod;
use common::*;

/// The pod's current exposition without the lines naming `family`.
fn without(pod: &FakeVllmPod, family: &str) -> String {
    pod.render()
        .lines()
        .filter(|l| !l.contains(family))
        .map(|l| format!("{l}\n"))
        .collect()
}

async fn metrics(serve: &Serve) -> String {
    http_get(&format!("http://{}/metrics", serve.http)).await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_without_the_running_gauge_is_that_pods_parse_failure_held_then_left_out() {
    // W = 2 + 3, R = 16 + 16: B = 5 + 10·32/32 = 15. Without the second
    // pod: (2 + 10·16/32) · 2/1 = 14.
    let pods = pods(&[(2.0, 16.0), (3.0, 16.0)]).await;
    let serve = Serve::start();
    let mut client = serve.client().await;
    let object = object(
        "fliprun",
        &[
            ("vllmTargets", targets(&pods).as_str()),
            ("targetBacklogPerReplica", "10"),
            ("runningPerReplica", "32"),
            ("policy", "backlog"),
            ("pollIntervalSeconds", "1"),
            ("maxSignalAgeSeconds", "3"),
        ],
    );
    let first = first_value(&client, &object).await;
    assert_eq!(first, Some(15.0));

    let sick = pods[1].metrics_url();
    pods[1].set_body_override(Some(without(&pods[1], "vllm:num_requests_running")));
    let failed_at = Instant::now();
    let mut held = false;
    let left_out = loop {
        let v = value(&mut client, &object)
            .await
            .unwrap_or_else(|status| panic!("one pod of two lacks a gauge: {status:?}"));
        let explained = serve.explain("fliprun").await;
        let pod = explained["pods"]["pods"]
            .as_array()
            .and_then(|pods| pods.iter().find(|p| p["target"] == sick.as_str()))
            .cloned();
        if let Some(pod) = pod {
            assert_eq!(pod["reason"], "parse", "{explained:#}");
            assert_eq!(explained["state"], "degraded", "{explained:#}");
            let error = pod["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("no running-requests gauge (runningPerReplica is set)"),
                "{error}"
            );
            match pod["state"].as_str() {
                Some("held") => {
                    assert_eq!(v, 15.0, "the held reading counts: {explained:#}");
                    held = true;
                }
                Some("left_out") if v == 14.0 => break failed_at.elapsed(),
                _ => {}
            }
        }
        assert!(
            failed_at.elapsed() < Duration::from_secs(12),
            "never left out; last value {v}: {explained:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(held, "never shown held");
    assert!(left_out >= Duration::from_secs(2), "{left_out:?}");
    let exposed = metrics(&serve).await;
    for series in [
        "backlog_scaler_trigger_degraded{namespace=\"default\",name=\"fliprun\",metric=\"backlog\"} 1",
        "backlog_scaler_trigger_degraded_pods{namespace=\"default\",name=\"fliprun\",metric=\"backlog\",state=\"left_out\",reason=\"parse\"} 1",
    ] {
        assert!(exposed.contains(series), "{series}:\n{exposed}");
    }
    assert_eq!(
        serve.lines_with(&["pod scrape failed", "no running-requests gauge"]),
        1,
        "{}",
        serve.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_pod_without_the_kv_gauge_is_a_parse_error_held_then_unavailable() {
    let pods = pods(&[(2.0, 16.0)]).await;
    let serve = Serve::start();
    let mut client = serve.client().await;
    let object = object(
        "kv",
        &[
            ("vllmTargets", targets(&pods).as_str()),
            ("targetBacklogPerReplica", "10"),
            ("kvCacheTarget", "0.8"),
            ("policy", "backlog"),
            ("pollIntervalSeconds", "1"),
            ("maxSignalAgeSeconds", "3"),
        ],
    );
    let first = first_value(&client, &object).await;
    // max(W = 2, T·n·kv/target = 10·1·0.5/0.8 = 6.25).
    assert_eq!(first, Some(6.25));

    pods[0].set_body_override(Some(without(&pods[0], "cache_usage_perc")));
    let failed_at = Instant::now();
    let status = loop {
        match value(&mut client, &object).await {
            Ok(v) => assert_eq!(v, 6.25, "held until maxSignalAgeSeconds"),
            Err(status) => break status,
        }
        assert!(failed_at.elapsed() < Duration::from_secs(10), "never lost");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(failed_at.elapsed() >= Duration::from_secs(2));
    assert_eq!(status.code(), tonic::Code::Unavailable);
    // As every failed poll reads: the source, the age, the failed polls and
    // the pod's own error.
    let url = pods[0].metrics_url();
    let message = status.message();
    assert!(
        message.starts_with(&format!(
            "default/kv metric backlog: vllm {url}: last good reading is "
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "failed polls; last error: {url}: no KV-cache usage gauge (kvCacheTarget is set)"
        )),
        "{message}"
    );
    let exposed = metrics(&serve).await;
    assert!(
        exposed.contains(&format!(
            "backlog_scaler_polls_total{{source=\"vllm {url}\",outcome=\"parse_error\"}}"
        )),
        "{exposed}"
    );
    assert_eq!(
        serve.lines_with(&["source read failed", "no KV-cache usage gauge"]),
        1,
        "{}",
        serve.log()
    );
}

/// A stand-in Prometheus answering `NAN` with NaN and every other query 1.
async fn nan_prometheus() -> String {
    let app = axum::Router::new().route(
        "/api/v1/query",
        axum::routing::get(
            |query: axum::extract::Query<std::collections::HashMap<String, String>>| async move {
                let value = match query.get("query").map(String::as_str) {
                    Some("NAN") => "NaN",
                    _ => "1",
                };
                axum::Json(serde_json::json!({
                    "status": "success",
                    "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1.0, value]}]}
                }))
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
    format!("http://{addr}/")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summed_query_answering_nan_is_a_counted_and_logged_parse_error() {
    let prometheus = nan_prometheus().await;
    let serve = Serve::start();
    let mut client = serve.client().await;
    let object = object(
        "nan",
        &[
            ("prometheusAddress", prometheus.as_str()),
            ("waitingQuery", "NAN"),
            ("replicasQuery", "vector(1)"),
            ("targetBacklogPerReplica", "10"),
            ("pollIntervalSeconds", "1"),
        ],
    );
    client.get_metric_spec(object.clone()).await.expect("spec");
    let started = Instant::now();
    let mut last = None;
    while started.elapsed() < Duration::from_secs(4) {
        last = Some(value(&mut client, &object).await);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let status = last.expect("asked").expect_err("NaN is no count");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert!(
        status
            .message()
            .contains("waitingQuery `NAN` returned NaN for {}, not a count"),
        "{}",
        status.message()
    );
    let label = format!("prometheus {prometheus} NAN");
    let exposed = metrics(&serve).await;
    assert!(
        exposed.contains(&format!(
            "backlog_scaler_polls_total{{source=\"{label}\",outcome=\"parse_error\"}}"
        )),
        "{exposed}"
    );
    assert!(
        !exposed.contains(&format!(
            "backlog_scaler_polls_total{{source=\"{label}\",outcome=\"ok\"}}"
        )),
        "{exposed}"
    );
    assert_eq!(
        serve.lines_with(&["source read failed", "returned NaN"]),
        1,
        "{}",
        serve.log()
    );
}
