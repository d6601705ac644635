//! Traffic: when requests arrive and how much work each one is.
//!
//! A [`Scenario`] is a rate curve `λ(t)` (requests/s) over a duration. The
//! built-in shapes are the project's five scenarios (step, ramp, diurnal,
//! bursty two-state MMPP, spike); a CSV trace (`t_seconds,rate_per_second`)
//! gives any other. Arrivals are a non-homogeneous Poisson process drawn by
//! thinning (candidates at the peak rate, each kept with probability
//! `λ(t)/λ_max`), which is exact for any curve. Each request's size (prefill
//! and decode work, lognormal) is drawn with it, from the same seeded
//! stream, so every policy sees the same requests for a given seed.

use super::rng::Rng;

/// Sizes of requests: lognormal prefill and decode work, in seconds of a
/// pod's time at batch size 1 (a fuller batch stretches them, see
/// [`super::fleet::PodModel`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestSizes {
    /// Median prefill work, seconds (prompt processing up to the first token).
    pub prefill_median_seconds: f64,
    /// Shape of the prefill lognormal (sigma of the log).
    pub prefill_sigma: f64,
    /// Median decode work, seconds (the remaining output tokens).
    pub decode_median_seconds: f64,
    /// Shape of the decode lognormal (sigma of the log).
    pub decode_sigma: f64,
}

impl Default for RequestSizes {
    /// A chat-like mix: ~0.15 s prefill, ~6 s decode at batch 1 (a few
    /// hundred output tokens), with a long tail.
    fn default() -> RequestSizes {
        RequestSizes {
            prefill_median_seconds: 0.15,
            prefill_sigma: 0.5,
            decode_median_seconds: 6.0,
            decode_sigma: 0.6,
        }
    }
}

impl RequestSizes {
    /// Mean total work of one request (prefill + decode) at batch size 1.
    pub fn mean_work_seconds(&self) -> f64 {
        let mean = |median: f64, sigma: f64| median * (sigma * sigma / 2.0).exp();
        mean(self.prefill_median_seconds, self.prefill_sigma)
            + mean(self.decode_median_seconds, self.decode_sigma)
    }

    fn draw(&self, rng: &mut Rng, arrival: f64) -> Request {
        Request {
            arrival,
            prefill: rng.lognormal(self.prefill_median_seconds, self.prefill_sigma),
            decode: rng.lognormal(self.decode_median_seconds, self.decode_sigma),
        }
    }
}

/// One request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    /// Arrival time, seconds from the start of the run.
    pub arrival: f64,
    /// Prefill work, seconds at batch 1: its first token comes after this.
    pub prefill: f64,
    /// Decode work after the first token, seconds at batch 1.
    pub decode: f64,
}

/// The built-in traffic shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// 4 req/s, a step to 20 at 1/9 of the run, back to 4 at 2/3 (default 90 min).
    Step,
    /// 2 → 22 req/s linearly over 10–50 % of the run, held to 65 %, down to 2 by 90 % (120 min).
    Ramp,
    /// One compressed day: `3 + 17·(1 − cos 2πt/D)/2` req/s (180 min).
    Diurnal,
    /// Two-state MMPP: 6 and 20 req/s, mean sojourns 8 and 2 min (120 min).
    Bursty,
    /// 5 req/s with a 5-minute spike to 25 at 1/3 of the run (90 min).
    Spike,
}

impl Builtin {
    /// Every built-in scenario, in report order.
    pub const ALL: [Builtin; 5] = [
        Builtin::Step,
        Builtin::Ramp,
        Builtin::Diurnal,
        Builtin::Bursty,
        Builtin::Spike,
    ];

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::Step => "step",
            Builtin::Ramp => "ramp",
            Builtin::Diurnal => "diurnal",
            Builtin::Bursty => "bursty",
            Builtin::Spike => "spike",
        }
    }

    /// Default length of the run, seconds.
    pub fn default_duration_seconds(self) -> f64 {
        60.0 * match self {
            Builtin::Step | Builtin::Spike => 90.0,
            Builtin::Ramp | Builtin::Bursty => 120.0,
            Builtin::Diurnal => 180.0,
        }
    }
}

/// A rate curve.
#[derive(Debug, Clone, PartialEq)]
enum Shape {
    Builtin(Builtin),
    /// `(t_seconds, rate)` points, interpolated linearly.
    Trace(Vec<(f64, f64)>),
}

/// A traffic scenario: a named rate curve over a duration.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Name in reports and file names.
    pub name: String,
    /// Length of the run, seconds.
    pub duration_seconds: f64,
    shape: Shape,
}

// Bursty's two states and mean sojourns at the default duration.
const BURSTY_LOW: f64 = 6.0;
const BURSTY_HIGH: f64 = 20.0;
const BURSTY_MEAN_LOW_SECONDS: f64 = 480.0;
const BURSTY_MEAN_HIGH_SECONDS: f64 = 120.0;

impl Scenario {
    /// A built-in scenario; `duration_seconds` rescales its time axis
    /// (default: [`Builtin::default_duration_seconds`]).
    pub fn builtin(kind: Builtin, duration_seconds: Option<f64>) -> Scenario {
        Scenario {
            name: kind.name().to_owned(),
            duration_seconds: duration_seconds.unwrap_or(kind.default_duration_seconds()),
            shape: Shape::Builtin(kind),
        }
    }

    /// A scenario from a CSV trace: rows `t_seconds,rate_per_second`
    /// (a header line, blank lines and `#` comments are skipped), times
    /// non-decreasing, rates ≥ 0, interpolated linearly between rows. The
    /// run ends at the last row's time unless `duration_seconds` is given.
    pub fn from_trace_csv(
        name: &str,
        text: &str,
        duration_seconds: Option<f64>,
    ) -> Result<Scenario, String> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let parsed = match fields.as_slice() {
                [t, rate] => t.parse::<f64>().ok().zip(rate.parse::<f64>().ok()),
                _ => None,
            };
            let Some((t, rate)) = parsed else {
                if points.is_empty() && index == 0 {
                    continue; // header
                }
                return Err(format!(
                    "trace line {}: `{line}` is not `t_seconds,rate_per_second`",
                    index + 1
                ));
            };
            if !t.is_finite() || t < 0.0 || !rate.is_finite() || rate < 0.0 {
                return Err(format!(
                    "trace line {}: time and rate must be finite and ≥ 0, got `{line}`",
                    index + 1
                ));
            }
            if points.last().is_some_and(|(last, _)| t < *last) {
                return Err(format!("trace line {}: time {t} goes backwards", index + 1));
            }
            points.push((t, rate));
        }
        let end = points.last().map_or(0.0, |(t, _)| *t);
        let duration = duration_seconds.unwrap_or(end);
        if points.is_empty() || duration <= 0.0 {
            return Err("the trace needs at least one row and a duration > 0 s".to_owned());
        }
        Ok(Scenario {
            name: name.to_owned(),
            duration_seconds: duration,
            shape: Shape::Trace(points),
        })
    }

    /// `λ(t)` for the deterministic shapes; bursty answers its mean (its
    /// state is random, see [`Arrivals`]).
    fn deterministic_rate(&self, t: f64) -> f64 {
        let x = t / self.duration_seconds;
        match &self.shape {
            Shape::Builtin(Builtin::Step) => {
                if (1.0 / 9.0..2.0 / 3.0).contains(&x) {
                    20.0
                } else {
                    4.0
                }
            }
            Shape::Builtin(Builtin::Ramp) => {
                let (low, high) = (2.0, 22.0);
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
                3.0 + 17.0 * (1.0 - (std::f64::consts::TAU * x).cos()) / 2.0
            }
            Shape::Builtin(Builtin::Bursty) => {
                let (l, h) = (BURSTY_MEAN_LOW_SECONDS, BURSTY_MEAN_HIGH_SECONDS);
                (BURSTY_LOW * l + BURSTY_HIGH * h) / (l + h)
            }
            Shape::Builtin(Builtin::Spike) => {
                let start = 1.0 / 3.0;
                if (start..start + 5.0 / 90.0).contains(&x) {
                    25.0
                } else {
                    5.0
                }
            }
            Shape::Trace(points) => interpolate(points, t),
        }
    }

    /// The highest rate the curve reaches (what a fixed fleet is sized for).
    pub fn peak_rate(&self) -> f64 {
        match &self.shape {
            Shape::Builtin(Builtin::Step) => 20.0,
            Shape::Builtin(Builtin::Ramp) => 22.0,
            Shape::Builtin(Builtin::Diurnal) => 20.0,
            Shape::Builtin(Builtin::Bursty) => BURSTY_HIGH,
            Shape::Builtin(Builtin::Spike) => 25.0,
            Shape::Trace(points) => points.iter().map(|(_, r)| *r).fold(0.0, f64::max),
        }
    }

    /// The rate at the start (what the fleet is warmed for at `t = 0`).
    pub fn initial_rate(&self) -> f64 {
        match &self.shape {
            Shape::Builtin(Builtin::Bursty) => BURSTY_LOW,
            _ => self.deterministic_rate(0.0),
        }
    }

    /// The arrivals of this scenario for `seed`.
    pub fn arrivals(&self, seed: u64, sizes: RequestSizes) -> Arrivals {
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
        Arrivals {
            scenario: self.clone(),
            rng: Rng::new(seed, 1),
            sizes,
            peak: self.peak_rate(),
            t: 0.0,
            mmpp,
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

/// The requests of one scenario and seed, in arrival order.
#[derive(Debug, Clone)]
pub struct Arrivals {
    scenario: Scenario,
    rng: Rng,
    sizes: RequestSizes,
    peak: f64,
    t: f64,
    mmpp: Option<Mmpp>,
}

impl Arrivals {
    /// `λ(t)`; for bursty, advances the hidden state to `t` (call with
    /// non-decreasing `t`).
    pub fn rate_at(&mut self, t: f64) -> f64 {
        match &mut self.mmpp {
            Some(m) => {
                while t >= m.until {
                    m.high = !m.high;
                    let mean = if m.high { m.mean_high } else { m.mean_low };
                    m.until += m.rng.exponential(1.0 / mean);
                }
                if m.high { BURSTY_HIGH } else { BURSTY_LOW }
            }
            None => self.scenario.deterministic_rate(t),
        }
    }
}

impl Iterator for Arrivals {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        if self.peak <= 0.0 {
            return None;
        }
        loop {
            self.t += self.rng.exponential(self.peak);
            if self.t >= self.scenario.duration_seconds {
                return None;
            }
            let t = self.t;
            let rate = self.rate_at(t);
            if self.rng.uniform() * self.peak < rate {
                return Some(self.sizes.draw(&mut self.rng, t));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(scenario: &Scenario, seed: u64, from: f64, to: f64) -> usize {
        scenario
            .arrivals(seed, RequestSizes::default())
            .filter(|r| r.arrival >= from && r.arrival < to)
            .count()
    }

    #[test]
    fn step_rates_match_the_curve() {
        let s = Scenario::builtin(Builtin::Step, None);
        // 4 req/s for the first 10 min, 20 req/s from 10 to 60 min.
        let before = count(&s, 1, 0.0, 600.0) as f64 / 600.0;
        let during = count(&s, 1, 900.0, 3000.0) as f64 / 2100.0;
        assert!((before - 4.0).abs() < 0.3, "{before}");
        assert!((during - 20.0).abs() < 0.5, "{during}");
    }

    #[test]
    fn same_seed_same_requests() {
        let s = Scenario::builtin(Builtin::Bursty, Some(1200.0));
        let a: Vec<Request> = s.arrivals(3, RequestSizes::default()).collect();
        let b: Vec<Request> = s.arrivals(3, RequestSizes::default()).collect();
        let c: Vec<Request> = s.arrivals(4, RequestSizes::default()).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.windows(2).all(|w| w[0].arrival <= w[1].arrival));
    }

    #[test]
    fn bursty_spends_about_a_fifth_of_the_time_high() {
        let s = Scenario::builtin(Builtin::Bursty, Some(200_000.0));
        let mut arrivals = s.arrivals(9, RequestSizes::default());
        let high = (0..200_000)
            .filter(|t| arrivals.rate_at(f64::from(*t)) == BURSTY_HIGH)
            .count() as f64;
        let share = high / 200_000.0;
        assert!((share - 0.2).abs() < 0.05, "{share}");
    }

    #[test]
    fn trace_csv_parses_and_interpolates() {
        let s = Scenario::from_trace_csv(
            "t",
            "t_seconds,rate_per_second\n0,2\n# comment\n\n100,12\n200,12\n",
            None,
        )
        .expect("valid");
        assert_eq!(s.duration_seconds, 200.0);
        assert_eq!(s.deterministic_rate(50.0), 7.0);
        assert_eq!(s.peak_rate(), 12.0);
        assert_eq!(s.initial_rate(), 2.0);
        for bad in ["0,1\n1,x\n", "10,1\n5,1\n", "0,-1\n1,1\n", ""] {
            assert!(Scenario::from_trace_csv("t", bad, None).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn mean_work_is_the_lognormal_means() {
        let sizes = RequestSizes::default();
        let mut rng = Rng::new(5, 5);
        let n = 100_000;
        let total: f64 = (0..n)
            .map(|_| {
                let r = sizes.draw(&mut rng, 0.0);
                r.prefill + r.decode
            })
            .sum();
        let mean = total / f64::from(n);
        assert!(
            (mean - sizes.mean_work_seconds()).abs() / mean < 0.02,
            "{mean}"
        );
    }
}
