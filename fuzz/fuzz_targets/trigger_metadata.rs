//! A ScaledObject trigger's metadata, as arbitrary key/value pairs: never a
//! panic, and what is accepted keeps the promises the README makes about it.
//!
//! Input format (so seeds stay readable): one `key=value` pair per line, split
//! at the first `=`; a line starting with a space or tab continues the previous
//! value after a `\n` (KEDA passes multi-line YAML strings through as they are).
//! A line without `=` is a key with an empty value.
#![no_main]

use std::time::Duration;

use backlog_scaler::trigger::TriggerSpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // KEDA's metadata is a map<string,string> of protobuf strings: UTF-8.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let pairs = pairs(text);
    let borrowed: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let first = TriggerSpec::from_metadata(borrowed.iter().copied());
    // Validation is a pure function of the metadata: the same pairs give the
    // same answer (the registry compares specs to share pollers).
    let again = TriggerSpec::from_metadata(borrowed.iter().copied());
    match (&first, &again) {
        (Ok(a), Ok(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}")),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        _ => panic!("the same metadata was accepted once and refused once"),
    }
    match first {
        Ok(spec) => {
            // GetMetricSpec returns this name, and the HPA's external metric
            // path breaks on anything but letters, digits and `-`.
            let name = &spec.metric_name;
            assert!(!name.is_empty() && name.len() <= 63, "{name:?}");
            assert!(
                name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'),
                "{name:?}"
            );
            assert!(spec.poll_interval >= Duration::from_secs(1));
            assert!(spec.poll_interval <= Duration::from_secs(300));
            assert!(spec.max_signal_age >= spec.poll_interval);
            assert!(spec.fusion.target_per_replica > 0.0);
            assert!(spec.fusion.target_per_replica.is_finite());
            assert!(spec.engine.is_some() || spec.broker.is_some());
            let sources = spec.sources();
            assert!(!sources.is_empty());
            for (i, s) in sources.iter().enumerate() {
                assert!(!sources[..i].contains(s), "duplicate source {s:?}");
            }
        }
        Err(errors) => {
            // "Collects every problem": a refusal always names at least one.
            assert!(!errors.0.is_empty());
            assert!(!errors.to_string().is_empty());
        }
    }
});

fn pairs(text: &str) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for line in text.split('\n') {
        if let Some(rest) = line.strip_prefix([' ', '\t'])
            && let Some((_, value)) = pairs.last_mut()
        {
            value.push('\n');
            value.push_str(rest);
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or((line, ""));
        pairs.push((key.to_owned(), value.to_owned()));
    }
    pairs
}
