//! The userinfo rules of [`super::redact`]: what stands before an `@` that
//! ends a URL's userinfo or a `user:password@host` entry, however the URL
//! was spelled, and a URL "port" that is not a number (a password whose
//! `@…` was cut off, as a list split at a comma inside it leaves it).
//!
//! Why so broad: URL parsers accept far more than `scheme://`. WHATWG
//! parsers (and the `url` crate) read `http:/\u:p@h`, `http:\\u:p@h`,
//! `http:///u:p@h` and even `http:u:p@h` as userinfo `u:p`, and delete tabs
//! and newlines wherever they stand; people paste passwords holding `/`,
//! `:`, `@`, `\`, `?`, `#` or `,` without encoding them. Where the userinfo
//! ends cannot be told from where a path with an `@` ends (`http://u:p/q@h`
//! against `http://h:1/a@b`), so everything from the authority's start to
//! the LAST `@` of the entry is hidden. A URL without `@` is left alone
//! unless its port is not a number.
//!
//! Positions are byte offsets of ASCII bytes, so every slice is on a char
//! boundary (UTF-8 continuation bytes are never ASCII).

use std::ops::Range;

use super::names::is_credential_name;
use super::text::{REDACTED, split_keep};

/// `redact_anywhere`'s words: text between whitespace other than tab, CR
/// and LF. Parsers delete those three inside a URL (`u:pa<TAB>ss@h` is the
/// userinfo `u:pass`), so they may stand inside a password.
fn ends_word(c: char) -> bool {
    c.is_whitespace() && !matches!(c, '\t' | '\r' | '\n')
}

/// Every userinfo hidden: in each entry of each word, from the start of its
/// authority (after `scheme:` and its slashes, after a leading `//`, or the
/// entry's start) to its last `@` or `%40`. An entry without a scheme is a
/// userinfo when that part holds a `:` (`user:password@host`). A word that
/// holds no userinfo on its own but follows one that opened it
/// (`http://u:pa ss@h`: a space inside the password) is hidden with it;
/// failing that, a token alone before the `@` is ([`bare_token_start`]),
/// while an e-mail address's plain user name or PromQL's `@` modifier
/// keeps its text.
pub(super) fn redact_anywhere(text: &str) -> String {
    let runs = split_keep(text, ends_word);
    let mut out: Vec<String> = runs.iter().map(|(_, run)| (*run).to_owned()).collect();
    for (i, word) in runs.iter().step_by(2).map(|(i, word)| (*i, *word)) {
        let entries = entries(word);
        let mut shown = String::with_capacity(word.len());
        let mut copied = 0;
        for (n, entry) in entries.iter().enumerate() {
            let Some(at) = last_at(&word[entry.clone()]).map(|at| entry.start + at) else {
                continue;
            };
            let hidden = match userinfo_start(word, entry.start, at) {
                // `admin:my pass:word@h`: this word's own `user:password` may be the end of a
                // password an earlier word opened.
                Some(start)
                    if n == 0
                        && start == 0
                        && !authority_start(word, entry.start, at).1
                        && join_back(&mut out, i) =>
                {
                    copied = at;
                    continue;
                }
                Some(start) => start..at,
                None => {
                    // A `[redacted]@` is one this pass made, when it chose
                    // not to join: choosing again would not be idempotent.
                    if n == 0
                        && at > 0
                        && i >= 2
                        && &word[..at] != REDACTED
                        && schemeless_userinfo(word, entry.start, at)
                    {
                        // `http://u:pa ss@h`: an earlier word opened a
                        // userinfo this one closes; hide all of it. Tried
                        // before the token rule, which would hide only this
                        // part.
                        if join_back(&mut out, i) {
                            copied = at;
                            continue;
                        }
                    }
                    match bare_token_start(word, entry.start, at) {
                        Some(start) => start..at,
                        None => continue,
                    }
                }
            };
            if hidden.is_empty() || &word[hidden.clone()] == REDACTED {
                continue;
            }
            shown.push_str(&word[copied..hidden.start]);
            shown.push_str(REDACTED);
            copied = hidden.end;
        }
        shown.push_str(&word[copied..]);
        out[i] = shown;
    }
    out.concat()
}

/// How many words back a password holding spaces is looked for (`u:correct horse battery@h`).
const PASSPHRASE_WORDS: usize = 4;

/// If a word at most [`PASSPHRASE_WORDS`] before `out[i]` opened a userinfo
/// ([`opened_userinfo`]) and only plain words stand between (no `:`, `@`, `=` or quote), hide
/// it from there to `out[i]`'s start and return true. The words are read as already redacted,
/// since an earlier entry of one may have had its own userinfo hidden.
fn join_back(out: &mut [String], i: usize) -> bool {
    for back in 1..=PASSPHRASE_WORDS {
        let Some(j) = i.checked_sub(2 * back) else {
            return false;
        };
        let candidate = &out[j];
        if let Some(start) = opened_userinfo(candidate) {
            out[j] = format!("{}{REDACTED}", &candidate[..start]);
            for between in &mut out[j + 1..i] {
                between.clear();
            }
            return true;
        }
        if candidate.contains([':', '@', '=', '"', '\'', '`']) || candidate.is_empty() {
            return false;
        }
    }
    false
}

/// `scheme://host:PORT…` whose PORT is not a number: from the port to the
/// end of the entry becomes `[redacted]` (`http://u:[redacted]`). What
/// stands there is a password whose `@host` was cut off; the rest of the
/// entry goes too, since the password may go on past a `/`. The literal
/// placeholder `PORT` of help texts is kept.
pub(super) fn redact_open_ports(text: &str) -> String {
    let runs = split_keep(text, ends_word);
    let mut out = String::with_capacity(text.len());
    for (i, word) in runs {
        if i % 2 == 1 {
            out.push_str(word);
            continue;
        }
        let mut copied = 0;
        for entry in entries(word) {
            if last_at(&word[entry.clone()]).is_some() {
                continue;
            }
            let Some(authority) = scheme_authority(word.as_bytes(), entry.clone()) else {
                continue;
            };
            if let Some(port) = password_as_port(word, authority..entry.end) {
                out.push_str(&word[copied..port]);
                out.push_str(REDACTED);
                copied = entry.end;
            }
        }
        out.push_str(&word[copied..]);
    }
    out
}

/// The entries of a word: split at each `,` that a scheme separator
/// follows (`http://a:1/m,http://b:1/m`), so that each URL of a list keeps
/// its host. A `,` followed by anything else may be inside a password.
fn entries(word: &str) -> Vec<Range<usize>> {
    let bytes = word.as_bytes();
    let mut entries = Vec::new();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b',' && scheme_end(bytes, i + 1).is_some() {
            entries.push(start..i);
            start = i + 1;
        }
    }
    entries.push(start..bytes.len());
    entries
}

/// Where the last `@` or `%40` of `text` starts.
fn last_at(text: &str) -> Option<usize> {
    match (text.rfind('@'), text.rfind("%40")) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// True when `text` holds a `:` or `%3A` (a `user:password` shape).
fn has_colon(text: &str) -> bool {
    text.contains(':') || text.contains("%3A") || text.contains("%3a")
}

fn is_scheme_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-')
}

/// How many `/` and `\` follow `from` (parsers take `\` for `/`).
fn slashes(bytes: &[u8], from: usize) -> usize {
    bytes
        .get(from..)
        .unwrap_or_default()
        .iter()
        .take_while(|b| matches!(b, b'/' | b'\\'))
        .count()
}

/// If a scheme separator starts at `start`: a scheme (a letter, then
/// letters, digits, `+`, `.` or `-`) not preceded by a scheme byte, a `:`,
/// then at least one `/` or `\` in any mix. Returns where it ends.
fn scheme_end(bytes: &[u8], start: usize) -> Option<usize> {
    if !bytes.get(start)?.is_ascii_alphabetic() || (start > 0 && is_scheme_byte(bytes[start - 1])) {
        return None;
    }
    let colon = start
        + bytes[start..]
            .iter()
            .take_while(|b| is_scheme_byte(**b))
            .count();
    if bytes.get(colon) != Some(&b':') {
        return None;
    }
    let count = slashes(bytes, colon + 1);
    (count > 0).then_some(colon + 1 + count)
}

/// The first scheme separator in `bytes[within]` (whole): where it starts
/// and ends.
fn first_scheme(bytes: &[u8], within: Range<usize>) -> Option<(usize, usize)> {
    let bounded = &bytes[..within.end];
    within
        .clone()
        .find_map(|i| scheme_end(bounded, i).map(|end| (i, end)))
}

/// Where the authority of the entry `bytes[entry]` starts: after a leading
/// `//` (or `\\`), else after its first scheme separator.
fn scheme_authority(bytes: &[u8], entry: Range<usize>) -> Option<usize> {
    let leading = slashes(&bytes[..entry.end], entry.start);
    if leading >= 2 {
        return Some(entry.start + leading);
    }
    first_scheme(bytes, entry).map(|(_, end)| end)
}

/// Where a userinfo ending at `to` would start in the entry part
/// `word[from..to]`, and whether the URL syntax says it is an authority:
/// after a leading `//` (or `\\`), or after the first scheme separator;
/// else `from`, and only a `user:password` shape makes it one.
fn authority_start(word: &str, from: usize, to: usize) -> (usize, bool) {
    let bytes = word.as_bytes();
    let leading = slashes(&bytes[..to], from);
    if leading >= 2 {
        return (from + leading, true); // `//u@h`, `\\u@h`: a network path
    }
    match first_scheme(bytes, from..to) {
        // Text before the scheme (`x=`, `(`) is kept unless it holds a
        // colon, which a password cut by a `scheme:/` inside it would; a
        // quote or bracket just before the scheme starts a new value
        // (`{"url":"http://…`), so a colon before that is not the URL's.
        Some((start, end))
            if !has_colon(&word[from..start])
                || (start > from
                    && matches!(
                        bytes[start - 1],
                        b'"' | b'\'' | b'`' | b'(' | b'<' | b'[' | b'{' | b'='
                    )) =>
        {
            (end, true)
        }
        _ => (from, false),
    }
}

/// Where the userinfo that ends at `at` starts, in the entry starting at
/// `from`; `None` when that part does not read as a userinfo.
fn userinfo_start(word: &str, from: usize, at: usize) -> Option<usize> {
    match authority_start(word, from, at) {
        (start, true) => Some(start),
        (start, false) => (has_colon(&word[start..at]) && schemeless_userinfo(word, start, at))
            .then(|| after_open_quote(word, start, at)),
    }
}

/// Whether the `@` at `at` of an entry without a scheme (starting at `from`) may end a
/// userinfo: always, unless what surrounds it says it is other text. PromQL's `@` modifier
/// (`vllm:num_requests_waiting@1700000000`, `x@start()`: every vLLM metric name has a `:`);
/// or an `@` inside a quoted string (`team="ml-platform@example.com"`,
/// `model_name="org/Model@rev,tag"`) that no `host:port` follows. Anything else is hidden
/// whatever follows the `@` (`u:p@kafka:${PORT}`, `u:p@$(HOST):9092`, `u:p@`): a password is
/// worth more than a mangled message.
fn schemeless_userinfo(word: &str, from: usize, at: usize) -> bool {
    let rest = after_at(word, at);
    if promql_modifier(rest) {
        return false;
    }
    !inside_quotes(word, from, at) || host_and_port_follow(rest)
}

/// Where the userinfo of a schemeless entry starts: after the quote that opened the string the
/// `@` stands in (`{"brokers":"u:p@k:9092"}` hides `u:p`), else at `from`.
fn after_open_quote(word: &str, from: usize, at: usize) -> usize {
    opening_quote(word, from, at).map_or(from, |q| q + 1)
}

/// True when the `@` at `at` stands inside a quoted string: [`opening_quote`].
fn inside_quotes(word: &str, from: usize, at: usize) -> bool {
    opening_quote(word, from, at).is_some()
}

/// The quote that opens the string the `@` at `at` stands in, if it stands in one the way a
/// PromQL label value or a JSON string does: the last quote (`"`, `'` or a backtick) before the
/// `@` in the entry follows `=`, `~`, `:`, `{`, `(`, `[` or `,` (or starts the entry), and the
/// same quote closes the string after the `@`. A quote inside a password (`u:pa"ss@h`,
/// `u:s3cret"@h`) follows no such character, or is never closed: it opens nothing, and the
/// userinfo is hidden from the entry's start.
fn opening_quote(word: &str, from: usize, at: usize) -> Option<usize> {
    let bytes = word.as_bytes();
    let q = from
        + bytes[from..at]
            .iter()
            .rposition(|b| matches!(b, b'"' | b'\'' | b'`'))?;
    let opens = q == from || matches!(bytes[q - 1], b'=' | b'~' | b':' | b'{' | b'(' | b'[' | b',');
    (opens && bytes[at..].contains(&bytes[q])).then_some(q)
}

/// True when `rest`, the text after an `@`, is the argument of PromQL's `@` modifier: a Unix
/// time (digits, at most one `.`) that no host character or `:` follows, or `start()` or
/// `end()`.
fn promql_modifier(rest: &str) -> bool {
    if rest.starts_with("start()") || rest.starts_with("end()") {
        return true;
    }
    let bytes = rest.as_bytes();
    let number = bytes
        .iter()
        .take_while(|b| b.is_ascii_digit() || **b == b'.')
        .count();
    let time = &rest[..number];
    number > 0
        && time.bytes().next().is_some_and(|b| b.is_ascii_digit())
        && time.matches('.').count() <= 1
        && !bytes
            .get(number)
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':' | b'.'))
}

/// True when a host and a numeric port follow an `@`: `kafka:9092`, `10.0.0.5:8000`,
/// `[::1]:9092`.
fn host_and_port_follow(rest: &str) -> bool {
    let len = host_len(rest);
    len > 0
        && rest.as_bytes().get(len) == Some(&b':')
        && rest.as_bytes().get(len + 1).is_some_and(u8::is_ascii_digit)
}

/// The length of the host `rest` starts with: a bracketed IPv6 address, or letters, digits,
/// `.`, `-` and `_`; 0 when none.
fn host_len(rest: &str) -> usize {
    if rest.starts_with('[') {
        return rest.find(']').map_or(0, |close| close + 1);
    }
    rest.bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        .count()
}

/// The text after the `@` (or `%40`) at `at`.
fn after_at(word: &str, at: usize) -> &str {
    let at_len = if word[at..].starts_with("%40") { 3 } else { 1 };
    &word[at + at_len..]
}

/// Where a token that stands alone before the `@` (or `%40`) at `at` starts,
/// in the entry part `word[from..at]` that holds no `:`: a token pasted as
/// the whole userinfo (`ghp_…@10.0.0.5:8000`, `TOKEN@kafka:9092`), which
/// GitHub and token-only brokers read as the credential. It is hidden when
/// - a host follows the `@` (letters, digits, `.`, `-` or `_`, or a bracketed
///   IPv6 address) that is not PromQL's `@` modifier (`x@1700000000`,
///   `x@start()`), and, inside a quoted string (a label value), a numeric
///   port follows the host (`"TOKEN@kafka:9092"`, not `"ml@example.com"`); and
/// - the token (the run of letters, digits and `-._~+/%!$*` before the
///   `@`, with any trailing `=` of base64 padding) is not a plain user
///   name: one to seven lowercase ASCII letters that are not a credential's
///   name (`u@a:1`, `alice@kafka:9092`, `someone@example.com` keep theirs;
///   `TOKEN`, `u1`, `postgres`, `secret` do not).
///
/// A plain user name is kept because it names someone (an e-mail address,
/// `user@host` in an error) and cannot be a token of any strength; anything
/// else is hidden, since a short token is still a token.
fn bare_token_start(word: &str, from: usize, at: usize) -> Option<usize> {
    let bytes = word.as_bytes();
    let rest = after_at(word, at);
    let quoted = inside_quotes(word, from, at);
    let hidden_here = if quoted {
        host_and_port_follow(rest)
    } else {
        host_len(rest) > 0 && !promql_modifier(rest)
    };
    if !hidden_here {
        return None;
    }
    // A quote that opens no string is part of the token (`tok"en@h:1`), and so is an `@`
    // before the last one (`s3cr3t@abc@kafka:9092`: the token is not `abc`).
    let is_token_byte = |b: &u8| {
        b.is_ascii_alphanumeric()
            || b"-._~+/%!$*@".contains(b)
            || (!quoted && matches!(b, b'"' | b'\'' | b'`'))
    };
    let padding = bytes[from..at]
        .iter()
        .rev()
        .take_while(|b| **b == b'=')
        .count();
    let end = at - padding;
    let start = end
        - bytes[from..end]
            .iter()
            .rev()
            .take_while(|b| is_token_byte(b))
            .count();
    let token = &word[start..at];
    let plain = token.len() <= 7
        && token.bytes().all(|b| b.is_ascii_lowercase())
        && !is_credential_name(token);
    (start < end && !plain).then_some(start)
}

/// If the last entry of `word` opened a userinfo that a later word closes,
/// where that userinfo starts (as [`userinfo_start`] would place it): the
/// entry has no `@`, and a `:` is followed by what is not a port (a URL)
/// or by more than digits and colons (no scheme: `admin:pa` opens,
/// `12:30:45` and `error:` do not).
fn opened_userinfo(word: &str) -> Option<usize> {
    let entry = entries(word).pop()?;
    if last_at(&word[entry.clone()]).is_some() {
        return None;
    }
    match authority_start(word, entry.start, entry.end) {
        (start, true) => password_as_port(word, start..entry.end).map(|_| start),
        (start, false) => {
            let text = &word[start..entry.end];
            let after = &text[text.find(':')? + 1..];
            after
                .bytes()
                .any(|b| !b.is_ascii_digit() && b != b':')
                .then_some(start)
        }
    }
}

/// Where the "port" of the authority `word[authority]` starts when it is
/// not one: not empty, not digits only, not the placeholder `PORT`, not
/// already `[redacted]`. The port ends where an authority or a quoted URL
/// does. An IPv6 host in brackets is stepped over.
fn password_as_port(word: &str, authority: Range<usize>) -> Option<usize> {
    let bytes = word.as_bytes();
    // Where an authority ends, where a quoted or bracketed URL ends, and
    // the line breaks a word may hold (a URL at the end of a line).
    let ends_port = |b: &u8| {
        matches!(
            b,
            b'/' | b'\\'
                | b'?'
                | b'#'
                | b','
                | b';'
                | b')'
                | b'>'
                | b'}'
                | b'"'
                | b'\''
                | b'`'
                | b'\t'
                | b'\r'
                | b'\n'
        )
    };
    let host = &word[authority.clone()];
    // A host cannot hold a `:` percent-encoded, a userinfo can.
    let colon_len = |at: usize| match host.get(at..at + 3) {
        _ if host.as_bytes().get(at) == Some(&b':') => Some(1),
        Some(escape) if escape.eq_ignore_ascii_case("%3a") => Some(3),
        _ => None,
    };
    let colon = if host.starts_with('[') {
        host.find(']')? + 1
    } else {
        (0..host.len())
            .find(|&i| colon_len(i).is_some() || ends_port(&bytes[authority.start + i]))?
    };
    let port_start = authority.start + colon + colon_len(colon)?;
    let rest = &word[port_start..authority.end];
    let port = &rest[..rest
        .bytes()
        .position(|b| ends_port(&b))
        .unwrap_or(rest.len())];
    let hidden = port.is_empty()
        || port == "PORT"
        || port.starts_with(REDACTED)
        || port.bytes().all(|b| b.is_ascii_digit());
    (!hidden).then_some(port_start)
}
