//! memkv: a per-user, transactional store for Claude's memory tool (`memory_20250818`).
//!
//! The model sends six commands (`view`, `create`, `str_replace`, `insert`, `delete`, `rename`)
//! against a virtual `/memories` tree. memkv executes them against a [redb] database in which
//! every user's tree is its own key partition: no input reaches the host filesystem or another
//! user's data, every command is one transaction, and every string the model reads is the
//! byte-exact contract of the memory tool (docs/protocol.md in the repository).
//!
//! ```
//! use memkv::Database;
//! use serde_json::json;
//!
//! # fn main() -> Result<(), memkv::Error> {
//! let db = Database::in_memory()?; // or Database::open("memkv.redb")?
//! let alice = db.user("alice@example.com")?;
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
//! let bob = db.user("bob")?;
//! let out = bob.execute_json(&json!({"command": "view", "path": "/memories/notes.md"}))?;
//! assert!(out.is_error);
//! # Ok(())
//! # }
//! ```
//!
//! # Layout
//!
//! Imports flow downward through this list: a module may import the modules of its own item
//! and of the items below it, never those of an item above (`tests/it/architecture.rs` checks
//! this order, and that no two modules import each other, directly or round a loop):
//!
//! - `api`: the public face, each type's methods in one file ([`Database`], [`DatabaseBuilder`],
//!   [`MemoryStore`], [`OwnedMemoryStore`]), each a thin step into the module that does the
//!   work; [`protocol`]: `tool_use` / `tool_result` and JSON Lines, one answer for every face.
//!   `crates/memkv-cli` (the `memkv` binary) is a thin CLI over the library, as are the server
//!   (`crates/memkv-server`) and MCP (`crates/memkv-mcp`) faces.
//! - [`wire`]: the JSON objects the faces answer (an actor, a change-log entry, search
//!   results) as types, which describe themselves for OpenAPI with the `openapi` feature.
//! - [`search`]: search over a store's current memories from one snapshot (exact: a regular
//!   expression or a literal, line by line, as ripgrep matches; [`MemoryStore::search`]), and
//!   `memory_search`, memkv's second tool for the model ([`MemoryStore::answer_search`]).
//! - `stores`, `memories`, `versions`: the memory-stores API's stores, memories and versions;
//!   `admin`: users, check, expiry, pruning and operator reads; `backup`: export, import, and
//!   plain-directory migration ([`crate::Database::export`] into an [`ExportFile`] or any writer,
//!   [`crate::Database::import_from`] an [`ImportSource`], [`crate::Database::import_dir`],
//!   [`crate::Database::export_dir`]); `migrate` upgrades older formats on open; `check` verifies
//!   every invariant; `webhooks`: the endpoints the change log is delivered to, and how far
//!   each has got ([`crate::Database::add_webhook`]; the deliveries are `memkv serve`'s);
//!   [`keys`]: the API keys the server checks requests against ([`crate::Database::add_key`]);
//!   `settings`: each store's own quotas, time-to-live, retention and secrets policy over the
//!   database's defaults ([`crate::Database::update_store_settings`]).
//! - `pipeline`: the one path of every write: group commit (concurrent writers, blocking or
//!   async, share transactions and flushes), the transaction wrapper that writes the change
//!   log's entries before each commit and hands the committed changes to the commit hooks
//!   after it (and wakes [`CommitSignal`]s), and the `Engine` every module above works on (the
//!   backend, the policies, the clock, the queue).
//! - `exec` and `tree`: the commands' semantics and the directory index with its aggregates,
//!   written once over the seam; `access`: access times noted by views, written with the next
//!   writes.
//! - `changes`: the change log, an outbox written in the transaction of each change, numbered
//!   in commit order across the database ([`crate::Database::changes`], [`ChangeEntry`]),
//!   scrubbed by redactions, trimmed by its [`ChangeRetention`].
//! - [`command`]: the six commands and their parsing from JSON; `blocks`: the tool's blocks;
//!   `messages`: every model-facing string, and nothing else; `user_id`: the rules for user ids.
//! - `limits` and `secrets`: what every write is checked against.
//! - `history`: ids, versions, retention, and (`history::change`) what a committed write changed
//!   ([`Change`]), as [`CommitHook`]s see it.
//! - `layout`: keys and records as bytes; [`storage`]: the narrow transactional seam;
//!   [`storage::redb`] is the embedded default and holds every table definition, its
//!   [arrangement version](storage::redb::REDB_FORMAT), the journal through which a file's
//!   commits become durable with one append and flush, and the disk reserve that lets writes
//!   which free space commit on a full disk; `postgres` (feature `postgres`) the same in
//!   PostgreSQL; the logical layout version is `layout::LAYOUT_VERSION`.
//! - `error`: the library's errors; [`path`]: model input to a validated [`MemoryPath`] (pure,
//!   no I/O); [`lines`]: reading lines with a length cap; [`json`]: JSON that refuses duplicate
//!   keys; `time`: timestamps as text and durations as milliseconds.
//!
//! `docs/design.md` describes the storage format and the reasoning; `BENCHMARKS.md` the
//! measured performance.
//!
//! [redb]: https://docs.rs/redb

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod access;
mod admin;
mod api;
mod backup;
mod blocks;
mod changes;
mod check;
pub mod command;
mod error;
mod exec;
mod history;
pub mod json;
pub mod keys;
mod layout;
mod limits;
pub mod lines;
mod memories;
mod messages;
mod migrate;
pub mod path;
mod pipeline;
pub mod protocol;
pub mod search;
mod secrets;
mod settings;
pub mod storage;
pub mod stores;
mod time;
mod tree;
mod user_id;
mod versions;
mod webhooks;
pub mod wire;

/// The README's Rust examples run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// So do those of docs/library.md, where the README's library section leads.
#[doc = include_str!("../docs/library.md")]
#[cfg(doctest)]
pub struct LibraryDocDoctests;

pub use api::{
    Database, DatabaseBuilder, ExpiredFile, FileInfo, MAX_USER_ID_BYTES, MemoryStore,
    OwnedMemoryStore, PrunedHistory, StoreAdmin, UserSummary,
};

/// The old name of [`Database`].
#[deprecated(
    since = "0.1.0",
    note = "renamed `Database`: the handle of a whole database"
)]
pub type Store = Database;
/// The old name of [`DatabaseBuilder`].
#[deprecated(since = "0.1.0", note = "renamed `DatabaseBuilder`")]
pub type StoreBuilder = DatabaseBuilder;
/// The old name of [`MemoryStore`].
#[deprecated(
    since = "0.1.0",
    note = "renamed `MemoryStore`: one user id's memory store"
)]
pub type UserHandle<'a> = MemoryStore<'a>;
/// The old name of [`OwnedMemoryStore`].
#[deprecated(since = "0.1.0", note = "renamed `OwnedMemoryStore`")]
pub type OwnedUserHandle = OwnedMemoryStore;
pub use backup::{
    Conflict, EXPORT_FORMAT, EXPORT_VERSION, ExportFile, ImportSource, Progress, Skipped, Summary,
};
pub use blocks::{TOOL_NAME, ToolOutput, ToolResult, ToolUse};
pub use changes::{ChangeEntry, ChangePage, ChangeRetention};
pub use command::{Command, InputError, ViewRange};
pub use error::{DatabaseError, Error};
pub use history::change::{Change, ChangeKind, CommitHook};
pub use history::{
    Actor, ApiRefusal, HistoryTotals, InvalidId, Memory, MemoryId, Operation, Page, Redaction,
    Retention, StoreInfo, Version, VersionId,
};
pub use keys::{ApiKey, ImportedKey, KeyScope, MAX_KEYS, NewKey};
pub use layout::LAYOUT_VERSION;
pub use limits::{Expiry, Limits};
pub use memories::ListItem;
pub use path::{MemoryPath, PathError};
pub use pipeline::CommitSignal;
pub use protocol::{InvalidMessage, Message, Response};
pub use search::tool::{
    SEARCH_TOOL_DESCRIPTION, SEARCH_TOOL_NAME, search_request, search_tool_schema,
};
pub use search::{SearchHit, SearchLine, SearchMode, SearchRequest, SearchResults};
pub use secrets::SecretPolicy;
pub use settings::{EffectiveSettings, FIELDS as SETTINGS, StoreSettings};
pub use time::{parse_rfc3339, rfc3339_ms, utc};
pub use versions::VersionFilter;
pub use webhooks::{Attempt as WebhookAttempt, MAX_WEBHOOKS, Webhook, WebhookFormat};
