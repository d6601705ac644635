//! The tracing subscriber every command logs through, and the limit on
//! repeated warnings.
//!
//! A warning or error identical to one logged less than a minute ago (same
//! target, level, message and fields) is suppressed and counted; the first
//! one after the minute is logged, preceded by a line saying how many were
//! suppressed. Logs say what changed, and a source failing the same way on
//! every poll, or a client library complaining on every reconnect, says
//! nothing new (docs/decisions/0021).
//!
//! lapin (the AMQP client) logs an ERROR of its own for every refused
//! connection, which the RabbitMQ source already reports as its failure
//! (logged once, shown in `/explain` and the `UNAVAILABLE` message): its
//! target is off unless `--log-level` names `lapin` itself.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

use super::args::LogFormat;

/// How long an identical warning stays suppressed after it was logged.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(60);
/// Distinct warnings remembered at once; past it, the oldest are forgotten
/// (a forgotten one is logged again on its next occurrence).
const MAX_REMEMBERED: usize = 4096;
/// The directive that quiets lapin unless `--log-level` names it.
const LAPIN_OFF: &str = "lapin=off";

/// Install the global tracing subscriber.
pub fn init_logging(level: &str, format: LogFormat) -> Result<(), String> {
    let caps = crate::source::broker::LOG_FILTER_CAPS;
    let mut filter = tracing_subscriber::EnvFilter::try_new(capped(level, caps))
        .map_err(|e| format!("invalid --log-level `{level}`: {e}"))?;
    // Whatever level is asked for: some client libraries log credentials at
    // their most verbose level (lapin traces the AMQP login frame). A
    // target the operator named is clamped in place by `capped`.
    for cap in caps {
        let named = cap
            .split_once('=')
            .is_some_and(|(target, _)| names_target(level, target));
        if !named && let Ok(directive) = cap.parse() {
            filter = filter.add_directive(directive);
        }
    }
    // Replaces the cap's `lapin` directive (same target): off, unless the
    // operator asked for lapin's own lines.
    if !names_target(level, "lapin")
        && let Ok(directive) = LAPIN_OFF.parse()
    {
        filter = filter.add_directive(directive);
    }
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(RepeatLimit::new(REPEAT_WINDOW));
    let result = match format {
        LogFormat::Plain => registry
            .with(
                tracing_subscriber::fmt::layer()
                    // Colour only for a person at a terminal: escape codes
                    // in a pod's log or a file are noise to every reader.
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_writer(std::io::stderr),
            )
            .try_init(),
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
    result.map_err(|e| format!("cannot install the logger: {e}"))
}

/// True when `level` (an `EnvFilter` string) has a directive for `target`
/// or one of its modules.
fn names_target(level: &str, target: &str) -> bool {
    level.split(',').any(|part| {
        let named = part.split(['=', '[']).next().unwrap_or("").trim();
        named == target || named.starts_with(&format!("{target}::"))
    })
}

/// `level` with each directive for a capped target (`target=max` in
/// `caps`) made no more verbose than its cap: `lapin=warn` stays as asked,
/// `lapin=trace` or a bare `lapin` becomes `lapin=debug`.
fn capped(level: &str, caps: &[&str]) -> String {
    let verbosity = |text: &str| text.trim().parse::<LevelFilter>().ok();
    level
        .split(',')
        .map(|part| {
            let (target, asked) = part.split_once('=').unwrap_or((part, "trace"));
            let name = target.split('[').next().unwrap_or("").trim();
            for cap in caps {
                let Some((capped_target, max)) = cap.split_once('=') else {
                    continue;
                };
                let matches =
                    name == capped_target || name.starts_with(&format!("{capped_target}::"));
                if matches && verbosity(asked) > verbosity(max) && verbosity(asked).is_some() {
                    return format!("{target}={max}");
                }
            }
            part.to_owned()
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// What to do with one occurrence of a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Log it.
    Show,
    /// Log it, after saying that this many identical ones were suppressed.
    ShowAfter(u64),
    /// Count it, do not log it.
    Suppress,
}

/// When each distinct warning was last logged, and how many identical ones
/// were suppressed since.
#[derive(Debug)]
pub struct Repeats {
    window: Duration,
    seen: HashMap<String, (Instant, u64)>,
}

impl Repeats {
    /// Nothing seen yet; an identical warning is logged at most once per
    /// `window`.
    pub fn new(window: Duration) -> Repeats {
        Repeats {
            window,
            seen: HashMap::new(),
        }
    }

    /// The verdict on an occurrence of `key` at `now`.
    pub fn check(&mut self, key: &str, now: Instant) -> Verdict {
        if let Some((shown, suppressed)) = self.seen.get_mut(key) {
            if now.saturating_duration_since(*shown) < self.window {
                *suppressed += 1;
                return Verdict::Suppress;
            }
            let count = std::mem::take(suppressed);
            *shown = now;
            return if count > 0 {
                Verdict::ShowAfter(count)
            } else {
                Verdict::Show
            };
        }
        if self.seen.len() >= MAX_REMEMBERED {
            let window = self.window;
            self.seen
                .retain(|_, (shown, _)| now.saturating_duration_since(*shown) < window);
            if self.seen.len() >= MAX_REMEMBERED {
                self.seen.clear();
            }
        }
        self.seen.insert(key.to_owned(), (now, 0));
        Verdict::Show
    }
}

thread_local! {
    /// Set while the limiter logs its own summary line, which is never
    /// limited (and must not recurse).
    static SUMMARIZING: Cell<bool> = const { Cell::new(false) };
}

/// The layer that suppresses repeated warnings and errors for the whole
/// subscriber (`event_enabled`), so no output layer sees them.
#[derive(Debug)]
pub struct RepeatLimit {
    repeats: Mutex<Repeats>,
}

impl RepeatLimit {
    /// A limit of one identical warning per `window`.
    pub fn new(window: Duration) -> RepeatLimit {
        RepeatLimit {
            repeats: Mutex::new(Repeats::new(window)),
        }
    }
}

impl<S: Subscriber> Layer<S> for RepeatLimit {
    fn event_enabled(&self, event: &Event<'_>, _ctx: Context<'_, S>) -> bool {
        let metadata = event.metadata();
        // `Level` orders by verbosity: INFO and below are state changes,
        // logged once each by their call sites.
        if *metadata.level() > Level::WARN || SUMMARIZING.with(Cell::get) {
            return true;
        }
        let mut key = Key(format!("{} {} ", metadata.level(), metadata.target()));
        event.record(&mut key);
        let verdict = self
            .repeats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .check(&key.0, Instant::now());
        match verdict {
            Verdict::Show => true,
            Verdict::Suppress => false,
            Verdict::ShowAfter(suppressed) => {
                SUMMARIZING.with(|s| s.set(true));
                tracing::warn!(
                    suppressed,
                    window_s = REPEAT_WINDOW.as_secs(),
                    of_target = metadata.target(),
                    "identical warnings suppressed since this one was last logged; it follows"
                );
                SUMMARIZING.with(|s| s.set(false));
                true
            }
        }
    }
}

/// An event's fields, as the key that makes two warnings identical.
struct Key(String);

impl Visit for Key {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identical_warning_is_logged_once_per_window_with_the_count() {
        let mut repeats = Repeats::new(Duration::from_secs(60));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        // (key, seconds, verdict)
        for (key, s, verdict) in [
            ("a", 0, Verdict::Show),
            ("a", 5, Verdict::Suppress),
            ("b", 5, Verdict::Show), // another warning is its own
            ("a", 10, Verdict::Suppress),
            ("a", 59, Verdict::Suppress),
            ("a", 60, Verdict::ShowAfter(3)),
            ("a", 61, Verdict::Suppress),
            ("a", 125, Verdict::ShowAfter(1)),
            ("a", 300, Verdict::Show), // nothing suppressed in between
            ("b", 300, Verdict::Show),
        ] {
            assert_eq!(repeats.check(key, at(s)), verdict, "{key} at {s} s");
        }
    }

    #[test]
    fn the_memory_is_bounded() {
        let mut repeats = Repeats::new(Duration::from_secs(60));
        let t0 = Instant::now();
        for i in 0..(MAX_REMEMBERED + 10) {
            assert_eq!(repeats.check(&i.to_string(), t0), Verdict::Show);
        }
        assert!(repeats.seen.len() <= MAX_REMEMBERED);
    }

    #[test]
    fn a_named_capped_target_is_clamped_in_place_and_others_left_alone() {
        let caps = ["lapin=debug"];
        // (--log-level, filter string, names lapin)
        for (level, filter, named) in [
            ("info", "info", false),
            ("trace", "trace", false),
            ("info,lapin=warn", "info,lapin=warn", true),
            ("info,lapin=trace", "info,lapin=debug", true),
            ("info,lapin", "info,lapin=debug", true),
            ("lapin::channels=trace", "lapin::channels=debug", true),
            ("info,lapinx=trace", "info,lapinx=trace", false),
            ("backlog_scaler=debug", "backlog_scaler=debug", false),
        ] {
            assert_eq!(capped(level, &caps), filter, "{level}");
            assert_eq!(names_target(level, "lapin"), named, "{level}");
        }
    }

    #[test]
    fn the_lapin_directive_parses() {
        let directive: Result<tracing_subscriber::filter::Directive, _> = LAPIN_OFF.parse();
        assert!(directive.is_ok());
    }
}
