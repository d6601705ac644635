//! Named defaults of metadata keys. Each key's doc comment in [`super::keys`]
//! states the same number: change both together.

use std::time::Duration;

/// Default poll interval (`pollIntervalSeconds`).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// `maxSignalAgeSeconds` defaults to this many poll intervals: one failed
/// poll is noise, three in a row is a lost signal.
pub const DEFAULT_MAX_SIGNAL_AGE_POLLS: u32 = 3;
/// Default `ttftWindowSeconds`.
pub const DEFAULT_TTFT_WINDOW: Duration = Duration::from_secs(60);
/// Default `ttftQuantile`.
pub const DEFAULT_TTFT_QUANTILE: f64 = 0.95;
/// Default `ttftTolerance`.
pub const DEFAULT_TTFT_TOLERANCE: f64 = 0.1;
/// Default `gpuBusyPercent`.
pub const DEFAULT_GPU_BUSY_PERCENT: f64 = 90.0;
/// Default `arrivalSmoothingSeconds`.
pub const DEFAULT_ARRIVAL_SMOOTHING_SECONDS: f64 = 15.0;
/// Default `peakHoldSeconds` (docs/decisions/0010).
pub const DEFAULT_PEAK_HOLD_SECONDS: f64 = 600.0;
/// Default `headroom`.
pub const DEFAULT_HEADROOM: f64 = 0.2;
/// Default `drainHorizonSeconds`.
pub const DEFAULT_DRAIN_HORIZON_SECONDS: f64 = 30.0;
/// Default `minReportingFraction`: half the discovered pods. One sick pod
/// of a fleet never makes the trigger lose its number, and a value is never
/// built from a minority of the fleet (extrapolating from fewer pods than
/// are missing would be guessing).
pub const DEFAULT_MIN_REPORTING_FRACTION: f64 = 0.5;
