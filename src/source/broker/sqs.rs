//! SQS backlog, as KEDA's `aws-sqs-queue` scaler counts it: one
//! `GetQueueAttributes` per reading; `Q = ApproximateNumberOfMessages`, plus
//! `…NotVisible` (in flight) with `scaleOnInFlight`, plus `…Delayed` with
//! `scaleOnDelayed`. A missing or unparsable attribute is an error, never 0.
//!
//! Credentials come from the AWS default provider chain (environment, web
//! identity / IRSA, shared config profile, container and instance metadata)
//! or from the trigger's `authProfile`; never from metadata. Clients are
//! cached in the [`BrokerContext`] per (region, endpoint, profile) and
//! rebuilt after a failed reading.
//!
//! Every connection, the credential providers' included, goes through the
//! outbound policy ([`crate::guard::outbound::aws`]): the instance metadata
//! service and the container credentials endpoints are link-local, so the
//! default chain reaches them only with `outbound.allowLinkLocal` (or an
//! `allow` CIDR inside the refused range). A refusal the chain turned into
//! "no credentials" is put back into the reading's error.

use std::collections::BTreeMap;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_sqs::config::Credentials;
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::QueueAttributeName;

use super::context::{BrokerContext, BrokerReading, SqsClientKey};
use crate::guard::outbound::aws::{self, Refusals};
use crate::source::error::{FailureKind, SourceError};
use crate::source::http::resolution_failure;

/// Identity of an SQS source.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SqsSource {
    /// `queueURL`: a full queue URL or a queue name.
    pub queue: QueueRef,
    /// `awsRegion`.
    pub region: String,
    /// `awsEndpoint`, without a trailing `/`.
    pub endpoint: Option<String>,
    /// `scaleOnInFlight` (default true).
    pub scale_on_in_flight: bool,
    /// `scaleOnDelayed` (default false).
    pub scale_on_delayed: bool,
    /// `authProfile`.
    pub auth_profile: Option<String>,
}

/// How the queue was named.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum QueueRef {
    /// A full URL, used as is.
    Url {
        /// The URL.
        url: String,
        /// Its last path segment.
        name: String,
    },
    /// A bare name, resolved once with `GetQueueUrl`.
    Name(String),
}

/// Per-poller SQS state: the queue URL resolved from a bare name.
#[derive(Debug, Default)]
pub(crate) struct SqsMemory {
    queue_url: Option<String>,
}

impl SqsSource {
    /// The queue's name.
    pub fn queue_name(&self) -> &str {
        match &self.queue {
            QueueRef::Url { name, .. } | QueueRef::Name(name) => name,
        }
    }

    /// `sqs REGION/NAME`.
    pub fn label(&self) -> String {
        format!("sqs {}/{}", self.region, self.queue_name())
    }

    fn client_key(&self) -> SqsClientKey {
        SqsClientKey {
            region: self.region.clone(),
            endpoint: self.endpoint.clone(),
            auth_profile: self.auth_profile.clone(),
        }
    }

    fn failure(&self, kind: FailureKind, detail: String) -> SourceError {
        SourceError::new(kind, self.label(), detail)
    }

    /// A failed SQS call, named by its operation.
    fn call_failed<E>(&self, operation: &str, error: &SdkError<E>) -> SourceError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        self.failure(
            classify(error),
            format!("{operation}: {}", DisplayErrorContext(error)),
        )
    }

    async fn client(
        &self,
        ctx: &BrokerContext,
    ) -> Result<(aws_sdk_sqs::Client, Refusals), SourceError> {
        let key = self.client_key();
        if let Some(client) = ctx
            .sqs_clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(client.clone());
        }
        let refusals = Refusals::default();
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(ctx.request_timeout)
            .operation_timeout(ctx.request_timeout)
            .build();
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(self.region.clone()))
            // The poller retries; an SDK retry would hide a failing queue.
            .retry_config(RetryConfig::disabled())
            .timeout_config(timeouts)
            // For the SQS client and the credential providers alike.
            .http_client(aws::http_client(ctx.outbound.clone(), refusals.clone()));
        if let Some(endpoint) = &self.endpoint {
            loader = loader.endpoint_url(endpoint.clone());
        }
        if let Some(name) = &self.auth_profile {
            let aws = ctx
                .profiles
                .get(name)
                .and_then(|p| {
                    p.require(name, crate::guard::credentials::Section::Aws)?;
                    Ok(p.aws.clone())
                })
                .map_err(|e| self.failure(FailureKind::Config, e.to_string()))?
                .ok_or_else(|| {
                    self.failure(
                        FailureKind::Config,
                        format!("credential profile `{name}` has no `aws` section"),
                    )
                })?;
            match aws
                .keys(name)
                .map_err(|e| self.failure(FailureKind::Config, e.to_string()))?
            {
                Some(keys) => {
                    loader = loader.credentials_provider(Credentials::new(
                        keys.access_key_id.expose(),
                        keys.secret_access_key.expose(),
                        keys.session_token.as_ref().map(|t| t.expose().to_owned()),
                        None,
                        "backlog-scaler-profile",
                    ));
                }
                None => {
                    if let Some(profile_name) = &aws.profile_name {
                        loader = loader.profile_name(profile_name.clone());
                    }
                }
            }
        }
        let client = (aws_sdk_sqs::Client::new(&loader.load().await), refusals);
        ctx.sqs_clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, client.clone());
        Ok(client)
    }

    /// One reading: one `GetQueueAttributes` (plus one `GetQueueUrl` the
    /// first time, for a bare queue name).
    pub(crate) async fn read(
        &self,
        ctx: &BrokerContext,
        memory: &mut SqsMemory,
    ) -> Result<BrokerReading, SourceError> {
        let (client, refusals) = self.client(ctx).await?;
        // Only refusals of this reading explain its failure.
        let _ = refusals.take();
        let result = self
            .read_with(&client, memory)
            .await
            .map_err(|error| match refusals.take() {
                Some(denied) => self.refused(error, &denied),
                None => error,
            });
        if result.is_err() {
            // Rebuild at the next reading: fresh connections and credentials.
            ctx.sqs_clients
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&self.client_key());
            memory.queue_url = None;
        }
        result
    }

    /// A failed call during which the policy refused a connection: the
    /// refusal is the cause, also when the SDK reports it as something else
    /// (the credential chain answers "no credentials" when the metadata
    /// service is refused).
    fn refused(
        &self,
        error: SourceError,
        denied: &crate::guard::outbound::OutboundDenied,
    ) -> SourceError {
        let refusal = denied.to_string();
        let detail = if error.detail().contains(&refusal) {
            error.detail().to_owned()
        } else {
            format!("{}; {refusal}", error.detail())
        };
        self.failure(FailureKind::Denied, detail)
    }

    async fn read_with(
        &self,
        client: &aws_sdk_sqs::Client,
        memory: &mut SqsMemory,
    ) -> Result<BrokerReading, SourceError> {
        let queue_url = match (&self.queue, &memory.queue_url) {
            (QueueRef::Url { url, .. }, _) => url.clone(),
            (QueueRef::Name(_), Some(url)) => url.clone(),
            (QueueRef::Name(name), None) => {
                let output = client
                    .get_queue_url()
                    .queue_name(name)
                    .send()
                    .await
                    .map_err(|e| self.call_failed("GetQueueUrl", &e))?;
                let url = output
                    .queue_url()
                    .ok_or_else(|| {
                        self.failure(
                            FailureKind::Rejected,
                            "GetQueueUrl returned no URL".to_owned(),
                        )
                    })?
                    .to_owned();
                memory.queue_url = Some(url.clone());
                url
            }
        };
        let output = client
            .get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
            .send()
            .await
            .map_err(|e| self.call_failed("GetQueueAttributes", &e))?;
        let empty = Default::default();
        let attributes = output.attributes().unwrap_or(&empty);
        let get = |name: QueueAttributeName| -> Option<Result<f64, SourceError>> {
            attributes.get(&name).map(|raw| {
                raw.trim().parse::<u64>().map(|n| n as f64).map_err(|_| {
                    SourceError::parse(
                        self.label(),
                        format!("attribute {} is `{raw}`, not a count", name.as_str()),
                    )
                })
            })
        };
        let mut breakdown = BTreeMap::new();
        let mut messages = 0.0;
        for (name, key, counted) in [
            (
                QueueAttributeName::ApproximateNumberOfMessages,
                "visible",
                true,
            ),
            (
                QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
                "inFlight",
                self.scale_on_in_flight,
            ),
            (
                QueueAttributeName::ApproximateNumberOfMessagesDelayed,
                "delayed",
                self.scale_on_delayed,
            ),
        ] {
            match get(name.clone()) {
                Some(value) => {
                    let value = value?;
                    breakdown.insert(key.to_owned(), value);
                    if counted {
                        messages += value;
                    }
                }
                None if counted => {
                    return Err(SourceError::parse(
                        self.label(),
                        format!("GetQueueAttributes returned no {}", name.as_str()),
                    ));
                }
                None => {}
            }
        }
        Ok(BrokerReading {
            messages,
            partitions: None,
            breakdown,
        })
    }
}

/// Error codes AWS answers when it refuses the credentials or their
/// permissions (they come with 400 or 403, so the status alone misses some).
const AUTH_CODES: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "ExpiredToken",
    "IncompleteSignature",
    "InvalidAccessKeyId",
    "InvalidClientTokenId",
    "InvalidSecurity",
    "MissingAuthenticationToken",
    "SignatureDoesNotMatch",
    "UnrecognizedClientException",
];

/// The kind of a failed SQS call.
fn classify<E>(error: &SdkError<E>) -> FailureKind
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match error {
        SdkError::ConstructionFailure(_) => FailureKind::Config,
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => FailureKind::Unreachable,
        SdkError::DispatchFailure(failure) => {
            if failure.is_user() {
                return FailureKind::Config;
            }
            if let Some(kind) = std::error::Error::source(error).and_then(resolution_failure) {
                return kind;
            }
            // Credentials are loaded while the request is dispatched: a
            // provider chain with nothing to offer fails here, not at AWS.
            if failure.is_other()
                && DisplayErrorContext(error)
                    .to_string()
                    .contains("credentials")
            {
                return FailureKind::Config;
            }
            FailureKind::Unreachable
        }
        SdkError::ServiceError(service) => {
            if service
                .err()
                .code()
                .is_some_and(|code| AUTH_CODES.contains(&code))
            {
                FailureKind::Auth
            } else {
                FailureKind::of_status(service.raw().status().as_u16())
            }
        }
        _ => FailureKind::Unreachable,
    }
}
