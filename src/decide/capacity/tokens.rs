//! `μ` in tokens: the engine's step cost learned from its token counters
//! (docs/decisions/0027).
//!
//! A continuous-batching engine runs steps back to back while anything is
//! running; a step with `k` requests decoding and `p` prompt tokens costs
//! `a + b·k + c·p` (the pod model's form, and WVA's `ITL(k) = A·k + B` plus a
//! prefill term). Over a busy stretch of a pod (an eighth of the full batch running at both
//! ends of every poll interval) the time is the work done:
//!
//! ```text
//! Δt ≈ a·steps + b·ΔG + c·ΔP        steps ≈ ΔG/R̄   (one token per decoding request a step)
//! ```
//!
//! with `ΔG` the generated and `ΔP` the prompt tokens of the interval. This
//! is fitted by least squares with `a, b, c ≥ 0` over 60 s windows, and
//! converted to requests with the tokens per request of the newest traffic
//! (`ō = ΔG/ΔF`, `ī = ΔP/(ΔF + ΔR)`, smoothed over three minutes; prompts
//! are counted as their prefill completes, so they are divided by the
//! requests that began decoding, not by those that finished):
//!
//! ```text
//! μ = 1 / (ō·a/K + ō·b + ī·c)        K = the full batch (the request learner's)
//! ```
//!
//! Unlike the request unit's `S(k) = α + β·k`, nothing here is a property of
//! the mix: when outputs double, `a`, `b`, `c` stay and `ō` follows within a
//! minute. And the fit is of work, not of time in service, so prompts
//! queueing inside the engine during a burst (time in service above the
//! steady curve) do not bias it. Missing, reset or still token counters drop
//! the pod's window; without a confident fit the caller keeps the request
//! unit, so a token counter can never lower `B` by its absence.

use std::collections::HashMap;

/// A pod's window: as the request learner's.
const WINDOW_SECONDS: f64 = 60.0;
/// Relative forgetting of windows, seconds of fold time: the step cost is
/// the hardware's, so it is forgotten slowly (only a new engine version or
/// flags change it).
const FORGET_SECONDS: f64 = 900.0;
/// Time constant of the tokens per request, seconds. Prompts are counted
/// when admitted, outputs as they are made and requests when they finish, so
/// over a burst the ratios swing; three minutes smooths that (60 s cost
/// bursty 3 % replica-hours in the simulator) and still follows outputs
/// doubling within 4 minutes (docs/decisions/0027).
const MIX_SECONDS: f64 = 180.0;
/// Confident when the standard error of the cost of a request at `K` is at
/// most this fraction ...
const CONFIDENT_RELATIVE_ERROR: f64 = 0.05;
/// ... over at least this many windows.
const CONFIDENT_SAMPLES: f64 = 6.0;
/// A window busy for less than this says little.
const MIN_BUSY_SECONDS: f64 = 20.0;
/// A poll interval is busy time when the pod runs at least this fraction of
/// the full batch at both of its ends (and at least one request). A pod
/// running a few short requests idles between them inside the interval,
/// and that idle time read as step time made `μ` up to 22 % low on bursty
/// prefill-heavy traffic in the simulator; an eighth of the batch keeps such
/// intervals out (docs/decisions/0027, 2026-12-04). Without a known full
/// batch the floor is one request.
const BUSY_FRACTION_OF_FULL_BATCH: f64 = 0.125;
/// ... and at most this many requests: a pod running that many does not
/// empty between two polls, and an engine with a large batch cap
/// (`max_num_seqs` 256 and room in the KV cache) still learns in tokens at
/// a few dozen requests. The simulator's full batches (85–115) stay below it.
const BUSY_FLOOR_MAX_REQUESTS: f64 = 16.0;
/// A running pod emits a token per decoding request every step (tens of
/// milliseconds): one that runs requests for this long without a new token
/// is read as a stale counter, not as a slow step.
const STILL_SECONDS: f64 = 5.0;

/// One pod's token counters at one reading.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenPoint {
    /// `R_i`.
    pub running: f64,
    /// `F_i`, finished requests.
    pub finished_total: f64,
    /// `G_i`, generated tokens (`vllm:generation_tokens_total`).
    pub generation_tokens_total: f64,
    /// `P_i`, prompt tokens (`vllm:prompt_tokens_total`).
    pub prompt_tokens_total: f64,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    start: f64,
    last_t: f64,
    last: TokenPoint,
    busy: f64,
    steps: f64,
    generated: f64,
    prompt: f64,
}

/// The fleet's counters over one poll, for the mix: every pod with all
/// three counters in both readings.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MixDelta {
    /// `ΔG`, generated tokens.
    pub generated: f64,
    /// `ΔP`, prompt tokens.
    pub prompt: f64,
    /// `ΔF`, finished requests.
    pub finished: f64,
    /// `ΔF + ΔR`: requests that began decoding (finished, plus the growth
    /// of the running gauge). vLLM counts a request's prompt tokens when its
    /// prefill completes, so over a burst's first minutes `ΔP/ΔF` divides
    /// the burst's prompts by the finishes of the calmer minutes before it
    /// and reads high (μ up to 13 % low in the simulator, decision 0027).
    pub begun: f64,
}

/// What the token learner knows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenEstimate {
    /// `μ`, requests/s per pod at the full batch of the current mix.
    pub drain_rate: f64,
    /// Standard error of a request's cost at `K`, relative.
    pub relative_error: f64,
    /// Forgetting-weighted windows behind the fit.
    pub samples: f64,
    /// `ō`, generated tokens per request of the newest traffic.
    pub output_tokens: f64,
    /// `ī`, prompt tokens per request.
    pub input_tokens: f64,
    /// The fitted step cost `(a, b, c)`: seconds per step, per decode, per
    /// prompt token.
    pub step_cost: [f64; 3],
}

impl TokenEstimate {
    /// Confident enough to replace the request unit.
    pub fn confident(&self) -> bool {
        self.relative_error <= CONFIDENT_RELATIVE_ERROR && self.samples >= CONFIDENT_SAMPLES
    }
}

/// Per-trigger learner of the step cost and the mix.
#[derive(Debug, Clone, Default)]
pub struct TokenLearner {
    windows: HashMap<String, Window>,
    /// Σ w·x·xᵀ (upper triangle: 00 01 02 11 12 22), Σ w·x·y, Σ w·y², Σ w, Σ w².
    xx: [f64; 6],
    xy: [f64; 3],
    yy: f64,
    w: f64,
    w2: f64,
    folded_at: Option<f64>,
    /// Smoothed fleet totals of the [`MixDelta`]s and when they were last
    /// updated.
    mix: MixDelta,
    mix_at: Option<f64>,
    /// The newest poll had token counters on at least one pod.
    fresh: bool,
    /// Requests a pod runs at both ends of a busy interval
    /// ([`BUSY_FRACTION_OF_FULL_BATCH`], [`BUSY_FLOOR_MAX_REQUESTS`]); 0
    /// reads as 1.
    busy_floor: f64,
}

impl TokenLearner {
    /// The full batch as the request learner knows it, for the busy floor.
    pub fn set_full_batch(&mut self, full: Option<f64>) {
        self.busy_floor = full.map_or(1.0, |k| {
            (BUSY_FRACTION_OF_FULL_BATCH * k).clamp(1.0, BUSY_FLOOR_MAX_REQUESTS)
        });
    }

    /// Fold in one pod's reading at `t`; `None` (a token counter missing)
    /// drops its window.
    pub fn observe_pod(&mut self, pod: &str, t: f64, point: Option<TokenPoint>) {
        let Some(point) = point else {
            self.windows.remove(pod);
            return;
        };
        let fresh = Window {
            start: t,
            last_t: t,
            last: point,
            busy: 0.0,
            steps: 0.0,
            generated: 0.0,
            prompt: 0.0,
        };
        let Some(window) = self.windows.get_mut(pod) else {
            self.windows.insert(pod.to_owned(), fresh);
            return;
        };
        if t <= window.last_t {
            return;
        }
        let prev = window.last;
        let dt = t - window.last_t;
        let (dg, dp, df) = (
            point.generation_tokens_total - prev.generation_tokens_total,
            point.prompt_tokens_total - prev.prompt_tokens_total,
            point.finished_total - prev.finished_total,
        );
        if dg < 0.0 || dp < 0.0 || df < 0.0 {
            *window = fresh; // a restart
            return;
        }
        let running = 0.5 * (prev.running + point.running);
        if dg <= 0.0 && prev.running.min(point.running) >= 1.0 && dt >= STILL_SECONDS {
            // Running throughout, and not one token: a wedged exporter.
            *window = fresh;
            return;
        }
        let floor = self.busy_floor.max(1.0);
        if prev.running >= floor && point.running >= floor {
            window.busy += dt;
            window.steps += dg / running.max(1.0);
            window.generated += dg;
            window.prompt += dp;
        }
        window.last_t = t;
        window.last = point;
        if t - window.start < WINDOW_SECONDS {
            return;
        }
        let done = std::mem::replace(window, fresh);
        self.fold(t, &done);
    }

    /// The fleet's tokens and requests of one poll; `None` when no pod had
    /// them: the estimate is then withheld until a poll has them again, so
    /// a mix is never carried over a gap in the counters.
    pub fn observe_mix(&mut self, t: f64, delta: Option<MixDelta>) {
        self.fresh = false;
        let Some(delta) = delta else {
            return;
        };
        // `begun` may fall (the running gauge drains); the counters may not.
        // The sources refuse NaN and infinities; refused here too, since one
        // would stay in the smoothed totals for good.
        let counters = [delta.generated, delta.prompt, delta.finished];
        if !(counters.iter().all(|v| *v >= 0.0 && v.is_finite()) && delta.begun.is_finite()) {
            return;
        }
        self.fresh = true;
        let keep = match self.mix_at {
            Some(at) if t > at => (-(t - at) / MIX_SECONDS).exp(),
            Some(_) => return,
            None => 0.0,
        };
        let m = &mut self.mix;
        m.generated = m.generated * keep + delta.generated;
        m.prompt = m.prompt * keep + delta.prompt;
        m.finished = m.finished * keep + delta.finished;
        m.begun = m.begun * keep + delta.begun;
        self.mix_at = Some(t);
    }

    fn fold(&mut self, t: f64, window: &Window) {
        if window.busy < MIN_BUSY_SECONDS || window.generated <= 0.0 {
            return;
        }
        if let Some(at) = self.folded_at {
            let keep = (-(t - at).max(0.0) / FORGET_SECONDS).exp();
            for v in self.xx.iter_mut().chain(self.xy.iter_mut()) {
                *v *= keep;
            }
            self.yy *= keep;
            self.w *= keep;
            self.w2 *= keep * keep;
        }
        self.folded_at = Some(t);
        // Per second of busy time, so every window weighs alike.
        let scale = 1.0 / window.busy;
        let x = [
            window.steps * scale,
            window.generated * scale,
            window.prompt * scale,
        ];
        let y = 1.0;
        let mut i = 0;
        for r in 0..3 {
            for c in r..3 {
                self.xx[i] += x[r] * x[c];
                i += 1;
            }
            self.xy[r] += x[r] * y;
        }
        self.yy += y * y;
        self.w += 1.0;
        self.w2 += 1.0;
    }

    /// The estimate at the full batch `full`, when there is a fit and the
    /// newest poll gave a mix.
    pub fn estimate(&self, full: Option<f64>) -> Option<TokenEstimate> {
        let full = full.filter(|k| *k >= 1.0)?;
        let mix = self.mix;
        if !self.fresh || self.w <= 0.0 || mix.finished <= 0.0 || mix.begun <= 0.0 {
            return None;
        }
        let output = mix.generated / mix.finished;
        let input = mix.prompt / mix.begun;
        let (theta, rss) = self.nonnegative_fit()?;
        let g = [output / full, output, input];
        let cost: f64 = g.iter().zip(theta).map(|(g, t)| g * t).sum();
        if !(cost > 0.0 && cost.is_finite()) {
            return None;
        }
        let samples = self.w * self.w / self.w2.max(f64::MIN_POSITIVE);
        let active = theta.iter().filter(|t| **t > 0.0).count() as f64;
        let sigma2 = rss / (samples - active).max(1.0) * samples / self.w;
        let relative_error = match self.covariance(sigma2) {
            Some(covariance) => {
                let mut variance = 0.0;
                for r in 0..3 {
                    for c in 0..3 {
                        variance += g[r] * covariance[r][c] * g[c];
                    }
                }
                variance.max(0.0).sqrt() / cost
            }
            None => f64::INFINITY,
        };
        Some(TokenEstimate {
            drain_rate: 1.0 / cost,
            relative_error,
            samples,
            output_tokens: output,
            input_tokens: input,
            step_cost: theta,
        })
    }

    fn xx(&self, r: usize, c: usize) -> f64 {
        let (r, c) = if r <= c { (r, c) } else { (c, r) };
        const INDEX: [[usize; 3]; 3] = [[0, 1, 2], [1, 3, 4], [2, 4, 5]];
        self.xx[INDEX[r][c]]
    }

    /// The covariance of the three coefficients, constrained or not, given
    /// the residual variance `sigma2`; `None` when the windows leave one
    /// of them free.
    ///
    /// The windows pin down some combinations of `a, b, c` and leave others
    /// loose: every window at one batch and one mix pins only the cost of
    /// that batch and mix, and a conversion at another batch is then
    /// uncertain, however small the residuals. How loose is bounded by the
    /// non-negative constraints: each term of a window is part of its time,
    /// so `θ_i·x̄_i ≤ 1` (`x̄_i` the windows' mean of that regressor, the time
    /// being 1 per busy second). Each coefficient is taken uniform on
    /// `[0, 1/x̄_i]` before the windows (variance `1/(12·x̄_i²)`), and the
    /// covariance is that prior's combined with the fit's:
    /// `σ²·(XᵀX + σ²·P)⁻¹`. Without the prior a conversion whose prompt-to-
    /// output ratio is off the windows' by 0.02 % (the running gauge's
    /// growth in `ī`'s count) on a mix whose ratio never varies read as
    /// 10 % uncertain, along a direction the constraints hold to 0.02 %
    /// (decision 0027).
    fn covariance(&self, sigma2: f64) -> Option<[[f64; 3]; 3]> {
        let mut m = [[0.0; 3]; 3];
        for (r, row) in m.iter_mut().enumerate() {
            for (c, v) in row.iter_mut().enumerate() {
                *v = self.xx(r, c);
            }
            // Σ w·x_i (the time, y, is 1 in every window) over Σ w.
            let mean = self.xy[r] / self.w;
            if mean > 0.0 {
                row[r] += sigma2 * 12.0 * mean * mean;
            }
        }
        let inverse = invert(&m, 3)?;
        Some(inverse.map(|row| row.map(|v| v * sigma2)))
    }

    /// Least squares with every coefficient ≥ 0: the best of the subsets of
    /// the three whose unconstrained fit is non-negative. Returns the
    /// coefficients and the residual sum of squares.
    fn nonnegative_fit(&self) -> Option<([f64; 3], f64)> {
        let mut best: Option<([f64; 3], f64)> = None;
        for mask in 1u8..8 {
            let mut active = [0usize; 3];
            let mut n = 0;
            for i in 0..3 {
                if mask & (1 << i) != 0 {
                    active[n] = i;
                    n += 1;
                }
            }
            let active = &active[..n];
            let mut m = [[0.0; 3]; 3];
            for (i, r) in active.iter().enumerate() {
                for (j, c) in active.iter().enumerate() {
                    m[i][j] = self.xx(*r, *c);
                }
            }
            let Some(inv) = invert(&m, n) else {
                continue;
            };
            let mut theta = [0.0; 3];
            for (i, r) in active.iter().enumerate() {
                theta[*r] = (0..n).map(|j| inv[i][j] * self.xy[active[j]]).sum();
            }
            if theta.iter().any(|t| *t < 0.0) {
                continue;
            }
            let fitted: f64 = (0..3).map(|r| theta[r] * self.xy[r]).sum();
            let rss = (self.yy - fitted).max(0.0);
            if best.is_none_or(|b| rss < b.1) {
                best = Some((theta, rss));
            }
        }
        best
    }

    /// Forget pods no longer read.
    pub fn retain_pods(&mut self, present: &dyn Fn(&str) -> bool) {
        self.windows.retain(|pod, _| present(pod));
    }
}

/// Inverse of the leading `n × n` block of a small matrix by Gauss–Jordan
/// (fixed size: this runs a few times per poll of every trigger), `None`
/// when it is (numerically) singular.
fn invert(m: &[[f64; 3]; 3], n: usize) -> Option<[[f64; 3]; 3]> {
    let mut a = *m;
    let mut inv = [[0.0; 3]; 3];
    for (i, row) in inv.iter_mut().enumerate().take(n) {
        row[i] = 1.0;
    }
    let scale = (0..n).map(|i| a[i][i].abs()).fold(0.0, f64::max);
    if scale <= 0.0 {
        return None;
    }
    for col in 0..n {
        let pivot = (col..n).max_by(|x, y| a[*x][col].abs().total_cmp(&a[*y][col].abs()))?;
        if a[pivot][col].abs() <= 1e-12 * scale {
            return None;
        }
        a.swap(col, pivot);
        inv.swap(col, pivot);
        let p = a[col][col];
        for j in 0..n {
            a[col][j] /= p;
            inv[col][j] /= p;
        }
        for row in 0..n {
            if row != col {
                let f = a[row][col];
                for j in 0..n {
                    a[row][j] -= f * a[col][j];
                    inv[row][j] -= f * inv[col][j];
                }
            }
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests;
