//! Credential-shaped parts of a metadata value, replaced by `[redacted]`
//! before the value is echoed in an error: an error about a URL must never
//! repeat a password, token or signature someone put in metadata (errors
//! reach KEDA's events, `check` output and logs).
//!
//! The redactor errs on the side of hiding too much: a value shaped like a
//! credential loses it even when it was something else, because an error is
//! still readable with `[redacted]` in it and a leaked secret cannot be
//! taken back.

/// What replaces each credential.
pub const REDACTED: &str = "[redacted]";

/// Query (or `name=value` list) parameter names that hold a credential,
/// compared case-insensitively after percent-decoding.
const CREDENTIAL_NAMES: &[&str] = &[
    "token",
    "access_token",
    "id_token",
    "refresh_token",
    "auth",
    "authorization",
    "password",
    "passwd",
    "pwd",
    "pass",
    "secret",
    "client_secret",
    "signature",
    "sig",
    "key",
    "apikey",
    "api_key",
    "api-key",
    "x-api-key",
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "sessiontoken",
    "session_token",
    "credential",
    "credentials",
];
/// Parts of a parameter name that make it a credential wherever they appear
/// (`private_token`, `X-Goog-Signature`, `oauth_verifier`, `db_password`…).
const CREDENTIAL_PARTS: &[&str] = &[
    "token",
    "secret",
    "passw",
    "credential",
    "signature",
    "apikey",
    "api_key",
    "api-key",
    "auth",
];
/// HTTP authentication schemes whose parameter is the credential itself.
const AUTH_SCHEMES: &[&str] = &["bearer", "basic"];

/// `raw` with every credential-shaped part replaced by [`REDACTED`]:
/// - the userinfo of every URL of any scheme, also inside a list
///   (`scheme://[redacted]@host…`);
/// - `user:password@host` entries of a list without a scheme
///   (`[redacted]@host`);
/// - the value of every query or `name=value` parameter whose name looks
///   like a credential (`token=[redacted]`);
/// - the parameter of `Bearer …` and `Basic …` (`Bearer [redacted]`).
pub fn redact(raw: &str) -> String {
    let text = redact_userinfo(raw);
    let text = redact_bare_userinfo(&text);
    let text = redact_parameters(&text);
    redact_auth_schemes(&text)
}

/// `scheme://user:password@host…` → `scheme://[redacted]@host…`, for every
/// `://` in `value` (a comma-separated list holds several URLs).
pub fn redact_userinfo(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut copied = 0;
    let mut search = 0;
    while let Some(found) = value[search..].find("://") {
        let authority_start = search + found + 3;
        let rest = &value[authority_start..];
        // The authority ends at the path, query or fragment; a password
        // holding `@` or `,` stays inside it, so the LAST `@` ends userinfo.
        let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_len].rfind('@') {
            out.push_str(&value[copied..authority_start]);
            out.push_str(REDACTED);
            copied = authority_start + at;
        }
        // The next URL's `://` may start where this authority ends.
        search = authority_start;
    }
    out.push_str(&value[copied..]);
    out
}

/// `user:password@host:port` entries of a list without a scheme (Kafka's
/// `bootstrapServers` style) → `[redacted]@host:port`. Only when the part
/// before `@` has a `:`, so a PromQL `@` modifier or an e-mail address is
/// left alone.
fn redact_bare_userinfo(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for (i, entry) in split_keep(value, |c| c == ',' || c.is_whitespace()) {
        if i % 2 == 1 {
            out.push_str(entry); // a separator
            continue;
        }
        match entry.rfind('@') {
            Some(at)
                if !entry.contains("://")
                    && entry[..at].contains(':')
                    && !entry[..at].contains('/') =>
            {
                out.push_str(REDACTED);
                out.push_str(&entry[at..]);
            }
            _ => out.push_str(entry),
        }
    }
    out
}

/// `…name=value…` → `…name=[redacted]…` for credential-like names. A
/// parameter starts the value or follows `?`, `&`, `;`, `,` or whitespace;
/// its value runs to the next `&`, `;`, `#` or whitespace.
fn redact_parameters(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = String::with_capacity(value.len());
    let (mut copied, mut i) = (0, 0);
    while i < bytes.len() {
        // After an ASCII separator `i` is a char boundary, so slicing is safe.
        let starts = i == 0
            || matches!(bytes[i - 1], b'?' | b'&' | b';' | b',')
            || bytes[i - 1].is_ascii_whitespace();
        if !starts {
            i += 1;
            continue;
        }
        let rest = &value[i..];
        let name_len = rest
            .find(|c: char| matches!(c, '=' | '&' | ';' | ',' | '?' | '#') || c.is_whitespace())
            .unwrap_or(rest.len());
        if !rest[name_len..].starts_with('=') || !is_credential_name(&rest[..name_len]) {
            i += 1;
            continue;
        }
        let value_start = i + name_len + 1;
        let tail = &value[value_start..];
        let value_len = tail
            .find(|c: char| matches!(c, '&' | ';' | '#') || c.is_whitespace())
            .unwrap_or(tail.len());
        if value_len > 0 {
            out.push_str(&value[copied..value_start]);
            out.push_str(REDACTED);
            copied = value_start + value_len;
        }
        i = value_start + value_len;
    }
    out.push_str(&value[copied..]);
    out
}

/// `Bearer abc…` / `Basic dXNl…` → `Bearer [redacted]`: a word naming the
/// scheme (any case), whitespace, then the credential up to whitespace.
fn redact_auth_schemes(value: &str) -> String {
    let runs = split_keep(value, char::is_whitespace);
    let mut out = String::with_capacity(value.len());
    let mut redact_next = false;
    for (i, run) in runs {
        if i % 2 == 1 {
            out.push_str(run); // whitespace
            continue;
        }
        if redact_next && !run.is_empty() {
            out.push_str(REDACTED);
        } else {
            out.push_str(run);
        }
        let word = run
            .rsplit(|c: char| !c.is_ascii_alphanumeric())
            .next()
            .unwrap_or_default();
        redact_next = AUTH_SCHEMES.iter().any(|s| word.eq_ignore_ascii_case(s));
    }
    out
}

fn is_credential_name(name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let name = percent_decoded_lowercase(name);
    CREDENTIAL_NAMES.contains(&name.as_str())
        || CREDENTIAL_PARTS.iter().any(|part| name.contains(part))
        || name.ends_with("key")
}

/// Lowercase, with `%XX` escapes decoded (`%74oken` is `token`).
fn percent_decoded_lowercase(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match text.get(i + 1..i + 3) {
            Some(hex) if bytes[i] == b'%' && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                u8::from_str_radix(hex, 16).ok()
            }
            _ => None,
        };
        match escaped {
            Some(byte) => {
                out.push(byte.to_ascii_lowercase());
                i += 3;
            }
            None => {
                out.push(bytes[i].to_ascii_lowercase());
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `text` cut into alternating runs: entries (even indices) and separators
/// (odd indices), so that joining them gives `text` back.
fn split_keep(text: &str, is_separator: impl Fn(char) -> bool) -> Vec<(usize, &str)> {
    let mut runs = Vec::new();
    let mut start = 0;
    let mut in_separator = false;
    for (i, c) in text.char_indices() {
        if is_separator(c) != in_separator {
            runs.push(&text[start..i]);
            start = i;
            in_separator = !in_separator;
        }
    }
    runs.push(&text[start..]);
    runs.into_iter().enumerate().collect()
}

#[cfg(test)]
mod tests;
