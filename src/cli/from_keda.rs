//! `backlog-scaler check --from-keda FILE`: read the ScaledObjects in FILE,
//! fuse the KEDA built-in triggers this scaler reads (prometheus queries on
//! vLLM's gauges and TTFT histogram, aws-sqs-queue, kafka, rabbitmq) into one
//! `external` trigger, and print it with where every value came from, what
//! stays a separate trigger (cpu, memory, anything not understood) and what
//! cannot be carried over. The metadata printed is validated by the server's
//! own parser before it is shown as accepted.
//!
//! The whole output is YAML (explanations are comments), so it can be read
//! back: one document per ScaledObject, `triggers:` ready to paste.

#[path = "from_keda/brokers.rs"]
mod brokers;
#[path = "from_keda/engine.rs"]
mod engine;
#[path = "from_keda/model.rs"]
mod model;
#[path = "from_keda/profile.rs"]
mod profile;
#[path = "from_keda/promql.rs"]
mod promql;
#[path = "from_keda/render.rs"]
mod render;

use std::path::Path;
use std::process::ExitCode;

use serde_yaml_ng::Value;

pub use model::{FromKedaError, Key, Migration, Old, number_text, strip_userinfo};

use std::fmt::Write as _;

use crate::cli::check::{FoundTrigger, check_trigger_static};
use crate::guard::config::ScalerConfig;
use crate::guard::redact::{REDACTED, redact};
use crate::trigger::{TriggerSpec, keys};

/// The `check --from-keda` command: exit 0 when every ScaledObject gave a
/// trigger the parser accepts, 1 when the parser or `--config` refused one,
/// 2 when the input is unusable.
pub fn run(path: &Path, config: &ScalerConfig) -> ExitCode {
    let file = path.display().to_string();
    let result = std::fs::read_to_string(path)
        .map_err(|e| FromKedaError::Read {
            file: file.clone(),
            reason: e.to_string(),
        })
        .and_then(|text| migrate_text(&file, &text));
    let migrations = match result {
        Ok(m) => m,
        Err(e) => {
            eprintln!("backlog-scaler: {}", redact(&e.to_string()));
            return ExitCode::from(2);
        }
    };
    let mut ok = true;
    let mut out = String::new();
    for (i, m) in migrations.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        let verdict = check(m, config);
        ok &= verdict.is_ok();
        // Already redacted where it quotes the input (render.rs); the
        // profile skeleton names files, and the redactor would mangle
        // `password: {file: …}`.
        out.push_str(&m.text);
        match verdict {
            Ok(line) | Err(line) => {
                out.push_str(&redact(&line));
                out.push('\n');
            }
        }
        // Pasted as is, `[redacted]` would be sent upstream as the credential.
        if m.text.contains(REDACTED) {
            let _ = writeln!(
                out,
                "# Note: {REDACTED} stands for a credential of the input, which is never printed: write it back where you paste this, or better move it to an `authProfile` of the scaler's --config"
            );
        }
    }
    // One write; a closed pipe (`| head`) is not a crash, a full disk is reported.
    crate::cli::stdout::write(format_args!("{out}"));
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The documents of `text`, each with its first line (1-based): split on
/// `---` lines so an error can name the line in the file.
fn documents(text: &str) -> Vec<(usize, String)> {
    let mut docs = vec![(1, String::new())];
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("---") {
            docs.push((i + 2, String::new()));
            continue;
        }
        if let Some((_, doc)) = docs.last_mut() {
            doc.push_str(line);
            doc.push('\n');
        }
    }
    docs
}

/// Migrate every ScaledObject of a file's text.
pub fn migrate_text(file: &str, text: &str) -> Result<Vec<Migration>, FromKedaError> {
    let mut parsed = Vec::new();
    for (start, doc) in documents(text) {
        let value: Value = serde_yaml_ng::from_str(&doc).map_err(|e| FromKedaError::NotYaml {
            file: file.to_owned(),
            line: start + e.location().map_or(0, |l| l.line().saturating_sub(1)),
            reason: e.to_string(),
        })?;
        if !value.is_null() {
            parsed.push((start, doc, value));
        }
    }
    let kind = |v: &Value| v.get("kind").and_then(Value::as_str).map(str::to_owned);
    let auths: Vec<&Value> = parsed
        .iter()
        .filter(|(_, _, v)| {
            matches!(
                kind(v).as_deref(),
                Some("TriggerAuthentication" | "ClusterTriggerAuthentication")
            )
        })
        .map(|(_, _, v)| v)
        .collect();
    let mut out = Vec::new();
    let mut found = Vec::new();
    for (start, doc, value) in &parsed {
        match kind(value).as_deref() {
            Some("ScaledObject") => {
                out.push(render::migrate(file, *start, doc, value, &auths)?);
            }
            Some(other) => found.push(format!("line {start}: kind {other}")),
            None if value.is_mapping() => found.push(format!("line {start}: a map without `kind`")),
            None => found.push(format!("line {start}: not a map")),
        }
    }
    if out.is_empty() {
        return Err(FromKedaError::NoScaledObject {
            file: file.to_owned(),
            found: if found.is_empty() {
                "the file is empty".to_owned()
            } else {
                found.join(", ")
            },
        });
    }
    Ok(out)
}

/// Validate fused metadata through the server's parser.
pub fn validate(metadata: &[(String, String)]) -> Result<TriggerSpec, Vec<String>> {
    TriggerSpec::from_metadata(metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|errors| errors.0.iter().map(|e| e.to_string()).collect())
}

/// Validate the migration's metadata with the server's parser and, when
/// `--config` has the profile it names (or it names none), with the
/// outbound allowlist and the profiles: the line to print, `Err` on refusal.
fn check(m: &Migration, config: &ScalerConfig) -> Result<String, String> {
    let spec = match validate(&m.metadata) {
        Ok(spec) => spec,
        Err(errors) => {
            let mut text = "# REFUSED by the server's metadata parser (a bug of --from-keda, or a value of the old trigger that is invalid here):".to_owned();
            for e in errors {
                let _ = write!(text, "\n#   invalid: {e}");
            }
            return Err(text);
        }
    };
    let mut text = format!(
        "# Checked: the server's metadata parser accepts it: metric `{}`, target {} per replica, {} source(s), mode {}",
        spec.metric_name,
        spec.fusion.target_per_replica,
        spec.sources().len(),
        spec.mode.as_str()
    );
    let profile = m
        .metadata
        .iter()
        .find(|(k, _)| k == keys::AUTH_PROFILE)
        .map(|(_, v)| v.clone());
    if let Some(p) = &profile
        && !config.profiles.names().any(|n| n == p)
    {
        let _ = write!(
            text,
            "\n# Not checked against --config: it has no profile `{p}` (add the one above, then run `check --no-probe --metadata`)"
        );
        return Ok(text);
    }
    let outbound = match config.outbound.policy() {
        Ok(policy) => policy,
        Err(e) => return Err(format!("{text}\n# --config: invalid outbound config: {e}")),
    };
    let found = FoundTrigger {
        origin: m.name.clone(),
        metadata: m.metadata.clone(),
        namespace: m.namespace.clone(),
    };
    match check_trigger_static(&found, &outbound, &config.profiles) {
        Ok(_) => {
            let _ = write!(
                text,
                "\n# Checked against the scaler config (--config, or the built-in defaults without it): its outbound rules and profiles accept it"
            );
            Ok(text)
        }
        Err(report) => {
            let _ = write!(text, "\n# Refused by --config:");
            for line in report.lines().skip(1) {
                let _ = write!(text, "\n#  {line}");
            }
            Err(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_stripped_and_numbers_are_short() {
        assert_eq!(
            strip_userinfo("amqp://u:p@rabbit:5672/vh"),
            ("amqp://rabbit:5672/vh".to_owned(), true)
        );
        assert_eq!(
            strip_userinfo("http://prom:9090"),
            ("http://prom:9090".to_owned(), false)
        );
        assert_eq!(number_text(10.0), "10");
        assert_eq!(number_text(10.0 / 3.0), "3.333333");
    }

    #[test]
    fn documents_know_their_lines() {
        let docs = documents("a: 1\n---\nb: 2\nc: 3\n--- # x\nd: 4\n");
        let starts: Vec<usize> = docs.iter().map(|(s, _)| *s).collect();
        assert_eq!(starts, vec![1, 3, 6]);
        let err = migrate_text("f.yaml", "a: 1\n---\nb: [\n").expect_err("bad");
        assert!(err.to_string().starts_with("f.yaml:"), "{err}");
        let err = migrate_text("f.yaml", "kind: Deployment\n").expect_err("none");
        assert!(err.to_string().contains("line 1: kind Deployment"), "{err}");
    }
}
