//! `simulate`: its flags, turned into the simulator's scenarios, policies and configuration
//! ([`crate::sim`]); runs the matrix, prints the table and writes the CSV, Markdown and SVG files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::ValueEnum;

use super::stdout::{out, outln};
use crate::sim::arrivals::Scenario;
use crate::sim::hpa::{Behavior, PolicyType, ScalingPolicy, ScalingRules, SelectPolicy};
use crate::sim::mu_error::ModelMu;
use crate::sim::policies::PolicyKind;
use crate::sim::run::{SimConfig, run_matrix, scenario_means};
use crate::sim::{mu_error, report, svg, sweep};

mod scenarios;
pub use scenarios::{all_scenarios, scenario_from_trace, scenarios};

/// `--scenario`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScenarioArg {
    /// 20 → 100 → 20 req/s steps.
    Step,
    /// A slow ramp up and down, 10 ↔ 110 req/s.
    Ramp,
    /// One compressed day, 15 ↔ 100 req/s.
    Diurnal,
    /// Random bursts (two-state MMPP), 30 / 100 req/s.
    Bursty,
    /// A 5-minute spike from 25 to 125 req/s.
    Spike,
    /// A steady 60 req/s whose outputs double in length halfway (the mix drifts).
    Drift,
    /// The project's chat-like request-level trace (sim/traces/chat.csv), replayed 12×.
    Chat,
    /// The project's bursty code-completion trace (sim/traces/code-completion.jsonl), 12×.
    CodeCompletion,
    /// Every scenario above.
    All,
}

/// `--policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// This scaler as deployed without a load test: no `policy`, no `drainRatePerReplica`.
    Default,
    /// This scaler, `policy: capacity` with the pod model's true μ.
    Capacity,
    /// This scaler, `policy: backlog`.
    Backlog,
    /// The seed article's three-trigger ScaledObject.
    Seed,
    /// vLLM production-stack's default trigger.
    ProductionStack,
    /// A fixed fleet sized for the peak.
    Fixed,
    /// The clairvoyant lower bound on GPU-hours (computed, not simulated).
    Oracle,
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
    /// Replay this trace instead of the built-in scenarios: a rate CSV
    /// (`t_seconds,rate_per_second`, linearly interpolated), Mooncake JSONL or an Azure LLM
    /// inference CSV (one row per request), told apart by their content.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Multiply a trace's load: each request is replayed ⌊X⌋ times plus once more with
    /// probability frac(X), the copies spread within the trace's timestamp resolution (a rate
    /// CSV's rates are multiplied by X). Default 1 for `--trace`, 12 for the built-in traces;
    /// a built-in shape (`step` … `drift`) has fixed rates and refuses it.
    #[arg(long, value_name = "X")]
    pub rate_scale: Option<f64>,
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
    /// Seconds from pod creation to ready (image pull, model load); several, comma-separated
    /// (`30,60,90,120,180,300`), run a cold-start sweep.
    #[arg(
        long,
        value_name = "S[,S...]",
        value_delimiter = ',',
        default_value = "90"
    )]
    pub cold_start_seconds: Vec<f64>,
    /// KEDA `minReplicaCount`; 0 turns on activation and the cooldown.
    #[arg(long, default_value_t = 1)]
    pub min_replicas: i32,
    /// KEDA `maxReplicaCount`.
    #[arg(long, default_value_t = 20)]
    pub max_replicas: i32,
    /// The HPA's scale-up `behavior`.
    #[arg(long, value_enum, default_value_t = ScaleUpArg::Default)]
    pub scale_up: ScaleUpArg,
    /// The HPA's `behavior.scaleDown.stabilizationWindowSeconds` (Kubernetes' default 300;
    /// set in a ScaledObject under `advanced.horizontalPodAutoscalerConfig`).
    #[arg(long, value_name = "S", default_value_t = 300.0)]
    pub scale_down_window_seconds: f64,
    /// Seconds of steady load at the first rate simulated before `t = 0`, so a run starts in
    /// the steady state of its first load; 0 starts cold, from the first poll.
    #[arg(long, value_name = "S", default_value_t = 600.0)]
    pub warmup_seconds: f64,
    /// Give `backlog` and `capacity` triggers `ttftSloSeconds` (the TTFT
    /// latency guard on top of the policy), `true` or `false`.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub ttft_guard: bool,
    /// Extra metadata for the `default` and `capacity` triggers, `KEY=VALUE`, repeatable
    /// (e.g. `--capacity-set peakHoldSeconds=600`); validated as the server
    /// validates it.
    #[arg(long, value_name = "KEY=VALUE")]
    pub capacity_set: Vec<String>,
    /// Give the `default` trigger a `drainRatePerReplica` of F times each scenario's pod-model
    /// μ as its prior (2 or 0.5: a load test 2× off); without it, no prior. The learned μ's
    /// table shows how far it converges.
    #[arg(long, value_name = "F")]
    pub prior_factor: Option<f64>,
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

/// The policies `args` ask for.
pub fn policies(args: &SimulateArgs) -> Vec<PolicyKind> {
    match args.policy {
        PolicyArg::Default => vec![PolicyKind::Default],
        PolicyArg::Backlog => vec![PolicyKind::Backlog],
        PolicyArg::Capacity => vec![PolicyKind::Capacity],
        PolicyArg::Seed => vec![PolicyKind::Seed],
        PolicyArg::ProductionStack => vec![PolicyKind::ProductionStack],
        PolicyArg::Fixed => vec![PolicyKind::Fixed],
        PolicyArg::Oracle => vec![PolicyKind::Oracle],
        PolicyArg::All => PolicyKind::ALL.to_vec(),
    }
}

/// The configuration `args` ask for.
pub fn config(args: &SimulateArgs) -> Result<SimConfig, String> {
    let mut config = SimConfig::default();
    if args.cold_start_seconds.is_empty()
        || args
            .cold_start_seconds
            .iter()
            .any(|s| !(*s >= 0.0 && s.is_finite()))
    {
        return Err(format!(
            "--cold-start-seconds must be one or more numbers ≥ 0, got {:?}",
            args.cold_start_seconds
        ));
    }
    if args.min_replicas < 0 || args.max_replicas < args.min_replicas.max(1) {
        return Err(format!(
            "need 0 ≤ --min-replicas ≤ --max-replicas and --max-replicas ≥ 1, got {} and {}",
            args.min_replicas, args.max_replicas
        ));
    }
    for (flag, value) in [
        (
            "--scale-down-window-seconds",
            args.scale_down_window_seconds,
        ),
        ("--warmup-seconds", args.warmup_seconds),
    ] {
        if !(value >= 0.0 && value.is_finite()) {
            return Err(format!("{flag} must be a number ≥ 0, got {value}"));
        }
    }
    config.behavior.scale_down.stabilization_seconds = args.scale_down_window_seconds;
    config.warmup_seconds = args.warmup_seconds;
    config.pod.cold_start_seconds = args.cold_start_seconds[0];
    config.min_replicas = args.min_replicas;
    config.max_replicas = args.max_replicas;
    config.behavior.scale_up = args.scale_up.rules();
    config.policy.scaler_ttft_guard = args.ttft_guard;
    if let Some(factor) = args.prior_factor
        && !(factor > 0.0 && factor.is_finite())
    {
        return Err(format!("--prior-factor must be a number > 0, got {factor}"));
    }
    config.policy.default_prior_factor = args.prior_factor;
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
    if args.cold_start_seconds.len() > 1 {
        return sweep(args, &config, &scenarios, &policies, jobs);
    }

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
    outln!(
        "{} runs ({} scenarios × {} policies × {} seeds) in {:.1} s; cold start {} s, TTFT SLO {} s (latency guard on this scaler's triggers: {}), replicas {}–{}, HPA scale-down window {} s, {} s warm start at λ(0); means over seeds.",
        results.len(),
        scenarios.len(),
        policies.len(),
        args.seeds,
        started.elapsed().as_secs_f64(),
        config.pod.cold_start_seconds,
        config.policy.ttft_slo_seconds,
        if config.policy.scaler_ttft_guard {
            "on"
        } else {
            "off"
        },
        config.min_replicas,
        config.max_replicas,
        config.behavior.scale_down.stabilization_seconds,
        config.warmup_seconds,
    );
    out!("{}", mu_lines(&config, &scenarios));
    if !config.policy.capacity_extra.is_empty() {
        let extra: Vec<String> = config
            .policy
            .capacity_extra
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        outln!(
            "default and capacity triggers also have: {}",
            extra.join(", ")
        );
    }
    outln!();
    out!("{}", report::text_table(&summaries));
    let errors: usize = results.iter().map(|r| r.scaler_errors).sum();
    if errors > 0 {
        eprintln!("warning: the scaler's decision code answered {errors} errors (see runs.csv)");
    }

    let mut written = vec![
        write(&args.out, "runs.csv", &report::runs_csv(&results))?,
        write(&args.out, "summary.csv", &report::summary_csv(&summaries))?,
        write(&args.out, "summary.md", &report::markdown_table(&summaries))?,
    ];
    let learned = mu_error::summarize(
        results
            .iter()
            .filter(|r| r.policy == PolicyKind::Default)
            .map(|r| (r.scenario.as_str(), r.learned_mu_errors.as_slice())),
    );
    if !learned.is_empty() {
        let table = mu_error::markdown_table(&learned);
        outln!(
            "\n`default`'s learned μ against the pod model's ({}; all seeds):\n\n{table}",
            mu_error::settled_caption()
        );
        written.push(write(&args.out, "mu.md", &table)?);
    }
    if let Some(scenario) = scenarios.iter().find(|s| s.name == svg_scenario) {
        let drawn: Vec<_> = traces
            .into_iter()
            .filter(|(policy, _)| *policy != PolicyKind::Oracle)
            .collect();
        written.push(write(
            &args.out,
            &format!("timeseries-{}.csv", scenario.name),
            &report::series_csv(&drawn),
        )?);
        let chart = svg::render(
            &scenario.name,
            0,
            scenario.duration_seconds,
            config.policy.ttft_slo_seconds,
            &drawn,
        );
        written.push(write(
            &args.out,
            &format!("simulate-{}.svg", scenario.name),
            &chart,
        )?);
    }
    outln!();
    for path in written {
        outln!("wrote {}", path.display());
    }
    Ok(())
}

/// One line per scenario: the pod model's μ for its mix (what `capacity` is given).
fn mu_lines(config: &SimConfig, scenarios: &[Scenario]) -> String {
    let mut out = String::from(
        "pod model (decision 0014): Llama-3.1-8B-Instruct, vLLM on one A100 40GB; μ = requests/s per pod at a full batch of the mix:\n",
    );
    for scenario in scenarios {
        let means = scenario_means(scenario);
        let mu = config.saturated_throughput(scenario);
        out.push_str(&format!(
            "  {:<16} μ = {:.2} req/s  (batch {:.0}, {:.0} input / {:.0} output tokens per request){}\n",
            scenario.name,
            mu,
            config.pod.full_batch(means),
            means.input_tokens,
            means.output_tokens,
            if scenario.name == "drift" {
                format!(
                    "; {:.2} req/s once outputs double",
                    ModelMu::new(&config.pod, scenario, mu).at(scenario.duration_seconds)
                )
            } else {
                String::new()
            }
        ));
    }
    out
}

/// `--cold-start-seconds A,B,...`: the matrix once per cold start; per policy, the mean SLO
/// attainment over the scenarios and the replica-hours summed over them (and over the
/// oracle's).
fn sweep(
    args: &SimulateArgs,
    config: &SimConfig,
    scenarios: &[Scenario],
    policies: &[PolicyKind],
    jobs: usize,
) -> Result<(), String> {
    let started = Instant::now();
    let mut rows: Vec<(f64, report::Summary)> = Vec::new();
    for cold in &args.cold_start_seconds {
        let mut config = config.clone();
        config.pod.cold_start_seconds = *cold;
        let (results, _) = run_matrix(&config, scenarios, policies, args.seeds, jobs, None)?;
        rows.extend(report::summarize(&results).into_iter().map(|s| (*cold, s)));
    }
    outln!(
        "cold-start sweep: {} cold starts × {} scenarios × {} policies × {} seeds in {:.1} s; per policy the mean SLO attainment over the scenarios ({}) and the replica-hours summed over them.\n",
        args.cold_start_seconds.len(),
        scenarios.len(),
        policies.len(),
        args.seeds,
        started.elapsed().as_secs_f64(),
        scenarios
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    );
    let table = sweep::sweep_table(&rows);
    out!("{}", sweep::text(&table));
    let written = [
        write(&args.out, "sweep.csv", &sweep::csv(&rows))?,
        write(&args.out, "sweep.md", &sweep::markdown(&table))?,
    ];
    outln!();
    for path in written {
        outln!("wrote {}", path.display());
    }
    Ok(())
}
