//! The pod model step by step: prefill and decode timing, the KV budget, chunked prefill,
//! routing, cold start and drain.

use super::*;
use crate::fake::TTFT_BUCKETS;

fn request(arrival: f64, input_tokens: u32, output_tokens: u32) -> Request {
    Request {
        arrival,
        input_tokens,
        output_tokens,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn a_lone_request_is_one_prefill_step_then_one_decode_step_per_token() {
    let model = PodModel::default();
    let mut fleet = Fleet::new(model, 1, 0.0);
    fleet.arrive(request(1.0, 1000, 100));
    let stats = fleet.finish(100.0);
    let ttft = model.step_seconds(0, 1000);
    assert_eq!(stats.ttft.len(), 1);
    assert!(close(f64::from(stats.ttft[0].1), ttft), "{:?}", stats.ttft);
    assert_eq!(stats.finished, 1);
    let e2e = ttft + 99.0 * model.step_seconds(1, 0);
    assert!(
        close(stats.sojourn_seconds, e2e),
        "{}",
        stats.sojourn_seconds
    );
}

#[test]
fn a_long_prompt_is_prefilled_in_chunks_beside_the_decodes() {
    let model = PodModel::default();
    let mut fleet = Fleet::new(model, 1, 0.0);
    fleet.arrive(request(0.0, 10, 1000)); // decoding long before the big prompt comes
    fleet.arrive(request(1.0, 5000, 10));
    let stats = fleet.finish(100.0);
    // Budget per step: 2048 − 1 decode = 2047 → chunks 2047, 2047, 906.
    let (_, big) = stats.ttft[1];
    let chunks = 2.0 * model.step_seconds(1, 2047) + model.step_seconds(1, 906);
    // It arrives during a decode step and waits for the step to end (< one step).
    let wait = f64::from(big) - chunks;
    assert!(
        (0.0..=model.step_seconds(1, 0)).contains(&wait),
        "TTFT {big} vs chunks {chunks}"
    );
}

#[test]
fn a_prompts_tokens_are_counted_when_its_prefill_completes() {
    // vLLM V1 adds a prompt to `prompt_tokens_total` in the step that emits its first token
    // (it streams no output for a partial prefill), not on admission or chunk by chunk.
    let model = PodModel::default();
    let mut fleet = Fleet::new(model, 1, 0.0);
    fleet.arrive(request(0.0, 5000, 10)); // three chunks: 2048, 2048, 904
    let prompt_tokens = |fleet: &mut Fleet| {
        let pod = fleet.reading().pods.remove(0);
        (pod.running, pod.prompt_tokens_total)
    };
    fleet.advance_to(1.5 * model.step_seconds(0, 2048));
    assert_eq!(
        prompt_tokens(&mut fleet),
        (Some(1.0), Some(0.0)),
        "mid-prefill"
    );
    fleet.advance_to(3.0 * model.step_seconds(0, 2048));
    assert_eq!(
        prompt_tokens(&mut fleet),
        (Some(1.0), Some(5000.0)),
        "first token out"
    );
}

#[test]
fn a_prompt_not_given_a_chunk_yet_is_waiting_not_running() {
    // vLLM V1 moves a request from its waiting queue to its running list (the
    // `num_requests_running` gauge, "requests in model execution batches") in the step that
    // schedules its first tokens, and allocates its KV blocks then. Three 1500-token prompts
    // arriving together: the first step (read while it runs, as the scheduler has already
    // placed it) prefills all of the first and 548 tokens of the second; the third, admitted
    // by the simulator, has no chunk in it.
    let model = PodModel::default();
    let mut fleet = Fleet::new(model, 1, 0.0);
    for _ in 0..3 {
        fleet.arrive(request(0.0, 1500, 10));
    }
    fleet.advance_to(0.5 * model.step_seconds(0, 2048));
    let pod = fleet.reading().pods.remove(0);
    assert_eq!(
        (pod.running, pod.waiting),
        (Some(2.0), 1.0),
        "two scheduled in the step, one not begun"
    );
    let usage = pod.kv_cache_usage.expect("a KV gauge");
    assert!(
        close(usage, 2.0 * 1510.0 / model.kv_cache_tokens as f64),
        "the prompt not begun holds no blocks yet: {usage}"
    );
    assert_eq!(
        fleet.pods[0].metrics().queue_time.count(),
        2,
        "queue time ends when a request is first scheduled"
    );
    let stats = fleet.finish(100.0);
    assert_eq!(stats.finished, 3);
}

#[test]
fn a_full_kv_cache_queues_requests_below_max_num_seqs() {
    let model = PodModel {
        kv_cache_tokens: 1000,
        ..PodModel::default()
    };
    let mut fleet = Fleet::new(model, 1, 0.0);
    fleet.arrive(request(0.0, 500, 100));
    fleet.arrive(request(0.0, 500, 100));
    fleet.advance_to(0.01);
    let pod = fleet.reading().pods.remove(0);
    assert_eq!((pod.running, pod.waiting), (Some(1.0), 1.0));
    assert!(pod.kv_cache_usage.is_some_and(|u| close(u, 0.6)));
    let stats = fleet.finish(100.0);
    assert_eq!(
        stats.finished, 2,
        "the second runs once the first frees its blocks"
    );
}

#[test]
fn max_num_seqs_caps_the_batch() {
    let model = PodModel {
        max_num_seqs: 2,
        ..PodModel::default()
    };
    let mut fleet = Fleet::new(model, 1, 0.0);
    for _ in 0..3 {
        fleet.arrive(request(0.0, 100, 50));
    }
    fleet.advance_to(0.5);
    let pod = fleet.reading().pods.remove(0);
    assert_eq!((pod.running, pod.waiting), (Some(2.0), 1.0));
}

#[test]
fn least_request_routing_spreads_the_load() {
    let mut fleet = Fleet::new(PodModel::default(), 3, 0.0);
    for i in 0..9 {
        fleet.arrive(request(f64::from(i) * 0.001, 100, 4000));
    }
    // Each pod holds three: one in its first prefill step, two queued behind the step.
    let load: Vec<f64> = fleet
        .reading()
        .pods
        .iter()
        .map(|p| p.running.unwrap_or(0.0) + p.waiting)
        .collect();
    assert_eq!(load, vec![3.0; 3]);
}

#[test]
fn cold_start_then_ready_and_gateway_drains() {
    let model = PodModel {
        cold_start_seconds: 90.0,
        ..PodModel::default()
    };
    let mut fleet = Fleet::new(model, 0, 0.0);
    fleet.scale_to(1, 0.0);
    assert_eq!((fleet.replicas(), fleet.ready()), (1, 0));
    fleet.arrive(request(10.0, 1000, 10));
    assert_eq!(fleet.waiting(), 1, "held at the gateway");
    assert!(
        fleet.reading().pods.is_empty(),
        "warming pods are not scraped"
    );
    fleet.settle(89.0);
    assert_eq!(fleet.ready(), 0);
    fleet.settle(90.0);
    assert_eq!(fleet.ready(), 1);
    let stats = fleet.finish(200.0);
    let ttft = 80.0 + model.step_seconds(0, 1000);
    // f32 keeps about 1e-5 s at 80 s.
    assert!(
        (f64::from(stats.ttft[0].1) - ttft).abs() < 1e-4,
        "{:?}",
        stats.ttft
    );
    assert!(close(stats.pod_seconds, 200.0), "warm-up is paid for");
}

#[test]
fn scale_down_removes_warming_first_then_drains_the_newest_ready() {
    let mut fleet = Fleet::new(PodModel::default(), 2, 0.0);
    fleet.arrive(request(0.0, 100, 2000));
    fleet.arrive(request(0.0, 100, 2000));
    fleet.scale_to(4, 1.0);
    assert_eq!((fleet.replicas(), fleet.pods_alive()), (4, 4));
    fleet.scale_to(1, 2.0);
    assert_eq!(fleet.replicas(), 1);
    assert_eq!(fleet.pods_alive(), 2, "one ready pod drains its request");
    assert_eq!(
        fleet.reading().pods.len(),
        1,
        "draining pods are not scraped"
    );
    fleet.settle(10.0);
    assert_eq!(fleet.pods_alive(), 2);
    fleet.settle(200.0);
    assert_eq!(fleet.pods_alive(), 1, "drained pod removed");
    assert_eq!(fleet.finish(300.0).finished, 2);
}

#[test]
fn the_warm_up_loads_the_pods_but_is_not_measured() {
    let mut fleet = Fleet::new(PodModel::default(), 1, -60.0);
    fleet.arrive(request(-30.0, 100, 10));
    fleet.arrive(request(5.0, 100, 10));
    let stats = fleet.finish(60.0);
    assert_eq!(stats.ttft.len(), 1);
    assert_eq!(stats.ttft[0].0, 5.0);
    assert_eq!(stats.finished, 1);
    assert!(close(stats.pod_seconds, 60.0), "GPU time from 0 only");
}

#[test]
fn metrics_are_vllms_cumulative_counters_and_histograms() {
    let mut fleet = Fleet::new(PodModel::default(), 1, 0.0);
    fleet.arrive(request(0.0, 300, 20));
    fleet.arrive(request(0.0, 200, 5));
    fleet.advance_to(100.0);
    let pod = fleet.reading().pods.remove(0);
    assert_eq!(pod.finished_total, Some(2.0));
    let ttft = pod.ttft.expect("histogram");
    assert_eq!(ttft.bounds.len(), TTFT_BUCKETS.len() + 1);
    assert_eq!(ttft.total(), 2.0);
    let (_, metrics) = fleet.metrics().next().expect("one ready pod");
    assert_eq!(metrics.prompt_tokens, 500);
    assert_eq!(metrics.generation_tokens, 25);
    assert_eq!(metrics.e2e.count(), 2);
    assert_eq!(metrics.queue_time.count(), 2);
    // One ITL observation per token after the first: 19 + 4.
    assert_eq!(metrics.itl.count(), 23);
}

#[test]
fn a_scrape_of_the_exposition_reads_what_the_policies_are_given() {
    use crate::source::engine::{Engine, EngineSource};
    let source = EngineSource {
        engine: Engine::Vllm,
        targets: Vec::new(),
        model_name: None,
        prometheus: None,
        requires: Default::default(),
    };
    let model = PodModel::default();
    let mut fleet = Fleet::new(model, 2, 0.0);
    for i in 0..400 {
        fleet.arrive(request(
            f64::from(i) * 0.05,
            800 + i as u32,
            50 + (i % 7) as u32 * 40,
        ));
    }
    fleet.advance_to(15.0);
    let direct = fleet.reading();
    for (pod, given) in fleet.pods.iter().zip(&direct.pods) {
        let body = pod.exposition(&model);
        let (parsed, malformed) = source
            .parse_pod(&given.target, &body)
            .expect("the server's parser reads the simulated pod");
        assert_eq!(malformed, 0);
        assert_eq!(parsed.waiting, given.waiting);
        assert_eq!(parsed.running, given.running);
        assert_eq!(parsed.finished_total, given.finished_total);
        assert_eq!(parsed.ttft, given.ttft);
        // The token unit (decision 0027) reads these.
        assert_eq!(
            parsed.generation_tokens_total,
            given.generation_tokens_total
        );
        assert_eq!(parsed.prompt_tokens_total, given.prompt_tokens_total);
        assert!(
            given.generation_tokens_total.is_some_and(|g| g > 100.0),
            "{given:?}"
        );
        let (a, b) = (
            parsed.kv_cache_usage.unwrap_or(-1.0),
            given.kv_cache_usage.unwrap_or(-2.0),
        );
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        assert!(given.finished_total.is_some_and(|n| n > 10.0), "{given:?}");
        assert!(body.contains("vllm:generation_tokens_total"), "{body}");
    }
}
