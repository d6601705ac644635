//! Latency of the scaler's warm path, the call sequence KEDA issues on every poll of an
//! external scaler: `GetMetricSpec` + `GetMetrics` + `IsActive`, at 64 concurrent clients, over
//! real gRPC on loopback, against a live `RunningServer` fed by 3 fake vLLM pods.
//!
//! Run with `cargo bench --bench warm_path` (release profile; 15 to 35 s once built, on 2 cores).
//! `WARM_PATH_CLIENTS` (default 64), `WARM_PATH_SEQS` (sequences per client per case, default
//! 300) and `WARM_PATH_ROUNDS` (default 3) change the size of the run.
//!
//! # What it measures
//!
//! 64 ScaledObjects with distinct names and the same source (the 3 pods), as KEDA would send
//! them: 64 cache entries behind one shared poller (polling every second, so the background
//! re-evaluations run during the measurement). The first call of each trigger registers it and
//! waits for its first reading; it is excluded, as is a warm-up pass of every case. Then each
//! of the 64 client tasks runs a closed loop of sequences, and the bench records, with
//! `std::time::Instant`, the latency of every whole sequence and of every call in it, and the
//! throughput. Percentiles are nearest-rank over the sorted samples (std only).
//!
//! Two channel setups are measured: one `Channel` (one HTTP/2 connection) per client task,
//! and one `Channel` shared by all 64 tasks, which is what KEDA does (it pools one connection
//! per scaler address). Rounds interleave the cases, so that other load on the machine falls
//! on all of them alike.
//!
//! # Why the floor is `grpc.health.v1.Health/Check`
//!
//! The bench shares the machine's cores between the server, the pods and the clients, so its
//! absolute numbers include client-side tonic work, loopback TCP and the scheduling of 64
//! tasks on 2 cores. `Health/Check` on the same server is the cheapest unary RPC that server
//! can answer (an in-memory status lookup) through the very same transport, interceptors and
//! runtime; run with the same clients, channels and concurrency, 3 calls per sequence, it is
//! the like-for-like floor: whatever the warm path costs above it is the scaler's own work.
//! One `Check` per sequence is reported too, as the single-RPC floor.
//!
//! The targets are: p99 of the whole sequence under 1 ms, and within 1.5x the floor.
//! The verdicts are printed as MET or MISSED; a miss does not fail the process.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backlog_scaler::api::server::{RunningServer, ServerOptions};
use backlog_scaler::fake::{FakeVllmPod, ModelLoad};
use backlog_scaler::guard::config::ScalerConfig;
use backlog_scaler::proto::external_scaler_client::ExternalScalerClient;
use backlog_scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use tokio::sync::Barrier;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

#[path = "common/stats.rs"]
mod stats;
use stats::{env_usize, ms, percentile};

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
/// (waiting, running) per pod.
const LOADS: [(f64, f64); 3] = [(10.0, 32.0), (20.0, 32.0), (15.0, 30.0)];
/// B = 45 + 10·94/32 with `targetBacklogPerReplica=10`, `runningPerReplica=32`.
const EXPECTED_BACKLOG: f64 = 74.375;
const POLL_INTERVAL_SECONDS: &str = "1";
/// Warm-up sequences per client per case, not recorded.
const WARMUP_SEQS: usize = 30;
/// Sequences of the single-client context run, per case.
const SOLO_SEQS: usize = 2000;
const TARGET_P99: Duration = Duration::from_millis(1);
const TARGET_RATIO: f64 = 1.5;

/// What one "sequence" of a client is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Workload {
    /// GetMetricSpec + GetMetrics + IsActive.
    WarmPath,
    /// 3 x Health/Check: the like-for-like floor.
    Floor3,
    /// 1 x Health/Check: the single-RPC floor.
    Floor1,
}

impl Workload {
    const ALL: [Workload; 3] = [Workload::WarmPath, Workload::Floor3, Workload::Floor1];

    fn label(self) -> &'static str {
        match self {
            Workload::WarmPath => "warm path (GetMetricSpec+GetMetrics+IsActive)",
            Workload::Floor3 => "floor (3 x Health/Check)",
            Workload::Floor1 => "floor (1 x Health/Check)",
        }
    }

    /// Names of the per-call series; Health/Check calls are pooled into one.
    fn call_names(self) -> &'static [&'static str] {
        match self {
            Workload::WarmPath => &["GetMetricSpec", "GetMetrics", "IsActive"],
            Workload::Floor3 | Workload::Floor1 => &["Health/Check"],
        }
    }
}

/// How the client tasks reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Setup {
    /// One channel (connection) per client task.
    PerClient,
    /// One channel shared by every task, as KEDA pools it.
    Shared,
}

impl Setup {
    const ALL: [Setup; 2] = [Setup::PerClient, Setup::Shared];

    fn label(self) -> &'static str {
        match self {
            Setup::PerClient => "per-client",
            Setup::Shared => "shared",
        }
    }
}

/// One simulated KEDA client: its stubs and its ScaledObject.
#[derive(Clone)]
struct Client {
    scaler: ExternalScalerClient<Channel>,
    health: HealthClient<Channel>,
    object: ScaledObjectRef,
    metric_name: String,
}

/// Latencies in nanoseconds.
#[derive(Default)]
struct Samples {
    sequences: Vec<u64>,
    /// One series per name in [`Workload::call_names`].
    calls: Vec<Vec<u64>>,
    wall: Duration,
}

impl Samples {
    fn merge(&mut self, other: Samples) {
        self.sequences.extend(other.sequences);
        if self.calls.len() < other.calls.len() {
            self.calls.resize_with(other.calls.len(), Vec::new);
        }
        for (mine, theirs) in self.calls.iter_mut().zip(other.calls) {
            mine.extend(theirs);
        }
        self.wall += other.wall;
    }

    fn sort(&mut self) {
        self.sequences.sort_unstable();
        for calls in &mut self.calls {
            calls.sort_unstable();
        }
    }

    fn throughput(&self) -> f64 {
        self.sequences.len() as f64 / self.wall.as_secs_f64()
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn object(index: usize, targets: &str) -> ScaledObjectRef {
    let metadata = [
        ("scalerAddress", "backlog-scaler.keda:9090"),
        ("vllmTargets", targets),
        ("modelName", MODEL),
        ("targetBacklogPerReplica", "10"),
        ("runningPerReplica", "32"),
        ("pollIntervalSeconds", POLL_INTERVAL_SECONDS),
    ];
    ScaledObjectRef {
        name: format!("llama-{index:02}"),
        namespace: "inference".to_owned(),
        scaler_metadata: metadata
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<HashMap<_, _>>(),
    }
}

async fn connect(addr: std::net::SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect()
        .await
        .expect("the scaler accepts a connection")
}

/// Open-loop pacing: each client starts a sequence every `interval`, offset
/// by `phase` so the clients do not fire in lockstep.
#[derive(Debug, Clone, Copy)]
struct Pace {
    interval: Duration,
    phase: Duration,
}

/// One client's loop of `count` sequences: closed (back to back) without a
/// pace, open (on a schedule) with one. Latency runs from the sequence's
/// actual start: tokio's timer fires up to 1 ms after the scheduled instant,
/// which would otherwise be counted as server time; at the open loop's rate
/// (a small fraction of capacity) a client is never still busy with its
/// previous sequence, so no queueing is hidden.
async fn run_client(
    mut client: Client,
    workload: Workload,
    count: usize,
    barrier: Arc<Barrier>,
    pace: Option<Pace>,
) -> Samples {
    let series = workload.call_names().len();
    let calls_per_seq = match workload {
        Workload::WarmPath | Workload::Floor3 => 3,
        Workload::Floor1 => 1,
    };
    let mut samples = Samples {
        sequences: Vec::with_capacity(count),
        calls: (0..series)
            .map(|_| Vec::with_capacity(count * calls_per_seq / series))
            .collect(),
        wall: Duration::ZERO,
    };
    barrier.wait().await;
    let started = tokio::time::Instant::now();
    for i in 0..count {
        if let Some(p) = pace {
            tokio::time::sleep_until(started + p.phase + p.interval * i as u32).await;
        }
        match workload {
            Workload::WarmPath => {
                let spec_request = client.object.clone();
                let metrics_request = GetMetricsRequest {
                    scaled_object_ref: Some(client.object.clone()),
                    metric_name: client.metric_name.clone(),
                };
                let active_request = client.object.clone();
                let t0 = Instant::now();
                let spec = client
                    .scaler
                    .get_metric_spec(spec_request)
                    .await
                    .expect("GetMetricSpec succeeds on the warm path");
                let t1 = Instant::now();
                let metrics = client
                    .scaler
                    .get_metrics(metrics_request)
                    .await
                    .expect("GetMetrics succeeds on the warm path");
                let t2 = Instant::now();
                let active = client
                    .scaler
                    .is_active(active_request)
                    .await
                    .expect("IsActive succeeds on the warm path");
                let t3 = Instant::now();
                black_box((spec, metrics, active));
                samples.sequences.push(nanos(t3 - t0));
                samples.calls[0].push(nanos(t1 - t0));
                samples.calls[1].push(nanos(t2 - t1));
                samples.calls[2].push(nanos(t3 - t2));
            }
            Workload::Floor3 | Workload::Floor1 => {
                let t0 = Instant::now();
                let mut last = t0;
                for _ in 0..calls_per_seq {
                    let response = client
                        .health
                        .check(HealthCheckRequest {
                            service: String::new(),
                        })
                        .await
                        .expect("Health/Check succeeds");
                    black_box(response);
                    let now = Instant::now();
                    samples.calls[0].push(nanos(now - last));
                    last = now;
                }
                samples.sequences.push(nanos(last - t0));
            }
        }
    }
    samples
}

/// Every client runs `count` sequences of `workload` at once.
async fn run_case(clients: &[Client], workload: Workload, count: usize) -> Samples {
    run_case_paced(clients, workload, count, None).await
}

/// [`run_case`], each client paced at `interval` when given (open loop).
async fn run_case_paced(
    clients: &[Client],
    workload: Workload,
    count: usize,
    interval: Option<Duration>,
) -> Samples {
    let barrier = Arc::new(Barrier::new(clients.len()));
    let start = Instant::now();
    let n = clients.len() as u32;
    let tasks: Vec<_> = clients
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, client)| {
            let pace = interval.map(|interval| Pace {
                interval,
                phase: interval * i as u32 / n.max(1),
            });
            tokio::spawn(run_client(client, workload, count, barrier.clone(), pace))
        })
        .collect();
    let mut all = Samples::default();
    for task in tasks {
        all.merge(task.await.expect("a client task completes"));
    }
    all.wall = start.elapsed();
    all
}

/// Register every trigger (the cold start, excluded) and check the warm answers are real.
async fn register(clients: &mut [Client]) {
    for client in clients.iter_mut() {
        let spec = client
            .scaler
            .get_metric_spec(client.object.clone())
            .await
            .expect("GetMetricSpec registers the trigger")
            .into_inner();
        client.metric_name = spec
            .metric_specs
            .first()
            .expect("one metric spec")
            .metric_name
            .clone();
        let values = client
            .scaler
            .get_metrics(GetMetricsRequest {
                scaled_object_ref: Some(client.object.clone()),
                metric_name: client.metric_name.clone(),
            })
            .await
            .expect("the first GetMetrics gets the first reading within the cold-start budget")
            .into_inner();
        let value = values
            .metric_values
            .first()
            .expect("one metric value")
            .metric_value_float;
        assert_eq!(
            value, EXPECTED_BACKLOG,
            "the bench must measure real answers"
        );
        let active = client
            .scaler
            .is_active(client.object.clone())
            .await
            .expect("IsActive")
            .into_inner();
        assert!(active.result, "the fleet is busy, so the trigger is active");
        let health = client
            .health
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .expect("Health/Check")
            .into_inner();
        assert_eq!(
            health.status,
            ServingStatus::Serving as i32,
            "the server reports SERVING"
        );
    }
}

fn print_header() {
    println!(
        "{:<48} {:<10} {:>7} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "case", "channels", "n", "seq/s", "p50 ms", "p90 ms", "p99 ms", "max ms"
    );
}

fn print_row(label: &str, setup: &str, sorted: &[u64], throughput: Option<f64>) {
    let throughput = throughput.map_or_else(String::new, |t| format!("{t:.0}"));
    println!(
        "{:<48} {:<10} {:>7} {:>9} {:>8.3} {:>8.3} {:>8.3} {:>8.3}",
        label,
        setup,
        sorted.len(),
        throughput,
        ms(percentile(sorted, 50.0)),
        ms(percentile(sorted, 90.0)),
        ms(percentile(sorted, 99.0)),
        ms(sorted.last().copied().unwrap_or(0)),
    );
}

fn print_case(workload: Workload, setup: &str, samples: &Samples) {
    print_row(
        workload.label(),
        setup,
        &samples.sequences,
        Some(samples.throughput()),
    );
    if workload != Workload::Floor1 {
        for (name, calls) in workload.call_names().iter().zip(&samples.calls) {
            print_row(&format!("  per call: {name}"), setup, calls, None);
        }
    }
}

fn verdict(met: bool) -> &'static str {
    if met { "MET" } else { "MISSED" }
}

async fn bench(clients_n: usize, seqs: usize, rounds: usize, open_rate: f64, open_seqs: usize) {
    let per_round = seqs.div_ceil(rounds);

    let mut pods = Vec::new();
    for (waiting, running) in LOADS {
        let pod = FakeVllmPod::start().await.expect("a fake vLLM pod starts");
        pod.set_load(
            MODEL,
            ModelLoad {
                waiting,
                running,
                kv_cache_usage: 0.5,
            },
        );
        pods.push(pod);
    }
    let targets = pods
        .iter()
        .map(FakeVllmPod::metrics_url)
        .collect::<Vec<_>>()
        .join(",");
    let server = RunningServer::start(ServerOptions {
        grpc_addr: "127.0.0.1:0".parse().expect("a loopback address"),
        http_addr: "127.0.0.1:0".parse().expect("a loopback address"),
        config: ScalerConfig::default(),
        tls: None,
    })
    .await
    .expect("the scaler starts");

    let shared = connect(server.grpc_addr).await;
    let mut per_client = Vec::with_capacity(clients_n);
    let mut shared_clients = Vec::with_capacity(clients_n);
    for index in 0..clients_n {
        let object = object(index, &targets);
        let own = connect(server.grpc_addr).await;
        per_client.push(Client {
            scaler: ExternalScalerClient::new(own.clone()),
            health: HealthClient::new(own),
            object: object.clone(),
            metric_name: String::new(),
        });
        shared_clients.push(Client {
            scaler: ExternalScalerClient::new(shared.clone()),
            health: HealthClient::new(shared.clone()),
            object,
            metric_name: String::new(),
        });
    }
    register(&mut per_client).await;
    register(&mut shared_clients).await;
    let triggers = server.cache.entries().len();

    for setup in Setup::ALL {
        let clients = match setup {
            Setup::PerClient => &per_client,
            Setup::Shared => &shared_clients,
        };
        for workload in Workload::ALL {
            black_box(run_case(clients, workload, WARMUP_SEQS).await);
        }
    }

    let scrapes_before: u64 = pods.iter().map(FakeVllmPod::scrapes).sum();
    let measured_from = Instant::now();
    let mut results: HashMap<(Setup, Workload), Samples> = HashMap::new();
    for round in 0..rounds {
        let count = per_round.min(seqs - round * per_round);
        if count == 0 {
            break;
        }
        let mut order: Vec<(Setup, Workload)> = Setup::ALL
            .iter()
            .flat_map(|&s| Workload::ALL.iter().map(move |&w| (s, w)))
            .collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for (setup, workload) in order {
            let clients = match setup {
                Setup::PerClient => &per_client,
                Setup::Shared => &shared_clients,
            };
            let samples = run_case(clients, workload, count).await;
            results.entry((setup, workload)).or_default().merge(samples);
        }
    }
    let measured_for = measured_from.elapsed();
    let scrapes = pods.iter().map(FakeVllmPod::scrapes).sum::<u64>() - scrapes_before;

    // Open loop: every client starts a sequence on a schedule, as KEDA's
    // poll loop does, at a rate the machine can serve. This is the case the
    // targets are judged on; the closed loop above measures saturation.
    let interval = Duration::from_secs_f64(1.0 / open_rate);
    let mut open: HashMap<(Setup, Workload), Samples> = HashMap::new();
    for setup in Setup::ALL {
        let clients = match setup {
            Setup::PerClient => &per_client,
            Setup::Shared => &shared_clients,
        };
        for workload in [Workload::WarmPath, Workload::Floor3] {
            let mut samples = run_case_paced(clients, workload, open_seqs, Some(interval)).await;
            samples.sort();
            open.insert((setup, workload), samples);
        }
    }

    // Context, not a target: one client alone, so no queueing behind 63 others.
    let mut solo = Vec::new();
    for workload in [Workload::WarmPath, Workload::Floor3] {
        black_box(run_case(&shared_clients[..1], workload, WARMUP_SEQS).await);
        let mut samples = run_case(&shared_clients[..1], workload, SOLO_SEQS).await;
        samples.sort();
        solo.push((workload, samples));
    }

    drop(per_client);
    drop(shared_clients);
    drop(shared);
    if tokio::time::timeout(Duration::from_secs(5), server.shutdown())
        .await
        .is_err()
    {
        eprintln!("warning: the scaler did not shut down within 5 s");
    }
    for pod in &mut pods {
        pod.stop().await;
    }

    for samples in results.values_mut() {
        samples.sort();
    }
    let get = |setup, workload| results.get(&(setup, workload)).expect("every case ran");

    println!();
    println!("{}", "=".repeat(112));
    print_header();
    println!("{}", "-".repeat(112));
    for setup in Setup::ALL {
        for workload in Workload::ALL {
            print_case(workload, setup.label(), get(setup, workload));
        }
        println!("{}", "-".repeat(112));
    }
    println!(
        "context, not a target: 1 client alone (shared channel), no queueing behind other clients"
    );
    for (workload, samples) in &solo {
        print_case(*workload, "1 client", samples);
    }
    println!("{}", "=".repeat(112));
    println!(
        "case rows: one whole sequence each; 'per call' rows: each RPC inside it (Health/Check calls pooled)"
    );
    println!(
        "background: {triggers} triggers in the cache; {} pod scrapes in {:.1} s of measurement ({:.2}/s over 3 pods: one shared poller, {} s interval)",
        scrapes,
        measured_for.as_secs_f64(),
        scrapes as f64 / measured_for.as_secs_f64(),
        POLL_INTERVAL_SECONDS
    );
    let queueing = |setup| {
        let warm = get(setup, Workload::WarmPath);
        clients_n as f64 / warm.throughput() * 1e3
    };
    println!(
        "closed loop: a sequence waits behind the other clients, latency ~ clients / throughput \
         ({clients_n} / seq/s = {:.2} ms per-client, {:.2} ms shared);",
        queueing(Setup::PerClient),
        queueing(Setup::Shared),
    );
    println!(
        "  so at {clients_n} clients the absolute p99 measures queueing on {} cores; the 1-client rows show \
         the unqueued cost",
        std::thread::available_parallelism().map_or(1, usize::from),
    );
    println!();
    println!(
        "targets (issue): warm-path p99 < {} ms, and p99 within {TARGET_RATIO}x the like-for-like floor (3 x Health/Check, same clients and channels)",
        TARGET_P99.as_millis()
    );
    println!();
    println!(
        "open loop: {clients_n} clients, each starting a sequence every {:.1} ms ({:.0} sequences/s in all, {} per client)",
        interval.as_secs_f64() * 1e3,
        open_rate * clients_n as f64,
        open_seqs
    );
    for setup in Setup::ALL {
        for workload in [Workload::WarmPath, Workload::Floor3] {
            let samples = open.get(&(setup, workload)).expect("every open case ran");
            print_case(workload, setup.label(), samples);
        }
    }
    println!();
    println!("verdicts (open loop, the KEDA-like load):");
    for setup in Setup::ALL {
        let warm = percentile(
            &open
                .get(&(setup, Workload::WarmPath))
                .expect("ran")
                .sequences,
            99.0,
        );
        let floor = percentile(
            &open.get(&(setup, Workload::Floor3)).expect("ran").sequences,
            99.0,
        );
        let ratio = warm as f64 / floor.max(1) as f64;
        println!(
            "  {clients_n} clients, {:<10} channels: p99 < 1 ms: {} ({:.3} ms); p99 within {TARGET_RATIO}x floor: {} ({ratio:.2}x: {:.3} ms vs floor {:.3} ms)",
            setup.label(),
            verdict(warm < nanos(TARGET_P99)),
            ms(warm),
            verdict(ratio <= TARGET_RATIO),
            ms(warm),
            ms(floor),
        );
    }
    println!("verdicts (closed loop, saturation; latency is queueing behind the other clients):");
    for setup in Setup::ALL {
        let warm = percentile(&get(setup, Workload::WarmPath).sequences, 99.0);
        let floor = percentile(&get(setup, Workload::Floor3).sequences, 99.0);
        let ratio = warm as f64 / floor.max(1) as f64;
        println!(
            "  {clients_n} clients, {:<10} channels: p99 < 1 ms: {} ({:.3} ms); p99 within {TARGET_RATIO}x floor: {} ({ratio:.2}x: {:.3} ms vs floor {:.3} ms)",
            setup.label(),
            verdict(warm < nanos(TARGET_P99)),
            ms(warm),
            verdict(ratio <= TARGET_RATIO),
            ms(warm),
            ms(floor),
        );
    }
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let clients = env_usize("WARM_PATH_CLIENTS", 64).max(1);
    let seqs = env_usize("WARM_PATH_SEQS", 300).max(1);
    let rounds = env_usize("WARM_PATH_ROUNDS", 3).clamp(1, seqs);
    let open_rate = std::env::var("WARM_PATH_OPEN_RATE")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|r| *r > 0.0)
        .unwrap_or(10.0);
    let open_seqs = env_usize("WARM_PATH_OPEN_SEQS", 100).max(1);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_else(|_| "unknown".to_owned());
    println!("backlog-scaler warm-path benchmark");
    println!(
        "  machine: {cores} CPUs; one tokio multi-thread runtime with {cores} workers runs the scaler, 3 fake vLLM pods AND the {clients} clients:"
    );
    println!(
        "           they share the cores, so every figure includes client-side gRPC work and scheduling"
    );
    println!(
        "  load average at start: {} (other processes on this machine inflate every figure)",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "  setup: {clients} ScaledObjects (distinct names, one 3-pod source): {clients} cache entries, one poller every {POLL_INTERVAL_SECONDS} s"
    );
    println!(
        "  method: closed loop, {clients} clients x {seqs} sequences per case in {rounds} interleaved rounds;"
    );
    println!(
        "          first call per trigger (cold start) and a warm-up of {WARMUP_SEQS} sequences per client per case excluded"
    );
    let started = Instant::now();
    runtime.block_on(bench(clients, seqs, rounds, open_rate, open_seqs));
    println!("total bench time: {:.1} s", started.elapsed().as_secs_f64());
}
