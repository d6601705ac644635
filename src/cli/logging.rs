//! The tracing subscriber every command logs through.

use super::args::LogFormat;

/// Install the global tracing subscriber.
pub fn init_logging(level: &str, format: LogFormat) -> Result<(), String> {
    let mut filter = tracing_subscriber::EnvFilter::try_new(level)
        .map_err(|e| format!("invalid --log-level `{level}`: {e}"))?;
    // Whatever level is asked for: some client libraries log credentials at
    // their most verbose level (lapin traces the AMQP login frame).
    for cap in crate::source::broker::LOG_FILTER_CAPS {
        if let Ok(directive) = cap.parse() {
            filter = filter.add_directive(directive);
        }
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Plain => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    result.map_err(|e| format!("cannot install the logger: {e}"))
}
