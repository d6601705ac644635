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

mod names;
mod text;
mod userinfo;

use names::{AUTH_SCHEMES, is_auth_scheme, is_credential_name, is_header};
pub use text::REDACTED;
use text::split_keep;

/// `raw` with every credential-shaped part replaced by [`REDACTED`]:
/// - the userinfo of every URL of any scheme, also inside a list
///   (`scheme://[redacted]@host…`), however the scheme is separated
///   (`http:/\`, `http:///`, `//` alone…) and whatever the password holds
///   (`/`, `:`, `@`, `\`, `%40`, a tab, a space): everything from the
///   authority to the entry's last `@` (`redact/userinfo.rs` says why);
/// - `user:password@host` entries without a scheme (`[redacted]@host`);
/// - a URL's port that is not a number, to the end of the entry
///   (`http://u:[redacted]`: a password whose `@host` was cut off);
/// - a token alone before the `@` of an entry without a scheme
///   (`ghp_…@10.0.0.5:8000/metrics`, `TOKEN@kafka:9092` →
///   `[redacted]@kafka:9092`) when a host follows the `@`, unless it is a
///   plain user name: one to seven lowercase ASCII letters that are not a
///   credential's name (`u@a:1`, `alice@kafka:9092` are kept;
///   `redact/userinfo.rs` says exactly what a token and a host are);
/// - the value of every query or `name=value` parameter whose name looks
///   like a credential (`token=[redacted]`; a quoted value keeps its
///   quotes, as in a PromQL matcher: `token="[redacted]"`), also with
///   blanks around the `=` (`token = [redacted]`);
/// - the parameter of `Bearer …` and `Basic …` (`Bearer [redacted]`), also
///   percent- or form-encoded inside a URL (`%20Bearer%20[redacted]`) or
///   joined by `:` or `=` (`Bearer=[redacted]`, `bearer:[redacted]`);
/// - the value of a header-like `Name: value` whose name looks like a
///   credential (`X-Api-Key: [redacted]`), also without the space
///   (`Authorization:[redacted]`).
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

/// Each rule once, in order: userinfo, open ports, parameters, joined
/// headers, encoded authorization schemes, words.
fn redact_round(raw: &str) -> String {
    let text = userinfo::redact_anywhere(raw);
    let text = userinfo::redact_open_ports(&text);
    let text = redact_parameters(&text);
    let text = redact_joined_headers(&text);
    let text = redact_encoded_schemes(&text);
    redact_words(&text)
}

/// `…name=value…` → `…name=[redacted]…` for credential-like names. A
/// parameter starts the value or follows `?`, `&`, `;`, `,`, `{`, `(`, `|`,
/// a quote or whitespace. Blanks may stand around the `=` (or `==`, `!=`):
/// `token =abc` is a typo an upstream may still accept. A quoted value (`"…"`, `'…'`, or `\"…\"` inside
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
                // `|`: an alternative of a regex (`podSelectorRegex`, PromQL's `=~`).
                b'?' | b'#' | b'&' | b';' | b',' | b'{' | b'(' | b'|' | b'"' | b'\'' | b'`'
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
        let after_name = &rest[name_len..];
        let gap = after_name.len() - after_name.trim_start_matches(BLANKS).len();
        let operator = ["==", "!=", "="]
            .into_iter()
            .find(|op| after_name[gap..].starts_with(op));
        let Some(operator) = operator.filter(|_| is_credential_name(&rest[..name_len])) else {
            i += 1;
            continue;
        };
        let after_operator = &after_name[gap + operator.len()..];
        let blanks = after_operator.len() - after_operator.trim_start_matches(BLANKS).len();
        let after_equals = i + name_len + gap + operator.len() + blanks;
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

/// What may stand around a parameter's `=`: spaces and tabs, not a line break.
const BLANKS: [char; 2] = [' ', '\t'];

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
/// `+`, an encoded `:` or `=` after the scheme…, any case): [`redact_words`] splits at literal whitespace only, and
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
        // `Bearer%3Aabc`, `Bearer%3Dabc`: the joined forms, encoded.
        while let Some(len) = space_at(start).or_else(|| {
            ["%3a", "%3d"]
                .iter()
                .find(|s| bytes[start..].starts_with(s.as_bytes()))
                .map(|s| s.len())
        }) {
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
        let is_scheme = is_auth_scheme(word);
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
/// that carries a credential ([`names::is_header`]), or an authentication
/// scheme written as one (`Bearer: abc`).
fn is_header_name(word: &str) -> bool {
    let quote = |c: char| matches!(c, '"' | '\'' | '`');
    word.strip_suffix(':')
        .map(|name| name.trim_matches(quote))
        .is_some_and(|name| is_header(name) || is_auth_scheme(name))
}

/// `…Authorization:abc…` → `…Authorization:[redacted]…`: a header name
/// ([`names::is_header`]) joined to its value by a `:` without the space
/// [`redact_words`] splits at, and an authentication scheme joined to its
/// credential by `:` or `=` (`bearer:abc`, `Bearer=abc`). The name starts
/// the text or follows a byte that cannot be in one (so `ExpiredToken:`
/// is not `Token:`), and may be closed by a quote (`{"Authorization":"abc"}`).
/// The value is read as a parameter's ([`parameter_value`]); a value that
/// is a scheme (`Authorization:Bearer abc`) is kept for [`redact_words`],
/// which hides the word after it.
fn redact_joined_headers(value: &str) -> String {
    let is_name_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    let bytes = value.as_bytes();
    let mut out = String::with_capacity(value.len());
    let (mut copied, mut i) = (0, 0);
    while i < bytes.len() {
        if !is_name_byte(bytes[i]) || (i > 0 && is_name_byte(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let name_end = i + bytes[i..].iter().take_while(|b| is_name_byte(**b)).count();
        // Every position here follows an ASCII byte: a char boundary.
        let name = &value[i..name_end];
        let after_name = &value[name_end..];
        let closed = ["\\\"", "\"", "'", "`"]
            .into_iter()
            .find(|q| after_name.starts_with(q))
            .map_or(0, str::len);
        let separator = after_name[closed..].bytes().next();
        let joined = match separator {
            Some(b':') => {
                !after_name[closed + 1..].starts_with(':')
                    && (is_header(name) || is_auth_scheme(name))
            }
            Some(b'=') => is_auth_scheme(name),
            _ => false,
        };
        if !joined {
            i = name_end;
            continue;
        }
        let after_separator = name_end + closed + 1;
        let (start, len) = parameter_value(&value[after_separator..]);
        let (start, end) = (after_separator + start, after_separator + start + len);
        let shown = &value[start..end];
        if len > 0 && shown != REDACTED && !is_auth_scheme(shown) {
            out.push_str(&value[copied..start]);
            out.push_str(REDACTED);
            copied = end;
        }
        i = end.max(name_end);
    }
    out.push_str(&value[copied..]);
    out
}

/// What an error about one `entry` of the `separator`-separated `list`
/// quotes: the entry itself when cutting the list changes nothing the
/// redactor hides (each piece redacted alone, joined again, is the whole
/// list redacted), else the whole list. A password holding the separator
/// is cut in two halves that look like no credential alone (`u:pa,ss@h`
/// gives `u:pa`), while the whole list still does (`[redacted]@h`). The
/// caller redacts what this returns, as every echo is.
pub fn entry_to_echo<'a>(list: &'a str, entry: &'a str, separator: char) -> &'a str {
    let mut pieces = String::with_capacity(list.len());
    for (n, piece) in list.split(separator).enumerate() {
        if n > 0 {
            pieces.push(separator);
        }
        pieces.push_str(&redact(piece));
    }
    if pieces == redact(list) { entry } else { list }
}

#[cfg(test)]
mod shape_tests;
#[cfg(test)]
mod tests;
