//! The `capacity` policy's PromQL path: per-pod instant vectors (waiting,
//! running, the finished and token counters' raw values, KV usage, TTFT buckets),
//! keyed by a pod label, read into the same [`EngineReading`] a direct
//! scrape gives, so the decision (quorum, the capacity estimator, the TTFT
//! window) runs unchanged on it (docs/decisions/0024).
//!
//! A pod whose waiting or running series is missing while other queries
//! name it is a failed pod (its last reading held, then left out while a
//! quorum reports, as for a scrape that failed), never a pod with 0
//! requests; so is one without a KV or finished series the trigger
//! requires ([`RequiredSignals`]). Otherwise a pod without its finished
//! counter is read as such (`finished_total: None`): the estimator then
//! holds λ̂ and floors `D` at the backlog formula. Prometheus drops a series its target stopped
//! exporting at the next scrape (a staleness marker) or after its lookback
//! (5 minutes by default), so a lost pod disappears from the answer rather
//! than reading as zero.
//!
//! The token counters are optional: a pod without them, a token query
//! that fails or answers nothing, or one whose series lack the pod label,
//! reads `None` for tokens, so μ stays in requests (decision 0027); they
//! never fail the reading nor make a failed pod.

use std::collections::BTreeMap;

use super::{Answer, PodQueries, PromQuery, Sample};
use crate::source::context::SourceContext;
use crate::source::engine::fanout::{PodFailure, PodsRead};
use crate::source::engine::names::Engine;
use crate::source::engine::pod::{Buckets, EngineReading, PodReading, SeriesRead};
use crate::source::engine::required::{Missing, RequiredSignals};
use crate::source::error::SourceError;

/// What each query answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodAnswers {
    /// The waiting query's series.
    pub waiting: Vec<Sample>,
    /// The running query's, if asked.
    pub running: Option<Vec<Sample>>,
    /// The finished query's.
    pub finished: Vec<Sample>,
    /// The generated-tokens query's, if asked and it answered.
    pub generation_tokens: Option<Vec<Sample>>,
    /// The prompt-tokens query's, if asked and it answered.
    pub prompt_tokens: Option<Vec<Sample>>,
    /// The KV query's, if asked.
    pub kv_cache: Option<Vec<Sample>>,
    /// The TTFT buckets query's, if asked.
    pub ttft: Option<Vec<Sample>>,
}

impl PodQueries {
    fn query(&self, text: &str) -> PromQuery {
        PromQuery {
            address: self.address.clone(),
            query: text.to_owned(),
            auth_profile: self.auth_profile.clone(),
            // `reading` checks each pod's values.
            answer: Answer::Raw,
        }
    }

    /// The label sources and errors show: the server and the pod label.
    pub fn label(&self) -> String {
        crate::guard::redact::redact(&format!(
            "prometheus {} per {}",
            self.address, self.pod_label
        ))
    }

    /// Run every query once (concurrently) and read the answers per pod.
    /// Any query failing fails the reading (a partial answer would mix
    /// pods read at different moments with pods not read at all), apart
    /// from the token queries: their failure only costs the token unit,
    /// as a pod's bad token counter does on the scrape path, so it reads
    /// as no token series rather than failing the poll (which would hold
    /// or drop every pod and could floor `B` for want of an optional
    /// signal).
    pub async fn read_pods(
        &self,
        engine: Engine,
        requires: RequiredSignals,
        ctx: &SourceContext,
    ) -> Result<PodsRead, SourceError> {
        let optional = |text: &Option<String>| {
            let query = text.as_deref().map(|t| self.query(t));
            async move {
                match query {
                    Some(q) => q.read_samples(ctx).await.map(Some),
                    None => Ok(None),
                }
            }
        };
        let waiting = self.query(&self.waiting);
        let finished = self.query(&self.finished);
        let (waiting, running, finished, generation_tokens, prompt_tokens, kv_cache, ttft) = tokio::join!(
            waiting.read_samples(ctx),
            optional(&self.running),
            finished.read_samples(ctx),
            optional(&self.generation_tokens),
            optional(&self.prompt_tokens),
            optional(&self.kv_cache),
            optional(&self.ttft),
        );
        let tokens = |answer: Result<Option<Vec<Sample>>, SourceError>, key: &str| {
            answer.unwrap_or_else(|e| {
                tracing::debug!(source = %self.label(), "{key} failed, μ stays in requests: {e}");
                None
            })
        };
        let answers = PodAnswers {
            waiting: waiting?,
            running: running?,
            finished: finished?,
            generation_tokens: tokens(generation_tokens, "podGenerationTokensQuery"),
            prompt_tokens: tokens(prompt_tokens, "podPromptTokensQuery"),
            kv_cache: kv_cache?,
            ttft: ttft?,
        };
        self.reading(engine, requires, &answers)
    }

    /// The answers as one engine reading: the pods that have every series
    /// they need (`requires` among them), and the others as failures. A
    /// series without the pod label fails the reading (a query that
    /// aggregated it away cannot be read per pod); so does an answer in
    /// which no pod could be read.
    pub fn reading(
        &self,
        engine: Engine,
        requires: RequiredSignals,
        answers: &PodAnswers,
    ) -> Result<PodsRead, SourceError> {
        let label = self.label();
        let key_of = |sample: &Sample, query: &str| -> Result<String, SourceError> {
            let Some(pod) = sample.metric.get(&self.pod_label) else {
                return Err(SourceError::parse(
                    &label,
                    format!(
                        "a series of `{query}` has no `{}` label ({}): per-pod queries must keep it (`sum by (namespace, {}) (…)`); `podLabel` names the label the pods' name is stored under",
                        self.pod_label,
                        labels_text(&sample.metric),
                        self.pod_label
                    ),
                ));
            };
            Ok(match sample.metric.get("namespace") {
                Some(ns) if self.pod_label != "namespace" => format!("{ns}/{pod}"),
                _ => pod.clone(),
            })
        };
        let per_pod =
            |samples: &[Sample], query: &str| -> Result<BTreeMap<String, Vec<f64>>, SourceError> {
                let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
                for s in samples {
                    out.entry(key_of(s, query)?).or_default().push(s.value);
                }
                Ok(out)
            };
        let waiting = per_pod(&answers.waiting, &self.waiting)?;
        let running = match (&answers.running, &self.running) {
            (Some(samples), Some(q)) => Some(per_pod(samples, q)?),
            _ => None,
        };
        let finished = per_pod(&answers.finished, &self.finished)?;
        // Not in `names`: a pod only the token queries name is no pod.
        let tokens = |samples: &Option<Vec<Sample>>, q: &Option<String>| match (samples, q) {
            (Some(samples), Some(q)) => per_pod(samples, q).ok(),
            _ => None,
        };
        let generated = tokens(&answers.generation_tokens, &self.generation_tokens);
        let prompt = tokens(&answers.prompt_tokens, &self.prompt_tokens);
        let kv = match (&answers.kv_cache, &self.kv_cache) {
            (Some(samples), Some(q)) => Some(per_pod(samples, q)?),
            _ => None,
        };
        let mut ttft: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        if let (Some(samples), Some(q)) = (&answers.ttft, &self.ttft) {
            let scale = engine.metrics().ttft.map_or(1.0, |h| h.to_seconds);
            for s in samples {
                let bound = s.metric.get("le").and_then(|le| parse_bound(le));
                let Some(bound) = bound else { continue };
                ttft.entry(key_of(s, q)?)
                    .or_default()
                    .push((bound * scale, s.value));
            }
        }

        let mut names: Vec<&String> = waiting
            .keys()
            .chain(running.iter().flat_map(|r| r.keys()))
            .chain(finished.keys())
            .chain(kv.iter().flat_map(|k| k.keys()))
            .collect();
        names.sort();
        names.dedup();
        let mut pods = Vec::new();
        let mut failed = Vec::new();
        let fail = |pod: &str, detail: String| PodFailure {
            target: pod.to_owned(),
            error: SourceError::parse(pod, detail),
        };
        for name in names {
            let Some(w) = waiting.get(name) else {
                failed.push(fail(
                    name,
                    format!("no series in `{}` (not scraped, or stale)", self.waiting),
                ));
                continue;
            };
            let Some(w) = count(w) else {
                failed.push(fail(name, format!("waiting is {w:?}, not a count")));
                continue;
            };
            let r = match &running {
                None => None,
                Some(running) => match running.get(name).map(|r| count(r)) {
                    Some(Some(r)) => Some(r),
                    Some(None) => {
                        failed.push(fail(name, "running is not a count".to_owned()));
                        continue;
                    }
                    None => {
                        failed.push(fail(
                            name,
                            format!(
                                "no series in `{}` (not scraped, or stale)",
                                self.running.as_deref().unwrap_or_default()
                            ),
                        ));
                        continue;
                    }
                },
            };
            let kv_cache_usage = kv
                .as_ref()
                .and_then(|kv| kv.get(name))
                .and_then(|v| mean(v));
            if let Some(kv) = kv_cache_usage.filter(|kv| *kv > 1.0) {
                failed.push(fail(
                    name,
                    format!(
                        "KV-cache usage {kv} in `{}` is not a fraction from 0 to 1 (a percentage must be divided by 100)",
                        self.kv_cache.as_deref().unwrap_or_default()
                    ),
                ));
                continue;
            }
            let finished_total = finished.get(name).and_then(|f| count(f));
            let token_total = |by_pod: &Option<BTreeMap<String, Vec<f64>>>| {
                by_pod
                    .as_ref()
                    .and_then(|t| t.get(name))
                    .and_then(|t| count(t))
            };
            let ttft = ttft.remove(name.as_str()).and_then(buckets);
            let pod = PodReading {
                target: name.clone(),
                waiting: w,
                running: r,
                kv_cache_usage,
                read: SeriesRead {
                    waiting: "PromQL podWaitingQuery".to_owned(),
                    running: r.map(|_| "PromQL podRunningQuery".to_owned()),
                    kv_cache_usage: kv_cache_usage.map(|_| "PromQL podKvCacheQuery".to_owned()),
                    ttft: ttft
                        .as_ref()
                        .map(|_| "PromQL TTFT buckets by pod".to_owned()),
                    finished_total: finished_total.map(|_| "PromQL podFinishedQuery".to_owned()),
                },
                ttft,
                finished_total,
                generation_tokens_total: token_total(&generated),
                prompt_tokens_total: token_total(&prompt),
            };
            if let Some(missing) = pod.lacks(requires) {
                let query = match missing {
                    Missing::Running => self.running.as_deref(),
                    Missing::KvCache => self.kv_cache.as_deref(),
                    Missing::Finished => Some(self.finished.as_str()),
                };
                let detail = match query {
                    Some(q) => format!(
                        "{missing}: no valid series in `{q}` (not scraped, stale, or not a number ≥ 0)"
                    ),
                    None => format!("{missing}: engine `{engine}` has no query for it"),
                };
                failed.push(fail(name, detail));
                continue;
            }
            pods.push(pod);
        }
        if pods.is_empty() {
            return Err(match failed.first() {
                Some(first) => first.error.clone(),
                None => SourceError::parse(
                    &label,
                    format!(
                        "no pod in `{}`: Prometheus has no such series (no pods, or none scraped; a lost target is not zero work)",
                        self.waiting
                    ),
                ),
            });
        }
        Ok(PodsRead {
            reading: EngineReading {
                engine,
                pods,
                malformed_lines: 0,
                empty_discovery: Vec::new(),
            },
            failed,
        })
    }
}

/// A pod's series summed, if every one is a finite, non-negative count.
fn count(values: &[f64]) -> Option<f64> {
    values.iter().try_fold(0.0, |sum, v| {
        (v.is_finite() && *v >= 0.0).then_some(sum + v)
    })
}

/// A pod's series averaged (several engines of one pod), if all are valid.
fn mean(values: &[f64]) -> Option<f64> {
    count(values).map(|sum| sum / values.len() as f64)
}

fn parse_bound(le: &str) -> Option<f64> {
    match le {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        other => other.parse::<f64>().ok().filter(|v| v.is_finite()),
    }
}

/// One pod's `(bound, cumulative count)` pairs as [`Buckets`]: sorted,
/// ending at `+Inf`, every count finite and none below the one before;
/// otherwise no histogram for this pod (the guard then has no data from it).
fn buckets(mut pairs: Vec<(f64, f64)>) -> Option<Buckets> {
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    pairs.dedup_by(|b, a| a.0 == b.0);
    let valid = pairs.last().is_some_and(|(b, _)| b.is_infinite())
        && pairs.iter().all(|(_, c)| c.is_finite() && *c >= 0.0)
        && pairs.windows(2).all(|w| w[0].1 <= w[1].1);
    valid.then(|| {
        let (bounds, counts) = pairs.into_iter().unzip();
        Buckets { bounds, counts }
    })
}

fn labels_text(metric: &BTreeMap<String, String>) -> String {
    let inner: Vec<String> = metric.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{{{}}}", inner.join(","))
}

#[cfg(test)]
mod tests;
