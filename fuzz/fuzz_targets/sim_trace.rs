//! `simulate --trace FILE`: any text to `parse_trace` (rate CSV, Mooncake JSONL
//! or Azure CSV, told from the content). Never a panic; a refusal names a line
//! of the file; an accepted trace keeps the rules `ParsedTrace` documents, and
//! what `simulate` then does with it (`replicate`, the summary) holds too.
#![no_main]

use backlog_scaler::sim::trace::{
    CONTENT_CHARS, MAX_TOKENS, ParsedTrace, duration_seconds, mean_rate, minute_rates,
    parse_trace, replicate,
};
use libfuzzer_sys::fuzz_target;

/// `minute_rates` allocates one bin per minute up to the last arrival; past a
/// year of trace that is the caller's limit to set, not the parser's (see the
/// fuzzing section of the README), so the target stops there.
const SUMMARY_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

fuzz_target!(|data: &[u8]| {
    // `simulate` reads the file with `read_to_string`: UTF-8 only.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count();
    match parse_trace(text) {
        Err(err) => {
            assert!(err.line <= lines, "line {} of {lines}", err.line);
            assert!(err.content.chars().count() <= CONTENT_CHARS + 1);
            assert!(!err.to_string().is_empty());
        }
        Ok(ParsedTrace::Rates(points)) => {
            assert!(!points.is_empty());
            for pair in points.windows(2) {
                assert!(pair[0].0 <= pair[1].0, "time goes backwards: {pair:?}");
            }
            for (t, rate) in &points {
                assert!(t.is_finite() && *t >= 0.0 && rate.is_finite() && *rate >= 0.0);
            }
        }
        Ok(ParsedTrace::Requests {
            requests,
            resolution_seconds,
            ..
        }) => {
            assert!(!requests.is_empty());
            assert!(resolution_seconds.is_finite() && resolution_seconds > 0.0);
            for pair in requests.windows(2) {
                assert!(pair[0].arrival_seconds <= pair[1].arrival_seconds);
            }
            for r in &requests {
                assert!(r.arrival_seconds.is_finite() && r.arrival_seconds >= 0.0);
                assert!(r.output_tokens >= 1);
                assert!(u64::from(r.input_tokens.max(r.output_tokens)) <= MAX_TOKENS);
            }
            // `--rate-scale 2.5`: every request twice or three times, in order.
            let copies = replicate(&requests, 2.5, resolution_seconds, 1).expect("valid scale");
            assert!(copies.len() >= 2 * requests.len() && copies.len() <= 3 * requests.len());
            for pair in copies.windows(2) {
                assert!(pair[0].arrival_seconds <= pair[1].arrival_seconds);
            }
            let duration = duration_seconds(&requests);
            assert!(mean_rate(&requests) >= 0.0);
            if duration <= SUMMARY_SECONDS {
                let rates = minute_rates(&requests);
                let counted: f64 = rates.iter().map(|r| r * 60.0).sum();
                assert!((counted - requests.len() as f64).abs() < 0.5);
            }
        }
    }
});
