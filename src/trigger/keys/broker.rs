//! Broker keys: SQS, Kafka, RabbitMQ and what any broker source takes. Part of the
//! registry in `keys.rs` (re-exported there); KEDA's names and defaults where KEDA's
//! built-in scaler has the concept.

use super::{AUTH_PROFILE, concat};

// --- Brokers: SQS ------------------------------------------------------------

/// SQS: the queue, as a full URL
/// (`https://sqs.REGION.amazonaws.com/ACCOUNT/NAME`) or its name (looked
/// up once with GetQueueUrl). Selects the SQS source. Each reading is one
/// `GetQueueAttributes` call; `Q = ApproximateNumberOfMessages` (+
/// `…NotVisible` with `scaleOnInFlight`, + `…Delayed` with
/// `scaleOnDelayed`), as KEDA's `aws-sqs-queue`.
pub const QUEUE_URL: &str = "queueURL";
/// SQS: the AWS region, e.g. `eu-west-1`. Required with `queueURL`.
pub const AWS_REGION: &str = "awsRegion";
/// SQS: endpoint of an SQS-compatible server, e.g. `http://moto:5000`.
/// Default: AWS's endpoint for `awsRegion`.
pub const AWS_ENDPOINT: &str = "awsEndpoint";
/// SQS: count in-flight messages (received, not yet deleted:
/// `ApproximateNumberOfMessagesNotVisible`). A boolean
/// (`strconv.ParseBool`'s spellings, as KEDA), default `true` (KEDA's
/// default).
pub const SCALE_ON_IN_FLIGHT: &str = "scaleOnInFlight";
/// SQS: count delayed messages (`ApproximateNumberOfMessagesDelayed`).
/// A boolean (`strconv.ParseBool`'s spellings, as KEDA), default `false`.
pub const SCALE_ON_DELAYED: &str = "scaleOnDelayed";

// --- Brokers: Kafka ----------------------------------------------------------

/// Kafka: comma-separated `host:port` list. Selects the Kafka source.
/// `Q` is the consumer group's lag, summed over partitions: high
/// watermark − committed offset, as KEDA's `kafka` scaler.
pub const BOOTSTRAP_SERVERS: &str = "bootstrapServers";
/// Kafka: the consumer group whose committed offsets are read (the
/// scaler never joins it). Required with `bootstrapServers`.
pub const CONSUMER_GROUP: &str = "consumerGroup";
/// Kafka: the topic. Default: every topic on which the group has
/// committed an offset (internal `__` topics excluded); then a group with
/// no committed offset (or none at all) is a failed reading naming the
/// group, never a measured 0.
pub const TOPIC: &str = "topic";
/// Kafka: lag of a partition without a committed offset: `latest`
/// (default) counts 1, `earliest` counts the high watermark (every
/// message would be read), as the consumer's `auto.offset.reset`.
pub const OFFSET_RESET_POLICY: &str = "offsetResetPolicy";
/// Kafka: `true` counts 0 for a partition without a committed offset,
/// whatever `offsetResetPolicy` says. A boolean (`strconv.ParseBool`'s
/// spellings, as KEDA). Default `false`.
pub const SCALE_TO_ZERO_ON_INVALID_OFFSET: &str = "scaleToZeroOnInvalidOffset";
/// Kafka: `true` lets replicas exceed the partition count (idle
/// consumers). A boolean (`strconv.ParseBool`'s spellings, as KEDA).
/// Default `false`: the broker term is capped at
/// `targetBacklogPerReplica × partitions`, as KEDA caps replicas.
pub const ALLOW_IDLE_CONSUMERS: &str = "allowIdleConsumers";
/// Kafka: `true` counts 0 (for scaling) on a partition whose committed
/// offset has not moved since the previous reading, e.g. a poison
/// message; such lag still counts for activation (`activationBacklog`), as
/// KEDA's IsActive counts `lagWithPersistent`. A boolean
/// (`strconv.ParseBool`'s spellings, as KEDA). Default `false`.
pub const EXCLUDE_PERSISTENT_LAG: &str = "excludePersistentLag";
/// Kafka: `true` caps replicas at the number of partitions that have
/// lag, instead of all partitions. Needs `topic`; not with
/// `allowIdleConsumers: true`. A boolean (`strconv.ParseBool`'s
/// spellings, as KEDA). Default `false`.
pub const LIMIT_TO_PARTITIONS_WITH_LAG: &str = "limitToPartitionsWithLag";

// --- Brokers: RabbitMQ -------------------------------------------------------

/// RabbitMQ: `amqp://HOST:PORT[/VHOST]`, `amqps://…`, or the management
/// API `http(s)://HOST:PORT[/VHOST]`, WITHOUT credentials (they come from
/// `authProfile`; without one, `guest`/`guest`). Selects the RabbitMQ
/// source. KEDA's `host`, renamed because `host` is too generic here.
pub const RABBITMQ_HOST: &str = "rabbitmqHost";
/// RabbitMQ: `auto` (default: from the scheme of `rabbitmqHost`), `amqp`
/// or `http`. AMQP counts ready messages (a passive `queue.declare`);
/// HTTP counts ready + unacknowledged (`messages` of
/// `GET /api/queues/VHOST/QUEUE`).
pub const PROTOCOL: &str = "protocol";
/// RabbitMQ: the virtual host. Default: the path of `rabbitmqHost`
/// (percent-decoded), or `/` when it has none.
pub const VHOST_NAME: &str = "vhostName";
/// RabbitMQ: the queue. Required with `rabbitmqHost`.
pub const QUEUE_NAME: &str = "queueName";
/// RabbitMQ (HTTP only): `true` counts ready messages only
/// (`messages_ready`), not those delivered and unacknowledged. A boolean
/// (`strconv.ParseBool`'s spellings, as KEDA). Default `false`.
pub const EXCLUDE_UNACKNOWLEDGED: &str = "excludeUnacknowledged";

// --- Brokers: any ------------------------------------------------------------

/// `w`: requests-equivalent per broker message (e.g. `4` when each
/// message is a batch of 4 prompts). A number > 0, default `1`. Needs a
/// broker source.
pub const MESSAGE_WEIGHT: &str = "messageWeight";

// --- Groups ------------------------------------------------------------------

/// SQS keys.
pub const SQS: &[&str] = &[
    QUEUE_URL,
    AWS_REGION,
    AWS_ENDPOINT,
    SCALE_ON_IN_FLIGHT,
    SCALE_ON_DELAYED,
];
/// Kafka keys.
pub const KAFKA: &[&str] = &[
    BOOTSTRAP_SERVERS,
    CONSUMER_GROUP,
    TOPIC,
    OFFSET_RESET_POLICY,
    SCALE_TO_ZERO_ON_INVALID_OFFSET,
    ALLOW_IDLE_CONSUMERS,
    EXCLUDE_PERSISTENT_LAG,
    LIMIT_TO_PARTITIONS_WITH_LAG,
];
/// RabbitMQ keys.
pub const RABBITMQ: &[&str] = &[
    RABBITMQ_HOST,
    PROTOCOL,
    VHOST_NAME,
    QUEUE_NAME,
    EXCLUDE_UNACKNOWLEDGED,
];
/// Keys of any broker.
pub const BROKER_COMMON: &[&str] = &[MESSAGE_WEIGHT, AUTH_PROFILE];
/// Every broker key.
pub const BROKER: &[&str] = &concat::<
    { SQS.len() + KAFKA.len() + RABBITMQ.len() + BROKER_COMMON.len() },
>(&[SQS, KAFKA, RABBITMQ, BROKER_COMMON]);
