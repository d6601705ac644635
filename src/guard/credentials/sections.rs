//! The sections of a profile: Prometheus, AWS, Kafka and RabbitMQ
//! credentials, and what each becomes when its secrets are read.

use std::fmt;

use serde::Deserialize;

use super::error::{ProfileError, read_field, read_optional};
use super::secret::{Secret, SecretRef};

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
    /// The files this section's secrets are read from (`{file: …}`), in
    /// field order: the files `PrometheusAuth` watches.
    pub fn files(&self) -> Vec<&std::path::Path> {
        let basic = self
            .basic_auth
            .iter()
            .flat_map(|b| [&b.username, &b.password]);
        self.bearer_token
            .iter()
            .chain(basic)
            .chain(self.headers.values())
            .filter_map(|secret| match secret {
                SecretRef::File(path) => Some(path.as_path()),
                SecretRef::Value(_) | SecretRef::Env(_) => None,
            })
            .collect()
    }

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
