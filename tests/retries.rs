//! Retries, backoff and quiet logs (issue 14 item 3), against the real
//! binary: a pod that answers 503 twice then 200 is read within the poll
//! (alone, and as one pod of three); a 404 target backs off with growing
//! waits shown in `/explain`, and a trigger with new metadata ends the
//! backoff; a RabbitMQ refusing connections polled many times (lapin's own
//! lines off, or, asked for, each once), and a warning repeated on every
//! poll, each log a bounded number of lines.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A scrape target answering its n-th request (from 0) with `status(n)`
/// and `body`; returns its URL and the request count.
async fn scripted_pod(
    body: String,
    status: impl Fn(usize) -> u16 + Send + Sync + 'static,
) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let hits = Arc::new(AtomicUsize::new(0));
    let (counter, status, body) = (hits.clone(), Arc::new(status), Arc::new(body));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (counter, status, body) = (counter.clone(), status.clone(), body.clone());
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 2048];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(n) if n > 0 => request.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let code = status(counter.fetch_add(1, Ordering::SeqCst));
                let text = if code == 200 { body.as_str() } else { "error" };
                let response = format!(
                    "HTTP/1.1 {code} X\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (format!("http://{addr}/metrics"), hits)
}

/// A vLLM pod's body with `waiting` requests waiting.
async fn vllm_body(waiting: f64) -> String {
    let pod = pods(&[(waiting, 4.0)]).await;
    pod[0].render()
}

fn engine_trigger(name: &str, targets: &str, interval: &'static str) -> ScaledObjectRefOwned {
    object(
        name,
        &[
            ("vllmTargets", targets),
            ("targetBacklogPerReplica", "10"),
            ("pollIntervalSeconds", interval),
        ],
    )
}

type ScaledObjectRefOwned = backlog_scaler::proto::ScaledObjectRef;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_answering_503_twice_then_200_is_read_within_the_poll() {
    let (url, hits) = scripted_pod(vllm_body(7.0).await, |n| if n < 2 { 503 } else { 200 }).await;
    let serve = Serve::start();
    let mut client = serve.client().await;
    let flaky = engine_trigger("flaky", &url, "5");
    client.get_metric_spec(flaky.clone()).await.expect("spec");
    // The first call waits out the cold start (2 s): the poll's retries
    // (at most 100 + 200 ms of waits) fit in it, far inside the 4 s deadline.
    let started = Instant::now();
    let value = client
        .get_metrics(metrics_request(&flaky, ""))
        .await
        .expect("the first poll succeeded after two 503s")
        .into_inner()
        .metric_values[0]
        .metric_value_float;
    assert_eq!(value, 7.0);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(hits.load(Ordering::SeqCst), 3, "two 503s and one 200");
    let explained = serve.explain("flaky").await;
    assert_eq!(explained["state"], "ok", "{explained:#}");
    assert_eq!(explained["sources"][0]["consecutiveFailures"], 0);
    let (_, metrics) = http_get(&format!("http://{}/metrics", serve.http)).await;
    assert!(
        !metrics.contains("outcome=\"upstream_error\""),
        "no failed poll was counted:\n{metrics}"
    );
    assert_eq!(
        serve.lines_with(&["source read failed"]),
        0,
        "{}",
        serve.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pod_of_three_answering_503_twice_is_retried_on_its_own() {
    let steady = pods(&[(5.0, 4.0), (6.0, 4.0)]).await;
    let (url, hits) = scripted_pod(vllm_body(7.0).await, |n| if n < 2 { 503 } else { 200 }).await;
    let targets = format!("{},{url}", targets(&steady));
    let serve = Serve::start();
    let mut client = serve.client().await;
    let fleet = engine_trigger("fleet", &targets, "5");
    client.get_metric_spec(fleet.clone()).await.expect("spec");
    let value = client
        .get_metrics(metrics_request(&fleet, ""))
        .await
        .expect("a value")
        .into_inner()
        .metric_values[0]
        .metric_value_float;
    assert_eq!(value, 18.0, "all three pods counted: 5 + 6 + 7");
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    // Only the flaky pod was asked again: the steady ones once each.
    assert_eq!(
        steady.iter().map(|p| p.scrapes()).collect::<Vec<_>>(),
        [1, 1]
    );
    let explained = serve.explain("fleet").await;
    assert_eq!(explained["state"], "ok", "{explained:#}");
    assert!(
        explained.get("pods").is_none(),
        "no pod held: {explained:#}"
    );
    assert_eq!(
        serve.lines_with(&["pod scrape failed"]),
        0,
        "{}",
        serve.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_target_backs_off_with_growing_waits_until_new_metadata_uses_it() {
    let (url, hits) = scripted_pod(String::new(), |_| 404).await;
    let serve = Serve::start();
    let mut client = serve.client().await;
    let missing = engine_trigger("missing", &url, "1");
    client.get_metric_spec(missing.clone()).await.expect("spec");
    let started = Instant::now();
    // (delaySeconds, nextAttemptInSeconds) as /explain shows them.
    let mut seen: Vec<(f64, f64)> = Vec::new();
    while started.elapsed() < Duration::from_secs(16) {
        let _ = client.get_metrics(metrics_request(&missing, "")).await;
        let explained = serve.explain("missing").await;
        let source = &explained["sources"][0];
        if let Some(backoff) = source.get("backoff") {
            assert_eq!(backoff["state"], "backing off", "{explained:#}");
            let reason = backoff["reason"].as_str().expect("reason");
            assert!(reason.contains("404"), "{reason}");
            let delay = backoff["delaySeconds"].as_f64().expect("delay");
            let next = backoff["nextAttemptInSeconds"].as_f64().expect("next");
            assert!(next <= delay + 1e-9, "{explained:#}");
            if seen.last().is_none_or(|(d, _)| *d != delay) {
                seen.push((delay, next));
            }
        }
        assert_eq!(explained["state"], "unavailable", "{explained:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let delays: Vec<f64> = seen.iter().map(|(d, _)| *d).collect();
    // interval·2^n less at most 20 %: ~2, ~4, ~8 s.
    assert!(delays.len() >= 3, "{delays:?}");
    for (n, pair) in delays.windows(2).enumerate() {
        assert!(pair[1] > pair[0], "growing: {delays:?}");
        let full = 2f64.powi(n as i32 + 2);
        assert!(pair[1] <= full && pair[1] >= 0.8 * full, "{delays:?}");
    }
    let polled = hits.load(Ordering::SeqCst);
    // Not retried within a poll (permanent), and 4 polls in 16 s, not 16.
    assert!((3..=5).contains(&polled), "{polled} polls");
    assert_eq!(
        serve.lines_with(&["source read failed"]),
        1,
        "{}",
        serve.log()
    );
    assert_eq!(serve.lines_with(&["backing off"]), 1, "{}", serve.log());

    // A trigger with other metadata on the same source: polled at once,
    // the backoff starts over.
    let fixed = object(
        "missing",
        &[
            ("vllmTargets", url.as_str()),
            ("targetBacklogPerReplica", "20"),
            ("pollIntervalSeconds", "1"),
        ],
    );
    client.get_metric_spec(fixed.clone()).await.expect("spec");
    let restarted = eventually(Duration::from_secs(2), || async {
        (hits.load(Ordering::SeqCst) > polled).then_some(())
    })
    .await;
    assert!(restarted.is_some(), "no poll after the new registration");
    let delay = eventually(Duration::from_secs(2), || async {
        let explained = serve.explain("missing").await;
        explained["sources"][0]["backoff"]["delaySeconds"]
            .as_f64()
            .filter(|d| *d <= 2.0)
    })
    .await;
    assert!(delay.is_some(), "the backoff did not start over");
    assert_eq!(serve.lines_with(&["backoff reset"]), 1, "{}", serve.log());
}

/// A broker that takes the TCP connection and refuses AMQP: it answers
/// the protocol header with another one and hangs up, as a broker
/// refusing connections does. lapin logs ERRORs of its own for each such
/// connection. Returns the port and the connection count.
async fn refusing_broker() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                let _ = stream.read(&mut buf).await;
                let _ = stream.write_all(b"AMQP\x00\x00\x09\x01").await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (port, accepted)
}

/// Ten seconds of KEDA's calls on a trigger whose broker refuses every
/// connection; returns the connections it refused.
async fn poll_refusing_broker(serve: &Serve) -> usize {
    let (port, accepted) = refusing_broker().await;
    let mut client = serve.client().await;
    let host = format!("amqp://127.0.0.1:{port}");
    let queue = object(
        "queue",
        &[
            ("rabbitmqHost", host.as_str()),
            ("queueName", "jobs"),
            ("targetBacklogPerReplica", "10"),
            ("pollIntervalSeconds", "1"),
        ],
    );
    client.get_metric_spec(queue.clone()).await.expect("spec");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        let status = client
            .get_metrics(metrics_request(&queue, ""))
            .await
            .expect_err("a refusing broker is no number");
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    accepted.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_rabbitmq_polled_many_times_logs_a_few_lines() {
    let serve = Serve::start();
    let connections = poll_refusing_broker(&serve).await;
    // Ten seconds of polls at 1 s, each with its retries: dozens of refused
    // connections. lapin's own ERRORs per connection are off; the source's
    // failure is logged once.
    assert!(connections >= 10, "{connections} connections");
    let log = serve.log();
    assert_eq!(serve.lines_with(&["\"target\":\"lapin"]), 0, "{log}");
    assert_eq!(serve.lines_with(&["\"level\":\"ERROR\""]), 0, "{log}");
    assert_eq!(serve.lines_with(&["source read failed"]), 1, "{log}");
    assert!(log.lines().count() <= 12, "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lapin_asked_for_logs_each_distinct_error_once_a_minute() {
    let serve = Serve::start_with("info,lapin=warn", &[]);
    let connections = poll_refusing_broker(&serve).await;
    assert!(connections >= 10, "{connections} connections");
    let log = serve.log();
    let lapin = serve.lines_with(&["\"target\":\"lapin"]);
    // lapin says two or three things per refused connection; each said
    // once, however many connections.
    assert!((1..=4).contains(&lapin), "{lapin} lapin lines:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warning_repeated_on_every_poll_is_logged_once_a_minute() {
    let noisy = pods(&[(3.0, 5.0)]).await;
    // A wanted family's line that no parser accepts: skipped and warned
    // about on every poll.
    noisy[0].set_body_override(Some(format!(
        "{}vllm:num_requests_waiting{{model_name=\"unterminated 1\n",
        noisy[0].render()
    )));
    let serve = Serve::start();
    let mut client = serve.client().await;
    let trigger = engine_trigger("noisy", &noisy[0].metrics_url(), "1");
    client.get_metric_spec(trigger.clone()).await.expect("spec");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(6) {
        let _ = client.get_metrics(metrics_request(&trigger, "")).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(noisy[0].scrapes() >= 5, "{} polls", noisy[0].scrapes());
    let (_, metrics) = http_get(&format!("http://{}/metrics", serve.http)).await;
    assert!(
        metrics.contains("backlog_scaler_malformed_lines_total"),
        "every poll still counts the line:\n{metrics}"
    );
    assert_eq!(
        serve.lines_with(&["skipped malformed lines"]),
        1,
        "{}",
        serve.log()
    );
}

/// A scrape target that takes every connection, reads the request and
/// never answers; returns its URL.
async fn hung_pod() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 2048];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}/metrics")
}

/// A scrape target answering its n-th request with a body that stops being
/// UTF-8 at byte n: the same failure, a different offset each time.
async fn garbage_pod() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let hits = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let n = hits.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 2048];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(k) if k > 0 => request.extend_from_slice(&buf[..k]),
                        _ => return,
                    }
                }
                let mut body = vec![b'#'; n];
                body.extend_from_slice(b"\xff\n");
                let mut response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                )
                .into_bytes();
                response.extend_from_slice(&body);
                let _ = stream.write_all(&response).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    format!("http://{addr}/metrics")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_pod_and_a_garbage_pod_are_each_logged_once_though_the_detail_varies() {
    // Three pods answer, so the two failing ones are pod failures (the
    // quorum holds); a trigger reading the hung pod alone fails as a source.
    let steady = pods(&[(1.0, 0.0), (2.0, 0.0), (3.0, 0.0)]).await;
    let hung = hung_pod().await;
    let garbage = garbage_pod().await;
    let fleet = format!("{},{hung},{garbage}", targets(&steady));
    let serve = Serve::start();
    let mut client = serve.client().await;
    let triggers = [
        engine_trigger("fleet", &fleet, "1"),
        engine_trigger("alone", &hung, "1"),
    ];
    for trigger in &triggers {
        client.get_metric_spec(trigger.clone()).await.expect("spec");
    }
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(8) {
        for trigger in &triggers {
            let _ = client.get_metrics(metrics_request(trigger, "")).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let log = serve.log();
    assert!(steady[0].scrapes() >= 6, "{} polls", steady[0].scrapes());
    // The timeout names the configured per-pod deadline (90 % of the 0.8 s
    // poll deadline), not the milliseconds left on each poll.
    assert!(log.contains("no answer within 720 ms"), "{log}");
    assert!(log.contains("invalid byte at"), "{log}");
    for pod in [&hung, &garbage] {
        assert_eq!(
            serve.lines_with(&["pod scrape failed", &format!("\"pod\":\"{pod}\"")]),
            1,
            "{pod}:\n{log}"
        );
    }
    assert_eq!(serve.lines_with(&["source read failed"]), 1, "{log}");
}
