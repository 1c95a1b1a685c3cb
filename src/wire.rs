//! The JSON objects the faces answer, as types: an actor, a change-log entry, search results.
//! Each face serializes these, so the shape is written down once; with the `openapi` feature
//! each also describes itself (utoipa's `ToSchema`), and the HTTP server's `/openapi.json` is
//! derived from them. An actor's object and the search results' are written beside their types
//! (`history::actor`, `search::results`, so that each type's methods are in one file) and
//! re-exported here. The tool blocks themselves are `blocks`' types; with the feature this
//! module also describes them (`ToolInput`, `ToolUseBlock`, `ToolResultBlock`,
//! `ToolOutputObject`), held to `blocks`' serialization by tests.

use serde::Serialize;

use crate::changes::ChangeEntry;
use crate::history::change::ChangeKind;

pub use crate::history::actor::ActorObject;
pub use crate::search::results::{SearchHitObject, SearchLineObject, SearchResultsObject};

/// An entry of the change log as every face shows it (the feed, webhooks, `memkv changes`).
/// A field that does not apply to the entry's type is absent; a path or hash a redaction
/// scrubbed is `null` (but a `previous_path` scrubbed from an entry whose `path` stayed is left
/// out, as on an entry without a rename).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = ChangeEntry))]
#[serde(deny_unknown_fields)]
pub struct ChangeObject {
    /// The entry's place in the log: 1, 2, 3, … across every store.
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub seq: u64,
    /// What changed.
    #[serde(rename = "type")]
    pub kind: ChangeKind,
    /// The store.
    pub memory_store_id: String,
    /// The memory (`mem_…`), on a memory's entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, required = false))]
    pub memory_id: Option<String>,
    /// The version the change made (`memver_…`), on a memory's entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, required = false))]
    pub memory_version_id: Option<String>,
    /// The memory's path after the change, relative to the store's root.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub path: Option<Option<String>>,
    /// The memory's path before a rename.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub previous_path: Option<Option<String>>,
    /// The SHA-256 of the content after the change (64 lowercase hex digits).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, pattern = "^[0-9a-f]{64}$"))]
    pub content_sha256: Option<Option<String>>,
    /// The content's size in bytes after the change.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>))]
    pub content_size_bytes: Option<Option<u64>>,
    /// Who made the change, when known.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub created_by: Option<ActorObject>,
    /// When it was committed (RFC 3339, milliseconds, UTC).
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub created_at: String,
}

impl From<&ChangeEntry> for ChangeObject {
    fn from(entry: &ChangeEntry) -> Self {
        let c = &entry.change;
        let of_memory = c.memory.is_some();
        let redaction = c.kind == ChangeKind::VersionRedacted;
        let api_path = |p: &Option<String>| p.as_deref().map(crate::path::api_path);
        let previous = c.previous_path.is_some()
            || matches!(
                c.kind,
                ChangeKind::MemoryRenamed | ChangeKind::MemoryModified
            ) && c.path.is_none();
        let content = of_memory && !redaction && c.kind != ChangeKind::MemoryDeleted;
        ChangeObject {
            seq: entry.seq,
            kind: c.kind,
            memory_store_id: c.store.clone(),
            memory_id: c.memory.map(|m| m.to_string()),
            memory_version_id: c.version.map(|v| v.to_string()),
            path: (of_memory && !redaction).then(|| api_path(&c.path)),
            previous_path: previous.then(|| api_path(&c.previous_path)),
            content_sha256: content.then(|| c.sha256.as_ref().map(hex::encode)),
            content_size_bytes: content.then_some(c.size),
            created_by: c.actor.as_ref().map(ActorObject::from),
            created_at: crate::time::rfc3339_ms(c.at_ms),
        }
    }
}

impl ChangeEntry {
    /// The entry as every face shows it: `seq`, `type`, `memory_store_id`, and where they
    /// apply `memory_id`, `memory_version_id`, `path` and `previous_path` (the API's paths,
    /// relative to the store's root), `content_sha256`, `content_size_bytes`; then
    /// `created_by` (an actor object, or `null`) and `created_at` (RFC 3339, milliseconds).
    /// A field a redaction scrubbed is `null`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(ChangeObject::from(self)).expect("a change object serializes")
    }
}

/// A change's `type` in JSON: its event type (`memory.created`, …).
impl Serialize for ChangeKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.event_type())
    }
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for ChangeKind {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some("What changed"))
            .enum_values(Some(ChangeKind::all().map(ChangeKind::event_type)))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for ChangeKind {
    fn name() -> std::borrow::Cow<'static, str> {
        "ChangeType".into()
    }
}

/// The input of a memory tool_use block (memory_20250818). memkv answers a mistake in it
/// (a missing or unknown field, a wrong type) to the model as a tool result with `is_error`.
//
// The tool route parses the input itself (`Command::from_json`, with the protocol's messages);
// this type only describes it.
#[cfg(feature = "openapi")]
#[derive(utoipa::ToSchema)]
#[schema(as = Input)]
#[allow(dead_code)]
pub struct ToolInput {
    #[schema(inline, required = true)]
    command: CommandName,
    /// The file or directory, under `/memories`.
    #[schema(required = false)]
    path: String,
    /// `view`: the first and last line to show (`-1`: to the end).
    #[schema(required = false, min_items = 2, max_items = 2)]
    view_range: Vec<i64>,
    /// `create`: the whole content.
    #[schema(required = false)]
    file_text: String,
    /// `str_replace`: the text to find, once.
    #[schema(required = false)]
    old_str: String,
    /// `str_replace`: its replacement.
    #[schema(required = false)]
    new_str: String,
    /// `insert`: the line after which to insert (0: the top).
    #[schema(required = false)]
    insert_line: i64,
    /// `insert`: the text to insert.
    #[schema(required = false)]
    insert_text: String,
    /// `rename`: the path to move.
    #[schema(required = false)]
    old_path: String,
    /// `rename`: where to.
    #[schema(required = false)]
    new_path: String,
}

/// A `tool_use` content block of the memory tool.
//
// `crate::ToolUse`'s type tag is serde's (`tag = "type"`), which utoipa does not describe on a
// struct: this type describes it, and a test holds its fields to `ToolUse`'s.
#[cfg(feature = "openapi")]
#[derive(utoipa::ToSchema)]
#[schema(as = ToolUse)]
#[allow(dead_code)]
pub struct ToolUseBlock {
    #[schema(inline)]
    r#type: ToolUseTag,
    /// The block's id, echoed as the result's `tool_use_id`.
    #[schema(min_length = 1)]
    id: String,
    /// The tool's name (`memory`).
    name: String,
    input: ToolInput,
}

/// A command's output: the `content` and `is_error` of a `tool_result`.
//
// `crate::ToolOutput` accepts other fields when it is read back (the MCP forwarder reads
// answers with it); the answer memkv sends has exactly these.
#[cfg(feature = "openapi")]
#[derive(utoipa::ToSchema)]
#[schema(as = Output)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct ToolOutputObject {
    /// The text the model reads.
    content: String,
    /// Whether the command failed (and changed nothing).
    is_error: bool,
}

/// A `tool_result` content block answering a `tool_use` block.
#[cfg(feature = "openapi")]
#[derive(utoipa::ToSchema)]
#[schema(as = ToolResult)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct ToolResultBlock {
    #[schema(inline)]
    r#type: ToolResultTag,
    /// The id of the `tool_use` block answered.
    tool_use_id: String,
    /// The text the model reads.
    content: String,
    /// Whether the command failed (and changed nothing).
    is_error: bool,
}

#[cfg(feature = "openapi")]
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
enum ToolUseTag {
    #[serde(rename = "tool_use")]
    ToolUse,
}

#[cfg(feature = "openapi")]
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
enum ToolResultTag {
    #[serde(rename = "tool_result")]
    ToolResult,
}

/// The six commands of the memory tool.
#[cfg(feature = "openapi")]
#[derive(utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum CommandName {
    View,
    Create,
    StrReplace,
    Insert,
    Delete,
    Rename,
}

#[cfg(all(test, feature = "openapi"))]
mod tests {
    use super::*;

    #[test]
    fn tool_blocks_describe_their_type_tag() {
        use utoipa::PartialSchema;
        let block = crate::ToolUse {
            id: "toolu_1".into(),
            name: "memory".into(),
            input: serde_json::json!({"command": "view", "path": "/memories"}),
        };
        let result = crate::ToolResult::new(
            "toolu_1",
            crate::ToolOutput {
                content: "x".into(),
                is_error: false,
            },
        );
        for (schema, value) in [
            (
                ToolUseBlock::schema(),
                serde_json::to_value(&block).unwrap(),
            ),
            (
                ToolResultBlock::schema(),
                serde_json::to_value(&result).unwrap(),
            ),
        ] {
            let schema = serde_json::to_value(schema).unwrap();
            let object = value.as_object().unwrap();
            let mut described: Vec<&String> =
                schema["properties"].as_object().unwrap().keys().collect();
            let mut sent: Vec<&String> = object.keys().collect();
            described.sort();
            sent.sort();
            assert_eq!(described, sent);
            if let Some(tag) = value.get("type") {
                assert_eq!(&schema["properties"]["type"]["enum"][0], tag);
            }
            assert_eq!(schema["required"].as_array().unwrap().len(), object.len());
        }
    }

    #[cfg(feature = "openapi")]
    #[test]
    fn the_tool_input_names_every_command() {
        use utoipa::PartialSchema;
        let schema = serde_json::to_value(ToolInput::schema()).unwrap();
        let names = &schema["properties"]["command"]["enum"];
        let expected: Vec<&str> = crate::command::NAMES.to_vec();
        assert_eq!(names, &serde_json::json!(expected), "{schema}");
    }
}

/// The error envelope's `error.type` for an HTTP status, as every face that answers in HTTP's
/// terms spells it (the server, and the in-process bindings that answer as it does).
pub fn error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    }
}

/// How a face answers a request that a storage failure stopped (a model's command is answered to
/// the model instead): the HTTP status and the words. Nothing was changed, but for a commit
/// whose outcome was lost, which says so.
pub fn storage_failure(e: &crate::error::Error) -> (u16, &'static str) {
    use crate::error::Error;
    match e {
        Error::Busy { .. } => (503, "the database is busy; nothing was changed, try again"),
        Error::DiskFull { .. } => (
            507,
            "the disk holding the database is full; nothing was changed. Deleting memories, redacting versions and deleting stores still work",
        ),
        Error::OutcomeUnknown { .. } => (
            500,
            "the connection to the database was lost during the commit; the change may or may not have been applied",
        ),
        _ => (500, "storage failure; nothing was changed"),
    }
}
