//! The scaler driven over real gRPC, as KEDA drives it, against fake vLLM
//! pods serving vLLM's exact exposition text on loopback.

mod common;

use std::time::{Duration, Instant};

use backlog_scaler::guard::config::ScalerConfig;
use common::*;
use tokio_stream::StreamExt;
use tonic::Code;

#[tokio::test]
async fn spec_metrics_and_activity_follow_the_formula() {
    let pods = pods(&[(10.0, 32.0), (20.0, 32.0), (15.0, 30.0)]).await;
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let object = object(
        "llama",
        &[
            ("scalerAddress", "backlog-scaler.keda:9090"),
            ("vllmTargets", &targets),
            ("modelName", MODEL),
            ("targetBacklogPerReplica", "10"),
            ("runningPerReplica", "32"),
        ],
    );

    let spec = client
        .get_metric_spec(object.clone())
        .await
        .expect("spec")
        .into_inner();
    assert_eq!(spec.metric_specs.len(), 1);
    let metric = &spec.metric_specs[0];
    assert_eq!(
        metric.metric_name,
        "backlog-meta-llama-llama-3-1-8b-instruct"
    );
    assert_eq!((metric.target_size, metric.target_size_float), (10, 10.0));

    // B = 45 + 10·94/32 = 74.375
    let values = client
        .get_metrics(metrics_request(&object, &metric.metric_name))
        .await
        .expect("metrics")
        .into_inner();
    assert_eq!(values.metric_values.len(), 1);
    assert_eq!(values.metric_values[0].metric_value_float, 74.375);
    assert_eq!(values.metric_values[0].metric_value, 75);
    assert!(
        client
            .is_active(object.clone())
            .await
            .expect("active")
            .into_inner()
            .result
    );

    // KEDA may send the name in another case.
    let upper = metric.metric_name.to_uppercase();
    let values = client
        .get_metrics(metrics_request(&object, &upper))
        .await
        .expect("case-insensitive")
        .into_inner();
    assert_eq!(values.metric_values[0].metric_value_float, 74.375);

    let wrong = client
        .get_metrics(metrics_request(&object, "something-else"))
        .await
        .expect_err("unknown metric");
    assert_eq!(wrong.code(), Code::NotFound);
    assert!(
        wrong.message().contains("something-else"),
        "{}",
        wrong.message()
    );

    // An idle fleet is a measured zero: inactive, value 0.
    for pod in &pods {
        set(pod, 0.0, 0.0);
    }
    let zero = eventually(Duration::from_secs(8), || {
        let mut client = client.clone();
        let object = object.clone();
        let name = metric.metric_name.clone();
        async move {
            let v = client
                .get_metrics(metrics_request(&object, &name))
                .await
                .ok()?
                .into_inner();
            (v.metric_values[0].metric_value_float == 0.0).then_some(())
        }
    })
    .await;
    assert!(zero.is_some(), "value never dropped to the measured 0");
    assert!(
        !client
            .is_active(object)
            .await
            .expect("inactive")
            .into_inner()
            .result
    );
    server.shutdown().await;
}

#[tokio::test]
async fn bad_metadata_is_invalid_argument_naming_the_key() {
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let url = "http://127.0.0.1:1/metrics";
    type Case<'a> = (Vec<(&'a str, &'a str)>, Vec<&'a str>);
    let cases: Vec<Case> = vec![
        (
            vec![("vllmTargets", url)],
            vec!["targetBacklogPerReplica", "required"],
        ),
        (
            vec![("vllmTargets", url), ("targetBacklogPerReplica", "-1")],
            vec!["targetBacklogPerReplica", "-1", "from 0.001"],
        ),
        (
            vec![("vllmTargets", url), ("targetBacklogPerReplica", "abc")],
            vec!["targetBacklogPerReplica", "abc"],
        ),
        (
            vec![
                ("vllmTargets", url),
                ("targetBacklogPerReplica", "10"),
                ("targetBacklog", "10"),
            ],
            vec!["unknown metadata key `targetBacklog`", "did you mean"],
        ),
        (
            vec![
                ("vllmTargets", "http:///metrics"),
                ("targetBacklogPerReplica", "10"),
            ],
            vec!["vllmTargets", "no host"],
        ),
    ];
    for (metadata, needles) in cases {
        let object = object("bad", &metadata);
        let statuses = [
            client
                .get_metric_spec(object.clone())
                .await
                .expect_err("spec"),
            client
                .get_metrics(metrics_request(&object, "backlog"))
                .await
                .expect_err("metrics"),
            client.is_active(object.clone()).await.expect_err("active"),
        ];
        for status in statuses {
            assert_eq!(
                status.code(),
                Code::InvalidArgument,
                "{metadata:?}: {status:?}"
            );
            for needle in &needles {
                assert!(
                    status.message().contains(needle),
                    "{:?} lacks {needle:?}",
                    status.message()
                );
            }
        }
    }
    server.shutdown().await;
}

/// A name or namespace no Kubernetes object can have is a hand-written probe
/// (KEDA always sends real ones): refused, never registered as a trigger
/// named `/` or one whose `ns/evil` + `x` reads as `ns` + `evil/x`.
#[tokio::test]
async fn a_name_no_kubernetes_object_has_is_invalid_argument() {
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let metadata = [
        ("vllmTargets", "http://127.0.0.1:1/metrics"),
        ("targetBacklogPerReplica", "10"),
    ];
    for (name, namespace, field, problem) in [
        ("", "default", "name", "is empty"),
        ("x", "", "namespace", "is empty"),
        ("x", "ns/evil", "namespace", "holds a `/`"),
        (" ", "default", "name", "holds a `/`, whitespace"),
    ] {
        let mut object = object(name, &metadata);
        object.namespace = namespace.to_owned();
        let status = client.get_metric_spec(object).await.expect_err("refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(
            status
                .message()
                .contains(&format!("scaledObjectRef.{field} {problem}")),
            "{}",
            status.message()
        );
    }
    assert!(server.cache.entries().is_empty(), "nothing registered");
    server.shutdown().await;
}

#[tokio::test]
async fn lost_signal_holds_then_answers_unavailable_never_zero_and_recovers() {
    let mut pods = pods(&[(12.0, 0.0)]).await;
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let object = object(
        "failsafe",
        &[
            ("vllmTargets", &targets),
            ("targetBacklogPerReplica", "10"),
            ("pollIntervalSeconds", "1"),
            ("maxSignalAgeSeconds", "3"),
        ],
    );
    let value =
        |client: &mut backlog_scaler::proto::external_scaler_client::ExternalScalerClient<_>| {
            let request = metrics_request(&object, "backlog");
            let mut client = client.clone();
            async move {
                client
                    .get_metrics(request)
                    .await
                    .map(|r| r.into_inner().metric_values[0].metric_value_float)
            }
        };
    assert_eq!(value(&mut client).await.expect("first value"), 12.0);

    pods[0].stop().await;
    let stopped_at = Instant::now();
    // Held: the last good value, never 0, until maxSignalAgeSeconds.
    let mut saw_unavailable = None;
    while stopped_at.elapsed() < Duration::from_secs(8) {
        match value(&mut client).await {
            Ok(v) => {
                assert_eq!(
                    v, 12.0,
                    "a lost signal must hold its last good value, not read as {v}"
                );
                assert!(
                    saw_unavailable.is_none(),
                    "a value came back after UNAVAILABLE with the pod down"
                );
            }
            Err(status) => {
                assert_eq!(status.code(), Code::Unavailable, "{status:?}");
                assert!(
                    status.message().contains("maxSignalAgeSeconds=3"),
                    "{}",
                    status.message()
                );
                assert!(
                    status.message().contains("failsafe"),
                    "{}",
                    status.message()
                );
                saw_unavailable.get_or_insert(stopped_at.elapsed());
                let active = client
                    .is_active(object.clone())
                    .await
                    .expect_err("IsActive too");
                assert_eq!(active.code(), Code::Unavailable);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let after = saw_unavailable.expect("UNAVAILABLE once maxSignalAgeSeconds passed");
    // The last good reading was at most one interval old when the pod stopped.
    assert!(
        after >= Duration::from_secs(2),
        "UNAVAILABLE too early: {after:?}"
    );
    assert!(
        after <= Duration::from_millis(4500),
        "UNAVAILABLE too late: {after:?}"
    );

    // GetMetricSpec never depends on the source.
    client
        .get_metric_spec(object.clone())
        .await
        .expect("spec while down");

    set(&pods[0], 7.0, 0.0);
    pods[0].restart().await.expect("restart");
    let resumed = eventually(Duration::from_secs(5), || {
        let fut = value(&mut client);
        async move { fut.await.ok().filter(|v| *v == 7.0) }
    })
    .await;
    assert_eq!(resumed, Some(7.0), "values resume after the pod returns");
    server.shutdown().await;
}

#[tokio::test]
async fn malformed_upstream_data_is_unavailable_and_counted_not_zero() {
    let pods = pods(&[(3.0, 0.0)]).await;
    pods[0].set_body_override(Some(
        "<html><body>502 Bad Gateway</body></html>\n".to_owned(),
    ));
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let object = object(
        "garbage",
        &[("vllmTargets", &targets), ("targetBacklogPerReplica", "10")],
    );
    let status = client
        .get_metrics(metrics_request(&object, "backlog"))
        .await
        .expect_err("garbage is not a value");
    assert_eq!(status.code(), Code::Unavailable);
    // The reason names the missing gauge and the skipped line.
    assert!(
        status.message().contains("no vllm:num_requests_waiting")
            && status
                .message()
                .contains("(1 malformed lines, first at line 1"),
        "{}",
        status.message()
    );
    // Counted: the pod's polls are parse errors, and not one is an `ok`.
    let (_, metrics) = http_get(&format!("http://{}/metrics", server.http_addr)).await;
    let polls = |outcome: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| {
                l.starts_with("backlog_scaler_polls_total{")
                    && l.contains(&pods[0].metrics_url())
                    && l.contains(&format!("outcome=\"{outcome}\""))
            })
            .map(|l| {
                l.rsplit_once(' ')
                    .and_then(|(_, v)| v.parse::<f64>().ok())
                    .expect("a counter value")
            })
            .sum()
    };
    assert!(polls("parse_error") >= 1.0, "{metrics}");
    assert_eq!(polls("ok"), 0.0, "{metrics}");
    server.shutdown().await;
}

#[tokio::test]
async fn cold_start_waits_for_the_first_reading_then_gives_up_within_budget() {
    // A target that accepts connections and never answers.
    let hung = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let hung_addr = hung.local_addr().expect("addr");
    let _keep = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = hung.accept().await {
            held.push(socket);
        }
    });
    let config = ScalerConfig::parse("coldStartBudgetMillis: 700\n").expect("config");
    let server = start_server(config).await;
    let mut client = client(&server).await;
    let url = format!("http://{hung_addr}/metrics");
    let cold = object(
        "cold",
        &[("vllmTargets", &url), ("targetBacklogPerReplica", "10")],
    );
    let started = Instant::now();
    let status = client
        .get_metrics(metrics_request(&cold, "backlog"))
        .await
        .expect_err("no reading yet");
    let waited = started.elapsed();
    assert_eq!(status.code(), Code::Unavailable);
    assert!(
        status.message().contains("cold-start budget"),
        "{}",
        status.message()
    );
    assert!(
        waited >= Duration::from_millis(650) && waited < Duration::from_millis(2000),
        "{waited:?}"
    );

    // A healthy new trigger answers within the budget on its first call.
    let pods = pods(&[(4.0, 0.0)]).await;
    let targets = targets(&pods);
    let warm = object(
        "warm",
        &[("vllmTargets", &targets), ("targetBacklogPerReplica", "10")],
    );
    let v = client
        .get_metrics(metrics_request(&warm, "backlog"))
        .await
        .expect("first call gets the first reading")
        .into_inner();
    assert_eq!(v.metric_values[0].metric_value_float, 4.0);
    server.shutdown().await;
}

#[tokio::test]
async fn stream_is_active_pushes_edges_within_one_poll_interval() {
    let pods = pods(&[(0.0, 0.0), (0.0, 0.0)]).await;
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let object = object(
        "push",
        &[
            ("vllmTargets", &targets),
            ("targetBacklogPerReplica", "10"),
            ("activationBacklog", "2"),
            ("pollIntervalSeconds", "1"),
        ],
    );
    // Warm the trigger so the stream starts from a known inactive state.
    assert!(
        !client
            .is_active(object.clone())
            .await
            .expect("inactive")
            .into_inner()
            .result
    );
    let mut stream = client
        .stream_is_active(object.clone())
        .await
        .expect("stream")
        .into_inner();
    let nothing = tokio::time::timeout(Duration::from_millis(1500), stream.next()).await;
    assert!(
        nothing.is_err(),
        "an inactive trigger must not push: {nothing:?}"
    );

    // W = 2 is not > activationBacklog 2; W = 3 is.
    set(&pods[0], 2.0, 0.0);
    let nothing = tokio::time::timeout(Duration::from_millis(1500), stream.next()).await;
    assert!(
        nothing.is_err(),
        "B == activationBacklog is inactive: {nothing:?}"
    );
    set(&pods[1], 1.0, 0.0);
    let raised = Instant::now();
    let message = tokio::time::timeout(Duration::from_secs(3), stream.next())
        .await
        .expect("pushed within one poll interval (+ scrape)")
        .expect("stream open")
        .expect("ok message");
    assert!(message.result);
    assert!(
        raised.elapsed() <= Duration::from_millis(1500),
        "{:?}",
        raised.elapsed()
    );

    // Staying active sends nothing more (repeated `true` resets KEDA's cooldown).
    let nothing = tokio::time::timeout(Duration::from_millis(1500), stream.next()).await;
    assert!(nothing.is_err(), "no repeat while active: {nothing:?}");

    // Down and up again: a second edge.
    set(&pods[0], 0.0, 0.0);
    set(&pods[1], 0.0, 0.0);
    tokio::time::sleep(Duration::from_millis(2200)).await;
    set(&pods[0], 9.0, 0.0);
    let again = tokio::time::timeout(Duration::from_secs(3), stream.next())
        .await
        .expect("second edge")
        .expect("open")
        .expect("ok");
    assert!(again.result);

    // A new stream on an active trigger gets `true` at once.
    let mut second = client
        .stream_is_active(object.clone())
        .await
        .expect("stream")
        .into_inner();
    let first = tokio::time::timeout(Duration::from_millis(500), second.next())
        .await
        .expect("immediate")
        .expect("open")
        .expect("ok");
    assert!(first.result);

    // Shutdown ends open streams with OK (KEDA then reconnects quickly).
    let shutdown = tokio::spawn(server.shutdown());
    let end = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("stream ends");
    assert!(end.is_none(), "stream must end cleanly (OK), got {end:?}");
    shutdown.await.expect("shutdown completes");
}

#[tokio::test]
async fn idle_triggers_are_dropped_unless_a_stream_holds_them() {
    let pods = pods(&[(1.0, 0.0)]).await;
    let config = ScalerConfig::parse("idleTimeoutSeconds: 1\n").expect("config");
    let server = start_server(config).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let held = object(
        "held",
        &[("vllmTargets", &targets), ("targetBacklogPerReplica", "10")],
    );
    let idle = object(
        "idle",
        &[("vllmTargets", &targets), ("targetBacklogPerReplica", "10")],
    );
    client.get_metric_spec(idle.clone()).await.expect("spec");
    let stream = client
        .stream_is_active(held.clone())
        .await
        .expect("stream")
        .into_inner();
    assert_eq!(server.cache.entries().len(), 2);

    let dropped = eventually(Duration::from_secs(5), || async {
        let names: Vec<_> = server
            .cache
            .entries()
            .iter()
            .map(|e| e.name.clone())
            .collect();
        (names == ["held"]).then_some(())
    })
    .await;
    assert!(
        dropped.is_some(),
        "the idle trigger is dropped, the streamed one kept"
    );

    // The client goes away: the stream's hold ends and the trigger idles out.
    drop(stream);
    let gone = eventually(Duration::from_secs(5), || async {
        server.cache.entries().is_empty().then_some(())
    })
    .await;
    assert!(gone.is_some(), "trigger dropped after its stream closed");
    let (_, metrics) = http_get(&format!("http://{}/metrics", server.http_addr)).await;
    assert!(metrics.contains("backlog_scaler_triggers 0"), "{metrics}");
    assert!(metrics.contains("backlog_scaler_pollers 0"), "{metrics}");
    server.shutdown().await;
}

#[tokio::test]
async fn past_max_triggers_a_new_trigger_is_resource_exhausted_naming_the_limit() {
    let pods = pods(&[(5.0, 0.0)]).await;
    let config = ScalerConfig::parse("maxTriggers: 1\nidleTimeoutSeconds: 1\n").expect("config");
    let server = start_server(config).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let metadata = [
        ("vllmTargets", targets.as_str()),
        ("targetBacklogPerReplica", "10"),
    ];
    let first = object("first", &metadata);
    let second = object("second", &metadata);

    let spec = client
        .get_metric_spec(first.clone())
        .await
        .expect("first spec")
        .into_inner();
    let metric = spec.metric_specs[0].metric_name.clone();
    let refused = client
        .get_metric_spec(second.clone())
        .await
        .expect_err("second refused");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(
        refused.message(),
        "trigger default/second is refused: the scaler's trigger count (1) has reached its limit (`maxTriggers` in --config) of 1; raise it or run another scaler"
    );
    let refused = client
        .get_metrics(metrics_request(&second, &metric))
        .await
        .expect_err("second's metrics refused");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    let refused = client
        .is_active(second.clone())
        .await
        .expect_err("second's activity refused");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");

    // The registered trigger keeps answering.
    let values = client
        .get_metrics(metrics_request(&first, &metric))
        .await
        .expect("first still answers")
        .into_inner();
    assert_eq!(values.metric_values[0].metric_value_float, 5.0);
    let (_, metrics) = http_get(&format!("http://{}/metrics", server.http_addr)).await;
    assert!(metrics.contains("backlog_scaler_triggers 1"), "{metrics}");
    assert!(
        metrics.contains("backlog_scaler_max_triggers 1"),
        "{metrics}"
    );

    // Once `first` idles out, KEDA's next call for `second` registers it.
    let admitted = eventually(Duration::from_secs(5), || {
        let mut client = client.clone();
        let second = second.clone();
        async move { client.get_metric_spec(second).await.ok() }
    })
    .await;
    assert!(admitted.is_some(), "second admitted after first idled out");
    let names: Vec<_> = server
        .cache
        .entries()
        .iter()
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(names, ["second"]);
    server.shutdown().await;
}

#[tokio::test]
async fn shared_sources_are_polled_once() {
    let pods = pods(&[(5.0, 0.0)]).await;
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    for name in ["a", "b", "c", "d"] {
        let object = object(
            name,
            &[
                ("vllmTargets", &targets),
                ("targetBacklogPerReplica", "10"),
                ("pollIntervalSeconds", "1"),
            ],
        );
        client
            .get_metrics(metrics_request(&object, "backlog"))
            .await
            .expect("value");
    }
    assert_eq!(server.cache.entries().len(), 4);
    let before = pods[0].scrapes();
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let scrapes = pods[0].scrapes() - before;
    assert!(
        (2..=4).contains(&scrapes),
        "4 triggers on one source at 1/s for 3 s: {scrapes} scrapes"
    );
    server.shutdown().await;
}
