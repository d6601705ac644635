//! `dns+` discovery through the whole server: one address family per name
//! (`ipFamily`), so a pod with an A and an AAAA record is one pod; and a
//! name with no addresses among answering targets is flagged degraded in
//! `/explain`, not dropped silently.
//!
//! The name is `localhost`, served by a fake vLLM pod on 127.0.0.1 and the
//! same pod on [::1] (a loopback proxy to it, counting connections). Where
//! `localhost` resolves to both families the test shows one pod, not two;
//! where it resolves to 127.0.0.1 only it shows that `ipFamily: ipv6` is a
//! failed reading naming the missing family (the dual-stack choice itself
//! is also unit-tested over address lists in `source::http`).

mod common;

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use backlog_scaler::guard::config::ScalerConfig;
use backlog_scaler::proto::ScaledObjectRef;
use common::*;
use tokio::net::{TcpListener, TcpStream};
use tonic::Code;

/// The same pod on `[::1]:port`: every connection is relayed to the IPv4
/// pod, so both addresses serve the same bytes. Counts connections.
async fn ipv6_twin(port: u16) -> Option<Arc<AtomicUsize>> {
    let listener = TcpListener::bind(("::1", port)).await.ok()?;
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", port)).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    Some(accepted)
}

fn localhost_families() -> (bool, bool) {
    let addrs: Vec<IpAddr> = ("localhost", 80)
        .to_socket_addrs()
        .expect("localhost resolves")
        .map(|a: SocketAddr| a.ip())
        .collect();
    (
        addrs.iter().any(IpAddr::is_ipv4),
        addrs.iter().any(IpAddr::is_ipv6),
    )
}

fn trigger(name: &str, targets: &str, family: Option<&str>) -> ScaledObjectRef {
    let mut md = vec![
        ("vllmTargets", targets),
        ("targetBacklogPerReplica", "10"),
        ("pollIntervalSeconds", "1"),
    ];
    if let Some(family) = family {
        md.push(("ipFamily", family));
    }
    object(name, &md)
}

async fn explain_of(server: &backlog_scaler::api::server::RunningServer, name: &str) -> String {
    let (_, body) = http_get(&format!(
        "http://{}/explain?namespace=default&name={name}",
        server.http_addr
    ))
    .await;
    body
}

#[tokio::test]
async fn a_dual_stack_name_counts_each_pod_once() {
    let pods = pods(&[(5.0, 0.0)]).await;
    let port = pods[0].addr().port();
    let twin = ipv6_twin(port)
        .await
        .expect("[::1] is available on loopback");
    let (has_v4, has_v6) = localhost_families();
    assert!(has_v4, "localhost has an IPv4 address here");
    if !has_v6 {
        eprintln!(
            "note: localhost has no IPv6 address here; the dual-stack count rests on the unit test"
        );
    }
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let url = format!("dns+http://localhost:{port}/metrics");

    // auto (default): IPv4 when the name has an A record: one pod, W = 5.
    for (name, family) in [
        ("auto", None),
        ("auto-explicit", Some("auto")),
        ("v4", Some("ipv4")),
    ] {
        let object = trigger(name, &url, family);
        let value = client
            .get_metrics(metrics_request(&object, ""))
            .await
            .expect("a value")
            .into_inner()
            .metric_values[0]
            .metric_value_float;
        assert_eq!(value, 5.0, "{name}: one pod, not one per address");
        let explain = explain_of(&server, name).await;
        assert!(explain.contains("\"replicasReporting\":1"), "{explain}");
        assert!(explain.contains("127.0.0.1"), "{explain}");
        assert!(!explain.contains("[::1]"), "{explain}");
    }
    assert_eq!(
        twin.load(Ordering::SeqCst),
        0,
        "the IPv6 twin was not scraped"
    );

    // ipv6: the AAAA records are the pods, or there are none to read.
    let object = trigger("v6", &url, Some("ipv6"));
    let answer = client.get_metrics(metrics_request(&object, "")).await;
    if has_v6 {
        let value = answer.expect("a value").into_inner().metric_values[0].metric_value_float;
        assert_eq!(value, 5.0);
        assert!(
            twin.load(Ordering::SeqCst) > 0,
            "the pod was read over IPv6"
        );
        let explain = explain_of(&server, "v6").await;
        assert!(
            explain.contains("[::1]") && !explain.contains("127.0.0.1"),
            "{explain}"
        );
    } else {
        let status = answer.expect_err("no IPv6 address: a failed reading, never zero pods");
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert!(
            status.message().contains(
                "`localhost` has no IPv6 address (it resolves to 127.0.0.1) and ipFamily is `ipv6`"
            ),
            "{}",
            status.message()
        );
    }

    // A bad value is refused, naming what is allowed.
    let status = client
        .get_metric_spec(trigger("bad", &url, Some("dual")))
        .await
        .expect_err("invalid");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status
            .message()
            .contains("metadata key `ipFamily` has value `dual`: `auto`, `ipv4` or `ipv6`"),
        "{}",
        status.message()
    );
    server.shutdown().await;
}

// An empty `dns+` name among answering ones is not tested here end to end:
// a name with no addresses can only come from a DNS server, and the only one
// this machine has is not on loopback. The rule (degraded, named in
// `/explain`, not dropped) is tested on the evaluation in
// `decide::freshness::activation_tests`.
