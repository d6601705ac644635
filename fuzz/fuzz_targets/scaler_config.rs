//! The `--config` file (YAML): never a panic, and an accepted file keeps the
//! bounds `ScalerConfig::parse` promises.
#![no_main]

use backlog_scaler::guard::config::ScalerConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // `ScalerConfig::load` reads the file with `read_to_string`: UTF-8 only.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ScalerConfig::parse(text) {
        Ok(config) => {
            assert!(config.cold_start_budget_millis <= 10_000);
            assert!(config.idle_timeout_seconds >= 1);
            assert!(config.max_response_bytes >= 1024);
            assert!(config.max_triggers >= 1);
            // The allowlist was validated by parse; building it again (as
            // `serve` does) must succeed.
            assert!(config.outbound.policy().is_ok());
            assert_eq!(ScalerConfig::parse(text).ok(), Some(config));
        }
        Err(message) => assert!(!message.is_empty()),
    }
});
