//! The admin HTTP server and the gRPC health service, as an operator and
//! kubelet use them.

mod common;

use backlog_scaler::guard::config::ScalerConfig;
use common::*;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

#[tokio::test]
async fn explain_metrics_and_probes_show_every_number() {
    let pods = pods(&[(10.0, 32.0), (20.0, 32.0), (15.0, 30.0)]).await;
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let md = [
        ("vllmTargets", targets.as_str()),
        ("targetBacklogPerReplica", "10"),
        ("runningPerReplica", "32"),
    ];
    let llama = object("llama", &md);
    client
        .get_metrics(metrics_request(&llama, "backlog"))
        .await
        .expect("value");
    let mut other = object("other", &md);
    other.namespace = "team-b".to_owned();
    client
        .get_metrics(metrics_request(&other, "backlog"))
        .await
        .expect("value");

    let base = format!("http://{}", server.http_addr);
    let (status, body) = http_get(&format!("{base}/explain?namespace=default&name=llama")).await;
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let triggers = json["triggers"].as_array().expect("triggers");
    assert_eq!(triggers.len(), 1, "{body}");
    let t = &triggers[0];
    assert_eq!(t["state"], "ok");
    assert_eq!(t["value"], 74.375);
    assert_eq!(t["desiredReplicas"], 8);
    assert_eq!(t["active"], true);
    assert_eq!(t["components"]["waiting"], 45.0);
    assert_eq!(t["components"]["running"], 94.0);
    assert_eq!(t["components"]["runningTerm"], 29.375);
    assert_eq!(
        t["formula"],
        "D = W + T·R/C = 45 + 10·94/32 = 74.375; max → D; B = 74.375"
    );
    let pods_json = t["sources"][0]["reading"]["pods"]
        .as_array()
        .expect("per-pod readings");
    assert_eq!(pods_json.len(), 3);

    let (_, all) = http_get(&format!("{base}/explain")).await;
    let all: serde_json::Value = serde_json::from_str(&all).expect("JSON");
    assert_eq!(all["triggers"].as_array().map(Vec::len), Some(2));

    let (status, metrics) = http_get(&format!("{base}/metrics")).await;
    assert_eq!(status, 200);
    for needle in [
        "backlog_scaler_backlog{namespace=\"default\",name=\"llama\",metric=\"backlog\"} 74.375",
        "component=\"running_term\"",
        "backlog_scaler_desired_replicas{namespace=\"default\",name=\"llama\",metric=\"backlog\"} 8",
        "backlog_scaler_active{",
        "outcome=\"ok\"",
        "backlog_scaler_poll_duration_seconds_bucket",
        "backlog_scaler_grpc_requests_total{method=\"GetMetrics\",code=\"OK\"}",
        "backlog_scaler_triggers 2",
        "backlog_scaler_pollers 1",
    ] {
        assert!(metrics.contains(needle), "missing {needle} in\n{metrics}");
    }

    assert_eq!(http_get(&format!("{base}/healthz")).await.0, 200);
    assert_eq!(http_get(&format!("{base}/readyz")).await.0, 200);

    let channel = tonic::transport::Channel::from_shared(format!("http://{}", server.grpc_addr))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut health = HealthClient::new(channel);
    for service in ["", "externalscaler.ExternalScaler"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.to_owned(),
            })
            .await
            .expect("health")
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32, "{service}");
    }
    server.shutdown().await;
}
