//! The Prometheus source: one PromQL instant query per source.
//!
//! Each query is its own source (and poller), keyed by server, query text,
//! credentials profile and the answer its signal needs, so a thousand
//! ScaledObjects sharing a query cost one upstream query per interval. An
//! answer that cannot be its signal (several series where one is meant, a
//! value that is no count) fails the reading ([`answer`]); how an empty
//! result is read (zero only when the replica count says no pods are up)
//! is the evaluation's job, because it depends on another query's answer.
//!
//! | file | job |
//! |---|---|
//! | this one | one query, its response parsed |
//! | [`answer`] | the shape of answer each signal needs |
//! | [`defaults`] | the default queries from the engine's metric names |
//! | [`pods`] | the per-pod queries of the `capacity` policy, read into the same [`EngineReading`](crate::source::EngineReading) a scrape gives |

use std::collections::BTreeMap;
use std::fmt;

use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::context::SourceContext;
use super::error::{FailureKind, SourceError};
use crate::guard::redact::redact;

pub mod answer;
mod defaults;
mod pod_queries;
pub mod pods;
#[cfg(test)]
mod tests;

pub use answer::{Answer, AnswerProblem, SeriesValue};
pub use defaults::{DefaultQueries, promql_string};
pub use pod_queries::PodQueries;

/// Identity of one PromQL query.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PromQuery {
    /// Base URL of the Prometheus API (`prometheusAddress` / `serverAddress`).
    pub address: Url,
    /// The PromQL expression.
    pub query: String,
    /// Scaler-side credentials profile for this server (`authProfile`).
    pub auth_profile: Option<String>,
    /// The answer the query's signal needs; another answer fails the
    /// reading.
    pub answer: Answer,
}

/// The result of one query.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryReading {
    /// The query, for explanations; shown redacted (`/explain` serves it, and a matcher such
    /// as `a="Bearer …"` is credential-shaped).
    #[serde(serialize_with = "serialize_redacted")]
    pub query: String,
    /// Every series returned (an empty vector is a valid answer).
    pub series: Vec<SeriesValue>,
}

fn serialize_redacted<S: serde::Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact(text))
}

impl fmt::Display for PromQuery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

#[derive(Deserialize)]
struct ApiResponse {
    status: String,
    #[serde(default)]
    data: Option<ApiData>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApiData {
    result_type: String,
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct VectorSample {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

/// One series of a result with its labels as a map (the per-pod reading
/// needs the pod label's value, not only the text `/explain` shows).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series' labels (none for a scalar).
    pub metric: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

fn parse_value(raw: &str) -> Option<f64> {
    match raw {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        other => other.parse().ok(),
    }
}

impl PromQuery {
    /// A short label: server and query, credential-shaped parts redacted
    /// (`prometheusAddress` may carry an `access_token` parameter).
    pub fn label(&self) -> String {
        redact(&format!("prometheus {} {}", self.address, self.query))
    }

    /// Run the instant query once; an answer its signal cannot read
    /// ([`Answer`]) is a parse error.
    pub async fn read(&self, ctx: &SourceContext) -> Result<QueryReading, SourceError> {
        let body = self.fetch(ctx).await?;
        let reading = self.parse_response(&body)?;
        self.check(&reading)?;
        Ok(reading)
    }

    /// Refuse a reading that is not the answer this query's signal needs,
    /// naming the key, the query and what is wrong, e.g. ``waitingQuery
    /// `sum(w)` returned NaN for {}, not a count``.
    pub fn check(&self, reading: &QueryReading) -> Result<(), SourceError> {
        self.answer.check(&reading.series).map_err(|problem| {
            let key = self.answer.key().unwrap_or("query");
            // The query is redacted (as the label is): a matcher such as
            // `token="…"` is credential-shaped.
            SourceError::parse(
                self.label(),
                format!("{key} `{}` {problem}", redact(&self.query)),
            )
        })
    }

    /// Run the instant query once, its samples with their label maps.
    pub async fn read_samples(&self, ctx: &SourceContext) -> Result<Vec<Sample>, SourceError> {
        let body = self.fetch(ctx).await?;
        self.parse_samples(&body)
    }

    async fn fetch(&self, ctx: &SourceContext) -> Result<String, SourceError> {
        let mut url = self.address.clone();
        let path = format!("{}/api/v1/query", url.path().trim_end_matches('/'));
        url.set_path(&path);
        url.query_pairs_mut().append_pair("query", &self.query);
        // The profile's credentials as their files hold them now (a rotated
        // token is sent from the first query after it was written).
        let auth = ctx
            .prometheus_auth(self.auth_profile.as_deref())
            .map_err(|e| SourceError::new(FailureKind::Config, self.label(), e.to_string()))?;
        let body = ctx
            .http
            .get_text_with(&url, auth.as_deref())
            .await
            .map_err(|e| self.name_query(e))?;
        Ok(body)
    }

    /// Errors name the query, since several queries share one server.
    fn name_query(&self, error: SourceError) -> SourceError {
        match error.target() {
            Some(_) => SourceError::new(error.kind(), self.label(), error.detail()),
            None => error,
        }
    }

    /// Parse an `/api/v1/query` response body.
    pub fn parse_response(&self, body: &str) -> Result<QueryReading, SourceError> {
        let series = self
            .parse_samples(body)?
            .into_iter()
            .map(|s| {
                let labels = s
                    .metric
                    .iter()
                    .map(|(k, v)| format!("{k}={v:?}"))
                    .collect::<Vec<_>>()
                    .join(",");
                SeriesValue {
                    labels: format!("{{{labels}}}"),
                    value: s.value,
                }
            })
            .collect();
        Ok(QueryReading {
            query: self.query.clone(),
            series,
        })
    }

    /// Parse an `/api/v1/query` response body into its samples: a vector's
    /// series, or a scalar as one series without labels. (The timestamp of
    /// an instant query's sample is the evaluation time, not when the value
    /// was scraped, so it is not kept.)
    pub fn parse_samples(&self, body: &str) -> Result<Vec<Sample>, SourceError> {
        let parse_error = |reason: String| SourceError::parse(self.label(), reason);
        let response: ApiResponse = serde_json::from_str(body)
            .map_err(|e| parse_error(format!("not a Prometheus API response: {e}")))?;
        if response.status != "success" {
            // Prometheus sends its errors with a 4xx/5xx status, which the
            // GET already reports; this is a 200 that says "error".
            return Err(SourceError::new(
                FailureKind::Rejected,
                self.label(),
                format!(
                    "query failed: {} {}",
                    response.error_type.unwrap_or_default(),
                    response.error.unwrap_or_default()
                ),
            ));
        }
        let data = response
            .data
            .ok_or_else(|| parse_error("response has no data".to_owned()))?;
        match data.result_type.as_str() {
            "vector" => {
                let samples: Vec<VectorSample> = serde_json::from_value(data.result)
                    .map_err(|e| parse_error(format!("bad vector result: {e}")))?;
                samples
                    .into_iter()
                    .map(|s| {
                        let value = parse_value(&s.value.1).ok_or_else(|| {
                            parse_error(format!("value `{}` is not a number", s.value.1))
                        })?;
                        Ok(Sample {
                            metric: s.metric,
                            value,
                        })
                    })
                    .collect()
            }
            "scalar" => {
                let (_, raw): (f64, String) = serde_json::from_value(data.result)
                    .map_err(|e| parse_error(format!("bad scalar result: {e}")))?;
                let value = parse_value(&raw)
                    .ok_or_else(|| parse_error(format!("value `{raw}` is not a number")))?;
                Ok(vec![Sample {
                    metric: BTreeMap::new(),
                    value,
                }])
            }
            other => Err(parse_error(format!(
                "result type `{other}`; the query must return an instant vector or a scalar"
            ))),
        }
    }
}
