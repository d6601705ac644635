//! A secret value and where it comes from: `{value: …}`, `{env: VAR}` or
//! `{file: /path}` (a mounted Secret). Nothing here prints a secret.

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;

/// A secret value held in memory. Its `Debug` prints `[redacted]` and it has
/// no `Display`: the only way to the text is [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret text, for handing to a client library. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of this secret replaced by `[redacted]`:
    /// defence in depth for error text produced by client libraries that
    /// were handed the secret.
    pub fn scrub(&self, text: &str) -> String {
        // A one-character secret would shred every message; such a secret is
        // refused when read, so this never triggers for a real one.
        if self.0.len() < 4 {
            return text.to_owned();
        }
        text.replace(&self.0, "[redacted]")
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Where a secret comes from. Exactly one of `value`, `env`, `file`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawSecretRef")]
pub enum SecretRef {
    /// `{ value: "..." }`: inline in the config file. Fine for user names and
    /// tests; prefer `env` or `file` for passwords.
    Value(Secret),
    /// `{ env: NAME }`: the scaler process's environment variable `NAME`.
    Env(String),
    /// `{ file: /path }`: the content of a file, e.g. a mounted Secret key.
    /// One trailing newline is removed (`kubectl create secret --from-file`
    /// keeps the file's newline).
    File(PathBuf),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSecretRef {
    value: Option<String>,
    env: Option<String>,
    file: Option<PathBuf>,
}

impl TryFrom<RawSecretRef> for SecretRef {
    type Error = String;

    fn try_from(raw: RawSecretRef) -> Result<Self, Self::Error> {
        match (raw.value, raw.env, raw.file) {
            (Some(value), None, None) => Ok(SecretRef::Value(Secret(value))),
            (None, Some(env), None) if !env.is_empty() => Ok(SecretRef::Env(env)),
            (None, None, Some(file)) if !file.as_os_str().is_empty() => Ok(SecretRef::File(file)),
            _ => Err(
                "a secret is exactly one of `{ value: TEXT }`, `{ env: VARIABLE }` or `{ file: PATH }`"
                    .to_owned(),
            ),
        }
    }
}

impl fmt::Debug for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretRef::Value(_) => f.write_str("Value([redacted])"),
            SecretRef::Env(name) => write!(f, "Env({name:?})"),
            SecretRef::File(path) => write!(f, "File({path:?})"),
        }
    }
}

impl SecretRef {
    /// Read the secret now. The error names the variable or file, never a value.
    pub fn read(&self) -> Result<Secret, String> {
        let value = match self {
            SecretRef::Value(secret) => secret.0.clone(),
            SecretRef::Env(name) => match std::env::var(name) {
                Ok(value) => value,
                Err(std::env::VarError::NotPresent) => {
                    return Err(format!("environment variable `{name}` is not set"));
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(format!("environment variable `{name}` is not UTF-8"));
                }
            },
            SecretRef::File(path) => {
                let mut text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
                if text.ends_with('\n') {
                    text.pop();
                    if text.ends_with('\r') {
                        text.pop();
                    }
                }
                text
            }
        };
        if value.is_empty() {
            return Err(format!("{} is empty", self.describe()));
        }
        Ok(Secret(value))
    }

    fn describe(&self) -> String {
        match self {
            SecretRef::Value(_) => "the inline value".to_owned(),
            SecretRef::Env(name) => format!("environment variable `{name}`"),
            SecretRef::File(path) => format!("file `{}`", path.display()),
        }
    }
}
