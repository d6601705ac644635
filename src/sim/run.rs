//! One simulated run, and the matrix of runs.
//!
//! Time advances in 1 s steps. Within a step the pods are simulated exactly,
//! request by request (arrivals are routed at their own instant); at each
//! step's end come, in order: pod lifecycle (warm pods turn ready, drained
//! pods go), Prometheus's scrape (every 15 s), the scaler's poll (every
//! `pollIntervalSeconds`), then KEDA's polling loop and the HPA's sync (every
//! 15 s, 12 s into each 15 s period: the scaler's decision is then ~2 s old
//! and Prometheus's view ~12 s old, their averages in a cluster).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use std::time::Duration;

use super::arrivals::Scenario;
use super::fleet::Fleet;
use super::hpa::{Behavior, Hpa, Keda};
use super::model::{MixMeans, PodModel};
use super::mu_error::ModelMu;
use super::oracle::{self, MinuteLoad};
use super::policies::{Controller, PolicyKind, PolicySettings, ScalerCall};
use super::view::{PrometheusTiming, PrometheusView};
use super::workload::empirical_means;

/// Everything a run needs besides the scenario, policy and seed.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// The pods.
    pub pod: PodModel,
    /// Seconds of steady load at `λ(0)` simulated before `t = 0`, so a run starts in the
    /// steady state of its first load (the policies watch it; the replicas are held).
    pub warmup_seconds: f64,
    /// Prometheus's scrape interval and query delay.
    pub prometheus: PrometheusTiming,
    /// KEDA `minReplicaCount` (0: KEDA's activation and cooldown apply).
    pub min_replicas: i32,
    /// `maxReplicaCount`.
    pub max_replicas: i32,
    /// The HPA's `behavior`.
    pub behavior: Behavior,
    /// HPA sync period, seconds.
    pub hpa_sync_seconds: f64,
    /// KEDA `pollingInterval`, seconds.
    pub keda_polling_seconds: f64,
    /// KEDA `cooldownPeriod`, seconds.
    pub cooldown_seconds: f64,
    /// The policies' knobs; `ttft_slo_seconds` is also the reported SLO.
    pub policy: PolicySettings,
    /// Spare capacity of the `fixed` fleet over the peak rate.
    pub fixed_headroom: f64,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        let pod = PodModel::default();
        SimConfig {
            policy: PolicySettings {
                target_backlog_per_replica: 10.0,
                running_per_replica: pod.max_num_seqs as f64,
                seed_running_per_replica: 32.0,
                ttft_slo_seconds: 2.0,
                // Set per scenario to the pod model's μ for its mix (see `run_one`).
                drain_rate_per_replica: 0.0,
                scaler_ttft_guard: true,
                default_prior_factor: None,
                capacity_extra: Vec::new(),
                seed_ttft_window_seconds: 60.0,
                production_stack_waiting: 5.0,
            },
            pod,
            warmup_seconds: 600.0,
            prometheus: PrometheusTiming::default(),
            min_replicas: 1,
            max_replicas: 20,
            behavior: Behavior::default(),
            hpa_sync_seconds: 15.0,
            keda_polling_seconds: 15.0,
            cooldown_seconds: 300.0,
            fixed_headroom: 0.2,
        }
    }
}

impl SimConfig {
    /// `μ`: what one pod finishes per second at a full batch of `scenario`'s mix at `t = 0`
    /// (a request-level trace: of all its requests) — what a load test before the run would
    /// measure, and what the `capacity` row is given.
    pub fn saturated_throughput(&self, scenario: &Scenario) -> f64 {
        self.pod.saturated_throughput(scenario_means(scenario))
    }

    /// Replicas a rate needs at a full batch with the fixed fleet's headroom.
    fn replicas_for(&self, rate: f64, mu: f64) -> i32 {
        let needed = (rate * (1.0 + self.fixed_headroom) / mu).ceil();
        (needed as i32).clamp(self.min_replicas.max(1), self.max_replicas)
    }
}

/// The mean request of a scenario: its mix at `t = 0`, or a trace's own requests.
pub fn scenario_means(scenario: &Scenario) -> MixMeans {
    if scenario.is_request_level() {
        let requests: Vec<_> = scenario
            .arrivals(0)
            .map(|a| a.collect::<Vec<_>>())
            .unwrap_or_default();
        if let Some(means) = empirical_means(&requests) {
            return means;
        }
    }
    scenario.mix_at(0.0).means()
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// Scenario name.
    pub scenario: String,
    /// Policy.
    pub policy: PolicyKind,
    /// Seed.
    pub seed: u64,
    /// Requests that arrived.
    pub requests: usize,
    /// Share of requests whose TTFT met the SLO, 0–1.
    pub slo_attainment: f64,
    /// TTFT median, seconds.
    pub ttft_p50: f64,
    /// TTFT p95, seconds.
    pub ttft_p95: f64,
    /// TTFT p99, seconds.
    pub ttft_p99: f64,
    /// Pod-hours of every pod alive, warm-up and drain included.
    pub replica_hours: f64,
    /// The most replicas at once.
    pub peak_replicas: i32,
    /// Replica-count changes (HPA and KEDA).
    pub scale_events: u32,
    /// Minutes whose ready pods could not carry the minute's arrivals at
    /// full batch (`ready·μ < arrivals/60`).
    pub under_provisioned_minutes: u32,
    /// Scaler polls that answered an error (0 expected).
    pub scaler_errors: usize,
    /// `default` only: `learned/model − 1` of `μ` at each settled poll
    /// ([`super::mu_error::ModelMu::settled`]); empty for every other policy.
    pub learned_mu_errors: Vec<f64>,
}

/// One point of a run's time series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesPoint {
    /// Seconds.
    pub t: f64,
    /// Replicas (not terminating).
    pub replicas: usize,
    /// Ready pods.
    pub ready: usize,
    /// Requests waiting (pod queues and gateway).
    pub waiting: usize,
    /// Requests running.
    pub running: usize,
    /// `μ` this scaler's `capacity` trigger used at its newest poll (learned
    /// or configured), requests/s per replica; `None` for other policies.
    pub drain_rate: Option<f64>,
}

/// Per-minute figures of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MinuteStats {
    /// Requests that arrived in the minute.
    pub arrivals: u32,
    /// Replicas the minute's arrivals need at full batch (`rate/μ`).
    pub needed_replicas: f64,
    /// TTFT p95 of the minute's arrivals, seconds.
    pub ttft_p95: Option<f64>,
}

/// What a recorded run keeps beyond its result.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Every 5 s.
    pub series: Vec<SeriesPoint>,
    /// Every minute.
    pub minutes: Vec<MinuteStats>,
    /// Every call of the scaler's decision code (`backlog`, `capacity`).
    pub scaler_calls: Vec<ScalerCall>,
}

fn every(t: f64, period: f64, phase: f64) -> bool {
    period > 0.0 && ((t - phase) / period).fract() == 0.0
}

/// Simulate `policy` on `scenario` with `seed`; `record` keeps a [`Trace`].
///
/// The run starts warm: `warmup_seconds` of steady load at `λ(0)` go through the fleet
/// first, with the replicas `λ(0)` needs at a full batch with the fixed fleet's headroom
/// (from the model, not measured). The policies poll during the warm-up, so their memory is
/// warm too, but nothing scales and nothing before `t = 0` is measured or billed.
pub fn run_one(
    config: &SimConfig,
    scenario: &Scenario,
    policy: PolicyKind,
    seed: u64,
    record: bool,
) -> Result<(RunResult, Option<Trace>), String> {
    let mu = config.saturated_throughput(scenario);
    let fixed = config.replicas_for(scenario.peak_rate(), mu);
    let warm = config.replicas_for(scenario.initial_rate(), mu);
    if policy == PolicyKind::Oracle {
        return oracle_run(config, scenario, seed, warm, record);
    }
    let warmup = config.warmup_seconds.max(0.0).ceil();
    // The instant of t = 0, far enough ahead that the warm-up's instants exist.
    let base = Instant::now() + Duration::from_secs_f64(warmup);
    let mut settings = config.policy.clone();
    settings.drain_rate_per_replica = mu;
    let mut controller = Controller::new(policy, &settings, fixed, base, record)?;
    let initial = match controller {
        Controller::Fixed(n) => n,
        _ => warm,
    };
    let mut fleet = Fleet::new(config.pod, initial as usize, -warmup);
    let mut arrivals = scenario
        .warmup(seed, warmup)
        .into_iter()
        .chain(scenario.arrivals(seed)?)
        .peekable();
    let mut hpa = Hpa::new(
        config.min_replicas,
        config.max_replicas,
        config.behavior.clone(),
    );
    hpa.assume_history(0.0, initial);
    let mut keda = Keda::new(config.min_replicas, config.cooldown_seconds);
    let mut prometheus = PrometheusView::new(config.prometheus, base);
    let poll = match &controller {
        Controller::Scaler(hook) => hook.poll_interval_seconds(),
        _ => 0.0,
    };
    let hpa_phase = 12.0_f64.min(config.hpa_sync_seconds - 1.0).max(0.0);

    let steps = scenario.duration_seconds.ceil() as usize;
    let minutes = steps.div_ceil(60);
    let mut load = vec![MinuteLoad::default(); minutes];
    let mut ready_seconds = vec![0.0f64; minutes];
    let mut last_arrival = f64::NEG_INFINITY;
    let mut peak = initial;
    let mut scale_events = 0u32;
    let mut series = Vec::new();
    let mut learned_mu_errors = Vec::new();
    let model_mu = ModelMu::new(&config.pod, scenario, mu);

    for step in -(warmup as i64)..steps as i64 {
        let t1 = step as f64 + 1.0;
        let minute = usize::try_from(step).ok().map(|s| s / 60);
        if let Some(m) = minute {
            ready_seconds[m] += fleet.ready() as f64;
        }
        while let Some(request) = arrivals.next_if(|r| r.arrival < t1) {
            if let Some(m) = minute {
                load[m].add(&request);
            }
            last_arrival = request.arrival;
            fleet.arrive(request);
        }
        fleet.settle(t1);

        if prometheus.scrapes_at(t1) {
            prometheus.record(t1, fleet.reading());
        }
        if let Controller::Scaler(hook) = &mut controller
            && every(t1, poll, 0.0)
        {
            // An error is counted by the hook; the HPA keeps the last value,
            // as KEDA would until fallback.
            let _ = hook.observe(t1, fleet.reading());
            if policy == PolicyKind::Default
                && step >= 0
                && let Some(true_mu) = model_mu.settled(t1)
                && let Some(estimate) = hook.last().and_then(|d| d.components.capacity)
            {
                learned_mu_errors.push(estimate.drain_rate / true_mu - 1.0);
            }
        }
        if minute.is_some() && !matches!(controller, Controller::Fixed(_)) {
            let current = fleet.replicas() as i32;
            let mut next = current;
            if every(t1, config.keda_polling_seconds, hpa_phase) {
                // A keep-alive trigger (requests in the last minute), as
                // production-stack pairs with scale-to-zero, for every policy.
                let keep_alive = t1 - last_arrival <= 60.0;
                let active = controller.active(t1, &prometheus) || keep_alive;
                if let Some(replicas) = keda.poll(t1, current, active) {
                    next = replicas;
                }
            }
            if next == current && every(t1, config.hpa_sync_seconds, hpa_phase) {
                let metrics = controller.metrics(t1, &prometheus);
                next = hpa.sync(t1, current, fleet.ready() as i32, &metrics);
            }
            if next != current {
                fleet.scale_to(next.max(0) as usize, t1);
                scale_events += 1;
                peak = peak.max(next);
            }
        }
        if record && step >= 0 && step % 5 == 4 {
            series.push(SeriesPoint {
                t: t1,
                replicas: fleet.replicas(),
                ready: fleet.ready(),
                waiting: fleet.waiting(),
                running: fleet.running(),
                drain_rate: match &controller {
                    Controller::Scaler(hook) => hook
                        .last()
                        .and_then(|d| d.components.capacity)
                        .map(|e| e.drain_rate),
                    _ => None,
                },
            });
        }
    }

    let end = steps as f64;
    let scaler_errors = match &controller {
        Controller::Scaler(hook) => hook.errors(),
        _ => 0,
    };
    let scaler_calls = match &mut controller {
        Controller::Scaler(hook) => hook.take_calls(),
        _ => Vec::new(),
    };
    let stats = fleet.finish(end);

    // Pods each minute's arrivals need at a full batch of the minute's own mix.
    let needed: Vec<f64> = load
        .iter()
        .map(|m| oracle::work_seconds(m, &config.pod) / 60.0)
        .collect();
    let full_minutes = steps / 60;
    let under_provisioned_minutes = (0..full_minutes)
        .filter(|m| ready_seconds[*m] / 60.0 < needed[*m])
        .count() as u32;
    let mut ttfts: Vec<f32> = stats.ttft.iter().map(|(_, t)| *t).collect();
    let slo = config.policy.ttft_slo_seconds;
    let met = ttfts.iter().filter(|t| f64::from(**t) <= slo).count();
    let requests = ttfts.len();
    let result = RunResult {
        scenario: scenario.name.clone(),
        policy,
        seed,
        requests,
        slo_attainment: if requests == 0 {
            1.0
        } else {
            met as f64 / requests as f64
        },
        ttft_p50: select_quantile(&mut ttfts, 0.50),
        ttft_p95: select_quantile(&mut ttfts, 0.95),
        ttft_p99: select_quantile(&mut ttfts, 0.99),
        replica_hours: stats.pod_seconds / 3600.0,
        peak_replicas: peak,
        scale_events,
        under_provisioned_minutes,
        scaler_errors,
        learned_mu_errors,
    };
    let trace = record.then(|| {
        let mut per_minute: Vec<Vec<f32>> = vec![Vec::new(); minutes];
        for (arrival, ttft) in &stats.ttft {
            let m = (*arrival as usize / 60).min(minutes.saturating_sub(1));
            if let Some(bucket) = per_minute.get_mut(m) {
                bucket.push(*ttft);
            }
        }
        let minutes = per_minute
            .into_iter()
            .zip(load.iter().zip(&needed))
            .map(|(mut ttfts, (load, needed))| {
                ttfts.sort_unstable_by(f32::total_cmp);
                MinuteStats {
                    arrivals: load.requests,
                    needed_replicas: *needed,
                    ttft_p95: (!ttfts.is_empty()).then(|| quantile(&ttfts, 0.95)),
                }
            })
            .collect();
        Trace {
            series,
            minutes,
            scaler_calls,
        }
    });
    Ok((result, trace))
}

/// The oracle's row: GPU-hours of [`oracle::schedule`] for this seed's requests, from the
/// same warm start as the policies. No latency: the oracle is a bound, not a fleet.
fn oracle_run(
    config: &SimConfig,
    scenario: &Scenario,
    seed: u64,
    warm: i32,
    record: bool,
) -> Result<(RunResult, Option<Trace>), String> {
    let steps = scenario.duration_seconds.ceil() as usize;
    let mut load = vec![MinuteLoad::default(); steps.div_ceil(60)];
    let mut requests = 0usize;
    for request in scenario.arrivals(seed)? {
        if let Some(minute) = load.get_mut((request.arrival / 60.0) as usize) {
            minute.add(&request);
            requests += 1;
        }
    }
    let floor = config.min_replicas.max(0) as usize;
    let needed = oracle::schedule(&load, &config.pod, floor);
    let hours = oracle::gpu_hours(&needed, warm.max(0) as usize, config.pod.cold_start_seconds);
    let scale_events = needed.windows(2).filter(|w| w[0] != w[1]).count() as u32;
    let result = RunResult {
        scenario: scenario.name.clone(),
        policy: PolicyKind::Oracle,
        seed,
        requests,
        slo_attainment: f64::NAN,
        ttft_p50: f64::NAN,
        ttft_p95: f64::NAN,
        ttft_p99: f64::NAN,
        replica_hours: hours,
        peak_replicas: needed.iter().copied().max().unwrap_or(0) as i32,
        scale_events,
        under_provisioned_minutes: 0,
        scaler_errors: 0,
        learned_mu_errors: Vec::new(),
    };
    let trace = record.then(|| Trace {
        series: needed
            .iter()
            .enumerate()
            .flat_map(|(m, n)| {
                (1..=12).map(move |i| SeriesPoint {
                    t: (m * 60 + i * 5) as f64,
                    replicas: *n,
                    ready: *n,
                    waiting: 0,
                    running: 0,
                    drain_rate: None,
                })
            })
            .filter(|p| p.t <= steps as f64)
            .collect(),
        minutes: load
            .iter()
            .map(|m| MinuteStats {
                arrivals: m.requests,
                needed_replicas: oracle::work_seconds(m, &config.pod) / 60.0,
                ttft_p95: None,
            })
            .collect(),
        scaler_calls: Vec::new(),
    });
    Ok((result, trace))
}

/// Nearest-rank quantile of unsorted values, by selection (O(n), where sorting a run's
/// hundreds of thousands of TTFTs was a tenth of its time); reorders `values`.
fn select_quantile(values: &mut [f32], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    let (_, nth, _) = values.select_nth_unstable_by(rank - 1, f32::total_cmp);
    f64::from(*nth)
}

/// Nearest-rank quantile of sorted values (`+inf` stays `+inf`).
fn quantile(sorted: &[f32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    f64::from(sorted[rank - 1])
}

/// One run of the matrix.
#[derive(Debug, Clone)]
struct Job<'a> {
    scenario: &'a Scenario,
    policy: PolicyKind,
    seed: u64,
    record: bool,
}

type Outcome = Result<(RunResult, Option<Trace>), String>;

/// The results of a matrix, and the traces of its recorded runs.
pub type MatrixOutput = (Vec<RunResult>, Vec<(PolicyKind, Trace)>);

/// Every scenario × policy × seed (`0..seeds`), on `jobs` threads. Results
/// come back in that order whatever the threads do; the runs of
/// `record_scenario` with seed 0 also return their [`Trace`].
pub fn run_matrix(
    config: &SimConfig,
    scenarios: &[Scenario],
    policies: &[PolicyKind],
    seeds: u64,
    jobs: usize,
    record_scenario: Option<&str>,
) -> Result<MatrixOutput, String> {
    let mut work = Vec::new();
    for scenario in scenarios {
        for policy in policies {
            for seed in 0..seeds {
                work.push(Job {
                    scenario,
                    policy: *policy,
                    seed,
                    record: seed == 0 && record_scenario == Some(scenario.name.as_str()),
                });
            }
        }
    }
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; work.len()]);
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, work.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = work.get(index) else {
                        break;
                    };
                    let outcome = run_one(config, job.scenario, job.policy, job.seed, job.record);
                    if let Ok(mut slots) = outcomes.lock() {
                        slots[index] = Some(outcome);
                    }
                }
            });
        }
    });
    let outcomes = outcomes
        .into_inner()
        .map_err(|_| "a simulation thread panicked".to_owned())?;
    let mut results = Vec::with_capacity(outcomes.len());
    let mut traces = Vec::new();
    for outcome in outcomes {
        let (result, trace) = outcome.ok_or("a simulation run did not finish")??;
        if let Some(trace) = trace {
            traces.push((result.policy, trace));
        }
        results.push(result);
    }
    Ok((results, traces))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_gives_the_sorted_nearest_rank_quantile() {
        let mut rng = super::super::rng::Rng::new(1, 1);
        let values: Vec<f32> = (0..1001)
            .map(|i| {
                if i % 97 == 0 {
                    f32::INFINITY
                } else {
                    rng.uniform() as f32 * 10.0
                }
            })
            .collect();
        let mut sorted = values.clone();
        sorted.sort_by(f32::total_cmp);
        for q in [0.0, 0.5, 0.95, 0.99, 1.0] {
            let mut scratch = values.clone();
            assert_eq!(
                select_quantile(&mut scratch, q),
                quantile(&sorted, q),
                "q = {q}"
            );
        }
        assert_eq!(select_quantile(&mut [], 0.5), 0.0);
    }
}
