//! The types `--from-keda`'s files share: the input error, one line of
//! the fused trigger, one old trigger, one migration, and two helpers.

use serde_yaml_ng::Value;

/// Why a file cannot be migrated (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum FromKedaError {
    /// The file could not be read.
    #[error("cannot read {file}: {reason}")]
    Read {
        /// The file.
        file: String,
        /// The OS error.
        reason: String,
    },
    /// A document is not YAML.
    #[error("{file}:{line}: not YAML: {reason}")]
    NotYaml {
        /// The file.
        file: String,
        /// The line of the error.
        line: usize,
        /// The parser's message.
        reason: String,
    },
    /// No document is a ScaledObject.
    #[error(
        "{file}: no ScaledObject in it ({found}); expected `apiVersion: keda.sh/v1alpha1`, `kind: ScaledObject`"
    )]
    NoScaledObject {
        /// The file.
        file: String,
        /// What each document is.
        found: String,
    },
    /// A ScaledObject without a usable `spec.triggers`.
    #[error("{file}:{line}: ScaledObject `{name}`: field `{field}` {problem}")]
    BadField {
        /// The file.
        file: String,
        /// The line of the document or trigger.
        line: usize,
        /// The ScaledObject.
        name: String,
        /// The field, e.g. `spec.triggers[1].metadata`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Nothing of a ScaledObject can be fused.
    #[error("{file}:{line}: ScaledObject `{name}`: nothing to carry over:\n{reasons}")]
    NothingToCarry {
        /// The file.
        file: String,
        /// The line of the document.
        line: usize,
        /// The ScaledObject.
        name: String,
        /// Each trigger's reason, one per line.
        reasons: String,
    },
}

/// One line of the fused trigger: a key and its value with why, or (with
/// `key` unset) an explanation of something that has no key.
#[derive(Debug, Clone)]
pub struct Key {
    /// The metadata key.
    pub key: Option<String>,
    /// Its value.
    pub value: String,
    /// Where it came from and why this value.
    pub why: String,
    /// The value validated in its place (`…FromEnv` keys: KEDA forwards the
    /// resolved value, which this tool cannot see).
    pub check_value: Option<String>,
}

impl Key {
    /// A key of the registry.
    pub fn new(key: &'static str, value: &str, why: String) -> Key {
        Key::new_owned(key.to_owned(), value, why)
    }

    /// A key built at run time (`…FromEnv`).
    pub fn new_owned(key: String, value: &str, why: String) -> Key {
        Key {
            key: Some(key),
            value: value.to_owned(),
            why,
            check_value: None,
        }
    }

    /// An explanation without a key.
    pub fn explained(why: String) -> Key {
        Key {
            key: None,
            value: String::new(),
            why,
            check_value: None,
        }
    }
}

/// One trigger of the old ScaledObject.
#[derive(Debug, Clone)]
pub struct Old {
    /// `spec.triggers[i] (type)`.
    pub origin: String,
    /// Its `type`.
    pub kind: String,
    /// Its metadata, values as strings (as KEDA reads them).
    pub metadata: Vec<(String, String)>,
    /// Its `metricType`, defaulted as KEDA defaults it.
    pub metric_type: String,
    /// `authenticationRef.name`, with its kind.
    pub auth_ref: Option<(String, String)>,
    /// The trigger as written.
    pub raw: Value,
    /// Its line in the file, when found.
    pub line: usize,
}

impl Old {
    /// A metadata value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A number as metadata writes it: no trailing `.0`, at most 6 decimals.
pub fn number_text(v: f64) -> String {
    let rounded = (v * 1e6).round() / 1e6;
    format!("{rounded}")
}

/// `scheme://user:pass@host…` without its userinfo, and whether it had one.
pub fn strip_userinfo(value: &str) -> (String, bool) {
    let Some(scheme_end) = value.find("://") else {
        return (value.to_owned(), false);
    };
    let start = scheme_end + 3;
    let rest = &value[start..];
    let authority = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority].rfind('@') {
        Some(at) => (format!("{}{}", &value[..start], &rest[at + 1..]), true),
        None => (value.to_owned(), false),
    }
}

/// One ScaledObject, migrated.
#[derive(Debug, Clone)]
pub struct Migration {
    /// `namespace/name`.
    pub name: String,
    /// Its namespace, when it has one.
    pub namespace: Option<String>,
    /// The output: the YAML and its comments.
    pub text: String,
    /// The fused metadata as the parser gets it.
    pub metadata: Vec<(String, String)>,
}
