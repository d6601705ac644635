//! `explain`: fetch a running scaler's `/explain` JSON and print it, as a
//! readable view on a terminal or as the JSON for scripts.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use super::explain_view;
use super::stdout::{out, outln};

/// How `explain` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ExplainFormat {
    /// The JSON, pretty.
    Json,
    /// The readable view ([`explain_view::render`]).
    Text,
}

impl ExplainFormat {
    /// `--json` or `--text` when given; otherwise text on a terminal and
    /// JSON when stdout is a pipe or file, so scripts keep the JSON.
    pub(super) fn choose(json: bool, text: bool) -> ExplainFormat {
        match (json, text) {
            (true, _) => ExplainFormat::Json,
            (false, true) => ExplainFormat::Text,
            (false, false) if std::io::stdout().is_terminal() => ExplainFormat::Text,
            (false, false) => ExplainFormat::Json,
        }
    }
}

/// Print the scaler's explanation in `format`; a failure to reach it or a
/// non-JSON answer fails.
pub(super) async fn explain(
    admin_url: &str,
    namespace: Option<String>,
    name: Option<String>,
    format: ExplainFormat,
) -> ExitCode {
    let mut query = Vec::new();
    if let Some(ns) = namespace {
        query.push(("namespace", ns));
    }
    if let Some(name) = name {
        query.push(("name", name));
    }
    let url = format!("{}/explain", admin_url.trim_end_matches('/'));
    let response = reqwest::Client::new()
        .get(&url)
        .query(&query)
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    let body = match response {
        Ok(r) if r.status().is_success() => r.text().await,
        Ok(r) => {
            eprintln!("backlog-scaler: {url} answered {}", r.status());
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("backlog-scaler: cannot reach {url}: {e}");
            return ExitCode::FAILURE;
        }
    };
    match body.map(|b| serde_json::from_str::<serde_json::Value>(&b)) {
        Ok(Ok(json)) => {
            match format {
                ExplainFormat::Json => outln!(
                    "{}",
                    serde_json::to_string_pretty(&json).unwrap_or_else(|_| json.to_string())
                ),
                ExplainFormat::Text => out!("{}", explain_view::render(&json)),
            }
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            eprintln!("backlog-scaler: {url} did not return JSON: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("backlog-scaler: reading {url} failed: {e}");
            ExitCode::FAILURE
        }
    }
}
