//! Failover gives no low number (issue 14 item 2): two real scaler
//! processes read the same fake pods; KEDA's call pattern (GetMetricSpec,
//! then GetMetrics every few seconds) runs against one, then moves to the
//! other, which registers the trigger cold. With `policy: capacity`
//! (`drainRatePerReplica` set), the newly used replica never answers more
//! than 10 % below the one that stays warm, and never below the `backlog`
//! formula while its `/explain` says it is warming; the same holds for the
//! default policy without a drain rate (`capacity` learning μ).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use backlog_scaler::fake::{FakeVllmPod, FinishReason};
use backlog_scaler::proto::ScaledObjectRef;
use backlog_scaler::proto::external_scaler_client::ExternalScalerClient;
use common::*;
use tonic::transport::Channel;

/// Each pod's finished counter grows at `per_pod` requests per second,
/// continuously (every 50 ms), as a steady fleet's would.
fn drive_finished(pods: Arc<Vec<FakeVllmPod>>, per_pod: f64) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let started = Instant::now();
        loop {
            let finished = 1000.0 + per_pod * started.elapsed().as_secs_f64();
            for pod in pods.iter() {
                pod.update(|state| {
                    *state.model_mut(MODEL).success_mut(FinishReason::Stop) = finished
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

async fn value(client: &mut ExternalScalerClient<Channel>, object: &ScaledObjectRef) -> f64 {
    client
        .get_metrics(metrics_request(object, ""))
        .await
        .expect("a value")
        .into_inner()
        .metric_values[0]
        .metric_value_float
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replica_keda_moves_to_answers_no_lower_than_the_warm_one() {
    // Two pods, each 30 waiting and 16 running of C = 32, finishing 1 req/s:
    // λ = 2 req/s over the fleet. T = 10, μ = 2 req/s per replica, H = 30 s:
    //   capacity D = T·((1+0.2)·λ/μ + Σ min(1, W_i/(μ·H))) = 10·(1.2 + 2·0.5) = 22
    //   backlog  D = W + T·R/C = 60 + 10·32/32 = 70
    // so the floor binds on the cold replica while it warms (15 s).
    let pods = Arc::new(pods(&[(30.0, 16.0), (30.0, 16.0)]).await);
    let targets = targets(&pods);
    let driver = drive_finished(pods.clone(), 1.0);
    let common = [
        ("vllmTargets", targets.as_str()),
        ("modelName", MODEL),
        ("targetBacklogPerReplica", "10"),
        ("runningPerReplica", "32"),
        ("pollIntervalSeconds", "2"),
    ];
    let mut capacity_md = common.to_vec();
    capacity_md.extend([("policy", "capacity"), ("drainRatePerReplica", "2")]);
    let capacity = object("chat-capacity", &capacity_md);
    let default = object("chat-default", &common);
    let backlog_value = 70.0;

    let (a, b) = (Serve::start(), Serve::start());
    let (mut to_a, mut to_b) = (a.client().await, b.client().await);
    // KEDA on replica A, long enough for its rate estimate to be warm.
    for object in [&capacity, &default] {
        to_a.get_metric_spec(object.clone()).await.expect("spec");
    }
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        value(&mut to_a, &capacity).await;
        value(&mut to_a, &default).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let warm = a.explain("chat-capacity").await;
    assert!(warm.get("warming").is_none(), "A is warm: {warm:#}");
    let a_value = value(&mut to_a, &capacity).await;
    assert!(
        (a_value - 22.0).abs() <= 2.2,
        "A answers the capacity formula: {warm:#}"
    );

    // KEDA moves to replica B: GetMetricSpec, then GetMetrics every 2 s.
    // A stays up (its trigger registered): the number B must not undercut.
    let mut rows = Vec::new();
    let mut saw_warming = false;
    for object in [&capacity, &default] {
        to_b.get_metric_spec(object.clone()).await.expect("spec");
    }
    let switched = Instant::now();
    while switched.elapsed() < Duration::from_secs(26) {
        for object in [&capacity, &default] {
            let from_b = value(&mut to_b, object).await;
            let from_a = value(&mut to_a, object).await;
            let explained = b.explain(&object.name).await;
            let warming = explained.get("warming").is_some();
            if warming {
                saw_warming = true;
                assert_eq!(explained["warming"]["state"], "warming", "{explained:#}");
                assert!(
                    from_b >= backlog_value,
                    "{}: B answered {from_b} below the backlog formula's {backlog_value} while warming: {explained:#}",
                    object.name
                );
            }
            assert!(
                from_b >= 0.9 * from_a,
                "{}: B answered {from_b}, more than 10 % below A's {from_a}: {explained:#}",
                object.name
            );
            rows.push((
                object.name.clone(),
                switched.elapsed().as_secs(),
                from_a,
                from_b,
                warming,
            ));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    driver.abort();
    assert!(saw_warming, "B never said it was warming: {rows:?}");
    // B warmed up: its capacity answer came down to A's, not stuck on the floor.
    let last = rows
        .iter()
        .rev()
        .find(|(name, ..)| name == "chat-capacity")
        .expect("rows");
    assert!(!last.4, "B still warming after 26 s: {rows:?}");
    assert!((last.3 - last.2).abs() <= 0.1 * last.2, "{rows:?}");
    assert!(last.3 < backlog_value, "{rows:?}");
    // Without a drain rate the default policy is `capacity` learning μ
    // (docs/decisions/0022); it warmed on B too, under the same floor.
    assert!(
        rows.iter()
            .any(|(name, _, _, _, warming)| name == "chat-default" && *warming),
        "{rows:?}"
    );
}
