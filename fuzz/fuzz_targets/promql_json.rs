//! A Prometheus `/api/v1/query` response body: never a panic, every error
//! names the query (several queries share one server), and an accepted body
//! gives well-formed series.
#![no_main]

use backlog_scaler::source::PromQuery;
use backlog_scaler::source::prometheus::{Answer, QueryReading};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const QUERY: &str = "sum(vllm:num_requests_waiting)";

fn query() -> &'static PromQuery {
    static QUERY_ONCE: OnceLock<PromQuery> = OnceLock::new();
    QUERY_ONCE.get_or_init(|| PromQuery {
        address: "http://127.0.0.1:9090".parse().expect("a valid URL"),
        query: QUERY.to_owned(),
        auth_profile: None,
        answer: Answer::Raw,
    })
}

fuzz_target!(|data: &[u8]| {
    // The HTTP layer hands the body over as text.
    let Ok(body) = std::str::from_utf8(data) else {
        return;
    };
    match query().parse_response(body) {
        Ok(QueryReading { query, series }) => {
            assert_eq!(query, QUERY);
            for s in &series {
                assert!(s.labels.starts_with('{') && s.labels.ends_with('}'));
            }
            // `/explain` serialises readings; a NaN or infinite value must
            // not make that fail.
            serde_json_roundtrip(&QueryReading { query, series });
        }
        Err(err) => {
            let text = err.to_string();
            assert!(text.contains(QUERY), "{text}");
        }
    }
});

fn serde_json_roundtrip(reading: &QueryReading) {
    let json = serde_json::to_string(reading).expect("a reading always serialises");
    let back: serde_json::Value = serde_json::from_str(&json).expect("and is valid JSON");
    assert_eq!(
        back["series"].as_array().map(Vec::len),
        Some(reading.series.len())
    );
}
