//! `simulate`'s scenarios: the built-in shapes, the project's two request-level traces, and a
//! user's `--trace` file, scaled by `--rate-scale`.

use super::{ScenarioArg, SimulateArgs};
use crate::sim::arrivals::{Builtin, Scenario};
use crate::sim::trace::{ParsedTrace, parse_trace};
use crate::sim::workload::TokenMix;
use clap::ValueEnum;

/// The project's own chat-like request-level trace (Azure CSV format; sim/traces/).
const CHAT_TRACE: &str = include_str!("../../../sim/traces/chat.csv");
/// The project's own code-completion-like request-level trace (Mooncake JSONL; sim/traces/).
const CODE_TRACE: &str = include_str!("../../../sim/traces/code-completion.jsonl");
/// How many times the built-in traces are replayed: their ~4 req/s become a load whose
/// busiest minutes need 10–20 pods, like the built-in shapes.
const BUILTIN_TRACE_RATE_SCALE: f64 = 12.0;

/// A scenario from a trace's text: its format is told from the content.
pub fn scenario_from_trace(
    name: &str,
    text: &str,
    rate_scale: f64,
    duration_seconds: Option<f64>,
) -> Result<Scenario, String> {
    if !(rate_scale.is_finite() && rate_scale > 0.0) {
        return Err(format!(
            "--rate-scale must be a number > 0, got {rate_scale}"
        ));
    }
    match parse_trace(text).map_err(|e| format!("{name}: {e}"))? {
        ParsedTrace::Rates(points) => {
            let points = points
                .into_iter()
                .map(|(t, r)| (t, r * rate_scale))
                .collect();
            Scenario::from_rates(name, points, TokenMix::CHAT, duration_seconds)
        }
        ParsedTrace::Requests {
            requests,
            resolution_seconds,
            ..
        } => Scenario::from_requests(
            name,
            requests,
            rate_scale,
            resolution_seconds,
            duration_seconds,
        ),
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
        let scale = args.rate_scale.unwrap_or(1.0);
        return Ok(vec![scenario_from_trace(&name, &text, scale, duration)?]);
    }
    // A built-in shape's rates are its definition; a scale it would silently ignore is refused.
    let shape = |kind: Builtin| -> Result<Vec<Scenario>, String> {
        match args.rate_scale {
            Some(scale) => Err(format!(
                "--rate-scale {scale} multiplies a trace's load, and `--scenario {}` is a \
                 built-in shape with fixed rates: use it with --trace FILE, `chat`, \
                 `code-completion` or `all` (its two traces)",
                args.scenario
                    .to_possible_value()
                    .map_or_else(String::new, |v| v.get_name().to_owned())
            )),
            None => Ok(vec![Scenario::builtin(kind, duration)]),
        }
    };
    Ok(match args.scenario {
        ScenarioArg::Step => shape(Builtin::Step)?,
        ScenarioArg::Ramp => shape(Builtin::Ramp)?,
        ScenarioArg::Diurnal => shape(Builtin::Diurnal)?,
        ScenarioArg::Bursty => shape(Builtin::Bursty)?,
        ScenarioArg::Spike => shape(Builtin::Spike)?,
        ScenarioArg::Drift => shape(Builtin::Drift)?,
        ScenarioArg::Chat => vec![builtin_trace(
            "chat",
            CHAT_TRACE,
            args.rate_scale,
            duration,
        )?],
        ScenarioArg::CodeCompletion => vec![builtin_trace(
            "code-completion",
            CODE_TRACE,
            args.rate_scale,
            duration,
        )?],
        ScenarioArg::All => all_scenarios(duration, args.rate_scale)?,
    })
}

/// One of the project's traces, replayed `rate_scale` times (default
/// [`BUILTIN_TRACE_RATE_SCALE`]).
fn builtin_trace(
    name: &str,
    text: &str,
    rate_scale: Option<f64>,
    duration_seconds: Option<f64>,
) -> Result<Scenario, String> {
    let scale = rate_scale.unwrap_or(BUILTIN_TRACE_RATE_SCALE);
    scenario_from_trace(name, text, scale, duration_seconds)
}

/// Every built-in scenario, `--scenario all`: the shapes, then the two request-level traces
/// (replayed `rate_scale` times, default [`BUILTIN_TRACE_RATE_SCALE`]).
pub fn all_scenarios(
    duration_seconds: Option<f64>,
    rate_scale: Option<f64>,
) -> Result<Vec<Scenario>, String> {
    let mut all: Vec<Scenario> = Builtin::ALL
        .iter()
        .map(|k| Scenario::builtin(*k, duration_seconds))
        .collect();
    all.push(builtin_trace(
        "chat",
        CHAT_TRACE,
        rate_scale,
        duration_seconds,
    )?);
    all.push(builtin_trace(
        "code-completion",
        CODE_TRACE,
        rate_scale,
        duration_seconds,
    )?);
    Ok(all)
}
