//! One sick pod does not stop scaling (issue 14 item 1, decision 0002):
//! three fake vLLM pods, one of which hangs, answers garbage or answers 503,
//! one failure mode at a time. The trigger keeps answering, first with the
//! failing pod's last good reading, then without it (the others
//! extrapolated to three pods); `/explain` and the self-metrics show it
//! degraded; two of three failing is UNAVAILABLE.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use backlog_scaler::api::server::RunningServer;
use backlog_scaler::fake::FakeVllmPod;
use backlog_scaler::guard::config::ScalerConfig;
use backlog_scaler::proto::ScaledObjectRef;
use backlog_scaler::proto::external_scaler_client::ExternalScalerClient;
use common::*;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tonic::Code;
use tonic::transport::Channel;

/// A loopback TCP proxy in front of a fake pod that can be made to hang:
/// while hanging it accepts connections, reads the request and never
/// answers, and it cuts the connections it was forwarding (the scaler's
/// pooled keep-alive connection among them) so the next scrape hangs too.
struct HangingProxy {
    url: String,
    hang: watch::Sender<bool>,
    stopped: Arc<AtomicBool>,
}

impl HangingProxy {
    async fn start(upstream: std::net::SocketAddr) -> HangingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (hang, hanging) = watch::channel(false);
        let stopped = Arc::new(AtomicBool::new(false));
        let done = stopped.clone();
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let mut hanging = hanging.clone();
                tokio::spawn(async move {
                    if *hanging.borrow_and_update() {
                        swallow(client).await;
                        return;
                    }
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (mut client, mut server) = (client, server);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        // Cut when hanging starts.
                        _ = hanging.wait_for(|h| *h) => {}
                    }
                });
            }
        });
        HangingProxy {
            url: format!("http://{addr}/metrics"),
            hang,
            stopped,
        }
    }

    fn set_hanging(&self, hang: bool) {
        self.hang.send_replace(hang);
    }
}

impl Drop for HangingProxy {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::Relaxed);
    }
}

/// Read whatever comes and never answer, until the peer gives up.
async fn swallow(mut stream: TcpStream) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            return;
        }
    }
}

fn trigger(name: &str, targets: &str) -> ScaledObjectRef {
    object(
        name,
        &[
            ("vllmTargets", targets),
            ("targetBacklogPerReplica", "10"),
            ("pollIntervalSeconds", "1"),
            ("maxSignalAgeSeconds", "3"),
        ],
    )
}

async fn explain(server: &RunningServer, name: &str) -> serde_json::Value {
    let (_, body) = http_get(&format!("http://{}/explain?name={name}", server.http_addr)).await;
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    json["triggers"][0].clone()
}

async fn metrics(server: &RunningServer) -> String {
    http_get(&format!("http://{}/metrics", server.http_addr))
        .await
        .1
}

/// The explained state of the failing pod, once the trigger reports it.
fn pod_state(explained: &serde_json::Value, target: &str) -> Option<String> {
    explained["pods"]["pods"]
        .as_array()?
        .iter()
        .find(|p| p["target"] == target)
        .and_then(|p| p["state"].as_str().map(str::to_owned))
}

/// Ask for the value every 200 ms until `done` says stop, asserting every
/// answer is a value (never UNAVAILABLE) and one of `allowed`.
async fn keep_answering<F>(
    client: &mut ExternalScalerClient<Channel>,
    object: &ScaledObjectRef,
    allowed: &[f64],
    timeout: Duration,
    mut done: F,
) -> f64
where
    F: AsyncFnMut(f64) -> bool,
{
    let deadline = Instant::now() + timeout;
    loop {
        let v = value(client, object)
            .await
            .unwrap_or_else(|status| panic!("one failing pod of three: {status:?}"));
        assert!(
            allowed.contains(&v),
            "value {v}, expected one of {allowed:?}"
        );
        if done(v).await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out; last value {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failing_pod_of_three_is_held_then_left_out_and_the_trigger_keeps_answering() {
    // W = 2, 3, 5: all three give 10; without the third, 5 · 3/2 = 7.5.
    let pods = pods(&[(2.0, 0.0), (3.0, 0.0), (5.0, 0.0)]).await;
    let proxy = HangingProxy::start(pods[2].addr()).await;
    let targets = format!(
        "{},{},{}",
        pods[0].metrics_url(),
        pods[1].metrics_url(),
        proxy.url
    );
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let object = trigger("partial", &targets);
    let all = keep_answering(
        &mut client,
        &object,
        &[10.0],
        Duration::from_secs(10),
        async |v| v == 10.0,
    )
    .await;
    assert_eq!(all, 10.0);

    type Break = Box<dyn Fn(&FakeVllmPod, &HangingProxy, bool)>;
    let modes: [(&str, &str, Break); 3] = [
        (
            "hangs",
            "timeout",
            Box::new(|_, proxy, on| proxy.set_hanging(on)),
        ),
        (
            "answers garbage",
            "parse",
            Box::new(|pod, _, on| {
                pod.set_body_override(on.then(|| "<html>upstream connect error</html>\n".into()))
            }),
        ),
        (
            "answers 503",
            "http_status",
            Box::new(|pod, _, on| pod.set_status_override(on.then_some(503))),
        ),
    ];
    for (mode, reason, fail) in modes {
        fail(&pods[2], &proxy, true);
        let failed_at = Instant::now();
        // Held: the last good reading still counts (10), flagged degraded.
        let mut held = None;
        let mut left_out = None;
        keep_answering(
            &mut client,
            &object,
            &[10.0, 7.5],
            Duration::from_secs(10),
            async |v| {
                let explained = explain(&server, "partial").await;
                match pod_state(&explained, &proxy.url).as_deref() {
                    Some("held") => {
                        assert_eq!(v, 10.0, "{mode}: held pod counts: {explained:#}");
                        assert_eq!(explained["state"], "degraded", "{mode}");
                        held.get_or_insert(explained.clone());
                    }
                    Some("left_out") if v == 7.5 => {
                        left_out.get_or_insert((failed_at.elapsed(), explained.clone()));
                    }
                    _ => {}
                }
                left_out.is_some()
            },
        )
        .await;
        let held = held.unwrap_or_else(|| panic!("{mode}: never shown held"));
        let (after, explained) = left_out.expect("left out");
        // Held for maxSignalAgeSeconds (3 s) past its last good reading,
        // which is at most one interval older than the failure.
        assert!(
            after >= Duration::from_secs(2) && after <= Duration::from_secs(6),
            "{mode}: left out after {after:?}"
        );
        let pod = explained["pods"]["pods"]
            .as_array()
            .and_then(|p| p.first())
            .cloned()
            .expect("the failing pod");
        assert_eq!(pod["reason"], reason, "{mode}: {explained:#}");
        assert_eq!(
            (
                explained["pods"]["discovered"].as_u64(),
                explained["pods"]["reporting"].as_u64(),
                explained["pods"]["extrapolation"].as_f64(),
            ),
            (Some(3), Some(2), Some(1.5)),
            "{mode}: {explained:#}"
        );
        assert_eq!(explained["state"], "degraded", "{mode}");
        let why = explained["reason"].as_str().unwrap_or_default();
        assert!(
            why.contains("1 of 3 pods failing")
                && why.contains("extrapolated to 3")
                && why.contains(&proxy.url),
            "{mode}: {why}"
        );
        assert_eq!(explained["components"]["replicasReporting"], 3, "{mode}");
        assert_eq!(held["pods"]["reporting"], 3, "{mode}: {held:#}");
        let exposed = metrics(&server).await;
        let series = format!(
            "backlog_scaler_trigger_degraded_pods{{namespace=\"default\",name=\"partial\",metric=\"backlog\",state=\"left_out\",reason=\"{reason}\"}} 1"
        );
        assert!(exposed.contains(&series), "{mode}: {exposed}");
        assert!(
            exposed.contains(
                "backlog_scaler_trigger_degraded{namespace=\"default\",name=\"partial\",metric=\"backlog\"} 1"
            ),
            "{mode}"
        );

        // It recovers: counted again, no longer degraded, the series gone.
        fail(&pods[2], &proxy, false);
        keep_answering(
            &mut client,
            &object,
            &[10.0, 7.5],
            Duration::from_secs(10),
            async |v| v == 10.0 && explain(&server, "partial").await["state"] == "ok",
        )
        .await;
        let exposed = metrics(&server).await;
        assert!(
            !exposed.contains("backlog_scaler_trigger_degraded_pods{"),
            "{mode}: {exposed}"
        );
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_failing_pods_of_three_are_below_the_quorum_and_unavailable() {
    let pods = pods(&[(2.0, 0.0), (3.0, 0.0), (5.0, 0.0)]).await;
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let object = trigger("minority", &targets(&pods));
    let first = first_value(&client, &object).await;
    assert_eq!(first, Some(10.0));

    pods[1].set_status_override(Some(503));
    pods[2].set_body_override(Some("not metrics at all {\n".into()));
    let failed_at = Instant::now();
    let status = eventually(Duration::from_secs(10), || {
        let mut client = client.clone();
        let object = object.clone();
        async move {
            match value(&mut client, &object).await {
                // Held first: both pods' last readings still count (10).
                // If a poll fell between the two failures, the first pod
                // may be left out one poll before the other: (2 + 5) · 3/2.
                Ok(v) => {
                    assert!(v == 10.0 || v == 10.5, "held readings, never {v}");
                    None
                }
                Err(status) => Some(status),
            }
        }
    })
    .await
    .expect("UNAVAILABLE below the quorum");
    let after = failed_at.elapsed();
    assert!(after >= Duration::from_secs(2), "too early: {after:?}");
    assert_eq!(status.code(), Code::Unavailable);
    assert!(
        status
            .message()
            .contains("1 of 3 discovered pods report, below minReportingFraction=0.5"),
        "{}",
        status.message()
    );
    assert!(
        status.message().contains(&pods[1].metrics_url())
            && status.message().contains(&pods[2].metrics_url()),
        "the reason names both pods: {}",
        status.message()
    );
    let active = client
        .is_active(object.clone())
        .await
        .expect_err("IsActive too");
    assert_eq!(active.code(), Code::Unavailable);
    let explained = explain(&server, "minority").await;
    assert_eq!(explained["state"], "unavailable", "{explained:#}");
    let mut left_out: Vec<&str> = explained["pods"]["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .filter(|p| p["state"] == "left_out")
        .filter_map(|p| p["reason"].as_str())
        .collect();
    // In target order, and the ports are random.
    left_out.sort_unstable();
    assert_eq!(left_out, ["http_status", "parse"], "{explained:#}");
    let exposed = metrics(&server).await;
    assert!(
        exposed.contains(
            "backlog_scaler_trigger_available{namespace=\"default\",name=\"minority\",metric=\"backlog\"} 0"
        ),
        "{exposed}"
    );

    // With one of the two back, 2 of 3 report again.
    pods[1].set_status_override(None);
    let back = first_value(&client, &object).await;
    assert_eq!(back, Some(7.5), "(2 + 3) · 3/2");
    server.shutdown().await;
}
