//! Soak: the KEDA call pattern, open loop, over the registered triggers (issue 14, item 7).
//!
//! Off unless `SCALE_SOAK_SECONDS` > 0. After registration and the latency probe, a dispatcher
//! starts one sequence — `GetMetricSpec`, `GetMetrics`, `IsActive` on a random registered
//! trigger, in that order, as KEDA's operator and metrics adapter call it — every
//! 3 / `SCALE_SOAK_RATE` seconds, on its own task: open loop, so a slow server meets new
//! sequences on schedule instead of slowing the clients down (a closed loop would hide that).
//! `SCALE_SOAK_HEALTH_RATE` `grpc.health.v1.Health/Check` calls/s (default 100) go through the
//! same channel between them: the floor, measured under the same load. In-flight sequences are
//! capped at `SCALE_SOAK_MAX_IN_FLIGHT` (default 20,000); a sequence due while at the cap is not
//! started and is counted as shed, so the achieved rate is honest. The server's RSS is read
//! every 10 s; its slope is a least-squares fit over the samples after the first minute (the
//! first minute holds allocator warm-up and the probe's leftovers, not a leak).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backlog_scaler::proto::GetMetricsRequest;
use backlog_scaler::proto::external_scaler_client::ExternalScalerClient;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use super::{cpu_seconds, env_usize, ms, object, percentile, status_mb};

/// The bound on RSS growth under the call pattern.
const TARGET_SLOPE_MB_PER_MIN: f64 = 1.0;
const RSS_EVERY: Duration = Duration::from_secs(10);
/// Samples before this are left out of the slope.
const SLOPE_SKIP: Duration = Duration::from_secs(60);

/// What the soak needs from the scale run.
pub struct Setup {
    pub channel: Channel,
    pub names: Arc<Vec<String>>,
    pub targets: Arc<Vec<String>>,
    pub interval: usize,
    pub pid: u32,
}

#[derive(Default)]
struct Samples {
    spec: Vec<u64>,
    metrics: Vec<u64>,
    active: Vec<u64>,
    health: Vec<u64>,
    /// `method: code` → count.
    errors: BTreeMap<String, usize>,
}

impl Samples {
    fn record(&mut self, method: &'static str, ns: u64, outcome: Result<(), tonic::Code>) {
        match outcome {
            Ok(()) => match method {
                "GetMetricSpec" => self.spec.push(ns),
                "GetMetrics" => self.metrics.push(ns),
                "IsActive" => self.active.push(ns),
                _ => self.health.push(ns),
            },
            Err(code) => {
                *self
                    .errors
                    .entry(format!("{method}: {code:?}"))
                    .or_default() += 1
            }
        }
    }
}

fn nanos(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Least-squares slope of (seconds, MB) in MB per minute; `None` under two points.
fn slope_mb_per_min(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(x, y), &(px, py)| (x + px / n, y + py / n));
    let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(sxy, sxx), &(x, y)| {
        (sxy + (x - mx) * (y - my), sxx + (x - mx) * (x - mx))
    });
    (sxx > 0.0).then(|| sxy / sxx * 60.0)
}

/// One KEDA sequence on trigger `i`.
async fn sequence(
    mut client: ExternalScalerClient<Channel>,
    setup: &Setup,
    i: usize,
    samples: &Mutex<Samples>,
) {
    let reference = object(i, &setup.targets[i % setup.targets.len()], setup.interval);
    let t = Instant::now();
    let spec = client.get_metric_spec(reference.clone()).await;
    let spec_ns = nanos(t);
    let t = Instant::now();
    let metrics = client
        .get_metrics(GetMetricsRequest {
            scaled_object_ref: Some(reference.clone()),
            metric_name: setup.names[i].clone(),
        })
        .await;
    let metrics_ns = nanos(t);
    let t = Instant::now();
    let active = client.is_active(reference).await;
    let active_ns = nanos(t);
    let mut samples = samples.lock().unwrap_or_else(|p| p.into_inner());
    samples.record(
        "GetMetricSpec",
        spec_ns,
        spec.map(drop).map_err(|s| s.code()),
    );
    samples.record(
        "GetMetrics",
        metrics_ns,
        metrics.map(drop).map_err(|s| s.code()),
    );
    samples.record(
        "IsActive",
        active_ns,
        active.map(drop).map_err(|s| s.code()),
    );
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Run the soak if `SCALE_SOAK_SECONDS` asks for one, and print its report.
pub async fn run(setup: Setup) {
    let seconds = env_usize("SCALE_SOAK_SECONDS", 0);
    if seconds == 0 {
        return;
    }
    let rate = env_usize("SCALE_SOAK_RATE", 5000).max(3) as f64;
    let health_rate = env_usize("SCALE_SOAK_HEALTH_RATE", 100) as f64;
    let max_in_flight = env_usize("SCALE_SOAK_MAX_IN_FLIGHT", 20_000).max(1);
    let sequence_rate = rate / 3.0;
    let duration = Duration::from_secs(seconds as u64);
    let triggers = setup.names.len();
    println!(
        "soak: {seconds} s of GetMetricSpec + GetMetrics + IsActive at {rate:.0} calls/s ({sequence_rate:.0} sequences/s) over {triggers} triggers, {health_rate:.0} Health/Check/s"
    );

    let setup = Arc::new(setup);
    let samples = Arc::new(Mutex::new(Samples::default()));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let (mut started_seqs, mut started_health, mut shed) = (0u64, 0u64, 0u64);
    let mut rss: Vec<(f64, f64)> = vec![(0.0, status_mb(setup.pid, "VmRSS:"))];
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let cpu_start = cpu_seconds(setup.pid);
    let start = Instant::now();
    let mut next_rss = RSS_EVERY;
    // A 1 ms tick, starting however many sequences are due: the schedule is by the clock, so a
    // late tick catches up instead of lowering the rate.
    let mut ticker = tokio::time::interval(Duration::from_millis(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticker.tick().await;
        let now = start.elapsed();
        if now >= duration {
            break;
        }
        if now >= next_rss {
            let mb = status_mb(setup.pid, "VmRSS:");
            rss.push((now.as_secs_f64(), mb));
            eprintln!(
                "  soak {:>5.0} s: server RSS {mb:.1} MB, {} in flight, {} errors so far",
                now.as_secs_f64(),
                in_flight.load(Ordering::Relaxed),
                samples
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .errors
                    .values()
                    .sum::<usize>()
            );
            next_rss += RSS_EVERY;
        }
        let due = (now.as_secs_f64() * sequence_rate) as u64;
        while started_seqs < due {
            started_seqs += 1;
            if in_flight.load(Ordering::Relaxed) >= max_in_flight {
                shed += 1;
                continue;
            }
            let i = (xorshift(&mut x) % triggers as u64) as usize;
            let client = ExternalScalerClient::new(setup.channel.clone());
            let (setup, samples, in_flight) = (setup.clone(), samples.clone(), in_flight.clone());
            in_flight.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                sequence(client, &setup, i, &samples).await;
                in_flight.fetch_sub(1, Ordering::Relaxed);
            });
        }
        let health_due = (now.as_secs_f64() * health_rate) as u64;
        while started_health < health_due {
            started_health += 1;
            let mut health = HealthClient::new(setup.channel.clone());
            let samples = samples.clone();
            tokio::spawn(async move {
                let t = Instant::now();
                let outcome = health
                    .check(HealthCheckRequest {
                        service: String::new(),
                    })
                    .await;
                let ns = nanos(t);
                samples.lock().unwrap_or_else(|p| p.into_inner()).record(
                    "Health/Check",
                    ns,
                    outcome.map(drop).map_err(|s| s.code()),
                );
            });
        }
    }
    // Let the last sequences finish (bounded: a hung server is a result, not a wait).
    let drain = Instant::now();
    while in_flight.load(Ordering::Relaxed) > 0 && drain.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let unfinished = in_flight.load(Ordering::Relaxed);
    let server_cpu = cpu_seconds(setup.pid) - cpu_start;
    let rss_end = status_mb(setup.pid, "VmRSS:");
    rss.push((elapsed, rss_end));
    let mut s = std::mem::take(&mut *samples.lock().unwrap_or_else(|p| p.into_inner()));
    for v in [&mut s.spec, &mut s.metrics, &mut s.active, &mut s.health] {
        v.sort_unstable();
    }
    report(&Report {
        seconds,
        rate,
        elapsed,
        started: started_seqs - shed,
        shed,
        unfinished,
        server_cpu,
        rss: &rss,
        samples: &s,
    });
}

struct Report<'a> {
    seconds: usize,
    rate: f64,
    elapsed: f64,
    started: u64,
    shed: u64,
    unfinished: usize,
    /// The server's utime + stime over the soak, in seconds.
    server_cpu: f64,
    rss: &'a [(f64, f64)],
    samples: &'a Samples,
}

fn report(r: &Report<'_>) {
    let s = r.samples;
    let errors: usize = s.errors.values().sum();
    let keda_errors: usize = s
        .errors
        .iter()
        .filter(|(k, _)| !k.starts_with("Health"))
        .map(|(_, v)| v)
        .sum();
    let done = s.spec.len() + s.metrics.len() + s.active.len() + keda_errors;
    println!();
    println!("{}", "=".repeat(78));
    println!(
        "soak: {} s asked, {:.1} s run (incl. drain), target {:.0} calls/s",
        r.seconds, r.elapsed, r.rate
    );
    println!("{}", "-".repeat(78));
    println!(
        "KEDA calls completed          {done:>10}   achieved {:.0} calls/s ({} sequences started, {} shed at the in-flight cap, {} unfinished after the drain)",
        done as f64 / r.elapsed,
        r.started,
        r.shed,
        r.unfinished
    );
    println!(
        "server CPU                    {:>10.1} % of one core   ({:.1} us per KEDA call, Health included)",
        r.server_cpu / r.elapsed * 100.0,
        r.server_cpu / done.max(1) as f64 * 1e6
    );
    println!(
        "errors                        {errors:>10}   {}",
        if s.errors.is_empty() {
            "(none)".to_owned()
        } else {
            s.errors
                .iter()
                .map(|(k, v)| format!("{k} x{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    for (label, v) in [
        ("GetMetricSpec", &s.spec),
        ("GetMetrics", &s.metrics),
        ("IsActive", &s.active),
        ("Health/Check (floor)", &s.health),
    ] {
        println!(
            "  {label:<22} n {:>8}  p50 {:>7.3} ms  p99 {:>7.3} ms  max {:>8.3} ms",
            v.len(),
            ms(percentile(v, 50.0)),
            ms(percentile(v, 99.0)),
            ms(v.last().copied().unwrap_or(0)),
        );
    }
    let floor = percentile(&s.health, 99.0).max(1) as f64;
    println!(
        "  p99 / floor p99: GetMetricSpec {:.2}x, GetMetrics {:.2}x, IsActive {:.2}x",
        percentile(&s.spec, 99.0) as f64 / floor,
        percentile(&s.metrics, 99.0) as f64 / floor,
        percentile(&s.active, 99.0) as f64 / floor,
    );
    let trend: Vec<(f64, f64)> = r
        .rss
        .iter()
        .copied()
        .filter(|&(t, _)| t >= SLOPE_SKIP.as_secs_f64())
        .collect();
    let series: Vec<String> = r.rss.iter().map(|(_, mb)| format!("{mb:.0}")).collect();
    println!("server RSS every 10 s (MB)    {}", series.join(" "));
    match slope_mb_per_min(&trend) {
        Some(slope) => println!(
            "RSS slope                     {slope:>10.3} MB/min   (least squares over {} samples after the first {} s; target <= {TARGET_SLOPE_MB_PER_MIN} MB/min: {})",
            trend.len(),
            SLOPE_SKIP.as_secs(),
            if slope <= TARGET_SLOPE_MB_PER_MIN {
                "MET"
            } else {
                "MISSED"
            }
        ),
        None => println!(
            "RSS slope                     n/a (fewer than 2 samples after the first {} s: run longer)",
            SLOPE_SKIP.as_secs()
        ),
    }
    println!(
        "verdict: errors {}, rate {}",
        if errors == 0 { "0 (MET)" } else { "MISSED" },
        if done as f64 / r.elapsed >= r.rate * 0.98 {
            "MET"
        } else {
            "below target (see achieved)"
        }
    );
    println!("{}", "=".repeat(78));
}
