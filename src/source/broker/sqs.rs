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

use std::collections::BTreeMap;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_sqs::config::Credentials;
use aws_sdk_sqs::error::DisplayErrorContext;
use aws_sdk_sqs::types::QueueAttributeName;
use reqwest::Url;

use super::{BrokerContext, BrokerReading, Md, keys};
use crate::source::SourceError;

/// Longest SQS queue name (AWS's limit).
const MAX_QUEUE_NAME_LEN: usize = 80;

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

/// Shared-client key: SQS clients differ by region, endpoint and credentials.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SqsClientKey {
    region: String,
    endpoint: Option<String>,
    auth_profile: Option<String>,
}

/// Per-poller SQS state: the queue URL resolved from a bare name.
#[derive(Debug, Default)]
pub(crate) struct SqsMemory {
    queue_url: Option<String>,
}

fn valid_queue_name(name: &str) -> bool {
    let base = name.strip_suffix(".fifo").unwrap_or(name);
    !base.is_empty()
        && name.len() <= MAX_QUEUE_NAME_LEN
        && base
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl SqsSource {
    /// Parse the SQS keys (`queueURL` is present).
    pub(crate) fn parse(md: &mut Md<'_, '_>, auth_profile: Option<String>) -> Option<SqsSource> {
        let queue =
            md.non_empty(keys::QUEUE_URL)
                .and_then(|(sent, value)| match parse_queue(value) {
                    Ok(queue) => Some(queue),
                    Err(reason) => {
                        md.invalid(sent, value, reason);
                        None
                    }
                });
        let region = md
            .required(keys::AWS_REGION, "the queue's AWS region, e.g. `eu-west-1`")
            .and_then(|(sent, value)| {
                let valid = value.len() <= 32
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
                if valid {
                    Some(value.to_owned())
                } else {
                    md.invalid(sent, value, "an AWS region such as `eu-west-1`");
                    None
                }
            });
        let endpoint = match md.non_empty(keys::AWS_ENDPOINT) {
            None => None,
            Some((sent, value)) => match parse_endpoint(value) {
                Ok(endpoint) => Some(endpoint),
                Err(reason) => {
                    md.invalid(sent, value, reason);
                    None
                }
            },
        };
        let scale_on_in_flight = md.bool(keys::SCALE_ON_IN_FLIGHT, true);
        let scale_on_delayed = md.bool(keys::SCALE_ON_DELAYED, false);
        Some(SqsSource {
            queue: queue?,
            region: region?,
            endpoint,
            scale_on_in_flight,
            scale_on_delayed,
            auth_profile,
        })
    }

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

    fn upstream(&self, reason: String) -> SourceError {
        SourceError::Upstream {
            target: self.label(),
            reason,
        }
    }

    async fn client(&self, ctx: &BrokerContext) -> Result<aws_sdk_sqs::Client, SourceError> {
        let key = self.client_key();
        if let Some(client) = ctx
            .sqs_clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(client.clone());
        }
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(ctx.request_timeout)
            .operation_timeout(ctx.request_timeout)
            .build();
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(self.region.clone()))
            // The poller retries; an SDK retry would hide a failing queue.
            .retry_config(RetryConfig::disabled())
            .timeout_config(timeouts);
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
                .map_err(|e| self.upstream(e.to_string()))?
                .ok_or_else(|| {
                    self.upstream(format!("credential profile `{name}` has no `aws` section"))
                })?;
            match aws.keys(name).map_err(|e| self.upstream(e.to_string()))? {
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
        let client = aws_sdk_sqs::Client::new(&loader.load().await);
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
        let client = self.client(ctx).await?;
        let result = self.read_with(&client, memory).await;
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
                    .map_err(|e| {
                        self.upstream(format!("GetQueueUrl: {}", DisplayErrorContext(&e)))
                    })?;
                let url = output
                    .queue_url()
                    .ok_or_else(|| self.upstream("GetQueueUrl returned no URL".to_owned()))?
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
            .map_err(|e| {
                self.upstream(format!("GetQueueAttributes: {}", DisplayErrorContext(&e)))
            })?;
        let empty = Default::default();
        let attributes = output.attributes().unwrap_or(&empty);
        let get = |name: QueueAttributeName| -> Option<Result<f64, SourceError>> {
            attributes.get(&name).map(|raw| {
                raw.trim()
                    .parse::<u64>()
                    .map(|n| n as f64)
                    .map_err(|_| SourceError::Parse {
                        target: self.label(),
                        reason: format!("attribute {} is `{raw}`, not a count", name.as_str()),
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
                    return Err(SourceError::Parse {
                        target: self.label(),
                        reason: format!("GetQueueAttributes returned no {}", name.as_str()),
                    });
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

/// A full queue URL (`http(s)://HOST/ACCOUNT/NAME`) or a bare queue name.
fn parse_queue(value: &str) -> Result<QueueRef, String> {
    if !value.contains("://") {
        return if valid_queue_name(value) {
            Ok(QueueRef::Name(value.to_owned()))
        } else {
            Err(format!(
                "a queue URL `https://sqs.REGION.amazonaws.com/ACCOUNT/NAME`, or a queue name of 1 to {MAX_QUEUE_NAME_LEN} letters, digits, `-` or `_` (optionally ending `.fifo`)"
            ))
        };
    }
    let url = Url::parse(value).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err("an http(s) queue URL with a host".to_owned());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("credentials do not belong in metadata; use `authProfile`".to_owned());
    }
    let segments: Vec<&str> = url.path().split('/').skip(1).collect();
    match segments.as_slice() {
        [account, name] if !account.is_empty() && valid_queue_name(name) => Ok(QueueRef::Url {
            url: value.to_owned(),
            name: (*name).to_owned(),
        }),
        _ => Err(
            "the URL's path must be /ACCOUNT/NAME (KEDA: cannot get queueName from queueURL)"
                .to_owned(),
        ),
    }
}

fn parse_endpoint(value: &str) -> Result<String, String> {
    let url =
        Url::parse(value).map_err(|e| format!("not a URL ({e}); e.g. `http://127.0.0.1:5000`"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err(
            "an http(s) URL with a host, e.g. `https://sqs.eu-west-1.amazonaws.com`".to_owned(),
        );
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("credentials do not belong in metadata; use `authProfile`".to_owned());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("an endpoint URL without query or fragment".to_owned());
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_refs() {
        assert_eq!(
            parse_queue("https://sqs.eu-west-1.amazonaws.com/123/jobs.fifo"),
            Ok(QueueRef::Url {
                url: "https://sqs.eu-west-1.amazonaws.com/123/jobs.fifo".into(),
                name: "jobs.fifo".into()
            })
        );
        assert_eq!(
            parse_queue("jobs_1-a"),
            Ok(QueueRef::Name("jobs_1-a".into()))
        );
        for bad in [
            "",
            ".fifo",
            "a b",
            "https://sqs.x.amazonaws.com/jobs",
            "https://sqs.x.amazonaws.com/1/2/jobs",
            "https://sqs.x.amazonaws.com//jobs",
            "ftp://h/1/jobs",
            &"x".repeat(81),
        ] {
            assert!(parse_queue(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn endpoints() {
        assert_eq!(
            parse_endpoint("http://127.0.0.1:5000/"),
            Ok("http://127.0.0.1:5000".to_owned())
        );
        assert!(parse_endpoint("127.0.0.1:5000").is_err());
        assert!(parse_endpoint("http://k:s@h").is_err());
    }
}
