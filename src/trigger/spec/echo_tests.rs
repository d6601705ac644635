//! What an error echoes is bounded: a value or unknown key is cut (after
//! redaction) with its full length noted, and only the first unknown keys
//! are listed. A gRPC client caps the size of a status message's header,
//! so an unbounded echo would lose the whole message (KEDA's Go client
//! then reports a transport error instead of ours).

use super::TriggerSpec;
use crate::trigger::MetadataError;
use crate::trigger::error::{MAX_ECHO_CHARS, MAX_UNKNOWN_LISTED};

fn refused(pairs: &[(&str, &str)]) -> (Vec<MetadataError>, String) {
    match TriggerSpec::from_metadata(pairs.iter().copied()) {
        Ok(spec) => panic!("expected an error, got {spec:?}"),
        Err(errors) => {
            let text = errors.to_string();
            (errors.0, text)
        }
    }
}

/// Generous room for one error's own words around the echo.
const WORDS: usize = 600;

#[test]
fn long_values_and_keys_are_cut_with_their_length_noted() {
    let long_value = "9".repeat(3_000_000);
    let long_key = "k".repeat(100_000);
    let secret_then_long = format!("http://u:S3CRET@h:1/{}", "a".repeat(5_000));
    let tiny_fraction = format!("0.{}1", "0".repeat(100_000));
    // Unclosed: the regex error must not quote the pattern back.
    let bad_regex = format!("{}(token=S3CRET", "a".repeat(5_000));
    let target = ("targetBacklogPerReplica", "10");
    let scrape = ("vllmTargets", "http://a:1/metrics");
    // (metadata, the note the cut value must carry)
    let cases: Vec<(Vec<(&str, &str)>, String)> = vec![
        (
            vec![scrape, ("targetBacklogPerReplica", &long_value)],
            "… (3000000 bytes)".to_owned(),
        ),
        (
            vec![scrape, target, (&long_key, "1")],
            "… (100000 bytes)".to_owned(),
        ),
        (
            vec![target, ("vllmTargets", &secret_then_long)],
            format!(
                "… ({} bytes)",
                secret_then_long.len() - "u:S3CRET".len() + "[redacted]".len()
            ),
        ),
        // A KEDA name refused with the number converted, the number echoed.
        (
            vec![scrape, target, ("lagThreshold", &tiny_fraction)],
            "… (100003 bytes)".to_owned(),
        ),
        (
            vec![
                scrape,
                target,
                ("dcgmTargets", "http://d:9400/metrics"),
                ("podSelectorRegex", &bad_regex),
            ],
            "bytes)".to_owned(),
        ),
    ];
    for (pairs, note) in cases {
        let (errors, text) = refused(&pairs);
        assert!(text.contains(&note), "{text} lacks {note:?}");
        assert!(!text.contains("S3CRET"), "{text}");
        for error in &errors {
            let one = error.to_string();
            assert!(
                one.len() < 2 * MAX_ECHO_CHARS + WORDS,
                "{} bytes: {one}",
                one.len()
            );
        }
    }
}

#[test]
fn a_short_value_is_echoed_whole() {
    let exact = "x".repeat(MAX_ECHO_CHARS);
    let (_, text) = refused(&[
        ("vllmTargets", "http://a:1/metrics"),
        ("targetBacklogPerReplica", &exact),
    ]);
    assert!(text.contains(&format!("`{exact}`")), "{text}");
    assert!(!text.contains("bytes)"), "{text}");
}

#[test]
fn only_the_first_unknown_keys_are_listed_and_the_rest_counted() {
    let keys: Vec<String> = (0..3000).map(|i| format!("junk{i:04}")).collect();
    let mut pairs = vec![
        ("vllmTargets", "http://a:1/metrics"),
        ("targetBacklogPerReplica", "10"),
    ];
    pairs.extend(keys.iter().map(|k| (k.as_str(), "1")));
    let (errors, text) = refused(&pairs);
    let listed = errors
        .iter()
        .filter(|e| matches!(e, MetadataError::Unknown { .. }))
        .count();
    assert_eq!(listed, MAX_UNKNOWN_LISTED, "{text}");
    let more = format!(
        "and {} more unknown metadata keys",
        3000 - MAX_UNKNOWN_LISTED
    );
    assert!(text.ends_with(&more), "{text}");
    assert!(text.len() < 2_000, "{} bytes", text.len());
    // Exactly the cap: nothing counted.
    let (errors, text) = refused(&pairs[..2 + MAX_UNKNOWN_LISTED]);
    assert_eq!(errors.len(), MAX_UNKNOWN_LISTED, "{text}");
    assert!(!text.contains("more unknown"), "{text}");
}
