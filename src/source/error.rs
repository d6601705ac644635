//! Why a reading failed: a [`FailureKind`] the poller, `/explain` and the
//! `UNAVAILABLE` message can act on, the credential-free target, and the
//! upstream's own words as the kind's description.
//!
//! Target and detail are redacted when the error is built
//! ([`crate::guard::redact`]): a reqwest error's text holds the whole URL,
//! a broker's answer may quote a signed queue URL, and the error reaches
//! logs, `/explain`, `check` and the `UNAVAILABLE` message.
//!
//! The text of an error (its `Display`) is what operators have always seen
//! and what tests compare: `TARGET: DETAIL`, or `timed out after …` for a
//! reading the poller gave up on. The kind adds what the text cannot carry
//! reliably: whether trying again can help ([`SourceError::is_transient`])
//! and how the failure is counted ([`SourceError::outcome`]).

use std::time::Duration;

use crate::guard::outbound::OutboundDenied;
use crate::guard::redact::redact;

/// What went wrong, in classes that say whether trying again can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// The reading (or one broker request of it) outlasted its bound.
    Timeout,
    /// The outbound policy refused the destination: nothing was sent.
    Denied,
    /// Name resolution failed. `no_such_name`: a definite "no such name" or
    /// "no addresses" answer (NXDOMAIN, NODATA); otherwise the resolver
    /// itself failed (SERVFAIL, a timeout, no resolver).
    Dns {
        /// The name does not exist or has no addresses.
        no_such_name: bool,
    },
    /// The upstream could not be reached or the exchange broke off:
    /// connection refused or reset, TLS failure, a request that got no
    /// answer in time, a body cut short, a broker that is down.
    Unreachable,
    /// The upstream answered with this HTTP status (never 401/403: those
    /// are [`FailureKind::Auth`]).
    Status(u16),
    /// The upstream refused the credentials: HTTP 401/403, or a broker's
    /// authentication or authorization failure.
    Auth,
    /// The upstream answered and refused the request in its own terms: a
    /// PromQL error, a queue or topic that does not exist, an answer over
    /// the size cap.
    Rejected,
    /// The scaler's own configuration cannot make the request: a
    /// credentials profile without the section it needs, a secret that
    /// cannot be read, a broker client that cannot be built.
    Config,
    /// The scaler's reading task itself failed (a panic, a lost client).
    Internal,
    /// The upstream answered, but not with what we need.
    Parse,
}

impl FailureKind {
    /// The kind of an HTTP error status: 401 and 403 are credentials, the
    /// rest keep their code.
    pub fn of_status(code: u16) -> FailureKind {
        match code {
            401 | 403 => FailureKind::Auth,
            code => FailureKind::Status(code),
        }
    }

    /// True when the same request may succeed later without anyone
    /// changing anything: timeouts, connection failures, resolver failures,
    /// 5xx, 429 and 408, internal hiccups. A definite "no such name", a
    /// policy refusal, credentials, other 4xx, configuration and unusable
    /// data stay as they are until someone acts.
    pub fn is_transient(self) -> bool {
        match self {
            FailureKind::Timeout | FailureKind::Unreachable | FailureKind::Internal => true,
            FailureKind::Dns { no_such_name } => !no_such_name,
            FailureKind::Status(code) => code >= 500 || code == 429 || code == 408,
            FailureKind::Denied
            | FailureKind::Auth
            | FailureKind::Rejected
            | FailureKind::Config
            | FailureKind::Parse => false,
        }
    }

    /// How a failure of this kind is counted in `backlog_scaler_polls_total`.
    pub fn outcome(self) -> PollOutcome {
        match self {
            FailureKind::Timeout => PollOutcome::Timeout,
            FailureKind::Parse => PollOutcome::ParseError,
            _ => PollOutcome::UpstreamError,
        }
    }

    /// A short, stable name (`timeout`, `denied`, `dns`, `no_such_name`,
    /// `unreachable`, `http_status`, `auth`, `rejected`, `config`,
    /// `internal`, `parse`), for logs and machine-readable reasons.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::Denied => "denied",
            FailureKind::Dns {
                no_such_name: false,
            } => "dns",
            FailureKind::Dns { no_such_name: true } => "no_such_name",
            FailureKind::Unreachable => "unreachable",
            FailureKind::Status(_) => "http_status",
            FailureKind::Auth => "auth",
            FailureKind::Rejected => "rejected",
            FailureKind::Config => "config",
            FailureKind::Internal => "internal",
            FailureKind::Parse => "parse",
        }
    }
}

/// Why a reading failed: what kind of failure, where, and the upstream's
/// words. Displays as `TARGET: DETAIL`, or as the detail alone when there is
/// no target (a reading the poller timed out).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", shown(.target, .detail))]
pub struct SourceError {
    kind: FailureKind,
    target: Option<String>,
    detail: String,
}

/// The `Display` of a [`SourceError`].
fn shown<'a>(target: &'a Option<String>, detail: &'a str) -> Shown<'a> {
    Shown {
        target: target.as_deref(),
        detail,
    }
}

struct Shown<'a> {
    target: Option<&'a str>,
    detail: &'a str,
}

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.target {
            Some(target) => write!(f, "{target}: {}", self.detail),
            None => f.write_str(self.detail),
        }
    }
}

impl SourceError {
    /// A failure of `kind` at `target` (a URL or a source label), described
    /// by `detail`; credential-shaped parts of both are redacted here, so
    /// no error can carry them.
    pub fn new(
        kind: FailureKind,
        target: impl Into<String>,
        detail: impl Into<String>,
    ) -> SourceError {
        SourceError {
            kind,
            target: Some(redact(&target.into())),
            detail: redact(&detail.into()),
        }
    }

    /// The whole reading took longer than `after` and was abandoned.
    pub fn timeout(after: Duration) -> SourceError {
        SourceError {
            kind: FailureKind::Timeout,
            target: None,
            detail: format!("timed out after {after:?}"),
        }
    }

    /// The outbound policy refused a connection to `target`.
    pub fn denied(target: impl Into<String>, denied: &OutboundDenied) -> SourceError {
        SourceError::new(FailureKind::Denied, target, denied.to_string())
    }

    /// The upstream answered with HTTP status `code`.
    pub fn http_status(
        target: impl Into<String>,
        code: u16,
        detail: impl Into<String>,
    ) -> SourceError {
        SourceError::new(FailureKind::of_status(code), target, detail)
    }

    /// The upstream's data was unusable.
    pub fn parse(target: impl Into<String>, detail: impl Into<String>) -> SourceError {
        SourceError::new(FailureKind::Parse, target, detail)
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// What was contacted (redacted); `None` for a reading the poller timed
    /// out.
    pub fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }

    /// The description of the failure, in the upstream's words where it
    /// gave some.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// True when the same reading may succeed later without a change:
    /// see [`FailureKind::is_transient`].
    pub fn is_transient(&self) -> bool {
        self.kind.is_transient()
    }

    /// How this failure is counted.
    pub fn outcome(&self) -> PollOutcome {
        self.kind.outcome()
    }

    /// True when `other` is the same failure as far as logs tell failures
    /// apart: the same kind (an HTTP status with its code) at the same
    /// target. The detail is left out: it can differ between polls that fail
    /// the same way (the byte offset into a garbage body, how much of a
    /// body arrived), and a log line per variant is a line per poll.
    pub fn same_failure(&self, other: &SourceError) -> bool {
        self.kind == other.kind && self.target == other.target
    }
}

/// Outcome of one poll, as counted in `backlog_scaler_polls_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PollOutcome {
    /// A reading was taken.
    Ok,
    /// The reading timed out.
    Timeout,
    /// The upstream failed.
    UpstreamError,
    /// The upstream's data was unusable.
    ParseError,
}

impl PollOutcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            PollOutcome::Ok => "ok",
            PollOutcome::Timeout => "timeout",
            PollOutcome::UpstreamError => "upstream_error",
            PollOutcome::ParseError => "parse_error",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_permanence_and_outcome() {
        use FailureKind::*;
        use PollOutcome::{ParseError, Timeout as TimedOut, UpstreamError};
        for (kind, transient, outcome) in [
            (Timeout, true, TimedOut),
            (Denied, false, UpstreamError),
            (Dns { no_such_name: true }, false, UpstreamError),
            (
                Dns {
                    no_such_name: false,
                },
                true,
                UpstreamError,
            ),
            (Unreachable, true, UpstreamError),
            (Status(500), true, UpstreamError),
            (Status(503), true, UpstreamError),
            (Status(429), true, UpstreamError),
            (Status(408), true, UpstreamError),
            (Status(404), false, UpstreamError),
            (Status(400), false, UpstreamError),
            (Auth, false, UpstreamError),
            (Rejected, false, UpstreamError),
            (Config, false, UpstreamError),
            (Internal, true, UpstreamError),
            (Parse, false, ParseError),
        ] {
            assert_eq!(kind.is_transient(), transient, "{kind:?}");
            assert_eq!(kind.outcome(), outcome, "{kind:?}");
            let error = SourceError::new(kind, "t", "d");
            assert_eq!(
                (error.is_transient(), error.outcome()),
                (transient, outcome)
            );
        }
        assert_eq!(FailureKind::of_status(401), Auth);
        assert_eq!(FailureKind::of_status(403), Auth);
        assert_eq!(FailureKind::of_status(404), Status(404));
    }

    #[test]
    fn text_is_target_and_detail_or_the_timeout() {
        let error = SourceError::new(
            FailureKind::Unreachable,
            "http://a/metrics",
            "connect failed",
        );
        assert_eq!(error.to_string(), "http://a/metrics: connect failed");
        assert_eq!(error.target(), Some("http://a/metrics"));
        assert_eq!(error.detail(), "connect failed");
        let error = SourceError::timeout(Duration::from_millis(4500));
        assert_eq!(error.to_string(), "timed out after 4.5s");
        assert_eq!((error.kind(), error.target()), (FailureKind::Timeout, None));
        assert_eq!(error.outcome().as_str(), "timeout");
        let denied = OutboundDenied {
            target: "10.0.0.1".into(),
            rule: "not in the allowlist".into(),
        };
        let error = SourceError::denied("http://10.0.0.1/metrics", &denied);
        assert_eq!(
            error.to_string(),
            "http://10.0.0.1/metrics: outbound connection to `10.0.0.1` refused: not in the allowlist"
        );
        assert_eq!(error.kind(), FailureKind::Denied);
        let error = SourceError::http_status("u", 403, "HTTP status 403 Forbidden");
        assert_eq!(
            (error.kind(), error.to_string().as_str()),
            (FailureKind::Auth, "u: HTTP status 403 Forbidden")
        );
    }

    #[test]
    fn the_same_failure_is_its_kind_and_target_whatever_the_detail() {
        let garbage = |offset: usize| {
            SourceError::parse(
                "http://a/metrics",
                format!("response is not UTF-8 text (invalid byte at {offset})"),
            )
        };
        assert!(garbage(0).same_failure(&garbage(17)));
        assert!(!garbage(0).same_failure(&SourceError::parse("http://b/metrics", "x")));
        let status = |code| SourceError::http_status("http://a/metrics", code, "HTTP error");
        assert!(status(503).same_failure(&status(503)));
        assert!(!status(503).same_failure(&status(502)));
        assert!(!garbage(0).same_failure(&status(503)));
        let timeout = SourceError::timeout(Duration::from_secs(4));
        assert!(timeout.same_failure(&SourceError::timeout(Duration::from_secs(4))));
    }

    #[test]
    fn target_and_detail_are_redacted_when_built() {
        let error = SourceError::new(
            FailureKind::Unreachable,
            "http://127.0.0.1:1/metrics?token=S3CRET",
            "error sending request for url (http://127.0.0.1:1/metrics?token=S3CRET): refused",
        );
        assert_eq!(
            error.target(),
            Some("http://127.0.0.1:1/metrics?token=[redacted]")
        );
        assert_eq!(
            error.detail(),
            "error sending request for url (http://127.0.0.1:1/metrics?token=[redacted] refused"
        );
        for text in [error.to_string(), format!("{error:?}")] {
            assert!(!text.contains("S3CRET"), "{text}");
        }
        let error = SourceError::parse(
            "sqs eu-west-1/jobs",
            "queue https://q/1/jobs?X-Amz-Signature=S3CRET gone",
        );
        assert!(!error.to_string().contains("S3CRET"), "{error}");
        assert!(
            error.to_string().contains("X-Amz-Signature=[redacted]"),
            "{error}"
        );
    }
}
