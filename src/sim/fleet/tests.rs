//! The pod model: batching speed, queues, routing, cold start and drain, event by event.

use super::*;

fn request(arrival: f64, prefill: f64, decode: f64) -> Request {
    Request {
        arrival,
        prefill,
        decode,
    }
}

#[test]
fn a_lone_request_takes_its_work_at_full_speed() {
    let mut fleet = Fleet::new(PodModel::default(), 1, 0.0);
    fleet.arrive(request(1.0, 0.5, 4.0));
    let stats = fleet.finish(100.0);
    assert_eq!(stats.ttft, vec![(1.0, 0.5)]);
    assert_eq!(stats.finished, 1);
    assert!((stats.sojourn_seconds - 4.5).abs() < 1e-9);
}

#[test]
fn a_full_batch_stretches_and_the_rest_waits() {
    let model = PodModel {
        max_num_seqs: 2,
        batch_stretch: 1.0,
        ..PodModel::default()
    };
    let mut fleet = Fleet::new(model, 1, 0.0);
    for _ in 0..3 {
        fleet.arrive(request(0.0, 1.0, 1.0));
    }
    fleet.advance_to(0.5);
    let pod = fleet.reading().pods.remove(0);
    assert_eq!((pod.running, pod.waiting), (Some(2.0), 1.0));
    // Two at half speed: first tokens at 2 s, finishes at 4 s; the third
    // starts alone at 4 s: first token at 5 s.
    let stats = fleet.finish(100.0);
    let ttfts: Vec<f32> = stats.ttft.iter().map(|(_, t)| *t).collect();
    assert_eq!(ttfts, vec![2.0, 2.0, 5.0]);
    assert_eq!(stats.finished, 3);
}

#[test]
fn least_request_routing_spreads_the_load() {
    let mut fleet = Fleet::new(PodModel::default(), 3, 0.0);
    for i in 0..9 {
        fleet.arrive(request(f64::from(i) * 0.01, 100.0, 100.0));
    }
    let running: Vec<Option<f64>> = fleet.reading().pods.iter().map(|p| p.running).collect();
    assert_eq!(running, vec![Some(3.0); 3]);
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
    fleet.arrive(request(10.0, 0.5, 1.0));
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
    assert_eq!(stats.ttft, vec![(10.0, 80.5)]);
    assert!(
        (stats.pod_seconds - 200.0).abs() < 1e-9,
        "warm-up is paid for"
    );
}

#[test]
fn scale_down_removes_warming_first_then_drains_the_newest_ready() {
    let mut fleet = Fleet::new(PodModel::default(), 2, 0.0);
    fleet.arrive(request(0.0, 1.0, 50.0));
    fleet.arrive(request(0.0, 1.0, 50.0));
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
fn reading_counters_are_cumulative() {
    let mut fleet = Fleet::new(PodModel::default(), 1, 0.0);
    fleet.arrive(request(0.0, 0.03, 1.0));
    fleet.arrive(request(0.0, 3.0, 1.0));
    fleet.advance_to(100.0);
    let pod = fleet.reading().pods.remove(0);
    assert_eq!(pod.finished_total, Some(2.0));
    let ttft = pod.ttft.expect("histogram");
    assert_eq!(ttft.bounds.len(), TTFT_BUCKETS.len() + 1);
    assert_eq!(ttft.total(), 2.0);
    // 0.03 s ≤ 0.04; ~3 s (stretched a little) ≤ 5.0.
    let at = |bound: f64| ttft.counts[ttft.bounds.iter().position(|b| *b == bound).expect("bound")];
    assert_eq!((at(0.04), at(2.5), at(5.0)), (1.0, 1.0, 2.0));
}
