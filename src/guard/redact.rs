//! Credential-shaped parts of a text, replaced by `[redacted]`: the one
//! redactor every output that names a target goes through. Metadata errors
//! (`trigger::invalid()`), source labels (logs, `/explain`, the `source`
//! label of self-metrics, `check`), the targets and details of reading
//! errors (a reqwest error's text holds the URL) and outbound refusals all
//! pass what they quote through [`redact`] when they are built, so a token
//! in a valid `vllmTargets` query string is as hidden as a password in an
//! invalid one. Errors reach KEDA's events, `check` output and logs.
//!
//! The redactor errs on the side of hiding too much: a value shaped like a
//! credential loses it even when it was something else, because an error is
//! still readable with `[redacted]` in it and a leaked secret cannot be
//! taken back. It is idempotent: redacting a redacted text changes nothing,
//! so a label built from redacted parts can be redacted again.

mod text;
mod userinfo;

pub use text::REDACTED;
use text::split_keep;

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
/// Header-like names without a dash whose value is a credential
/// (`Authorization: …`, `Token: …`), any case.
const HEADER_WORDS: &[&str] = &[
    "authorization",
    "token",
    "password",
    "passwd",
    "secret",
    "apikey",
    "api_key",
];
/// HTTP authentication schemes whose parameter is the credential itself.
const AUTH_SCHEMES: &[&str] = &["bearer", "basic"];

/// `raw` with every credential-shaped part replaced by [`REDACTED`]:
/// - the userinfo of every URL of any scheme, also inside a list
///   (`scheme://[redacted]@host…`), however the scheme is separated
///   (`http:/\`, `http:///`, `//` alone…) and whatever the password holds
///   (`/`, `:`, `@`, `\`, `%40`, a tab, a space): everything from the
///   authority to the entry's last `@` (`redact/userinfo.rs` says why);
/// - `user:password@host` entries without a scheme (`[redacted]@host`);
/// - a URL's port that is not a number, to the end of the entry
///   (`http://u:[redacted]`: a password whose `@host` was cut off);
/// - the value of every query or `name=value` parameter whose name looks
///   like a credential (`token=[redacted]`; a quoted value keeps its
///   quotes, as in a PromQL matcher: `token="[redacted]"`);
/// - the parameter of `Bearer …` and `Basic …` (`Bearer [redacted]`), also
///   percent- or form-encoded inside a URL (`%20Bearer%20[redacted]`);
/// - the value of a header-like `Name: value` whose name looks like a
///   credential (`X-Api-Key: [redacted]`).
pub fn redact(raw: &str) -> String {
    // One round's rules can make a shape another rule reads differently
    // (hiding an encoded `Bearer` parameter can leave the word before an
    // `@` looking like an opened userinfo): rounds run until one changes
    // nothing, so that redacting twice changes nothing. Every change puts
    // a marker where text was; the bound only stops odd text that keeps
    // reshaping from looping, and more rounds only hide more.
    let mut text = redact_round(raw);
    for _ in 1..MAX_ROUNDS {
        let next = redact_round(&text);
        if next == text {
            break;
        }
        text = next;
    }
    text
}

/// Most rounds [`redact`] runs. Ordinary text settles in the first (the
/// second only confirms it); the odd shapes the tests found need one more.
const MAX_ROUNDS: usize = 8;

/// Each rule once, in order: userinfo, open ports, parameters, encoded
/// authorization schemes, words.
fn redact_round(raw: &str) -> String {
    let text = userinfo::redact_anywhere(raw);
    let text = userinfo::redact_open_ports(&text);
    let text = redact_parameters(&text);
    let text = redact_encoded_schemes(&text);
    redact_words(&text)
}

/// `…name=value…` → `…name=[redacted]…` for credential-like names. A
/// parameter starts the value or follows `?`, `&`, `;`, `,`, `{`, `(`, a
/// quote or whitespace. A quoted value (`"…"`, `'…'`, or `\"…\"` inside
/// JSON text, also after PromQL's `=~`) runs to its closing quote, which is
/// kept; any other value runs to the next `&`, `;`, `#`, `"`, backtick or
/// whitespace.
fn redact_parameters(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = String::with_capacity(value.len());
    let (mut copied, mut i) = (0, 0);
    while i < bytes.len() {
        // After an ASCII separator `i` is a char boundary, so slicing is safe.
        let starts = i == 0
            || matches!(
                bytes[i - 1],
                // `#`: a fragment can hold `access_token=…` (OAuth's implicit flow).
                b'?' | b'#' | b'&' | b';' | b',' | b'{' | b'(' | b'"' | b'\'' | b'`'
            )
            || bytes[i - 1].is_ascii_whitespace();
        if !starts {
            i += 1;
            continue;
        }
        let rest = &value[i..];
        let name_len = rest
            .find(|c: char| {
                matches!(c, '=' | '&' | ';' | ',' | '?' | '#' | '"' | '(' | '{')
                    || c.is_whitespace()
            })
            .unwrap_or(rest.len());
        if !rest[name_len..].starts_with('=') || !is_credential_name(&rest[..name_len]) {
            i += 1;
            continue;
        }
        let after_equals = i + name_len + 1;
        let (value_start, value_len) = parameter_value(&value[after_equals..]);
        let value_start = after_equals + value_start;
        if value_len > 0 && &value[value_start..value_start + value_len] != REDACTED {
            out.push_str(&value[copied..value_start]);
            out.push_str(REDACTED);
            copied = value_start + value_len;
        }
        i = value_start + value_len;
    }
    out.push_str(&value[copied..]);
    out
}

/// Where the credential in `tail` (the text after `name=`) starts and how
/// long it is: inside the quotes of a quoted value, else up to the next
/// separator.
fn parameter_value(tail: &str) -> (usize, usize) {
    // PromQL's regex matcher `name=~"…"`.
    let skip = usize::from(tail.starts_with('~'));
    let tail = &tail[skip..];
    for quote in ["\\\"", "\"", "'"] {
        if let Some(inner) = tail.strip_prefix(quote) {
            // An unclosed quote hides the rest of the text.
            return (skip + quote.len(), inner.find(quote).unwrap_or(inner.len()));
        }
    }
    let len = tail
        .find(|c: char| matches!(c, '&' | ';' | '#' | '"' | '`') || c.is_whitespace())
        .unwrap_or(tail.len());
    (skip, len)
}

/// Encoded whitespace around an authentication scheme inside a URL (a
/// header pasted into a target, percent- or form-encoded on its way into
/// the URL), compared lowercase.
const ENCODED_SPACES: &[&str] = &["%20", "%09", "%0a", "%0d", "+"];

/// `…%20Bearer%20abc…` → `…%20Bearer%20[redacted]…` (also `Basic`, `%09`,
/// `+`…, any case): [`redact_words`] splits at literal whitespace only, and
/// a URL shows a space as `%20`. The scheme must start the text or follow a
/// byte that is not a letter or digit, or an encoded space; the credential
/// runs to the next encoded or literal whitespace, `&`, `;`, `#`, `,` or
/// quote.
fn redact_encoded_schemes(value: &str) -> String {
    // ASCII lowercasing keeps every byte where it was.
    let lower = value.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let space_at = |i: usize| {
        ENCODED_SPACES
            .iter()
            .find(|s| bytes[i..].starts_with(s.as_bytes()))
            .map(|s| s.len())
    };
    let mut out = String::with_capacity(value.len());
    let (mut copied, mut i) = (0, 0);
    while i < bytes.len() {
        let Some(scheme) = AUTH_SCHEMES
            .iter()
            .find(|s| bytes[i..].starts_with(s.as_bytes()))
        else {
            i += 1;
            continue;
        };
        let boundary = i == 0
            || !bytes[i - 1].is_ascii_alphanumeric()
            || ENCODED_SPACES
                .iter()
                .any(|s| bytes[..i].ends_with(s.as_bytes()));
        let mut start = i + scheme.len();
        while let Some(len) = space_at(start) {
            start += len;
        }
        if !boundary || start == i + scheme.len() {
            i += 1;
            continue;
        }
        // `+` ends no credential (base64 holds it); `%20` and the like do.
        let mut end = start;
        while end < bytes.len()
            && !matches!(bytes[end], b'&' | b';' | b'#' | b',' | b'"' | b'\'' | b'`')
            && !bytes[end].is_ascii_whitespace()
            && space_at(end).is_none_or(|_| bytes[end] == b'+')
        {
            end += 1;
        }
        // Every end is an ASCII byte or the text's end: a char boundary.
        if end > start && &value[start..end] != REDACTED {
            out.push_str(&value[copied..start]);
            out.push_str(REDACTED);
            copied = end;
        }
        i = end.max(i + 1);
    }
    out.push_str(&value[copied..]);
    out
}

/// Word by word: the word after an authentication scheme (`Bearer abc…`,
/// `Basic dXNl…` → `Bearer [redacted]`, any case) and the word after a
/// header-like name that looks like a credential (`X-Api-Key: abc…` →
/// `X-Api-Key: [redacted]`; `Authorization: Basic abc…` keeps the scheme
/// and hides what follows it).
fn redact_words(value: &str) -> String {
    let runs = split_keep(value, char::is_whitespace);
    let mut out = String::with_capacity(value.len());
    let mut redact_next = false;
    for (i, run) in runs {
        if i % 2 == 1 {
            out.push_str(run); // whitespace
            continue;
        }
        let word = run
            .rsplit(|c: char| !c.is_ascii_alphanumeric())
            .next()
            .unwrap_or_default();
        let is_scheme = AUTH_SCHEMES.iter().any(|s| word.eq_ignore_ascii_case(s));
        if redact_next && !run.is_empty() && !(is_scheme && word == run) {
            out.push_str(REDACTED);
            redact_next = false;
            continue;
        }
        out.push_str(run);
        redact_next = is_scheme || is_header_name(run);
    }
    out
}

/// `Name:` (a word ending in one colon, perhaps quoted) naming a header
/// that carries a credential: a dashed header name that looks like a
/// credential (`X-Api-Key`, `X-Auth-Token`, `Proxy-Authorization`), or one
/// of [`HEADER_WORDS`]. A name without a dash must be one of those words,
/// so an error code such as `ExpiredToken: The security token…` keeps its
/// explanation.
fn is_header_name(word: &str) -> bool {
    let quote = |c: char| matches!(c, '"' | '\'' | '`');
    let Some(name) = word.strip_suffix(':').map(|name| name.trim_matches(quote)) else {
        return false;
    };
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return false;
    }
    if name.contains('-') {
        is_credential_name(name)
    } else {
        HEADER_WORDS.iter().any(|w| name.eq_ignore_ascii_case(w))
    }
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

#[cfg(test)]
mod tests;
