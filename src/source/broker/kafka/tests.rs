use super::*;

fn source() -> KafkaSource {
    KafkaSource {
        bootstrap_servers: vec!["127.0.0.1:9092".into()],
        consumer_group: "g".into(),
        topic: Some("t".into()),
        offset_reset_policy: OffsetResetPolicy::Latest,
        scale_to_zero_on_invalid_offset: false,
        allow_idle_consumers: false,
        exclude_persistent_lag: false,
        limit_to_partitions_with_lag: false,
        auth_profile: None,
    }
}

fn p(partition: i32, committed: Option<i64>, high_watermark: i64) -> PartitionOffsets {
    PartitionOffsets {
        topic: "t".into(),
        partition,
        committed,
        high_watermark,
    }
}

#[test]
fn lag_is_watermark_minus_committed() {
    let offsets = [p(0, Some(3), 5), p(1, Some(5), 5), p(2, Some(0), 4)];
    let r = source().lag_reading(&offsets, &mut HashMap::new());
    assert_eq!(r.messages, 6.0);
    assert_eq!(r.partitions, Some(3));
    assert_eq!(r.breakdown["t/0"], 2.0);
    assert_eq!(r.breakdown["t/1"], 0.0);
    assert_eq!(r.breakdown[LAG_WITH_PERSISTENT], 6.0);
}

#[test]
fn missing_commits_follow_the_reset_policy() {
    let offsets = [p(0, None, 7), p(1, Some(2), 3)];
    let latest = source().lag_reading(&offsets, &mut HashMap::new());
    assert_eq!(latest.messages, 2.0);
    let earliest = KafkaSource {
        offset_reset_policy: OffsetResetPolicy::Earliest,
        ..source()
    }
    .lag_reading(&offsets, &mut HashMap::new());
    assert_eq!(earliest.messages, 8.0);
    for policy in [OffsetResetPolicy::Latest, OffsetResetPolicy::Earliest] {
        let zero = KafkaSource {
            offset_reset_policy: policy,
            scale_to_zero_on_invalid_offset: true,
            ..source()
        }
        .lag_reading(&offsets, &mut HashMap::new());
        assert_eq!(zero.messages, 1.0, "{policy:?}");
    }
}

#[test]
fn partition_cap_follows_keda() {
    let offsets = [p(0, Some(0), 5), p(1, Some(5), 5), p(2, Some(5), 5)];
    let idle = KafkaSource {
        allow_idle_consumers: true,
        ..source()
    }
    .lag_reading(&offsets, &mut HashMap::new());
    assert_eq!(idle.partitions, None);
    let limited = KafkaSource {
        limit_to_partitions_with_lag: true,
        ..source()
    }
    .lag_reading(&offsets, &mut HashMap::new());
    assert_eq!((limited.messages, limited.partitions), (5.0, Some(1)));
}

#[test]
fn persistent_lag_counts_only_for_activation() {
    let s = KafkaSource {
        exclude_persistent_lag: true,
        ..source()
    };
    let mut previous = HashMap::new();
    let first = s.lag_reading(&[p(0, Some(2), 10), p(1, Some(4), 6)], &mut previous);
    assert_eq!(first.messages, 10.0, "first sight counts");
    // Partition 0 is stuck at 2; partition 1 moved on.
    let second = s.lag_reading(&[p(0, Some(2), 12), p(1, Some(5), 6)], &mut previous);
    assert_eq!(second.messages, 1.0);
    assert_eq!(second.breakdown["t/0"], 0.0);
    assert_eq!(second.breakdown[LAG_WITH_PERSISTENT], 11.0);
    // With the stuck partition at 0 lag for scaling, the cap does not count it.
    let limited = KafkaSource {
        limit_to_partitions_with_lag: true,
        ..s
    }
    .lag_reading(&[p(0, Some(2), 12), p(1, Some(6), 7)], &mut previous);
    assert_eq!(limited.partitions, Some(1));
}

#[test]
fn truncated_partitions_have_no_negative_lag() {
    let r = source().lag_reading(&[p(0, Some(9), 4)], &mut HashMap::new());
    assert_eq!(r.messages, 0.0);
}

#[test]
fn kafka_failures_are_classified_by_code_and_text() {
    use RDKafkaErrorCode as C;
    for (code, kind) in [
        (C::SaslAuthenticationFailed, FailureKind::Auth),
        (C::TopicAuthorizationFailed, FailureKind::Auth),
        (C::GroupAuthorizationFailed, FailureKind::Auth),
        (C::UnknownTopicOrPartition, FailureKind::Rejected),
        (C::AllBrokersDown, FailureKind::Unreachable),
        (C::OperationTimedOut, FailureKind::Unreachable),
        (C::BrokerTransportFailure, FailureKind::Unreachable),
        (
            C::Resolve,
            FailureKind::Dns {
                no_such_name: false,
            },
        ),
    ] {
        assert_eq!(classify_code(code), kind, "{code:?}");
    }
    let timed_out = KafkaError::MetadataFetch(C::OperationTimedOut);
    assert_eq!(
        classify(&timed_out, "metadata request failed"),
        FailureKind::Unreachable
    );
    let resolve = KafkaError::Global(C::Resolve);
    assert_eq!(
        classify(
            &resolve,
            "Failed to resolve 'nowhere.invalid:9092': Name or service not known"
        ),
        FailureKind::Dns { no_such_name: true }
    );
}
