//! How long a poller waits before trying a source again (the attempts
//! themselves are in `retry`): retries inside one
//! poll, the sooner-than-the-interval retry after a transient failure, and
//! the backoff of a source that fails permanently.
//!
//! Sources take one reading and never sleep or retry (src/lib.rs); every
//! wait lives here, as pure functions of the failure count, the interval
//! and a random draw, so they are tested with an injected generator and
//! `/explain` recomputes the backoff the poller is sleeping by
//! (docs/decisions/0021).
//!
//! - **Within a poll**: a transient failure ([`retries_within_poll`]) is
//!   tried again after a full-jitter wait, `U(0, min(1 s, 100 ms·2^(k−1)))`
//!   before retry `k`, at most [`MAX_RETRIES`] times, and only while an
//!   attempt of [`MIN_ATTEMPT`] still fits before the poll's deadline.
//! - **Between polls, transient**: the next poll comes sooner than the
//!   interval ([`transient_delay`]), 250 ms doubling up to the interval.
//! - **Between polls, permanent** ([`backs_off`]: HTTP 404/410, 401/403,
//!   NXDOMAIN for a fixed host name): the next poll waits
//!   `min(interval·2^n, max(5 min, interval))`, `n` the failed polls in a
//!   row, less a spread of up to 20 % drawn from the source's label so that
//!   sources broken by one change do not poll in step.

use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use crate::source::error::FailureKind;

/// Wait before the first retry within a poll, before jitter.
pub const RETRY_BASE: Duration = Duration::from_millis(100);
/// Longest wait between two attempts within a poll, before jitter.
pub const RETRY_CAP: Duration = Duration::from_secs(1);
/// Retries within one poll after the first attempt.
pub const MAX_RETRIES: u32 = 3;
/// An attempt is not started with less than this left before the deadline:
/// it could not finish, and would only turn a clear error into a timeout.
pub const MIN_ATTEMPT: Duration = Duration::from_millis(200);
/// First wait after a transient failed poll (then doubled, up to the interval).
pub const FIRST_RETRY: Duration = Duration::from_millis(250);
/// The longest a permanently failing source waits between polls (unless its
/// interval is longer).
pub const BACKOFF_CAP: Duration = Duration::from_secs(300);
/// Most of a permanent backoff's delay a source's spread takes off.
const BACKOFF_SPREAD: f64 = 0.2;

/// A source of uniform draws in `[0, 1)`; injected so the waits are
/// deterministic under test.
pub trait UnitRng {
    /// The next draw, in `[0, 1)`.
    fn next_unit(&mut self) -> f64;
}

/// SplitMix64: small, fast, and good enough to decorrelate pollers; not
/// for anything that needs to be unpredictable.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    /// A generator seeded from the clock and `label`, so that pollers
    /// started together draw apart.
    pub fn for_source(label: &str) -> SplitMix {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        SplitMix(nanos ^ hash_of(&(label, 0u32)))
    }
}

impl UnitRng for SplitMix {
    fn next_unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // The top 53 bits: every value exactly representable, below 1.
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn hash_of(value: &impl Hash) -> u64 {
    // `DefaultHasher::new()` has fixed keys: the same value hashes the same
    // in the poller and in `/explain`, which is what the spread relies on.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// True for the failures worth trying again within the same poll: transient
/// ones ([`FailureKind::is_transient`]) except a timeout, whose attempt used
/// the time a retry would need (and a hung upstream gains nothing from a
/// second connection).
pub fn retries_within_poll(kind: FailureKind) -> bool {
    kind.is_transient() && kind != FailureKind::Timeout
}

/// The full-jitter wait before retry `retry` (1 for the first) of a poll:
/// `U(0, min(RETRY_CAP, RETRY_BASE·2^(retry−1)))`.
pub fn full_jitter(retry: u32, rng: &mut impl UnitRng) -> Duration {
    let exponent = retry.saturating_sub(1).min(16);
    let ceiling = RETRY_BASE.saturating_mul(1 << exponent).min(RETRY_CAP);
    ceiling.mul_f64(rng.next_unit().clamp(0.0, 1.0))
}

/// The wait before retry `retry` of a poll whose attempts must end by
/// `deadline`, or `None` when no retry is left or none fits: the retry
/// budget is spent, or less than [`MIN_ATTEMPT`] would remain after the
/// wait. A jittered wait that would not leave room is shortened to fit.
pub fn plan_retry(
    retry: u32,
    now: Instant,
    deadline: Instant,
    rng: &mut impl UnitRng,
) -> Option<Duration> {
    if retry == 0 || retry > MAX_RETRIES {
        return None;
    }
    let room = deadline
        .checked_duration_since(now)?
        .checked_sub(MIN_ATTEMPT)?;
    Some(full_jitter(retry, rng).min(room))
}

/// When the next poll comes after `failures` transient failed polls in a
/// row: [`FIRST_RETRY`] doubling up to the interval, ±25 % jitter, never
/// later than the interval.
pub fn transient_delay(failures: u32, interval: Duration, rng: &mut impl UnitRng) -> Duration {
    let exponent = failures.saturating_sub(1).min(16);
    let base = FIRST_RETRY.saturating_mul(1 << exponent).min(interval);
    base.mul_f64(0.75 + 0.5 * rng.next_unit().clamp(0.0, 1.0))
        .min(interval)
}

/// True for failures that stay until someone changes something, and for
/// which polling at the interval only adds load and log lines: HTTP 404 and
/// 410, 401/403 (and a broker's authentication refusal), and a definite "no
/// such name" for a fixed host name (`dns+` names answer NXDOMAIN as zero
/// pods, never as this error).
pub fn backs_off(kind: FailureKind) -> bool {
    matches!(
        kind,
        FailureKind::Status(404 | 410)
            | FailureKind::Auth
            | FailureKind::Dns { no_such_name: true }
    )
}

/// The wait after the `failures`-th failed poll in a row of a source that
/// fails permanently: `min(interval·2^failures, max(BACKOFF_CAP, interval))`,
/// shortened by up to 20 % by a spread drawn from `label` and `failures`
/// (deterministic: `/explain` computes the same).
pub fn backoff_delay(failures: u32, interval: Duration, label: &str) -> Duration {
    let cap = BACKOFF_CAP.max(interval);
    let exponent = failures.min(20);
    let full = interval.saturating_mul(1 << exponent).min(cap);
    let draw = (hash_of(&(label, failures)) % 1000) as f64 / 1000.0;
    full.mul_f64(1.0 - BACKOFF_SPREAD * draw)
}

/// A permanently failing source's pause, as `/explain` shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The wait after the newest failed poll.
    pub delay: Duration,
    /// When the next poll starts.
    pub next_attempt: Instant,
}

/// The backoff a poller is in after its newest poll failed with `kind` at
/// `failed_at`, the `failures`-th failed poll in a row; `None` when that
/// failure does not back off.
pub fn backoff_after(
    kind: FailureKind,
    failures: u32,
    failed_at: Instant,
    interval: Duration,
    label: &str,
) -> Option<Backoff> {
    if failures == 0 || !backs_off(kind) {
        return None;
    }
    let delay = backoff_delay(failures, interval, label);
    Some(Backoff {
        delay,
        next_attempt: failed_at + delay,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays fixed draws, cycling.
    struct Draws(Vec<f64>, usize);

    impl UnitRng for Draws {
        fn next_unit(&mut self) -> f64 {
            let v = self.0[self.1 % self.0.len()];
            self.1 += 1;
            v
        }
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn full_jitter_spans_zero_to_the_capped_exponential() {
        // (retry, draw, wait)
        for (retry, draw, wait) in [
            (1, 0.0, 0),
            (1, 0.5, 50),
            (1, 0.75, 75),
            (2, 0.5, 100),
            (3, 0.5, 200),
            (4, 0.5, 400),
            (5, 0.5, 500), // 1.6 s capped at 1 s
            (30, 0.25, 250),
        ] {
            let got = full_jitter(retry, &mut Draws(vec![draw], 0));
            assert_eq!(got, ms(wait), "retry {retry}, draw {draw}");
        }
    }

    #[test]
    fn a_retry_never_ends_past_the_deadline() {
        let now = Instant::now();
        // (retry, draw, ms left before the deadline, planned wait)
        for (retry, draw, left, planned) in [
            (1, 0.5, 4000, Some(50)),
            (3, 0.9, 4000, Some(360)),
            (3, 0.9, 500, Some(300)), // shortened: 200 ms must remain
            (1, 0.5, 200, Some(0)),
            (1, 0.5, 199, None),
            (4, 0.5, 4000, None), // retry budget spent
            (0, 0.5, 4000, None),
        ] {
            let got = plan_retry(retry, now, now + ms(left), &mut Draws(vec![draw], 0));
            assert_eq!(
                got,
                planned.map(ms),
                "retry {retry}, draw {draw}, left {left}"
            );
            if let Some(wait) = got {
                assert!(now + wait + MIN_ATTEMPT <= now + ms(left));
            }
        }
        // A deadline already behind us: no retry.
        assert_eq!(
            plan_retry(1, now + ms(10), now, &mut Draws(vec![0.0], 0)),
            None
        );
    }

    #[test]
    fn which_failures_retry_within_a_poll_and_which_back_off() {
        use FailureKind::*;
        // (kind, retried within the poll, backs off between polls)
        for (kind, retried, backs) in [
            (Status(503), true, false),
            (Status(500), true, false),
            (Status(429), true, false),
            (Unreachable, true, false),
            (
                Dns {
                    no_such_name: false,
                },
                true,
                false,
            ),
            (Internal, true, false),
            (Timeout, false, false),
            (Status(404), false, true),
            (Status(410), false, true),
            (Auth, false, true),
            (Dns { no_such_name: true }, false, true),
            (Status(400), false, false),
            (Parse, false, false),
            (Rejected, false, false),
            (Denied, false, false),
            (Config, false, false),
        ] {
            assert_eq!(retries_within_poll(kind), retried, "{kind:?}");
            assert_eq!(backs_off(kind), backs, "{kind:?}");
        }
    }

    #[test]
    fn transient_delay_doubles_within_the_interval() {
        let interval = Duration::from_secs(5);
        // (failures, draw, delay)
        for (failures, draw, delay) in [
            (1, 0.0, 187.5),
            (1, 0.5, 250.0),
            (1, 0.999, 312.375),
            (2, 0.5, 500.0),
            (4, 0.5, 2000.0),
            (5, 0.5, 4000.0),
            (6, 0.0, 3750.0),
            (6, 0.999, 5000.0), // never past the interval
            (40, 0.5, 5000.0),
        ] {
            let got = transient_delay(failures, interval, &mut Draws(vec![draw], 0));
            assert!(
                (got.as_secs_f64() * 1000.0 - delay).abs() < 1e-6,
                "failures {failures}, draw {draw}: {got:?}"
            );
        }
    }

    #[test]
    fn permanent_backoff_grows_to_the_cap_and_is_the_same_when_recomputed() {
        let interval = Duration::from_secs(5);
        let mut previous = Duration::ZERO;
        for failures in 1..=12u32 {
            let delay = backoff_delay(failures, interval, "http://a/metrics");
            let full = interval.saturating_mul(1 << failures).min(BACKOFF_CAP);
            assert!(
                delay <= full && delay >= full.mul_f64(0.8),
                "{failures}: {delay:?}"
            );
            if full < BACKOFF_CAP {
                assert!(
                    delay > previous,
                    "grows: {failures}: {delay:?} after {previous:?}"
                );
            }
            previous = delay;
            assert_eq!(delay, backoff_delay(failures, interval, "http://a/metrics"));
        }
        assert!(backoff_delay(30, interval, "x") <= BACKOFF_CAP);
        // An interval above the cap is never shortened by it.
        let long = Duration::from_secs(600);
        assert!(backoff_delay(1, long, "x") >= long.mul_f64(0.8));
        assert!(backoff_delay(1, long, "x") <= long);
        // Two sources broken together spread apart.
        let spread: std::collections::BTreeSet<Duration> = (0..20)
            .map(|i| backoff_delay(3, interval, &format!("http://pod-{i}/metrics")))
            .collect();
        assert!(spread.len() > 10, "{spread:?}");
    }

    #[test]
    fn backoff_after_only_for_permanent_failures() {
        let at = Instant::now();
        let interval = Duration::from_secs(1);
        assert_eq!(
            backoff_after(FailureKind::Status(503), 3, at, interval, "s"),
            None
        );
        assert_eq!(
            backoff_after(FailureKind::Status(404), 0, at, interval, "s"),
            None
        );
        let backoff =
            backoff_after(FailureKind::Status(404), 3, at, interval, "s").expect("backs off");
        assert_eq!(backoff.delay, backoff_delay(3, interval, "s"));
        assert_eq!(backoff.next_attempt, at + backoff.delay);
    }

    #[test]
    fn splitmix_draws_stay_in_the_unit_interval_and_differ() {
        let mut rng = SplitMix::new(7);
        let draws: Vec<f64> = (0..1000).map(|_| rng.next_unit()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "{mean}");
        assert_eq!(SplitMix::new(7).next_unit(), draws[0]);
    }
}
