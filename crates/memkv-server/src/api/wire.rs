//! The memory-stores API's wire format: the JSON objects of anthropic's beta `memory_stores`
//! resources (`memory_store`, `memory`, `memory_prefix`, `memory_version`, actors, pages),
//! RFC 3339 times, SHA-256 hex, and the conversion between the API's paths (relative to the
//! store's root: `/notes.md`) and the model's (`/memories/notes.md`).

use memkv::{Actor, ListItem, Memory, StoreInfo, Version};
use serde_json::{Value, json};

/// The model's root directory, which the API's `/` stands for.
const ROOT: &str = memkv::path::ROOT;

/// `2026-11-30T13:45:00.123Z` from milliseconds since the epoch.
pub fn rfc3339(ms: i64) -> String {
    memkv::rfc3339_ms(ms)
}

/// Milliseconds since the epoch from an RFC 3339 time ([`memkv::parse_rfc3339`]).
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    memkv::parse_rfc3339(text)
}

/// Lowercase hex of a SHA-256.
pub fn hex(hash: &[u8; 32]) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
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
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// The model's path of an API path (`/notes.md` → `/memories/notes.md`); `None` when it does
/// not start with `/` or names the root itself. The path rules proper are the library's.
pub fn model_path(api: &str) -> Option<String> {
    (api.starts_with('/') && api != "/").then(|| format!("{ROOT}{api}"))
}

/// The API's path of a model path (`/memories/notes.md` → `/notes.md`; a prefix keeps its
/// trailing `/`).
pub fn api_path(model: &str) -> String {
    memkv::path::api_path(model)
}

/// The model's directory of an API `path_prefix` (`/notes/` → `/memories/notes`, `/` →
/// `/memories`); `None` unless it starts and ends with `/`.
pub fn model_dir(prefix: &str) -> Option<String> {
    if !prefix.starts_with('/') || !prefix.ends_with('/') {
        return None;
    }
    Some(format!("{ROOT}{}", &prefix[..prefix.len() - 1]))
}

/// An actor object (`api_actor`, `session_actor`, `user_actor`), or `null`.
pub fn actor(actor: Option<&Actor>) -> Value {
    actor.map_or(Value::Null, Actor::to_json)
}

/// A `memory_store` object.
pub fn store(info: &StoreInfo) -> Value {
    json!({
        "type": "memory_store",
        "id": info.id,
        "name": info.name,
        "description": info.description,
        "metadata": info.metadata,
        "created_at": rfc3339(info.created_ms),
        "updated_at": rfc3339(info.updated_ms),
        "archived_at": info.archived_ms.map(rfc3339),
    })
}

/// A `memory` object; `content` only with `full`.
pub fn memory(store: &str, m: &Memory, full: bool) -> Value {
    json!({
        "type": "memory",
        "id": m.id.to_string(),
        "memory_store_id": store,
        "memory_version_id": m.version.to_string(),
        "path": api_path(&m.path),
        "content": if full { m.content.as_deref() } else { None },
        "content_sha256": hex(&m.sha256),
        "content_size_bytes": m.size,
        "created_at": rfc3339(m.created_ms),
        "updated_at": rfc3339(m.updated_ms),
    })
}

/// An item of a memory listing: a `memory` or a `memory_prefix`.
pub fn list_item(store: &str, item: &ListItem, full: bool) -> Value {
    match item {
        ListItem::Memory(m) => memory(store, m, full),
        ListItem::Prefix(p) => json!({"type": "memory_prefix", "path": api_path(p)}),
    }
}

/// A `memory_version` object; `content` only with `full`.
pub fn version(store: &str, v: &Version, full: bool) -> Value {
    json!({
        "type": "memory_version",
        "id": v.id.to_string(),
        "memory_id": v.memory.to_string(),
        "memory_store_id": store,
        "operation": v.operation.as_str(),
        "created_at": rfc3339(v.created_ms),
        "created_by": actor(v.actor.as_ref()),
        "path": v.path.as_deref().map(api_path),
        "content": if full { v.content.as_deref() } else { None },
        "content_sha256": v.sha256.as_ref().map(hex),
        "content_size_bytes": v.size,
        "redacted_at": v.redacted.as_ref().map(|r| rfc3339(r.at_ms)),
        "redacted_by": actor(v.redacted.as_ref().and_then(|r| r.by.as_ref())),
    })
}

/// A page: `{"data": [...], "next_page": token | null}`.
pub fn page(data: Vec<Value>, next: Option<String>) -> Value {
    json!({"data": data, "next_page": next})
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
