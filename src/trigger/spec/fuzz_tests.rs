//! Inputs the `trigger_metadata` fuzz target found (decision 0017): metadata
//! whose unknown keys made validation cost seconds of CPU per GetMetricSpec.

use std::time::{Duration, Instant};

use super::TriggerSpec;
use crate::trigger::error::MAX_UNKNOWN_LISTED;
use crate::trigger::values::MAX_SUGGESTIONS;
use crate::trigger::{MetadataError, Redacted};

/// Far above what the bounded work takes even in a debug build on a busy
/// machine (milliseconds), far below what the unbounded comparison took.
const BUDGET: Duration = Duration::from_secs(5);

fn unknown(errors: &[MetadataError]) -> Vec<(&str, Option<&'static str>)> {
    errors
        .iter()
        .filter_map(|e| match e {
            MetadataError::Unknown { key, nearest } => Some((key.as_str(), *nearest)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_huge_unknown_key_is_refused_without_comparing_it_character_by_character() {
    // Before: every valid key was compared by edit distance with the whole key
    // (7 s for 100 KB in the fuzz build; a ScaledObject may hold 1.5 MB).
    let junk = "x".repeat(1_000_000);
    let typo = format!("targetBacklogPerReplica{}", "y".repeat(1_000_000));
    let md = [
        ("vllmTargets", "http://127.0.0.1:8000/metrics"),
        ("targetBacklogPerReplica", "10"),
        (junk.as_str(), "1"),
        (typo.as_str(), "1"),
    ];
    let started = Instant::now();
    let errors = TriggerSpec::from_metadata(md).expect_err("unknown keys");
    assert!(started.elapsed() < BUDGET, "took {:?}", started.elapsed());
    assert_eq!(
        unknown(&errors.0),
        [
            (Redacted::new(&junk).as_str(), None),
            // A key that starts with a valid one is still read as a typo of it.
            (
                Redacted::new(&typo).as_str(),
                Some("targetBacklogPerReplica")
            ),
        ]
    );
}

#[test]
fn thousands_of_unknown_keys_are_counted_and_only_the_first_get_suggestions() {
    // Before: 4,000 keys of 30 letters took 10 s per validation (fuzz build).
    let keys: Vec<String> = (0..20_000)
        .map(|i| format!("targetbacklogperreplic{i:05}"))
        .collect();
    let mut md = vec![("targetBacklogPerReplica", "10")];
    md.extend(keys.iter().map(|k| (k.as_str(), "1")));
    let started = Instant::now();
    let errors = TriggerSpec::from_metadata(md).expect_err("unknown keys");
    assert!(started.elapsed() < BUDGET, "took {:?}", started.elapsed());
    let unknown = unknown(&errors.0);
    // The first are listed (a message of 20,000 keys is ~600 KB), the rest counted.
    assert_eq!(unknown.len(), MAX_UNKNOWN_LISTED);
    assert!(
        errors.0.contains(&MetadataError::MoreUnknown {
            count: keys.len() - MAX_UNKNOWN_LISTED
        }),
        "{errors}"
    );
    let suggested = unknown.iter().filter(|(_, n)| n.is_some()).count();
    // Each key is 5 edits from `targetBacklogPerReplica`: near enough.
    assert_eq!(suggested, MAX_SUGGESTIONS);
    assert!(unknown[..MAX_SUGGESTIONS].iter().all(|(_, n)| n.is_some()));
}
