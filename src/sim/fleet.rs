//! The Deployment's pods: continuous batching, per-pod queues, least-request
//! routing, cold start and drain.
//!
//! Each pod runs up to `max_num_seqs` requests at once; the rest wait in its
//! FIFO queue. A running request needs its prefill work (first token), then
//! its decode work, both measured at batch size 1; a batch of `b` runs every
//! member at speed `1/(1 + s·(b−1)/(C−1))` (`s` = `batch_stretch`), so a
//! full batch is `1 + s` times slower per request but finishes `C/(1+s)`
//! times more requests per second. The pod keeps a virtual work clock that
//! advances at that speed, so each request's first-token and finish events
//! are fixed points on it and the engine is simulated exactly, event by
//! event, with no time step.
//!
//! Lifecycle, as Kubernetes runs it: a new pod is *warming* for the cold
//! start (counted as a replica and in GPU-hours, not ready, not routed, not
//! scraped: a headless Service lists ready pods only); then *ready*; on
//! scale-down the ReplicaSet removes warming pods first (newest first), then
//! the most recently ready, which *drain*: unlisted and unrouted, they finish
//! their running and queued requests (up to `drain_grace_seconds`) while
//! still holding their GPU. Requests that arrive while no pod is ready wait
//! at the gateway until one is.
//!
//! Every pod keeps vLLM's cumulative counters (finished requests and the TTFT
//! histogram on vLLM's bounds), so its [`PodReading`] is what a scrape of
//! a real vLLM pod would give.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use super::arrivals::{Request, RequestSizes};
use crate::fake::TTFT_BUCKETS;
use crate::source::engine::{Buckets, Engine, EngineReading, PodReading};

/// What one pod is and how it starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodModel {
    /// vLLM `--max-num-seqs`: requests running at once.
    pub max_num_seqs: usize,
    /// `s`: a full batch runs each request `1 + s` times slower than alone.
    pub batch_stretch: f64,
    /// Seconds from creation to ready (image pull, model load, warm-up).
    pub cold_start_seconds: f64,
    /// A draining pod is killed after this long, abandoning what is left.
    pub drain_grace_seconds: f64,
}

impl Default for PodModel {
    fn default() -> PodModel {
        PodModel {
            max_num_seqs: 32,
            batch_stretch: 1.0,
            cold_start_seconds: 90.0,
            drain_grace_seconds: 600.0,
        }
    }
}

impl PodModel {
    /// Requests/s one pod finishes at a full batch: `C / (mean work·(1+s))`.
    /// What a load test measures; the capacity policy's `μ`.
    pub fn saturated_throughput(&self, sizes: &RequestSizes) -> f64 {
        self.max_num_seqs as f64 / (sizes.mean_work_seconds() * (1.0 + self.batch_stretch))
    }

    /// Speed of each request in a batch of `batch`.
    fn speed(&self, batch: usize) -> f64 {
        if self.max_num_seqs <= 1 || batch <= 1 {
            return 1.0;
        }
        let fill = (batch - 1) as f64 / (self.max_num_seqs - 1) as f64;
        1.0 / (1.0 + self.batch_stretch * fill)
    }
}

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum EventKind {
    FirstToken,
    Finish,
}

/// An event on a pod's virtual work clock. Ordered so that `BinaryHeap`
/// (a max-heap) pops the earliest first; first tokens before finishes at a
/// tie; then by sequence, so the order never depends on anything but input.
#[derive(Debug, Clone, Copy)]
struct Event {
    work: f64,
    kind: EventKind,
    seq: u64,
    arrival: f64,
}

impl PartialEq for Event {
    fn eq(&self, other: &Event) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Event {}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Event) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Event {
    fn cmp(&self, other: &Event) -> Ordering {
        other
            .work
            .total_cmp(&self.work)
            .then(other.kind.cmp(&self.kind))
            .then(other.seq.cmp(&self.seq))
    }
}

/// What the fleet measured over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetStats {
    /// `(arrival, TTFT)` per request, in seconds. Requests still without a
    /// first token at the end carry `end − arrival` (a lower bound); those
    /// abandoned by a drain past its grace carry `+inf`.
    pub ttft: Vec<(f32, f32)>,
    /// Requests finished.
    pub finished: u64,
    /// Sum of arrival-to-finish times of finished requests, seconds.
    pub sojourn_seconds: f64,
    /// Pod-seconds of every pod alive (warming, ready, draining): GPU time.
    pub pod_seconds: f64,
    /// Requests abandoned by a drain that ran past its grace.
    pub abandoned: u64,
}

#[derive(Debug, Clone)]
struct Pod {
    target: String,
    phase: Phase,
    ready_at: f64,
    drain_since: f64,
    /// Real time the pod has been simulated to.
    clock: f64,
    /// Virtual work clock (seconds of batch-1 work done per request).
    work: f64,
    running: usize,
    waiting: VecDeque<Request>,
    events: BinaryHeap<Event>,
    seq: u64,
    finished: u64,
    /// Non-cumulative TTFT counts per bound of `TTFT_BUCKETS`, then `+Inf`.
    ttft_counts: [u64; TTFT_BUCKETS.len() + 1],
}

impl Pod {
    fn new(id: u64, phase: Phase, now: f64, ready_at: f64) -> Pod {
        Pod {
            target: format!("http://pod-{id:05}:8000/metrics"),
            phase,
            ready_at,
            drain_since: f64::INFINITY,
            clock: now,
            work: 0.0,
            running: 0,
            waiting: VecDeque::new(),
            events: BinaryHeap::new(),
            seq: 0,
            finished: 0,
            ttft_counts: [0; TTFT_BUCKETS.len() + 1],
        }
    }

    fn load(&self) -> usize {
        self.running + self.waiting.len()
    }

    fn start(&mut self, request: Request) {
        self.running += 1;
        let first = self.work + request.prefill;
        for (work, kind) in [
            (first, EventKind::FirstToken),
            (first + request.decode, EventKind::Finish),
        ] {
            self.seq += 1;
            self.events.push(Event {
                work,
                kind,
                seq: self.seq,
                arrival: request.arrival,
            });
        }
    }

    fn accept(&mut self, request: Request, model: &PodModel) {
        if self.running < model.max_num_seqs && self.waiting.is_empty() {
            self.start(request);
        } else {
            self.waiting.push_back(request);
        }
    }

    /// Run the engine up to real time `until`, event by event.
    fn advance(&mut self, until: f64, model: &PodModel, stats: &mut FleetStats) {
        while self.clock < until {
            let Some(next) = self.events.peek().copied() else {
                self.clock = until;
                return;
            };
            let speed = model.speed(self.running);
            let at = self.clock + ((next.work - self.work) / speed).max(0.0);
            if at > until {
                self.work += speed * (until - self.clock);
                self.clock = until;
                return;
            }
            self.events.pop();
            self.clock = at;
            self.work = self.work.max(next.work);
            match next.kind {
                EventKind::FirstToken => {
                    let ttft = at - next.arrival;
                    let bucket = TTFT_BUCKETS
                        .iter()
                        .position(|bound| ttft <= *bound)
                        .unwrap_or(TTFT_BUCKETS.len());
                    self.ttft_counts[bucket] += 1;
                    stats.ttft.push((next.arrival as f32, ttft as f32));
                }
                EventKind::Finish => {
                    self.running -= 1;
                    self.finished += 1;
                    stats.finished += 1;
                    stats.sojourn_seconds += at - next.arrival;
                    if let Some(request) = self.waiting.pop_front() {
                        self.start(request);
                    }
                }
            }
        }
    }

    /// Requests without a first token yet: queued, or admitted in prefill.
    fn unserved(&self) -> impl Iterator<Item = f64> + '_ {
        self.waiting.iter().map(|r| r.arrival).chain(
            self.events
                .iter()
                .filter(|e| e.kind == EventKind::FirstToken)
                .map(|e| e.arrival),
        )
    }

    fn reading(&self, model: &PodModel) -> PodReading {
        let mut bounds: Vec<f64> = TTFT_BUCKETS.to_vec();
        bounds.push(f64::INFINITY);
        let mut total = 0u64;
        let counts = self
            .ttft_counts
            .iter()
            .map(|c| {
                total += c;
                total as f64
            })
            .collect();
        PodReading {
            target: self.target.clone(),
            waiting: self.waiting.len() as f64,
            running: Some(self.running as f64),
            kv_cache_usage: Some((self.running as f64 / model.max_num_seqs as f64).min(1.0)),
            ttft: Some(Buckets { bounds, counts }),
            finished_total: Some(self.finished as f64),
            read: Default::default(),
        }
    }
}

/// The Deployment: every pod, the gateway queue, and what they measured.
#[derive(Debug, Clone)]
pub struct Fleet {
    model: PodModel,
    pods: Vec<Pod>,
    next_id: u64,
    gateway: VecDeque<Request>,
    now: f64,
    stats: FleetStats,
}

impl Fleet {
    /// A fleet of `ready` pods, already warm, at time `now`.
    pub fn new(model: PodModel, ready: usize, now: f64) -> Fleet {
        let mut fleet = Fleet {
            model,
            pods: Vec::new(),
            next_id: 0,
            gateway: VecDeque::new(),
            now,
            stats: FleetStats::default(),
        };
        for _ in 0..ready {
            fleet.add_pod(Phase::Ready, now);
        }
        fleet
    }

    fn add_pod(&mut self, phase: Phase, ready_at: f64) {
        self.next_id += 1;
        let pod = Pod::new(self.next_id, phase, self.now, ready_at);
        self.pods.push(pod);
    }

    /// The pod model.
    pub fn model(&self) -> &PodModel {
        &self.model
    }

    /// Simulate every pod up to `t`.
    pub fn advance_to(&mut self, t: f64) {
        if t <= self.now {
            return;
        }
        self.stats.pod_seconds += self.pods.len() as f64 * (t - self.now);
        for pod in &mut self.pods {
            pod.advance(t, &self.model, &mut self.stats);
        }
        self.now = t;
    }

    /// A request arrives: least-request routing over ready pods (fewest
    /// running + waiting; the oldest pod on a tie), or the gateway queue
    /// when no pod is ready.
    pub fn arrive(&mut self, request: Request) {
        self.advance_to(request.arrival);
        self.route(request);
    }

    fn route(&mut self, request: Request) {
        let target = self
            .pods
            .iter_mut()
            .filter(|p| p.phase == Phase::Ready)
            .min_by_key(|p| p.load());
        match target {
            Some(pod) => pod.accept(request, &self.model),
            None => self.gateway.push_back(request),
        }
    }

    /// Lifecycle at a step boundary `t` (after [`Fleet::advance_to`]):
    /// warm pods become ready and take the gateway's queue; drained pods go.
    pub fn settle(&mut self, t: f64) {
        self.advance_to(t);
        for pod in &mut self.pods {
            if pod.phase == Phase::Warming && pod.ready_at <= t {
                pod.phase = Phase::Ready;
            }
        }
        if self.pods.iter().any(|p| p.phase == Phase::Ready) {
            while let Some(request) = self.gateway.pop_front() {
                self.route(request);
            }
        }
        let grace = self.model.drain_grace_seconds;
        let stats = &mut self.stats;
        self.pods.retain(|pod| {
            if pod.phase != Phase::Draining {
                return true;
            }
            if pod.load() == 0 {
                return false;
            }
            if t - pod.drain_since >= grace {
                for arrival in pod.unserved() {
                    stats.ttft.push((arrival as f32, f32::INFINITY));
                    stats.abandoned += 1;
                }
                return false;
            }
            true
        });
    }

    /// Set the Deployment's replicas: create warming pods, or remove warming
    /// pods (newest first) then drain the most recently ready ones.
    pub fn scale_to(&mut self, replicas: usize, t: f64) {
        self.advance_to(t);
        let current = self.replicas();
        if replicas > current {
            let cold = self.model.cold_start_seconds;
            for _ in current..replicas {
                let phase = if cold > 0.0 {
                    Phase::Warming
                } else {
                    Phase::Ready
                };
                self.add_pod(phase, t + cold);
            }
            return;
        }
        for _ in replicas..current {
            let warming = self.pods.iter().rposition(|p| p.phase == Phase::Warming);
            if let Some(index) = warming {
                self.pods.remove(index);
                continue;
            }
            let newest_ready = self
                .pods
                .iter_mut()
                .filter(|p| p.phase == Phase::Ready)
                .max_by(|a, b| a.ready_at.total_cmp(&b.ready_at));
            if let Some(pod) = newest_ready {
                pod.phase = Phase::Draining;
                pod.drain_since = t;
            }
        }
    }

    /// Replicas as the ReplicaSet counts them: every pod not terminating.
    pub fn replicas(&self) -> usize {
        self.pods
            .iter()
            .filter(|p| p.phase != Phase::Draining)
            .count()
    }

    /// Ready pods.
    pub fn ready(&self) -> usize {
        self.pods.iter().filter(|p| p.phase == Phase::Ready).count()
    }

    /// Every pod holding a GPU (warming, ready, draining).
    pub fn pods_alive(&self) -> usize {
        self.pods.len()
    }

    /// Requests waiting: in pod queues and at the gateway.
    pub fn waiting(&self) -> usize {
        self.gateway.len() + self.pods.iter().map(|p| p.waiting.len()).sum::<usize>()
    }

    /// Requests running in a batch.
    pub fn running(&self) -> usize {
        self.pods.iter().map(|p| p.running).sum()
    }

    /// What a scrape of every ready pod returns now.
    pub fn reading(&self) -> EngineReading {
        EngineReading {
            engine: Engine::Vllm,
            pods: self
                .pods
                .iter()
                .filter(|p| p.phase == Phase::Ready)
                .map(|p| p.reading(&self.model))
                .collect(),
            malformed_lines: 0,
            empty_discovery: Vec::new(),
        }
    }

    /// Run to `end` and return what was measured; requests still without a
    /// first token are recorded with `end − arrival`.
    pub fn finish(mut self, end: f64) -> FleetStats {
        self.advance_to(end);
        let mut censored: Vec<f64> = self.gateway.iter().map(|r| r.arrival).collect();
        for pod in &self.pods {
            censored.extend(pod.unserved());
        }
        censored.sort_by(f64::total_cmp);
        for arrival in censored {
            self.stats
                .ttft
                .push((arrival as f32, (end - arrival) as f32));
        }
        self.stats
    }
}

#[cfg(test)]
mod tests;
