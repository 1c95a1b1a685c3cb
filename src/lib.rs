//! memkv: a per-user, transactional store for Claude's memory tool (`memory_20250818`).
//!
//! The model sends six commands (`view`, `create`, `str_replace`, `insert`, `delete`, `rename`)
//! against a virtual `/memories` tree. memkv executes them against a [redb] database in which
//! every user's tree is its own key partition: no input reaches the host filesystem or another
//! user's data, every command is one transaction, and every string the model reads is the
//! byte-exact contract of `PROTOCOL.md`.
//!
//! ```
//! use memkv::Store;
//! use serde_json::json;
//!
//! # fn main() -> Result<(), memkv::Error> {
//! let store = Store::in_memory()?; // or Store::open("memkv.redb")?
//! let alice = store.user("alice@example.com")?;
//!
//! let out = alice.execute_json(&json!({
//!     "command": "create",
//!     "path": "/memories/notes.md",
//!     "file_text": "Prefers tabs.\n",
//! }))?;
//! assert_eq!(out.content, "File created successfully at: /memories/notes.md");
//!
//! let out = alice.execute_json(&json!({"command": "view", "path": "/memories"}))?;
//! assert!(!out.is_error);
//! assert!(out.content.ends_with("14B\t/memories\n14B\t/memories/notes.md"));
//!
//! // Another user sees nothing of alice's.
//! let bob = store.user("bob")?;
//! let out = bob.execute_json(&json!({"command": "view", "path": "/memories/notes.md"}))?;
//! assert!(out.is_error);
//! # Ok(())
//! # }
//! ```
//!
//! # Layout
//!
//! - [`path`]: model input to a validated [`MemoryPath`] (pure, no I/O).
//! - [`command`]: the six commands and their parsing from JSON.
//! - `messages`: every model-facing string, and nothing else.
//! - `exec` and `tree`: the commands' semantics and the directory index with its aggregates,
//!   written once over the seam; `limits` and `secrets`: what every write is checked against.
//! - `pipeline`: the one path of every write: group commit (concurrent writers, blocking or
//!   async, share transactions and flushes), the transaction wrapper, and the commit hooks;
//!   `change`: what a committed write changed ([`Change`]), as [`CommitHook`]s see it;
//!   `access`: access times noted by views, written with the next writes.
//! - [`storage`]: the narrow transactional seam; [`storage::redb`] is the embedded default and
//!   holds every table definition, its [arrangement version](storage::redb::REDB_FORMAT) and
//!   the disk reserve that lets writes which free space commit on a full disk;
//!   `postgres` (feature `postgres`) the same in PostgreSQL; the logical layout version is
//!   `layout::LAYOUT_VERSION`;
//!   `migrate` upgrades older formats on open; `check` verifies every invariant.
//! - `backup`: export, import, and plain-directory migration ([`Store::export`] into an
//!   [`ExportFile`] or any writer, [`Store::import_from`] an [`ImportSource`],
//!   [`Store::import_dir`], [`Store::export_dir`]).
//! - [`Store`] / [`UserHandle`]: the API; `crates/memkv-cli` (the `memkv` binary) is a thin CLI
//!   over it, as are the server (`crates/memkv-server`) and MCP (`crates/memkv-mcp`) faces.
//!
//! `docs/design.md` describes the storage format and the reasoning; `BENCHMARKS.md` the
//! measured performance.
//!
//! [redb]: https://docs.rs/redb

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod access;
mod backup;
mod blocks;
mod change;
mod check;
pub mod command;
mod error;
mod exec;
mod history;
pub mod json;
mod layout;
mod limits;
pub mod lines;
mod memories;
mod messages;
mod migrate;
pub mod path;
mod pipeline;
pub mod protocol;
mod secrets;
pub mod storage;
mod store;
mod stores;
mod time;
mod tree;
mod versions;

/// The README's Rust examples run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub use backup::{
    Conflict, EXPORT_FORMAT, EXPORT_VERSION, ExportFile, ImportSource, Progress, Skipped, Summary,
};
pub use blocks::{TOOL_NAME, ToolOutput, ToolResult, ToolUse};
pub use change::{Change, ChangeKind, CommitHook};
pub use command::{Command, InputError, ViewRange};
pub use error::{DatabaseError, Error};
pub use history::{
    Actor, ApiRefusal, HistoryTotals, InvalidId, Memory, MemoryId, Operation, Page, Redaction,
    Retention, StoreInfo, Version, VersionId,
};
pub use limits::{Expiry, Limits};
pub use memories::ListItem;
pub use path::{MemoryPath, PathError};
pub use protocol::{InvalidMessage, Message, Response};
pub use secrets::SecretPolicy;
pub use store::{
    ExpiredFile, FileInfo, MAX_USER_ID_BYTES, OwnedUserHandle, PrunedHistory, Store, StoreBuilder,
    UserHandle, UserSummary,
};
pub use time::utc;
pub use versions::VersionFilter;
