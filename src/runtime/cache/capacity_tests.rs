//! `maxTriggers`: the registry refuses a new trigger past the limit and
//! makes room again when one idles out.

use std::sync::Arc;
use std::time::Duration;

use super::{CacheSettings, DecisionCache, RegisterError};
use crate::runtime::poller::PollerRegistry;
use crate::runtime::telemetry::Telemetry;
use crate::source::context::SourceContext;
use crate::source::http::HttpScraper;

/// Past `maxTriggers`, a new trigger is refused with the typed error;
/// registered ones keep answering; an idle drop makes room again.
#[tokio::test]
async fn past_max_triggers_new_ones_are_refused_until_one_idles_out() {
    let telemetry = Arc::new(Telemetry::new());
    let http = HttpScraper::new(Duration::from_secs(1), 1 << 20).expect("client");
    let ctx = SourceContext::new(http).expect("context");
    let cache = DecisionCache::new(
        PollerRegistry::new(ctx, telemetry.clone()),
        telemetry.clone(),
        CacheSettings {
            cold_start_budget: Duration::from_millis(100),
            idle_timeout: Duration::from_secs(1),
            max_triggers: 2,
        },
    );
    // A closed loopback port: the pollers fail fast, which is irrelevant here.
    let register = |name: &str| {
        cache.get_or_register(
            "ns".into(),
            name.into(),
            [
                ("vllmTargets", "http://127.0.0.1:1/metrics"),
                ("targetBacklogPerReplica", "10"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        )
    };
    let names = || {
        cache
            .entries()
            .iter()
            .map(|e| e.name.clone())
            .collect::<Vec<_>>()
    };
    register("a").expect("first");
    register("b").expect("second");
    let full = RegisterError::AtCapacity { held: 2, limit: 2 };
    assert_eq!(register("c").expect_err("third"), full);
    // Registered triggers keep answering.
    register("a").expect("a is still registered");
    assert_eq!(names(), ["a", "b"]);
    let metrics = telemetry.encode();
    assert!(
        metrics.contains("backlog_scaler_max_triggers 2"),
        "{metrics}"
    );
    assert!(metrics.contains("backlog_scaler_triggers 2"), "{metrics}");

    // `b` idles out while `a` is kept in use.
    tokio::time::sleep(Duration::from_millis(600)).await;
    register("a").expect("touch a");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(cache.sweep_idle(), 1);
    assert_eq!(names(), ["a"]);
    register("c").expect("room again after the idle drop");
    assert_eq!(names(), ["a", "c"]);
    assert_eq!(register("d").expect_err("full again"), full);
}
