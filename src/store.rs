//! The public face of the crate: a [`Store`] and per-user [`UserHandle`]s.

use std::ops::ControlFlow;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::blocks::{TOOL_NAME, ToolOutput, ToolResult, ToolUse};
use crate::command::Command;
use crate::error::Error;
use crate::exec;
use crate::layout::{Node, Totals};
use crate::limits::Limits;
use crate::messages;
use crate::path::MemoryPath;
use crate::storage::redb::RedbBackend;
use crate::storage::{Backend, ReadTxn, Space};
use crate::tree::TreeRead;

/// Longest accepted user id, in UTF-8 bytes.
pub const MAX_USER_ID_BYTES: usize = 256;

/// Configures a [`Store`]. Every limit defaults to PROTOCOL.md's value ([`Limits::DEFAULT`]).
#[derive(Debug, Clone, Default)]
pub struct StoreBuilder {
    limits: Limits,
}

impl StoreBuilder {
    /// All limits at once. Default = [`Limits::DEFAULT`].
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Largest file in bytes. Default = 102,400.
    pub fn max_file_bytes(mut self, n: u64) -> Self {
        self.limits.max_file_bytes = n;
        self
    }

    /// Most lines per file. Default = 999,999.
    pub fn max_lines(mut self, n: u64) -> Self {
        self.limits.max_lines = n;
        self
    }

    /// Most files per user. Default = 10,000.
    pub fn max_files(mut self, n: u64) -> Self {
        self.limits.max_files = n;
        self
    }

    /// Most bytes per user. Default = 67,108,864 (64 MiB).
    pub fn max_bytes(mut self, n: u64) -> Self {
        self.limits.max_bytes = n;
        self
    }

    /// Longest `view` output in characters. Default = 16,000.
    pub fn view_max_chars(mut self, n: usize) -> Self {
        self.limits.view_max_chars = n;
        self
    }

    /// Opens the redb database at `path`, creating it if it does not exist.
    ///
    /// # Errors
    /// [`Error::Locked`] if another process has it open, [`Error::UnsupportedFormat`] or
    /// [`Error::NotMemkv`] if it is not a database this build can use, [`Error::Storage`] on I/O
    /// failure.
    pub fn open(self, path: impl AsRef<Path>) -> Result<Store, Error> {
        Ok(self.backend(RedbBackend::create(path.as_ref())?))
    }

    /// Opens an existing redb database; [`Error::NotFound`] if there is none at `path`.
    pub fn open_existing(self, path: impl AsRef<Path>) -> Result<Store, Error> {
        Ok(self.backend(RedbBackend::open(path.as_ref())?))
    }

    /// A store in memory, gone when dropped.
    pub fn in_memory(self) -> Result<Store, Error> {
        Ok(self.backend(RedbBackend::in_memory()?))
    }

    /// A store over any [`Backend`].
    pub fn backend<B: Backend>(self, backend: B) -> Store<B> {
        Store {
            backend,
            limits: self.limits,
        }
    }
}

/// A memory store: many users' `/memories` trees in one database.
///
/// `Store` is `Sync`: share it between threads by reference or in an `Arc`. Reads run in
/// parallel; writes are serialized by the backend, one transaction per command.
#[derive(Debug)]
pub struct Store<B = RedbBackend> {
    backend: B,
    limits: Limits,
}

/// The answer to one JSON message (see [`UserHandle::respond`]); serializes as the bare
/// object or the block, with keys in the order of the Messages API.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(untagged)]
pub enum Response {
    /// The answer to a bare command object: `{"content", "is_error"}`.
    Output(ToolOutput),
    /// The answer to a `tool_use` block: a `tool_result` block.
    Result(ToolResult),
}

/// One user's share of a store, as listed by [`Store::users`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSummary {
    /// The user id.
    pub user: String,
    /// Number of files.
    pub files: u64,
    /// Bytes of those files.
    pub bytes: u64,
}

/// One file of a user's tree, as listed by [`UserHandle::files`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// Canonical path.
    pub path: MemoryPath,
    /// Length in bytes.
    pub size: u64,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// Last content change, milliseconds since the Unix epoch.
    pub modified_ms: i64,
}

impl Store {
    /// A builder with PROTOCOL.md's default limits.
    pub fn builder() -> StoreBuilder {
        StoreBuilder::default()
    }

    /// Opens (or creates) the redb database at `path` with default limits.
    pub fn open(path: impl AsRef<Path>) -> Result<Store, Error> {
        Self::builder().open(path)
    }

    /// An in-memory store with default limits.
    pub fn in_memory() -> Result<Store, Error> {
        Self::builder().in_memory()
    }
}

impl<B: Backend> Store<B> {
    /// The limits every command is checked against.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The handle of user `id`. Any non-empty string of at most 256 bytes without control
    /// characters is a user id (`alice@example.com`, `.`, `team/a` …); ids are compared exactly.
    ///
    /// # Errors
    /// [`Error::InvalidUser`] for an empty, over-long or control-character id.
    pub fn user(&self, id: &str) -> Result<UserHandle<'_, B>, Error> {
        let reason = if id.is_empty() {
            Some("must not be empty")
        } else if id.len() > MAX_USER_ID_BYTES {
            Some("longer than 256 bytes")
        } else if id.chars().any(char::is_control) {
            Some("contains a control character")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(Error::InvalidUser {
                user: id.to_owned(),
                reason,
            });
        }
        Ok(UserHandle {
            store: self,
            id: id.to_owned(),
        })
    }

    /// Every user with at least one file, with their totals, ordered by id.
    pub fn users(&self) -> Result<Vec<UserSummary>, Error> {
        let txn = self.backend.begin_read()?;
        let mut ids = Vec::new();
        txn.users(Space::Totals, &mut |u| {
            ids.push(u.to_owned());
            Ok(ControlFlow::Continue(()))
        })?;
        // Backends order users by their key encoding; operators expect the ids' own order.
        ids.sort();
        ids.into_iter()
            .map(|user| {
                let Totals { files, bytes } = TreeRead::new(&txn, &user).totals()?;
                Ok(UserSummary { user, files, bytes })
            })
            .collect()
    }
}

/// One user's `/memories`. Cheap to create; borrow of the [`Store`].
#[derive(Debug)]
pub struct UserHandle<'s, B = RedbBackend> {
    store: &'s Store<B>,
    id: String,
}

impl<B: Backend> UserHandle<'_, B> {
    /// The user id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Runs one command in its own transaction.
    ///
    /// Whatever the model got wrong comes back as a [`ToolOutput`] with `is_error: true`, and
    /// nothing is changed. `Err` means the storage failed; nothing was changed then either.
    pub fn execute(&self, command: &Command) -> Result<ToolOutput, Error> {
        exec::execute(
            &self.store.backend,
            &self.id,
            &self.store.limits,
            command,
            now_ms(),
        )
    }

    /// Parses and runs the `input` object of a `tool_use` block.
    pub fn execute_json(&self, input: &Value) -> Result<ToolOutput, Error> {
        match Command::from_json(input) {
            Ok(command) => self.execute(&command),
            Err(e) => Ok(ToolOutput {
                content: e.message(),
                is_error: true,
            }),
        }
    }

    /// Answers a whole `tool_use` block. A block for another tool gets an error result.
    pub fn handle_tool_use(&self, block: &ToolUse) -> Result<ToolResult, Error> {
        let output = if block.name == TOOL_NAME {
            self.execute_json(&block.input)?
        } else {
            ToolOutput {
                content: messages::unknown_tool(&Value::String(block.name.clone()).to_string()),
                is_error: true,
            }
        };
        Ok(ToolResult::new(block.id.clone(), output))
    }

    /// Answers one JSON message: a `tool_use` block gets a [`ToolResult`], anything else is taken
    /// as a bare command object and gets a [`ToolOutput`].
    pub fn respond(&self, message: &Value) -> Result<Response, Error> {
        if message.get("type").and_then(Value::as_str) == Some("tool_use") {
            let block = ToolUse {
                id: string_field(message, "id"),
                name: string_field(message, "name"),
                input: message.get("input").cloned().unwrap_or(Value::Null),
            };
            return Ok(Response::Result(self.handle_tool_use(&block)?));
        }
        Ok(Response::Output(self.execute_json(message)?))
    }

    /// Answers one line of a JSON Lines stream with one line of JSON (no newline).
    ///
    /// A line that is not JSON gets the `Error: Invalid JSON: …` output. When the storage fails
    /// the answer says so to the model (nothing was changed) and the error is returned beside
    /// it, for the operator.
    pub fn respond_line(&self, line: &str) -> (String, Option<Error>) {
        let message: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                let output = ToolOutput {
                    content: messages::invalid_json(&e.to_string()),
                    is_error: true,
                };
                return (to_line(&output), None);
            }
        };
        match self.respond(&message) {
            Ok(answer) => (to_line(&answer), None),
            Err(error) => {
                let output = ToolOutput {
                    content: messages::storage_failure(),
                    is_error: true,
                };
                let answer = if message.get("type").and_then(Value::as_str) == Some("tool_use") {
                    to_line(&ToolResult::new(string_field(&message, "id"), output))
                } else {
                    to_line(&output)
                };
                (answer, Some(error))
            }
        }
    }

    /// The user's file count and bytes.
    pub fn totals(&self) -> Result<(u64, u64), Error> {
        let txn = self.store.backend.begin_read()?;
        let t = TreeRead::new(&txn, &self.id).totals()?;
        Ok((t.files, t.bytes))
    }

    /// Every file of the user, in path order (for operators; the model uses `view`).
    pub fn files(&self) -> Result<Vec<FileInfo>, Error> {
        let txn = self.store.backend.begin_read()?;
        let mut out = Vec::new();
        TreeRead::new(&txn, &self.id).files(&mut |path, meta| {
            out.push(FileInfo {
                path,
                size: meta.size,
                created_ms: meta.created_ms,
                modified_ms: meta.modified_ms,
            });
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(out)
    }

    /// The content of the file at `path` (for operators), `None` if there is no such file.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] if `path` breaks the path rules.
    pub fn read_file(&self, path: &str) -> Result<Option<String>, Error> {
        let parsed = MemoryPath::parse(path).map_err(|reason| Error::InvalidPath {
            path: path.to_owned(),
            reason,
        })?;
        let txn = self.store.backend.begin_read()?;
        let tree = TreeRead::new(&txn, &self.id);
        match tree.node(&parsed)? {
            Some(Node::File(_)) => tree.content(&parsed),
            _ => Ok(None),
        }
    }
}

fn to_line(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("plain structs serialize")
}

fn string_field(value: &Value, field: &str) -> String {
    match value.get(field) {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
