//! `simulate`: its flags, turned into the simulator's scenarios, policies and configuration
//! ([`crate::sim`]); runs the matrix, prints the table and writes the CSV, Markdown and SVG files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::ValueEnum;

use crate::sim::arrivals::{Builtin, Scenario};
use crate::sim::hpa::{Behavior, PolicyType, ScalingPolicy, ScalingRules, SelectPolicy};
use crate::sim::policies::PolicyKind;
use crate::sim::run::{SimConfig, run_matrix};
use crate::sim::{report, svg};

/// `--scenario`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScenarioArg {
    /// 4 → 20 → 4 req/s steps.
    Step,
    /// A slow ramp up and down, 2 ↔ 22 req/s.
    Ramp,
    /// One compressed day, 3 ↔ 20 req/s.
    Diurnal,
    /// Random bursts (two-state MMPP), 6 / 20 req/s.
    Bursty,
    /// A 5-minute spike from 5 to 25 req/s.
    Spike,
    /// Every scenario above.
    All,
}

/// `--policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// This scaler, `policy: backlog`.
    Backlog,
    /// This scaler, `policy: capacity`.
    Capacity,
    /// The seed article's three-trigger ScaledObject.
    Seed,
    /// vLLM production-stack's default trigger.
    ProductionStack,
    /// A fixed fleet sized for the peak.
    Fixed,
    /// Every policy above.
    All,
}

/// `--scale-up`: the HPA's `behavior.scaleUp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScaleUpArg {
    /// Kubernetes' default: no window, max(4 pods, +100 %) per 15 s.
    Default,
    /// No window, max(+20 pods, +900 %) per 15 s.
    Fast,
    /// A cautious setup often copied: 60 s window, +1 pod per 60 s.
    Slow,
}

/// Flags of `backlog-scaler simulate`.
#[derive(Debug, Clone, clap::Args)]
pub struct SimulateArgs {
    /// Traffic scenario.
    #[arg(long, value_enum, default_value_t = ScenarioArg::All)]
    pub scenario: ScenarioArg,
    /// Policy to simulate.
    #[arg(long, value_enum, default_value_t = PolicyArg::All)]
    pub policy: PolicyArg,
    /// Seeds per scenario × policy (seeds 0..N); tables show the mean.
    #[arg(long, default_value_t = 8)]
    pub seeds: u64,
    /// Replay this CSV trace (`t_seconds,rate_per_second`, linearly
    /// interpolated) instead of the built-in scenarios.
    #[arg(long, value_name = "FILE.csv")]
    pub trace: Option<PathBuf>,
    /// Directory for the CSV, Markdown and SVG output (created if needed).
    #[arg(long, value_name = "DIR", default_value = "simulate-out")]
    pub out: PathBuf,
    /// Length of each run, minutes (built-in shapes are stretched or
    /// compressed to it; default: 90–180 per scenario).
    #[arg(long, value_name = "N")]
    pub duration_minutes: Option<f64>,
    /// Scenario drawn in the SVG chart, seed 0 (default: the first run).
    #[arg(long, value_name = "NAME")]
    pub svg_scenario: Option<String>,
    /// Seconds from pod creation to ready (image pull, model load).
    #[arg(long, default_value_t = 90.0)]
    pub cold_start_seconds: f64,
    /// KEDA `minReplicaCount`; 0 turns on activation and the cooldown.
    #[arg(long, default_value_t = 1)]
    pub min_replicas: i32,
    /// KEDA `maxReplicaCount`.
    #[arg(long, default_value_t = 20)]
    pub max_replicas: i32,
    /// The HPA's scale-up `behavior`.
    #[arg(long, value_enum, default_value_t = ScaleUpArg::Default)]
    pub scale_up: ScaleUpArg,
    /// Give `backlog` and `capacity` triggers `ttftSloSeconds` (the TTFT
    /// latency guard on top of the policy), `true` or `false`.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub ttft_guard: bool,
    /// Extra metadata for the `capacity` trigger, `KEY=VALUE`, repeatable
    /// (e.g. `--capacity-set peakHoldSeconds=600`); validated as the server
    /// validates it.
    #[arg(long, value_name = "KEY=VALUE")]
    pub capacity_set: Vec<String>,
    /// Runs in parallel (default: the number of CPUs).
    #[arg(long)]
    pub jobs: Option<usize>,
}

impl ScaleUpArg {
    fn rules(self) -> ScalingRules {
        match self {
            ScaleUpArg::Default => Behavior::default().scale_up,
            ScaleUpArg::Fast => ScalingRules {
                stabilization_seconds: 0.0,
                select: SelectPolicy::Max,
                policies: vec![
                    ScalingPolicy {
                        kind: PolicyType::Pods,
                        value: 20,
                        period_seconds: 15.0,
                    },
                    ScalingPolicy {
                        kind: PolicyType::Percent,
                        value: 900,
                        period_seconds: 15.0,
                    },
                ],
            },
            ScaleUpArg::Slow => ScalingRules {
                stabilization_seconds: 60.0,
                select: SelectPolicy::Max,
                policies: vec![ScalingPolicy {
                    kind: PolicyType::Pods,
                    value: 1,
                    period_seconds: 60.0,
                }],
            },
        }
    }
}

/// The scenarios `args` ask for.
pub fn scenarios(args: &SimulateArgs) -> Result<Vec<Scenario>, String> {
    let duration = args.duration_minutes.map(|m| m * 60.0);
    if let Some(d) = duration
        && !(d >= 60.0 && d.is_finite())
    {
        return Err(format!(
            "--duration-minutes must be at least 1, got {}",
            d / 60.0
        ));
    }
    if let Some(path) = &args.trace {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read --trace {}: {e}", path.display()))?;
        let name = path
            .file_stem()
            .map_or_else(|| "trace".to_owned(), |s| s.to_string_lossy().into_owned());
        return Ok(vec![Scenario::from_trace_csv(&name, &text, duration)?]);
    }
    let kinds: Vec<Builtin> = match args.scenario {
        ScenarioArg::Step => vec![Builtin::Step],
        ScenarioArg::Ramp => vec![Builtin::Ramp],
        ScenarioArg::Diurnal => vec![Builtin::Diurnal],
        ScenarioArg::Bursty => vec![Builtin::Bursty],
        ScenarioArg::Spike => vec![Builtin::Spike],
        ScenarioArg::All => Builtin::ALL.to_vec(),
    };
    Ok(kinds
        .into_iter()
        .map(|k| Scenario::builtin(k, duration))
        .collect())
}

/// The policies `args` ask for.
pub fn policies(args: &SimulateArgs) -> Vec<PolicyKind> {
    match args.policy {
        PolicyArg::Backlog => vec![PolicyKind::Backlog],
        PolicyArg::Capacity => vec![PolicyKind::Capacity],
        PolicyArg::Seed => vec![PolicyKind::Seed],
        PolicyArg::ProductionStack => vec![PolicyKind::ProductionStack],
        PolicyArg::Fixed => vec![PolicyKind::Fixed],
        PolicyArg::All => PolicyKind::ALL.to_vec(),
    }
}

/// The configuration `args` ask for.
pub fn config(args: &SimulateArgs) -> Result<SimConfig, String> {
    let mut config = SimConfig::default();
    if !(args.cold_start_seconds >= 0.0 && args.cold_start_seconds.is_finite()) {
        return Err("--cold-start-seconds must be ≥ 0".to_owned());
    }
    if args.min_replicas < 0 || args.max_replicas < args.min_replicas.max(1) {
        return Err(format!(
            "need 0 ≤ --min-replicas ≤ --max-replicas and --max-replicas ≥ 1, got {} and {}",
            args.min_replicas, args.max_replicas
        ));
    }
    config.pod.cold_start_seconds = args.cold_start_seconds;
    config.min_replicas = args.min_replicas;
    config.max_replicas = args.max_replicas;
    config.behavior.scale_up = args.scale_up.rules();
    config.policy.scaler_ttft_guard = args.ttft_guard;
    for pair in &args.capacity_set {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!("--capacity-set `{pair}`: expected KEY=VALUE"));
        };
        config
            .policy
            .capacity_extra
            .push((key.trim().to_owned(), value.trim().to_owned()));
    }
    Ok(config)
}

fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf, String> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// Run `simulate`: print the table, write the files.
pub fn run(args: SimulateArgs) -> ExitCode {
    match simulate(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("backlog-scaler simulate: {message}");
            ExitCode::from(2)
        }
    }
}

fn simulate(args: &SimulateArgs) -> Result<(), String> {
    if args.seeds == 0 {
        return Err("--seeds must be at least 1".to_owned());
    }
    let config = config(args)?;
    let scenarios = scenarios(args)?;
    let policies = policies(args);
    let svg_scenario = match &args.svg_scenario {
        Some(name) if scenarios.iter().any(|s| &s.name == name) => name.clone(),
        Some(name) => {
            return Err(format!(
                "--svg-scenario `{name}` is not among the scenarios run ({})",
                scenarios
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        None => scenarios
            .first()
            .map(|s| s.name.clone())
            .unwrap_or_default(),
    };
    let jobs = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create --out {}: {e}", args.out.display()))?;

    let started = Instant::now();
    let (results, traces) = run_matrix(
        &config,
        &scenarios,
        &policies,
        args.seeds,
        jobs,
        Some(&svg_scenario),
    )?;
    let summaries = report::summarize(&results);
    let mu = config.saturated_throughput();
    println!(
        "{} runs ({} scenarios × {} policies × {} seeds) in {:.1} s; μ = {mu:.3} req/s per pod at a full batch of {}, cold start {} s, TTFT SLO {} s (latency guard on backlog/capacity: {}), replicas {}–{}; means over seeds:\n",
        results.len(),
        scenarios.len(),
        policies.len(),
        args.seeds,
        started.elapsed().as_secs_f64(),
        config.pod.max_num_seqs,
        config.pod.cold_start_seconds,
        config.policy.ttft_slo_seconds,
        if config.policy.scaler_ttft_guard {
            "on"
        } else {
            "off"
        },
        config.min_replicas,
        config.max_replicas,
    );
    if !config.policy.capacity_extra.is_empty() {
        let extra: Vec<String> = config
            .policy
            .capacity_extra
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        println!("capacity trigger also has: {}\n", extra.join(", "));
    }
    print!("{}", report::text_table(&summaries));
    let errors: usize = results.iter().map(|r| r.scaler_errors).sum();
    if errors > 0 {
        eprintln!("warning: the scaler's decision code answered {errors} errors (see runs.csv)");
    }

    let mut written = vec![
        write(&args.out, "runs.csv", &report::runs_csv(&results))?,
        write(&args.out, "summary.csv", &report::summary_csv(&summaries))?,
        write(&args.out, "summary.md", &report::markdown_table(&summaries))?,
    ];
    if let Some(scenario) = scenarios.iter().find(|s| s.name == svg_scenario) {
        written.push(write(
            &args.out,
            &format!("timeseries-{}.csv", scenario.name),
            &report::series_csv(&traces),
        )?);
        let chart = svg::render(
            &scenario.name,
            0,
            scenario.duration_seconds,
            config.policy.ttft_slo_seconds,
            &traces,
        );
        written.push(write(
            &args.out,
            &format!("simulate-{}.svg", scenario.name),
            &chart,
        )?);
    }
    println!();
    for path in written {
        println!("wrote {}", path.display());
    }
    Ok(())
}
