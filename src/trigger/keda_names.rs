//! Keys of KEDA's built-in scalers that a copied trigger brings along and
//! that mean something else here: each is refused with what to write
//! instead, the number already converted where one can be. (The names that
//! mean the same are aliases: `keys::KEDA_ALIASES`, folded in `values.rs`.)

use super::error::{MetadataError, Redacted, invalid};
use super::keys;

/// The refusal of KEDA key `key` (one of [`keys::KEDA_REFUSED`]), sent as
/// `sent_key` with `value`. `weight` is the trigger's valid `messageWeight`
/// (1 when unset), used to convert message counts into requests.
pub fn refusal(sent_key: &str, key: &str, value: &str, weight: f64) -> MetadataError {
    // A number written as KEDA reads it, converted with the weight: the
    // replacement a user can paste.
    let converted = |target: &str| match value.parse::<f64>() {
        // The number is echoed as a value is (cut): `0.000…1` can be megabytes.
        Ok(v) if v.is_finite() => format!(
            "write `{target}: \"{}\"` instead ({} messages × messageWeight {weight})",
            v * weight,
            Redacted::new(value)
        ),
        _ => format!("write `{target}` instead (the number × messageWeight)"),
    };
    let target_text = |scaler: &str| {
        format!(
            "{scaler}; here one replica absorbs `targetBacklogPerReplica` requests and each message counts `messageWeight` requests, so {}",
            converted(keys::TARGET_BACKLOG_PER_REPLICA)
        )
    };
    let activation_text = |scaler: &str| {
        format!(
            "{scaler}; here the trigger is active when `B > activationBacklog`, and `B` counts each message as `messageWeight` requests, so {}",
            converted(keys::ACTIVATION_BACKLOG)
        )
    };
    let allowed = match key {
        keys::LAG_THRESHOLD => {
            target_text("in KEDA's kafka scaler this is the lag target per replica, in messages (default 10)")
        }
        keys::QUEUE_LENGTH => target_text(
            "in KEDA's aws-sqs-queue scaler this is the target per replica, in messages (default 5; rabbitmq's deprecated name for `value`)",
        ),
        keys::VALUE => format!(
            "{}; KEDA's rate modes have no equivalent here",
            target_text(
                "in KEDA's rabbitmq scaler this is the per-replica target of its `mode` (messages under `QueueLength`)"
            )
        ),
        keys::ACTIVATION_LAG_THRESHOLD => {
            activation_text("in KEDA's kafka scaler this is the activation threshold, in messages of lag")
        }
        keys::ACTIVATION_QUEUE_LENGTH => {
            activation_text("in KEDA's aws-sqs-queue scaler this is the activation threshold, in messages")
        }
        keys::ACTIVATION_VALUE => activation_text(
            "in KEDA's rabbitmq scaler this is the activation threshold of its `mode` (messages under `QueueLength`)",
        ),
        keys::QUERY => "in KEDA's prometheus scaler this is the metric itself (one series; an empty answer reads 0 by default); here the query for requests waiting is `waitingQuery`, which sums its series and reads an empty answer as a lost signal unless `replicasQuery` answers 0: write `waitingQuery` instead (with `prometheusAddress`)".to_owned(),
        _ => "this scaler does not read it".to_owned(),
    };
    invalid(sent_key, value, allowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refused_key_has_its_own_text() {
        for key in keys::KEDA_REFUSED {
            let text = refusal(key, key, "10", 2.0).to_string();
            assert!(!text.contains("this scaler does not read it"), "{text}");
            assert!(
                text.starts_with(&format!("metadata key `{key}` has value `10`")),
                "{text}"
            );
        }
        let text = refusal("lagThreshold", keys::LAG_THRESHOLD, "10", 4.0).to_string();
        assert!(
            text.contains("write `targetBacklogPerReplica: \"40\"` instead"),
            "{text}"
        );
        let text = refusal(
            "activationQueueLength",
            keys::ACTIVATION_QUEUE_LENGTH,
            "x",
            1.0,
        )
        .to_string();
        assert!(
            text.contains("write `activationBacklog` instead (the number × messageWeight)"),
            "{text}"
        );
    }
}
