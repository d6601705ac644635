//! RabbitMQ keys → a [`RabbitMqSource`].

use reqwest::Url;

use crate::source::broker::rabbitmq::{Protocol, RabbitMqSource};
use crate::trigger::error::{MetadataError, invalid};
use crate::trigger::keys;
use crate::trigger::values::Metadata;

/// Longest AMQP short string (queue and vhost names).
const MAX_NAME_LEN: usize = 255;

/// Parse the RabbitMQ keys (`rabbitmqHost` is present).
pub fn parse(
    md: &Metadata<'_>,
    auth_profile: Option<String>,
    errors: &mut Vec<MetadataError>,
) -> Option<RabbitMqSource> {
    let host =
        md.non_empty(keys::RABBITMQ_HOST, errors)
            .and_then(|(sent, value)| match parse_host(value) {
                Ok(parsed) => Some(parsed),
                Err(reason) => {
                    errors.push(invalid(sent, value, reason));
                    None
                }
            });
    let from_scheme = host
        .as_ref()
        .map(|(_, scheme_protocol, _)| *scheme_protocol);
    let protocol = match md.get(keys::PROTOCOL) {
        None => from_scheme,
        // Any case, as every enum-like key (KEDA itself wants lower case; a
        // capitalised value has only one meaning here).
        Some((sent, value)) => match value.to_ascii_lowercase().as_str() {
            "auto" => from_scheme,
            lower @ ("amqp" | "http") => {
                let wanted = if lower == "amqp" {
                    Protocol::Amqp
                } else {
                    Protocol::Http
                };
                match from_scheme {
                    Some(scheme_protocol) if scheme_protocol != wanted => {
                        errors.push(invalid(
                            sent,
                            value,
                            "must match the scheme of `rabbitmqHost` (amqp/amqps → `amqp`, http/https → `http`), or `auto`",
                        ));
                        None
                    }
                    _ => Some(wanted),
                }
            }
            _ => {
                errors.push(invalid(sent, value, "`auto`, `amqp` or `http`"));
                None
            }
        },
    };
    let vhost = match md.non_empty(keys::VHOST_NAME, errors) {
        Some((sent, value)) if value.len() > MAX_NAME_LEN => {
            errors.push(invalid(sent, value, "at most 255 bytes"));
            None
        }
        Some((_, value)) => Some(value.to_owned()),
        None => host.as_ref().map(|(_, _, vhost)| vhost.clone()),
    };
    let queue = md
        .required(
            keys::QUEUE_NAME,
            "the queue whose messages are counted",
            errors,
        )
        .and_then(|(sent, value)| {
            if value.len() > MAX_NAME_LEN {
                errors.push(invalid(sent, value, "at most 255 bytes"));
                None
            } else {
                Some(value.to_owned())
            }
        });
    let exclude_unacknowledged = md.bool(keys::EXCLUDE_UNACKNOWLEDGED, false, errors);
    if exclude_unacknowledged
        && protocol == Some(Protocol::Amqp)
        && let Some((sent, value)) = md.get(keys::EXCLUDE_UNACKNOWLEDGED)
    {
        errors.push(invalid(
            sent,
            value,
            "needs the http protocol (AMQP counts ready messages only anyway)",
        ));
    }
    let (url, _, _) = host?;
    Some(RabbitMqSource {
        url,
        protocol: protocol?,
        vhost: vhost?,
        queue: queue?,
        exclude_unacknowledged,
        auth_profile,
    })
}

/// `rabbitmqHost` → (scheme/host/port URL, protocol, vhost from the path).
fn parse_host(value: &str) -> Result<(Url, Protocol, String), String> {
    let mut url = Url::parse(value).map_err(|e| {
        format!("not a URL ({e}); e.g. `amqp://rabbitmq.ns:5672` or `http://rabbitmq.ns:15672`")
    })?;
    let protocol = match url.scheme() {
        "amqp" | "amqps" => Protocol::Amqp,
        "http" | "https" => Protocol::Http,
        _ => return Err("the scheme must be amqp, amqps, http or https".to_owned()),
    };
    if url.host_str().is_none_or(str::is_empty) {
        return Err("the URL has no host".to_owned());
    }
    if url.port() == Some(0) {
        return Err("port 0 is no port to connect to".to_owned());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "credentials do not belong in metadata; remove `user:password@` and name an `authProfile`"
                .to_owned(),
        );
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("no query or fragment".to_owned());
    }
    let path = url.path().strip_prefix('/').unwrap_or(url.path());
    let vhost = percent_decode(path)
        .ok_or_else(|| "the vhost in the path is not valid UTF-8".to_owned())?;
    let vhost = if vhost.is_empty() {
        "/".to_owned()
    } else {
        vhost
    };
    if vhost.len() > MAX_NAME_LEN {
        return Err("the vhost is longer than 255 bytes".to_owned());
    }
    url.set_path("");
    Ok((url, protocol, vhost))
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(byte) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_vhosts() {
        let (url, protocol, vhost) = parse_host("amqps://mq.ns:5671/prod%2Feu").expect("valid");
        assert_eq!((protocol, vhost.as_str()), (Protocol::Amqp, "prod/eu"));
        assert_eq!(url.as_str(), "amqps://mq.ns:5671");
        let (url, protocol, vhost) = parse_host("http://mq.ns:15672").expect("valid");
        assert_eq!((protocol, vhost.as_str()), (Protocol::Http, "/"));
        assert_eq!(url.as_str(), "http://mq.ns:15672/");
        for bad in [
            "mq.ns:5672",
            "amqp://guest:guest@mq:5672",
            "amqp://:pw@mq:5672",
            "redis://mq:6379",
            "amqp://mq:5672/?heartbeat=10",
        ] {
            assert!(parse_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("%2F").as_deref(), Some("/"));
        assert_eq!(percent_decode("a%2").as_deref(), Some("a%2"));
        assert_eq!(percent_decode("%zz").as_deref(), Some("%zz"));
    }
}
