//! What every rule of the redactor shares: the marker that replaces a
//! credential and the cut of a text into words and separators. Its own
//! file so that the rules in `userinfo.rs` and `redact.rs` both use it
//! without importing each other.

/// What replaces each credential.
pub const REDACTED: &str = "[redacted]";

/// `text` cut into alternating runs: entries (even indices) and separators
/// (odd indices), so that joining them gives `text` back.
pub(super) fn split_keep(text: &str, is_separator: impl Fn(char) -> bool) -> Vec<(usize, &str)> {
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
