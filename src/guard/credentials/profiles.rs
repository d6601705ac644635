//! The `profiles` map of the scaler config: named profiles, who may use
//! each, and reading every secret once at start-up.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::error::{ProfileError, Section, valid_profile_name};
use super::rotation::PrometheusAuth;
use super::sections::{AwsProfile, KafkaProfile, PrometheusProfile, RabbitMqProfile};

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
            .ok_or_else(|| ProfileError::unknown(name, self.profiles.keys().cloned().collect()))
    }

    /// Structural checks, no I/O: names, namespace lists, AWS key pairs,
    /// TLS cert/key pairs. Call when the config is parsed.
    pub fn validate(&self) -> Result<(), ProfileError> {
        for (name, profile) in &self.profiles {
            let invalid = |reason: &str| ProfileError::invalid(name, reason);
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

    /// Prometheus credentials of every profile that has them, read now and
    /// read again whenever one of their files changes.
    pub fn prometheus_auth(
        &self,
    ) -> Result<std::collections::HashMap<String, PrometheusAuth>, ProfileError> {
        let mut auth = std::collections::HashMap::new();
        for (name, profile) in &self.profiles {
            if let Some(prometheus) = &profile.prometheus {
                auth.insert(name.clone(), PrometheusAuth::load(name, prometheus)?);
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
