//! `simulate`: the model's self-checks (HPA examples from the Kubernetes
//! and KEDA docs, Little's law, a saturated pod's throughput), the one code
//! path shared with the server, determinism, and the command end to end.
//! Small configurations: these run in a debug build in seconds.

use std::process::Command;
use std::time::{Duration, Instant};

use backlog_scaler::decide::freshness::{TriggerMemory, decide_engine};
use backlog_scaler::sim::arrivals::{Builtin, Scenario};
use backlog_scaler::sim::fleet::Fleet;
use backlog_scaler::sim::hpa::{Behavior, Hpa, Keda, Target, replicas_for_metric};
use backlog_scaler::sim::model::{MixMeans, PodModel};
use backlog_scaler::sim::mu_error;
use backlog_scaler::sim::policies::{PolicyKind, scaler_metadata};
use backlog_scaler::sim::run::{SeriesPoint, SimConfig, run_matrix, run_one};
use backlog_scaler::sim::view::instant_at;
use backlog_scaler::sim::workload::{Request, TokenMix};
use backlog_scaler::trigger::TriggerSpec;

const BIN: &str = env!("CARGO_BIN_EXE_backlog-scaler");

#[test]
fn hpa_examples_from_the_kubernetes_and_keda_docs() {
    // AverageValue: 20 / 5 → 4, whatever the current count.
    assert_eq!(
        replicas_for_metric(Target::AverageValue(5.0), 20.0, 1, 1, 0.1),
        Some(4)
    );
    assert_eq!(
        replicas_for_metric(Target::AverageValue(5.0), 20.0, 9, 9, 0.1),
        Some(4)
    );
    // Value: 3 × 20 / 5 → 12.
    assert_eq!(
        replicas_for_metric(Target::Value(5.0), 20.0, 3, 3, 0.1),
        Some(12)
    );
    // Tolerance: a ratio of 1.05 changes nothing.
    assert_eq!(
        replicas_for_metric(Target::AverageValue(5.0), 21.0, 4, 4, 0.1),
        Some(4)
    );
    // Scale-down stabilization (300 s) holds the highest recommendation.
    let mut hpa = Hpa::new(1, 10, Behavior::default());
    let target = Target::AverageValue(5.0);
    assert_eq!(hpa.sync(0.0, 1, 1, &[(target, Some(20.0))]), 4);
    assert_eq!(hpa.sync(60.0, 4, 4, &[(target, Some(5.0))]), 4);
    assert_eq!(hpa.sync(301.0, 4, 4, &[(target, Some(5.0))]), 1);
    // Rate policies: from 2, at most max(+4, +100 %) per 15 s.
    let mut hpa = Hpa::new(1, 100, Behavior::default());
    assert_eq!(hpa.sync(0.0, 2, 2, &[(target, Some(500.0))]), 6);
    assert_eq!(hpa.sync(15.0, 6, 2, &[(target, Some(500.0))]), 12);
    // KEDA: activation 0 → 1, cooldown back to 0.
    let mut keda = Keda::new(0, 300.0);
    assert_eq!(keda.poll(0.0, 0, true), Some(1));
    assert_eq!(keda.poll(301.0, 1, false), Some(0));
}

fn steady(rate: f64, seconds: f64) -> Scenario {
    Scenario::from_rates(
        "steady",
        vec![(0.0, rate), (seconds, rate)],
        TokenMix::CHAT,
        None,
    )
    .expect("valid trace")
}

#[test]
fn littles_law_holds_on_a_steady_load() {
    let (rate, seconds) = (20.0, 3600.0);
    let mut fleet = Fleet::new(PodModel::default(), 4, 0.0);
    let mut arrivals = steady(rate, seconds)
        .arrivals(11)
        .expect("arrivals")
        .peekable();
    let mut in_system = 0.0;
    for step in 0..seconds as usize {
        let t1 = step as f64 + 1.0;
        while let Some(r) = arrivals.next_if(|r| r.arrival < t1) {
            fleet.arrive(r);
        }
        fleet.settle(t1);
        in_system += (fleet.waiting() + fleet.running()) as f64;
    }
    let l = in_system / seconds;
    let stats = fleet.finish(seconds);
    let lambda = stats.finished as f64 / seconds;
    let w = stats.sojourn_seconds / stats.finished as f64;
    let error = (l - lambda * w).abs() / l;
    assert!(
        error < 0.03,
        "L = {l:.2}, λ·W = {lambda:.3}·{w:.2} = {:.2}",
        lambda * w
    );
    assert!((lambda - rate).abs() / rate < 0.05, "λ = {lambda}");
}

/// A saturated pod's running set is weighted by how long each request runs, so the long
/// answers of a lognormal mix hold more of the KV cache than the mean request's context says:
/// the model's μ divides the cache by the running context and is met within 1 % (dividing by
/// the mean request's context put μ 2.1 % above what the pod finishes).
#[test]
fn a_saturated_pod_finishes_mu_requests_per_second() {
    let model = PodModel::default();
    let mix = TokenMix::CHAT;
    // ~6000 requests at once: the pod stays at a full batch throughout.
    let mut fleet = Fleet::new(model, 1, 0.0);
    for request in steady(6000.0, 1.0).arrivals(5).expect("arrivals") {
        fleet.arrive(request);
    }
    let (warm, horizon) = (100.0, 600.0);
    fleet.settle(warm);
    let before = fleet
        .reading()
        .pods
        .remove(0)
        .finished_total
        .expect("counter");
    fleet.settle(horizon);
    let pod = fleet.reading().pods.remove(0);
    assert!(pod.waiting > 0.0, "still saturated at the end");
    let throughput = (pod.finished_total.expect("counter") - before) / (horizon - warm);
    let expected = model.saturated_throughput(mix.means());
    assert!(
        (throughput - expected).abs() / expected < 0.01,
        "{throughput:.3} req/s, the model's μ {expected:.3}"
    );
}

/// The model's μ is what a saturated pod finishes whichever bound holds: decode-bound mixes
/// fill the batch, prefill-heavy ones (long prompts, short outputs) fill every step's token
/// budget first and never decode a full batch.
#[test]
fn a_saturated_pod_finishes_mu_requests_per_second_for_decode_and_prefill_bound_mixes() {
    let model = PodModel::default();
    // (prompt, output) tokens, all requests alike; the first is code-completion's mean.
    for (input_tokens, output_tokens) in [(1751, 44), (4000, 16), (1150, 263), (300, 600)] {
        let mut fleet = Fleet::new(model, 1, 0.0);
        for i in 0..8000 {
            fleet.arrive(Request {
                arrival: f64::from(i) * 1e-4,
                input_tokens,
                output_tokens,
            });
        }
        let (warm, horizon) = (100.0, 400.0);
        fleet.settle(warm);
        let finished = |fleet: &mut Fleet| {
            let pod = fleet.reading().pods.remove(0);
            (pod.finished_total.expect("counter"), pod.waiting)
        };
        let (before, _) = finished(&mut fleet);
        fleet.settle(horizon);
        let (after, waiting) = finished(&mut fleet);
        assert!(
            waiting > 0.0,
            "{input_tokens}/{output_tokens}: still saturated"
        );
        let throughput = (after - before) / (horizon - warm);
        let expected = model.saturated_throughput(MixMeans::uniform(
            f64::from(input_tokens),
            f64::from(output_tokens),
        ));
        assert!(
            (throughput / expected - 1.0).abs() < 0.02,
            "{input_tokens}/{output_tokens}: {throughput:.3} req/s, the model's μ {expected:.3}"
        );
    }
}

/// vLLM's `bench serve --max-concurrency C` against one simulated pod: a closed loop of `C`
/// requests of fixed lengths, each replaced the moment it finishes; output tokens/s.
fn closed_loop_output_tokens_per_second(concurrency: usize, input: u32, output: u32) -> f64 {
    let mut fleet = Fleet::new(PodModel::default(), 1, 0.0);
    let request = |arrival: f64| Request {
        arrival,
        input_tokens: input,
        output_tokens: output,
    };
    for _ in 0..concurrency {
        fleet.arrive(request(0.0));
    }
    let dt = 0.002;
    let mut finished = 0u64;
    let (mut t, mut start) = (0.0, None);
    let target = 20 * concurrency as u64;
    let mut tokens_at_start = 0;
    loop {
        t += dt;
        fleet.advance_to(t);
        let (done, tokens) = fleet
            .metrics()
            .map(|(_, m)| (m.finished_total(), m.generation_tokens))
            .next()
            .expect("one pod");
        for _ in finished..done {
            fleet.arrive(request(t));
        }
        finished = done;
        // Measure past the first wave, as the benchmark's many prompts average it out.
        if start.is_none() && finished >= concurrency as u64 {
            start = Some(t);
            tokens_at_start = tokens;
        }
        if finished >= target {
            let begun = start.expect("started");
            return (tokens - tokens_at_start) as f64 / (t - begun);
        }
    }
}

#[test]
fn the_pod_model_reproduces_its_published_calibration_within_ten_percent() {
    // docs/decisions/0014-pod-model-calibration.md: Llama-3.1-8B-Instruct, vLLM 0.23, one
    // A100 40GB, 1024 input / 128 output tokens: ~75 output tokens/s at one request and
    // 6.6× that at eight.
    for (concurrency, published) in [(1, 75.0), (8, 6.6 * 75.0)] {
        let model = closed_loop_output_tokens_per_second(concurrency, 1024, 128);
        let error = (model - published) / published;
        assert!(
            error.abs() <= 0.10,
            "C={concurrency}: model {model:.1} tok/s vs published {published:.1} ({:+.1} %)",
            100.0 * error
        );
    }
}

#[test]
fn the_warm_start_leaves_no_queue_at_zero_on_a_steady_load() {
    let config = SimConfig::default();
    let scenario = steady(50.0, 600.0);
    let mu = config.saturated_throughput(&scenario);
    let (_, trace) = run_one(&config, &scenario, PolicyKind::Capacity, 2, true).expect("runs");
    let first = trace.expect("recorded").series[0];
    let warm = (50.0 * (1.0 + config.fixed_headroom) / mu).ceil() as usize;
    assert_eq!(first.t, 5.0);
    assert_eq!(first.ready, warm, "warmed for λ(0) from the model");
    // Momentary queueing of a Poisson load, not a cold-start backlog (hundreds).
    assert!(
        first.waiting <= warm,
        "waiting {} on {warm} pods",
        first.waiting
    );
    // Steady state, not an empty fleet: Little's law's L = λ·E[sojourn] is running.
    assert!(first.running as f64 > 50.0, "running {}", first.running);
}

#[test]
fn the_oracle_needs_no_more_gpu_hours_than_any_policy() {
    let config = SimConfig::default();
    let scenarios = [
        Scenario::builtin(Builtin::Step, Some(1200.0)),
        Scenario::builtin(Builtin::Spike, Some(1200.0)),
    ];
    let policies: Vec<PolicyKind> = PolicyKind::ALL.to_vec();
    let (results, _) = run_matrix(&config, &scenarios, &policies, 1, 2, None).expect("runs");
    for scenario in &scenarios {
        let of = |p: PolicyKind| {
            results
                .iter()
                .find(|r| r.scenario == scenario.name && r.policy == p)
                .expect("ran")
        };
        let oracle = of(PolicyKind::Oracle);
        assert!(oracle.replica_hours > 0.0 && oracle.slo_attainment.is_nan());
        for policy in &policies {
            let run = of(*policy);
            assert!(
                oracle.replica_hours <= run.replica_hours + 1e-9,
                "{}: oracle {:.3} h > {} {:.3} h",
                scenario.name,
                oracle.replica_hours,
                policy.name(),
                run.replica_hours
            );
        }
        assert_eq!(
            oracle.requests,
            of(PolicyKind::Fixed).requests,
            "same requests"
        );
    }
}

/// `B` of one reading by the README's formulas (ARCHITECTURE.md §2), from
/// the pods' gauges and the trigger's settings; only what needs history is
/// taken from the decision: the TTFT quantile `L` and the capacity policy's
/// `λ_peak` and `μ`. Defaults as documented: `ttftTolerance` 0.1,
/// `headroom` 0.2, `drainHorizonSeconds` 30.
fn formula(
    policy: PolicyKind,
    settings: &backlog_scaler::sim::policies::PolicySettings,
    reading: &backlog_scaler::source::EngineReading,
    decision: &backlog_scaler::decide::fusion::Decision,
) -> f64 {
    let c = &decision.components;
    let t = settings.target_backlog_per_replica;
    let n = reading.pods.len() as f64;
    let w: f64 = reading.pods.iter().map(|p| p.waiting).sum();
    let r: f64 = reading.pods.iter().map(|p| p.running.unwrap_or(0.0)).sum();
    assert_eq!(c.waiting, w, "W");
    assert_eq!(c.running, Some(r), "R");
    assert_eq!(c.replicas_reporting, reading.pods.len(), "n");
    let demand = match policy {
        PolicyKind::Capacity | PolicyKind::Default => {
            let e = c.capacity.expect("capacity terms");
            let mu = e.drain_rate;
            if policy == PolicyKind::Capacity {
                assert!(
                    (mu - settings.drain_rate_per_replica).abs() < 1e-3,
                    "μ as configured: {mu}"
                );
            }
            let (rate, pods) = if mu > 0.0 {
                (
                    1.2 * e.peak_rate / mu,
                    reading
                        .pods
                        .iter()
                        .map(|p| (p.waiting / (mu * 30.0)).min(1.0))
                        .sum::<f64>(),
                )
            } else {
                (0.0, 0.0)
            };
            let capacity = t * (rate + pods);
            // Until the learned μ is confident (or a counter is missing), never below backlog.
            if e.backlog_floor {
                capacity.max(w + t * r / settings.running_per_replica)
            } else {
                capacity
            }
        }
        _ => w + t * r / settings.running_per_replica,
    };
    assert!(
        (c.demand - demand).abs() <= 1e-9 * demand.max(1.0),
        "D {} against {demand}",
        c.demand
    );
    let slo = settings.ttft_slo_seconds;
    let latency = match c.ttft_seconds {
        Some(l) if settings.scaler_ttft_guard && w > 0.0 && l > slo * 1.1 => {
            t * n * (l / slo).min(2.0)
        }
        _ => 0.0,
    };
    demand.max(latency)
}

#[test]
fn the_simulator_and_the_server_decide_the_same_b() {
    let config = SimConfig::default();
    let scenario = Scenario::builtin(Builtin::Spike, Some(900.0));
    let mut settings = config.policy.clone();
    settings.drain_rate_per_replica = config.saturated_throughput(&scenario);
    for policy in [
        PolicyKind::Default,
        PolicyKind::Backlog,
        PolicyKind::Capacity,
    ] {
        let (result, trace) = run_one(&config, &scenario, policy, 3, true).expect("runs");
        let calls = trace.expect("recorded").scaler_calls;
        assert_eq!(result.scaler_errors, 0);
        assert!(calls.len() >= 170, "{policy:?}: {} polls", calls.len());
        // The server's path, fresh: the same metadata parsing, the same
        // readings at the same instants, through decide_engine directly.
        let metadata = scaler_metadata(policy, &settings);
        let spec =
            TriggerSpec::from_metadata(metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .expect("metadata valid");
        let mut memory = TriggerMemory::default();
        let base = Instant::now();
        let mut moved = false;
        for call in &calls {
            let at = instant_at(base + Duration::from_secs(3600), call.t);
            let direct = decide_engine(&spec, &call.reading, at, &mut memory);
            assert_eq!(direct, call.decision, "{policy:?} at t={}", call.t);
            let decision = direct.expect("decides");
            // And B is the documented formula of this reading, computed
            // here from the pods' gauges and the trigger's settings (so a
            // wrong term in decide_engine fails, not only a simulator that
            // calls something else).
            let expected = formula(policy, &settings, &call.reading, &decision);
            assert!(
                (decision.backlog - expected).abs() <= 1e-9 * expected.max(1.0),
                "{policy:?} at t={}: B {} against the formula's {expected}: {decision:?}",
                call.t,
                decision.backlog
            );
            moved |= decision.backlog > 0.0;
            assert_eq!(
                decision.components.capacity.is_some(),
                policy != PolicyKind::Backlog,
                "the policy in use is the one asked for (capacity is the default)"
            );
            assert!(
                call.reading
                    .pods
                    .iter()
                    .all(|p| p.finished_total.is_some() && p.ttft.is_some())
            );
        }
        assert!(moved, "{policy:?}: B never left 0");
    }
}

#[test]
fn same_seed_same_summary() {
    let config = SimConfig::default();
    let scenarios = [
        Scenario::builtin(Builtin::Bursty, Some(600.0)),
        Scenario::builtin(Builtin::Step, Some(600.0)),
    ];
    let policies = [PolicyKind::Capacity, PolicyKind::Seed];
    let (a, _) = run_matrix(&config, &scenarios, &policies, 2, 2, None).expect("runs");
    let (b, _) = run_matrix(&config, &scenarios, &policies, 2, 1, None).expect("runs");
    assert_eq!(a, b, "same seeds, any thread count: identical results");
    assert_eq!(a.len(), 8);
    assert_ne!(a[0], a[1], "two seeds differ");
}

#[test]
fn scale_to_zero_and_back_through_keda() {
    let config = SimConfig {
        min_replicas: 0,
        ..SimConfig::default()
    };
    // Traffic, silence for 20 minutes, traffic again.
    let scenario = Scenario::from_rates(
        "gap",
        vec![
            (0.0, 2.0),
            (300.0, 2.0),
            (301.0, 0.0),
            (1500.0, 0.0),
            (1501.0, 2.0),
            (2100.0, 2.0),
        ],
        TokenMix::CHAT,
        None,
    )
    .expect("valid");
    for policy in [PolicyKind::Backlog, PolicyKind::Seed] {
        let (result, trace) = run_one(&config, &scenario, policy, 1, true).expect("runs");
        let series = trace.expect("recorded").series;
        let zero_at = series
            .iter()
            .find(|p| p.replicas == 0)
            .map(|p| p.t)
            .unwrap_or_else(|| panic!("{policy:?} never reached 0"));
        assert!(
            zero_at > 300.0 + 300.0,
            "{policy:?}: cooldown respected, 0 at {zero_at}"
        );
        assert!(
            series.iter().any(|p| p.t > 1500.0 && p.ready > 0),
            "{policy:?}: activated again"
        );
        assert!(
            result.slo_attainment < 1.0,
            "the first requests after zero wait for a cold start"
        );
    }
}

#[test]
fn simulate_command_writes_the_table_csv_and_svg() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let output = Command::new(BIN)
        .args([
            "simulate",
            "--scenario",
            "spike",
            "--seeds",
            "2",
            "--duration-minutes",
            "12",
        ])
        .args(["--jobs", "2", "--out"])
        .arg(&out)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("SLO met"), "{stdout}");
    for policy in [
        "default",
        "capacity",
        "backlog",
        "seed",
        "production-stack",
        "fixed",
        "oracle",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("spike") && l.contains(&format!(" {policy} "))),
            "{policy}: {stdout}"
        );
    }
    let runs = std::fs::read_to_string(out.join("runs.csv")).expect("runs.csv");
    assert_eq!(runs.lines().count(), 1 + 7 * 2);
    let summary = std::fs::read_to_string(out.join("summary.csv")).expect("summary.csv");
    assert_eq!(summary.lines().count(), 1 + 7);
    assert!(
        summary
            .lines()
            .next()
            .is_some_and(|h| h.ends_with(",replica_hours_vs_oracle")),
        "{summary}"
    );
    assert!(
        stdout.contains("μ = "),
        "the model's μ for the mix: {stdout}"
    );
    let series = std::fs::read_to_string(out.join("timeseries-spike.csv")).expect("series");
    assert!(series.lines().count() > 6 * 100);
    let svg = std::fs::read_to_string(out.join("simulate-spike.svg")).expect("svg");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(
        svg.matches("font-weight=\"bold\">").count(),
        1 + 6,
        "title + a panel per simulated policy"
    );

    // A CSV trace instead of the built-in scenarios.
    let trace = dir.path().join("mytrace.csv");
    std::fs::write(&trace, "t_seconds,rate_per_second\n0,3\n300,12\n600,3\n").expect("write");
    let output = Command::new(BIN)
        .args([
            "simulate", "--policy", "capacity", "--seeds", "1", "--trace",
        ])
        .arg(&trace)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("mytrace") && l.contains(" capacity ")),
        "{stdout}"
    );
    assert!(out.join("simulate-mytrace.svg").exists());

    // Request-level traces in both public formats, scaled; a bad row names its line.
    let mooncake = dir.path().join("mc.jsonl");
    let rows: String = (0..600)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": 900, \"output_length\": 200, \"hash_ids\": [1]}}\n",
                i * 500
            )
        })
        .collect();
    std::fs::write(&mooncake, rows).expect("write");
    let azure = dir.path().join("az.csv");
    let rows: String = std::iter::once("TIMESTAMP,ContextTokens,GeneratedTokens\n".to_owned())
        .chain((0..600).map(|i| {
            format!(
                "2023-11-16 18:{:02}:{:02}.5000000,900,200\n",
                i / 120,
                (i / 2) % 60
            )
        }))
        .collect();
    std::fs::write(&azure, rows).expect("write");
    for (trace, name) in [(&mooncake, "mc"), (&azure, "az")] {
        let output = Command::new(BIN)
            .args([
                "simulate",
                "--policy",
                "fixed",
                "--seeds",
                "1",
                "--rate-scale",
                "4.5",
            ])
            .arg("--trace")
            .arg(trace)
            .arg("--out")
            .arg(&out)
            .output()
            .expect("runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{name}: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            stdout.contains("900 input / 200 output tokens"),
            "{name}: {stdout}"
        );
        let runs = std::fs::read_to_string(out.join("runs.csv")).expect("runs.csv");
        let requests: usize = runs
            .lines()
            .nth(1)
            .and_then(|l| l.split(',').nth(3))
            .and_then(|n| n.parse().ok())
            .expect("requests column");
        // 600 rows × 4.5, give or take the coin flips of the half copies.
        assert!(
            (2500..=2900).contains(&requests),
            "{name}: {requests} requests"
        );
    }
    std::fs::write(
        &azure,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00.1,10,5\n2023-11-16 18:00:01.2,10,0\n",
    )
    .expect("write");
    let output = Command::new(BIN)
        .args(["simulate", "--seeds", "1", "--trace"])
        .arg(&azure)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("line 3") && stderr.contains("GeneratedTokens"),
        "{stderr}"
    );

    // A cold-start sweep.
    let output = Command::new(BIN)
        .args([
            "simulate",
            "--scenario",
            "spike",
            "--duration-minutes",
            "12",
            "--seeds",
            "1",
            "--policy",
            "all",
            "--cold-start-seconds",
            "30,180",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for cold in ["30", "180"] {
        for policy in ["default", "capacity", "oracle"] {
            assert!(
                stdout.lines().any(|l| {
                    let cells: Vec<&str> = l.split_whitespace().collect();
                    cells.first() == Some(&cold) && cells.get(1) == Some(&policy)
                }),
                "{cold} s {policy}: {stdout}"
            );
        }
    }
    let sweep = std::fs::read_to_string(out.join("sweep.csv")).expect("sweep.csv");
    assert_eq!(sweep.lines().count(), 1 + 2 * 7);

    // Bad input is a usage error naming the flag.
    let output = Command::new(BIN)
        .args([
            "simulate",
            "--svg-scenario",
            "nope",
            "--scenario",
            "step",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--svg-scenario"));
}

/// Issue 13's drift target, in simulated time: the learned μ of the default
/// trigger (no `drainRatePerReplica`) is within 10 % of the pod model's μ
/// before the outputs double and again within 10 minutes after.
#[test]
fn the_learned_mu_follows_outputs_doubling_within_ten_minutes() {
    let config = SimConfig::default();
    let scenario = Scenario::builtin(Builtin::Drift, Some(2400.0));
    let half = scenario.duration_seconds / 2.0;
    let before = config.saturated_throughput(&scenario);
    let after = config
        .pod
        .saturated_throughput(scenario.mix_at(scenario.duration_seconds).means());
    assert!(
        after < 0.8 * before,
        "the mix changes μ: {before} → {after}"
    );
    let (_, trace) = run_one(&config, &scenario, PolicyKind::Default, 0, true).expect("run");
    let trace = trace.expect("recorded");
    let mu_at = |t: f64| {
        trace
            .series
            .iter()
            .rfind(|p| p.t <= t)
            .and_then(|p| p.drain_rate)
            .expect("the default trigger reports μ")
    };
    let just_before = mu_at(half - 5.0);
    assert!(
        (just_before / before - 1.0).abs() <= 0.10,
        "before: learned {just_before:.3}, model {before:.3}"
    );
    // Every point from 10 minutes after the change to the end.
    for p in trace.series.iter().filter(|p| p.t >= half + 600.0) {
        let mu = p.drain_rate.expect("μ");
        assert!(
            (mu / after - 1.0).abs() <= 0.10,
            "t = {}: learned {mu:.3}, model {after:.3}",
            p.t
        );
    }
}

/// The project's code-completion trace, as `simulate` builds it.
fn code_completion() -> Scenario {
    backlog_scaler::cli::simulate::all_scenarios(None, None)
        .expect("built-in traces")
        .into_iter()
        .find(|s| s.name == "code-completion")
        .expect("the code-completion trace")
}

/// Issue 13's convergence target: the learned μ is within 10 % of the model's at every point
/// of `series` from 15 minutes on (and there are more than 100 of them).
fn assert_mu_within_ten_percent_from_fifteen_minutes(
    series: &[SeriesPoint],
    model: f64,
    case: &str,
) {
    let points: Vec<_> = series.iter().filter(|p| p.t >= 900.0).collect();
    assert!(points.len() > 100, "{case}: {} points", points.len());
    for p in points {
        let mu = p.drain_rate.expect("the default trigger reports μ");
        assert!(
            (mu / model - 1.0).abs() <= 0.10,
            "{case}, t = {}: learned {mu:.3}, model {model:.3}",
            p.t
        );
    }
}

/// Issue 13's prefill-heavy miss (decision 0027): on the code-completion
/// trace (1751-token prompts, 44-token outputs) the request unit's
/// `S(k) = α + β·k` under-estimated μ by ~28 % (bursts queue prompts inside
/// the engine, so time in service at a low batch sits above the steady
/// curve). Learned in tokens, from the step cost, the median of the learned
/// μ over the second half of the run is within 10 % of the pod model's.
#[test]
fn the_learned_mu_of_a_prefill_heavy_trace_is_within_five_percent_at_the_median() {
    let config = SimConfig::default();
    let scenario = code_completion();
    let model = config.saturated_throughput(&scenario);
    let (_, trace) = run_one(&config, &scenario, PolicyKind::Default, 0, true).expect("run");
    let trace = trace.expect("recorded");
    let half = scenario.duration_seconds / 2.0;
    let mut errors: Vec<f64> = trace
        .series
        .iter()
        .filter(|p| p.t >= half)
        .filter_map(|p| p.drain_rate)
        .map(|mu| mu / model - 1.0)
        .collect();
    assert!(errors.len() > 100, "{} points", errors.len());
    errors.sort_by(f64::total_cmp);
    let median = errors[errors.len() / 2];
    assert!(
        median.abs() <= 0.05,
        "median error {median:+.3} of μ against the model's {model:.3}"
    );
}

/// Issue 13's convergence target in the token unit, on the simulator's pod
/// model (it exposes vLLM's token counters, so the default trigger learns μ
/// in tokens, decision 0027): given `drainRatePerReplica` 2× too high and 2×
/// too low as the prior, the learned μ is within 10 % of the model's at every
/// point from 15 minutes on. No warm-up, so the scaler's first poll is at
/// t = 0 with nothing learned and the 15 minutes are all the traffic it has
/// seen (with the default 600 s warm-up it would have learned before t = 0).
#[test]
fn the_learned_mu_in_tokens_converges_from_priors_two_times_off_within_fifteen_minutes() {
    use backlog_scaler::decide::capacity::DrainRateUnit;
    use backlog_scaler::decide::capacity::learn::DrainRateSource;

    let scenario = Scenario::builtin(Builtin::Ramp, Some(2400.0));
    let mut config = SimConfig {
        warmup_seconds: 0.0,
        ..SimConfig::default()
    };
    let model = config.saturated_throughput(&scenario);
    for factor in [2.0, 0.5] {
        let prior = factor * model;
        config.policy.capacity_extra =
            vec![("drainRatePerReplica".to_owned(), format!("{prior:.3}"))];
        let (_, trace) = run_one(&config, &scenario, PolicyKind::Default, 0, true).expect("run");
        let trace = trace.expect("recorded");
        let estimates: Vec<_> = trace
            .scaler_calls
            .iter()
            .filter_map(|c| {
                let d = c.decision.as_ref().ok()?;
                Some((c.t, d.components.capacity?))
            })
            .collect();
        // The prior is what the trigger starts from, so it is what converges.
        let (_, first) = estimates.first().expect("the default trigger polls");
        assert_eq!(
            first.drain_rate_source,
            DrainRateSource::Prior,
            "prior ×{factor}"
        );
        assert!(
            (first.drain_rate / prior - 1.0).abs() < 1e-3,
            "prior ×{factor}: first μ {:.3}, prior {prior:.3}",
            first.drain_rate
        );
        let late: Vec<_> = estimates.iter().filter(|(t, _)| *t >= 900.0).collect();
        assert!(late.len() > 100, "prior ×{factor}: {} polls", late.len());
        // From 15 minutes on, μ is the token unit's, not the prior's.
        for (t, e) in &late {
            assert_eq!(
                e.drain_rate_unit,
                DrainRateUnit::Tokens,
                "prior ×{factor}, t = {t}"
            );
        }
        assert_mu_within_ten_percent_from_fifteen_minutes(
            &trace.series,
            model,
            &format!("prior ×{factor}"),
        );
    }
}

/// The same target on the prefill-heavy code-completion trace (bursty; 1751-token prompts,
/// 44-token outputs): from a `drainRatePerReplica` 2× too high, 2× too low, or none, with no
/// warm-up, the learned μ is within 10 % of the model's at every point from 15 minutes on.
/// Before busy intervals needed an eighth of the full batch running (decision 0027,
/// 2026-12-04), a pod idling between a burst's last requests read as slow steps and μ was up
/// to 22 % low there.
#[test]
fn the_learned_mu_of_a_prefill_heavy_trace_converges_from_priors_two_times_off_within_fifteen_minutes()
 {
    let scenario = code_completion();
    let mut config = SimConfig {
        warmup_seconds: 0.0,
        ..SimConfig::default()
    };
    let model = config.saturated_throughput(&scenario);
    for factor in [Some(2.0), Some(0.5), None] {
        config.policy.capacity_extra = factor
            .map(|f| {
                vec![(
                    "drainRatePerReplica".to_owned(),
                    format!("{:.3}", f * model),
                )]
            })
            .unwrap_or_default();
        let (_, trace) = run_one(&config, &scenario, PolicyKind::Default, 0, true).expect("run");
        assert_mu_within_ten_percent_from_fifteen_minutes(
            &trace.expect("recorded").series,
            model,
            &format!("prior {factor:?}"),
        );
    }
}

/// Decision 0030 on the project's own traces: `chat`, a smooth load replayed 12× with each
/// request's copies in the same millisecond, swings `λ̂` by more than two pods' μ within 120 s
/// (its arrivals come in clumps), and is no burst: the hold stays the quiet one at every poll.
/// `code-completion`'s bursts, in the same clumps, still are (a full `peakHoldSeconds`).
#[test]
fn a_smooth_trace_in_clumps_is_not_read_as_bursting_and_a_bursty_one_still_is() {
    use backlog_scaler::decide::capacity::QUIET_PEAK_HOLD_SECONDS;
    let config = SimConfig::default();
    let scenarios = backlog_scaler::cli::simulate::all_scenarios(None, None).expect("traces");
    for (name, bursts) in [("chat", false), ("code-completion", true)] {
        let scenario = scenarios
            .iter()
            .find(|s| s.name == name)
            .expect("a built-in trace");
        let (_, trace) = run_one(&config, scenario, PolicyKind::Default, 0, true).expect("runs");
        let holds: Vec<f64> = trace
            .expect("recorded")
            .scaler_calls
            .iter()
            .filter(|call| call.t >= 0.0)
            .filter_map(|call| call.decision.as_ref().ok()?.components.capacity)
            .map(|estimate| estimate.peak_hold_seconds)
            .collect();
        assert!(holds.len() > 300, "{name}: {} polls", holds.len());
        let longest = holds.iter().copied().fold(0.0, f64::max);
        if bursts {
            assert!(longest >= 600.0, "{name}: the longest hold {longest} s");
        } else {
            assert_eq!(longest, QUIET_PEAK_HOLD_SECONDS, "{name}: a false burst");
        }
    }
}

/// Issue 13's convergence target at the peak of a burst that saturates the fleet (decision
/// 0027, third note): vLLM counts a prompt as its prefill completes and a request as it
/// finishes, so while the running gauge grows, prompts over finishes read high and μ low. With
/// the prompts divided by the requests that began decoding (`ΔF + ΔR`), every settled poll of
/// the seeds where that reading missed (`bursty` seed 7: four polls 10.7–12.8 % low; `spike`
/// seed 3: one 10.9 % low; against the model's μ before its full batch took the running
/// context, decision 0014: with `ΔP/ΔF` seed 7 is still 11.2 % low) is within 10 % of the
/// model's μ.
#[test]
fn the_learned_mu_stays_within_ten_percent_at_the_peak_of_a_saturating_burst() {
    let config = SimConfig::default();
    for (builtin, seed) in [(Builtin::Bursty, 7), (Builtin::Spike, 3)] {
        let scenario = Scenario::builtin(builtin, None);
        let (result, _) =
            run_one(&config, &scenario, PolicyKind::Default, seed, false).expect("run");
        let summary =
            mu_error::summarize([(scenario.name.as_str(), &result.learned_mu_errors[..])]);
        let [run] = &summary[..] else {
            panic!("{builtin:?}: one summary expected, got {summary:?}");
        };
        assert!(run.polls > 500, "{builtin:?}: {} polls", run.polls);
        assert!(
            run.worst.abs() <= mu_error::WITHIN,
            "{builtin:?} seed {seed}: worst settled error {:+.3}",
            run.worst
        );
    }
}

/// The seed article's triggers as it wrote them: waiting 10, running 32 (not
/// the engine's batch limit that this scaler's `runningPerReplica` copies),
/// TTFT p95 over 1 min against 2 s.
#[test]
fn the_seed_asks_for_the_articles_literal_targets() {
    use backlog_scaler::sim::policies::{Controller, PromQuery};
    let settings = SimConfig::default().policy;
    assert_eq!(settings.running_per_replica, 256.0);
    let Ok(Controller::Prometheus(triggers)) =
        Controller::new(PolicyKind::Seed, &settings, 0, Instant::now(), false)
    else {
        panic!("the seed reads Prometheus");
    };
    let targets: Vec<(PromQuery, Target)> = triggers.iter().map(|t| (t.query, t.target)).collect();
    assert_eq!(
        targets,
        [
            (PromQuery::Waiting, Target::AverageValue(10.0)),
            (PromQuery::Running, Target::AverageValue(32.0)),
            (
                PromQuery::TtftQuantile {
                    quantile: 0.95,
                    window_seconds: 60.0
                },
                Target::Value(2.0)
            ),
        ]
    );
}
