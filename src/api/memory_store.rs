//! One user's `/memories`: [`MemoryStore`] (a borrow of the [`Database`]) and [`OwnedMemoryStore`]
//! (an `Arc` of it, for async callers), and the commands they run.

use std::sync::Arc;

use serde_json::Value;

use super::{Database, FileInfo};
use crate::blocks::ToolOutput;
use crate::blocks::{ToolResult, ToolUse};
use crate::changes::ChangePage;
use crate::command::Command;
use crate::error::Error;
use crate::history::Actor;
use crate::history::{ApiRefusal, Memory, MemoryId, Page, Version, VersionId};
use crate::memories::ListItem;
use crate::pipeline::Scope;
use crate::pipeline::jobs::ToolJob;
use crate::search::{SearchRequest, SearchResults};
use crate::versions::VersionFilter;

/// One user's `/memories`. Cheap to create; borrow of the [`Database`].
#[derive(Debug, Clone)]
pub struct MemoryStore<'s> {
    pub(crate) store: &'s Database,
    pub(crate) id: Arc<str>,
    /// Who the changes made through this handle are recorded as made by.
    pub(crate) actor: Option<Actor>,
    /// The memory tool's writes are answered with the read-only error (a read-only key).
    pub(crate) read_only: bool,
}

/// One user's `/memories`, owning a share of the store: `'static`, `Send` and cheap to clone,
/// for async tasks and worker threads. [`Self::handle`] gives the borrowed [`MemoryStore`] with
/// every command method.
#[derive(Debug)]
pub struct OwnedMemoryStore {
    pub(super) store: Arc<Database>,
    pub(super) id: Arc<str>,
    pub(super) actor: Option<Actor>,
    pub(super) read_only: bool,
}

impl Clone for OwnedMemoryStore {
    fn clone(&self) -> Self {
        OwnedMemoryStore {
            store: Arc::clone(&self.store),
            id: Arc::clone(&self.id),
            actor: self.actor.clone(),
            read_only: self.read_only,
        }
    }
}

impl OwnedMemoryStore {
    /// The user id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The database this memory store is in.
    pub fn database(&self) -> &Arc<Database> {
        &self.store
    }

    /// The old name of [`Self::database`].
    #[deprecated(since = "0.1.0", note = "renamed `database`")]
    pub fn store(&self) -> &Arc<Database> {
        &self.store
    }

    /// The handle to run commands with.
    pub fn handle(&self) -> MemoryStore<'_> {
        MemoryStore {
            store: &self.store,
            id: Arc::clone(&self.id),
            actor: self.actor.clone(),
            read_only: self.read_only,
        }
    }

    /// This handle, recording its changes as made by `actor`.
    pub fn with_actor(mut self, actor: Option<Actor>) -> Self {
        self.actor = actor;
        self
    }

    /// This handle, reading only when `read_only`: see [`MemoryStore::read_only`].
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// [`MemoryStore::execute`] for async callers: a `view` runs in place (a read snapshot,
    /// which never waits for a lock or a flush, on an embedded store); a write joins the same
    /// group commit as blocking callers, and the future resolves once it is durable. The
    /// batch is led by a blocking caller in it or by one of the database's writer threads, so
    /// the awaiting task does not run the write (unless the system refuses every writer
    /// thread, when the batch is run in place rather than never). No async runtime is needed.
    ///
    /// On a backend with round trips (PostgreSQL) a `view` blocks for them: run it where
    /// blocking is allowed.
    pub async fn execute_async(&self, command: Command) -> Result<ToolOutput, Error> {
        if command.is_read_only() || self.read_only {
            return self.handle().execute(&command);
        }
        let job = ToolJob {
            user: Arc::clone(&self.id),
            command,
            actor: self.actor.clone(),
        };
        crate::pipeline::submit_async(&self.store.engine, Box::new(job)).await
    }
}

impl MemoryStore<'_> {
    /// The user id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// This handle, recording its changes (versions) as made by `actor`.
    pub fn with_actor(mut self, actor: Option<Actor>) -> Self {
        self.actor = actor;
        self
    }

    /// Who this handle's changes are recorded as made by.
    pub fn actor(&self) -> Option<&Actor> {
        self.actor.as_ref()
    }

    /// This handle, reading only when `read_only` (what a read-only API key gets): `view` and
    /// search answer as usual, and every other command of the memory tool is answered with the
    /// read-only error, changing nothing.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Whether this handle only reads.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Runs one command in its own transaction.
    ///
    /// Whatever the model got wrong comes back as a [`ToolOutput`] with `is_error: true`, and
    /// nothing is changed. `Err` means the storage failed; nothing was changed then either.
    ///
    /// Safe to call from many threads at once: reads run in parallel, and writes from
    /// concurrent callers are committed together, one disk flush for the lot (group commit).
    /// Each caller gets the result it would have had alone; it returns once that is durable.
    pub fn execute(&self, command: &Command) -> Result<ToolOutput, Error> {
        if let Command::View { path, view_range } = command {
            return self.store.engine.view(&self.id, path, *view_range);
        }
        if self.read_only {
            return Ok(ToolOutput {
                content: crate::messages::read_only_store(command.name()),
                is_error: true,
            });
        }
        crate::pipeline::submit(
            &self.store.engine,
            Box::new(ToolJob {
                user: Arc::clone(&self.id),
                command: command.clone(),
                actor: self.actor.clone(),
            }),
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

    /// The user's live file count and bytes.
    pub fn totals(&self) -> Result<(u64, u64), Error> {
        let files = self.files()?;
        Ok((files.len() as u64, files.iter().map(|f| f.size).sum()))
    }

    /// Every live file of the user, in path order (for operators; the model uses `view`).
    pub fn files(&self) -> Result<Vec<FileInfo>, Error> {
        crate::admin::files(self.scope())
    }

    /// This store's entries of the change log after `after` ([`Database::changes`] for one
    /// store: numbered in the store's own feed, 1, 2, 3, …).
    ///
    /// # Errors
    /// As [`Database::changes`].
    pub fn changes(&self, after: u64, limit: usize) -> Result<ChangePage, Error> {
        crate::admin::changes(self.scope().engine, after, limit, Some(self.scope().user))
    }

    /// The last number of this store's feed (0: no entry yet): where [`Self::changes`] ends.
    ///
    /// # Errors
    /// A storage failure.
    pub fn last_change(&self) -> Result<u64, Error> {
        crate::admin::store_last_change(self.scope().engine, self.scope().user)
    }

    /// The content of the live file at `path` (for operators), `None` if there is no such file.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] if `path` breaks the path rules.
    pub fn read_file(&self, path: &str) -> Result<Option<String>, Error> {
        crate::admin::read_file(self.scope(), path)
    }

    /// Searches this store's current memories ([`SearchRequest`]): the matching lines of each
    /// memory, in path order, from one snapshot. Expired memories are left out; nothing is
    /// recorded as used.
    ///
    /// # Errors
    /// [`Error::InvalidSearch`] for a query memkv does not run (empty, over
    /// [`crate::search::MAX_QUERY_BYTES`], a bad or oversized regular expression, a limit or
    /// context out of range), [`Error::InvalidPath`] for a bad `path_prefix`; a storage failure.
    pub fn search(&self, request: &SearchRequest) -> Result<SearchResults, Error> {
        crate::search::search(self.scope(), &self.store.indexes, request)
    }

    /// Answers the `input` of a `memory_search` call (`crate::SEARCH_TOOL_NAME`): the matches as
    /// the model reads them (capped at `view`'s character limit), or an error output for an
    /// input or a search memkv refuses.
    ///
    /// # Errors
    /// A storage failure.
    pub fn answer_search(&self, input: &Value) -> Result<ToolOutput, Error> {
        match crate::search::tool::search_request(input) {
            Ok(request) => self.search_output(&request),
            Err(reason) => Ok(crate::search::tool::refused_input(&reason)),
        }
    }

    /// Answers `request` as `memory_search` answers it ([`Self::answer_search`] once the input
    /// is parsed; `memkv search` prints it).
    ///
    /// # Errors
    /// A storage failure.
    pub fn search_output(&self, request: &SearchRequest) -> Result<ToolOutput, Error> {
        let max_chars = self.store.engine.settings(&self.id).limits.view_max_chars;
        crate::search::tool::output(request, self.search(request), max_chars)
    }

    // The memory tool's blocks.

    /// Answers a whole `tool_use` block. A block for another tool gets an error result.
    ///
    /// # Errors
    /// A storage failure; nothing was applied.
    pub fn handle_tool_use(&self, block: &ToolUse) -> Result<ToolResult, Error> {
        let output = match crate::blocks::block_call(block) {
            Ok(command) => self.execute(&command)?,
            Err(answered) => answered,
        };
        Ok(ToolResult::new(block.id.clone(), output))
    }

    // The memory-stores API: memories (`crate::memories`).

    /// Creates a memory at the model path `path` (`/memories/…`).
    ///
    /// # Errors
    /// A storage failure. Refusals: [`ApiRefusal::PathExists`], [`ApiRefusal::InvalidPath`]
    /// (the path rules, or a file where a directory would be), [`ApiRefusal::Limit`],
    /// [`ApiRefusal::Archived`].
    pub fn create_memory(
        &self,
        path: &str,
        content: &str,
    ) -> Result<Result<Memory, ApiRefusal>, Error> {
        crate::memories::create_memory(self.scope(), path, content)
    }

    /// The live memory `id`, with its content when `with_content`.
    ///
    /// # Errors
    /// A storage failure.
    pub fn memory(&self, id: MemoryId, with_content: bool) -> Result<Option<Memory>, Error> {
        crate::memories::memory(self.scope(), id, with_content)
    }

    /// Changes the content and/or the path (a model path) of the memory `id`, keeping its id:
    /// one `modified` version, none when nothing changes. With `expected_sha256`, only if the
    /// memory's current content has that hash.
    ///
    /// # Errors
    /// A storage failure. Refusals: [`ApiRefusal::NotFound`],
    /// [`ApiRefusal::PreconditionFailed`], [`ApiRefusal::PathExists`],
    /// [`ApiRefusal::InvalidPath`], [`ApiRefusal::ParentIsFile`], [`ApiRefusal::Limit`],
    /// [`ApiRefusal::Archived`].
    pub fn update_memory(
        &self,
        id: MemoryId,
        content: Option<&str>,
        path: Option<&str>,
        expected_sha256: Option<[u8; 32]>,
    ) -> Result<Result<Memory, ApiRefusal>, Error> {
        crate::memories::update_memory(self.scope(), id, content, path, expected_sha256)
    }

    /// Deletes the memory `id` (a `deleted` version); with `expected_sha256`, only if its
    /// current content has that hash. Allowed on an archived store.
    ///
    /// # Errors
    /// A storage failure. Refusals: [`ApiRefusal::NotFound`],
    /// [`ApiRefusal::PreconditionFailed`].
    pub fn delete_memory(
        &self,
        id: MemoryId,
        expected_sha256: Option<[u8; 32]>,
    ) -> Result<Result<(), ApiRefusal>, Error> {
        crate::memories::delete_memory(self.scope(), id, expected_sha256)
    }

    /// The memories below the model directory `prefix` (`/memories` for all), in path order:
    /// every one (`depth` 0), or those at most `depth` levels below with deeper ones rolled up
    /// into [`ListItem::Prefix`]. At most `limit` items from `page` (a token an earlier call
    /// returned); also returns the next page's token, `None` on the last page.
    ///
    /// # Errors
    /// A storage failure. Refusals: [`ApiRefusal::InvalidPath`], [`ApiRefusal::InvalidPage`].
    pub fn list_memories(
        &self,
        prefix: &str,
        depth: u32,
        page: Option<&str>,
        limit: usize,
        with_content: bool,
    ) -> Result<Result<Page<ListItem>, ApiRefusal>, Error> {
        crate::memories::list_memories(self.scope(), prefix, depth, page, limit, with_content)
    }

    // The memory-stores API: versions and history (`crate::versions`).

    /// The versions kept that `filter` admits, oldest first: at most `limit` from `page` (a
    /// token an earlier call returned), and the next page's token (`None` on the last page).
    /// With `with_content`, each carries its content.
    ///
    /// # Errors
    /// A storage failure. Refusal: [`ApiRefusal::InvalidPage`].
    pub fn versions(
        &self,
        filter: &VersionFilter,
        page: Option<&str>,
        limit: usize,
        with_content: bool,
    ) -> Result<Result<Page<Version>, ApiRefusal>, Error> {
        crate::versions::versions(self.scope(), filter, page, limit, with_content)
    }

    /// The version `id`, if kept; with its content when `with_content`.
    ///
    /// # Errors
    /// A storage failure.
    pub fn version(&self, id: VersionId, with_content: bool) -> Result<Option<Version>, Error> {
        crate::versions::version(self.scope(), id, with_content)
    }

    /// Redacts the version `id`: its content, path, hash and size are erased for good, and
    /// when and by whom (this handle's actor) is recorded. Redacting a redacted version changes
    /// nothing. Allowed on an archived store. The current version of a live memory is refused
    /// (the memory would go on serving the content): update or delete the memory first.
    ///
    /// # Errors
    /// A storage failure. Refusals: [`ApiRefusal::NotFound`], [`ApiRefusal::LiveVersion`].
    pub fn redact(&self, id: VersionId) -> Result<Result<Version, ApiRefusal>, Error> {
        crate::versions::redact(self.scope(), id)
    }

    /// Makes the content of version `id` current again, as a new version: of the same memory
    /// when it is live (at its current path), else as a new memory at the version's path.
    ///
    /// # Errors
    /// A storage failure. Refusals: [`ApiRefusal::NotFound`], [`ApiRefusal::NotRestorable`]
    /// (redacted, or a deletion), [`ApiRefusal::PathExists`], [`ApiRefusal::ParentIsFile`],
    /// [`ApiRefusal::Limit`], [`ApiRefusal::Archived`].
    pub fn restore(&self, id: VersionId) -> Result<Result<Memory, ApiRefusal>, Error> {
        crate::versions::restore(self.scope(), id)
    }

    /// The versions of the memory at the model path `path` (live now), oldest first; every
    /// version of the store when `path` is `None`. For the CLI's `history`.
    ///
    /// # Errors
    /// A storage failure. Refusals: [`ApiRefusal::InvalidPath`], [`ApiRefusal::NotFound`] (no
    /// memory at `path`).
    pub fn history(&self, path: Option<&str>) -> Result<Result<Vec<Version>, ApiRefusal>, Error> {
        crate::versions::history(self.scope(), path)
    }

    /// The memory store as the modules below the public face see it.
    pub(crate) fn scope(&self) -> Scope<'_> {
        Scope {
            engine: &self.store.engine,
            user: &self.id,
            actor: self.actor.as_ref(),
        }
    }
}
