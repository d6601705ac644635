//! Traffic: the scenarios, and the requests each one sends for a seed.
//!
//! A rate-curve scenario (built-in shapes, a rate CSV) is a non-homogeneous Poisson process
//! drawn by thinning (candidates at the peak rate, each kept with probability `λ(t)/λ_max`),
//! exact for any curve; each request's token counts are drawn with it from the scenario's
//! [`TokenMix`], from the same seeded stream, so every policy sees the same requests for a
//! seed. A request-level trace (Mooncake JSONL, Azure CSV) replays its own requests, each
//! `--rate-scale` times ([`super::trace::replicate`], whose extra copies depend on the seed).
//!
//! Every run starts warm: [`Scenario::warmup`] gives the requests of the `warmup` seconds
//! before `t = 0`, a steady load at `λ(0)` with the mix of `t = 0`, so the fleet a run starts
//! with is in the steady state of its first load, not empty (see run.rs).

use std::sync::Arc;

use super::rng::Rng;
use super::trace::{TraceRequest, replicate};
use super::workload::{Request, TokenMix};

/// The built-in traffic shapes. Rates are for the calibrated pod (μ ≈ 7.6 req/s of the chat
/// mix): a peak needs 13–17 pods at a full batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// 20 req/s, a step to 100 at 1/9 of the run, back to 20 at 2/3 (default 90 min).
    Step,
    /// 10 → 110 req/s linearly over 10–50 % of the run, held to 65 %, down by 90 % (120 min).
    Ramp,
    /// One compressed day: `15 + 85·(1 − cos 2πt/D)/2` req/s (180 min).
    Diurnal,
    /// Two-state MMPP: 30 and 100 req/s, mean sojourns 8 and 2 min (120 min).
    Bursty,
    /// 25 req/s with a 5-minute spike to 125 at 1/3 of the run (90 min).
    Spike,
    /// A steady 60 req/s whose answers get twice as long halfway (the mix drifts; 120 min).
    Drift,
}

impl Builtin {
    /// Every built-in shape, in report order.
    pub const ALL: [Builtin; 6] = [
        Builtin::Step,
        Builtin::Ramp,
        Builtin::Diurnal,
        Builtin::Bursty,
        Builtin::Spike,
        Builtin::Drift,
    ];

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::Step => "step",
            Builtin::Ramp => "ramp",
            Builtin::Diurnal => "diurnal",
            Builtin::Bursty => "bursty",
            Builtin::Spike => "spike",
            Builtin::Drift => "drift",
        }
    }

    /// Default length of the run, seconds.
    pub fn default_duration_seconds(self) -> f64 {
        60.0 * match self {
            Builtin::Step | Builtin::Spike => 90.0,
            Builtin::Ramp | Builtin::Bursty | Builtin::Drift => 120.0,
            Builtin::Diurnal => 180.0,
        }
    }
}

/// Where a scenario's requests come from.
#[derive(Debug, Clone, PartialEq)]
enum Shape {
    Builtin(Builtin),
    /// `(t_seconds, rate)` points, interpolated linearly.
    Rates(Vec<(f64, f64)>),
    /// A request-level trace, replayed `rate_scale` times.
    Requests {
        requests: Arc<Vec<TraceRequest>>,
        rate_scale: f64,
        resolution_seconds: f64,
    },
}

/// A traffic scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Name in reports and file names.
    pub name: String,
    /// Length of the run, seconds.
    pub duration_seconds: f64,
    shape: Shape,
    mix: TokenMix,
}

// Bursty's two states and mean sojourns at the default duration.
const BURSTY_LOW: f64 = 30.0;
const BURSTY_HIGH: f64 = 100.0;
const BURSTY_MEAN_LOW_SECONDS: f64 = 480.0;
const BURSTY_MEAN_HIGH_SECONDS: f64 = 120.0;
/// The drift scenario's rate, and the factor its outputs grow by halfway.
const DRIFT_RATE: f64 = 60.0;
const DRIFT_OUTPUT_FACTOR: f64 = 2.0;

impl Scenario {
    /// A built-in scenario with the chat mix; `duration_seconds` rescales its time axis
    /// (default: [`Builtin::default_duration_seconds`]).
    pub fn builtin(kind: Builtin, duration_seconds: Option<f64>) -> Scenario {
        Scenario {
            name: kind.name().to_owned(),
            duration_seconds: duration_seconds.unwrap_or(kind.default_duration_seconds()),
            shape: Shape::Builtin(kind),
            mix: TokenMix::CHAT,
        }
    }

    /// A rate-curve scenario from `(t_seconds, rate)` points (non-decreasing times, rates
    /// ≥ 0, as [`super::trace::parse_trace`] checks them); it ends at the last point unless
    /// `duration_seconds` is given.
    pub fn from_rates(
        name: &str,
        points: Vec<(f64, f64)>,
        mix: TokenMix,
        duration_seconds: Option<f64>,
    ) -> Result<Scenario, String> {
        let end = points.last().map_or(0.0, |(t, _)| *t);
        let duration = duration_seconds.unwrap_or(end);
        if points.is_empty() || duration <= 0.0 {
            return Err("the trace needs at least one row and a duration > 0 s".to_owned());
        }
        Ok(Scenario {
            name: name.to_owned(),
            duration_seconds: duration,
            shape: Shape::Rates(points),
            mix,
        })
    }

    /// A request-level scenario: `requests` (sorted by arrival) replayed `rate_scale` times;
    /// it ends one second after the last arrival unless `duration_seconds` is given.
    pub fn from_requests(
        name: &str,
        requests: Vec<TraceRequest>,
        rate_scale: f64,
        resolution_seconds: f64,
        duration_seconds: Option<f64>,
    ) -> Result<Scenario, String> {
        if !(rate_scale.is_finite() && rate_scale > 0.0) {
            return Err(format!("--rate-scale must be > 0, got {rate_scale}"));
        }
        let end = requests
            .last()
            .map_or(0.0, |r| r.arrival_seconds.ceil() + 1.0);
        let duration = duration_seconds.unwrap_or(end);
        if requests.is_empty() || duration <= 0.0 {
            return Err("the trace needs at least one request and a duration > 0 s".to_owned());
        }
        Ok(Scenario {
            name: name.to_owned(),
            duration_seconds: duration,
            shape: Shape::Requests {
                requests: Arc::new(requests),
                rate_scale,
                resolution_seconds,
            },
            mix: TokenMix::CHAT,
        })
    }

    /// True for a request-level trace.
    pub fn is_request_level(&self) -> bool {
        matches!(self.shape, Shape::Requests { .. })
    }

    /// The mix drawn at `t` (a request-level trace brings its own lengths).
    pub fn mix_at(&self, t: f64) -> TokenMix {
        match self.shape {
            Shape::Builtin(Builtin::Drift) if t >= self.duration_seconds / 2.0 => {
                self.mix.with_output_scaled(DRIFT_OUTPUT_FACTOR)
            }
            _ => self.mix,
        }
    }

    /// `λ(t)` of the rate curves; bursty answers its mean (its state is random, see
    /// [`Arrivals`]); a trace answers its mean rate over the minute from `t`.
    fn deterministic_rate(&self, t: f64) -> f64 {
        let x = t / self.duration_seconds;
        match &self.shape {
            Shape::Builtin(Builtin::Step) => {
                if (1.0 / 9.0..2.0 / 3.0).contains(&x) {
                    100.0
                } else {
                    20.0
                }
            }
            Shape::Builtin(Builtin::Ramp) => {
                let (low, high) = (10.0, 110.0);
                if x < 0.1 {
                    low
                } else if x < 0.5 {
                    low + (high - low) * (x - 0.1) / 0.4
                } else if x < 0.65 {
                    high
                } else if x < 0.9 {
                    high - (high - low) * (x - 0.65) / 0.25
                } else {
                    low
                }
            }
            Shape::Builtin(Builtin::Diurnal) => {
                15.0 + 85.0 * (1.0 - (std::f64::consts::TAU * x).cos()) / 2.0
            }
            Shape::Builtin(Builtin::Bursty) => {
                let (l, h) = (BURSTY_MEAN_LOW_SECONDS, BURSTY_MEAN_HIGH_SECONDS);
                (BURSTY_LOW * l + BURSTY_HIGH * h) / (l + h)
            }
            Shape::Builtin(Builtin::Spike) => {
                let start = 1.0 / 3.0;
                if (start..start + 5.0 / 90.0).contains(&x) {
                    125.0
                } else {
                    25.0
                }
            }
            Shape::Builtin(Builtin::Drift) => DRIFT_RATE,
            Shape::Rates(points) => interpolate(points, t),
            Shape::Requests {
                requests,
                rate_scale,
                ..
            } => {
                let from = requests.partition_point(|r| r.arrival_seconds < t);
                let to = requests.partition_point(|r| r.arrival_seconds < t + 60.0);
                (to - from) as f64 / 60.0 * rate_scale
            }
        }
    }

    /// The highest rate the curve reaches (what a fixed fleet is sized for); for a trace,
    /// its busiest minute.
    pub fn peak_rate(&self) -> f64 {
        match &self.shape {
            Shape::Builtin(Builtin::Step) => 100.0,
            Shape::Builtin(Builtin::Ramp) => 110.0,
            Shape::Builtin(Builtin::Diurnal) => 100.0,
            Shape::Builtin(Builtin::Bursty) => BURSTY_HIGH,
            Shape::Builtin(Builtin::Spike) => 125.0,
            Shape::Builtin(Builtin::Drift) => DRIFT_RATE,
            Shape::Rates(points) => points.iter().map(|(_, r)| *r).fold(0.0, f64::max),
            Shape::Requests {
                requests,
                rate_scale,
                ..
            } => {
                let mut per_minute = vec![0u32; (self.duration_seconds / 60.0).ceil() as usize + 1];
                for r in requests.iter() {
                    let m = (r.arrival_seconds.max(0.0) / 60.0) as usize;
                    if let Some(count) = per_minute.get_mut(m) {
                        *count += 1;
                    }
                }
                f64::from(per_minute.into_iter().max().unwrap_or(0)) / 60.0 * rate_scale
            }
        }
    }

    /// The rate at the start: what the fleet is warmed up for.
    pub fn initial_rate(&self) -> f64 {
        match &self.shape {
            Shape::Builtin(Builtin::Bursty) => BURSTY_LOW,
            _ => self.deterministic_rate(0.0),
        }
    }

    /// The requests of this scenario for `seed`, in arrival order.
    pub fn arrivals(&self, seed: u64) -> Result<Arrivals, String> {
        let source = match &self.shape {
            Shape::Requests {
                requests,
                rate_scale,
                resolution_seconds,
            } => {
                let copies = replicate(requests, *rate_scale, *resolution_seconds, seed)
                    .map_err(|e| e.to_string())?;
                Source::Replay(copies.into_iter())
            }
            _ => {
                let bursty = matches!(self.shape, Shape::Builtin(Builtin::Bursty));
                let scale = self.duration_seconds / Builtin::Bursty.default_duration_seconds();
                let mut switching = Rng::new(seed, 2);
                let mmpp = bursty.then(|| Mmpp {
                    high: false,
                    until: switching.exponential(1.0 / (BURSTY_MEAN_LOW_SECONDS * scale)),
                    mean_low: BURSTY_MEAN_LOW_SECONDS * scale,
                    mean_high: BURSTY_MEAN_HIGH_SECONDS * scale,
                    rng: switching,
                });
                Source::Curve {
                    rng: Rng::new(seed, 1),
                    peak: self.peak_rate(),
                    t: 0.0,
                    mmpp,
                }
            }
        };
        Ok(Arrivals {
            scenario: self.clone(),
            source,
        })
    }

    /// The requests of the `seconds` before `t = 0` (negative arrival times): Poisson at
    /// [`Scenario::initial_rate`], lengths from the mix at `t = 0` — for a trace, its first
    /// minute's requests in turn.
    pub fn warmup(&self, seed: u64, seconds: f64) -> Vec<Request> {
        let rate = self.initial_rate();
        if rate <= 0.0 || seconds <= 0.0 {
            return Vec::new();
        }
        let mut rng = Rng::new(seed, 3);
        let first_minute: Vec<TraceRequest> = match &self.shape {
            Shape::Requests { requests, .. } => requests
                .iter()
                .take_while(|r| r.arrival_seconds < 60.0)
                .copied()
                .collect(),
            _ => Vec::new(),
        };
        let mix = self.mix_at(0.0);
        let mut out = Vec::new();
        let mut t = -seconds;
        loop {
            t += rng.exponential(rate);
            if t >= 0.0 {
                return out;
            }
            let request = if first_minute.is_empty() {
                mix.draw(&mut rng, t)
            } else {
                let r = first_minute[out.len() % first_minute.len()];
                Request {
                    arrival: t,
                    input_tokens: r.input_tokens,
                    output_tokens: r.output_tokens,
                }
            };
            out.push(request);
        }
    }
}

fn interpolate(points: &[(f64, f64)], t: f64) -> f64 {
    match points.iter().position(|(at, _)| *at > t) {
        None => points.last().map_or(0.0, |(_, r)| *r),
        Some(0) => points[0].1,
        Some(i) => {
            let (t0, r0) = points[i - 1];
            let (t1, r1) = points[i];
            if t1 > t0 {
                r0 + (r1 - r0) * (t - t0) / (t1 - t0)
            } else {
                r1
            }
        }
    }
}

/// The hidden state of the bursty scenario.
#[derive(Debug, Clone)]
struct Mmpp {
    high: bool,
    until: f64,
    mean_low: f64,
    mean_high: f64,
    rng: Rng,
}

#[derive(Debug, Clone)]
enum Source {
    Curve {
        rng: Rng,
        peak: f64,
        t: f64,
        mmpp: Option<Mmpp>,
    },
    Replay(std::vec::IntoIter<TraceRequest>),
}

/// The requests of one scenario and seed, in arrival order.
#[derive(Debug, Clone)]
pub struct Arrivals {
    scenario: Scenario,
    source: Source,
}

impl Arrivals {
    /// `λ(t)`; for bursty, advances the hidden state to `t` (call with non-decreasing `t`).
    pub fn rate_at(&mut self, t: f64) -> f64 {
        match &mut self.source {
            Source::Curve { mmpp: Some(m), .. } => {
                while t >= m.until {
                    m.high = !m.high;
                    let mean = if m.high { m.mean_high } else { m.mean_low };
                    m.until += m.rng.exponential(1.0 / mean);
                }
                if m.high { BURSTY_HIGH } else { BURSTY_LOW }
            }
            _ => self.scenario.deterministic_rate(t),
        }
    }
}

impl Iterator for Arrivals {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        let duration = self.scenario.duration_seconds;
        match &mut self.source {
            Source::Replay(requests) => {
                let r = requests.next()?;
                (r.arrival_seconds < duration).then_some(Request {
                    arrival: r.arrival_seconds,
                    input_tokens: r.input_tokens,
                    output_tokens: r.output_tokens,
                })
            }
            Source::Curve { peak, .. } if *peak <= 0.0 => None,
            Source::Curve { .. } => loop {
                let (t, u) = match &mut self.source {
                    Source::Curve { rng, peak, t, .. } => {
                        *t += rng.exponential(*peak);
                        (*t, rng.uniform() * *peak)
                    }
                    Source::Replay(_) => return None,
                };
                if t >= duration {
                    return None;
                }
                let rate = self.rate_at(t);
                if u < rate {
                    let mix = self.scenario.mix_at(t);
                    if let Source::Curve { rng, .. } = &mut self.source {
                        return Some(mix.draw(rng, t));
                    }
                }
            },
        }
    }
}

#[cfg(test)]
mod tests;
