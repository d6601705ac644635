//! The outbound allowlist, redirects and the body cap, end to end: a refused
//! target in metadata is PERMISSION_DENIED at GetMetricSpec; a name whose
//! addresses are refused fails at poll time (UNAVAILABLE, with the reason);
//! redirects are never followed; an endless body stops at the cap.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backlog_scaler::guard::config::ScalerConfig;
use backlog_scaler::guard::outbound::OutboundConfig;
use backlog_scaler::guard::outbound::OutboundPolicy;
use backlog_scaler::source::HttpScraper;
use common::*;
use reqwest::Url;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tonic::Code;

fn allowlist(entries: &[&str]) -> ScalerConfig {
    ScalerConfig {
        outbound: OutboundConfig {
            allow: Some(entries.iter().map(|e| (*e).to_owned()).collect()),
            allow_link_local: false,
        },
        ..ScalerConfig::default()
    }
}

fn trigger(name: &str, targets: &str) -> backlog_scaler::proto::ScaledObjectRef {
    object(
        name,
        &[
            ("vllmTargets", targets),
            ("targetBacklogPerReplica", "10"),
            ("pollIntervalSeconds", "1"),
        ],
    )
}

/// GetMetrics until it answers a value or `timeout` passes; the last error otherwise.
async fn metrics(
    client: &mut backlog_scaler::proto::external_scaler_client::ExternalScalerClient<
        tonic::transport::Channel,
    >,
    object: &backlog_scaler::proto::ScaledObjectRef,
) -> Result<f64, tonic::Status> {
    client
        .get_metrics(metrics_request(object, ""))
        .await
        .map(|r| r.into_inner().metric_values[0].metric_value_float)
}

#[tokio::test]
async fn allowed_loopback_targets_are_scraped() {
    let pods = pods(&[(3.0, 0.0), (4.0, 0.0)]).await;
    let server = start_server(allowlist(&["127.0.0.1/32", "localhost"])).await;
    let mut client = client(&server).await;
    // One pod by IP literal, one by name (localhost resolves to loopback;
    // any address outside 127.0.0.1/32, such as ::1, is filtered out).
    let by_name = format!("http://localhost:{}/metrics", pods[1].addr().port());
    let targets = format!("{},{by_name}", pods[0].metrics_url());
    let object = trigger("allowed", &targets);
    client
        .get_metric_spec(object.clone())
        .await
        .expect("allowed at GetMetricSpec");
    let value = eventually(Duration::from_secs(10), || {
        let mut c = client.clone();
        let o = object.clone();
        async move { metrics(&mut c, &o).await.ok() }
    })
    .await;
    assert_eq!(value, Some(7.0));
    server.shutdown().await;
}

#[tokio::test]
async fn a_name_resolving_to_a_refused_address_is_refused_at_connect_time() {
    let pods = pods(&[(3.0, 0.0)]).await;
    // `localhost` is an allowed name, but its addresses (loopback) are not
    // in any allowed network.
    let server = start_server(allowlist(&["localhost", "10.0.0.0/8"])).await;
    let mut client = client(&server).await;
    let port = pods[0].addr().port();
    for (name, targets) in [
        ("static", format!("http://localhost:{port}/metrics")),
        ("discovered", format!("dns+http://localhost:{port}/metrics")),
    ] {
        let object = trigger(name, &targets);
        // The metadata itself names an allowed host.
        client
            .get_metric_spec(object.clone())
            .await
            .expect("the name is allowed");
        let status = eventually(Duration::from_secs(10), || {
            let mut c = client.clone();
            let o = object.clone();
            async move {
                match metrics(&mut c, &o).await {
                    Err(s) if s.message().contains("refused") => Some(s),
                    _ => None,
                }
            }
        })
        .await
        .unwrap_or_else(|| panic!("{name}: no refusal reported"));
        assert_eq!(status.code(), Code::Unavailable, "{name}");
        let message = status.message();
        assert!(message.contains("127.0.0.1"), "{name}: {message}");
        assert!(
            message.contains("no CIDR in the outbound allowlist"),
            "{name}: {message}"
        );
    }
    // Not one request reached the pod.
    assert_eq!(pods[0].scrapes(), 0);
    let (_, explain) = http_get(&format!("http://{}/explain", server.http_addr)).await;
    assert!(explain.contains("refused"), "{explain}");
    server.shutdown().await;
}

#[tokio::test]
async fn metadata_service_is_permission_denied_by_default() {
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    for target in [
        "http://169.254.169.254/metrics",
        "http://[fd00:ec2::254]/latest/meta-data",
        "http://10.0.0.7:8000/metrics,http://169.254.169.254:80/metrics",
    ] {
        let object = trigger("metadata", target);
        let status = client
            .get_metric_spec(object.clone())
            .await
            .expect_err(target);
        assert_eq!(status.code(), Code::PermissionDenied, "{target}");
        let message = status.message();
        assert!(message.contains("default/metadata"), "{message}");
        assert!(
            message.contains("169.254.169.254") || message.contains("fd00:ec2::254"),
            "{message}"
        );
        assert!(message.contains("refused by default"), "{message}");
        assert!(message.contains("allowLinkLocal"), "{message}");
        // Never registered: GetMetrics and IsActive refuse alike.
        let status = client
            .get_metrics(metrics_request(&object, "backlog"))
            .await
            .expect_err(target);
        assert_eq!(status.code(), Code::PermissionDenied);
        let status = client.is_active(object).await.expect_err(target);
        assert_eq!(status.code(), Code::PermissionDenied);
    }
    let (_, explain) = http_get(&format!("http://{}/explain", server.http_addr)).await;
    assert!(!explain.contains("169.254"), "never registered: {explain}");
    server.shutdown().await;
}

#[tokio::test]
async fn hosts_outside_the_allowlist_are_permission_denied() {
    let server = start_server(allowlist(&["*.svc.cluster.local", "10.0.0.0/8"])).await;
    let mut client = client(&server).await;
    for (target, refused, rule) in [
        (
            "http://vllm.evil.example:8000/metrics",
            "vllm.evil.example",
            "no host pattern",
        ),
        (
            "dns+http://db.internal:5432/",
            "db.internal",
            "no host pattern",
        ),
        (
            "http://192.168.1.10:8000/metrics",
            "192.168.1.10",
            "no CIDR",
        ),
    ] {
        let status = client
            .get_metric_spec(trigger("outside", target))
            .await
            .expect_err(target);
        assert_eq!(status.code(), Code::PermissionDenied, "{target}");
        assert!(status.message().contains(refused), "{}", status.message());
        assert!(status.message().contains(rule), "{}", status.message());
    }
    client
        .get_metric_spec(trigger(
            "inside",
            "dns+http://llama.inference.svc.cluster.local:8000/metrics",
        ))
        .await
        .expect("pattern matches");
    server.shutdown().await;
}

/// Serve one canned HTTP response per connection; count connections.
async fn canned_server(response: Vec<u8>) -> (std::net::SocketAddr, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let hits = Arc::new(AtomicU64::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::Relaxed);
            let response = response.clone();
            tokio::spawn(async move {
                read_request_head(&mut stream).await;
                let _ = stream.write_all(&response).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (addr, hits)
}

async fn read_request_head(stream: &mut tokio::net::TcpStream) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test]
async fn redirects_are_not_followed() {
    // Where a followed redirect would land: an allowed loopback server that
    // counts connections, and the metadata service.
    let (landing, landing_hits) = canned_server(
        b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec(),
    )
    .await;
    let mut redirectors = Vec::new();
    for location in [
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        format!("http://{landing}/metrics"),
    ] {
        let response = format!(
            "HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        );
        redirectors.push(canned_server(response.into_bytes()).await);
    }
    let server = start_server(allowlist(&["127.0.0.1/32"])).await;
    let client = client(&server).await;
    for (i, (addr, hits)) in redirectors.iter().enumerate() {
        let object = trigger(&format!("redirect-{i}"), &format!("http://{addr}/metrics"));
        let status = eventually(Duration::from_secs(10), || {
            let mut c = client.clone();
            let o = object.clone();
            async move { metrics(&mut c, &o).await.err() }
        })
        .await
        .expect("an error");
        assert_eq!(status.code(), Code::Unavailable);
        assert!(status.message().contains("302"), "{}", status.message());
        assert!(hits.load(Ordering::Relaxed) >= 1);
    }
    assert_eq!(landing_hits.load(Ordering::Relaxed), 0, "redirect followed");

    // The same through the client directly: a 302 is an error naming it.
    let scraper = HttpScraper::with_outbound(
        Duration::from_secs(5),
        1 << 20,
        Arc::new(OutboundPolicy::allow_all()),
    )
    .expect("client");
    let url = Url::parse(&format!("http://{}/metrics", redirectors[0].0)).expect("url");
    let err = scraper.get_text(&url).await.expect_err("302");
    assert!(err.to_string().contains("302"), "{err}");
    server.shutdown().await;
}

/// A server that answers 200 with a chunked body that never ends (no
/// Content-Length), until the client hangs up.
async fn endless_body_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                read_request_head(&mut stream).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n";
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let line = "vllm:num_requests_waiting{model_name=\"m\"} 1.0\n".repeat(1000);
                let chunk = format!("{:x}\r\n{line}\r\n", line.len());
                while stream.write_all(chunk.as_bytes()).await.is_ok() {}
            });
        }
    });
    addr
}

#[tokio::test]
async fn a_body_over_the_cap_is_an_error_not_an_out_of_memory() {
    let addr = endless_body_server().await;
    let url = Url::parse(&format!("http://{addr}/metrics")).expect("url");
    let scraper = HttpScraper::with_outbound(
        Duration::from_secs(10),
        64 * 1024,
        Arc::new(OutboundPolicy::allow_all()),
    )
    .expect("client");
    let err = tokio::time::timeout(Duration::from_secs(10), scraper.get_text(&url))
        .await
        .expect("stops at the cap, not at a timeout")
        .expect_err("over the cap");
    assert!(
        err.to_string().contains("exceeds the 65536 byte cap"),
        "{err}"
    );

    // Through the server, with the configured maxResponseBytes.
    let server = start_server(ScalerConfig {
        max_response_bytes: 64 * 1024,
        ..allowlist(&["127.0.0.1/32"])
    })
    .await;
    let client = client(&server).await;
    let object = trigger("endless", url.as_str());
    let status = eventually(Duration::from_secs(10), || {
        let mut c = client.clone();
        let o = object.clone();
        async move { metrics(&mut c, &o).await.err() }
    })
    .await
    .expect("an error");
    assert_eq!(status.code(), Code::Unavailable);
    assert!(
        status.message().contains("byte cap"),
        "{}",
        status.message()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn an_announced_body_over_the_cap_is_refused_before_reading() {
    let (addr, _) = canned_server(
        b"HTTP/1.1 200 OK\r\ncontent-length: 999999999\r\nconnection: close\r\n\r\npartial"
            .to_vec(),
    )
    .await;
    let scraper = HttpScraper::new(Duration::from_secs(5), 1 << 20).expect("client");
    let url = Url::parse(&format!("http://{addr}/metrics")).expect("url");
    let err = scraper.get_text(&url).await.expect_err("over the cap");
    assert!(err.to_string().contains("999999999 bytes exceeds"), "{err}");
}

#[tokio::test]
async fn ip_literal_urls_are_checked_before_connecting() {
    let scraper = HttpScraper::new(Duration::from_secs(5), 1 << 20).expect("client");
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://0.0.0.0:8080/metrics",
    ] {
        let err = scraper
            .get_text(&Url::parse(url).expect("url"))
            .await
            .expect_err(url);
        assert!(
            err.to_string().contains("refused by default"),
            "{url}: {err}"
        );
    }
}
