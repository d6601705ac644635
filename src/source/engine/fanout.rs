//! One engine reading pod by pod: every discovered pod is scraped and parsed
//! on its own, within one deadline, so one pod that hangs, answers garbage
//! or an error status does not take its neighbours' answers down with it.
//!
//! What to do with a pod that failed (hold its last good reading, leave it
//! out, or give up below the quorum) is not decided here: this reader only
//! reports which pods answered and how each of the others failed
//! (docs/decisions/0002).

use std::time::Duration;

use tokio::task::JoinSet;

use super::pod::{EngineReading, EngineSource};
use crate::guard::redact::redact;
use crate::source::context::SourceContext;
use crate::source::error::{FailureKind, SourceError};

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
    /// each within `per_pod` (the caller's deadline for the whole reading,
    /// less what resolution may take). A failed resolution fails the reading
    /// (which pods it would have named is unknown); so does a poll in which
    /// every discovered pod failed, with the first pod's error, so that an
    /// outage reads exactly as a failed source.
    pub async fn read_pods(
        &self,
        ctx: &SourceContext,
        per_pod: Duration,
    ) -> Result<PodsRead, SourceError> {
        if let Some(q) = &self.prometheus {
            // One answer per query names every pod: the poll's own
            // deadline bounds it.
            return q.read_pods(self.engine, ctx).await;
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
            let http = ctx.http.clone();
            scrapes.spawn(async move {
                let shown = redact(url.as_str());
                let body = match tokio::time::timeout(per_pod, http.get_text(&url)).await {
                    Ok(body) => body,
                    Err(_) => Err(SourceError::new(
                        FailureKind::Timeout,
                        url.as_str(),
                        format!("no answer within {per_pod:?}"),
                    )),
                };
                (shown, body)
            });
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
