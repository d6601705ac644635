//! Which names carry a credential: query and `name=value` parameters,
//! header-like `Name:` words, and the authentication schemes. Its own file
//! so that the rules in `redact.rs` and `userinfo.rs` both read them
//! without importing each other.

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
    // Short or generic names that carry credentials too (an outside audit found them shown):
    // a password (`pw`), a JSON web token, an Azure shared-access signature, a cookie, a
    // session id, a passphrase.
    "pw",
    "jwt",
    "sas",
    "cookie",
    "session",
    "sessionid",
    "session_id",
    "passphrase",
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
pub(super) const AUTH_SCHEMES: &[&str] = &["bearer", "basic"];

/// `Bearer` or `Basic`, any case.
pub(super) fn is_auth_scheme(word: &str) -> bool {
    AUTH_SCHEMES.iter().any(|s| word.eq_ignore_ascii_case(s))
}

/// A header name whose value is a credential: a dashed name that looks like
/// a credential (`X-Api-Key`, `X-Auth-Token`, `Proxy-Authorization`), or one
/// of [`HEADER_WORDS`]. A name without a dash must be one of those words, so
/// an error code such as `ExpiredToken: The security token…` keeps its
/// explanation.
pub(super) fn is_header(name: &str) -> bool {
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

/// A parameter name that holds a credential: one of [`CREDENTIAL_NAMES`],
/// holding one of [`CREDENTIAL_PARTS`], or ending in `key`.
pub(super) fn is_credential_name(name: &str) -> bool {
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
