//! Scale: N triggers over S sources on one scaler, measured from outside over real gRPC.
//!
//! Run with `cargo bench --bench scale` (release profile). The defaults are the issue's
//! figures (100,000 triggers over 1,000 sources); a quick run:
//! `SCALE_TRIGGERS=5000 SCALE_SOURCES=100 cargo bench --bench scale`.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `SCALE_TRIGGERS` | 100000 | ScaledObjects registered (distinct names) |
//! | `SCALE_SOURCES` | 1000 | fake vLLM pods; trigger `i` reads pod `i mod S` |
//! | `SCALE_CALLERS` | 16 | concurrent GetMetricSpec callers during registration |
//! | `SCALE_INTERVAL` | 5 | `pollIntervalSeconds` of every trigger |
//! | `SCALE_MEASURE_SECONDS` | 3 × interval | window for upstream calls/s and idle CPU |
//! | `SCALE_PROBE_RATE` | 1000 | GetMetrics (or Health/Check) calls/s in the latency probe |
//! | `SCALE_PROBE_SECONDS` | 5 | length of each probe case (2 rounds per case) |
//! | `SCALE_REGISTER_TIMEOUT` | 1800 | give up registering after this many seconds |
//! | `SCALE_SERVER_WRAPPER` | none | a command to run the server under, split on spaces (`valgrind --tool=massif`): profiling only |
//! | `SCALE_SOAK_SECONDS` | 0 | after the probe, this long a soak of the KEDA call pattern (0: no soak); see [`soak`] |
//! | `SCALE_SOAK_RATE` | 5000 | soak calls/s in all (GetMetricSpec + GetMetrics + IsActive: rate / 3 sequences/s) |
//! | `SCALE_SOAK_HEALTH_RATE` | 100 | Health/Check floor probes/s during the soak |
//! | `SCALE_SOAK_MAX_IN_FLIGHT` | 20000 | soak sequences in flight before new ones are shed (counted) |
//! | `SCALE_VARY` | 1 | 1: every pod's queue changes every half interval, so every trigger's decision changes on every poll (the busy case); 0: constant loads |
//!
//! # What it measures, and how
//!
//! The scaler is the release `backlog-scaler serve` binary, started as a child process on
//! 127.0.0.1 with free ports, `--log-level warn` (one `info` line per registration is not the
//! cost under test) and a `--config` whose `maxTriggers` admits N. Its RSS is read from
//! `/proc/<child pid>/status` (`VmRSS`, and `VmHWM` for the peak), its CPU from
//! `/proc/<pid>/stat`: these are the server's alone. The S fake pods and the gRPC clients run in
//! this process, on the same cores.
//!
//! 1. Registration: `SCALE_CALLERS` tasks on one shared channel (KEDA pools one connection per
//!    scaler) take the next trigger index from a counter and send its `GetMetricSpec`, which
//!    registers it. The completion time of every call is kept, so the rate over the first and
//!    the last 20,000 triggers (or fifths, for a smaller N) shows whether a registration costs
//!    more as the cache grows.
//! 2. Upstream calls: after one settling interval, the pods' scrape counters over
//!    `SCALE_MEASURE_SECONDS`, against S / interval (one shared poller per source).
//! 3. Latency: open loop, 16 client tasks on the shared channel at `SCALE_PROBE_RATE` calls/s
//!    in all, alternating GetMetrics on a random trigger and `grpc.health.v1.Health/Check` (the
//!    cheapest RPC the same server answers through the same transport: the floor), 2 rounds
//!    each. p99 is nearest-rank.
//! 4. Soak (only with `SCALE_SOAK_SECONDS` > 0): the KEDA call pattern, open loop, with errors
//!    by code, p50/p99 per method against the floor, and the RSS slope; see [`soak`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use backlog_scaler::fake::{FakeVllmPod, ModelLoad};
use backlog_scaler::proto::external_scaler_client::ExternalScalerClient;
use backlog_scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

#[path = "common/stats.rs"]
mod stats;
use stats::{env_usize, ms, percentile};
#[path = "scale/process.rs"]
mod process;
use process::{cpu_seconds, start_server, status_mb};
#[path = "scale/soak.rs"]
mod soak;

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
const PROBE_CLIENTS: usize = 16;
/// The bounds (item 7).
const TARGET_RSS_MB: f64 = 1024.0;
const TARGET_REGISTER_SECONDS: f64 = 30.0;

fn object(index: usize, targets: &str, interval: usize) -> ScaledObjectRef {
    let metadata = [
        ("scalerAddress", "backlog-scaler.keda:9090".to_owned()),
        ("vllmTargets", targets.to_owned()),
        ("modelName", MODEL.to_owned()),
        ("targetBacklogPerReplica", "10".to_owned()),
        ("runningPerReplica", "32".to_owned()),
        ("pollIntervalSeconds", interval.to_string()),
    ];
    ScaledObjectRef {
        name: format!("model-{index:06}"),
        namespace: format!("team-{:02}", index % 50),
        scaler_metadata: metadata
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect::<HashMap<_, _>>(),
    }
}

async fn connect(addr: SocketAddr) -> Channel {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match Channel::from_shared(format!("http://{addr}"))
            .expect("a valid URI")
            .connect()
            .await
        {
            Ok(channel) => return channel,
            Err(e) if Instant::now() > deadline => panic!("the scaler never listened: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Register every trigger; returns each call's completion time since the start, sorted, and
/// the metric name of every trigger.
async fn register(
    channel: &Channel,
    triggers: usize,
    callers: usize,
    targets: Arc<Vec<String>>,
    interval: usize,
    pid: u32,
    timeout: Duration,
) -> (Vec<Duration>, Vec<String>, f64) {
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let mut client = ExternalScalerClient::new(channel.clone());
            let (next, done, targets) = (next.clone(), done.clone(), targets.clone());
            tokio::spawn(async move {
                let mut finished = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= triggers || started.elapsed() > timeout {
                        return finished;
                    }
                    let source = &targets[i % targets.len()];
                    let spec = client
                        .get_metric_spec(object(i, source, interval))
                        .await
                        .unwrap_or_else(|e| panic!("GetMetricSpec registers trigger {i}: {e}"))
                        .into_inner();
                    let name = spec
                        .metric_specs
                        .into_iter()
                        .next()
                        .expect("one metric spec")
                        .metric_name;
                    finished.push((i, started.elapsed(), name));
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Progress, and the RSS peak while registering.
    let mut peak = 0.0f64;
    let step = (triggers / 10).max(1);
    let mut next_report = step;
    while tasks.iter().any(|t| !t.is_finished()) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        peak = peak.max(status_mb(pid, "VmRSS:"));
        let n = done.load(Ordering::Relaxed);
        if n >= next_report {
            eprintln!(
                "  registered {n:>7} in {:>7.1} s, server RSS {:.0} MB",
                started.elapsed().as_secs_f64(),
                status_mb(pid, "VmRSS:")
            );
            next_report = (n / step + 1) * step;
        }
    }
    let mut times = Vec::with_capacity(triggers);
    let mut names = vec![String::new(); triggers];
    for task in tasks {
        for (i, at, name) in task.await.expect("a caller completes") {
            times.push(at);
            names[i] = name;
        }
    }
    times.sort_unstable();
    (times, names, peak)
}

/// Registrations per second between the `from`-th and the `to`-th completion.
fn rate(times: &[Duration], from: usize, to: usize) -> f64 {
    let start = if from == 0 {
        Duration::ZERO
    } else {
        times[from - 1]
    };
    (to - from) as f64 / (times[to - 1] - start).as_secs_f64().max(1e-9)
}

#[derive(Clone, Copy, PartialEq)]
enum Probe {
    GetMetrics,
    Health,
}

/// Open-loop probe: `PROBE_CLIENTS` tasks, `rate` calls/s in all, for `seconds`; latencies in ns.
async fn probe(
    channel: &Channel,
    kind: Probe,
    (rate, seconds): (f64, f64),
    names: Arc<Vec<String>>,
    targets: Arc<Vec<String>>,
    interval: usize,
    seed: u64,
) -> (Vec<u64>, usize) {
    let per_client = (rate * seconds / PROBE_CLIENTS as f64).ceil() as usize;
    let gap = Duration::from_secs_f64(PROBE_CLIENTS as f64 / rate);
    let tasks: Vec<_> = (0..PROBE_CLIENTS)
        .map(|c| {
            let mut scaler = ExternalScalerClient::new(channel.clone());
            let mut health = HealthClient::new(channel.clone());
            let (names, targets) = (names.clone(), targets.clone());
            tokio::spawn(async move {
                let mut x = seed ^ (c as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let start = tokio::time::Instant::now() + gap * c as u32 / PROBE_CLIENTS as u32;
                let mut samples = Vec::with_capacity(per_client);
                let mut errors = 0;
                for k in 0..per_client {
                    tokio::time::sleep_until(start + gap * k as u32).await;
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let i = (x % names.len() as u64) as usize;
                    let t0 = Instant::now();
                    let ok = match kind {
                        Probe::GetMetrics => scaler
                            .get_metrics(GetMetricsRequest {
                                scaled_object_ref: Some(object(
                                    i,
                                    &targets[i % targets.len()],
                                    interval,
                                )),
                                metric_name: names[i].clone(),
                            })
                            .await
                            .is_ok(),
                        Probe::Health => health
                            .check(HealthCheckRequest {
                                service: String::new(),
                            })
                            .await
                            .is_ok(),
                    };
                    samples.push(u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX));
                    errors += usize::from(!ok);
                }
                (samples, errors)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let (samples, e) = task.await.expect("a probe client completes");
        all.extend(samples);
        errors += e;
    }
    all.sort_unstable();
    (all, errors)
}

async fn bench() {
    let triggers = env_usize("SCALE_TRIGGERS", 100_000).max(1);
    let sources = env_usize("SCALE_SOURCES", 1_000).clamp(1, triggers);
    let callers = env_usize("SCALE_CALLERS", 16).max(1);
    let interval = env_usize("SCALE_INTERVAL", 5).max(1);
    let measure = env_usize("SCALE_MEASURE_SECONDS", 3 * interval).max(1);
    let probe_rate = env_usize("SCALE_PROBE_RATE", 1000).max(PROBE_CLIENTS) as f64;
    let probe_seconds = env_usize("SCALE_PROBE_SECONDS", 5).max(1) as f64;
    let timeout = Duration::from_secs(env_usize("SCALE_REGISTER_TIMEOUT", 1800) as u64);
    println!(
        "setup: {triggers} triggers over {sources} fake vLLM pods (1 pod per source), {callers} GetMetricSpec callers, pollIntervalSeconds {interval}"
    );

    let mut pods = Vec::with_capacity(sources);
    for s in 0..sources {
        let pod = FakeVllmPod::start().await.expect("a fake vLLM pod starts");
        pod.set_load(
            MODEL,
            ModelLoad {
                waiting: (s % 20) as f64,
                running: 16.0,
                kv_cache_usage: 0.5,
            },
        );
        pods.push(pod);
    }
    let targets = Arc::new(
        pods.iter()
            .map(FakeVllmPod::metrics_url)
            .collect::<Vec<_>>(),
    );
    let pods = Arc::new(pods);
    let vary = env_usize("SCALE_VARY", 1) != 0;
    if vary {
        // A new queue length on every pod every half interval: each poll
        // gives every trigger a new decision, as on a busy fleet.
        let pods = pods.clone();
        tokio::spawn(async move {
            let mut tick = 0usize;
            let mut ticker = tokio::time::interval(Duration::from_millis(interval as u64 * 500));
            loop {
                ticker.tick().await;
                tick += 1;
                for (s, pod) in pods.iter().enumerate() {
                    pod.set_load(
                        MODEL,
                        ModelLoad {
                            waiting: ((s + tick) % 20) as f64,
                            running: 16.0,
                            kv_cache_usage: 0.5,
                        },
                    );
                }
            }
        });
    }

    let server = start_server(triggers.max(1));
    let pid = server.child.id();
    let channel = connect(server.grpc).await;
    let rss_start = status_mb(pid, "VmRSS:");
    let cpu_before = cpu_seconds(pid);

    let (times, names, rss_peak_registering) = register(
        &channel,
        triggers,
        callers,
        targets.clone(),
        interval,
        pid,
        timeout,
    )
    .await;
    let registered = times.len();
    let register_cpu = cpu_seconds(pid) - cpu_before;
    let total = times.last().copied().unwrap_or_default();
    let rss_registered = status_mb(pid, "VmRSS:");
    if registered < triggers {
        println!(
            "registration stopped at the {} s timeout: {registered} of {triggers} registered",
            timeout.as_secs()
        );
    }
    let window = if registered >= 100_000 {
        20_000
    } else {
        (registered / 5).max(1)
    };

    // Upstream calls, once every poller has run at least once.
    tokio::time::sleep(Duration::from_secs(interval as u64 + 1)).await;
    let scrapes = |pods: &[FakeVllmPod]| pods.iter().map(FakeVllmPod::scrapes).sum::<u64>();
    let (s0, c0, t0) = (scrapes(&pods), cpu_seconds(pid), Instant::now());
    tokio::time::sleep(Duration::from_secs(measure as u64)).await;
    let elapsed = t0.elapsed().as_secs_f64();
    let upstream = (scrapes(&pods) - s0) as f64 / elapsed;
    let idle_cpu = (cpu_seconds(pid) - c0) / elapsed;
    let rss_settled = status_mb(pid, "VmRSS:");

    // Latency against the floor, interleaved.
    let names = Arc::new(
        names
            .into_iter()
            .take(registered.max(1))
            .collect::<Vec<_>>(),
    );
    let mut metrics_ns = Vec::new();
    let mut health_ns = Vec::new();
    let mut errors = 0;
    for round in 0..2u64 {
        let order = if round == 0 {
            [Probe::GetMetrics, Probe::Health]
        } else {
            [Probe::Health, Probe::GetMetrics]
        };
        for kind in order {
            let (samples, e) = probe(
                &channel,
                kind,
                (probe_rate, probe_seconds),
                names.clone(),
                targets.clone(),
                interval,
                round + 1,
            )
            .await;
            errors += e;
            match kind {
                Probe::GetMetrics => metrics_ns.extend(samples),
                Probe::Health => health_ns.extend(samples),
            }
        }
    }
    metrics_ns.sort_unstable();
    health_ns.sort_unstable();
    let rss_end = status_mb(pid, "VmRSS:");
    let hwm = status_mb(pid, "VmHWM:");
    let after = names.len();

    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    println!();
    println!("{}", "=".repeat(78));
    println!(
        "scale: {registered} triggers over {sources} sources, {callers} callers, interval {interval} s; {cores} CPUs shared by the scaler, the pods and the clients"
    );
    println!("{}", "-".repeat(78));
    let secs = total.as_secs_f64();
    println!(
        "registration, total           {secs:>10.2} s   ({:.0}/s overall; target <= {TARGET_REGISTER_SECONDS:.0} s: {})",
        registered as f64 / secs.max(1e-9),
        if registered == triggers && secs <= TARGET_REGISTER_SECONDS {
            "MET"
        } else {
            "MISSED"
        }
    );
    if registered > 0 {
        println!(
            "registration rate, first {window:<6} {:>10.0} /s",
            rate(&times, 0, window)
        );
        println!(
            "registration rate, last  {window:<6} {:>10.0} /s   (last/first = {:.2})",
            rate(&times, registered - window, registered),
            rate(&times, registered - window, registered) / rate(&times, 0, window)
        );
        let tenths: Vec<String> = (0..10)
            .map(|d| {
                let (a, b) = (registered * d / 10, registered * (d + 1) / 10);
                if b > a {
                    format!("{:.0}", rate(&times, a, b))
                } else {
                    "-".to_owned()
                }
            })
            .collect();
        println!("registration rate by tenth   {} /s", tenths.join(" "));
    }
    println!(
        "server CPU while registering  {register_cpu:>10.2} s   ({:.1} us per trigger)",
        register_cpu / registered.max(1) as f64 * 1e6
    );
    println!(
        "server RSS (child VmRSS)      {rss_start:>10.0} MB at start, {rss_peak_registering:.0} MB peak while registering, {rss_registered:.0} MB registered, {rss_settled:.0} MB settled, {rss_end:.0} MB at the end (VmHWM {hwm:.0} MB); target <= {TARGET_RSS_MB:.0} MB: {}",
        if hwm <= TARGET_RSS_MB {
            "MET"
        } else {
            "MISSED"
        }
    );
    println!(
        "server RSS per trigger        {:>10.2} kB",
        (rss_settled - rss_start) * 1024.0 / registered.max(1) as f64
    );
    println!(
        "upstream calls                {upstream:>10.1} /s over {elapsed:.1} s; expected sources / interval = {:.1} /s",
        sources as f64 / interval as f64
    );
    println!(
        "server CPU, registered & idle {:>10.1} % of one core (polls + per-trigger re-evaluation)",
        idle_cpu * 100.0
    );
    let (m99, h99) = (percentile(&metrics_ns, 99.0), percentile(&health_ns, 99.0));
    println!(
        "latency probe: open loop, {PROBE_CLIENTS} clients on one channel, {probe_rate:.0} calls/s, 2 x {probe_seconds:.0} s per case, random trigger of {after}; {errors} errors"
    );
    for (label, samples) in [
        ("GetMetrics", &metrics_ns),
        ("Health/Check (floor)", &health_ns),
    ] {
        println!(
            "  {label:<22} n {:>6}  p50 {:>7.3} ms  p90 {:>7.3} ms  p99 {:>7.3} ms  max {:>7.3} ms",
            samples.len(),
            ms(percentile(samples, 50.0)),
            ms(percentile(samples, 90.0)),
            ms(percentile(samples, 99.0)),
            ms(samples.last().copied().unwrap_or(0)),
        );
    }
    println!(
        "  GetMetrics p99 / floor p99 = {:.2}x",
        m99 as f64 / h99.max(1) as f64
    );
    println!(
        "pod loads: {}",
        if vary {
            "changing every half interval (every poll reads new numbers: every decision changes)"
        } else {
            "constant (decisions settle)"
        }
    );
    println!("{}", "=".repeat(78));

    soak::run(soak::Setup {
        channel,
        names,
        targets,
        interval,
        pid,
    })
    .await;
    drop(server);
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "backlog-scaler scale benchmark; load average at start: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let started = Instant::now();
    runtime.block_on(bench());
    println!("total bench time: {:.1} s", started.elapsed().as_secs_f64());
}
