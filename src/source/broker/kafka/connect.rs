//! Building the Kafka client: the profile's settings, then, on the
//! reading's blocking thread, every broker address checked (egress.rs)
//! before librdkafka may dial it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;

use super::egress::{self, Recipe};
use super::wire;
use super::{Kafka, KafkaClient, KafkaSource, QuietContext};
use crate::guard::credentials::{KafkaClientSettings, Section};
use crate::source::broker::context::BrokerContext;
use crate::source::error::{FailureKind, SourceError};

impl KafkaSource {
    /// The client of a reading that has none: settings and secrets now,
    /// the librdkafka handle itself at the first reading ([`Self::consumer`]).
    pub(super) fn connect(&self, ctx: &BrokerContext) -> Result<KafkaClient, SourceError> {
        let secrets = match &self.auth_profile {
            None => KafkaClientSettings::default(),
            Some(name) => {
                let profile = ctx
                    .profiles
                    .get(name)
                    .and_then(|p| p.require(name, Section::Kafka).map(|()| p))
                    .map_err(|e| self.failure(FailureKind::Config, e.to_string()))?;
                match &profile.kafka {
                    Some(kafka) => kafka
                        .client_settings(name)
                        .map_err(|e| self.failure(FailureKind::Config, e.to_string()))?,
                    None => KafkaClientSettings::default(),
                }
            }
        };
        let timeout_ms = ctx
            .request_timeout
            .as_millis()
            .clamp(10, 300_000)
            .to_string();
        let mut config = ClientConfig::new();
        config
            .set("client.id", "backlog-scaler")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("allow.auto.create.topics", "false")
            .set("socket.timeout.ms", &timeout_ms)
            .set("reconnect.backoff.max.ms", "2000")
            .set("log.connection.close", "false")
            .set_log_level(RDKafkaLogLevel::Warning);
        for (key, value) in &secrets.settings {
            config.set(*key, value.expose());
        }
        Ok(KafkaClient {
            consumer: Arc::default(),
            recipe: Arc::new(Recipe {
                config,
                secrets,
                outbound: ctx.outbound.clone(),
            }),
        })
    }

    /// Blocking: the consumer of `slot`, built now if it is not yet.
    pub(super) fn consumer(
        &self,
        slot: &Mutex<Option<Arc<Kafka>>>,
        recipe: &Recipe,
        timeout: Duration,
    ) -> Result<Arc<Kafka>, SourceError> {
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(consumer) = slot.as_ref() {
            return Ok(consumer.clone());
        }
        // The bootstrap servers' addresses are checked, then the brokers
        // they advertise; only then the consumer-group client, which dials
        // its coordinator as soon as it exists.
        let refused = |r: egress::Refused| self.failure(r.kind(), r.describe());
        let bootstrap = recipe.bootstrap(&self.bootstrap_servers).map_err(refused)?;
        let mut config = bootstrap.config;
        match &bootstrap.plaintext {
            // Asked without librdkafka, which would dial what it learns.
            Some(addrs) => {
                let brokers = wire::brokers(addrs, timeout).map_err(|reason| {
                    self.failure(
                        FailureKind::Unreachable,
                        format!("metadata request failed: {reason}"),
                    )
                })?;
                egress::check_advertised(&recipe.outbound, &brokers).map_err(refused)?;
            }
            // SASL and TLS: a librdkafka probe without `group.id`.
            None => {
                let probe = self.create(&config, recipe)?;
                let metadata = probe
                    .fetch_metadata(self.topic.as_deref(), timeout)
                    .map_err(|e| self.probe_failed(&probe, e))?;
                egress::advertised(&recipe.outbound, &metadata).map_err(refused)?;
            }
        }
        config.set("group.id", &self.consumer_group);
        let consumer = Arc::new(self.create(&config, recipe)?);
        *slot = Some(consumer.clone());
        Ok(consumer)
    }

    fn create(&self, config: &ClientConfig, recipe: &Recipe) -> Result<Kafka, SourceError> {
        let context = QuietContext {
            label: self.label(),
            secrets: recipe.secrets.clone(),
            outbound: recipe.outbound.clone(),
            last_error: Mutex::new(None),
        };
        // Never format `config`: its Debug prints every value.
        config.create_with_context(context).map_err(|e| {
            self.failure(
                FailureKind::Config,
                recipe
                    .secrets
                    .scrub(&format!("cannot create the Kafka client: {e}")),
            )
        })
    }

    /// The probe's metadata request failed; the broker's own complaint
    /// (served from the event queue into [`QuietContext::error`]) says why.
    fn probe_failed(&self, probe: &Kafka, error: KafkaError) -> SourceError {
        for _ in 0..1000 {
            if probe.poll(Duration::ZERO).is_none() {
                break;
            }
        }
        let (kind, reason) = probe
            .context()
            .failure_of("metadata request failed", &error);
        self.failure(kind, reason)
    }
}
