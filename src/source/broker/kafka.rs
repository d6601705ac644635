//! Kafka consumer-group lag, as KEDA's `kafka` scaler counts it.
//!
//! Per partition, lag = high watermark − the group's committed offset. A
//! partition without a committed offset counts 1 under `offsetResetPolicy:
//! latest` and its high watermark under `earliest`, or 0 with
//! `scaleToZeroOnInvalidOffset`. With `excludePersistentLag`, a partition
//! whose committed offset has not moved since the previous reading counts 0
//! for scaling (its lag still shows in `lagWithPersistent`, which KEDA uses
//! for activation). Unless `allowIdleConsumers`, the reading carries the
//! partition count that caps replicas (all partitions, or those with lag
//! under `limitToPartitionsWithLag`).
//!
//! The scaler never joins the group: it reads committed offsets with an
//! OffsetFetch, watermarks with ListOffsets, and partitions from metadata.
//! Every librdkafka call blocks, so a reading runs in `spawn_blocking`, each
//! call bounded by the request timeout. If the poller gives up on a reading,
//! the next poll collects that same blocking call instead of starting
//! another, so a hung broker never piles up threads.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};
use tokio::task::JoinHandle;

use super::{BrokerContext, BrokerReading, Md, join_error, keys};
use crate::guard::credentials::{KafkaClientSettings, Section};
use crate::source::SourceError;

/// Longest Kafka topic name.
const MAX_TOPIC_LEN: usize = 249;
/// Key of the total lag including persistent lag, in the breakdown.
pub const LAG_WITH_PERSISTENT: &str = "lagWithPersistent";

/// Identity of a Kafka source.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KafkaSource {
    /// `bootstrapServers`, sorted and deduplicated.
    pub bootstrap_servers: Vec<String>,
    /// `consumerGroup`.
    pub consumer_group: String,
    /// `topic`; `None`: every topic the group has committed on.
    pub topic: Option<String>,
    /// `offsetResetPolicy`.
    pub offset_reset_policy: OffsetResetPolicy,
    /// `scaleToZeroOnInvalidOffset`.
    pub scale_to_zero_on_invalid_offset: bool,
    /// `allowIdleConsumers`.
    pub allow_idle_consumers: bool,
    /// `excludePersistentLag`.
    pub exclude_persistent_lag: bool,
    /// `limitToPartitionsWithLag`.
    pub limit_to_partitions_with_lag: bool,
    /// `authProfile`.
    pub auth_profile: Option<String>,
}

/// What a partition without a committed offset counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OffsetResetPolicy {
    /// 1 (the consumer would start at the end: one message to show life).
    Latest,
    /// The high watermark (the consumer would read everything).
    Earliest,
}

/// One partition's offsets as read from the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOffsets {
    /// Topic.
    pub topic: String,
    /// Partition id.
    pub partition: i32,
    /// The group's committed offset; `None` when it has none.
    pub committed: Option<i64>,
    /// The high watermark (offset of the next message to be written).
    pub high_watermark: i64,
}

/// Per-poller Kafka state.
#[derive(Default)]
pub(crate) struct KafkaMemory {
    client: Option<KafkaClient>,
    in_flight: Option<JoinHandle<Result<Vec<PartitionOffsets>, SourceError>>>,
    /// Committed offsets of the previous reading, for `excludePersistentLag`.
    previous: HashMap<(String, i32), i64>,
}

impl fmt::Debug for KafkaMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaMemory")
            .field("connected", &self.client.is_some())
            .field("in_flight", &self.in_flight.is_some())
            .field("previous_offsets", &self.previous.len())
            .finish()
    }
}

type Kafka = BaseConsumer<QuietContext>;

/// A consumer used only for offset and metadata requests.
struct KafkaClient {
    consumer: Option<Arc<Kafka>>,
}

impl Drop for KafkaClient {
    fn drop(&mut self) {
        // Destroying a librdkafka handle joins its threads: keep that off
        // the async workers when a runtime is there to take it.
        if let Some(consumer) = self.consumer.take()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            drop(handle.spawn_blocking(move || drop(consumer)));
        }
    }
}

/// Routes librdkafka's own logs to `debug` (the poller reports failures
/// once; librdkafka would repeat them on every reconnect), scrubbed of the
/// profile's secrets, and remembers the last broker error for messages.
struct QuietContext {
    label: String,
    secrets: KafkaClientSettings,
    last_error: Mutex<Option<String>>,
}

impl ClientContext for QuietContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        let message = self.secrets.scrub(log_message);
        tracing::debug!(source = %self.label, facility = fac, level = ?level, "librdkafka: {message}");
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let text = self.secrets.scrub(&format!("{error}: {reason}"));
        tracing::debug!(source = %self.label, "librdkafka error: {text}");
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(text);
    }
}

impl ConsumerContext for QuietContext {}

impl KafkaSource {
    /// Parse the Kafka keys (`bootstrapServers` is present).
    pub(crate) fn parse(md: &mut Md<'_, '_>, auth_profile: Option<String>) -> Option<KafkaSource> {
        let servers = md
            .non_empty(keys::BOOTSTRAP_SERVERS)
            .and_then(|(sent, value)| match parse_servers(value) {
                Ok(servers) => Some(servers),
                Err(reason) => {
                    md.invalid(sent, value, reason);
                    None
                }
            });
        let group = md
            .required(
                keys::CONSUMER_GROUP,
                "the consumer group whose lag is read, e.g. `inference-workers`",
            )
            .map(|(_, v)| v.to_owned());
        let topic = match md.non_empty(keys::TOPIC) {
            None => None,
            Some((sent, value)) => {
                let valid = value.len() <= MAX_TOPIC_LEN
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
                if valid {
                    Some(value.to_owned())
                } else {
                    md.invalid(
                        sent,
                        value,
                        "a Kafka topic name: letters, digits, `.`, `_`, `-`",
                    );
                    None
                }
            }
        };
        let offset_reset_policy = match md.get(keys::OFFSET_RESET_POLICY) {
            None => OffsetResetPolicy::Latest,
            Some((_, "latest")) => OffsetResetPolicy::Latest,
            Some((_, "earliest")) => OffsetResetPolicy::Earliest,
            Some((sent, value)) => {
                md.invalid(sent, value, "`latest` or `earliest`");
                OffsetResetPolicy::Latest
            }
        };
        let scale_to_zero_on_invalid_offset = md.bool(keys::SCALE_TO_ZERO_ON_INVALID_OFFSET, false);
        let allow_idle_consumers = md.bool(keys::ALLOW_IDLE_CONSUMERS, false);
        let exclude_persistent_lag = md.bool(keys::EXCLUDE_PERSISTENT_LAG, false);
        let limit_to_partitions_with_lag = md.bool(keys::LIMIT_TO_PARTITIONS_WITH_LAG, false);
        if limit_to_partitions_with_lag {
            if let Some((sent, value)) = md.get(keys::LIMIT_TO_PARTITIONS_WITH_LAG)
                && md.get(keys::TOPIC).is_none()
            {
                md.invalid(sent, value, "needs `topic` (as in KEDA)");
            }
            if allow_idle_consumers && let Some((sent, value)) = md.get(keys::ALLOW_IDLE_CONSUMERS)
            {
                md.invalid(
                    sent,
                    value,
                    "`allowIdleConsumers` and `limitToPartitionsWithLag` cannot both be true",
                );
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

    /// `kafka GROUP/TOPIC` (`*` for every committed topic).
    pub fn label(&self) -> String {
        format!(
            "kafka {}/{}",
            self.consumer_group,
            self.topic.as_deref().unwrap_or("*")
        )
    }

    fn upstream(&self, reason: String) -> SourceError {
        SourceError::Upstream {
            target: self.label(),
            reason,
        }
    }

    fn connect(&self, ctx: &BrokerContext) -> Result<KafkaClient, SourceError> {
        let secrets = match &self.auth_profile {
            None => KafkaClientSettings::default(),
            Some(name) => {
                let profile = ctx
                    .profiles
                    .get(name)
                    .and_then(|p| p.require(name, Section::Kafka).map(|()| p))
                    .map_err(|e| self.upstream(e.to_string()))?;
                match &profile.kafka {
                    Some(kafka) => kafka
                        .client_settings(name)
                        .map_err(|e| self.upstream(e.to_string()))?,
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
            .set("bootstrap.servers", self.bootstrap_servers.join(","))
            .set("group.id", &self.consumer_group)
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
        let context = QuietContext {
            label: self.label(),
            secrets: secrets.clone(),
            last_error: Mutex::new(None),
        };
        // Never format `config`: its Debug prints every value.
        let consumer: Kafka = config.create_with_context(context).map_err(|e| {
            self.upstream(secrets.scrub(&format!("cannot create the Kafka client: {e}")))
        })?;
        Ok(KafkaClient {
            consumer: Some(Arc::new(consumer)),
        })
    }

    /// One reading.
    pub(crate) async fn read(
        &self,
        ctx: &BrokerContext,
        memory: &mut KafkaMemory,
    ) -> Result<BrokerReading, SourceError> {
        if memory.client.is_none() && memory.in_flight.is_none() {
            memory.client = Some(self.connect(ctx)?);
        }
        let handle = match memory.in_flight.as_mut() {
            Some(handle) => handle,
            None => {
                let consumer = memory
                    .client
                    .as_ref()
                    .and_then(|c| c.consumer.clone())
                    .ok_or_else(|| self.upstream("no Kafka client".to_owned()))?;
                let source = self.clone();
                let timeout = ctx.request_timeout;
                memory
                    .in_flight
                    .insert(tokio::task::spawn_blocking(move || {
                        source.fetch_offsets(&consumer, timeout)
                    }))
            }
        };
        // If this future is dropped here (poller timeout), the handle stays
        // in memory and the next reading collects it.
        let joined = handle.await;
        memory.in_flight = None;
        let result = joined.unwrap_or_else(|e| Err(join_error(&self.label(), e)));
        match result {
            Ok(offsets) => Ok(self.lag_reading(&offsets, &mut memory.previous)),
            Err(error) => {
                // Rebuild the client (and re-read secrets) next time.
                memory.client = None;
                Err(error)
            }
        }
    }

    /// Blocking: metadata, committed offsets, high watermarks.
    fn fetch_offsets(
        &self,
        consumer: &Kafka,
        timeout: Duration,
    ) -> Result<Vec<PartitionOffsets>, SourceError> {
        let context = consumer.context();
        // Serve queued events (errors) so they neither pile up nor go unseen.
        for _ in 0..1000 {
            match consumer.poll(Duration::ZERO) {
                None => break,
                Some(Err(e)) => {
                    let text = context.secrets.scrub(&e.to_string());
                    *context.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(text);
                }
                Some(Ok(_)) => {}
            }
        }
        let fail = |what: &str, error: KafkaError| {
            let mut reason = format!("{what}: {error}");
            if let Some(last) = context
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
            {
                reason.push_str(&format!(" (last broker error: {last})"));
            }
            self.upstream(context.secrets.scrub(&reason))
        };

        let metadata = consumer
            .fetch_metadata(self.topic.as_deref(), timeout)
            .map_err(|e| fail("metadata request failed", e))?;
        let mut partitions = TopicPartitionList::new();
        for topic in metadata.topics() {
            let wanted = match &self.topic {
                Some(name) => topic.name() == name,
                None => !topic.name().starts_with("__"),
            };
            if !wanted {
                continue;
            }
            if let Some(error) = topic.error() {
                if self.topic.is_some() {
                    return Err(self.upstream(format!(
                        "topic `{}`: {}",
                        topic.name(),
                        rdkafka::types::RDKafkaErrorCode::from(error)
                    )));
                }
                continue;
            }
            for partition in topic.partitions() {
                partitions.add_partition(topic.name(), partition.id());
            }
        }
        if let Some(name) = &self.topic
            && partitions.count() == 0
        {
            return Err(self.upstream(format!("topic `{name}` has no partitions in the metadata")));
        }
        if partitions.count() == 0 {
            return Ok(Vec::new());
        }

        let committed = consumer
            .committed_offsets(partitions, timeout)
            .map_err(|e| fail("committed-offsets request failed", e))?;
        let mut rows: Vec<(String, i32, Option<i64>)> = Vec::new();
        for elem in committed.elements() {
            elem.error().map_err(|e| {
                fail(
                    &format!("committed offset of {}/{}", elem.topic(), elem.partition()),
                    e,
                )
            })?;
            let offset = match elem.offset() {
                Offset::Offset(n) if n >= 0 => Some(n),
                _ => None,
            };
            rows.push((elem.topic().to_owned(), elem.partition(), offset));
        }
        if self.topic.is_none() {
            // KEDA: the topics the group has committed offsets on.
            let committed_topics: std::collections::BTreeSet<String> = rows
                .iter()
                .filter(|(_, _, o)| o.is_some())
                .map(|(t, _, _)| t.clone())
                .collect();
            rows.retain(|(t, _, _)| committed_topics.contains(t));
        }
        if rows.is_empty() {
            return Ok(Vec::new());
        }

        let mut ends = TopicPartitionList::new();
        for (topic, partition, _) in &rows {
            ends.add_partition_offset(topic, *partition, Offset::End)
                .map_err(|e| fail("building the watermark request", e))?;
        }
        let ends = consumer
            .offsets_for_times(ends, timeout)
            .map_err(|e| fail("watermark request failed", e))?;
        let mut high: HashMap<(String, i32), i64> = HashMap::new();
        for elem in ends.elements() {
            if let (Ok(()), Offset::Offset(n)) = (elem.error(), elem.offset()) {
                high.insert((elem.topic().to_owned(), elem.partition()), n);
            }
        }
        let mut out = Vec::with_capacity(rows.len());
        for (topic, partition, committed) in rows {
            let high_watermark = match high.get(&(topic.clone(), partition)) {
                Some(n) => *n,
                // Not in the batched answer: ask for this partition alone.
                None => {
                    consumer
                        .fetch_watermarks(&topic, partition, timeout)
                        .map_err(|e| fail(&format!("watermarks of {topic}/{partition}"), e))?
                        .1
                }
            };
            out.push(PartitionOffsets {
                topic,
                partition,
                committed,
                high_watermark,
            });
        }
        Ok(out)
    }

    /// KEDA's lag arithmetic over one reading's offsets. Updates `previous`
    /// (committed offsets seen) for `excludePersistentLag`.
    pub fn lag_reading(
        &self,
        offsets: &[PartitionOffsets],
        previous: &mut HashMap<(String, i32), i64>,
    ) -> BrokerReading {
        let mut breakdown = BTreeMap::new();
        let mut total = 0.0;
        let mut total_with_persistent = 0.0;
        let mut with_lag = 0usize;
        for p in offsets {
            let (lag, lag_with_persistent) = match p.committed {
                None => {
                    let lag = if self.scale_to_zero_on_invalid_offset {
                        0
                    } else {
                        match self.offset_reset_policy {
                            OffsetResetPolicy::Latest => 1,
                            OffsetResetPolicy::Earliest => p.high_watermark.max(0),
                        }
                    };
                    (lag, lag)
                }
                Some(committed) => {
                    // A committed offset past the watermark (truncation) is no backlog.
                    let lag = (p.high_watermark - committed).max(0);
                    let key = (p.topic.clone(), p.partition);
                    if self.exclude_persistent_lag {
                        match previous.insert(key, committed) {
                            Some(before) if before == committed => (0, lag),
                            _ => (lag, lag),
                        }
                    } else {
                        (lag, lag)
                    }
                }
            };
            if lag > 0 {
                with_lag += 1;
            }
            total += lag as f64;
            total_with_persistent += lag_with_persistent as f64;
            breakdown.insert(format!("{}/{}", p.topic, p.partition), lag as f64);
        }
        breakdown.insert(LAG_WITH_PERSISTENT.to_owned(), total_with_persistent);
        let partitions = if self.limit_to_partitions_with_lag {
            Some(with_lag)
        } else if !self.allow_idle_consumers {
            Some(offsets.len())
        } else {
            None
        };
        BrokerReading {
            messages: total,
            partitions,
            breakdown,
        }
    }
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

    fn source() -> KafkaSource {
        KafkaSource {
            bootstrap_servers: vec!["127.0.0.1:9092".into()],
            consumer_group: "g".into(),
            topic: Some("t".into()),
            offset_reset_policy: OffsetResetPolicy::Latest,
            scale_to_zero_on_invalid_offset: false,
            allow_idle_consumers: false,
            exclude_persistent_lag: false,
            limit_to_partitions_with_lag: false,
            auth_profile: None,
        }
    }

    fn p(partition: i32, committed: Option<i64>, high_watermark: i64) -> PartitionOffsets {
        PartitionOffsets {
            topic: "t".into(),
            partition,
            committed,
            high_watermark,
        }
    }

    #[test]
    fn lag_is_watermark_minus_committed() {
        let offsets = [p(0, Some(3), 5), p(1, Some(5), 5), p(2, Some(0), 4)];
        let r = source().lag_reading(&offsets, &mut HashMap::new());
        assert_eq!(r.messages, 6.0);
        assert_eq!(r.partitions, Some(3));
        assert_eq!(r.breakdown["t/0"], 2.0);
        assert_eq!(r.breakdown["t/1"], 0.0);
        assert_eq!(r.breakdown[LAG_WITH_PERSISTENT], 6.0);
    }

    #[test]
    fn missing_commits_follow_the_reset_policy() {
        let offsets = [p(0, None, 7), p(1, Some(2), 3)];
        let latest = source().lag_reading(&offsets, &mut HashMap::new());
        assert_eq!(latest.messages, 2.0);
        let earliest = KafkaSource {
            offset_reset_policy: OffsetResetPolicy::Earliest,
            ..source()
        }
        .lag_reading(&offsets, &mut HashMap::new());
        assert_eq!(earliest.messages, 8.0);
        for policy in [OffsetResetPolicy::Latest, OffsetResetPolicy::Earliest] {
            let zero = KafkaSource {
                offset_reset_policy: policy,
                scale_to_zero_on_invalid_offset: true,
                ..source()
            }
            .lag_reading(&offsets, &mut HashMap::new());
            assert_eq!(zero.messages, 1.0, "{policy:?}");
        }
    }

    #[test]
    fn partition_cap_follows_keda() {
        let offsets = [p(0, Some(0), 5), p(1, Some(5), 5), p(2, Some(5), 5)];
        let idle = KafkaSource {
            allow_idle_consumers: true,
            ..source()
        }
        .lag_reading(&offsets, &mut HashMap::new());
        assert_eq!(idle.partitions, None);
        let limited = KafkaSource {
            limit_to_partitions_with_lag: true,
            ..source()
        }
        .lag_reading(&offsets, &mut HashMap::new());
        assert_eq!((limited.messages, limited.partitions), (5.0, Some(1)));
    }

    #[test]
    fn persistent_lag_counts_only_for_activation() {
        let s = KafkaSource {
            exclude_persistent_lag: true,
            ..source()
        };
        let mut previous = HashMap::new();
        let first = s.lag_reading(&[p(0, Some(2), 10), p(1, Some(4), 6)], &mut previous);
        assert_eq!(first.messages, 10.0, "first sight counts");
        // Partition 0 is stuck at 2; partition 1 moved on.
        let second = s.lag_reading(&[p(0, Some(2), 12), p(1, Some(5), 6)], &mut previous);
        assert_eq!(second.messages, 1.0);
        assert_eq!(second.breakdown["t/0"], 0.0);
        assert_eq!(second.breakdown[LAG_WITH_PERSISTENT], 11.0);
        // With the stuck partition at 0 lag for scaling, the cap does not count it.
        let limited = KafkaSource {
            limit_to_partitions_with_lag: true,
            ..s
        }
        .lag_reading(&[p(0, Some(2), 12), p(1, Some(6), 7)], &mut previous);
        assert_eq!(limited.partitions, Some(1));
    }

    #[test]
    fn truncated_partitions_have_no_negative_lag() {
        let r = source().lag_reading(&[p(0, Some(9), 4)], &mut HashMap::new());
        assert_eq!(r.messages, 0.0);
    }

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
