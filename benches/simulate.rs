//! How long `simulate` takes: the two targets, measured by the simulator's own code.
//!
//! Run with `cargo bench --bench simulate` (release profile). It prints:
//! 1. the full default comparison — every built-in scenario × every policy × 8 seeds, on all
//!    cores (`--jobs` = the machine's CPUs), as `simulate --scenario all --policy all` runs it
//!    (target: ≤ 60 s on 2 cores);
//! 2. a one-hour request-level trace at 20 req/s (a Poisson trace of the chat mix, built here),
//!    one run per policy, seed 0, on one thread (target: ≤ 5 s per policy per seed).
//!
//! `SIM_BENCH_SEEDS` (default 8) changes the seeds of part 1. Times are wall-clock and include
//! whatever else the machine is doing; the README quotes a run on an otherwise idle machine.

use std::time::Instant;

use backlog_scaler::cli::simulate::all_scenarios;
use backlog_scaler::sim::arrivals::Scenario;
use backlog_scaler::sim::policies::PolicyKind;
use backlog_scaler::sim::rng::Rng;
use backlog_scaler::sim::run::{SimConfig, run_matrix, run_one};
use backlog_scaler::sim::trace::TraceRequest;
use backlog_scaler::sim::workload::TokenMix;

fn main() {
    let seeds: u64 = std::env::var("SIM_BENCH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let jobs = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let config = SimConfig::default();
    let scenarios = match all_scenarios(None, None) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bench simulate: {e}");
            std::process::exit(1);
        }
    };
    let policies = PolicyKind::ALL.to_vec();
    let started = Instant::now();
    let runs = match run_matrix(&config, &scenarios, &policies, seeds, jobs, None) {
        Ok((results, _)) => results.len(),
        Err(e) => {
            eprintln!("bench simulate: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "full comparison: {} scenarios × {} policies × {seeds} seeds = {runs} runs on {jobs} threads in {:.1} s",
        scenarios.len(),
        policies.len(),
        started.elapsed().as_secs_f64()
    );

    // A one-hour request-level trace at 20 req/s.
    let mut rng = Rng::new(20, 20);
    let mut t = 0.0;
    let mut requests = Vec::new();
    loop {
        t += rng.exponential(20.0);
        if t >= 3600.0 {
            break;
        }
        let r = TokenMix::CHAT.draw(&mut rng, t);
        requests.push(TraceRequest {
            arrival_seconds: t,
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
        });
    }
    let count = requests.len();
    let trace = match Scenario::from_requests("hour-at-20", requests, 1.0, 0.001, Some(3600.0)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bench simulate: {e}");
            std::process::exit(1);
        }
    };
    println!("one-hour request-level trace at 20 req/s ({count} requests), seed 0, one thread:");
    for policy in PolicyKind::ALL {
        let started = Instant::now();
        if let Err(e) = run_one(&config, &trace, policy, 0, false) {
            eprintln!("bench simulate: {}: {e}", policy.name());
            std::process::exit(1);
        }
        println!(
            "  {:<16} {:.3} s",
            policy.name(),
            started.elapsed().as_secs_f64()
        );
    }
}
