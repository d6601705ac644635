//! Credential profiles: named sets of broker credentials in the scaler's own
//! `--config` file, referenced from trigger metadata by `authProfile`.
//!
//! KEDA does not forward a TriggerAuthentication to an external scaler, and
//! secrets never belong in metadata, so the operator of the scaler declares
//! them here, each value taken from the scaler's environment or from a
//! mounted file (a Kubernetes Secret):
//!
//! ```yaml
//! profiles:
//!   team-a:
//!     namespaces: [team-a, team-a-staging]   # optional allow-list
//!     rabbitmq:
//!       username: { value: scaler }
//!       password: { file: /var/run/secrets/rabbitmq/password }
//!     kafka:
//!       sasl:
//!         mechanism: SCRAM-SHA-512
//!         username: { env: KAFKA_USER }
//!         password: { env: KAFKA_PASSWORD }
//!       tls: { ca: { file: /var/run/secrets/kafka/ca.crt } }
//!     aws:
//!       accessKeyId: { env: TEAM_A_AWS_ACCESS_KEY_ID }
//!       secretAccessKey: { env: TEAM_A_AWS_SECRET_ACCESS_KEY }
//! ```
//!
//! When secrets are read: [`Profiles::check_secrets`] reads every one once at
//! start-up so a missing variable or file fails fast, and the broker sources
//! read them again whenever they (re)build a client: the first reading, and
//! the reading after any failed one. A rotated Secret therefore takes effect
//! once the old credentials stop working (or at restart), without a restart
//! being required.
//!
//! Nothing here prints a secret: [`Secret`] and every struct holding one have
//! a `Debug` that redacts, and errors name the variable or file, never its
//! content.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;

/// Longest profile name accepted (as a Kubernetes label value).
const MAX_PROFILE_NAME_LEN: usize = 63;

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

/// Every named profile: the `profiles` map of the `--config` file.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct Profiles {
    profiles: BTreeMap<String, Profile>,
}

/// One named profile: which namespaces may use it and the credentials for
/// each broker kind. A trigger with `authProfile: NAME` gets the section for
/// its broker; a profile without that section is refused for it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Profile {
    /// Namespaces whose ScaledObjects may use this profile. Omitted: every
    /// namespace. A trigger from another namespace is refused with
    /// `PERMISSION_DENIED`. An empty list is refused at load (omit the key).
    #[serde(default)]
    pub namespaces: Option<Vec<String>>,
    /// AWS credentials for SQS. Without an `authProfile`, SQS uses the AWS
    /// default provider chain (environment, web identity / IRSA, shared
    /// config profile, container and instance metadata).
    #[serde(default)]
    pub aws: Option<AwsProfile>,
    /// Kafka SASL and TLS settings.
    #[serde(default)]
    pub kafka: Option<KafkaProfile>,
    /// RabbitMQ user for AMQP and the management HTTP API.
    #[serde(default)]
    pub rabbitmq: Option<RabbitMqProfile>,
    /// Credentials for a Prometheus-compatible API (`prometheusAddress`).
    #[serde(default)]
    pub prometheus: Option<PrometheusProfile>,
}

/// Credentials for a Prometheus-compatible HTTP API: a bearer token, basic
/// auth, and extra headers (e.g. `X-Scope-OrgID` for a Mimir or Thanos
/// tenant). Every value may come from `value`, `env` or `file`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrometheusProfile {
    /// `Authorization: Bearer <token>`.
    #[serde(default)]
    pub bearer_token: Option<SecretRef>,
    /// HTTP basic auth.
    #[serde(default)]
    pub basic_auth: Option<BasicAuth>,
    /// Extra request headers.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, SecretRef>,
}

/// A user name and password for HTTP basic auth.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BasicAuth {
    /// User name.
    pub username: SecretRef,
    /// Password.
    pub password: SecretRef,
}

impl PrometheusProfile {
    /// Read every secret into request credentials.
    pub fn request_auth(&self, profile: &str) -> Result<RequestAuth, ProfileError> {
        let bearer_token = match &self.bearer_token {
            Some(token) => Some(
                read_field(profile, "prometheus.bearerToken", token)?
                    .expose()
                    .to_owned(),
            ),
            None => None,
        };
        let basic = match &self.basic_auth {
            Some(b) => Some((
                read_field(profile, "prometheus.basicAuth.username", &b.username)?
                    .expose()
                    .to_owned(),
                read_field(profile, "prometheus.basicAuth.password", &b.password)?
                    .expose()
                    .to_owned(),
            )),
            None => None,
        };
        let mut headers = Vec::new();
        for (name, value) in &self.headers {
            headers.push((
                name.clone(),
                read_field(profile, "prometheus.headers", value)?
                    .expose()
                    .to_owned(),
            ));
        }
        Ok(RequestAuth {
            bearer_token,
            basic,
            headers,
        })
    }
}

/// AWS credentials: static keys, or a named profile of the shared AWS
/// config files (`~/.aws/config`, `~/.aws/credentials`, or the files named
/// by `AWS_CONFIG_FILE` / `AWS_SHARED_CREDENTIALS_FILE`). Exactly one of the two.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AwsProfile {
    /// Access key id (with `secretAccessKey`).
    #[serde(default)]
    pub access_key_id: Option<SecretRef>,
    /// Secret access key (with `accessKeyId`).
    #[serde(default)]
    pub secret_access_key: Option<SecretRef>,
    /// Session token, for temporary credentials. Optional.
    #[serde(default)]
    pub session_token: Option<SecretRef>,
    /// A profile of the shared AWS config files, resolved by the AWS SDK
    /// (which also follows its `role_arn` / `web_identity_token_file`).
    #[serde(default)]
    pub profile_name: Option<String>,
}

/// Static AWS keys, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsKeys {
    /// Access key id.
    pub access_key_id: Secret,
    /// Secret access key.
    pub secret_access_key: Secret,
    /// Session token.
    pub session_token: Option<Secret>,
}

/// Kafka client security. `security.protocol` follows from what is set:
/// `sasl` and `tls` → `SASL_SSL`; `sasl` → `SASL_PLAINTEXT`; `tls` → `SSL`;
/// neither → `PLAINTEXT`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KafkaProfile {
    /// SASL authentication.
    #[serde(default)]
    pub sasl: Option<KafkaSasl>,
    /// TLS to the brokers. `tls: {}` means TLS verified against the system
    /// trust store.
    #[serde(default)]
    pub tls: Option<KafkaTls>,
}

/// Kafka SASL mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum SaslMechanism {
    /// `PLAIN` (send it over TLS only).
    #[serde(rename = "PLAIN")]
    Plain,
    /// `SCRAM-SHA-256`.
    #[serde(rename = "SCRAM-SHA-256")]
    ScramSha256,
    /// `SCRAM-SHA-512`.
    #[serde(rename = "SCRAM-SHA-512")]
    ScramSha512,
}

impl SaslMechanism {
    /// librdkafka's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// Kafka SASL settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KafkaSasl {
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: SaslMechanism,
    /// SASL user name.
    pub username: SecretRef,
    /// SASL password.
    pub password: SecretRef,
}

/// Kafka TLS settings; every PEM value is the PEM text itself (use `file:`
/// to point at a mounted `ca.crt`, `tls.crt`, `tls.key`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KafkaTls {
    /// CA certificate(s), PEM. Default: the system trust store.
    #[serde(default)]
    pub ca: Option<SecretRef>,
    /// Client certificate, PEM, for mutual TLS (with `key`).
    #[serde(default)]
    pub cert: Option<SecretRef>,
    /// Client private key, PEM (with `cert`).
    #[serde(default)]
    pub key: Option<SecretRef>,
    /// Password of an encrypted `key`.
    #[serde(default)]
    pub key_password: Option<SecretRef>,
    /// Skip verification of the brokers' certificates. Default false; for
    /// test clusters only.
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

/// RabbitMQ credentials, used for AMQP (SASL PLAIN) and for the management
/// HTTP API (basic auth). A RabbitMQ trigger without `authProfile` uses
/// RabbitMQ's default `guest`/`guest`, which RabbitMQ accepts from loopback only.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RabbitMqProfile {
    /// User name.
    pub username: SecretRef,
    /// Password.
    pub password: SecretRef,
}

/// A RabbitMQ user and password, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RabbitMqCredentials {
    /// User name.
    pub username: Secret,
    /// Password.
    pub password: Secret,
}

impl RabbitMqCredentials {
    /// RabbitMQ's default user, used when a trigger names no profile.
    pub fn guest() -> RabbitMqCredentials {
        RabbitMqCredentials {
            username: Secret::new("guest"),
            password: Secret::new("guest"),
        }
    }
}

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

impl Profiles {
    /// Build from a map (tests and programmatic use).
    pub fn new(profiles: BTreeMap<String, Profile>) -> Profiles {
        Profiles { profiles }
    }

    /// True when no profile is configured.
    pub fn is_empty(&self) -> bool {
        self.profiles.is_empty()
    }

    /// Profile names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.profiles.keys().map(String::as_str)
    }

    /// The profile `name`, if the trigger's `namespace` may use it.
    pub fn resolve(&self, name: &str, namespace: &str) -> Result<&Profile, ProfileError> {
        let profile = self.get(name)?;
        if let Some(allowed) = &profile.namespaces
            && !allowed.iter().any(|ns| ns == namespace)
        {
            return Err(ProfileError::NamespaceDenied {
                name: name.to_owned(),
                namespace: namespace.to_owned(),
            });
        }
        Ok(profile)
    }

    /// The profile `name`, without the namespace check (for readers, after
    /// [`Profiles::resolve`] admitted the trigger).
    pub fn get(&self, name: &str) -> Result<&Profile, ProfileError> {
        self.profiles
            .get(name)
            .ok_or_else(|| ProfileError::Unknown {
                name: name.to_owned(),
                known: self.profiles.keys().cloned().collect(),
            })
    }

    /// Structural checks, no I/O: names, namespace lists, AWS key pairs,
    /// TLS cert/key pairs. Call when the config is parsed.
    pub fn validate(&self) -> Result<(), ProfileError> {
        for (name, profile) in &self.profiles {
            let invalid = |reason: &str| ProfileError::Invalid {
                name: name.clone(),
                reason: reason.to_owned(),
            };
            if !valid_profile_name(name) {
                return Err(invalid(
                    "a profile name is 1 to 63 letters, digits, `.`, `_` or `-`",
                ));
            }
            if let Some(namespaces) = &profile.namespaces
                && (namespaces.is_empty() || namespaces.iter().any(String::is_empty))
            {
                return Err(invalid(
                    "`namespaces` lists namespace names; omit it to allow every namespace",
                ));
            }
            if let Some(aws) = &profile.aws {
                let keys = aws.access_key_id.is_some() || aws.secret_access_key.is_some();
                if aws.access_key_id.is_some() != aws.secret_access_key.is_some() {
                    return Err(invalid(
                        "`aws` needs both `accessKeyId` and `secretAccessKey`",
                    ));
                }
                if aws.session_token.is_some() && !keys {
                    return Err(invalid("`aws.sessionToken` needs `accessKeyId`"));
                }
                match (&aws.profile_name, keys) {
                    (Some(_), true) => {
                        return Err(invalid(
                            "`aws` has either static keys or `profileName`, not both",
                        ));
                    }
                    (None, false) => {
                        return Err(invalid(
                            "`aws` needs `accessKeyId` + `secretAccessKey`, or `profileName`",
                        ));
                    }
                    (Some(p), false) if p.is_empty() => {
                        return Err(invalid("`aws.profileName` is empty"));
                    }
                    _ => {}
                }
            }
            if let Some(tls) = profile.kafka.as_ref().and_then(|k| k.tls.as_ref()) {
                if tls.cert.is_some() != tls.key.is_some() {
                    return Err(invalid(
                        "`kafka.tls` needs both `cert` and `key`, or neither",
                    ));
                }
                if tls.key_password.is_some() && tls.key.is_none() {
                    return Err(invalid("`kafka.tls.keyPassword` needs `key`"));
                }
            }
        }
        Ok(())
    }

    /// Read every secret once, so that a missing variable or an unreadable
    /// file fails at start-up rather than at the first reading.
    pub fn check_secrets(&self) -> Result<(), ProfileError> {
        for (name, profile) in &self.profiles {
            if let Some(aws) = &profile.aws {
                aws.keys(name)?;
            }
            if let Some(kafka) = &profile.kafka {
                kafka.client_settings(name)?;
            }
            if let Some(rabbitmq) = &profile.rabbitmq {
                rabbitmq.credentials(name)?;
            }
            if let Some(prometheus) = &profile.prometheus {
                prometheus.request_auth(name)?;
            }
        }
        Ok(())
    }

    /// Prometheus credentials of every profile that has them, read now.
    pub fn prometheus_auth(
        &self,
    ) -> Result<std::collections::HashMap<String, RequestAuth>, ProfileError> {
        let mut auth = std::collections::HashMap::new();
        for (name, profile) in &self.profiles {
            if let Some(prometheus) = &profile.prometheus {
                auth.insert(name.clone(), prometheus.request_auth(name)?);
            }
        }
        Ok(auth)
    }
}

impl Profile {
    /// The section a broker needs, or [`ProfileError::MissingSection`].
    pub fn require(&self, name: &str, section: Section) -> Result<(), ProfileError> {
        let present = match section {
            Section::Aws => self.aws.is_some(),
            Section::Kafka => self.kafka.is_some(),
            Section::RabbitMq => self.rabbitmq.is_some(),
            Section::Prometheus => self.prometheus.is_some(),
        };
        if present {
            Ok(())
        } else {
            Err(ProfileError::MissingSection {
                name: name.to_owned(),
                section,
            })
        }
    }
}

fn read_field(profile: &str, field: &str, secret: &SecretRef) -> Result<Secret, ProfileError> {
    let value = secret.read().map_err(|reason| ProfileError::Secret {
        name: profile.to_owned(),
        field: field.to_owned(),
        reason,
    })?;
    if value.0.chars().count() < 4 && field.ends_with("password") {
        // Also what keeps `Secret::scrub` meaningful.
        return Err(ProfileError::Secret {
            name: profile.to_owned(),
            field: field.to_owned(),
            reason: "a password shorter than 4 characters is refused".to_owned(),
        });
    }
    Ok(value)
}

fn read_optional(
    profile: &str,
    field: &str,
    secret: &Option<SecretRef>,
) -> Result<Option<Secret>, ProfileError> {
    secret
        .as_ref()
        .map(|s| read_field(profile, field, s))
        .transpose()
}

impl AwsProfile {
    /// The static keys, read now; `None` when the profile uses `profileName`.
    pub fn keys(&self, profile: &str) -> Result<Option<AwsKeys>, ProfileError> {
        let (Some(id), Some(secret)) = (&self.access_key_id, &self.secret_access_key) else {
            return Ok(None);
        };
        Ok(Some(AwsKeys {
            access_key_id: read_field(profile, "aws.accessKeyId", id)?,
            secret_access_key: read_field(profile, "aws.secretAccessKey", secret)?,
            session_token: read_optional(profile, "aws.sessionToken", &self.session_token)?,
        }))
    }
}

impl RabbitMqProfile {
    /// The user and password, read now.
    pub fn credentials(&self, profile: &str) -> Result<RabbitMqCredentials, ProfileError> {
        Ok(RabbitMqCredentials {
            username: read_field(profile, "rabbitmq.username", &self.username)?,
            password: read_field(profile, "rabbitmq.password", &self.password)?,
        })
    }
}

/// librdkafka settings from a Kafka profile, secrets read. Its `Debug`
/// prints setting names only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KafkaClientSettings {
    /// `(librdkafka property, value)`; values of secret properties are secrets.
    pub settings: Vec<(&'static str, Secret)>,
}

impl fmt::Debug for KafkaClientSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.settings.iter().map(|(k, _)| *k))
            .finish()
    }
}

impl KafkaClientSettings {
    /// Replace every secret value of these settings in `text`.
    pub fn scrub(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (key, value) in &self.settings {
            if *key != "security.protocol" && *key != "sasl.mechanism" {
                text = value.scrub(&text);
            }
        }
        text
    }
}

impl KafkaProfile {
    /// The librdkafka properties for this profile, secrets read now.
    pub fn client_settings(&self, profile: &str) -> Result<KafkaClientSettings, ProfileError> {
        let protocol = match (&self.sasl, &self.tls) {
            (Some(_), Some(_)) => "SASL_SSL",
            (Some(_), None) => "SASL_PLAINTEXT",
            (None, Some(_)) => "SSL",
            (None, None) => "PLAINTEXT",
        };
        let mut settings = vec![("security.protocol", Secret::new(protocol))];
        if let Some(sasl) = &self.sasl {
            settings.push(("sasl.mechanism", Secret::new(sasl.mechanism.as_str())));
            settings.push((
                "sasl.username",
                read_field(profile, "kafka.sasl.username", &sasl.username)?,
            ));
            settings.push((
                "sasl.password",
                read_field(profile, "kafka.sasl.password", &sasl.password)?,
            ));
        }
        if let Some(tls) = &self.tls {
            if let Some(ca) = read_optional(profile, "kafka.tls.ca", &tls.ca)? {
                settings.push(("ssl.ca.pem", ca));
            }
            if let Some(cert) = read_optional(profile, "kafka.tls.cert", &tls.cert)? {
                settings.push(("ssl.certificate.pem", cert));
            }
            if let Some(key) = read_optional(profile, "kafka.tls.key", &tls.key)? {
                settings.push(("ssl.key.pem", key));
            }
            if let Some(pass) = read_optional(profile, "kafka.tls.keyPassword", &tls.key_password)?
            {
                settings.push(("ssl.key.password", pass));
            }
            if tls.insecure_skip_verify {
                settings.push(("enable.ssl.certificate.verification", Secret::new("false")));
                settings.push(("ssl.endpoint.identification.algorithm", Secret::new("none")));
            }
        }
        Ok(KafkaClientSettings { settings })
    }
}

/// Credentials for an HTTP upstream (a Prometheus server), from the
/// scaler-side config, never from metadata. Debug output redacts secrets.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RequestAuth {
    /// `Authorization: Bearer <token>`.
    pub bearer_token: Option<String>,
    /// HTTP basic auth: username and password.
    pub basic: Option<(String, String)>,
    /// Extra headers (e.g. `X-Scope-OrgID` for Thanos or Mimir tenants).
    pub headers: Vec<(String, String)>,
}

impl fmt::Debug for RequestAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestAuth")
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "basic",
                &self.basic.as_ref().map(|(user, _)| (user, "<redacted>")),
            )
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl RequestAuth {
    /// Add these credentials to a request.
    pub fn apply(&self, mut request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        if let Some(token) = &self.bearer_token {
            request = request.bearer_auth(token);
        }
        if let Some((user, password)) = &self.basic {
            request = request.basic_auth(user, Some(password));
        }
        for (name, value) in &self.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        request
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = r#"
team-a:
  namespaces: [team-a, staging]
  rabbitmq:
    username: { value: scaler }
    password: { value: "hunter2-very-secret" }
  kafka:
    sasl:
      mechanism: SCRAM-SHA-512
      username: { value: kuser }
      password: { value: "kafka-pass-very-secret" }
    tls: {}
open:
  aws:
    accessKeyId: { value: AKIDEXAMPLE }
    secretAccessKey: { value: "aws-secret-very-secret" }
"#;

    fn profiles() -> Profiles {
        let p: Profiles = serde_yaml_ng::from_str(YAML).expect("parses");
        p.validate().expect("valid");
        p
    }

    #[test]
    fn parses_resolves_and_checks_namespaces() {
        let p = profiles();
        assert_eq!(p.names().collect::<Vec<_>>(), ["open", "team-a"]);
        assert!(p.resolve("team-a", "team-a").is_ok());
        let err = p.resolve("team-a", "other").expect_err("denied");
        assert!(err.is_permission_denied(), "{err}");
        assert_eq!(
            err.to_string(),
            "namespace `other` may not use credential profile `team-a`"
        );
        assert!(p.resolve("open", "anything").is_ok());
        let err = p.resolve("nope", "x").expect_err("unknown");
        assert!(!err.is_permission_denied());
        assert!(
            err.to_string().contains("configured: open, team-a"),
            "{err}"
        );
        let team_a = p.resolve("team-a", "staging").expect("ok");
        assert!(team_a.require("team-a", Section::Kafka).is_ok());
        let err = team_a.require("team-a", Section::Aws).expect_err("no aws");
        assert_eq!(
            err.to_string(),
            "credential profile `team-a` has no `aws` section"
        );
    }

    #[test]
    fn secrets_never_show_in_debug() {
        let p = profiles();
        p.check_secrets().expect("readable");
        let team_a = p.get("team-a").expect("exists");
        let creds = team_a
            .rabbitmq
            .as_ref()
            .expect("section")
            .credentials("team-a")
            .expect("reads");
        let settings = team_a
            .kafka
            .as_ref()
            .expect("section")
            .client_settings("team-a")
            .expect("reads");
        let aws = p.get("open").expect("exists").aws.as_ref().expect("aws");
        let keys = aws.keys("open").expect("reads").expect("static");
        let debug = format!("{p:?} {creds:?} {settings:?} {keys:?} {:?}", p.clone());
        for secret in [
            "hunter2-very-secret",
            "kafka-pass-very-secret",
            "aws-secret-very-secret",
        ] {
            assert!(!debug.contains(secret), "{secret} leaked: {debug}");
        }
        assert_eq!(creds.password.expose(), "hunter2-very-secret");
        assert!(
            settings
                .settings
                .iter()
                .any(|(k, v)| *k == "security.protocol" && v.expose() == "SASL_SSL")
        );
        assert_eq!(
            settings.scrub("auth failed for kafka-pass-very-secret"),
            "auth failed for [redacted]"
        );
    }

    #[test]
    fn env_and_file_sources() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("password");
        std::fs::write(&path, "from-a-file\n").expect("write");
        let file = SecretRef::File(path.clone());
        assert_eq!(file.read().expect("reads").expose(), "from-a-file");
        // PATH is set in every test environment; no set_var needed.
        assert!(SecretRef::Env("PATH".into()).read().is_ok());
        let err = SecretRef::Env("BACKLOG_SCALER_SURELY_UNSET_VARIABLE".into())
            .read()
            .expect_err("unset");
        assert!(
            err.contains("BACKLOG_SCALER_SURELY_UNSET_VARIABLE"),
            "{err}"
        );
        let err = SecretRef::File(dir.path().join("missing"))
            .read()
            .expect_err("missing");
        assert!(err.contains("missing"), "{err}");
        std::fs::write(&path, "").expect("write");
        assert!(file.read().expect_err("empty").contains("empty"));
    }

    #[test]
    fn bad_profiles_are_refused() {
        for (yaml, needle) in [
            ("a: { colour: blue }", "colour"),
            (
                "a: { rabbitmq: { username: { value: u }, password: { value: p, env: X } } }",
                "exactly one",
            ),
            ("a: { namespaces: [] }", "omit it"),
            ("a: { aws: { accessKeyId: { value: x } } }", "both"),
            ("a: { aws: {} }", "profileName"),
            (
                "a: { aws: { profileName: p, accessKeyId: { value: x }, secretAccessKey: { value: y } } }",
                "not both",
            ),
            (
                "a: { kafka: { tls: { cert: { file: /c } } } }",
                "`cert` and `key`",
            ),
            (
                "a: { kafka: { sasl: { mechanism: GSSAPI, username: { value: u }, password: { value: p } } } }",
                "GSSAPI",
            ),
            ("'bad name': { }", "profile name"),
        ] {
            let err = serde_yaml_ng::from_str::<Profiles>(yaml)
                .map_err(|e| e.to_string())
                .and_then(|p| p.validate().map_err(|e| e.to_string()))
                .expect_err(yaml);
            assert!(err.contains(needle), "{yaml}: {err}");
        }
    }

    #[test]
    fn short_passwords_are_refused_when_read() {
        let profile = RabbitMqProfile {
            username: SecretRef::Value(Secret::new("u")),
            password: SecretRef::Value(Secret::new("pw")),
        };
        let err = profile.credentials("x").expect_err("short");
        assert!(err.to_string().contains("shorter than 4"), "{err}");
        assert!(!err.to_string().contains("pw\""), "{err}");
    }
}
