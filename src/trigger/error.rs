//! What is wrong with a trigger's metadata: one [`MetadataError`] per
//! problem, each naming the key, the value and what is allowed. A value (or
//! an unknown key) is echoed only as [`Redacted`], so no error repeats a
//! credential, and none is longer than [`MAX_ECHO_CHARS`]: the errors become
//! a gRPC status message, which travels in a header whose size clients cap
//! (a 3 MB echo would make KEDA's Go client report a transport error
//! instead of ours).

use std::fmt;

use crate::guard::redact::redact;

/// Characters of a value or key an error echoes: enough to recognise it
/// (a URL, a query's start); the rest is cut, its length noted.
pub(crate) const MAX_ECHO_CHARS: usize = 200;
/// Unknown keys an error lists by name: a person fixes a few at a time, and
/// thousands of junk keys would make a message of hundreds of KB. The rest
/// are counted ([`MetadataError::MoreUnknown`]).
pub(crate) const MAX_UNKNOWN_LISTED: usize = 20;

/// A metadata value as an error echoes it: credential-shaped parts (URL
/// userinfo, credential query parameters, `Bearer …`) replaced by
/// `[redacted]`, then cut to [`MAX_ECHO_CHARS`] characters with
/// `… (N bytes)` noting the redacted text's full length. The only way to
/// build one is [`Redacted::new`], so no error can carry a raw value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted(String);

impl Redacted {
    /// `raw`, redacted, then cut.
    pub fn new(raw: &str) -> Redacted {
        // Redact the whole text first: cut first, a credential straddling
        // the cut (`http://user:secr|et@host`) would lose the `@` that marks
        // it and be echoed.
        let text = redact(raw);
        match text.char_indices().nth(MAX_ECHO_CHARS) {
            None => Redacted(text),
            Some((end, _)) => Redacted(format!("{}… ({} bytes)", &text[..end], text.len())),
        }
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
    /// A key that is neither KEDA's nor ours (one of the first
    /// [`MAX_UNKNOWN_LISTED`]).
    #[error("unknown metadata key `{key}`{}", nearest.map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default())]
    Unknown {
        /// The key as sent, redacted and cut as a value is (a key is user
        /// text too: `Bearer …` pasted into the wrong field).
        key: Redacted,
        /// The closest valid key, when one is close.
        nearest: Option<&'static str>,
    },
    /// Unknown keys beyond the first [`MAX_UNKNOWN_LISTED`], counted.
    #[error("and {count} more unknown metadata keys")]
    MoreUnknown {
        /// How many.
        count: usize,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_is_redacted_then_cut_at_a_character_boundary() {
        let at_limit = "é".repeat(MAX_ECHO_CHARS);
        let cases: &[(String, String)] = &[
            ("short".to_owned(), "short".to_owned()),
            (at_limit.clone(), at_limit.clone()),
            (
                format!("{at_limit}é"),
                format!("{at_limit}… ({} bytes)", 2 * (MAX_ECHO_CHARS + 1)),
            ),
            // The credential is gone before the cut, and the length is the
            // redacted text's.
            (
                format!("Bearer s3cret {}", "x".repeat(MAX_ECHO_CHARS)),
                format!(
                    "Bearer [redacted] {}… ({} bytes)",
                    "x".repeat(MAX_ECHO_CHARS - "Bearer [redacted] ".len()),
                    "Bearer [redacted] ".len() + MAX_ECHO_CHARS
                ),
            ),
        ];
        for (raw, echoed) in cases {
            assert_eq!(Redacted::new(raw).as_str(), echoed, "{raw}");
        }
    }
}
