//! Kafka consumer-group lag, as KEDA's `kafka` scaler counts it.
//!
//! Per partition, lag = high watermark − the group's committed offset. A
//! partition without a committed offset counts 1 under `offsetResetPolicy:
//! latest` and its high watermark under `earliest`, or 0 with
//! `scaleToZeroOnInvalidOffset`. With `excludePersistentLag`, a partition
//! whose committed offset has not moved since the previous reading counts 0
//! for scaling; activation still counts it (`lagWithPersistent`, the total
//! KEDA's IsActive compares). Unless `allowIdleConsumers`, the reading carries the
//! partition count that caps replicas (all partitions, or those with lag
//! under `limitToPartitionsWithLag`). Without `topic`, a group that has
//! committed nothing (or does not exist) is a failed reading, never 0.
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
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use tokio::task::JoinHandle;

use self::egress::Recipe;
pub use super::context::LAG_WITH_PERSISTENT;
use super::context::{BrokerContext, BrokerReading, join_error};
use crate::guard::credentials::KafkaClientSettings;
use crate::guard::outbound::OutboundPolicy;
use crate::source::error::{FailureKind, SourceError};
use crate::source::http::names_no_such_name;

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

/// A consumer used only for offset and metadata requests, built by the
/// first reading's blocking task once every broker address it may dial has
/// been checked (egress.rs), so an abandoned build is collected like any
/// abandoned reading.
struct KafkaClient {
    consumer: Arc<Mutex<Option<Arc<Kafka>>>>,
    recipe: Arc<Recipe>,
}

impl Drop for KafkaClient {
    fn drop(&mut self) {
        // Destroying a librdkafka handle joins its threads: keep that off
        // the async workers when a runtime is there to take it.
        let consumer = self
            .consumer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(consumer) = consumer
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
    /// Checked against every broker the cluster advertises, each reading.
    outbound: Arc<OutboundPolicy>,
    last_error: Mutex<Option<LastError>>,
}

/// The last error librdkafka reported on its own (not as a call's result):
/// the text (scrubbed) and what kind of failure it was. A request that
/// times out because SASL failed or a name did not resolve says only
/// "timed out"; this says why.
struct LastError {
    text: String,
    kind: FailureKind,
}

impl QuietContext {
    /// The kind and scrubbed reason of a failed request (`what`): the
    /// call's error, plus the broker's own last complaint, which says why a
    /// request could not get through (credentials, a name that does not
    /// resolve) where the call itself only timed out.
    fn failure_of(&self, what: &str, error: &KafkaError) -> (FailureKind, String) {
        let mut reason = format!("{what}: {error}");
        let mut kind = classify(error, &reason);
        if let Some(last) = self
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            reason.push_str(&format!(" (last broker error: {})", last.text));
            if kind == FailureKind::Unreachable {
                kind = last.kind;
            }
        }
        (kind, self.secrets.scrub(&reason))
    }
}

impl ClientContext for QuietContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        let message = self.secrets.scrub(log_message);
        tracing::debug!(source = %self.label, facility = fac, level = ?level, "librdkafka: {message}");
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let text = self.secrets.scrub(&format!("{error}: {reason}"));
        tracing::debug!(source = %self.label, "librdkafka error: {text}");
        let kind = classify(&error, &text);
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(LastError { text, kind });
    }
}

impl ConsumerContext for QuietContext {}

impl KafkaSource {
    /// `kafka GROUP/TOPIC` (`*` for every committed topic).
    pub fn label(&self) -> String {
        format!(
            "kafka {}/{}",
            self.consumer_group,
            self.topic.as_deref().unwrap_or("*")
        )
    }

    fn failure(&self, kind: FailureKind, detail: String) -> SourceError {
        SourceError::new(kind, self.label(), detail)
    }

    /// Without `topic`, the topics are those the group committed on; a
    /// group with no commit (or none at all: Kafka answers an unknown group
    /// with no offsets, not an error) leaves nothing to measure, and 0
    /// would read as "no backlog". A lost signal instead, naming the group.
    /// (KEDA's kafka scaler answers neither 0 nor an error here: it
    /// describes every topic of the cluster and counts each partition as
    /// uncommitted, kedacore/keda#8104.)
    fn no_commits(&self) -> SourceError {
        self.failure(
            FailureKind::Rejected,
            format!(
                "consumer group `{}` has no committed offset on any topic (it does not exist or has committed nothing), so without `topic` there is no lag to read; set `topic` to count its partitions by `offsetResetPolicy`",
                self.consumer_group
            ),
        )
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
                let (slot, recipe) = memory
                    .client
                    .as_ref()
                    .map(|c| (c.consumer.clone(), c.recipe.clone()))
                    .ok_or_else(|| {
                        self.failure(FailureKind::Internal, "no Kafka client".to_owned())
                    })?;
                let source = self.clone();
                let timeout = ctx.request_timeout;
                memory
                    .in_flight
                    .insert(tokio::task::spawn_blocking(move || {
                        let consumer = source.consumer(&slot, &recipe, timeout)?;
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
                    let kind = classify(&e, &text);
                    *context.last_error.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(LastError { text, kind });
                }
                Some(Ok(_)) => {}
            }
        }
        let fail = |what: &str, error: KafkaError| {
            let (kind, reason) = context.failure_of(what, &error);
            self.failure(kind, reason)
        };

        let metadata = consumer
            .fetch_metadata(self.topic.as_deref(), timeout)
            .map_err(|e| fail("metadata request failed", e))?;
        // The cluster may advertise other brokers than when the client was built.
        egress::advertised(&context.outbound, &metadata)
            .map_err(|r| self.failure(r.kind(), r.describe()))?;
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
                    let code = RDKafkaErrorCode::from(error);
                    return Err(self.failure(
                        classify_code(code),
                        format!("topic `{}`: {code}", topic.name()),
                    ));
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
            return Err(self.failure(
                FailureKind::Rejected,
                format!("topic `{name}` has no partitions in the metadata"),
            ));
        }
        if partitions.count() == 0 {
            // No topic named and none on the cluster: nothing was committed.
            return Err(self.no_commits());
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
            return Err(self.no_commits());
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

/// The kind of a librdkafka error; `text` (its description) tells a
/// failed name lookup from other transport failures.
fn classify(error: &KafkaError, text: &str) -> FailureKind {
    match error {
        KafkaError::ClientConfig(..) | KafkaError::ClientCreation(_) => FailureKind::Config,
        _ if text.contains("Failed to resolve") => FailureKind::Dns {
            no_such_name: names_no_such_name(text),
        },
        _ => error
            .rdkafka_error_code()
            .map_or(FailureKind::Unreachable, classify_code),
    }
}

/// The kind of a Kafka error code. Codes not listed (most are retriable
/// broker states: leader elections, coordinator loads) count as the broker
/// being unreachable for now.
fn classify_code(code: RDKafkaErrorCode) -> FailureKind {
    use RDKafkaErrorCode as C;
    match code {
        C::Authentication
        | C::SaslAuthenticationFailed
        | C::TopicAuthorizationFailed
        | C::GroupAuthorizationFailed
        | C::ClusterAuthorizationFailed
        | C::UnsupportedSASLMechanism
        | C::IllegalSASLState => FailureKind::Auth,
        C::Resolve => FailureKind::Dns {
            no_such_name: false,
        },
        C::UnknownTopicOrPartition
        | C::UnknownTopic
        | C::UnknownPartition
        | C::InvalidTopic
        | C::InvalidGroupId
        | C::GroupIdNotFound
        | C::UnsupportedVersion => FailureKind::Rejected,
        C::InvalidArgument => FailureKind::Config,
        _ => FailureKind::Unreachable,
    }
}

mod connect;
mod egress;
#[cfg(test)]
mod tests;
mod wire;
