//! Broker backlog through the whole server: a Deployment at zero replicas
//! (no engine pods, no engine metrics) activates from an SQS queue served by
//! a real SQS API server (moto) on loopback; credentials come from a
//! scaler-side profile, are bound to namespaces, and never leak.

mod common;
#[path = "brokers/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;

use std::time::{Duration, Instant};

use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use backlog_scaler::guard::config::ScalerConfig;
use common::*;
use fixtures::Moto;
use tokio_stream::StreamExt;
use tonic::Code;

const SECRET: &str = "s3cr3t-key-that-must-not-leak";

fn sqs(endpoint: &str) -> aws_sdk_sqs::Client {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new("test", SECRET, None, None, "test"))
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

#[tokio::test]
async fn broker_backlog_activates_a_deployment_with_no_engine_pods() {
    let mut moto = Moto::start();
    let endpoint = moto.endpoint();
    let client_sqs = sqs(&endpoint);
    let queue_url = client_sqs
        .create_queue()
        .queue_name("embed-jobs")
        .send()
        .await
        .expect("create_queue")
        .queue_url()
        .expect("url")
        .to_owned();

    let config = ScalerConfig::parse(&format!(
        "profiles:\n  sqs-batch:\n    namespaces: [batch]\n    aws:\n      accessKeyId: {{value: test}}\n      secretAccessKey: {{value: {SECRET}}}\n"
    ))
    .expect("config");
    let server = start_server(config).await;
    let mut client = client(&server).await;
    let md = [
        ("queueURL", queue_url.as_str()),
        ("awsRegion", "us-east-1"),
        ("awsEndpoint", endpoint.as_str()),
        ("authProfile", "sqs-batch"),
        ("messageWeight", "2"),
        ("targetBacklogPerReplica", "5"),
        ("activationBacklog", "0"),
        ("pollIntervalSeconds", "1"),
        ("maxSignalAgeSeconds", "3"),
    ];
    let mut object = object("embedder", &md);
    object.namespace = "batch".to_owned();

    let spec = client
        .get_metric_spec(object.clone())
        .await
        .expect("spec")
        .into_inner();
    assert_eq!(spec.metric_specs[0].target_size_float, 5.0);
    let empty = client
        .get_metrics(metrics_request(&object, ""))
        .await
        .expect("value")
        .into_inner();
    assert_eq!(
        empty.metric_values[0].metric_value_float, 0.0,
        "an empty queue is a measured 0"
    );
    assert!(
        !client
            .is_active(object.clone())
            .await
            .expect("active")
            .into_inner()
            .result
    );

    // Zero replicas: only the queue can wake the Deployment, and a push does it.
    let mut stream = client
        .stream_is_active(object.clone())
        .await
        .expect("stream")
        .into_inner();
    for i in 0..3 {
        client_sqs
            .send_message()
            .queue_url(&queue_url)
            .message_body(format!("job {i}"))
            .send()
            .await
            .expect("send");
    }
    let pushed = tokio::time::timeout(Duration::from_secs(4), stream.next())
        .await
        .expect("pushed within a poll interval")
        .expect("open")
        .expect("ok");
    assert!(pushed.result);
    let value = client
        .get_metrics(metrics_request(&object, ""))
        .await
        .expect("value")
        .into_inner();
    assert_eq!(
        value.metric_values[0].metric_value_float, 6.0,
        "w·Q = 2 × 3"
    );

    let (_, explain) = http_get(&format!("http://{}/explain", server.http_addr)).await;
    assert!(explain.contains("\"brokerTerm\":6.0"), "{explain}");
    assert!(explain.contains("visible"), "{explain}");
    let (_, metrics) = http_get(&format!("http://{}/metrics", server.http_addr)).await;
    for text in [&explain, &metrics] {
        assert!(!text.contains(SECRET), "the secret leaked");
    }

    // The profile is bound to namespace `batch`.
    let intruder = object_in("team-x", &md);
    let status = client.get_metric_spec(intruder).await.expect_err("refused");
    assert_eq!(status.code(), Code::PermissionDenied);
    assert!(
        status.message().contains("sqs-batch") && !status.message().contains(SECRET),
        "{}",
        status.message()
    );

    // The broker goes away: the held value, then UNAVAILABLE; never 0.
    moto.kill();
    let killed = Instant::now();
    let mut unavailable = false;
    while killed.elapsed() < Duration::from_secs(8) {
        match client.get_metrics(metrics_request(&object, "")).await {
            Ok(v) => assert_eq!(
                v.into_inner().metric_values[0].metric_value_float,
                6.0,
                "held, not 0"
            ),
            Err(status) => {
                assert_eq!(status.code(), Code::Unavailable, "{status:?}");
                assert!(!status.message().contains(SECRET));
                unavailable = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(unavailable, "UNAVAILABLE after maxSignalAgeSeconds");
    server.shutdown().await;
}

fn object_in(namespace: &str, md: &[(&str, &str)]) -> backlog_scaler::proto::ScaledObjectRef {
    let mut o = object("intruder", md);
    o.namespace = namespace.to_owned();
    o
}
