//! SQS keys → an [`SqsSource`].

use reqwest::Url;

use crate::source::broker::sqs::{QueueRef, SqsSource};
use crate::trigger::error::{MetadataError, invalid};
use crate::trigger::keys;
use crate::trigger::values::Metadata;

/// Longest SQS queue name (AWS's limit).
const MAX_QUEUE_NAME_LEN: usize = 80;

fn valid_queue_name(name: &str) -> bool {
    let base = name.strip_suffix(".fifo").unwrap_or(name);
    !base.is_empty()
        && name.len() <= MAX_QUEUE_NAME_LEN
        && base
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Parse the SQS keys (`queueURL` is present).
pub fn parse(
    md: &Metadata<'_>,
    auth_profile: Option<String>,
    errors: &mut Vec<MetadataError>,
) -> Option<SqsSource> {
    let queue = md
        .non_empty(keys::QUEUE_URL, errors)
        .and_then(|(sent, value)| match parse_queue(value) {
            Ok(queue) => Some(queue),
            Err(reason) => {
                errors.push(invalid(sent, value, reason));
                None
            }
        });
    let region = md
        .required(
            keys::AWS_REGION,
            "the queue's AWS region, e.g. `eu-west-1`",
            errors,
        )
        .and_then(|(sent, value)| {
            let valid = value.len() <= 32
                && value
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if valid {
                Some(value.to_owned())
            } else {
                errors.push(invalid(sent, value, "an AWS region such as `eu-west-1`"));
                None
            }
        });
    let endpoint = match md.non_empty(keys::AWS_ENDPOINT, errors) {
        None => None,
        Some((sent, value)) => match parse_endpoint(value) {
            Ok(endpoint) => Some(endpoint),
            Err(reason) => {
                errors.push(invalid(sent, value, reason));
                None
            }
        },
    };
    let scale_on_in_flight = md.bool(keys::SCALE_ON_IN_FLIGHT, true, errors);
    let scale_on_delayed = md.bool(keys::SCALE_ON_DELAYED, false, errors);
    Some(SqsSource {
        queue: queue?,
        region: region?,
        endpoint,
        scale_on_in_flight,
        scale_on_delayed,
        auth_profile,
    })
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
    if url.port() == Some(0) {
        return Err("port 0 is no port to connect to".to_owned());
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
    if url.port() == Some(0) {
        return Err("port 0 is no port to connect to".to_owned());
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
