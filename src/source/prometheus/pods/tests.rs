//! The answers → per-pod reading mapping, as tables.

use super::*;
use crate::source::error::FailureKind;
use reqwest::Url;

fn queries() -> PodQueries {
    PodQueries {
        address: Url::parse("http://127.0.0.1:9090").expect("url"),
        auth_profile: None,
        pod_label: "pod".into(),
        waiting: "W".into(),
        running: Some("R".into()),
        finished: "F".into(),
        generation_tokens: Some("G".into()),
        prompt_tokens: Some("P".into()),
        kv_cache: Some("KV".into()),
        ttft: Some("TTFT".into()),
    }
}

/// A series `{namespace="ns", pod=…, extra…}`.
fn s(pod: &str, value: f64) -> Sample {
    let mut metric = BTreeMap::new();
    metric.insert("namespace".to_owned(), "ns".to_owned());
    metric.insert("pod".to_owned(), pod.to_owned());
    Sample { metric, value }
}

fn bucket(pod: &str, le: &str, value: f64) -> Sample {
    let mut sample = s(pod, value);
    sample.metric.insert("le".to_owned(), le.to_owned());
    sample
}

fn answers(
    w: &[(&str, f64)],
    r: &[(&str, f64)],
    f: &[(&str, f64)],
    kv: &[(&str, f64)],
) -> PodAnswers {
    let all = |v: &[(&str, f64)]| v.iter().map(|(p, x)| s(p, *x)).collect::<Vec<_>>();
    PodAnswers {
        waiting: all(w),
        running: Some(all(r)),
        finished: all(f),
        generation_tokens: Some(Vec::new()),
        prompt_tokens: Some(Vec::new()),
        kv_cache: Some(all(kv)),
        ttft: Some(Vec::new()),
    }
}

/// One row: the answers, then per pod `(target, W, R, F, KV)` read, and the
/// pods that failed (with a word of their reason).
type Row<'a> = (
    &'a str,
    PodAnswers,
    &'a [(&'a str, f64, Option<f64>, Option<f64>, Option<f64>)],
    &'a [(&'a str, &'a str)],
);

#[test]
fn answers_become_the_pods_a_scrape_would_give() {
    let rows: Vec<Row> = vec![
        (
            "every series present",
            answers(
                &[("a", 3.0), ("b", 0.0)],
                &[("a", 8.0), ("b", 2.0)],
                &[("a", 100.0), ("b", 7.0)],
                &[("a", 0.5), ("b", 0.25)],
            ),
            &[
                ("ns/a", 3.0, Some(8.0), Some(100.0), Some(0.5)),
                ("ns/b", 0.0, Some(2.0), Some(7.0), Some(0.25)),
            ],
            &[],
        ),
        (
            // The counter missing is read as missing (λ̂ held, B floored),
            // never as 0 finished.
            "a pod without its finished counter",
            answers(
                &[("a", 3.0), ("b", 1.0)],
                &[("a", 8.0), ("b", 2.0)],
                &[("a", 100.0)],
                &[("a", 0.5), ("b", 0.25)],
            ),
            &[
                ("ns/a", 3.0, Some(8.0), Some(100.0), Some(0.5)),
                ("ns/b", 1.0, Some(2.0), None, Some(0.25)),
            ],
            &[],
        ),
        (
            // Named by other queries but without W (stale, not scraped):
            // a failed pod, held then left out, never W = 0.
            "a pod without its waiting series",
            answers(
                &[("a", 3.0)],
                &[("a", 8.0), ("b", 2.0)],
                &[("a", 100.0), ("b", 7.0)],
                &[],
            ),
            &[("ns/a", 3.0, Some(8.0), Some(100.0), None)],
            &[("ns/b", "no series in `W`")],
        ),
        (
            "a pod without its running series",
            answers(
                &[("a", 3.0), ("b", 1.0)],
                &[("a", 8.0)],
                &[("a", 100.0), ("b", 7.0)],
                &[],
            ),
            &[("ns/a", 3.0, Some(8.0), Some(100.0), None)],
            &[("ns/b", "no series in `R`")],
        ),
        (
            "values that are not counts",
            answers(
                &[("a", f64::NAN), ("b", 1.0), ("c", 2.0)],
                &[("a", 1.0), ("b", -1.0), ("c", 1.0)],
                &[("a", 1.0), ("b", 1.0), ("c", f64::INFINITY)],
                &[("c", f64::NAN)],
            ),
            &[("ns/c", 2.0, Some(1.0), None, None)],
            &[("ns/a", "waiting"), ("ns/b", "running")],
        ),
        (
            // KV-cache usage is a fraction: 85 is a percentage or a broken exporter.
            "a KV-cache usage above 1",
            answers(
                &[("a", 3.0), ("b", 1.0)],
                &[("a", 8.0), ("b", 2.0)],
                &[("a", 100.0), ("b", 7.0)],
                &[("a", 85.0), ("b", 1.0)],
            ),
            &[("ns/b", 1.0, Some(2.0), Some(7.0), Some(1.0))],
            &[(
                "ns/a",
                "KV-cache usage 85 in `KV` is not a fraction from 0 to 1",
            )],
        ),
        (
            // Several series of one pod (an override that kept `engine`):
            // summed, as the scrape sums a pod's engines; KV averaged.
            "several series of one pod",
            answers(
                &[("a", 1.0), ("a", 2.0)],
                &[("a", 4.0), ("a", 4.0)],
                &[("a", 10.0), ("a", 5.0)],
                &[("a", 0.2), ("a", 0.4)],
            ),
            &[(
                "ns/a",
                3.0,
                Some(8.0),
                Some(15.0),
                Some(0.30000000000000004),
            )],
            &[],
        ),
    ];
    for (name, answers, pods, failed) in rows {
        let read = queries()
            .reading(Engine::Vllm, RequiredSignals::default(), &answers)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let got: Vec<_> = read
            .reading
            .pods
            .iter()
            .map(|p| {
                (
                    p.target.as_str(),
                    p.waiting,
                    p.running,
                    p.finished_total,
                    p.kv_cache_usage,
                )
            })
            .collect();
        assert_eq!(got, pods.to_vec(), "{name}");
        assert_eq!(read.failed.len(), failed.len(), "{name}: {:?}", read.failed);
        for (f, (target, word)) in read.failed.iter().zip(failed.iter()) {
            assert_eq!(f.target, *target, "{name}");
            assert!(f.error.to_string().contains(word), "{name}: {}", f.error);
            assert!(!f.error.kind().is_transient(), "{name}");
        }
        assert_eq!(read.reading.engine, Engine::Vllm);
    }
}

#[test]
fn no_pod_or_no_pod_label_fails_the_reading() {
    let q = queries();
    let empty = answers(&[], &[], &[], &[]);
    let err = q
        .reading(Engine::Vllm, RequiredSignals::default(), &empty)
        .expect_err("no pods");
    assert!(err.to_string().contains("no pod in `W`"), "{err}");
    // Every pod failed: the first one's reason.
    let err = q
        .reading(
            Engine::Vllm,
            RequiredSignals::default(),
            &answers(&[], &[("a", 1.0)], &[], &[]),
        )
        .expect_err("all failed");
    assert!(err.to_string().contains("no series in `W`"), "{err}");
    // A query that summed the pod label away cannot be read per pod.
    let mut bad = answers(&[("a", 1.0)], &[("a", 1.0)], &[], &[]);
    bad.finished = vec![Sample {
        metric: BTreeMap::new(),
        value: 4.0,
    }];
    let err = q
        .reading(Engine::Vllm, RequiredSignals::default(), &bad)
        .expect_err("no pod label");
    assert!(
        err.to_string().contains("has no `pod` label") && err.to_string().contains("podLabel"),
        "{err}"
    );
    // Without a namespace label the pod is named by its label alone.
    let mut plain = answers(&[("a", 1.0)], &[("a", 1.0)], &[], &[]);
    for sample in plain
        .waiting
        .iter_mut()
        .chain(plain.running.iter_mut().flatten())
    {
        sample.metric.remove("namespace");
    }
    let read = q
        .reading(Engine::Vllm, RequiredSignals::default(), &plain)
        .expect("valid");
    assert_eq!(read.reading.pods[0].target, "a");
}

#[test]
fn ttft_buckets_per_pod_are_sorted_scaled_and_checked() {
    let mut a = answers(
        &[("a", 0.0), ("b", 0.0), ("c", 0.0)],
        &[("a", 0.0), ("b", 0.0), ("c", 0.0)],
        &[],
        &[],
    );
    a.ttft = Some(vec![
        bucket("a", "+Inf", 10.0),
        bucket("a", "0.5", 4.0),
        bucket("a", "0.1", 1.0),
        // No +Inf bucket: no histogram for b.
        bucket("b", "0.1", 1.0),
        // Counts falling with the bound: not a cumulative histogram.
        bucket("c", "0.1", 5.0),
        bucket("c", "+Inf", 4.0),
    ]);
    let read = queries()
        .reading(Engine::Vllm, RequiredSignals::default(), &a)
        .expect("valid");
    let ttft: Vec<Option<Buckets>> = read.reading.pods.iter().map(|p| p.ttft.clone()).collect();
    assert_eq!(
        ttft[0],
        Some(Buckets {
            bounds: vec![0.1, 0.5, f64::INFINITY],
            counts: vec![1.0, 4.0, 10.0],
        })
    );
    assert_eq!(ttft[1], None);
    assert_eq!(ttft[2], None);
    // Triton's histogram is in milliseconds.
    let mut t = answers(&[("a", 0.0)], &[("a", 0.0)], &[], &[]);
    t.ttft = Some(vec![bucket("a", "100", 1.0), bucket("a", "+Inf", 2.0)]);
    let read = queries()
        .reading(Engine::Triton, RequiredSignals::default(), &t)
        .expect("valid");
    let b = read.reading.pods[0].ttft.as_ref().expect("buckets");
    assert!((b.bounds[0] - 0.1).abs() < 1e-12, "{b:?}");
}

#[test]
fn token_counters_are_read_per_pod_and_never_fail_a_pod() {
    let tokens = |pods: &[(&str, f64)]| Some(pods.iter().map(|(p, v)| s(p, *v)).collect());
    let both = &[("a", 1.0), ("b", 2.0)];
    let mut a = answers(both, both, both, &[]);
    // b's prompt counter is missing, c only in the token answers, and b's
    // second generated series is not a count.
    a.generation_tokens = tokens(&[("a", 500.0), ("b", 70.0), ("b", -1.0), ("c", 9.0)]);
    a.prompt_tokens = tokens(&[("a", 1000.0), ("a", 24.0), ("c", 9.0)]);
    let read = queries()
        .reading(Engine::Vllm, RequiredSignals::default(), &a)
        .expect("valid");
    let got: Vec<_> = read
        .reading
        .pods
        .iter()
        .map(|p| {
            let t = (p.generation_tokens_total, p.prompt_tokens_total);
            (p.target.as_str(), t, p.finished_total)
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("ns/a", (Some(500.0), Some(1024.0)), Some(1.0)),
            ("ns/b", (None, None), Some(2.0)),
        ]
    );
    assert!(read.failed.is_empty(), "{:?}", read.failed);
    // No token answer (the query failed, or the engine has none), or one
    // that summed the pod label away: tokens None, the rest read.
    for (name, broken) in [
        ("no answers", None),
        (
            "no pod label",
            Some(vec![Sample {
                metric: BTreeMap::new(),
                value: 4.0,
            }]),
        ),
    ] {
        let mut a = answers(both, both, both, &[]);
        a.generation_tokens = broken.clone();
        a.prompt_tokens = broken;
        let read = queries()
            .reading(Engine::Vllm, RequiredSignals::default(), &a)
            .expect(name);
        assert_eq!(read.reading.pods.len(), 2, "{name}");
        for p in &read.reading.pods {
            assert_eq!(p.generation_tokens_total, None, "{name}");
            assert_eq!(p.prompt_tokens_total, None, "{name}");
            assert!(p.finished_total.is_some(), "{name}");
        }
    }
}

#[test]
fn a_pod_without_a_required_kv_or_finished_series_is_a_failed_pod() {
    // a has every series; b lacks KV, c its finished counter, d has a KV
    // value that is no fraction.
    let every = &[("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", 1.0)];
    let a = answers(
        every,
        every,
        &[("a", 5.0), ("b", 5.0), ("d", 5.0)],
        &[("a", 0.5), ("c", 0.5), ("d", f64::NAN)],
    );
    // Not required: b and d read without KV, c without its counter.
    let read = queries()
        .reading(Engine::Vllm, RequiredSignals::default(), &a)
        .expect("valid");
    assert_eq!(read.reading.pods.len(), 4);
    assert!(read.failed.is_empty(), "{:?}", read.failed);
    let required = RequiredSignals {
        running: true,
        kv_cache: true,
        finished: true,
    };
    let read = queries()
        .reading(Engine::Vllm, required, &a)
        .expect("a reads");
    let pods: Vec<&str> = read
        .reading
        .pods
        .iter()
        .map(|p| p.target.as_str())
        .collect();
    assert_eq!(pods, ["ns/a"]);
    let failed: Vec<(&str, String)> = read
        .failed
        .iter()
        .map(|f| (f.target.as_str(), f.error.to_string()))
        .collect();
    assert_eq!(
        failed,
        [
            (
                "ns/b",
                "ns/b: no KV-cache usage gauge (kvCacheTarget is set): no valid series in `KV` (not scraped, stale, or not a number ≥ 0)".to_owned()
            ),
            (
                "ns/c",
                "ns/c: no finished-requests counter (policy capacity needs it with learnDrainRate: false): no valid series in `F` (not scraped, stale, or not a number ≥ 0)".to_owned()
            ),
            (
                "ns/d",
                "ns/d: no KV-cache usage gauge (kvCacheTarget is set): no valid series in `KV` (not scraped, stale, or not a number ≥ 0)".to_owned()
            ),
        ]
    );
    assert!(
        read.failed
            .iter()
            .all(|f| f.error.kind() == FailureKind::Parse)
    );
}
