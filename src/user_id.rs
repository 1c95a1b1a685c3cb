//! The rules for user ids (the id of a memory store), in one place.

use crate::error::Error;

/// Longest accepted user id, in UTF-8 bytes.
pub const MAX_USER_ID_BYTES: usize = 256;

/// The rules for user ids, in one place: non-empty, at most [`MAX_USER_ID_BYTES`], no control
/// or format characters (C0, DEL, C1, category Cf: zero-width, bidi controls, BOM …), no line or
/// paragraph separator (U+2028, U+2029; the same set the path rules refuse), and no whitespace at
/// either end, so that every id prints unambiguously in `users` and logs.
pub(crate) fn validate_user(id: &str) -> Result<(), Error> {
    let reason = if id.is_empty() {
        "must not be empty"
    } else if id.len() > MAX_USER_ID_BYTES {
        "longer than 256 bytes"
    } else if id.chars().any(crate::path::is_forbidden_char) {
        "contains a control or format character (such as a zero-width space, a bidi control, \
         a byte order mark or a line separator)"
    } else if id.starts_with(char::is_whitespace) || id.ends_with(char::is_whitespace) {
        "starts or ends with whitespace"
    } else {
        return Ok(());
    };
    Err(Error::InvalidUser {
        user: id.to_owned(),
        reason,
    })
}
