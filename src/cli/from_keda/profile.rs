//! Credentials: KEDA never forwards a TriggerAuthentication to an external
//! scaler (kedacore/keda#2571), so what the old triggers' `authenticationRef`
//! held becomes a profile in the scaler's `--config`. This writes that
//! profile's skeleton: each secret a `{file: …}` (mount the same Secret in
//! the scaler) or `{env: …}`, never a value.

use serde_yaml_ng::Value;

use crate::guard::credentials::Section;

/// A field of a profile section fed by one TriggerAuthentication parameter.
fn field(section: Section, parameter: &str) -> Option<&'static str> {
    Some(match (section, parameter) {
        (Section::Aws, "awsAccessKeyID") => "accessKeyId",
        (Section::Aws, "awsSecretAccessKey") => "secretAccessKey",
        (Section::Aws, "awsSessionToken") => "sessionToken",
        (Section::Kafka, "username") => "sasl.username",
        (Section::Kafka, "password") => "sasl.password",
        (Section::Kafka, "ca") => "tls.ca",
        (Section::Kafka, "cert") => "tls.cert",
        (Section::Kafka, "key") => "tls.key",
        (Section::Kafka, "keyPassword") => "tls.keyPassword",
        (Section::RabbitMq, "username") => "username",
        (Section::RabbitMq, "password") => "password",
        (Section::Prometheus, "bearerToken") => "bearerToken",
        (Section::Prometheus, "username") => "basicAuth.username",
        (Section::Prometheus, "password") => "basicAuth.password",
        _ => return None,
    })
}

/// What the section's fields are when nothing is known of the secrets.
fn placeholder(section: Section) -> &'static [&'static str] {
    match section {
        Section::Aws => &["accessKeyId", "secretAccessKey"],
        Section::Kafka => &["sasl.mechanism", "sasl.username", "sasl.password", "tls.ca"],
        Section::RabbitMq => &["username", "password"],
        Section::Prometheus => &["bearerToken"],
    }
}

/// The TriggerAuthentication named `name` among `auths`.
fn find<'a>(auths: &[&'a Value], name: &str) -> Option<&'a Value> {
    auths.iter().copied().find(|a| {
        a.get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            == Some(name)
    })
}

/// The lines of a `profiles:` skeleton (YAML, to be commented out by the
/// caller), and notes on what a TriggerAuthentication held that a profile
/// cannot.
pub fn skeleton(
    name: &str,
    namespace: Option<&str>,
    sections: &[(Section, Option<String>)],
    headers: &[String],
    auths: &[&Value],
) -> (Vec<String>, Vec<String>) {
    let mut lines = vec!["profiles:".to_owned(), format!("  {name}:")];
    let mut notes = Vec::new();
    if let Some(ns) = namespace {
        lines.push(format!(
            "    namespaces: [{ns}]   # only this ScaledObject's namespace may use it"
        ));
    }
    for (section, auth_ref) in sections {
        lines.push(format!("    {}:", section.as_str()));
        let auth = auth_ref.as_deref().and_then(|r| find(auths, r));
        let mut fields: Vec<(String, String)> = Vec::new();
        match (auth, auth_ref) {
            (Some(auth), Some(r)) => {
                let spec = auth.get("spec");
                let refs = spec
                    .and_then(|s| s.get("secretTargetRef"))
                    .and_then(Value::as_sequence)
                    .cloned()
                    .unwrap_or_default();
                for entry in &refs {
                    let text = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or("?");
                    let parameter = text("parameter");
                    let source = format!(
                        "{{file: /etc/backlog-scaler/{}/{}}}   # TriggerAuthentication {r}: {parameter} from Secret {} key {}",
                        text("name"),
                        text("key"),
                        text("name"),
                        text("key")
                    );
                    match field(*section, parameter) {
                        Some(f) => fields.push((f.to_owned(), source)),
                        None if parameter == "tls" => notes.push(format!(
                            "TriggerAuthentication {r}: `tls` (KEDA's `enable`) is the profile's `kafka.tls` section itself: keep it, with `ca` (and `cert`/`key` for mTLS)"
                        )),
                        None if parameter == "sasl" => fields.push((
                            "sasl.mechanism".to_owned(),
                            "PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512   # the value of Secret key written out (KEDA's plaintext, scram_sha256, scram_sha512)".to_owned(),
                        )),
                        None => notes.push(format!(
                            "TriggerAuthentication {r}: parameter `{parameter}` has no place in a profile's `{}` section{}",
                            section.as_str(),
                            if parameter == "host" {
                                ": write `rabbitmqHost` without credentials and put them in username/password"
                            } else {
                                ""
                            }
                        )),
                    }
                }
                for entry in spec
                    .and_then(|s| s.get("env"))
                    .and_then(Value::as_sequence)
                    .into_iter()
                    .flatten()
                {
                    let text = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or("?");
                    if let Some(f) = field(*section, text("parameter")) {
                        fields.push((
                            f.to_owned(),
                            format!(
                                "{{env: {}}}   # TriggerAuthentication {r}: from the workload's env; set it on the scaler's Deployment",
                                text("name")
                            ),
                        ));
                    }
                }
                if let Some(provider) = spec
                    .and_then(|s| s.get("podIdentity"))
                    .and_then(|p| p.get("provider"))
                    .and_then(Value::as_str)
                {
                    notes.push(format!(
                        "TriggerAuthentication {r}: podIdentity `{provider}` was KEDA's identity; the scaler uses its own (for AWS: IRSA on its service account, the `aws:` section left empty)"
                    ));
                }
            }
            (None, Some(r)) => notes.push(format!(
                "authenticationRef `{r}` is not in this file: fill the `{}` section from what it holds",
                section.as_str()
            )),
            (_, None) => {}
        }
        // A Prometheus section with only `customHeaders` needs no secret.
        if fields.is_empty() && !(*section == Section::Prometheus && auth_ref.is_none()) {
            fields = placeholder(*section)
                .iter()
                .map(|f| {
                    (
                        (*f).to_owned(),
                        "{file: /etc/backlog-scaler/<secret>/<key>}".to_owned(),
                    )
                })
                .collect();
        }
        if *section == Section::Prometheus && fields.is_empty() && headers.is_empty() {
            if let Some(last) = lines.last_mut() {
                last.push_str(" {}   # no credentials; there because authProfile also serves the PromQL queries");
            }
            continue;
        }
        if *section == Section::Prometheus {
            for h in headers {
                fields.push((
                    format!("headers.{h}"),
                    "{value: <as in customHeaders>}".to_owned(),
                ));
            }
        }
        write_fields(&fields, &mut lines);
    }
    (lines, notes)
}

/// `a.b: v` fields as nested YAML under a section (6 spaces in).
fn write_fields(fields: &[(String, String)], lines: &mut Vec<String>) {
    let mut fields = fields.to_vec();
    // Each group once: a second `sasl:` would be a duplicate key.
    fields.sort_by_key(|(p, _)| p.split_once('.').map(|(g, _)| g.to_owned()));
    let mut open: Option<String> = None;
    for (path, value) in &fields {
        match path.split_once('.') {
            Some((group, leaf)) => {
                if open.as_deref() != Some(group) {
                    lines.push(format!("      {group}:"));
                    open = Some(group.to_owned());
                }
                lines.push(format!("        {leaf}: {value}"));
            }
            None => {
                open = None;
                lines.push(format!("      {path}: {value}"));
            }
        }
    }
}
