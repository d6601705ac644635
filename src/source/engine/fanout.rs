//! One engine reading pod by pod: every discovered pod is scraped and parsed
//! on its own, within one deadline, so one pod that hangs, answers garbage
//! or an error status does not take its neighbours' answers down with it.
//!
//! What to do with a pod that failed (hold its last good reading, leave it
//! out, or give up below the quorum) is not decided here: this reader only
//! reports which pods answered and how each of the others failed
//! (docs/decisions/0002).

use std::time::Duration;

use reqwest::Url;
use tokio::task::JoinSet;

use super::pod::{EngineReading, EngineSource};
use crate::guard::redact::redact;
use crate::source::context::SourceContext;
use crate::source::error::{FailureKind, SourceError};
use crate::source::http::HttpScraper;

/// How long each pod's GET may take in one reading, and the deadline a pod
/// that outlasts it is said to have missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodDeadline {
    /// What this reading gives each pod: the caller's time left, less a
    /// margin, so a pod that hangs fails on its own before the reading does.
    pub bound: Duration,
    /// The per-pod deadline as the caller configured it, named in the
    /// error. Not `bound`: the time left differs by a few milliseconds from
    /// poll to poll, and a pod that hangs must fail with the same text on
    /// every poll, or each poll reads as a new failure to whoever compares
    /// them (the logs).
    pub configured: Duration,
}

/// A deadline that is both the bound and the one named: for a caller with
/// one fixed bound per reading (a benchmark, a probe).
impl From<Duration> for PodDeadline {
    fn from(deadline: Duration) -> PodDeadline {
        PodDeadline {
            bound: deadline,
            configured: deadline,
        }
    }
}

impl PodDeadline {
    /// The error of a pod at `url` that gave no answer within the deadline.
    pub fn missed(&self, url: &str) -> SourceError {
        SourceError::new(
            FailureKind::Timeout,
            url,
            format!("no answer within {}", rounded(self.configured)),
        )
    }
}

/// A duration as people write it: whole milliseconds below a second,
/// else seconds to a tenth (`720 ms`, `3.6 s`, `9 s`).
fn rounded(duration: Duration) -> String {
    let millis = duration.as_secs_f64() * 1000.0;
    if millis < 999.5 {
        return format!("{} ms", millis.round());
    }
    let tenths = (duration.as_secs_f64() * 10.0).round();
    if tenths % 10.0 == 0.0 {
        format!("{} s", tenths / 10.0)
    } else {
        format!("{:.1} s", tenths / 10.0)
    }
}

/// GET one pod's body within `deadline`: the pod as readings name it
/// (redacted) and its body. Spawnable (owns its inputs), so a poll reads
/// its pods concurrently; the caller parses the body.
pub async fn get_pod(
    http: HttpScraper,
    url: Url,
    deadline: PodDeadline,
) -> (String, Result<String, SourceError>) {
    let shown = redact(url.as_str());
    let body = match tokio::time::timeout(deadline.bound, http.get_text(&url)).await {
        Ok(body) => body,
        Err(_) => Err(deadline.missed(url.as_str())),
    };
    (shown, body)
}

/// A discovered pod that gave no reading this poll.
#[derive(Debug, Clone, PartialEq)]
pub struct PodFailure {
    /// The URL scraped, as readings name the pod (credential-shaped parts
    /// redacted).
    pub target: String,
    /// Why.
    pub error: SourceError,
}

/// One poll of every discovered pod: the pods that answered, and the others.
#[derive(Debug, Clone, PartialEq)]
pub struct PodsRead {
    /// The pods that answered, sorted by target; `malformed_lines` and
    /// `empty_discovery` as [`EngineSource::read`] reports them.
    pub reading: EngineReading,
    /// The discovered pods that did not, sorted by target.
    pub failed: Vec<PodFailure>,
}

impl EngineSource {
    /// Resolve the targets, then scrape and parse every pod concurrently,
    /// each within `per_pod.bound` (the caller's deadline for the whole
    /// reading, less what resolution may take; a pod that outlasts it fails
    /// naming `per_pod.configured`). A failed resolution fails the reading
    /// (which pods it would have named is unknown); so does a poll in which
    /// every discovered pod failed, with the first pod's error, so that an
    /// outage reads exactly as a failed source.
    pub async fn read_pods(
        &self,
        ctx: &SourceContext,
        per_pod: impl Into<PodDeadline>,
    ) -> Result<PodsRead, SourceError> {
        let per_pod = per_pod.into();
        if let Some(q) = &self.prometheus {
            // One answer per query names every pod: the poll's own
            // deadline bounds it.
            return q.read_pods(self.engine, self.requires, ctx).await;
        }
        let mut urls = Vec::new();
        let mut empty_discovery = Vec::new();
        for target in &self.targets {
            let found = target.resolve_checked(ctx.http.outbound()).await?;
            if found.is_empty() {
                empty_discovery.push(target.to_string());
            }
            urls.extend(found);
        }
        urls.sort();
        urls.dedup();
        let mut scrapes = JoinSet::new();
        for url in urls {
            scrapes.spawn(get_pod(ctx.http.clone(), url, per_pod));
        }
        let mut pods = Vec::new();
        let mut failed = Vec::new();
        let mut malformed_lines = 0;
        while let Some(joined) = scrapes.join_next().await {
            let (target, body) = match joined {
                Ok(scraped) => scraped,
                // A scrape task that panicked names no pod; the reading as
                // a whole is then not trustworthy.
                Err(join_error) => {
                    return Err(SourceError::new(
                        FailureKind::Internal,
                        self.label(),
                        format!("scrape task failed: {join_error}"),
                    ));
                }
            };
            match body.and_then(|body| self.parse_pod(&target, &body)) {
                Ok((pod, malformed)) => {
                    pods.push(pod);
                    malformed_lines += malformed;
                }
                Err(error) => failed.push(PodFailure { target, error }),
            }
        }
        pods.sort_by(|a, b| a.target.cmp(&b.target));
        failed.sort_by(|a, b| a.target.cmp(&b.target));
        if pods.is_empty()
            && let Some(first) = failed.first()
        {
            return Err(first.error.clone());
        }
        Ok(PodsRead {
            reading: EngineReading {
                engine: self.engine,
                pods,
                malformed_lines,
                empty_discovery,
            },
            failed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missed_deadline_names_the_configured_one_rounded() {
        let at = |configured: Duration, bound: Duration| {
            PodDeadline { bound, configured }
                .missed("http://10.0.0.1:8000/metrics")
                .to_string()
        };
        // The time left varies from poll to poll; the text does not.
        let first = at(Duration::from_millis(720), Duration::from_micros(719_999));
        let second = at(Duration::from_millis(720), Duration::from_micros(702_481));
        assert_eq!(first, second);
        assert_eq!(
            first,
            "http://10.0.0.1:8000/metrics: no answer within 720 ms"
        );
        for (configured, text) in [
            (Duration::from_secs(4).mul_f64(0.9), "3.6 s"),
            (Duration::from_secs(9), "9 s"),
            (Duration::from_micros(999_700), "1 s"),
            (Duration::from_millis(1_250), "1.3 s"),
            (Duration::from_micros(100_400), "100 ms"),
        ] {
            assert_eq!(rounded(configured), text, "{configured:?}");
        }
        let error = PodDeadline {
            bound: Duration::from_millis(1),
            configured: Duration::from_millis(1),
        }
        .missed("u");
        assert_eq!(error.kind(), FailureKind::Timeout);
    }
}
