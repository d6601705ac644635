//! Keys that are KEDA's: its own (`scalerAddress`, …), accepted and ignored, and the names
//! of KEDA's built-in scalers, read as aliases, refused with what to write instead, or
//! (spelled differently here) unknown with ours suggested. Part of the registry in
//! `keys.rs` (re-exported there).

use super::{ACTIVATION_BACKLOG, RABBITMQ_HOST, TARGET_BACKLOG_PER_REPLICA};

// --- KEDA's own ----------------------------------------------------------------

/// KEDA's own key: the scaler's `host:port`. Accepted and ignored.
pub const SCALER_ADDRESS: &str = "scalerAddress";
/// KEDA's own key: dial the scaler with TLS. Accepted and ignored here.
pub const ENABLE_TLS: &str = "enableTLS";
/// KEDA's own key: skip TLS verification on KEDA's side. Accepted and ignored.
pub const UNSAFE_SSL: &str = "unsafeSsl";

// --- Names of KEDA's built-in scalers ------------------------------------------
// A trigger copied from a built-in scaler (type changed to `external`,
// `scalerAddress` added) keeps that scaler's keys. Where the meaning is the
// same here, the name is an alias; where it is not, the key is refused with
// what to write instead (`keda_names.rs`), never read as something else.

/// Alias of `targetBacklogPerReplica`: KEDA's prometheus scaler (and the
/// others with a `query`) calls the per-replica target of the metric it
/// returns `threshold`; the metric returned here is `B`, whose target is
/// `T`. Same rules (a number > 0). Setting both is refused.
pub const THRESHOLD: &str = "threshold";
/// Alias of `activationBacklog`: in KEDA's prometheus scaler the trigger is
/// active when the metric is greater than `activationThreshold` (strictly,
/// default 0), as it is here when `B > A`. Same rules (a number ≥ 0).
/// Setting both is refused.
pub const ACTIVATION_THRESHOLD: &str = "activationThreshold";
/// Refused: KEDA's kafka `lagThreshold` is lag per replica in messages
/// (default 10). Write `targetBacklogPerReplica` = lagThreshold ×
/// `messageWeight` (one replica absorbs T requests, a message counts `w`).
pub const LAG_THRESHOLD: &str = "lagThreshold";
/// Refused: KEDA's kafka `activationLagThreshold` compares the lag in
/// messages. Write `activationBacklog` = activationLagThreshold ×
/// `messageWeight` (the activation rule compares `B`, which counts `w·Q`).
pub const ACTIVATION_LAG_THRESHOLD: &str = "activationLagThreshold";
/// Refused: KEDA's aws-sqs-queue `queueLength` (default 5; RabbitMQ's
/// deprecated name for `value`) is messages per replica. Write
/// `targetBacklogPerReplica` = queueLength × `messageWeight`.
pub const QUEUE_LENGTH: &str = "queueLength";
/// Refused: KEDA's aws-sqs-queue `activationQueueLength` compares the queue
/// in messages. Write `activationBacklog` = activationQueueLength ×
/// `messageWeight`.
pub const ACTIVATION_QUEUE_LENGTH: &str = "activationQueueLength";
/// Refused: KEDA's rabbitmq `value` is the per-replica target of its
/// `mode`: messages under `QueueLength` (write `targetBacklogPerReplica` =
/// value × `messageWeight`); the rate modes have no equivalent here.
pub const VALUE: &str = "value";
/// Refused: KEDA's rabbitmq `activationValue` compares its `mode`'s value
/// (messages under `QueueLength`). Write `activationBacklog` =
/// activationValue × `messageWeight`.
pub const ACTIVATION_VALUE: &str = "activationValue";
/// Refused: KEDA's prometheus `query` is the metric itself (one series; an
/// empty answer reads 0 by default). The nearest here is `waitingQuery`,
/// requests waiting, which sums its series and reads an empty answer as a
/// lost signal unless `replicasQuery` answers 0: write `waitingQuery`.
pub const QUERY: &str = "query";

/// Unknown here: KEDA's rabbitmq `host` is `rabbitmqHost` (too generic a
/// name beside the engine keys). Refused as unknown, with `rabbitmqHost`
/// suggested however far the spelling is.
pub const HOST: &str = "host";

// --- Groups ------------------------------------------------------------------

/// Keys KEDA itself reads and forwards with the rest.
pub const KEDAS: &[&str] = &[SCALER_ADDRESS, ENABLE_TLS, UNSAFE_SSL];
/// KEDA built-in scalers' names read as ours: `(alias, key)`.
pub const KEDA_ALIASES: &[(&str, &str)] = &[
    (THRESHOLD, TARGET_BACKLOG_PER_REPLICA),
    (ACTIVATION_THRESHOLD, ACTIVATION_BACKLOG),
];
/// KEDA built-in scalers' names spelled differently here: `(KEDA's, ours)`.
/// Still unknown keys (the value is not read), but the suggestion is ours.
pub const KEDA_RENAMED: &[(&str, &str)] = &[(HOST, RABBITMQ_HOST)];
/// KEDA built-in scalers' names refused with what to write instead.
pub const KEDA_REFUSED: &[&str] = &[
    LAG_THRESHOLD,
    ACTIVATION_LAG_THRESHOLD,
    QUEUE_LENGTH,
    ACTIVATION_QUEUE_LENGTH,
    VALUE,
    ACTIVATION_VALUE,
    QUERY,
];
