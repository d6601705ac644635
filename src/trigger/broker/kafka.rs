//! Kafka keys → a [`KafkaSource`].

use crate::source::broker::kafka::{KafkaSource, OffsetResetPolicy};
use crate::trigger::error::{MetadataError, invalid};
use crate::trigger::keys;
use crate::trigger::values::Metadata;

/// Longest Kafka topic name.
const MAX_TOPIC_LEN: usize = 249;

/// Parse the Kafka keys (`bootstrapServers` is present).
pub fn parse(
    md: &Metadata<'_>,
    auth_profile: Option<String>,
    errors: &mut Vec<MetadataError>,
) -> Option<KafkaSource> {
    let servers = md
        .non_empty(keys::BOOTSTRAP_SERVERS, errors)
        .and_then(|(sent, value)| match parse_servers(value) {
            Ok(servers) => Some(servers),
            Err(reason) => {
                errors.push(invalid(sent, value, reason));
                None
            }
        });
    let group = md
        .required(
            keys::CONSUMER_GROUP,
            "the consumer group whose lag is read, e.g. `inference-workers`",
            errors,
        )
        .map(|(_, v)| v.to_owned());
    let topic = match md.non_empty(keys::TOPIC, errors) {
        None => None,
        Some((sent, value)) => {
            let valid = value.len() <= MAX_TOPIC_LEN
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if valid {
                Some(value.to_owned())
            } else {
                errors.push(invalid(
                    sent,
                    value,
                    "a Kafka topic name: letters, digits, `.`, `_`, `-`",
                ));
                None
            }
        }
    };
    // Any case, as every enum-like key (KEDA itself wants lower case; a
    // capitalised value has only one meaning here).
    let offset_reset_policy = match md.get(keys::OFFSET_RESET_POLICY) {
        None => OffsetResetPolicy::Latest,
        Some((_, value)) if value.eq_ignore_ascii_case("latest") => OffsetResetPolicy::Latest,
        Some((_, value)) if value.eq_ignore_ascii_case("earliest") => OffsetResetPolicy::Earliest,
        Some((sent, value)) => {
            errors.push(invalid(sent, value, "`latest` or `earliest`"));
            OffsetResetPolicy::Latest
        }
    };
    let scale_to_zero_on_invalid_offset =
        md.bool(keys::SCALE_TO_ZERO_ON_INVALID_OFFSET, false, errors);
    let allow_idle_consumers = md.bool(keys::ALLOW_IDLE_CONSUMERS, false, errors);
    let exclude_persistent_lag = md.bool(keys::EXCLUDE_PERSISTENT_LAG, false, errors);
    let limit_to_partitions_with_lag = md.bool(keys::LIMIT_TO_PARTITIONS_WITH_LAG, false, errors);
    if limit_to_partitions_with_lag {
        if let Some((sent, value)) = md.get(keys::LIMIT_TO_PARTITIONS_WITH_LAG)
            && md.get(keys::TOPIC).is_none()
        {
            errors.push(invalid(sent, value, "needs `topic` (as in KEDA)"));
        }
        if allow_idle_consumers && let Some((sent, value)) = md.get(keys::ALLOW_IDLE_CONSUMERS) {
            errors.push(invalid(
                sent,
                value,
                "`allowIdleConsumers` and `limitToPartitionsWithLag` cannot both be true",
            ));
        }
    }
    Some(KafkaSource {
        bootstrap_servers: servers?,
        consumer_group: group?,
        topic,
        offset_reset_policy,
        scale_to_zero_on_invalid_offset,
        allow_idle_consumers,
        exclude_persistent_lag,
        limit_to_partitions_with_lag,
        auth_profile,
    })
}

/// `host:port[,host:port…]` → sorted, deduplicated entries.
fn parse_servers(value: &str) -> Result<Vec<String>, String> {
    const ALLOWED: &str = "a comma-separated list of host:port, e.g. `kafka-0.kafka:9092,kafka-1.kafka:9092` (no scheme)";
    let mut servers = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (host, port) = entry.rsplit_once(':').ok_or_else(|| ALLOWED.to_owned())?;
        let host_ok = !host.is_empty()
            && !host.contains(['/', '@', ' '])
            && (host.starts_with('[') == host.ends_with(']'));
        if !host_ok || port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(ALLOWED.to_owned());
        }
        servers.push(entry.to_owned());
    }
    if servers.is_empty() {
        return Err(ALLOWED.to_owned());
    }
    servers.sort();
    servers.dedup();
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers() {
        assert_eq!(
            parse_servers("b:1, a:2,b:1,[::1]:9092"),
            Ok(vec![
                "[::1]:9092".to_owned(),
                "a:2".to_owned(),
                "b:1".to_owned()
            ])
        );
        for bad in ["", "a", "a:0", "a:x", "PLAINTEXT://a:1", "u@a:1", ":1"] {
            assert!(parse_servers(bad).is_err(), "{bad}");
        }
    }
}
