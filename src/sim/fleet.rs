//! The Deployment's pods: least-request routing, cold start and drain, around each pod's
//! engine ([`super::pod`]).
//!
//! Lifecycle, as Kubernetes runs it: a new pod is *warming* for the cold start (counted as a
//! replica and in GPU-hours, not ready, not routed, not scraped: a headless Service lists
//! ready pods only); then *ready*; on scale-down the ReplicaSet removes warming pods first
//! (newest first), then the most recently ready, which *drain*: unlisted and unrouted, they
//! finish their running and queued requests (up to `drain_grace_seconds`) while still holding
//! their GPU. Requests that arrive while no pod is ready wait at the gateway until one is.
//!
//! The run's statistics count from `t = 0`: requests of the warm-up (negative arrival times)
//! load the pods but are not measured, and GPU time before 0 is not billed.

use std::collections::VecDeque;

use super::model::PodModel;
use super::pod::{Phase, Pod, PodMetrics, Served};
use super::workload::Request;
use crate::source::engine::{Engine, EngineReading};

/// What the fleet measured over a run (from `t = 0`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetStats {
    /// `(arrival, TTFT)` per request, in seconds. Requests still without a first token at the
    /// end carry `end − arrival` (a lower bound); those abandoned by a drain past its grace
    /// carry `+inf`.
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

/// The Deployment: every pod, the gateway queue, and what they measured.
#[derive(Debug, Clone)]
pub struct Fleet {
    model: PodModel,
    pods: Vec<Pod>,
    next_id: u64,
    gateway: VecDeque<Request>,
    now: f64,
    served: Vec<Served>,
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
            served: Vec::new(),
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

    /// Move the fleet's time to `t`, simulating the pods whose state changes by then (the
    /// rest are exact as they stand: see [`Pod::next_event`]).
    pub fn advance_to(&mut self, t: f64) {
        if t <= self.now {
            return;
        }
        let billed = t.max(0.0) - self.now.max(0.0);
        self.stats.pod_seconds += self.pods.len() as f64 * billed;
        for pod in &mut self.pods {
            if pod.next_event() <= t {
                pod.advance(t, &self.model, &mut self.served);
            }
        }
        self.now = t;
        self.take_served();
    }

    /// Simulate every pod up to now (before a scrape reads their counters).
    fn catch_up(&mut self) {
        let now = self.now;
        for pod in &mut self.pods {
            pod.advance(now, &self.model, &mut self.served);
        }
        self.take_served();
    }

    fn take_served(&mut self) {
        for served in self.served.drain(..) {
            match served {
                Served::FirstToken { arrival, ttft } if arrival >= 0.0 => {
                    self.stats.ttft.push((arrival as f32, ttft as f32));
                }
                Served::Finished { arrival, sojourn } if arrival >= 0.0 => {
                    self.stats.finished += 1;
                    self.stats.sojourn_seconds += sojourn;
                }
                _ => {}
            }
        }
    }

    /// A request arrives: least-request routing over ready pods (fewest running + waiting;
    /// the oldest pod on a tie), or the gateway queue when no pod is ready.
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
            Some(pod) => {
                // Its engine must stand at the arrival before the request can be scheduled.
                pod.advance(self.now, &self.model, &mut self.served);
                pod.accept(request);
            }
            None => self.gateway.push_back(request),
        }
    }

    /// Lifecycle at a step boundary `t`: warm pods become ready and take the gateway's
    /// queue; drained pods go.
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
        self.pods.retain_mut(|pod| {
            if pod.phase != Phase::Draining {
                return true;
            }
            if pod.load() == 0 {
                return false;
            }
            if t - pod.drain_since >= grace {
                for arrival in pod.abort_all() {
                    if arrival >= 0.0 {
                        stats.ttft.push((arrival as f32, f32::INFINITY));
                    }
                    stats.abandoned += 1;
                }
                return false;
            }
            true
        });
    }

    /// Set the Deployment's replicas: create warming pods, or remove warming pods (newest
    /// first) then drain the most recently ready ones.
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

    /// Requests waiting: in pod queues (not scheduled yet) and at the gateway.
    pub fn waiting(&self) -> usize {
        self.gateway.len() + self.pods.iter().map(Pod::waiting).sum::<usize>()
    }

    /// Requests running (in a model execution batch: decoding, or part-way through prefill).
    pub fn running(&self) -> usize {
        self.pods.iter().map(Pod::running).sum()
    }

    /// Every ready pod's vLLM metrics now, with the URL it would be scraped at.
    pub fn metrics(&mut self) -> impl Iterator<Item = (&str, &PodMetrics)> {
        self.catch_up();
        self.pods
            .iter()
            .filter(|p| p.phase == Phase::Ready)
            .map(|p| (p.target.as_str(), p.metrics()))
    }

    /// What a scrape of every ready pod returns now.
    pub fn reading(&mut self) -> EngineReading {
        self.catch_up();
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

    /// Run to `end` and return what was measured; requests still without a first token are
    /// recorded with `end − arrival`.
    pub fn finish(mut self, end: f64) -> FleetStats {
        self.advance_to(end);
        self.catch_up();
        let mut censored: Vec<f64> = self.gateway.iter().map(|r| r.arrival).collect();
        for pod in &self.pods {
            censored.extend(pod.unserved());
        }
        censored.retain(|arrival| *arrival >= 0.0);
        censored.sort_unstable_by(f64::total_cmp);
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
