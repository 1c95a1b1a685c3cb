//! The memory-stores API's wire format: RFC 3339 times, durations, SHA-256 hex, and the conversion between
//! the API's paths (relative to the store's root: `/notes.md`) and the model's
//! (`/memories/notes.md`). The objects themselves are types, in `objects`.

use std::time::Duration;

/// `2026-11-30T13:45:00.123Z` from milliseconds since the epoch.
pub fn rfc3339(ms: i64) -> String {
    memkv::rfc3339_ms(ms)
}

/// Milliseconds since the epoch from an RFC 3339 time ([`memkv::parse_rfc3339`]).
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    memkv::parse_rfc3339(text)
}

/// `30d`, `12h`, `15m`, `90s`, `250ms`: the largest unit that divides it.
pub fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms > 0 && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// Lowercase hex of a SHA-256.
pub fn hex(hash: &[u8; 32]) -> String {
    hex::encode(hash)
}

/// A SHA-256 given as 64 lowercase hex digits, as the API takes it.
pub fn parse_sha256(text: &str) -> Option<[u8; 32]> {
    let b = text.as_bytes();
    if b.len() != 64
        || !b
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
    {
        return None;
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

pub use memkv::path::{model_dir, model_path};

/// The API's path of a model path (`/memories/notes.md` → `/notes.md`; a prefix keeps its
/// trailing `/`).
pub fn api_path(model: &str) -> String {
    memkv::path::api_path(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_with_milliseconds() {
        for ms in [0, 1, 999, 1_796_000_000_123, 951_782_400_000, -1] {
            let text = rfc3339(ms);
            assert_eq!(parse_rfc3339(&text), Some(ms), "{text}");
        }
        assert_eq!(rfc3339(1_796_000_000_123), "2026-11-30T00:53:20.123Z");
        assert_eq!(
            parse_rfc3339("2026-11-30T01:53:20.1234+01:00"),
            Some(1_796_000_000_123)
        );
        assert_eq!(
            parse_rfc3339("2026-11-30T00:53:20+00:00"),
            Some(1_796_000_000_000)
        );
        for bad in [
            "",
            "2026-11-30",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T00:00:00",
            "2026-11-30T00:00:00.Z",
            "2026-11-30T00:00:00+1:00",
            "２026-11-30T00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn hashes_are_lowercase_hex() {
        let h = [0xab; 32];
        assert_eq!(parse_sha256(&hex(&h)), Some(h));
        assert_eq!(parse_sha256(&hex(&h).to_uppercase()), None);
        assert_eq!(parse_sha256("ab"), None);
    }

    #[test]
    fn paths_convert_between_faces() {
        assert_eq!(
            model_path("/notes.md").as_deref(),
            Some("/memories/notes.md")
        );
        assert_eq!(model_path("/"), None);
        assert_eq!(model_path("notes.md"), None);
        assert_eq!(api_path("/memories/a/b.md"), "/a/b.md");
        assert_eq!(api_path("/memories/a/"), "/a/");
        assert_eq!(api_path("/memories"), "/");
        assert_eq!(model_dir("/").as_deref(), Some("/memories"));
        assert_eq!(model_dir("/notes/").as_deref(), Some("/memories/notes"));
        assert_eq!(model_dir("/notes"), None);
        assert_eq!(model_dir("notes/"), None);
    }
}
