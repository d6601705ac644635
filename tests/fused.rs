//! The fused value end to end, through the gRPC server, with several terms
//! live at once: the KV-cache term read through a REAL Prometheus scraping
//! fake vLLM pods, engine and broker terms added in one trigger (fake pods
//! and a real SQS API server, moto), and `policy: capacity` with a broker.
//! Every expected value is computed from the README's formulas with numbers
//! chosen to be exact in binary, so the tests compare with `==`.

mod common;
#[path = "brokers/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;

use std::time::Duration;

use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use backlog_scaler::api::server::RunningServer;
use backlog_scaler::fake::ModelLoad;
use backlog_scaler::guard::config::ScalerConfig;
use backlog_scaler::proto::ScaledObjectRef;
use common::prometheus::PrometheusServer;
use common::*;

const SQS_SECRET: &str = "fused-sqs-secret-Q8v1";

/// `/explain` JSON of one ScaledObject's trigger.
async fn explain(server: &RunningServer, name: &str) -> serde_json::Value {
    let (_, body) = http_get(&format!("http://{}/explain?name={name}", server.http_addr)).await;
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    json["triggers"][0].clone()
}

/// GetMetrics until it answers `expected` (sources are polled in the
/// background and SQS counts settle); panics with the last answer and
/// `/explain` otherwise.
async fn wait_for_value(server: &RunningServer, object: &ScaledObjectRef, expected: f64) {
    let mut client = client(server).await;
    let mut last = None;
    for _ in 0..60 {
        match client.get_metrics(metrics_request(object, "")).await {
            Ok(answer) => {
                let value = answer.into_inner().metric_values[0].metric_value_float;
                if value == expected {
                    return;
                }
                last = Some(Ok(value));
            }
            Err(status) => last = Some(Err(status.message().to_owned())),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!(
        "{}: expected {expected}, last answer {last:?}\n{:#}",
        object.name,
        explain(server, &object.name).await
    );
}

/// An SQS queue on the shared moto server holding `messages` visible
/// messages; returns its URL.
async fn queue_with(name: &str, messages: usize) -> String {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(fixtures::moto().endpoint())
        .credentials_provider(Credentials::new("test", SQS_SECRET, None, None, "test"))
        .build();
    let sqs = aws_sdk_sqs::Client::from_conf(config);
    let url = sqs
        .create_queue()
        .queue_name(name)
        .send()
        .await
        .expect("create_queue")
        .queue_url()
        .expect("url")
        .to_owned();
    for i in 0..messages {
        sqs.send_message()
            .queue_url(&url)
            .message_body(format!("job-{i}"))
            .send()
            .await
            .expect("send");
    }
    url
}

fn sqs_config() -> ScalerConfig {
    ScalerConfig::parse(&format!(
        "profiles:\n  sqs:\n    aws:\n      accessKeyId: {{value: test}}\n      secretAccessKey: {{value: {SQS_SECRET}}}\n"
    ))
    .expect("config")
}

#[tokio::test]
async fn kv_cache_term_through_promql_wins_the_max() {
    // Two pods at 50 % KV cache with one request waiting each.
    let pods = pods(&[(1.0, 0.0), (1.0, 0.0)]).await;
    let prometheus = PrometheusServer::start(
        &pods.iter().map(|p| p.addr()).collect::<Vec<_>>(),
        Duration::from_secs(1),
    )
    .await;
    prometheus
        .wait_for_targets_up(2, Duration::from_secs(15))
        .await;
    prometheus
        .wait_for_value(
            "count(vllm:kv_cache_usage_perc)",
            Duration::from_secs(15),
            |v| v == 2.0,
        )
        .await;
    let server = start_server(ScalerConfig::default()).await;
    let url = prometheus.url();
    let object = object(
        "kv-promql",
        &[
            ("prometheusAddress", url.as_str()),
            ("modelName", MODEL),
            ("targetBacklogPerReplica", "10"),
            ("kvCacheTarget", "0.25"),
            ("pollIntervalSeconds", "1"),
        ],
    );
    // D = W = 2; D_kv = T·n·kv/kvCacheTarget = 10·2·0.5/0.25 = 40.
    wait_for_value(&server, &object, 40.0).await;
    let t = explain(&server, "kv-promql").await;
    let c = &t["components"];
    assert_eq!(c["kvCacheUsage"], 0.5, "{t:#}");
    assert_eq!(c["kvTerm"], 40.0, "{t:#}");
    assert_eq!(c["demand"], 2.0, "{t:#}");
    assert_eq!(c["replicasReporting"], 2, "{t:#}");
    assert_eq!(c["driver"], "kvCache", "{t:#}");
    let (_, metrics) = http_get(&format!("http://{}/metrics", server.http_addr)).await;
    assert!(
        metrics.contains("guard=\"kv_cache\"} 1"),
        "the KV guard fired: {metrics}"
    );

    // The usage drops to 12.5 %: the term follows it.
    for pod in &pods {
        pod.set_load(
            MODEL,
            ModelLoad {
                waiting: 1.0,
                running: 0.0,
                kv_cache_usage: 0.125,
            },
        );
    }
    // 10·2·0.125/0.25 = 10 > 2.
    wait_for_value(&server, &object, 10.0).await;
    server.shutdown().await;
}

#[tokio::test]
async fn engine_and_broker_terms_add_in_one_trigger() {
    let pods = pods(&[(3.0, 16.0), (2.0, 8.0)]).await;
    let queue = queue_with("fused-engine-and-broker", 6).await;
    let server = start_server(sqs_config()).await;
    let endpoint = fixtures::moto().endpoint();
    let targets = targets(&pods);
    let object = object(
        "fused",
        &[
            ("vllmTargets", &targets),
            ("modelName", MODEL),
            ("targetBacklogPerReplica", "10"),
            ("runningPerReplica", "32"),
            ("queueURL", &queue),
            ("awsRegion", "us-east-1"),
            ("awsEndpoint", &endpoint),
            ("authProfile", "sqs"),
            ("messageWeight", "2"),
            ("pollIntervalSeconds", "1"),
        ],
    );
    // B = W + T·R/C + w·Q = 5 + 10·24/32 + 2·6 = 5 + 7.5 + 12 = 24.5.
    wait_for_value(&server, &object, 24.5).await;
    let t = explain(&server, "fused").await;
    let c = &t["components"];
    assert_eq!(c["waiting"], 5.0, "{t:#}");
    assert_eq!(c["runningTerm"], 7.5, "{t:#}");
    assert_eq!(c["brokerTerm"], 12.0, "{t:#}");
    assert_eq!(c["demand"], 24.5, "{t:#}");
    assert_eq!(c["driver"], "demand", "{t:#}");
    let (_, metrics) = http_get(&format!("http://{}/metrics", server.http_addr)).await;
    for (component, value) in [
        ("waiting", 5.0),
        ("running_term", 7.5),
        ("broker_term", 12.0),
    ] {
        let label = format!("component=\"{component}\"}}");
        let exported: Vec<f64> = metrics
            .lines()
            .filter(|l| l.contains("name=\"fused\"") && l.contains(&label))
            .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse().ok()))
            .collect();
        assert_eq!(exported, [value], "{component}: {metrics}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn capacity_policy_adds_a_central_queue_drain_term_for_the_broker() {
    // Idle pods with 3 requests queued each and nothing finishing: no
    // arrivals (λ = 0), so only the queue terms count.
    let pods = pods(&[(3.0, 0.0), (3.0, 0.0)]).await;
    let queue = queue_with("fused-capacity", 12).await;
    let server = start_server(sqs_config()).await;
    let endpoint = fixtures::moto().endpoint();
    let targets = targets(&pods);
    let object = object(
        "capacity-broker",
        &[
            ("vllmTargets", &targets),
            ("modelName", MODEL),
            ("targetBacklogPerReplica", "10"),
            ("policy", "capacity"),
            ("drainRatePerReplica", "2"),
            ("drainHorizonSeconds", "3"),
            ("queueURL", &queue),
            ("awsRegion", "us-east-1"),
            ("awsEndpoint", &endpoint),
            ("authProfile", "sqs"),
            ("pollIntervalSeconds", "1"),
        ],
    );
    // D = T·((1 + h)·λ_peak/μ + Σ min(1, W_i/(μ·H)) + w·Q/(μ·H))
    //   = 10·(0 + 2·min(1, 3/6) + 12/6) = 10·(1 + 2) = 30.
    wait_for_value(&server, &object, 30.0).await;
    let t = explain(&server, "capacity-broker").await;
    let c = &t["components"];
    assert_eq!(c["brokerTerm"], 12.0, "{t:#}");
    assert_eq!(c["demand"], 30.0, "{t:#}");
    assert_eq!(c["capacity"]["podBacklogTerm"], 1.0, "{t:#}");
    assert_eq!(c["capacity"]["rateTerm"], 0.0, "{t:#}");
    assert_eq!(c["capacity"]["drainRate"], 2.0, "{t:#}");
    assert!(
        t["formula"].as_str().is_some_and(|f| f.contains("λ_peak")),
        "{t:#}"
    );
    server.shutdown().await;
}
