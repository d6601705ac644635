//! Graceful shutdown of the real binary (issue 14 item 4): on SIGTERM
//! `/readyz` goes 503 first, new triggers are refused while registered ones
//! keep answering, an in-flight call finishes, the open StreamIsActive
//! stream then ends with OK, and the process exits 0.

mod common;

use std::time::{Duration, Instant};

use common::*;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tonic::Code;

/// `/readyz`'s status, 0 when it does not answer.
async fn readyz(serve: &Serve) -> u16 {
    match reqwest::get(format!("http://{}/readyz", serve.http)).await {
        Ok(response) => response.status().as_u16(),
        Err(_) => 0,
    }
}
/// A listener that accepts and never answers: a trigger on it is in its
/// cold start for the whole budget.
async fn silent_pod() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    format!("http://{addr}/metrics")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_turns_readiness_off_then_ends_the_stream_ok_and_exits_zero() {
    let pods = pods(&[(30.0, 0.0)]).await;
    let targets = targets(&pods);
    let serve = Serve::start();
    let mut client = serve.client().await;
    assert_eq!(readyz(&serve).await, 200);
    let busy = object(
        "busy",
        &[
            ("vllmTargets", targets.as_str()),
            ("targetBacklogPerReplica", "10"),
            ("pollIntervalSeconds", "1"),
        ],
    );
    client
        .get_metric_spec(busy.clone())
        .await
        .expect("registered");
    let mut stream = client
        .stream_is_active(busy.clone())
        .await
        .expect("stream opens")
        .into_inner();
    let first = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("a push within 10 s")
        .expect("no error")
        .expect("a message");
    assert!(first.result, "W = 30 is active");

    // A call in flight at SIGTERM: a new trigger waiting out its cold start.
    let cold = object(
        "cold",
        &[
            ("vllmTargets", silent_pod().await.as_str()),
            ("targetBacklogPerReplica", "10"),
        ],
    );
    let in_flight = {
        let mut client = client.clone();
        let cold = cold.clone();
        tokio::spawn(async move { client.get_metrics(metrics_request(&cold, "")).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    let terminated = Instant::now();
    serve.terminate();
    let stream_end = tokio::spawn(async move {
        let end = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                match stream.message().await {
                    Ok(Some(_)) => continue,
                    other => return other.map(|_| ()),
                }
            }
        })
        .await;
        (end, Instant::now())
    });

    // Readiness goes false first, while the stream is still open.
    let not_ready = eventually(Duration::from_secs(3), || async {
        (readyz(&serve).await == 503).then(Instant::now)
    })
    .await
    .expect("/readyz answers 503 after SIGTERM");
    assert!(
        !stream_end.is_finished(),
        "the stream ended before readiness"
    );
    // gRPC health says so too, for the server as a whole ("", what a
    // Kubernetes `grpc:` probe without `service` asks) and for the scaler.
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", serve.grpc))
        .expect("uri")
        .connect()
        .await
        .expect("connects");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    for service in ["", "externalscaler.ExternalScaler"] {
        let status = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.to_owned(),
            })
            .await
            .expect("health answers while draining")
            .into_inner()
            .status;
        assert_eq!(
            status,
            tonic_health::pb::health_check_response::ServingStatus::NotServing as i32,
            "health of `{service}` while draining"
        );
    }

    // Draining: the registered trigger still answers, a new one is refused
    // (retryable: KEDA's next call reaches the replica that stays).
    let value = client
        .get_metrics(metrics_request(&busy, ""))
        .await
        .expect("a registered trigger answers while draining");
    assert_eq!(value.into_inner().metric_values[0].metric_value_float, 30.0);
    let refused = client
        .get_metric_spec(object("late", &[("vllmTargets", targets.as_str())]))
        .await
        .expect_err("a new trigger is refused");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("shutting down"),
        "{}",
        refused.message()
    );

    // The in-flight call finished with its own answer, not a cut connection.
    let answered = in_flight.await.expect("task").expect_err("cold start");
    assert_eq!(answered.code(), Code::Unavailable, "{answered:?}");
    assert!(
        answered.message().contains("cold-start budget"),
        "{}",
        answered.message()
    );

    // Then the stream ends with OK, and the process exits 0.
    let (end, ended_at) = stream_end.await.expect("task");
    let end = end.expect("the stream ends within 20 s");
    assert!(end.is_ok(), "the stream ended with {end:?}");
    assert!(
        ended_at > not_ready,
        "readiness went false before the stream ended"
    );
    let mut serve = serve;
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = serve.child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "still running:\n{}", serve.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(0), "{}", serve.log());
    let took = terminated.elapsed();
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(15),
        "drain took {took:?}"
    );
    let log = serve.log();
    for line in [
        "not ready; new triggers refused",
        "\"poller stopped\"",
        "pollers stopped",
    ] {
        assert!(log.contains(line), "{line}:\n{log}");
    }
}
