//! The six commands of `memory_20250818`, and their parsing from a `tool_use` input.
//!
//! Parsing follows PROTOCOL.md's "Malformed input" rules exactly: the command name first, then
//! each field in the SDK's order, each first for presence and then for its type. Paths are kept
//! as the model sent them; [`crate::path`] validates them when the command runs, because the
//! messages quote the raw spelling.

use serde_json::Value;

use crate::messages;

/// One memory-tool command, as the model sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Command {
    /// Show a directory listing or a file with line numbers.
    View {
        /// Path as sent.
        path: String,
        /// Optional line range (ignored for directories).
        view_range: Option<ViewRange>,
    },
    /// Create a new file; fails if the path exists.
    Create {
        /// Path as sent.
        path: String,
        /// The whole content.
        file_text: String,
    },
    /// Replace the one occurrence of `old_str`.
    StrReplace {
        /// Path as sent.
        path: String,
        /// Text to find; must occur exactly once.
        old_str: String,
        /// Replacement; `None` deletes the match.
        new_str: Option<String>,
    },
    /// Insert text after a line.
    Insert {
        /// Path as sent.
        path: String,
        /// Line after which to insert; `0` is the top.
        insert_line: i64,
        /// Text to insert; one trailing `\n` is dropped.
        insert_text: String,
    },
    /// Delete a file or a whole directory.
    Delete {
        /// Path as sent.
        path: String,
    },
    /// Move a file or a whole directory.
    Rename {
        /// Source path as sent.
        old_path: String,
        /// Destination path as sent.
        new_path: String,
    },
}

/// A `view_range` as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewRange {
    /// `[start, end]`, 1-based and inclusive; `end == -1` means to the last line.
    Lines(i64, i64),
    /// Not a list of two integers. Reported against the file's line count, as PROTOCOL.md asks.
    Malformed,
}

/// Input that is not a well-formed command; [`InputError::message`] is what the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// `command` missing or not one of the six; holds the field as JSON (`null` when missing).
    #[error("unknown command {0}")]
    UnknownCommand(String),
    /// A required field missing or `null`.
    #[error("missing required parameter `{field}` for command `{command}`")]
    Missing {
        /// Field name.
        field: &'static str,
        /// Command name.
        command: &'static str,
    },
    /// A field of the wrong JSON type.
    #[error("invalid parameter `{field}` for command `{command}`: expected {expected}")]
    WrongType {
        /// Field name.
        field: &'static str,
        /// Command name.
        command: &'static str,
        /// `string` or `integer`.
        expected: &'static str,
    },
}

impl InputError {
    /// The byte-exact message for the model.
    pub fn message(&self) -> String {
        match self {
            InputError::UnknownCommand(json) => messages::unknown_command(json),
            InputError::Missing { field, command } => messages::missing_parameter(field, command),
            InputError::WrongType {
                field,
                command,
                expected,
            } => messages::invalid_parameter(field, command, expected),
        }
    }
}

impl Command {
    /// The command's name as the model spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Command::View { .. } => "view",
            Command::Create { .. } => "create",
            Command::StrReplace { .. } => "str_replace",
            Command::Insert { .. } => "insert",
            Command::Delete { .. } => "delete",
            Command::Rename { .. } => "rename",
        }
    }

    /// Whether the command only reads.
    pub fn is_read_only(&self) -> bool {
        matches!(self, Command::View { .. })
    }

    /// Whether the command frees space or needs little more than it frees (`delete`, `rename`):
    /// on a full disk it may use the disk reserve ([`crate::storage::Backend::write_freeing`]).
    pub fn frees_space(&self) -> bool {
        matches!(self, Command::Delete { .. } | Command::Rename { .. })
    }

    /// Parses the `input` object of a `tool_use` block. Unknown extra fields are ignored.
    ///
    /// # Errors
    /// The first malformed-input rule of PROTOCOL.md that `input` breaks.
    pub fn from_json(input: &Value) -> Result<Command, InputError> {
        let command = input.get("command");
        let name = match command {
            Some(Value::String(s)) => s.as_str(),
            other => return Err(unknown(other)),
        };
        let fields = Fields {
            input,
            command: name_static(name).ok_or_else(|| unknown(command))?,
        };
        Ok(match fields.command {
            "view" => Command::View {
                path: fields.string("path")?,
                view_range: view_range(input.get("view_range")),
            },
            "create" => Command::Create {
                path: fields.string("path")?,
                file_text: fields.string("file_text")?,
            },
            "str_replace" => Command::StrReplace {
                path: fields.string("path")?,
                old_str: fields.string("old_str")?,
                new_str: fields.optional_string("new_str")?,
            },
            "insert" => Command::Insert {
                path: fields.string("path")?,
                insert_line: fields.integer("insert_line")?,
                insert_text: fields.string("insert_text")?,
            },
            "delete" => Command::Delete {
                path: fields.string("path")?,
            },
            _ => Command::Rename {
                old_path: fields.string("old_path")?,
                new_path: fields.string("new_path")?,
            },
        })
    }
}

fn unknown(command: Option<&Value>) -> InputError {
    InputError::UnknownCommand(command.unwrap_or(&Value::Null).to_string())
}

/// The commands' names, as the model spells them.
pub(crate) const NAMES: [&str; 6] = [
    "view",
    "create",
    "str_replace",
    "insert",
    "delete",
    "rename",
];

fn name_static(name: &str) -> Option<&'static str> {
    NAMES.into_iter().find(|n| *n == name)
}

fn view_range(value: Option<&Value>) -> Option<ViewRange> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) if items.len() == 2 => {
            match (items[0].as_i64(), items[1].as_i64()) {
                (Some(start), Some(end)) => Some(ViewRange::Lines(start, end)),
                _ => Some(ViewRange::Malformed),
            }
        }
        Some(_) => Some(ViewRange::Malformed),
    }
}

struct Fields<'a> {
    input: &'a Value,
    command: &'static str,
}

impl Fields<'_> {
    fn present(&self, field: &'static str) -> Result<&Value, InputError> {
        match self.input.get(field) {
            None | Some(Value::Null) => Err(InputError::Missing {
                field,
                command: self.command,
            }),
            Some(v) => Ok(v),
        }
    }

    fn wrong_type(&self, field: &'static str, expected: &'static str) -> InputError {
        InputError::WrongType {
            field,
            command: self.command,
            expected,
        }
    }

    fn string(&self, field: &'static str) -> Result<String, InputError> {
        let value = self.present(field)?;
        value
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| self.wrong_type(field, "string"))
    }

    fn optional_string(&self, field: &'static str) -> Result<Option<String>, InputError> {
        match self.input.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.wrong_type(field, "string")),
        }
    }

    fn integer(&self, field: &'static str) -> Result<i64, InputError> {
        let value = self.present(field)?;
        value
            .as_i64()
            .ok_or_else(|| self.wrong_type(field, "integer"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(v: Value) -> String {
        Command::from_json(&v).unwrap_err().message()
    }

    #[test]
    fn unknown_commands_are_quoted_as_json() {
        assert_eq!(msg(json!({})), "Error: Unknown command: null");
        assert_eq!(
            msg(json!({"command": null})),
            "Error: Unknown command: null"
        );
        assert_eq!(
            msg(json!({"command": "list"})),
            "Error: Unknown command: \"list\""
        );
        assert_eq!(msg(json!({"command": 7})), "Error: Unknown command: 7");
        assert_eq!(msg(json!("view")), "Error: Unknown command: null");
    }

    #[test]
    fn fields_are_checked_in_order_presence_then_type() {
        assert_eq!(
            msg(json!({"command": "create", "file_text": 3})),
            "Error: Missing required parameter `path` for command `create`"
        );
        assert_eq!(
            msg(json!({"command": "create", "path": 1})),
            "Error: Invalid parameter `path` for command `create`: expected string"
        );
        assert_eq!(
            msg(json!({"command": "create", "path": "/memories/a", "file_text": null})),
            "Error: Missing required parameter `file_text` for command `create`"
        );
        assert_eq!(
            msg(json!({"command": "insert", "path": "/memories/a", "insert_line": "1"})),
            "Error: Invalid parameter `insert_line` for command `insert`: expected integer"
        );
        assert_eq!(
            msg(
                json!({"command": "insert", "path": "/memories/a", "insert_line": 1.5, "insert_text": "x"})
            ),
            "Error: Invalid parameter `insert_line` for command `insert`: expected integer"
        );
        assert_eq!(
            msg(
                json!({"command": "str_replace", "path": "/memories/a", "old_str": "x", "new_str": 2})
            ),
            "Error: Invalid parameter `new_str` for command `str_replace`: expected string"
        );
        assert_eq!(
            msg(json!({"command": "rename", "old_path": "/memories/a"})),
            "Error: Missing required parameter `new_path` for command `rename`"
        );
    }

    #[test]
    fn parses_every_command() {
        let c = Command::from_json(
            &json!({"command": "str_replace", "path": "/memories/a", "old_str": "x", "extra": 1}),
        )
        .unwrap();
        assert_eq!(
            c,
            Command::StrReplace {
                path: "/memories/a".into(),
                old_str: "x".into(),
                new_str: None
            }
        );
        let c = Command::from_json(
            &json!({"command": "view", "path": "/memories", "view_range": [1, -1]}),
        )
        .unwrap();
        assert_eq!(
            c,
            Command::View {
                path: "/memories".into(),
                view_range: Some(ViewRange::Lines(1, -1))
            }
        );
        for bad in [
            json!([1]),
            json!("1,2"),
            json!([1, 2, 3]),
            json!([1.0, 2]),
            json!({}),
        ] {
            let c = Command::from_json(
                &json!({"command": "view", "path": "/memories", "view_range": bad}),
            )
            .unwrap();
            assert_eq!(
                c,
                Command::View {
                    path: "/memories".into(),
                    view_range: Some(ViewRange::Malformed)
                }
            );
        }
        let c = Command::from_json(&json!({"command": "insert", "path": "/memories/a", "insert_line": -3, "insert_text": ""})).unwrap();
        assert_eq!(c.name(), "insert");
        let c = Command::from_json(&json!({"command": "delete", "path": "/memories/a"})).unwrap();
        assert!(!c.is_read_only());
    }
}
