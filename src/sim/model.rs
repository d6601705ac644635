//! What one simulated pod is: one vLLM engine serving Llama-3.1-8B-Instruct on one GPU (an A100 40GB), reduced
//! to the few constants its scheduler's timing depends on.
//!
//! A vLLM V1 engine runs *steps*. Each step every running request past its prefill (there are
//! `k` of them) decodes one token, and the rest of the step's token budget
//! (`max_num_batched_tokens − k`) goes to chunked prefill of admitted requests, oldest first:
//!
//! ```text
//! step time = a + b·k + c·p        (p = prefill tokens in the step)
//! ```
//!
//! so `ITL(k) = a + b·k` when no prefill shares the step (the form llm-d's WVA fits per variant),
//! and a prompt of `n` tokens costs `c·n` of step time wherever its chunks land. A request is
//! admitted (leaves the queue) when fewer than `max_num_seqs` run and its whole context (input +
//! output tokens) fits in the KV cache beside the others'; so a pod can queue below
//! `max-num-seqs` when prompts are long. The constants and their sources are in
//! docs/decisions/0014-pod-model-calibration.md.

/// The timing constants of one pod and its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodModel {
    /// `a`: the fixed cost of a step, seconds (weights read once per step).
    pub step_base_seconds: f64,
    /// `b`: what each decoding request adds to a step, seconds.
    pub step_per_decode_seconds: f64,
    /// `c`: what each prefill token adds to a step, seconds.
    pub step_per_prefill_token_seconds: f64,
    /// vLLM `--max-num-batched-tokens`: a step's token budget (decodes take one each).
    pub max_num_batched_tokens: u32,
    /// vLLM `--max-num-seqs`: requests running at once.
    pub max_num_seqs: usize,
    /// KV-cache capacity in tokens (GPU memory left after weights and activations).
    pub kv_cache_tokens: u64,
    /// Seconds from creation to ready (image pull, model load, warm-up).
    pub cold_start_seconds: f64,
    /// A draining pod is killed after this long, abandoning what is left.
    pub drain_grace_seconds: f64,
}

impl Default for PodModel {
    /// Llama-3.1-8B-Instruct (bf16) under vLLM 0.23 on one A100 40GB, fitted to the published
    /// closed-loop sweep in decision 0014: `a` makes one request decode at 75 tokens/s, `b` is
    /// the KV bytes a decode reads per step at the page's 77 % of memory bandwidth, `c` fits
    /// the 6.6× throughput at 8 concurrent requests; `max_num_batched_tokens` and
    /// `max_num_seqs` are vLLM's defaults for that GPU; the KV budget is the GPU's memory at
    /// `gpu_memory_utilization` 0.9 less the weights and a 2 GiB reserve.
    fn default() -> PodModel {
        PodModel {
            step_base_seconds: 0.012_731,
            step_per_decode_seconds: 0.000_119_1,
            step_per_prefill_token_seconds: 0.000_060_56,
            max_num_batched_tokens: 2048,
            max_num_seqs: 256,
            kv_cache_tokens: 152_944,
            cold_start_seconds: 90.0,
            drain_grace_seconds: 600.0,
        }
    }
}

/// The mean request of a mix, which is all the pod's throughput depends on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixMeans {
    /// Mean prompt tokens.
    pub input_tokens: f64,
    /// Mean generated tokens (the first one included).
    pub output_tokens: f64,
    /// Mean context (prompt plus output) of a request *while it runs*: each request weighted
    /// by how long it holds its KV reservation, its output length (one token a step),
    /// `Σ(in + out)·out / Σout`. A long answer stays in the batch longer than a short one, so
    /// wherever outputs vary this is above `input_tokens + output_tokens`, and it is what sets
    /// how many requests the KV cache holds at once (chat mix: 1527 tokens against 1413).
    pub running_context_tokens: f64,
}

impl MixMeans {
    /// A mix whose requests are all alike.
    pub fn uniform(input_tokens: f64, output_tokens: f64) -> MixMeans {
        MixMeans {
            input_tokens,
            output_tokens,
            running_context_tokens: input_tokens + output_tokens,
        }
    }
}

impl PodModel {
    /// Seconds of a step with `decodes` decoding requests and `prefill_tokens` of prefill.
    pub fn step_seconds(&self, decodes: usize, prefill_tokens: u32) -> f64 {
        self.step_base_seconds
            + self.step_per_decode_seconds * decodes as f64
            + self.step_per_prefill_token_seconds * f64::from(prefill_tokens)
    }

    /// The most requests of this mix that run at once: `max_num_seqs`, or fewer when their
    /// contexts fill the KV cache first. A saturated pod's running set is not a sample of the
    /// mix but of its occupancy (the long answers pile up), so the cache divides by
    /// [`MixMeans::running_context_tokens`], not the mean request's context.
    pub fn full_batch(&self, mix: MixMeans) -> f64 {
        let context = mix.running_context_tokens.max(1.0);
        (self.max_num_seqs as f64).min(self.kv_cache_tokens as f64 / context)
    }

    /// `μ`: requests/s one pod finishes at a full batch of this mix — what a load test
    /// measures, and the `capacity` policy's `drainRatePerReplica`.
    ///
    /// In steady state at throughput `X` the pod prefills `X·in` tokens a second and decodes
    /// `X·out`, and runs `S` steps a second, so the steps fill the second when
    /// `S·a + X·out·b + X·in·c = 1`. A step decodes one token per decoding request, at most
    /// `k`, so `S ≥ X·out/k`; and a step's tokens (decodes plus prefill) fit
    /// `max_num_batched_tokens`, so `S ≥ X·(in + out)/B`. Where prompts are long and outputs
    /// short the second bound is the larger: the queue of prompts keeps every step's budget
    /// full, the decoding batch never reaches the full batch, and the pod finishes fewer than
    /// the first bound alone would say (4 % fewer for 1751-token prompts with 44-token outputs).
    pub fn saturated_throughput(&self, mix: MixMeans) -> f64 {
        self.throughput_at(mix, self.full_batch(mix))
    }

    /// Requests/s at a steady batch of `k` (the same balance as
    /// [`PodModel::saturated_throughput`]).
    pub fn throughput_at(&self, mix: MixMeans, k: f64) -> f64 {
        let per_request = self.steps_per_request(mix.input_tokens, mix.output_tokens, k)
            * self.step_base_seconds
            + mix.output_tokens * self.step_per_decode_seconds
            + mix.input_tokens * self.step_per_prefill_token_seconds;
        if per_request > 0.0 {
            1.0 / per_request
        } else {
            0.0
        }
    }

    /// Steps a request takes its share of at a steady batch of `k`: its output over the batch
    /// (decode-bound), or its tokens over a step's budget (prefill-bound), whichever is more.
    fn steps_per_request(&self, input_tokens: f64, output_tokens: f64, k: f64) -> f64 {
        let decode_bound = output_tokens / k.max(1.0);
        let budget_bound =
            (input_tokens + output_tokens) / f64::from(self.max_num_batched_tokens.max(1));
        decode_bound.max(budget_bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_balances_the_step_budget() {
        let model = PodModel::default();
        let mix = MixMeans::uniform(1000.0, 300.0);
        let mu = model.saturated_throughput(mix);
        // At μ the steps exactly fill each second.
        let k = model.full_batch(mix);
        let steps = mu * mix.output_tokens / k;
        let busy = steps * model.step_seconds(k.round() as usize, 0)
            + mu * mix.input_tokens * model.step_per_prefill_token_seconds
            - steps * model.step_per_decode_seconds * (k.round() - k);
        assert!((busy - 1.0).abs() < 1e-6, "{busy}");
        // A lone request is far slower per request than a full batch.
        assert!(model.throughput_at(mix, 1.0) < mu / 5.0);
    }

    #[test]
    fn long_contexts_fill_the_kv_cache_before_max_num_seqs() {
        let model = PodModel::default();
        let short = MixMeans::uniform(200.0, 100.0);
        let long = MixMeans::uniform(8000.0, 1000.0);
        assert_eq!(model.full_batch(short), model.max_num_seqs as f64);
        assert!(model.full_batch(long) < 50.0);
    }
}
