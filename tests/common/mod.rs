//! Shared helpers for the integration tests: a scaler on free loopback
//! ports, fake vLLM pods, and a tonic client generated from our proto.
#![allow(dead_code)]

pub mod prometheus;
pub mod serve;

#[allow(unused_imports)] // not every suite starts the binary
pub use serve::Serve;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use backlog_scaler::api::server::{RunningServer, ServerOptions};
use backlog_scaler::fake::{FakeVllmPod, ModelLoad};
use backlog_scaler::guard::config::ScalerConfig;
use backlog_scaler::proto::external_scaler_client::ExternalScalerClient;
use backlog_scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use tonic::transport::Channel;

pub const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";

pub async fn start_server(config: ScalerConfig) -> RunningServer {
    RunningServer::start(ServerOptions::new(
        "127.0.0.1:0".parse().expect("addr"),
        "127.0.0.1:0".parse().expect("addr"),
        config,
    ))
    .await
    .expect("server starts")
}

pub async fn client(server: &RunningServer) -> ExternalScalerClient<Channel> {
    let channel = Channel::from_shared(format!("http://{}", server.grpc_addr))
        .expect("uri")
        .connect()
        .await
        .expect("connects");
    ExternalScalerClient::new(channel)
}

/// Start pods with the given (waiting, running) loads for MODEL.
pub async fn pods(loads: &[(f64, f64)]) -> Vec<FakeVllmPod> {
    let mut pods = Vec::new();
    for &(waiting, running) in loads {
        let pod = FakeVllmPod::start().await.expect("pod starts");
        set(&pod, waiting, running);
        pods.push(pod);
    }
    pods
}

pub fn set(pod: &FakeVllmPod, waiting: f64, running: f64) {
    pod.set_load(
        MODEL,
        ModelLoad {
            waiting,
            running,
            kv_cache_usage: 0.5,
        },
    );
}

pub fn targets(pods: &[FakeVllmPod]) -> String {
    pods.iter()
        .map(|p| p.metrics_url())
        .collect::<Vec<_>>()
        .join(",")
}

pub fn object(name: &str, metadata: &[(&str, &str)]) -> ScaledObjectRef {
    ScaledObjectRef {
        name: name.to_owned(),
        namespace: "default".to_owned(),
        scaler_metadata: metadata
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<HashMap<_, _>>(),
    }
}

pub fn metrics_request(object: &ScaledObjectRef, metric_name: &str) -> GetMetricsRequest {
    GetMetricsRequest {
        scaled_object_ref: Some(object.clone()),
        metric_name: metric_name.to_owned(),
    }
}

/// GetMetrics' value for `object` (its first metric), or the status.
pub async fn value(
    client: &mut ExternalScalerClient<Channel>,
    object: &ScaledObjectRef,
) -> Result<f64, tonic::Status> {
    client
        .get_metrics(metrics_request(object, ""))
        .await
        .map(|r| r.into_inner().metric_values[0].metric_value_float)
}

/// The first value `object` answers within 10 s (its cold start), if any.
pub async fn first_value(
    client: &ExternalScalerClient<Channel>,
    object: &ScaledObjectRef,
) -> Option<f64> {
    eventually(Duration::from_secs(10), || {
        let mut client = client.clone();
        let object = object.clone();
        async move { value(&mut client, &object).await.ok() }
    })
    .await
}

/// Poll `f` every 50 ms until it returns Some or `timeout` passes.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some(v) = f().await {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

pub async fn http_get(url: &str) -> (u16, String) {
    let response = reqwest::get(url).await.expect("admin reachable");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}
