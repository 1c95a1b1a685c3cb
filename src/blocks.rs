//! Messages as the Messages API carries them: a command's output, and whole `tool_use` /
//! `tool_result` blocks, so an agent loop can pass blocks through memkv unchanged.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::command::Command;
use crate::messages;

/// What a command returns to the model: the `content` and `is_error` of a `tool_result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// The text the model reads.
    pub content: String,
    /// Whether the command failed (and changed nothing).
    pub is_error: bool,
}

/// The name of the memory tool in `tool_use` blocks.
pub const TOOL_NAME: &str = "memory";

/// A `tool_use` content block: `{"type":"tool_use","id":…,"name":"memory","input":{…}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "tool_use")]
pub struct ToolUse {
    /// The block id, echoed as `tool_use_id`.
    pub id: String,
    /// The tool name; memkv answers `memory`.
    pub name: String,
    /// The command object.
    pub input: Value,
}

/// A `tool_result` content block answering a [`ToolUse`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "tool_result")]
pub struct ToolResult {
    /// The id of the `tool_use` block answered.
    pub tool_use_id: String,
    /// The text the model reads.
    pub content: String,
    /// Whether the command failed.
    pub is_error: bool,
}

impl ToolResult {
    /// The result for the block `tool_use_id`.
    pub fn new(tool_use_id: impl Into<String>, output: ToolOutput) -> Self {
        ToolResult {
            tool_use_id: tool_use_id.into(),
            content: output.content,
            is_error: output.is_error,
        }
    }
}

/// The command of a `tool_use` block's `input`, or the model-facing refusal of it.
pub(crate) fn input_call(input: &Value) -> Result<Command, ToolOutput> {
    Command::from_json(input).map_err(|e| ToolOutput {
        content: e.message(),
        is_error: true,
    })
}

/// The command of a `tool_use` block, or the model-facing refusal of it (a block for another
/// tool is refused by name).
pub(crate) fn block_call(block: &ToolUse) -> Result<Command, ToolOutput> {
    if block.name == TOOL_NAME {
        input_call(&block.input)
    } else {
        Err(ToolOutput {
            content: messages::unknown_tool(&Value::String(block.name.clone()).to_string()),
            is_error: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_have_the_api_shape() {
        let r = ToolResult::new(
            "toolu_1",
            ToolOutput {
                content: "x".into(),
                is_error: false,
            },
        );
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"type":"tool_result","tool_use_id":"toolu_1","content":"x","is_error":false}"#
        );
        let u: ToolUse = serde_json::from_value(
            json!({"type": "tool_use", "id": "a", "name": "memory", "input": {"command": "view"}}),
        )
        .unwrap();
        assert_eq!(u.input, json!({"command": "view"}));
        assert_eq!(
            serde_json::to_value(&u).unwrap(),
            json!({"type": "tool_use", "id": "a", "name": "memory", "input": {"command": "view"}})
        );
    }
}
