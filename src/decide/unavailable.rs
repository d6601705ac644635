//! Why a trigger's number cannot be given: one typed reason, carried from
//! the evaluation to the `UNAVAILABLE` gRPC message and `/explain`.
//!
//! The Display text is the contract (operators read it, KEDA logs it, the
//! tests compare it); the variants let code ask what went wrong without
//! parsing that text.

use std::time::Duration;

use crate::guard::redact::redact;
use crate::source::{Engine, SourceError, SourceSpec};

/// The largest `B` handed to KEDA: far above any real fleet's backlog, and below where KEDA
/// v2.17–v2.19's `int64(value × 1000)` overflows (~9.2e15).
pub const MAX_METRIC_VALUE: f64 = 1e15;

/// Why a trigger cannot be measured now; KEDA's fallback applies.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Unavailable {
    /// A pending evaluation was asked for its decision: no source has
    /// answered yet.
    #[error("no reading from any source yet")]
    NoReadingYet,
    /// The first call for a new trigger waited its whole cold-start budget
    /// and no source answered.
    #[error(
        "no reading yet: the first poll of {} has not finished within the {} ms cold-start budget; polling continues",
        join(.sources, ", "),
        .budget.as_millis()
    )]
    ColdStart {
        /// Every source of the trigger.
        sources: Vec<SourceSpec>,
        /// The budget that passed.
        budget: Duration,
    },
    /// The reading behind a ready decision passed `maxSignalAgeSeconds`
    /// after it was evaluated.
    #[error("the last good reading has passed maxSignalAgeSeconds")]
    Expired,
    /// A source has failed every poll so far.
    #[error(
        "{label}: no successful reading yet ({failed_polls} failed polls; last error: {})",
        or_empty(.last_error)
    )]
    NeverRead {
        /// The source's label.
        label: String,
        /// Failed polls in a row.
        failed_polls: u32,
        /// The newest failure, if one is recorded.
        last_error: Option<SourceError>,
    },
    /// A source's last good reading is older than `maxSignalAgeSeconds`.
    #[error(
        "{label}: last good reading is {}s old, past maxSignalAgeSeconds={} ({failed_polls} failed polls; last error: {})",
        .age.as_secs(),
        .max_age.as_secs(),
        or_empty(.last_error)
    )]
    TooOld {
        /// The source's label.
        label: String,
        /// Age of the last good reading.
        age: Duration,
        /// The trigger's `maxSignalAgeSeconds`.
        max_age: Duration,
        /// Failed polls in a row.
        failed_polls: u32,
        /// The newest failure, if one is recorded.
        last_error: Option<SourceError>,
    },
    /// The trigger reads nothing.
    #[error("the trigger has no sources")]
    NoSources,
    /// A source the trigger needs has no fresh reading of the expected kind.
    #[error("{label}: no reading")]
    NoReading {
        /// The source's label.
        label: String,
    },
    /// The engine's DNS names resolve to nothing and no broker says how much
    /// work waits: a lost signal, not zero pods.
    #[error(
        "{}: the DNS name has no addresses (NXDOMAIN or no records); without a broker source that is a lost signal, not zero pods (a misspelled Service answers the same)",
        join(.names, ", ")
    )]
    NoAddresses {
        /// The discovery names that resolved to nothing.
        names: Vec<String>,
    },
    /// dcgm-exporter reports no GPU of the engine pods while some report.
    #[error(
        "{label}: no GPU matched while {engine_pods} engine pods report; check podSelectorRegex and namespace"
    )]
    NoGpuMatched {
        /// The dcgm source's label.
        label: String,
        /// Engine pods reporting.
        engine_pods: usize,
    },
    /// A pod lacks the running-requests gauge `runningPerReplica` needs.
    /// A polled reading never does (the source fails that pod when it
    /// parses it): only a reading built elsewhere.
    #[error("{pod}: no running-requests gauge (runningPerReplica is set)")]
    NoRunningGauge {
        /// The pod's scrape target.
        pod: String,
    },
    /// A pod lacks the KV-cache gauge `kvCacheTarget` needs; as
    /// [`Unavailable::NoRunningGauge`], only for a reading built elsewhere.
    #[error("{pod}: no KV-cache usage gauge (kvCacheTarget is set)")]
    NoKvCacheGauge {
        /// The pod's scrape target.
        pod: String,
    },
    /// A pod lacks the finished-requests counter the capacity policy needs;
    /// as [`Unavailable::NoRunningGauge`], only for a reading built elsewhere.
    #[error(
        "{pod}: no finished-requests counter ({}), which policy capacity needs",
        .engine.metrics().finished.join(" / ")
    )]
    NoFinishedCounter {
        /// The pod's scrape target.
        pod: String,
        /// Its engine, which names the counters looked for.
        engine: Engine,
    },
    /// A PromQL signal's answer cannot be read as that signal.
    // The query is shown redacted: a matcher such as `token="…"` is
    // credential-shaped, and this text reaches KEDA's events and the logs.
    #[error("{key} `{}` {problem}", redact(query))]
    Query {
        /// The metadata key of the query (`waitingQuery`, `replicasQuery`, …).
        key: &'static str,
        /// The PromQL.
        query: String,
        /// What is wrong with its answer.
        problem: QueryProblem,
    },
    /// Fewer than `minReportingFraction` of the discovered pods report.
    #[error(
        "{label}: {reporting} of {discovered} discovered pods report, below minReportingFraction={min_fraction}; left out: {}",
        join(.left_out, "; ")
    )]
    BelowQuorum {
        /// The source's label.
        label: String,
        /// Pods that answered or are held.
        reporting: usize,
        /// Pods discovered.
        discovered: usize,
        /// The trigger's `minReportingFraction`.
        min_fraction: f64,
        /// Each left-out pod's error and failed polls.
        left_out: Vec<String>,
    },
    /// The signals add up to a backlog above [`MAX_METRIC_VALUE`] or infinite: a source
    /// reports numbers beyond any real fleet (a gauge of `1e308`). KEDA cannot carry it (it
    /// reads infinity as 0; before v2.20 it multiplied the value by 1000 into an int64, which
    /// overflows above ~9.2e15), so it is a lost signal, not a number to hand on.
    #[error(
        "the signals add up to B = {backlog}, more than KEDA can carry (at most 1e15; infinity reads as 0, and before v2.20 a value over ~9.2e15 overflows): a source reports numbers beyond any real fleet"
    )]
    Unrepresentable {
        /// The fused value.
        backlog: f64,
    },
    /// More than one source is lost (never a list of one).
    #[error("{}", join(.0, "; "))]
    Several(Vec<Unavailable>),
}

/// What is wrong with a PromQL answer given the other queries' answers
/// (the rules of docs/decisions/0006). An answer wrong on its own (several
/// series, a value that is no count) fails the query's reading instead
/// (`source::prometheus::AnswerProblem`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueryProblem {
    /// No series while `replicasQuery` does not answer an explicit 0.
    #[error(
        "returned no series and replicasQuery does not say 0 replicas are up: a lost target is not zero work"
    )]
    Empty,
    /// `replicasQuery` returned nothing and a guard needs the replica count.
    #[error(
        "returned no series; the replica count is needed by the latency, KV-cache and GPU guards"
    )]
    NoReplicaCount,
}

impl Unavailable {
    /// One reason for a list of lost sources: the single one, or
    /// [`Unavailable::Several`]. `None` when the list is empty.
    pub fn from_problems(mut problems: Vec<Unavailable>) -> Option<Unavailable> {
        match problems.len() {
            0 => None,
            1 => problems.pop(),
            _ => Some(Unavailable::Several(problems)),
        }
    }
}

fn join<T: ToString>(items: &[T], separator: &str) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(separator)
}

fn or_empty(error: &Option<SourceError>) -> String {
    error.as_ref().map(ToString::to_string).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each variant's text, byte for byte what the String reasons said.
    #[test]
    fn display_keeps_the_operator_facing_text() {
        let cases: Vec<(Unavailable, &str)> = vec![
            (Unavailable::NoReadingYet, "no reading from any source yet"),
            (
                Unavailable::Expired,
                "the last good reading has passed maxSignalAgeSeconds",
            ),
            (Unavailable::NoSources, "the trigger has no sources"),
            (
                Unavailable::NeverRead {
                    label: "vllm a".into(),
                    failed_polls: 3,
                    last_error: Some(SourceError::timeout(Duration::from_secs(2))),
                },
                "vllm a: no successful reading yet (3 failed polls; last error: timed out after 2s)",
            ),
            (
                Unavailable::TooOld {
                    label: "vllm a".into(),
                    age: Duration::from_millis(16_900),
                    max_age: Duration::from_secs(15),
                    failed_polls: 0,
                    last_error: None,
                },
                "vllm a: last good reading is 16s old, past maxSignalAgeSeconds=15 (0 failed polls; last error: )",
            ),
            (
                Unavailable::NoFinishedCounter {
                    pod: "p".into(),
                    engine: Engine::Vllm,
                },
                "p: no finished-requests counter (vllm:request_success_total), which policy capacity needs",
            ),
            (
                Unavailable::Query {
                    key: "waitingQuery",
                    query: "sum(w)".into(),
                    problem: QueryProblem::Empty,
                },
                "waitingQuery `sum(w)` returned no series and replicasQuery does not say 0 replicas are up: a lost target is not zero work",
            ),
        ];
        for (reason, text) in cases {
            assert_eq!(reason.to_string(), text, "{reason:?}");
        }
    }

    #[test]
    fn several_problems_join_with_semicolons_and_one_stays_itself() {
        let one = Unavailable::NoReading { label: "a".into() };
        assert_eq!(Unavailable::from_problems(vec![]), None);
        assert_eq!(
            Unavailable::from_problems(vec![one.clone()]),
            Some(one.clone())
        );
        let two =
            Unavailable::from_problems(vec![one, Unavailable::NoReading { label: "b".into() }])
                .expect("two");
        assert!(matches!(&two, Unavailable::Several(list) if list.len() == 2));
        assert_eq!(two.to_string(), "a: no reading; b: no reading");
    }

    #[test]
    fn a_query_is_shown_with_its_credential_shaped_matchers_redacted() {
        let reason = Unavailable::Query {
            key: "waitingQuery",
            query: r#"sum(w{token="S3CRET"})"#.into(),
            problem: QueryProblem::Empty,
        };
        let text = reason.to_string();
        assert!(!text.contains("S3CRET"), "{text}");
        assert!(
            text.starts_with("waitingQuery `sum(w{token=\"[redacted]\"})`"),
            "{text}"
        );
    }
}
