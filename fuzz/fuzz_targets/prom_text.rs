//! Any UTF-8 input: no panic, no hang, and the counters stay consistent with the input.
#![no_main]

use backlog_scaler::source::prom_text;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The parser takes `&str` (the HTTP layer decodes first), so only UTF-8 is reachable.
    let Ok(body) = std::str::from_utf8(data) else {
        return;
    };
    let lines = body.split('\n').count();
    // Alternate acceptance so both the skip path and the full path see every shape.
    let mut accept = false;
    let mut delivered = 0usize;
    let stats = prom_text::parse(
        body,
        |_| {
            accept = !accept;
            accept
        },
        |sample| {
            delivered += 1;
            for (name, value) in sample.labels() {
                assert!(sample.label(name).is_some());
                assert!(value.len() <= sample.raw_labels().len());
            }
        },
    );
    assert_eq!(delivered, stats.samples);
    assert!(stats.samples + stats.skipped + stats.malformed_lines <= lines);
    assert_eq!(stats.first_error.is_some(), stats.malformed_lines > 0);
    if let Some(err) = &stats.first_error {
        assert!(err.line >= 1 && err.line <= lines);
    }
    let (all, full) = prom_text::parse_all(body);
    assert_eq!(all.len(), full.samples);
});
