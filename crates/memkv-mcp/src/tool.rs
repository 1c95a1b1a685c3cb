//! The MCP tools: `memory` (the six commands of `memory_20250818`, as the model knows them) and
//! `memory_search` (memkv's own, defined by the library); the shape of their results.

use std::sync::Arc;

use memkv::ToolOutput;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::json;

/// The tool's name, the same as in the Messages API.
pub const NAME: &str = memkv::TOOL_NAME;

const DESCRIPTION: &str = "Your persistent memory: a directory of files under /memories that \
outlives this conversation. Check it before starting a task (view /memories) and record \
progress, decisions and what you learn as you go, since your context may be reset at any time. \
Commands: view (a directory listing, or a file with line numbers, optionally a view_range), \
create (a new file with file_text), str_replace (replace one unique occurrence of old_str with \
new_str), insert (insert_text after line insert_line; 0 is the top), delete (a file or a \
directory) and rename (old_path to new_path). Every path starts with /memories.";

/// The `memory` tool as `tools/list` describes it.
pub fn definition() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "enum": ["view", "create", "str_replace", "insert", "delete", "rename"],
                "description": "The operation: view, create, str_replace, insert, delete or rename."
            },
            "path": {
                "type": "string",
                "description": "view, create, str_replace, insert, delete: the file or directory, starting with /memories (e.g. /memories/notes.md)."
            },
            "view_range": {
                "type": "array",
                "items": {"type": "integer"},
                "minItems": 2,
                "maxItems": 2,
                "description": "view, optional: [start_line, end_line] of a file, 1-based and inclusive; end_line -1 reads to the end."
            },
            "file_text": {
                "type": "string",
                "description": "create: the content of the new file."
            },
            "old_str": {
                "type": "string",
                "description": "str_replace: the text to replace; it must appear exactly once in the file."
            },
            "new_str": {
                "type": "string",
                "description": "str_replace: the replacement text (omit it to delete old_str)."
            },
            "insert_line": {
                "type": "integer",
                "description": "insert: the line after which insert_text goes; 0 inserts at the top."
            },
            "insert_text": {
                "type": "string",
                "description": "insert: the text to insert."
            },
            "old_path": {
                "type": "string",
                "description": "rename: the file or directory to move."
            },
            "new_path": {
                "type": "string",
                "description": "rename: its new path."
            }
        },
        "required": ["command"]
    });
    let serde_json::Value::Object(schema) = schema else {
        unreachable!("a JSON object literal")
    };
    let annotations = ToolAnnotations::with_title("Memory")
        .read_only(false)
        .destructive(true)
        .idempotent(false)
        .open_world(false);
    Tool::new(NAME, DESCRIPTION, Arc::new(schema) as Arc<JsonObject>).with_annotations(annotations)
}

/// `memory_search`, memkv's own search tool (the library defines it: `memkv::search_tool_schema`),
/// as `tools/list` describes it.
pub fn search_definition() -> Tool {
    let serde_json::Value::Object(schema) = memkv::search_tool_schema() else {
        unreachable!("the schema is a JSON object")
    };
    let annotations = ToolAnnotations::with_title("Search memory")
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false);
    Tool::new(
        memkv::SEARCH_TOOL_NAME,
        memkv::SEARCH_TOOL_DESCRIPTION,
        Arc::new(schema) as Arc<JsonObject>,
    )
    .with_annotations(annotations)
}

/// memkv's answer as an MCP tool result: its exact content as one text item, `isError` set on
/// a model error.
pub fn result(output: ToolOutput) -> CallToolResult {
    let content = vec![ContentBlock::text(output.content)];
    if output.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_names_the_six_commands_and_every_field() {
        let tool = definition();
        assert_eq!(tool.name, "memory");
        let schema = serde_json::Value::Object((*tool.input_schema).clone());
        assert_eq!(
            schema["properties"]["command"]["enum"],
            json!([
                "view",
                "create",
                "str_replace",
                "insert",
                "delete",
                "rename"
            ])
        );
        assert_eq!(schema["required"], json!(["command"]));
        let fields: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        for field in [
            "path",
            "view_range",
            "file_text",
            "old_str",
            "new_str",
            "insert_line",
            "insert_text",
            "old_path",
            "new_path",
        ] {
            assert!(fields.contains(&field), "{field}");
        }
    }

    #[test]
    fn results_carry_the_exact_text_and_the_error_flag() {
        for is_error in [false, true] {
            let r = result(ToolOutput {
                content: "a\tb\n".into(),
                is_error,
            });
            assert_eq!(
                serde_json::to_value(&r).unwrap()["content"],
                json!([{"type": "text", "text": "a\tb\n"}])
            );
            assert_eq!(r.is_error, Some(is_error));
        }
    }
}
