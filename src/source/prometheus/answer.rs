//! A query's answer ([`SeriesValue`]s), and what it must be to count as a
//! reading of the signal it feeds (docs/decisions/0006): set by `trigger/` with the query, checked
//! when the answer is read, so an answer that is no count (NaN, negative,
//! infinite) or has several series where one is meant is a failed poll
//! (`parse_error`, logged, held until `maxSignalAgeSeconds`) as the same
//! value in a pod's exposition is, never a reading the poller counts `ok`.
//!
//! What an *empty* answer means is not decided here: it depends on another
//! query's answer (`replicasQuery` saying 0), so the evaluation decides it.

use serde::Serialize;

/// One series of a query result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeriesValue {
    /// The series' labels, `{a="b",…}`, for explanations.
    pub labels: String,
    /// Its value (may be NaN, e.g. `histogram_quantile` over no requests).
    #[serde(serialize_with = "serialize_value")]
    pub value: f64,
}

fn serialize_value<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_str(&v.to_string())
    }
}

/// The shape of answer a query must give, with the metadata key that names
/// the query in errors (`waitingQuery`, …). Part of the query's identity:
/// one PromQL text feeding two signals is read as each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answer {
    /// Any series, any values: a per-pod query, whose reading checks each
    /// pod's values itself.
    Raw,
    /// Summed series (`W`, `R`): any number, each a count (finite, ≥ 0).
    Summed(&'static str),
    /// At most one series, a finite value ≥ 0 (GPU utilisation).
    Value(&'static str),
    /// At most one series, a fraction 0–1 (KV-cache usage: every engine reports a fraction,
    /// whatever `_perc` says; a percentage would scale on 85 for 85 %).
    Fraction(&'static str),
    /// At most one series, a count (the replica count).
    Count(&'static str),
    /// At most one series, any value: a quantile over a window is NaN when
    /// the window had no requests, which is "no samples", not an error.
    Quantile(&'static str),
}

/// What is wrong with an answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnswerProblem {
    /// A single-series signal returned this many series.
    #[error("returned {0} series; it must return one")]
    Several(usize),
    /// The count is negative or not finite.
    #[error("returned {0}, not a count")]
    NotACount(f64),
    /// A summed signal has a series that is negative or not finite.
    #[error("returned {value} for {series}, not a count")]
    SeriesNotACount {
        /// The value.
        value: f64,
        /// The series' labels.
        series: String,
    },
    /// A single value is negative or not finite.
    #[error("returned {0}")]
    Invalid(f64),
    /// A fraction outside 0–1.
    #[error("returned {0}, not a fraction from 0 to 1 (a percentage must be divided by 100)")]
    NotAFraction(f64),
}

impl Answer {
    /// The metadata key naming the query, if it feeds one signal.
    pub fn key(self) -> Option<&'static str> {
        match self {
            Answer::Raw => None,
            Answer::Summed(key)
            | Answer::Value(key)
            | Answer::Fraction(key)
            | Answer::Count(key)
            | Answer::Quantile(key) => Some(key),
        }
    }

    /// Whether `series` is an answer of this shape; an empty one always is.
    pub fn check(self, series: &[SeriesValue]) -> Result<(), AnswerProblem> {
        let count = |v: f64| v.is_finite() && v >= 0.0;
        match (self, series) {
            (Answer::Raw, _) | (_, []) => Ok(()),
            (Answer::Summed(_), series) => match series.iter().find(|s| !count(s.value)) {
                Some(bad) => Err(AnswerProblem::SeriesNotACount {
                    value: bad.value,
                    series: bad.labels.clone(),
                }),
                None => Ok(()),
            },
            (
                Answer::Value(_) | Answer::Fraction(_) | Answer::Count(_) | Answer::Quantile(_),
                [_, _, ..],
            ) => Err(AnswerProblem::Several(series.len())),
            (Answer::Fraction(_), [one]) if !(0.0..=1.0).contains(&one.value) => {
                Err(AnswerProblem::NotAFraction(one.value))
            }
            (Answer::Value(_), [one]) if !count(one.value) => {
                Err(AnswerProblem::Invalid(one.value))
            }
            (Answer::Count(_), [one]) if !count(one.value) => {
                Err(AnswerProblem::NotACount(one.value))
            }
            (
                Answer::Value(_) | Answer::Fraction(_) | Answer::Count(_) | Answer::Quantile(_),
                [_],
            ) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(values: &[f64]) -> Vec<SeriesValue> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| SeriesValue {
                labels: format!("{{pod=\"p{i}\"}}"),
                value: *v,
            })
            .collect()
    }

    #[test]
    fn each_shape_refuses_what_its_signal_cannot_be() {
        let summed = Answer::Summed("waitingQuery");
        let value = Answer::Value("gpuUtilQuery");
        let fraction = Answer::Fraction("kvCacheQuery");
        let count = Answer::Count("replicasQuery");
        let quantile = Answer::Quantile("ttftQuery");
        let (nan, inf) = (f64::NAN, f64::INFINITY);
        // (shape, values, the problem's text or "" for none)
        let rows: Vec<(Answer, Vec<f64>, &str)> = vec![
            (summed, vec![], ""),
            (summed, vec![1.0, 2.0, 0.0], ""),
            (
                summed,
                vec![nan],
                "returned NaN for {pod=\"p0\"}, not a count",
            ),
            (
                summed,
                vec![1.0, -1.0],
                "returned -1 for {pod=\"p1\"}, not a count",
            ),
            (
                summed,
                vec![inf],
                "returned inf for {pod=\"p0\"}, not a count",
            ),
            (value, vec![], ""),
            (value, vec![0.5], ""),
            (
                value,
                vec![0.5, 0.7],
                "returned 2 series; it must return one",
            ),
            (value, vec![nan], "returned NaN"),
            (value, vec![-0.5], "returned -0.5"),
            (value, vec![85.0], ""),
            (fraction, vec![0.0], ""),
            (fraction, vec![1.0], ""),
            (
                fraction,
                vec![85.0],
                "returned 85, not a fraction from 0 to 1 (a percentage must be divided by 100)",
            ),
            (
                fraction,
                vec![nan],
                "returned NaN, not a fraction from 0 to 1 (a percentage must be divided by 100)",
            ),
            (
                fraction,
                vec![0.5, 0.7],
                "returned 2 series; it must return one",
            ),
            (count, vec![3.0], ""),
            (count, vec![nan], "returned NaN, not a count"),
            (count, vec![-inf], "returned -inf, not a count"),
            (
                count,
                vec![1.0, 2.0],
                "returned 2 series; it must return one",
            ),
            // No requests in the window: NaN is "no samples".
            (quantile, vec![nan], ""),
            (
                quantile,
                vec![0.2, 0.3],
                "returned 2 series; it must return one",
            ),
            (Answer::Raw, vec![nan, -1.0, 3.0], ""),
        ];
        for (answer, values, text) in rows {
            let got = answer.check(&series(&values));
            let got = got.err().map(|p| p.to_string()).unwrap_or_default();
            assert_eq!(got, text, "{answer:?} {values:?}");
        }
        assert_eq!(summed.key(), Some("waitingQuery"));
        assert_eq!(Answer::Raw.key(), None);
    }
}
