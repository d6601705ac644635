//! What a policy can see, and when.
//!
//! Two views of the same pods. *Direct*: the scaler scrapes every ready pod
//! at its poll interval and decides on that reading (the `vllmTargets`
//! path). *Prometheus*: Prometheus scrapes the pods every `scrape_interval`
//! seconds and a query at time `t` sees the newest scrape at or before
//! `t − query_delay` (ingestion and rule/query delay); a KEDA `prometheus`
//! trigger decides on that. So a Prometheus-fed trigger acts on numbers
//! `query_delay` to `scrape_interval + query_delay` seconds old.
//!
//! Queries answered here, as the seed article's and vLLM production-stack's
//! triggers write them:
//! - `sum(vllm:num_requests_waiting)`, `sum(vllm:num_requests_running)`;
//! - `histogram_quantile(q, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[w])))`,
//!   computed with the scaler's own code ([`crate::decide::ttft_window`]): per-pod bucket
//!   increases over the scrapes inside the window, summed, then Prometheus's
//!   interpolation. (Prometheus's `rate` also extrapolates to the window's
//!   edges; that scales every bucket of a pod alike and leaves the quantile
//!   nearly unchanged.)

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::decide::ttft_window::{TtftSnapshot, histogram_quantile, window_increase};
use crate::source::engine::EngineReading;

/// Prometheus's timing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrometheusTiming {
    /// Scrape interval, seconds.
    pub scrape_interval_seconds: f64,
    /// Extra delay before a scrape is visible to a query, seconds.
    pub query_delay_seconds: f64,
}

impl Default for PrometheusTiming {
    fn default() -> PrometheusTiming {
        PrometheusTiming {
            scrape_interval_seconds: 15.0,
            query_delay_seconds: 5.0,
        }
    }
}

/// The scrapes Prometheus holds (the last ten minutes).
#[derive(Debug, Clone)]
pub struct PrometheusView {
    timing: PrometheusTiming,
    base: Instant,
    scrapes: VecDeque<(f64, EngineReading)>,
}

const RETENTION_SECONDS: f64 = 600.0;

/// The instant of simulated time `t` (negative during the warm-up) when `base` is that of
/// `t = 0`; the caller picks a `base` at least the warm-up after a real instant.
pub fn instant_at(base: Instant, t: f64) -> Instant {
    let offset = Duration::from_secs_f64(t.abs());
    if t >= 0.0 {
        base + offset
    } else {
        base.checked_sub(offset).unwrap_or(base)
    }
}

impl PrometheusView {
    /// An empty store; `base` is the instant of simulated time 0.
    pub fn new(timing: PrometheusTiming, base: Instant) -> PrometheusView {
        PrometheusView {
            timing,
            base,
            scrapes: VecDeque::new(),
        }
    }

    /// The timing.
    pub fn timing(&self) -> PrometheusTiming {
        self.timing
    }

    /// True when Prometheus scrapes at time `t` (whole seconds).
    pub fn scrapes_at(&self, t: f64) -> bool {
        let interval = self.timing.scrape_interval_seconds.max(1.0);
        (t / interval).fract() == 0.0
    }

    /// Store the scrape taken at `t`.
    pub fn record(&mut self, t: f64, reading: EngineReading) {
        self.scrapes.push_back((t, reading));
        while self
            .scrapes
            .front()
            .is_some_and(|(at, _)| *at < t - RETENTION_SECONDS)
        {
            self.scrapes.pop_front();
        }
    }

    fn visible(&self, t: f64) -> impl Iterator<Item = &(f64, EngineReading)> + Clone {
        let horizon = t - self.timing.query_delay_seconds;
        self.scrapes.iter().filter(move |(at, _)| *at <= horizon)
    }

    /// The newest scrape a query at `t` sees.
    pub fn latest(&self, t: f64) -> Option<&EngineReading> {
        self.visible(t).last().map(|(_, r)| r)
    }

    /// `sum(vllm:num_requests_waiting)` at `t`; `None` before the first scrape.
    pub fn waiting(&self, t: f64) -> Option<f64> {
        self.latest(t).map(EngineReading::waiting)
    }

    /// `sum(vllm:num_requests_running)` at `t`.
    pub fn running(&self, t: f64) -> Option<f64> {
        self.latest(t).and_then(EngineReading::running)
    }

    /// `histogram_quantile(q, sum by (le)(rate(ttft_bucket[window])))` at
    /// `t`; `None` when no request finished prefill in the window (NaN in
    /// Prometheus).
    pub fn ttft_quantile(&self, t: f64, quantile: f64, window_seconds: f64) -> Option<f64> {
        let end = t - self.timing.query_delay_seconds;
        let snapshots: Vec<TtftSnapshot> = self
            .visible(t)
            .filter(|(at, _)| *at > end - window_seconds)
            .map(|(at, reading)| TtftSnapshot {
                at: instant_at(self.base, *at),
                pods: reading
                    .pods
                    .iter()
                    .filter_map(|p| p.ttft.as_ref().map(|b| (p.target.clone(), b.clone())))
                    .collect::<HashMap<_, _>>(),
            })
            .collect();
        let increase = window_increase(snapshots.iter())?;
        histogram_quantile(quantile, &increase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::engine::{Buckets, Engine, PodReading};

    fn reading(waiting: f64, fast: f64, slow: f64) -> EngineReading {
        EngineReading {
            engine: Engine::Vllm,
            pods: vec![PodReading {
                target: "p".to_owned(),
                waiting,
                running: Some(1.0),
                kv_cache_usage: Some(0.1),
                ttft: Some(Buckets {
                    bounds: vec![1.0, 4.0, f64::INFINITY],
                    counts: vec![fast, fast + slow, fast + slow],
                }),
                finished_total: Some(0.0),
                generation_tokens_total: None,
                prompt_tokens_total: None,
                read: Default::default(),
            }],
            malformed_lines: 0,
            empty_discovery: Vec::new(),
        }
    }

    #[test]
    fn a_query_sees_the_newest_scrape_older_than_the_delay() {
        let mut view = PrometheusView::new(PrometheusTiming::default(), Instant::now());
        assert!(view.scrapes_at(30.0) && !view.scrapes_at(31.0));
        view.record(0.0, reading(1.0, 0.0, 0.0));
        view.record(15.0, reading(2.0, 0.0, 0.0));
        assert_eq!(view.waiting(4.0), None);
        assert_eq!(view.waiting(19.0), Some(1.0));
        assert_eq!(view.waiting(20.0), Some(2.0));
    }

    #[test]
    fn ttft_quantile_uses_the_window_increase() {
        let mut view = PrometheusView::new(PrometheusTiming::default(), Instant::now());
        // Lifetime: 1000 fast requests before the window; in it 10 fast, 10 slow.
        view.record(0.0, reading(0.0, 1000.0, 0.0));
        view.record(60.0, reading(0.0, 1000.0, 0.0));
        view.record(75.0, reading(0.0, 1005.0, 5.0));
        view.record(90.0, reading(0.0, 1010.0, 10.0));
        // At t=95 the window (35, 90] holds the scrapes at 60, 75, 90.
        let p95 = view.ttft_quantile(95.0, 0.95, 60.0).expect("samples");
        // rank 19 of 20: in (1, 4], 9 of 10 into it → 1 + 3·0.9.
        assert!((p95 - 3.7).abs() < 1e-9, "{p95}");
        assert_eq!(
            view.ttft_quantile(70.0, 0.95, 60.0),
            None,
            "no increase yet"
        );
    }
}
