//! `mode: shadow` over real gRPC against fake vLLM pods: the trigger
//! computes and explains everything but answers KEDA 0 / inactive, even
//! while its signal is lost, so the ScaledObject's other triggers decide.

mod common;

use std::io::Write as _;
use std::time::{Duration, Instant};

use backlog_scaler::guard::config::ScalerConfig;
use backlog_scaler::proto::ScaledObjectRef;
use backlog_scaler::proto::external_scaler_client::ExternalScalerClient;
use common::*;
use tokio_stream::StreamExt;
use tonic::Code;
use tonic::transport::Channel;

/// What KEDA is answered: (GetMetrics float, int, IsActive).
async fn answers(
    client: &mut ExternalScalerClient<Channel>,
    object: &ScaledObjectRef,
) -> Result<(f64, i64, bool), tonic::Status> {
    let values = client
        .get_metrics(metrics_request(object, "backlog"))
        .await?
        .into_inner();
    let value = &values.metric_values[0];
    let active = client.is_active(object.clone()).await?.into_inner().result;
    Ok((value.metric_value_float, value.metric_value, active))
}

async fn explain(
    server: &backlog_scaler::api::server::RunningServer,
    name: &str,
) -> serde_json::Value {
    let url = format!(
        "http://{}/explain?namespace=default&name={name}",
        server.http_addr
    );
    let (status, body) = http_get(&url).await;
    assert_eq!(status, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let triggers = json["triggers"].as_array().expect("triggers");
    assert_eq!(triggers.len(), 1, "{body}");
    triggers[0].clone()
}

async fn self_metrics(server: &backlog_scaler::api::server::RunningServer) -> String {
    let (status, body) = http_get(&format!("http://{}/metrics", server.http_addr)).await;
    assert_eq!(status, 200);
    body
}

#[tokio::test]
async fn shadow_answers_zero_and_inactive_while_explain_and_metrics_show_the_decision() {
    let pods = pods(&[(50.0, 0.0)]).await;
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let md = [
        ("vllmTargets", targets.as_str()),
        ("targetBacklogPerReplica", "10"),
    ];
    let active = object("active", &md);
    let mut shadow_md = md.to_vec();
    shadow_md.push(("mode", "shadow"));
    let shadow = object("shadow", &shadow_md);

    // The same pods and formula, active: B = W = 50, so the shadow's 0 below
    // is the mode's doing, not the reading's.
    assert_eq!(
        answers(&mut client, &active).await.expect("active answers"),
        (50.0, 50, true)
    );

    let spec = client
        .get_metric_spec(shadow.clone())
        .await
        .expect("spec")
        .into_inner();
    let metric = &spec.metric_specs[0];
    assert_eq!(
        (
            metric.metric_name.as_str(),
            metric.target_size,
            metric.target_size_float
        ),
        ("backlog", 10, 10.0),
        "GetMetricSpec is the active trigger's"
    );
    assert_eq!(
        answers(&mut client, &shadow).await.expect("shadow answers"),
        (0.0, 0, false)
    );

    let t = explain(&server, "shadow").await;
    assert_eq!(t["mode"], "shadow", "{t}");
    assert_eq!(t["state"], "ok", "{t}");
    assert_eq!(t["value"], 50.0, "{t}");
    assert_eq!(t["active"], true, "{t}");
    assert_eq!(t["desiredReplicas"], 5, "{t}");
    assert_eq!(t["components"]["waiting"], 50.0, "{t}");
    assert_eq!(explain(&server, "active").await["mode"], "active");

    let metrics = self_metrics(&server).await;
    for needle in [
        "backlog_scaler_shadow_desired_replicas{namespace=\"default\",name=\"shadow\",metric=\"backlog\"} 5",
        "backlog_scaler_desired_replicas{namespace=\"default\",name=\"shadow\",metric=\"backlog\"} 5",
        "backlog_scaler_backlog{namespace=\"default\",name=\"shadow\",metric=\"backlog\"} 50",
    ] {
        assert!(metrics.contains(needle), "missing {needle} in\n{metrics}");
    }
    assert!(
        !metrics.contains(
            "backlog_scaler_shadow_desired_replicas{namespace=\"default\",name=\"active\""
        ),
        "an active trigger has no shadow series:\n{metrics}"
    );

    // external-push: the active trigger pushes `true` at once; the shadow one never does.
    let mut pushes = client
        .stream_is_active(active.clone())
        .await
        .expect("stream")
        .into_inner();
    let first = tokio::time::timeout(Duration::from_secs(3), pushes.next()).await;
    assert!(
        matches!(first, Ok(Some(Ok(ref r))) if r.result),
        "the active trigger pushes true: {first:?}"
    );
    let mut silent = client
        .stream_is_active(shadow.clone())
        .await
        .expect("stream")
        .into_inner();
    let none = tokio::time::timeout(Duration::from_millis(1500), silent.next()).await;
    assert!(none.is_err(), "a shadow trigger pushed {none:?}");
    drop((pushes, silent));
    server.shutdown().await;
}

#[tokio::test]
async fn a_lost_signal_in_shadow_mode_answers_zero_not_unavailable_and_explain_says_unavailable() {
    let mut pods = pods(&[(50.0, 0.0)]).await;
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let shadow = object(
        "shadow",
        &[
            ("vllmTargets", targets.as_str()),
            ("targetBacklogPerReplica", "10"),
            ("pollIntervalSeconds", "1"),
            ("maxSignalAgeSeconds", "2"),
            ("mode", "shadow"),
        ],
    );
    assert_eq!(
        answers(&mut client, &shadow).await.expect("answers"),
        (0.0, 0, false)
    );
    assert_eq!(explain(&server, "shadow").await["value"], 50.0);

    pods[0].stop().await;
    let stopped_at = Instant::now();
    let mut unavailable = None;
    while stopped_at.elapsed() < Duration::from_secs(10) {
        assert_eq!(
            answers(&mut client, &shadow).await.map_err(|s| s.code()),
            Ok((0.0, 0, false)),
            "a shadow trigger answers 0 / inactive, never an error"
        );
        let t = explain(&server, "shadow").await;
        if t["state"] == "unavailable" {
            unavailable = Some(t);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let t = unavailable.expect("/explain says unavailable once maxSignalAgeSeconds passed");
    assert_eq!(t["mode"], "shadow", "{t}");
    assert!(
        t["reason"]
            .as_str()
            .is_some_and(|r| r.contains("maxSignalAgeSeconds")),
        "{t}"
    );
    assert!(t.get("value").is_none(), "no value while unavailable: {t}");
    // Still 0 / false after the loss, not only before it was noticed.
    assert_eq!(
        answers(&mut client, &shadow).await.map_err(|s| s.code()),
        Ok((0.0, 0, false))
    );
    // The background evaluation records the loss just after `/explain`'s
    // own clock sees it.
    let metrics = eventually(Duration::from_secs(3), || async {
        let metrics = self_metrics(&server).await;
        metrics
            .contains(
                "backlog_scaler_trigger_available{namespace=\"default\",name=\"shadow\",metric=\"backlog\"} 0",
            )
            .then_some(metrics)
    })
    .await
    .expect("backlog_scaler_trigger_available is 0 while the signal is lost");
    assert!(
        !metrics.contains(
            "backlog_scaler_shadow_desired_replicas{namespace=\"default\",name=\"shadow\""
        ),
        "no stale desired replicas while the signal is lost:\n{metrics}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn an_unknown_mode_is_invalid_argument_naming_the_key() {
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let bogus = object(
        "bogus",
        &[
            ("vllmTargets", "http://127.0.0.1:1/metrics"),
            ("targetBacklogPerReplica", "10"),
            ("mode", "bogus"),
        ],
    );
    let spec = client
        .get_metric_spec(bogus.clone())
        .await
        .expect_err("refused");
    let metrics = client
        .get_metrics(metrics_request(&bogus, "backlog"))
        .await
        .expect_err("refused");
    for status in [spec, metrics] {
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        for part in ["mode", "bogus", "`active` or `shadow`"] {
            assert!(
                status.message().contains(part),
                "{part} not in {}",
                status.message()
            );
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn check_prints_the_zero_it_answers_and_the_decision_it_keeps() {
    let pods = pods(&[(50.0, 0.0)]).await;
    let mut file = tempfile::NamedTempFile::new().expect("tmp");
    writeln!(
        file,
        "vllmTargets: {}\ntargetBacklogPerReplica: 10\nmode: shadow\n",
        targets(&pods)
    )
    .expect("write");
    let path = file.path().to_str().expect("utf8").to_owned();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_backlog-scaler"))
            .args(["check", "--metadata", &path])
            .output()
            .expect("binary runs")
    })
    .await
    .expect("join");
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{out}");
    assert!(out.contains("mode shadow"), "{out}");
    assert!(
        out.contains(
            "would answer: GetMetrics backlog=0  IsActive=false  (shadow; it decides B = 50, active true, desired replicas ceil(B/T) = 5)"
        ),
        "{out}"
    );
}
