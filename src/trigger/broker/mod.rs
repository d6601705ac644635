//! Broker keys → a [`BrokerTrigger`]: which broker a trigger reads
//! (`queueURL`, `bootstrapServers` or `rabbitmqHost`, at most one), its
//! settings as KEDA's built-in scaler names them, and `messageWeight`.
//!
//! Rule: credentials never come from metadata (`authProfile` names a profile
//! of the scaler config), and parsing does no I/O.

use crate::guard::credentials::valid_profile_name;
use crate::source::broker::BrokerSource;
use crate::trigger::error::{MetadataError, invalid};
use crate::trigger::keys;
use crate::trigger::values::{Metadata, number};

mod kafka;
mod rabbitmq;
mod sqs;

/// A trigger's broker settings: the source plus how much one message weighs.
/// `messageWeight` is not part of the source identity (two triggers that
/// weigh the same queue differently share its poller).
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerTrigger {
    /// What to read (includes `authProfile`).
    pub source: BrokerSource,
    /// `w` (`messageWeight`): requests-equivalent per message, > 0. The
    /// fused demand adds `w·Q`.
    pub message_weight: f64,
}

/// What `authProfile` allows (the PromQL path checks it with the same words).
pub(crate) const PROFILE_NAME: &str =
    "the name of a profile in the scaler config: 1 to 63 letters, digits, `.`, `_` or `-`";

/// Which broker a key belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sqs,
    Kafka,
    RabbitMq,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Sqs, Kind::Kafka, Kind::RabbitMq];

    fn anchor(self) -> &'static str {
        match self {
            Kind::Sqs => keys::QUEUE_URL,
            Kind::Kafka => keys::BOOTSTRAP_SERVERS,
            Kind::RabbitMq => keys::RABBITMQ_HOST,
        }
    }

    fn keys(self) -> &'static [&'static str] {
        match self {
            Kind::Sqs => keys::SQS,
            Kind::Kafka => keys::KAFKA,
            Kind::RabbitMq => keys::RABBITMQ,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Sqs => "SQS",
            Kind::Kafka => "Kafka",
            Kind::RabbitMq => "RabbitMQ",
        }
    }
}

/// Parse a trigger's broker keys from the folded metadata (errors name each
/// key as sent, a `…FromEnv` spelling included).
///
/// Returns `Ok(None)` when the trigger uses no broker key; otherwise the
/// broker named by `queueURL`, `bootstrapServers` or `rabbitmqHost` (at most
/// one) with its `messageWeight` (`authProfile` is inside the source, being
/// part of its identity). Every problem is reported at once. No I/O.
pub fn parse_metadata(md: &Metadata<'_>) -> Result<Option<BrokerTrigger>, Vec<MetadataError>> {
    let mut errors = Vec::new();
    let anchors: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| md.get(k.anchor()).is_some())
        .collect();
    let Some(&kind) = anchors.first() else {
        // No broker: any broker key is a mistake worth naming.
        for k in Kind::ALL {
            for key in k.keys() {
                if let Some((sent, value)) = md.get(key) {
                    errors.push(invalid(
                        sent,
                        value,
                        format!("a {} key: set `{}` too", k.name(), k.anchor()),
                    ));
                }
            }
        }
        // `authProfile` also serves the Prometheus path; only the weight
        // is meaningless without a broker. A wrong weight is said to be
        // wrong too, or fixing the broker would only reveal it next.
        if let Some((sent, value)) = md.get(keys::MESSAGE_WEIGHT) {
            message_weight(md, &mut errors);
            errors.push(invalid(
                sent,
                value,
                "applies to a broker source: set `queueURL`, `bootstrapServers` or `rabbitmqHost`",
            ));
        }
        return if errors.is_empty() {
            Ok(None)
        } else {
            Err(errors)
        };
    };
    for other in &anchors[1..] {
        if let Some((sent, value)) = md.get(other.anchor()) {
            errors.push(invalid(
                sent,
                value,
                format!(
                    "one broker per trigger: this one already reads {} (`{}`); use a second trigger",
                    kind.name(),
                    kind.anchor()
                ),
            ));
        }
    }
    for k in Kind::ALL {
        if k == kind || anchors.contains(&k) {
            continue;
        }
        for key in k.keys() {
            if let Some((sent, value)) = md.get(key) {
                errors.push(invalid(
                    sent,
                    value,
                    format!(
                        "a {} key, but this trigger reads {} (`{}`)",
                        k.name(),
                        kind.name(),
                        kind.anchor()
                    ),
                ));
            }
        }
    }

    let message_weight = message_weight(md, &mut errors);
    let auth_profile = match md.get(keys::AUTH_PROFILE) {
        None => None,
        Some((_, value)) if valid_profile_name(value) => Some(value.to_owned()),
        Some((sent, value)) => {
            errors.push(invalid(sent, value, PROFILE_NAME));
            None
        }
    };

    let source = match kind {
        Kind::Sqs => sqs::parse(md, auth_profile, &mut errors).map(BrokerSource::Sqs),
        Kind::Kafka => kafka::parse(md, auth_profile, &mut errors).map(BrokerSource::Kafka),
        Kind::RabbitMq => {
            rabbitmq::parse(md, auth_profile, &mut errors).map(BrokerSource::RabbitMq)
        }
    };
    match source {
        Some(source) if errors.is_empty() => Ok(Some(BrokerTrigger {
            source,
            message_weight,
        })),
        _ => Err(errors),
    }
}

/// `messageWeight`, 1 when absent or wrong (the error is pushed).
fn message_weight(md: &Metadata<'_>, errors: &mut Vec<MetadataError>) -> f64 {
    number(
        md,
        keys::MESSAGE_WEIGHT,
        |w| w > 0.0,
        "a number greater than 0, e.g. `1` or `2.5`",
        errors,
    )
    .unwrap_or(1.0)
}

#[cfg(test)]
mod tests;
