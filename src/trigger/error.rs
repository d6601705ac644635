//! What is wrong with a trigger's metadata: one [`MetadataError`] per
//! problem, each naming the key, the value and what is allowed. A value is
//! echoed only as [`Redacted`], so no error repeats a credential.

use std::fmt;

use crate::guard::redact::redact;

/// A metadata value as an error echoes it: credential-shaped parts (URL
/// userinfo, credential query parameters, `Bearer …`) replaced by
/// `[redacted]`. The only way to build one is [`Redacted::new`], which
/// redacts, so no error can carry a raw value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted(String);

impl Redacted {
    /// `raw`, redacted.
    pub fn new(raw: &str) -> Redacted {
        Redacted(redact(raw))
    }

    /// The redacted text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One problem with one metadata key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetadataError {
    /// A required key is absent.
    #[error("metadata key `{key}` is required: {allowed}")]
    Missing {
        /// The key.
        key: &'static str,
        /// What a valid value looks like.
        allowed: &'static str,
    },
    /// A key's value is not allowed. Build it with [`invalid`].
    #[error("metadata key `{key}` has value `{value}`: {allowed}")]
    Invalid {
        /// The key, as sent (a `…FromEnv` key keeps its suffix).
        key: String,
        /// The offending value, redacted.
        value: Redacted,
        /// What is allowed instead.
        allowed: String,
    },
    /// A key that is neither KEDA's nor ours.
    #[error("unknown metadata key `{key}`{}", nearest.map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default())]
    Unknown {
        /// The key as sent.
        key: String,
        /// The closest valid key, when one is close.
        nearest: Option<&'static str>,
    },
    /// Keys that do not work together.
    #[error("metadata key `{key}` {problem}")]
    Conflict {
        /// The key.
        key: &'static str,
        /// What is wrong with it here.
        problem: String,
    },
}

/// Every problem found in one trigger's metadata (never empty).
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataErrors(pub Vec<MetadataError>);

impl fmt::Display for MetadataErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for MetadataErrors {}

/// The value `value` of key `sent_key` (as sent) is not allowed: an
/// `Invalid` error echoing the value redacted.
pub fn invalid(sent_key: &str, value: &str, allowed: impl Into<String>) -> MetadataError {
    MetadataError::Invalid {
        key: sent_key.to_owned(),
        value: Redacted::new(value),
        allowed: allowed.into(),
    }
}

/// Key `key` does not work with the others: `problem` says why.
pub fn conflict(key: &'static str, problem: impl Into<String>) -> MetadataError {
    MetadataError::Conflict {
        key,
        problem: problem.into(),
    }
}
