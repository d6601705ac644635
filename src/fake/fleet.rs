//! A simulated fleet for `backlog-scaler demo`: several fake pods serving one model, driven by a
//! repeating demand curve, so the scaler has something that looks like production to watch.

use std::io;
use std::sync::Mutex;

use super::rng::Rng;
use super::server::FakeVllmPod;
use super::state::{FinishReason, ModelLoad};

/// vLLM's default `--max-num-seqs`: the running batch never exceeds it; the rest waits.
pub const DEFAULT_MAX_NUM_SEQS: usize = 32;
/// Length of one quiet → ramp → peak → drain → quiet cycle.
pub const CYCLE_SECONDS: f64 = 120.0;

/// Ticks further apart than this are treated as this far apart, so a paused demo does not dump
/// minutes of finished requests into one scrape.
const MAX_TICK_GAP: f64 = 10.0;
/// Mean output length of the simulated requests, in tokens.
const MEAN_GENERATION_TOKENS: f64 = 220.0;

struct Sim {
    last_t: Option<f64>,
    rng: Rng,
    /// Fractional finished requests carried to the next tick, per pod.
    carry: Vec<f64>,
    /// Which pod gets the first of the leftover requests this tick, so ties rotate.
    rotate: usize,
}

/// A simulated fleet for `backlog-scaler demo`: N pods, one model, a load curve.
pub struct FakeFleet {
    pods: Vec<FakeVllmPod>,
    model: String,
    max_num_seqs: usize,
    sim: Mutex<Sim>,
}

impl FakeFleet {
    /// Start `pods` fake pods on loopback, each already exposing `model` at zero load.
    pub async fn start(pods: usize, model: &str) -> io::Result<FakeFleet> {
        let mut started = Vec::with_capacity(pods);
        for _ in 0..pods {
            let pod = FakeVllmPod::start().await?;
            // vLLM exposes its series from startup on, all zero.
            pod.set_load(model, ModelLoad::default());
            started.push(pod);
        }
        Ok(FakeFleet {
            pods: started,
            model: model.to_owned(),
            max_num_seqs: DEFAULT_MAX_NUM_SEQS,
            sim: Mutex::new(Sim {
                last_t: None,
                rng: Rng::new(0xF1EE_7000 + pods as u64),
                carry: vec![0.0; pods],
                rotate: 0,
            }),
        })
    }

    /// Use another `--max-num-seqs` (at least 1).
    pub fn with_max_num_seqs(mut self, max_num_seqs: usize) -> Self {
        self.max_num_seqs = max_num_seqs.max(1);
        self
    }

    /// The per-pod running-batch limit.
    pub fn max_num_seqs(&self) -> usize {
        self.max_num_seqs
    }

    /// The one served model name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// One `http://127.0.0.1:PORT/metrics` per pod, in pod order.
    pub fn metrics_urls(&self) -> Vec<String> {
        self.pods.iter().map(FakeVllmPod::metrics_url).collect()
    }

    /// The pods, e.g. to stop one or make it return 500 during a demo.
    pub fn pods(&self) -> &[FakeVllmPod] {
        &self.pods
    }

    /// The pods, mutably, to [`FakeVllmPod::stop`] / [`FakeVllmPod::restart`] one.
    pub fn pods_mut(&mut self) -> &mut [FakeVllmPod] {
        &mut self.pods
    }

    /// Requests in the system (running + waiting, whole fleet) the curve asks for at `t`, before
    /// noise: 8 % of capacity when quiet, 150 % at the peak, so the peak always builds a queue.
    pub fn demand(&self, t: f64) -> f64 {
        let capacity = (self.pods.len() * self.max_num_seqs) as f64;
        let quiet = (0.08 * capacity).max(1.0);
        let peak = 1.5 * capacity;
        let smooth = |x: f64| x * x * (3.0 - 2.0 * x);
        let phase = t.rem_euclid(CYCLE_SECONDS);
        match phase {
            p if p < 20.0 => quiet,
            p if p < 50.0 => quiet + (peak - quiet) * smooth((p - 20.0) / 30.0),
            p if p < 80.0 => peak,
            p if p < 100.0 => peak + (quiet - peak) * smooth((p - 80.0) / 20.0),
            _ => quiet,
        }
    }

    /// Drive the fleet's gauges from a demand curve: `t` seconds since start. Load rises and falls over a
    /// ~120 s cycle (quiet → ramp → peak with a queue → drain → quiet), spread over pods with least-request
    /// routing; each pod runs at most `max_num_seqs` (default 32) and queues the rest as waiting; also records
    /// finished requests into the histograms/counters so those move too.
    pub fn tick(&self, t: f64) {
        self.drive(t, self.demand(t), self.pods.len());
    }

    /// Like [`FakeFleet::tick`], with the demand given (requests in the system at `t`, before noise)
    /// and routed over the first `serving` pods only: the others expose vLLM's series at zero, as a
    /// pod that gets no traffic would. The demo scales its fleet with it: pods past `serving` are
    /// slots with no ready pod behind them.
    pub fn tick_with(&self, t: f64, demand: f64, serving: usize) {
        self.drive(t, demand, serving.min(self.pods.len()));
    }

    fn drive(&self, t: f64, demand: f64, serving: usize) {
        let n = self.pods.len();
        if n == 0 {
            return;
        }
        let mut guard = self.sim.lock().unwrap_or_else(|e| e.into_inner());
        let sim = &mut *guard;
        let dt = sim
            .last_t
            .map_or(0.0, |last| (t - last).clamp(0.0, MAX_TICK_GAP));
        sim.last_t = Some(t);

        let noise = 1.0 + 0.04 * (2.0 * sim.rng.unit() - 1.0);
        let total = (demand.max(0.0) * noise).round() as usize;
        // Least-request routing keeps every serving pod within one request of the others.
        let lanes = serving.max(1);
        let (base, leftover) = (total / lanes, total % lanes);
        let first = sim.rotate % lanes;
        sim.rotate = sim.rotate.wrapping_add(1);
        let max = self.max_num_seqs as f64;

        for (k, pod) in self.pods.iter().enumerate() {
            let assigned = if k < serving {
                base + usize::from((k + lanes - first) % lanes < leftover)
            } else {
                0
            };
            let running = assigned.min(self.max_num_seqs) as f64;
            let waiting = assigned.saturating_sub(self.max_num_seqs) as f64;
            let util = running / max;
            let kv = (util * 0.82 + if waiting > 0.0 { 0.12 } else { 0.0 } + 0.02 * sim.rng.unit())
                .min(0.99);

            // Decode slows as the batch fills; Little's law turns the batch into a completion rate.
            let itl_mean = 0.012 + 0.02 * util;
            let e2e_mean = 0.08 + MEAN_GENERATION_TOKENS * itl_mean;
            let throughput = running / e2e_mean;
            let queue_delay = if throughput > 0.0 {
                waiting / throughput
            } else {
                0.0
            };
            sim.carry[k] += throughput * dt;
            let done = sim.carry[k].floor().min(5_000.0);
            sim.carry[k] -= done;

            let rng = &mut sim.rng;
            pod.update(|s| {
                s.set_load(
                    &self.model,
                    ModelLoad {
                        waiting,
                        running,
                        kv_cache_usage: kv,
                    },
                );
                for _ in 0..done as u64 {
                    let reason = match rng.below(200) {
                        0 => FinishReason::Abort,
                        1..=6 => FinishReason::Length,
                        _ => FinishReason::Stop,
                    };
                    let prompt = 64 + rng.below(1_500);
                    let generation = 8 + rng.below(2 * MEAN_GENERATION_TOKENS as u64 - 16);
                    let ttft = 0.025 + prompt as f64 * 0.00005 + queue_delay * (0.5 + rng.unit());
                    let itl = itl_mean * (0.8 + 0.4 * rng.unit());
                    let e2e = ttft + generation as f64 * itl;
                    s.record_finished(&self.model, 0, reason, ttft, e2e, prompt, generation);
                    let m = s.model_mut(&self.model);
                    m.prefix_cache_hits += (prompt as f64 * 0.35).floor();
                }
                let m = s.model_mut(&self.model);
                if waiting > 0.0 && kv > 0.95 && rng.below(4) == 0 {
                    m.num_preemptions += 1.0;
                }
                s.process.cpu_seconds_total += dt * (0.25 + util);
                s.process.gc_collections[0] += (done / 8.0).floor();
                s.process.gc_objects_collected[0] += done * 37.0;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loads(fleet: &FakeFleet) -> Vec<ModelLoad> {
        fleet
            .pods()
            .iter()
            .map(|p| {
                p.state()
                    .model(fleet.model())
                    .expect("model series")
                    .load
                    .clone()
            })
            .collect()
    }

    #[tokio::test]
    async fn demand_cycle_builds_and_drains_a_queue() {
        let fleet = FakeFleet::start(3, "meta-llama/Llama-3.1-8B-Instruct")
            .await
            .expect("fleet");
        assert_eq!(fleet.metrics_urls().len(), 3);
        let mut peak_waiting = 0.0f64;
        for step in 0..=240 {
            let t = step as f64 * 0.5;
            fleet.tick(t);
            let l = loads(&fleet);
            let running: Vec<f64> = l.iter().map(|l| l.running).collect();
            let spread = running.iter().cloned().fold(f64::MIN, f64::max)
                - running.iter().cloned().fold(f64::MAX, f64::min);
            assert!(
                spread <= 1.0,
                "least-request routing keeps pods even: {running:?}"
            );
            assert!(
                l.iter()
                    .all(|l| l.running <= 32.0 && (0.0..=1.0).contains(&l.kv_cache_usage))
            );
            if (5.0..18.0).contains(&t) || t >= 105.0 {
                assert!(
                    l.iter().all(|l| l.waiting == 0.0 && l.running <= 5.0),
                    "quiet at {t}: {l:?}"
                );
            }
            if (55.0..78.0).contains(&t) {
                assert!(
                    l.iter().all(|l| l.running == 32.0 && l.waiting > 0.0),
                    "peak at {t}: {l:?}"
                );
            }
            peak_waiting = peak_waiting.max(l.iter().map(|l| l.waiting).sum());
        }
        assert!(peak_waiting >= 30.0, "a real queue forms: {peak_waiting}");

        let state = fleet.pods()[0].state();
        let m = state.model(fleet.model()).expect("series");
        assert!(
            m.ttft.count() > 50 && m.e2e.count() == m.ttft.count() && m.itl.count() > m.e2e.count()
        );
        assert!(m.success(FinishReason::Stop) > 0.0 && m.prompt_tokens > 0.0);
        assert!(m.prefix_cache_hits > 0.0 && m.prefix_cache_hits < m.prefix_cache_queries);
        // Queueing shows up in TTFT: some first tokens took longer than a second.
        let fast: u64 = m.ttft.counts()[..12].iter().sum();
        assert!(fast < m.ttft.count(), "no slow TTFT despite the queue");
    }

    #[tokio::test]
    async fn only_serving_pods_get_the_given_demand() {
        let fleet = FakeFleet::start(4, "m").await.expect("fleet");
        fleet.tick_with(1.0, 100.0, 2);
        let l = loads(&fleet);
        // 100 ± 4 % noise over two pods of 32: both full, the rest waits there.
        assert!(
            l[..2]
                .iter()
                .all(|l| l.running == 32.0 && l.waiting >= 14.0)
        );
        assert!(l[2..].iter().all(|l| l.running == 0.0 && l.waiting == 0.0));
        let total: f64 = l.iter().map(|l| l.running + l.waiting).sum();
        assert!((96.0..=104.0).contains(&total), "{total}");
        fleet.tick_with(2.0, 100.0, 4);
        let l = loads(&fleet);
        assert!(
            l.iter().all(|l| l.running >= 24.0 && l.waiting == 0.0),
            "{l:?}"
        );
    }

    #[tokio::test]
    async fn smaller_batches_queue_earlier() {
        let fleet = FakeFleet::start(2, "m")
            .await
            .expect("fleet")
            .with_max_num_seqs(4);
        fleet.tick(65.0);
        assert!(
            loads(&fleet)
                .iter()
                .all(|l| l.running == 4.0 && l.waiting >= 1.0)
        );
    }
}
