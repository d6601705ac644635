//! One pod's engine, step by step as vLLM's scheduler runs it (timing in [`super::model`]), and
//! the metrics a scrape of it returns.
//!
//! Steps are simulated exactly but not one at a time: while no prefill is in flight and nothing
//! arrives, every step takes the same time and emits one token per decoding request, so the pod
//! jumps straight to the next finish (or the next moment it is looked at). A step that has begun
//! is never cut: an arrival during a step joins the queue and is scheduled at the next one, as
//! in vLLM's engine loop.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use super::model::PodModel;
use super::workload::Request;
use crate::fake::{
    E2E_BUCKETS, FinishReason, Histogram, ITL_BUCKETS, ModelLoad, PodState, TTFT_BUCKETS,
    render_vllm_metrics,
};
use crate::source::engine::{Buckets, PodReading};

/// Where a pod is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Created, not ready yet (cold start).
    Warming,
    /// Ready: routed and scraped.
    Ready,
    /// Being removed: finishing its work, neither routed nor scraped.
    Draining,
}

/// The `model_name` the simulated pods serve.
pub const SERVED_MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";

/// A request's first token or its end, as the fleet's statistics take them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Served {
    /// Its first token came `ttft` seconds after its arrival.
    FirstToken {
        /// Arrival, seconds.
        arrival: f64,
        /// Time to first token, seconds.
        ttft: f64,
    },
    /// It finished `sojourn` seconds after its arrival.
    Finished {
        /// Arrival, seconds.
        arrival: f64,
        /// Arrival to last token, seconds.
        sojourn: f64,
    },
}

/// vLLM's own metrics of one pod: cumulative counters and histograms on vLLM's bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct PodMetrics {
    /// `vllm:time_to_first_token_seconds`.
    pub ttft: Histogram,
    /// `vllm:e2e_request_latency_seconds`.
    pub e2e: Histogram,
    /// `vllm:request_queue_time_seconds` (arrival to the first scheduled chunk; e2e bounds, as
    /// vLLM uses).
    pub queue_time: Histogram,
    /// `vllm:inter_token_latency_seconds`: one observation per output token after the first.
    pub itl: Histogram,
    /// `vllm:prompt_tokens_total`.
    pub prompt_tokens: u64,
    /// `vllm:generation_tokens_total`.
    pub generation_tokens: u64,
    /// `vllm:request_success_total` by `finished_reason`, in [`FinishReason::ALL`] order.
    pub finished: [u64; FinishReason::ALL.len()],
}

impl Default for PodMetrics {
    fn default() -> PodMetrics {
        PodMetrics {
            ttft: Histogram::new(&TTFT_BUCKETS),
            e2e: Histogram::new(&E2E_BUCKETS),
            queue_time: Histogram::new(&E2E_BUCKETS),
            itl: Histogram::new(&ITL_BUCKETS),
            prompt_tokens: 0,
            generation_tokens: 0,
            finished: [0; FinishReason::ALL.len()],
        }
    }
}

impl PodMetrics {
    /// Finished requests, every reason.
    pub fn finished_total(&self) -> u64 {
        self.finished.iter().sum()
    }

    fn finish(&mut self, reason: FinishReason) {
        if let Some(i) = FinishReason::ALL.iter().position(|r| *r == reason) {
            self.finished[i] += 1;
        }
    }
}

/// A request admitted and in prefill.
#[derive(Debug, Clone, Copy)]
struct Prefilling {
    request: Request,
    remaining: u32,
}

impl Prefilling {
    /// A chunk of its prompt has run: vLLM V1 counts it as running from here.
    fn started(&self) -> bool {
        self.remaining < self.request.input_tokens.max(1)
    }
}

/// A request decoding; ordered by the step it finishes at, then admission order.
#[derive(Debug, Clone, Copy)]
struct Decoding {
    finish_step: u64,
    seq: u64,
    arrival: f64,
    context: u64,
}

impl PartialEq for Decoding {
    fn eq(&self, other: &Decoding) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Decoding {}
impl PartialOrd for Decoding {
    fn partial_cmp(&self, other: &Decoding) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Decoding {
    fn cmp(&self, other: &Decoding) -> Ordering {
        (self.finish_step, self.seq).cmp(&(other.finish_step, other.seq))
    }
}

/// One pod.
#[derive(Debug, Clone)]
pub struct Pod {
    /// The URL a scrape of it would use.
    pub target: String,
    /// Its phase.
    pub phase: Phase,
    /// When it is (or was) ready.
    pub ready_at: f64,
    /// When it began draining (`+inf` if not).
    pub drain_since: f64,
    /// Real time the engine has run to (a step in flight may end after it).
    clock: f64,
    steps: u64,
    seq: u64,
    waiting: VecDeque<Request>,
    prefilling: VecDeque<Prefilling>,
    decoding: BinaryHeap<Reverse<Decoding>>,
    kv_used: u64,
    metrics: PodMetrics,
    /// [`Pod::next_event`], kept current by every change (the fleet asks it per arrival).
    due: f64,
}

impl Pod {
    /// A pod named `pod-{id}`, at `now`.
    pub fn new(id: u64, phase: Phase, now: f64, ready_at: f64) -> Pod {
        Pod {
            target: format!("http://pod-{id:05}:8000/metrics"),
            phase,
            ready_at,
            drain_since: f64::INFINITY,
            clock: now,
            steps: 0,
            seq: 0,
            waiting: VecDeque::new(),
            prefilling: VecDeque::new(),
            decoding: BinaryHeap::new(),
            kv_used: 0,
            metrics: PodMetrics::default(),
            due: f64::INFINITY,
        }
    }

    /// Requests not scheduled yet (`vllm:num_requests_waiting`): queued, or admitted but not
    /// given a prefill chunk. vLLM V1's scheduler moves a request from its waiting queue to its
    /// running list only in the step that schedules its first tokens, so a prompt held back
    /// by the step's token budget is still waiting.
    pub fn waiting(&self) -> usize {
        self.waiting.len() + self.not_begun().count()
    }

    /// Requests in model execution batches (`vllm:num_requests_running`, as its HELP text
    /// says): decoding, or part-way through their prefill. On a prefill-heavy mix the
    /// admitted prompts queue for the token budget, and counting them here would inflate the
    /// batch the learners see (docs/decisions/0014).
    pub fn running(&self) -> usize {
        self.admitted() - self.not_begun().count()
    }

    /// Admitted prompts no step has given a chunk yet.
    fn not_begun(&self) -> impl Iterator<Item = &Prefilling> {
        self.prefilling.iter().filter(|p| !p.started())
    }

    /// Requests holding a sequence slot: in prefill (begun or not) or decoding. The
    /// admission limit: the simulator reserves a request's slot and whole context when it
    /// leaves the queue, which the gauges above do not show until its first chunk runs.
    fn admitted(&self) -> usize {
        self.prefilling.len() + self.decoding.len()
    }

    /// Running plus waiting: what least-request routing compares.
    pub fn load(&self) -> usize {
        self.admitted() + self.waiting.len()
    }

    /// The earliest time the pod's state can change without an arrival: now while a prefill
    /// is in flight (each step may emit first tokens), the next finish while only decodes run,
    /// never when idle. Between two such events `running` and `waiting` stay put, so the fleet
    /// may leave the pod behind until then (or until a request is routed to it).
    pub fn next_event(&self) -> f64 {
        self.due
    }

    fn refresh_due(&mut self, model: &PodModel) {
        self.due = self.compute_due(model);
    }

    fn compute_due(&self, model: &PodModel) -> f64 {
        if !self.prefilling.is_empty() {
            return self.clock;
        }
        match self.decoding.peek() {
            Some(Reverse(next)) => {
                let steps = next.finish_step.saturating_sub(self.steps).max(1);
                self.clock + steps as f64 * model.step_seconds(self.decoding.len(), 0)
            }
            None if self.waiting.is_empty() => f64::INFINITY,
            None => self.clock,
        }
    }

    /// Its metrics.
    pub fn metrics(&self) -> &PodMetrics {
        &self.metrics
    }

    /// A request routed here (after [`Pod::advance`] to its arrival).
    pub fn accept(&mut self, request: Request) {
        self.waiting.push_back(request);
        // It is scheduled at the next step start.
        self.due = self.due.min(self.clock);
    }

    fn context(request: &Request) -> u64 {
        u64::from(request.input_tokens) + u64::from(request.output_tokens)
    }

    /// vLLM's FCFS admission: the queue's head runs when a sequence slot is free and its whole
    /// context fits the KV cache (a context larger than the cache runs alone).
    fn admit(&mut self, model: &PodModel) {
        while let Some(head) = self.waiting.front() {
            let context = Pod::context(head);
            let fits = self.kv_used + context <= model.kv_cache_tokens || self.kv_used == 0;
            if self.admitted() >= model.max_num_seqs || !fits {
                return;
            }
            let Some(request) = self.waiting.pop_front() else {
                return;
            };
            self.kv_used += context;
            self.prefilling.push_back(Prefilling {
                request,
                remaining: request.input_tokens.max(1),
            });
        }
    }

    /// Run the engine: every step that starts before `until`.
    pub fn advance(&mut self, until: f64, model: &PodModel, served: &mut Vec<Served>) {
        self.run(until, model, served);
        self.refresh_due(model);
    }

    fn run(&mut self, until: f64, model: &PodModel, served: &mut Vec<Served>) {
        while self.clock < until {
            self.admit(model);
            let decodes = self.decoding.len();
            if self.prefilling.is_empty() {
                let Some(Reverse(next)) = self.decoding.peek().copied() else {
                    self.clock = until; // idle
                    return;
                };
                let step = model.step_seconds(decodes, 0);
                let to_finish = next.finish_step.saturating_sub(self.steps).max(1);
                let to_until = ((until - self.clock) / step).ceil().max(1.0) as u64;
                let n = to_finish.min(to_until);
                self.clock += n as f64 * step;
                self.steps += n;
                self.tokens(decodes, n, step);
                self.finish_due(served);
                continue;
            }
            // A step with prefill: the budget left by the decodes, oldest prompt first.
            let mut budget = model.max_num_batched_tokens.saturating_sub(decodes as u32);
            let mut prefill = 0u32;
            let mut completed = 0usize;
            for p in &mut self.prefilling {
                if budget == 0 {
                    break;
                }
                if !p.started() {
                    // vLLM V1's queue time ends when the request is first scheduled.
                    self.metrics
                        .queue_time
                        .observe((self.clock - p.request.arrival).max(0.0));
                }
                let take = p.remaining.min(budget);
                p.remaining -= take;
                budget -= take;
                prefill += take;
                if p.remaining == 0 {
                    completed += 1;
                } else {
                    break;
                }
            }
            let step = model.step_seconds(decodes, prefill);
            self.clock += step;
            self.steps += 1;
            self.tokens(decodes, 1, step);
            self.finish_due(served);
            for _ in 0..completed {
                let Some(done) = self.prefilling.pop_front() else {
                    break;
                };
                self.first_token(done.request, served);
            }
        }
    }

    /// `n` steps of `step` seconds with `decodes` decoding requests: one token each per step.
    fn tokens(&mut self, decodes: usize, n: u64, step: f64) {
        let tokens = decodes as u64 * n;
        self.metrics.generation_tokens += tokens;
        self.metrics.itl.observe_n(step, tokens);
    }

    fn first_token(&mut self, request: Request, served: &mut Vec<Served>) {
        let ttft = self.clock - request.arrival;
        self.metrics.ttft.observe(ttft);
        // vLLM V1 counts a prompt's tokens once its prefill completes (the step that emits its
        // first token), not when it is admitted or chunk by chunk.
        self.metrics.prompt_tokens += u64::from(request.input_tokens);
        self.metrics.generation_tokens += 1;
        served.push(Served::FirstToken {
            arrival: request.arrival,
            ttft,
        });
        self.seq += 1;
        let decoding = Decoding {
            finish_step: self.steps + u64::from(request.output_tokens.saturating_sub(1)),
            seq: self.seq,
            arrival: request.arrival,
            context: Pod::context(&request),
        };
        if decoding.finish_step == self.steps {
            self.end(decoding, served);
        } else {
            self.decoding.push(Reverse(decoding));
        }
    }

    fn finish_due(&mut self, served: &mut Vec<Served>) {
        while let Some(Reverse(next)) = self.decoding.peek().copied() {
            if next.finish_step > self.steps {
                return;
            }
            self.decoding.pop();
            self.end(next, served);
        }
    }

    fn end(&mut self, done: Decoding, served: &mut Vec<Served>) {
        self.kv_used = self.kv_used.saturating_sub(done.context);
        let sojourn = self.clock - done.arrival;
        self.metrics.e2e.observe(sojourn);
        self.metrics.finish(FinishReason::Stop);
        served.push(Served::Finished {
            arrival: done.arrival,
            sojourn,
        });
    }

    /// Arrivals of requests without a first token yet: queued, or in prefill.
    pub fn unserved(&self) -> impl Iterator<Item = f64> + '_ {
        self.waiting
            .iter()
            .map(|r| r.arrival)
            .chain(self.prefilling.iter().map(|p| p.request.arrival))
    }

    /// Abort everything (a drain past its grace): counted as `abort`; returns the arrivals of
    /// the requests that never had a first token.
    pub fn abort_all(&mut self) -> Vec<f64> {
        let unserved: Vec<f64> = self.unserved().collect();
        let aborted = unserved.len() + self.decoding.len();
        for _ in 0..aborted {
            self.metrics.finish(FinishReason::Abort);
        }
        self.waiting.clear();
        self.prefilling.clear();
        self.decoding.clear();
        self.kv_used = 0;
        self.due = f64::INFINITY;
        unserved
    }

    /// The pod's `/metrics` page: vLLM's exposition (the project's byte-exact vLLM writer,
    /// [`crate::fake`]) of this pod's gauges, counters and histograms. The queue-time
    /// histogram is kept in [`PodMetrics`] only (the writer has no family for it).
    pub fn exposition(&self, model: &PodModel) -> String {
        let mut state = PodState::with_start_time(0.0);
        let series = state.model_mut(SERVED_MODEL);
        series.load = ModelLoad {
            waiting: self.waiting() as f64,
            running: self.running() as f64,
            kv_cache_usage: self.kv_cache_usage(model),
        };
        series.prompt_tokens = self.metrics.prompt_tokens as f64;
        series.generation_tokens = self.metrics.generation_tokens as f64;
        for (slot, count) in series.request_success.iter_mut().zip(self.metrics.finished) {
            *slot = count as f64;
        }
        series.ttft = self.metrics.ttft.clone();
        series.itl = self.metrics.itl.clone();
        series.e2e = self.metrics.e2e.clone();
        render_vllm_metrics(&state)
    }

    /// KV-cache usage of the running requests: vLLM V1 allocates a request's blocks when it is
    /// scheduled, so the contexts reserved for prompts not begun are not in the gauge (and
    /// `running / usage` stays the batch at which the cache is full).
    fn kv_cache_usage(&self, model: &PodModel) -> f64 {
        let not_begun: u64 = self.not_begun().map(|p| Pod::context(&p.request)).sum();
        (self.kv_used.saturating_sub(not_begun) as f64 / model.kv_cache_tokens as f64).min(1.0)
    }

    /// What a scrape of this pod returns, as the server's vLLM parser reads it (the same
    /// numbers as parsing [`Pod::exposition`], which a test checks; built directly because a
    /// run takes thousands of scrapes).
    pub fn reading(&self, model: &PodModel) -> PodReading {
        let mut bounds: Vec<f64> = TTFT_BUCKETS.to_vec();
        bounds.push(f64::INFINITY);
        let mut total = 0u64;
        let counts = self
            .metrics
            .ttft
            .counts()
            .iter()
            .map(|c| {
                total += c;
                total as f64
            })
            .collect();
        PodReading {
            target: self.target.clone(),
            waiting: self.waiting() as f64,
            running: Some(self.running() as f64),
            kv_cache_usage: Some(self.kv_cache_usage(model)),
            ttft: Some(Buckets { bounds, counts }),
            finished_total: Some(self.metrics.finished_total() as f64),
            generation_tokens_total: Some(self.metrics.generation_tokens as f64),
            prompt_tokens_total: Some(self.metrics.prompt_tokens as f64),
            read: Default::default(),
        }
    }
}
