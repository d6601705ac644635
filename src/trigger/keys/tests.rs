use super::*;

#[test]
fn every_key_is_listed_once_and_has_a_group() {
    let mut all: Vec<&str> = ALL.to_vec();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), ALL.len(), "a key is listed twice in ALL");
    for key in ALL {
        let groups = GROUPS.iter().filter(|g| g.contains(key)).count();
        let expected = if *key == AUTH_PROFILE { 2 } else { 1 };
        assert_eq!(groups, expected, "{key} is in {groups} groups");
        assert!(!KEDAS.contains(key), "{key} is also KEDA's");
        assert!(!KEDA_REFUSED.contains(key), "{key} is also refused");
        assert!(
            !KEDA_ALIASES.iter().any(|(alias, _)| alias == key),
            "{key} is also an alias"
        );
    }
    for (alias, key) in KEDA_ALIASES {
        assert!(ALL.contains(key), "{alias} → {key}, not a key");
        assert!(!KEDA_REFUSED.contains(alias) && !KEDAS.contains(alias));
    }
    for (keda, ours) in KEDA_RENAMED {
        assert!(ALL.contains(ours), "{keda} → {ours}, not a key");
        assert!(
            !ALL.contains(keda)
                && !KEDAS.contains(keda)
                && !KEDA_REFUSED.contains(keda)
                && !KEDA_ALIASES.iter().any(|(alias, _)| alias == keda),
            "{keda} is read, so it cannot be renamed"
        );
    }
    for group in GROUPS {
        assert!(group.iter().all(|k| ALL.contains(k)), "{group:?}");
    }
    for key in BROKER {
        assert!(
            SQS.contains(key)
                || KAFKA.contains(key)
                || RABBITMQ.contains(key)
                || BROKER_COMMON.contains(key),
            "{key}"
        );
    }
}
