//! Why a profile cannot serve a trigger, and the profile-name rule.

use super::secret::{Secret, SecretRef};
use crate::guard::redact::redact;

/// Longest profile name accepted (as a Kubernetes label value).
const MAX_PROFILE_NAME_LEN: usize = 63;

/// The broker section a source needs from its profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// `aws`
    Aws,
    /// `kafka`
    Kafka,
    /// `rabbitmq`
    RabbitMq,
    /// `prometheus`
    Prometheus,
}

impl Section {
    /// The YAML key.
    pub fn as_str(self) -> &'static str {
        match self {
            Section::Aws => "aws",
            Section::Kafka => "kafka",
            Section::RabbitMq => "rabbitmq",
            Section::Prometheus => "prometheus",
        }
    }
}

/// Why a profile cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// No profile has this name. The name is the trigger's `authProfile`,
    /// so the message reads like a metadata error (key, value, what is
    /// allowed); the key is spelled out here since `guard/` sits below
    /// `trigger/`, and a `…FromEnv` spelling is named as `authProfile`.
    /// Build it with [`ProfileError::unknown`].
    #[error(
        "metadata key `authProfile` has value `{name}`: no credential profile by that name in the scaler config ({}{})",
        if *well_formed { "" } else { "a profile name is 1 to 63 letters, digits, `.`, `_` or `-`; " },
        known_list(known)
    )]
    Unknown {
        /// The name asked for, redacted: it comes from metadata, where a
        /// credential may have been pasted, and `Debug` shows it too.
        name: String,
        /// Whether the name could name a profile at all
        /// ([`valid_profile_name`]); the message says the rule when not.
        well_formed: bool,
        /// The names that exist.
        known: Vec<String>,
    },
    /// The profile exists but does not list the trigger's namespace. The
    /// gRPC layer answers `PERMISSION_DENIED`.
    #[error("namespace `{namespace}` may not use credential profile `{name}`")]
    NamespaceDenied {
        /// The profile.
        name: String,
        /// The trigger's namespace.
        namespace: String,
    },
    /// The profile has no section for the trigger's broker.
    #[error("credential profile `{name}` has no `{}` section", section.as_str())]
    MissingSection {
        /// The profile.
        name: String,
        /// The section needed.
        section: Section,
    },
    /// A secret of the profile cannot be read.
    #[error("credential profile `{name}`: `{field}`: {reason}")]
    Secret {
        /// The profile.
        name: String,
        /// The field, e.g. `rabbitmq.password`.
        field: String,
        /// Why (names the variable or file, never a value).
        reason: String,
    },
    /// The profile's settings contradict each other, or its name breaks
    /// the rule. Build it with [`ProfileError::invalid`].
    #[error("credential profile `{name}`: {reason}")]
    Invalid {
        /// The profile, redacted: a name that breaks the rule may be any
        /// text the config's author wrote.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

impl ProfileError {
    /// [`ProfileError::Unknown`] for the name `name` (as the trigger sent
    /// it), with `known` the configured names.
    pub fn unknown(name: &str, known: Vec<String>) -> ProfileError {
        ProfileError::Unknown {
            name: redact(name),
            well_formed: valid_profile_name(name),
            known,
        }
    }

    /// [`ProfileError::Invalid`] for the profile `name` of the config.
    pub fn invalid(name: &str, reason: impl Into<String>) -> ProfileError {
        ProfileError::Invalid {
            name: redact(name),
            reason: reason.into(),
        }
    }

    /// True for [`ProfileError::NamespaceDenied`], which the gRPC layer maps
    /// to `PERMISSION_DENIED` (everything else is the scaler's or the
    /// trigger's configuration).
    pub fn is_permission_denied(&self) -> bool {
        matches!(self, ProfileError::NamespaceDenied { .. })
    }
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        "none are configured".to_owned()
    } else {
        format!("configured: {}", known.join(", "))
    }
}

/// Whether `name` is a valid profile name: 1–63 of `[A-Za-z0-9._-]`.
pub fn valid_profile_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_PROFILE_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

pub(super) fn read_field(
    profile: &str,
    field: &str,
    secret: &SecretRef,
) -> Result<Secret, ProfileError> {
    let value = secret.read().map_err(|reason| ProfileError::Secret {
        name: profile.to_owned(),
        field: field.to_owned(),
        reason,
    })?;
    if value.expose().chars().count() < 4 && field.ends_with("password") {
        // Also what keeps `Secret::scrub` meaningful.
        return Err(ProfileError::Secret {
            name: profile.to_owned(),
            field: field.to_owned(),
            reason: "a password shorter than 4 characters is refused".to_owned(),
        });
    }
    Ok(value)
}

pub(super) fn read_optional(
    profile: &str,
    field: &str,
    secret: &Option<SecretRef>,
) -> Result<Option<Secret>, ProfileError> {
    secret
        .as_ref()
        .map(|s| read_field(profile, field, s))
        .transpose()
}
