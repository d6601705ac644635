//! One Kafka Metadata request over plain TCP, to learn which brokers a
//! cluster advertises before any librdkafka client exists: a librdkafka
//! client dials the brokers it learns from its first metadata answer within
//! milliseconds, whether or not it has a consumer group, so asking it would
//! dial an advertised broker before the scaler could check it.
//!
//! `PLAINTEXT` only: SASL and TLS need librdkafka's own handshakes.
//! Metadata v4 (Kafka 0.11 and later; Kafka 4.0 removed v0–v3) with an
//! empty topic list: the answer is the broker list and nothing else.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A broker as the cluster advertises it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Advertised {
    /// Its node id.
    pub id: i32,
    /// The host it advertises (a name or an address).
    pub host: String,
    /// The port it advertises.
    pub port: i32,
}

const METADATA: i16 = 3;
const VERSION: i16 = 4;
const CORRELATION_ID: i32 = 1;
const CLIENT_ID: &[u8] = b"backlog-scaler";
/// A broker list is small; anything bigger is not a Metadata answer.
const MAX_ANSWER: usize = 1 << 20;

/// Blocking: ask the first of `addrs` that answers for the cluster's
/// brokers; each connect, write and read is bounded by `timeout`. The error
/// is the last address's failure, in words.
pub(super) fn brokers(addrs: &[SocketAddr], timeout: Duration) -> Result<Vec<Advertised>, String> {
    let mut last = "no bootstrap address".to_owned();
    for addr in addrs {
        match ask(addr, timeout) {
            Ok(brokers) => return Ok(brokers),
            Err(reason) => last = format!("{addr}: {reason}"),
        }
    }
    Err(last)
}

fn ask(addr: &SocketAddr, timeout: Duration) -> Result<Vec<Advertised>, String> {
    let io = |e: std::io::Error| match e.kind() {
        // A read or write timeout (EAGAIN on Linux).
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("no answer within {timeout:?}")
        }
        _ => e.to_string(),
    };
    let mut stream = TcpStream::connect_timeout(addr, timeout).map_err(io)?;
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    stream.write_all(&request()).map_err(io)?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).map_err(io)?;
    let size = usize::try_from(i32::from_be_bytes(size))
        .ok()
        .filter(|n| *n <= MAX_ANSWER)
        .ok_or_else(|| "the Metadata answer has an invalid size".to_owned())?;
    let mut answer = vec![0u8; size];
    stream.read_exact(&mut answer).map_err(io)?;
    parse(&answer)
}

/// A Metadata v4 request (header v1) for no topics.
fn request() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&METADATA.to_be_bytes());
    body.extend_from_slice(&VERSION.to_be_bytes());
    body.extend_from_slice(&CORRELATION_ID.to_be_bytes());
    body.extend_from_slice(&(CLIENT_ID.len() as i16).to_be_bytes());
    body.extend_from_slice(CLIENT_ID);
    body.extend_from_slice(&0i32.to_be_bytes()); // topics: an empty array
    body.push(0); // allow_auto_topic_creation: false
    let mut framed = (body.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&body);
    framed
}

/// The broker list of a Metadata v4 answer (after its size).
fn parse(answer: &[u8]) -> Result<Vec<Advertised>, String> {
    let mut r = Reader(answer);
    if r.i32()? != CORRELATION_ID {
        return Err("the Metadata answer is for another request".to_owned());
    }
    let _throttle_ms = r.i32()?;
    let count = r.i32()?;
    let count = usize::try_from(count).map_err(|_| format!("{count} brokers"))?;
    let mut brokers = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let id = r.i32()?;
        let host = r.string()?.ok_or("a broker without a host")?;
        let port = r.i32()?;
        let _rack = r.string()?;
        brokers.push(Advertised { id, host, port });
    }
    Ok(brokers)
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.0.len() < n {
            return Err("the Metadata answer is cut short".to_owned());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn i32(&mut self) -> Result<i32, String> {
        let bytes = self.take(4)?;
        Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// A nullable string: an `i16` length (−1 for null) and UTF-8 bytes.
    fn string(&mut self) -> Result<Option<String>, String> {
        let len = self.take(2)?;
        let len = i16::from_be_bytes([len[0], len[1]]);
        let Ok(len) = usize::try_from(len) else {
            return Ok(None);
        };
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|_| "a host that is not UTF-8".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_metadata_v4_for_no_topics() {
        let request = request();
        let size = i32::from_be_bytes([request[0], request[1], request[2], request[3]]);
        assert_eq!(size as usize, request.len() - 4);
        assert_eq!(&request[4..8], &[0, 3, 0, 4], "api key 3, version 4");
        assert_eq!(&request[request.len() - 5..], &[0, 0, 0, 0, 0]);
    }

    #[test]
    fn answers_are_parsed_and_checked() {
        let mut answer = Vec::new();
        answer.extend_from_slice(&CORRELATION_ID.to_be_bytes());
        answer.extend_from_slice(&0i32.to_be_bytes());
        answer.extend_from_slice(&2i32.to_be_bytes());
        for (id, host, rack) in [(1i32, "kafka-0.kafka", None), (2, "10.0.0.7", Some("a"))] {
            answer.extend_from_slice(&id.to_be_bytes());
            answer.extend_from_slice(&(host.len() as i16).to_be_bytes());
            answer.extend_from_slice(host.as_bytes());
            answer.extend_from_slice(&9092i32.to_be_bytes());
            match rack {
                None => answer.extend_from_slice(&(-1i16).to_be_bytes()),
                Some(rack) => {
                    answer.extend_from_slice(&(rack.len() as i16).to_be_bytes());
                    answer.extend_from_slice(rack.as_bytes());
                }
            }
        }
        let brokers = parse(&answer).expect("parses");
        assert_eq!(
            brokers,
            [
                Advertised {
                    id: 1,
                    host: "kafka-0.kafka".into(),
                    port: 9092
                },
                Advertised {
                    id: 2,
                    host: "10.0.0.7".into(),
                    port: 9092
                }
            ]
        );
        assert!(parse(&answer[..answer.len() - 3]).is_err(), "cut short");
        let mut other = answer.clone();
        other[3] = 9;
        assert!(parse(&other).is_err(), "another correlation id");
    }
}
