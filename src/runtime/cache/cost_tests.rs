//! What one trigger's task does per poll (issue 14, item 7): it pays that
//! N / interval times a second over N triggers. Counts, never timings: one
//! evaluation per poll publish (none twice at start), and the self-metrics
//! written only when what they say changes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::{CacheSettings, DecisionCache};
use crate::runtime::poller::PollerRegistry;
use crate::runtime::telemetry::Telemetry;
use crate::source::context::SourceContext;
use crate::source::http::HttpScraper;

fn body(waiting: u32) -> String {
    format!(
        "# TYPE vllm:num_requests_waiting gauge\n\
         vllm:num_requests_waiting{{model_name=\"m\"}} {waiting}.0\n\
         # TYPE vllm:num_requests_running gauge\n\
         vllm:num_requests_running{{model_name=\"m\"}} 4.0\n"
    )
}

/// A loopback pod answering `body` to every request (one per connection),
/// counting them.
async fn pod(body: Arc<Mutex<String>>, scrapes: Arc<AtomicU64>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (body, scrapes) = (body.clone(), scrapes.clone());
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                scrapes.fetch_add(1, Ordering::SeqCst);
                let body = body.lock().expect("body").clone();
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    format!("http://{addr}/metrics")
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_steady_trigger_evaluates_once_per_poll_and_records_only_changes() {
    let body_now = Arc::new(Mutex::new(body(3)));
    let scrapes = Arc::new(AtomicU64::new(0));
    let url = pod(body_now.clone(), scrapes.clone()).await;
    let telemetry = Arc::new(Telemetry::new());
    let http = HttpScraper::new(Duration::from_secs(1), 1 << 20).expect("client");
    let cache = DecisionCache::new(
        PollerRegistry::new(
            SourceContext::new(http).expect("context"),
            telemetry.clone(),
        ),
        telemetry.clone(),
        CacheSettings::default(),
    );
    let metadata = [
        ("vllmTargets", url.as_str()),
        ("targetBacklogPerReplica", "10"),
        ("pollIntervalSeconds", "1"),
        ("policy", "backlog"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let entry = cache
        .get_or_register("ns".into(), "steady".into(), metadata)
        .expect("registered");
    wait_for("4 polls", || scrapes.load(Ordering::SeqCst) >= 4).await;
    // Evaluations first: each needs a publish, each publish a scrape.
    let evaluations = entry.evaluations();
    let polls = scrapes.load(Ordering::SeqCst);
    assert!(
        evaluations <= polls + 1,
        "{evaluations} evaluations for {polls} polls: one at start, then one per publish"
    );
    assert!(evaluations >= 2, "the first reading was evaluated");
    let decision = entry.decision(Duration::ZERO).await.expect("a value");
    assert_eq!(decision.backlog, 3.0);
    // Pending, then the first value; the same value again writes nothing.
    assert_eq!(entry.recordings(), 2);
    let series = "backlog_scaler_backlog{namespace=\"ns\",name=\"steady\"";
    assert!(
        telemetry
            .encode()
            .lines()
            .any(|l| l.starts_with(series) && l.ends_with(" 3.0")),
        "the value's series stays: {}",
        telemetry.encode()
    );

    // A new value is written at once.
    *body_now.lock().expect("body") = body(7);
    wait_for("the new value", || {
        matches!(
            &entry.evaluation().status,
            super::Status::Ready { decision, .. } if decision.backlog == 7.0
        )
    })
    .await;
    assert_eq!(entry.recordings(), 3);
    assert!(
        telemetry
            .encode()
            .lines()
            .any(|l| l.starts_with(series) && l.ends_with(" 7.0")),
        "the series shows the new value: {}",
        telemetry.encode()
    );
}
