//! KEDA's `aws-sqs-queue`, `kafka` and `rabbitmq` triggers: the broker keys
//! of the fused trigger (KEDA's names where this scaler keeps them) and the
//! per-replica target in messages, which the fused trigger turns into
//! `targetBacklogPerReplica` and `messageWeight`.

use super::model::{Key, Old, number_text, strip_userinfo};
use crate::guard::credentials::Section;
use crate::trigger::keys;

/// One broker trigger, understood.
#[derive(Debug, Clone)]
pub struct BrokerPart {
    /// Where it was.
    pub origin: String,
    /// Its keys, carried (the target and activation are resolved later).
    pub keys: Vec<Key>,
    /// Messages per replica (`queueLength`, `lagThreshold`, `value`).
    pub per_replica: f64,
    /// Which key and value that was, for the explanation.
    pub per_replica_from: String,
    /// Activation threshold in messages.
    pub activation: f64,
    /// Which key that was.
    pub activation_from: String,
    /// The profile section its credentials go in.
    pub section: Section,
    /// Keys of the trigger this tool does not carry, each with why.
    pub not_carried: Vec<String>,
}

/// A KEDA key carried under this scaler's name, as written or as
/// `…FromEnv` (KEDA resolves that from the workload's env and forwards the
/// value; the placeholder stands in for it when the metadata is validated).
fn carry(old: &Old, keda: &str, ours: &'static str, placeholder: &str, out: &mut Vec<Key>) -> bool {
    if let Some(v) = old.get(keda) {
        let (value, had_credentials) = strip_userinfo(v);
        let mut why = format!("{}: `{keda}`, same meaning here", old.origin);
        if had_credentials {
            why.push_str("; the credentials in it were left out (a profile holds them, see below)");
        }
        out.push(Key::new(ours, &value, why));
        return true;
    }
    let from_env = format!("{keda}FromEnv");
    if let Some(v) = old.get(&from_env) {
        let mut key = Key::new_owned(
            format!("{ours}FromEnv"),
            v,
            format!(
                "{}: `{from_env}`; KEDA resolves it from the workload's environment and forwards the value (not checked here: it must not carry credentials)",
                old.origin
            ),
        );
        key.check_value = Some(placeholder.to_owned());
        out.push(key);
        return true;
    }
    false
}

fn number(old: &Old, key: &str, default: f64) -> Result<(f64, String), String> {
    match old.get(key) {
        None => Ok((
            default,
            format!("`{key}` unset, KEDA's default {}", number_text(default)),
        )),
        Some(raw) => raw
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| (v, format!("`{key}: {raw}`")))
            .ok_or(format!("`{key}: {raw}` is not a number ≥ 0")),
    }
}

/// The keys every broker trigger of its type is read with; any other key
/// is named as not carried.
fn leftovers(old: &Old, handled: &[&str], why: impl Fn(&str) -> String) -> Vec<String> {
    old.metadata
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| {
            let base = k.strip_suffix("FromEnv").unwrap_or(k);
            !handled.contains(&base)
        })
        .map(|k| format!("{}: `{k}` {}", old.origin, why(k)))
        .collect()
}

/// Understand an `aws-sqs-queue`, `kafka` or `rabbitmq` trigger.
pub fn classify(old: &Old) -> Result<BrokerPart, String> {
    match old.kind.as_str() {
        "aws-sqs-queue" => sqs(old),
        "kafka" => kafka(old),
        "rabbitmq" => rabbitmq(old),
        other => Err(format!("type `{other}` is not a broker")),
    }
}

fn sqs(old: &Old) -> Result<BrokerPart, String> {
    let mut out = Vec::new();
    if !carry(old, "queueURL", keys::QUEUE_URL, "env-queue", &mut out) {
        return Err("has no `queueURL`".to_owned());
    }
    if !carry(old, "awsRegion", keys::AWS_REGION, "eu-west-1", &mut out) {
        return Err("has no `awsRegion`".to_owned());
    }
    carry(
        old,
        "awsEndpoint",
        keys::AWS_ENDPOINT,
        "http://127.0.0.1:1",
        &mut out,
    );
    for (keda, ours) in [
        ("scaleOnInFlight", keys::SCALE_ON_IN_FLIGHT),
        ("scaleOnDelayed", keys::SCALE_ON_DELAYED),
    ] {
        carry(old, keda, ours, "true", &mut out);
    }
    let (per_replica, per_replica_from) = number(old, "queueLength", 5.0)?;
    let (activation, activation_from) = number(old, "activationQueueLength", 0.0)?;
    let handled = [
        "queueURL",
        "awsRegion",
        "awsEndpoint",
        "scaleOnInFlight",
        "scaleOnDelayed",
        "queueLength",
        "activationQueueLength",
    ];
    let not_carried = leftovers(old, &handled, |k| {
        match k {
        "identityOwner" | "awsRoleArn" | "awsAccessKeyID" | "awsSecretAccessKey"
        | "awsSessionToken" => "is KEDA's identity for AWS; this scaler reads SQS with its own (IRSA on its service account, the default chain, or a profile's `aws:` keys)".to_owned(),
        _ => "is not read by this scaler's SQS source".to_owned(),
    }
    });
    Ok(BrokerPart {
        origin: old.origin.clone(),
        keys: out,
        per_replica: positive_target(per_replica, &per_replica_from)?,
        per_replica_from,
        activation,
        activation_from,
        section: Section::Aws,
        not_carried,
    })
}

fn kafka(old: &Old) -> Result<BrokerPart, String> {
    let mut out = Vec::new();
    if !carry(
        old,
        "bootstrapServers",
        keys::BOOTSTRAP_SERVERS,
        "env-kafka:9092",
        &mut out,
    ) {
        return Err("has no `bootstrapServers`".to_owned());
    }
    if !carry(
        old,
        "consumerGroup",
        keys::CONSUMER_GROUP,
        "env-group",
        &mut out,
    ) {
        return Err("has no `consumerGroup`".to_owned());
    }
    carry(old, "topic", keys::TOPIC, "env-topic", &mut out);
    for (keda, ours) in [
        ("offsetResetPolicy", keys::OFFSET_RESET_POLICY),
        ("allowIdleConsumers", keys::ALLOW_IDLE_CONSUMERS),
        (
            "scaleToZeroOnInvalidOffset",
            keys::SCALE_TO_ZERO_ON_INVALID_OFFSET,
        ),
        ("excludePersistentLag", keys::EXCLUDE_PERSISTENT_LAG),
        (
            "limitToPartitionsWithLag",
            keys::LIMIT_TO_PARTITIONS_WITH_LAG,
        ),
    ] {
        carry(old, keda, ours, "false", &mut out);
    }
    let (per_replica, per_replica_from) = number(old, "lagThreshold", 10.0)?;
    let (activation, activation_from) = number(old, "activationLagThreshold", 0.0)?;
    let handled = [
        "bootstrapServers",
        "consumerGroup",
        "topic",
        "offsetResetPolicy",
        "allowIdleConsumers",
        "scaleToZeroOnInvalidOffset",
        "excludePersistentLag",
        "limitToPartitionsWithLag",
        "lagThreshold",
        "activationLagThreshold",
    ];
    let not_carried = leftovers(old, &handled, |k| {
        match k {
        "sasl" | "saslType" | "tls" | "username" | "password" | "ca" | "cert" | "key"
        | "keyPassword" | "unsafeSsl" => {
            "is Kafka authentication: this scaler takes it from a profile's `kafka:` section (sasl, tls)".to_owned()
        }
        "partitionLimitation" => "has no equivalent: the lag of every partition of the topic counts".to_owned(),
        "version" => "is not needed: librdkafka negotiates the protocol version".to_owned(),
        _ => "is not read by this scaler's Kafka source".to_owned(),
    }
    });
    Ok(BrokerPart {
        origin: old.origin.clone(),
        keys: out,
        per_replica: positive_target(per_replica, &per_replica_from)?,
        per_replica_from,
        activation,
        activation_from,
        section: Section::Kafka,
        not_carried,
    })
}

fn rabbitmq(old: &Old) -> Result<BrokerPart, String> {
    if let Some(mode) = old.get("mode")
        && mode != "QueueLength"
    {
        return Err(format!(
            "`mode: {mode}` scales on a rate; this scaler counts the messages in the queue (QueueLength) and has no rate target"
        ));
    }
    let mut out = Vec::new();
    if !carry(
        old,
        "host",
        keys::RABBITMQ_HOST,
        "amqp://env-rabbitmq:5672",
        &mut out,
    ) {
        return Err("has no `host` (a host only in a TriggerAuthentication cannot be read from here: write `rabbitmqHost` without credentials)".to_owned());
    }
    if !carry(old, "queueName", keys::QUEUE_NAME, "env-queue", &mut out) {
        return Err("has no `queueName`".to_owned());
    }
    for (keda, ours) in [
        ("protocol", keys::PROTOCOL),
        ("vhostName", keys::VHOST_NAME),
        ("excludeUnacknowledged", keys::EXCLUDE_UNACKNOWLEDGED),
    ] {
        carry(old, keda, ours, "false", &mut out);
    }
    let value_key = if old.get("value").is_some() {
        "value"
    } else {
        "queueLength"
    };
    if old.get(value_key).is_none() {
        return Err("has no `value`: this tool does not assume a per-replica target".to_owned());
    }
    let (per_replica, per_replica_from) = number(old, value_key, 0.0)?;
    let (activation, activation_from) = number(old, "activationValue", 0.0)?;
    let handled = [
        "host",
        "queueName",
        "protocol",
        "vhostName",
        "excludeUnacknowledged",
        "mode",
        "value",
        "queueLength",
        "activationValue",
    ];
    let not_carried = leftovers(old, &handled, |k| match k {
        "username" | "password" => {
            "is a RabbitMQ credential: this scaler takes it from a profile's `rabbitmq:` section"
                .to_owned()
        }
        "useRegex" | "operation" => "has no equivalent: one named queue is read".to_owned(),
        _ => "is not read by this scaler's RabbitMQ source".to_owned(),
    });
    Ok(BrokerPart {
        origin: old.origin.clone(),
        keys: out,
        per_replica: positive_target(per_replica, &per_replica_from)?,
        per_replica_from,
        activation,
        activation_from,
        section: Section::RabbitMq,
        not_carried,
    })
}

fn positive_target(value: f64, from: &str) -> Result<f64, String> {
    if value > 0.0 {
        Ok(value)
    } else {
        Err(format!("{from}: a per-replica target must be > 0"))
    }
}
