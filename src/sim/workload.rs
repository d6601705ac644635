//! Requests and their token counts: what a pod is asked to do.
//!
//! A built-in scenario draws each request's prompt and output lengths from a lognormal *mix*
//! (LLM request lengths are heavy-tailed and roughly lognormal in the public Azure traces);
//! a request-level trace brings its own counts.

use super::model::MixMeans;
use super::rng::Rng;

/// One request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    /// Arrival time, seconds from the start of the run (negative during the warm-up).
    pub arrival: f64,
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Generated tokens, the first one included (at least 1).
    pub output_tokens: u32,
}

/// A lognormal mix of prompt and output lengths.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenMix {
    /// Median prompt tokens.
    pub input_median: f64,
    /// Sigma of the log of prompt tokens.
    pub input_sigma: f64,
    /// Median output tokens.
    pub output_median: f64,
    /// Sigma of the log of output tokens.
    pub output_sigma: f64,
}

/// Longest prompt drawn (Llama-3.1's context is 128k; serving configs cap far lower).
const MAX_INPUT_TOKENS: f64 = 32_000.0;
/// Longest output drawn.
const MAX_OUTPUT_TOKENS: f64 = 4_096.0;

impl TokenMix {
    /// A chat-like mix: prompts around 900 tokens (history included), answers around 220,
    /// both with a long tail — the shape of the public Azure conversation traces.
    pub const CHAT: TokenMix = TokenMix {
        input_median: 900.0,
        input_sigma: 0.7,
        output_median: 220.0,
        output_sigma: 0.6,
    };

    /// A code-completion-like mix: long prompts (the file around the cursor), short outputs.
    pub const CODE: TokenMix = TokenMix {
        input_median: 1800.0,
        input_sigma: 0.5,
        output_median: 40.0,
        output_sigma: 0.6,
    };

    /// The same mix with outputs `factor` times longer.
    pub fn with_output_scaled(self, factor: f64) -> TokenMix {
        TokenMix {
            output_median: self.output_median * factor,
            ..self
        }
    }

    /// Mean prompt and output tokens (lognormal means; the caps move them by < 0.1 %), and
    /// the mean running context: prompt and output are drawn apart, so
    /// `E[(in + out)·out] / E[out] = E[in] + E[out²]/E[out] = E[in] + E[out]·e^(σ_out²)`
    /// (the output cap moves it by < 0.5 % even with outputs doubled).
    pub fn means(&self) -> MixMeans {
        let mean = |median: f64, sigma: f64| median * (sigma * sigma / 2.0).exp();
        let input_tokens = mean(self.input_median, self.input_sigma);
        let output_tokens = mean(self.output_median, self.output_sigma);
        MixMeans {
            input_tokens,
            output_tokens,
            running_context_tokens: input_tokens
                + output_tokens * (self.output_sigma * self.output_sigma).exp(),
        }
    }

    /// One request arriving at `arrival`.
    pub fn draw(&self, rng: &mut Rng, arrival: f64) -> Request {
        let input = rng
            .lognormal(self.input_median, self.input_sigma)
            .clamp(1.0, MAX_INPUT_TOKENS);
        let output = rng
            .lognormal(self.output_median, self.output_sigma)
            .clamp(1.0, MAX_OUTPUT_TOKENS);
        Request {
            arrival,
            input_tokens: input.round() as u32,
            output_tokens: (output.round() as u32).max(1),
        }
    }
}

/// Sums over requests, from which their mean request follows (a trace's, or one minute's).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestTotals {
    /// Requests counted.
    pub requests: u32,
    /// Their prompt tokens.
    pub input_tokens: f64,
    /// Their output tokens.
    pub output_tokens: f64,
    /// `Σ(in + out)·out`: their contexts weighted by how long each runs
    /// ([`MixMeans::running_context_tokens`]).
    pub output_weighted_context_tokens: f64,
}

impl RequestTotals {
    /// Count one request.
    pub fn add(&mut self, request: &Request) {
        let (input, output) = (
            f64::from(request.input_tokens),
            f64::from(request.output_tokens),
        );
        self.requests += 1;
        self.input_tokens += input;
        self.output_tokens += output;
        self.output_weighted_context_tokens += (input + output) * output;
    }

    /// The mean request, if any was counted.
    pub fn means(&self) -> Option<MixMeans> {
        (self.requests > 0).then(|| MixMeans {
            input_tokens: self.input_tokens / f64::from(self.requests),
            output_tokens: self.output_tokens / f64::from(self.requests),
            running_context_tokens: self.output_weighted_context_tokens
                / self.output_tokens.max(1.0),
        })
    }
}

/// Mean prompt and output tokens of a list of requests, and their mean running context.
pub fn empirical_means(requests: &[Request]) -> Option<MixMeans> {
    let mut totals = RequestTotals::default();
    for request in requests {
        totals.add(request);
    }
    totals.means()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_have_the_mix_means() {
        for mix in [TokenMix::CHAT, TokenMix::CODE] {
            let mut rng = Rng::new(5, 5);
            let requests: Vec<Request> = (0..200_000).map(|_| mix.draw(&mut rng, 0.0)).collect();
            let got = empirical_means(&requests).expect("requests");
            let want = mix.means();
            for (g, w) in [
                (got.input_tokens, want.input_tokens),
                (got.output_tokens, want.output_tokens),
                (got.running_context_tokens, want.running_context_tokens),
            ] {
                assert!((g - w).abs() / w < 0.02, "{g} vs {w}");
            }
        }
    }
}
