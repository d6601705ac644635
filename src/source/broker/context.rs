//! What broker reads share: credential profiles, the request bound, the
//! outbound policy every broker connection goes through, the shared clients
//! (SQS clients by region, endpoint and profile, the management-API HTTP
//! client), and the reading every broker returns.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::guard::credentials::Profiles;
use crate::guard::outbound::aws::Refusals;
use crate::guard::outbound::{OutboundPolicy, PolicyResolver};
use crate::source::error::{FailureKind, SourceError};

/// Key of Kafka's total lag including persistent lag, in
/// [`BrokerReading::breakdown`].
pub const LAG_WITH_PERSISTENT: &str = "lagWithPersistent";

/// Q for one trigger, as KEDA's built-in scaler for that broker would count it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerReading {
    /// `Q`, in messages, before `messageWeight`. Kafka: the total lag
    /// without persistent lag when `excludePersistentLag` is on (KEDA's
    /// scaling value; the total with it is `breakdown["lagWithPersistent"]`).
    pub messages: f64,
    /// Kafka: how many partitions bound the replica count (KEDA's
    /// `allowIdleConsumers: false` cap, `w·Q ≤ T × partitions`): every
    /// partition counted, or only those with lag under
    /// `limitToPartitionsWithLag`. `None` when no cap applies (other brokers,
    /// or `allowIdleConsumers: true`).
    pub partitions: Option<usize>,
    /// Where `messages` came from: SQS `visible`/`inFlight`/`delayed`,
    /// RabbitMQ `ready`/`unacked`, Kafka one `topic/partition` entry per
    /// partition (its lag) plus `lagWithPersistent`. Entries that were
    /// measured but not counted (e.g. `inFlight` with `scaleOnInFlight:
    /// false`) are listed too.
    pub breakdown: BTreeMap<String, f64>,
}

impl BrokerReading {
    /// The messages activation counts: Kafka's lag including persistent
    /// lag (`lagWithPersistent`, what KEDA's IsActive compares with
    /// `activationLagThreshold`), so a group stuck on a partition still
    /// wakes a Deployment at zero replicas; `messages` for other brokers.
    pub fn activation_messages(&self) -> f64 {
        self.breakdown
            .get(LAG_WITH_PERSISTENT)
            .copied()
            .filter(|v| v.is_finite())
            .map_or(self.messages, |with| with.max(self.messages))
    }
}

/// Default bound on one broker request (each of the few a reading makes).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What broker reads need from the server: credential profiles, the request
/// timeout, and shared clients. Cheap to clone (shared inside).
#[derive(Clone)]
pub struct BrokerContext {
    /// The `profiles` of the scaler config.
    pub profiles: Arc<Profiles>,
    /// Bound on each broker request. Keep it under the poller's read timeout
    /// so a slow broker is reported as what it is.
    pub request_timeout: Duration,
    /// Where broker clients may connect: Kafka checks every bootstrap and
    /// advertised broker, AMQP connects to the address it resolved and
    /// checked, the management API and SQS clients resolve through it.
    pub outbound: Arc<OutboundPolicy>,
    pub(crate) http: reqwest::Client,
    /// SQS clients, each with the refusals its HTTP client recorded.
    pub(crate) sqs_clients: Arc<Mutex<HashMap<SqsClientKey, (aws_sdk_sqs::Client, Refusals)>>>,
}

impl fmt::Debug for BrokerContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let clients = self.sqs_clients.lock().map(|c| c.len()).unwrap_or_default();
        f.debug_struct("BrokerContext")
            .field("profiles", &self.profiles.names().collect::<Vec<_>>())
            .field("request_timeout", &self.request_timeout)
            .field("outbound", &self.outbound.summary())
            .field("sqs_clients", &clients)
            .finish_non_exhaustive()
    }
}

/// Why a [`BrokerContext`] could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the broker HTTP client: {0}")]
pub struct BrokerContextError(#[from] reqwest::Error);

impl BrokerContext {
    /// A context with these profiles; each broker request is bounded by
    /// `request_timeout`. Only the refused default addresses are blocked (no
    /// allowlist); the server uses [`Self::with_outbound`].
    pub fn new(
        profiles: Arc<Profiles>,
        request_timeout: Duration,
    ) -> Result<BrokerContext, BrokerContextError> {
        Self::with_outbound(
            profiles,
            request_timeout,
            Arc::new(OutboundPolicy::allow_all()),
        )
    }

    /// A context whose broker connections all go through `outbound`.
    pub fn with_outbound(
        profiles: Arc<Profiles>,
        request_timeout: Duration,
        outbound: Arc<OutboundPolicy>,
    ) -> Result<BrokerContext, BrokerContextError> {
        // The management API client is built like the scraper's: names
        // resolve through the policy, no proxy (it would resolve the target
        // out of the policy's sight), no redirects (a redirect could send the
        // scaler anywhere). IP-literal URLs are checked before each request.
        let http = reqwest::Client::builder()
            .timeout(request_timeout)
            .connect_timeout(request_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(PolicyResolver::new(outbound.clone())))
            .user_agent(concat!("backlog-scaler/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(BrokerContext {
            profiles,
            request_timeout,
            outbound,
            http,
            sqs_clients: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    /// The same context with another request timeout (shares clients).
    pub fn with_request_timeout(&self, request_timeout: Duration) -> BrokerContext {
        BrokerContext {
            request_timeout,
            ..self.clone()
        }
    }
}

/// Shared-client key: SQS clients differ by region, endpoint and credentials.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SqsClientKey {
    pub(crate) region: String,
    pub(crate) endpoint: Option<String>,
    pub(crate) auth_profile: Option<String>,
}

/// Turn a finished blocking task's failure into a source error.
pub(crate) fn join_error(label: &str, error: tokio::task::JoinError) -> SourceError {
    SourceError::new(
        FailureKind::Internal,
        label,
        format!("reading task failed: {error}"),
    )
}
