//! Why a profile cannot serve a trigger, and the profile-name rule.

use super::secret::{Secret, SecretRef};

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
    /// No profile has this name.
    #[error(
        "no credential profile `{name}` in the scaler config{}",
        known_list(known)
    )]
    Unknown {
        /// The name asked for.
        name: String,
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
    /// The profile's settings contradict each other.
    #[error("credential profile `{name}`: {reason}")]
    Invalid {
        /// The profile.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

impl ProfileError {
    /// True for [`ProfileError::NamespaceDenied`], which the gRPC layer maps
    /// to `PERMISSION_DENIED` (everything else is the scaler's or the
    /// trigger's configuration).
    pub fn is_permission_denied(&self) -> bool {
        matches!(self, ProfileError::NamespaceDenied { .. })
    }
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        " (none are configured)".to_owned()
    } else {
        format!(" (configured: {})", known.join(", "))
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
