//! Credential profiles: named sets of broker credentials in the scaler's own
//! `--config` file, referenced from trigger metadata by `authProfile`.
//!
//! Rule: nothing here prints a secret (every holder of one redacts its
//! `Debug`; errors name the variable or file, never its content).
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
//! start-up so a missing variable or file fails fast. The broker sources
//! read them again whenever they (re)build a client: the first reading, and
//! the reading after any failed one, so a rotated broker Secret takes effect
//! once the old credentials stop working, without a restart. Prometheus
//! credentials ([`PrometheusAuth`]) are read again on the first query after
//! one of their files changed, so a projected service-account token that the
//! kubelet rotates is sent as soon as it is written.
//!
//! Nothing here prints a secret: [`Secret`] and every struct holding one have
//! a `Debug` that redacts, and errors name the variable or file, never its
//! value.
//!
//! Layout: [`secret`] (a secret and where it is read from), [`error`] (why a
//! profile cannot serve, the profile-name rule), [`sections`] (the per-broker
//! and Prometheus sections, and the client settings built from them),
//! [`profiles`] (the map of named profiles, resolution by namespace),
//! [`rotation`] (Prometheus credentials that follow their files).

pub mod error;
pub mod profiles;
pub mod rotation;
pub mod secret;
pub mod sections;

pub use error::{ProfileError, Section, valid_profile_name};
pub use profiles::{Profile, Profiles};
pub use rotation::PrometheusAuth;
pub use secret::{Secret, SecretRef};
pub use sections::{
    AwsKeys, AwsProfile, BasicAuth, KafkaClientSettings, KafkaProfile, KafkaSasl, KafkaTls,
    PrometheusProfile, RabbitMqCredentials, RabbitMqProfile, RequestAuth, SaslMechanism,
};

#[cfg(test)]
mod tests;
