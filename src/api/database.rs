//! [`Database`]: every method of the database handle, in one place.

use super::{DatabaseBuilder, MemoryStore, OwnedMemoryStore, StoreAdmin};
use crate::admin::{ExpiredFile, PrunedHistory, UserSummary};
use crate::changes::ChangePage;
use crate::keys::{self, ApiKey, ImportedKey, NewKey};
use crate::pipeline::CommitSignal;
use crate::settings::{EffectiveSettings, StoreSettings};

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use crate::backup::{Conflict, ImportSource, Progress, Skipped, Summary};
use crate::blocks::ToolOutput;
use crate::command::Command;
use crate::error::Error;
use crate::history::{Actor, Retention};
use crate::history::{ApiRefusal, StoreInfo};
use crate::limits::{Expiry, Limits};
use crate::pipeline::{self, Engine};
use crate::secrets::SecretPolicy;
use crate::storage::{AnyBackend, Backend};
use crate::user_id::validate_user;

/// A database handle: many memory stores (one per user id, each a `/memories` tree) in one redb
/// file or PostgreSQL database.
///
/// `Database` is `Sync`: share it between threads by reference or in an `Arc`. Reads run in
/// parallel; writes are serialized by the backend, one transaction per command.
#[derive(Debug)]
pub struct Database {
    pub(crate) engine: Arc<Engine>,
    /// Ranked search's indexes, built on first use (`crate::search`).
    pub(crate) indexes: crate::search::Indexes,
}

impl Database {
    /// A builder with PROTOCOL.md's default limits.
    pub fn builder() -> DatabaseBuilder {
        DatabaseBuilder::default()
    }

    /// Opens (or creates) the database at `db` (a redb file path or a `postgres://` URL) with
    /// default limits.
    pub fn open(db: impl AsRef<OsStr>) -> Result<Database, Error> {
        Self::builder().open(db)
    }

    /// An in-memory database with default limits.
    pub fn in_memory() -> Result<Database, Error> {
        Self::builder().in_memory()
    }

    /// The backend (for its own statistics, such as
    /// [`AnyBackend::round_trips`](crate::storage::AnyBackend::round_trips)).
    pub fn storage(&self) -> &AnyBackend {
        &self.engine.backend
    }

    /// Where the database lives (a path, `memory`, or a URL without its password).
    pub fn location(&self) -> &str {
        self.engine.backend.location()
    }

    /// How much history each store keeps.
    pub fn retention(&self) -> &Retention {
        &self.engine.retention
    }

    /// The limits every command is checked against.
    pub fn limits(&self) -> &Limits {
        &self.engine.limits
    }

    /// The handle of user `id`. Any non-empty string of at most 256 bytes without control or
    /// format characters and without whitespace at either end is a user id
    /// (`alice@example.com`, `.`, `team/a`, `Zoë Ng` …); ids are compared exactly.
    ///
    /// # Errors
    /// [`Error::InvalidUser`] for an id that breaks these rules (see `validate_user`).
    pub fn user(&self, id: &str) -> Result<MemoryStore<'_>, Error> {
        validate_user(id)?;
        Ok(MemoryStore {
            store: self,
            id: id.into(),
            actor: None,
            read_only: false,
        })
    }

    /// An owned handle of user `id`, for tasks that must own what they use (`spawn_blocking`,
    /// async servers): the `Arc` of the database plus the id.
    ///
    /// # Errors
    /// As [`Self::user`].
    pub fn owned_user(self: &Arc<Self>, id: &str) -> Result<OwnedMemoryStore, Error> {
        validate_user(id)?;
        Ok(OwnedMemoryStore {
            store: Arc::clone(self),
            id: id.into(),
            actor: None,
            read_only: false,
        })
    }

    /// The expiry settings.
    pub fn expiry(&self) -> &Expiry {
        &self.engine.expiry
    }

    /// The secrets policy.
    pub fn secret_policy(&self) -> SecretPolicy {
        self.engine.secrets
    }

    /// Batches of the write queue committed so far (memory-tool commands and memory-stores API
    /// writes; imports, expiry, pruning, store records and access-time flushes are not counted),
    /// and the writes in them that changed something (a refused write, a `view`, is not): their
    /// ratio is the writes per disk flush that concurrent callers achieved.
    pub fn commit_stats(&self) -> (u64, u64) {
        self.engine.pipeline.stats()
    }

    /// Runs `setup` first on each writer thread the store starts for async writers (a server
    /// lowers their priority there). Call it before the first async write; `false` when a setup
    /// was set already.
    pub fn on_writer_thread(&self, setup: fn()) -> bool {
        self.engine.pipeline.writers.set_setup(setup)
    }

    /// Runs `commands` (user, command) in order in one write transaction with one commit, and
    /// returns each one's result, as concurrent callers of [`MemoryStore::execute`] would get
    /// them. For servers that form their own batches; a failing command does not affect the
    /// others. A `view` in a batch sees the batch's earlier writes (and records no access time).
    ///
    /// # Errors
    /// Per command: [`Error::InvalidUser`] for a bad user id, or a storage failure.
    pub fn execute_batch(&self, commands: &[(String, Command)]) -> Vec<Result<ToolOutput, Error>> {
        pipeline::batch::tool_batch(
            &self.engine,
            commands.iter().map(|(user, command)| (user, command, None)),
        )
    }

    /// As [`Self::execute_batch`], each command's changes recorded as made by its actor (as
    /// [`MemoryStore::with_actor`] records them).
    ///
    /// # Errors
    /// Per command: [`Error::InvalidUser`] for a bad user id, or a storage failure.
    pub fn execute_batch_as(
        &self,
        commands: &[(String, Command, Option<Actor>)],
    ) -> Vec<Result<ToolOutput, Error>> {
        pipeline::batch::tool_batch(
            &self.engine,
            commands
                .iter()
                .map(|(user, command, actor)| (user, command, actor.as_ref())),
        )
    }

    /// Writes the access times that views noted and that no write batch has written yet (see
    /// `src/access.rs`), in one transaction. A read-only database has none to write.
    ///
    /// Runs by itself with the next write batch, before [`Self::expire`], and when the database
    /// is dropped; a server may call it at shutdown. Until then, every expiry decision of this
    /// database counts the noted times.
    ///
    /// # Errors
    /// A storage failure; the notes are kept for the next write.
    pub fn flush_access_times(&self) -> Result<(), Error> {
        self.engine.flush_access_times()
    }

    // Memory-store records: the stores of the memory-stores API (`crate::stores`).

    /// Creates a memory store with a new id (`memstore_…`).
    ///
    /// # Errors
    /// A storage failure.
    pub fn create_store(
        &self,
        name: &str,
        description: &str,
        metadata: &BTreeMap<String, String>,
    ) -> Result<StoreInfo, Error> {
        self.acting_as(None)
            .create_store(name, description, metadata)
    }

    /// The writes of memory-store records (create, update, archive, delete), each change
    /// recorded in the change log as made by `actor` (the API key of a server's caller, say);
    /// the methods of the same name on `Database` record none.
    pub fn acting_as(&self, actor: Option<Actor>) -> StoreAdmin<'_> {
        StoreAdmin { db: self, actor }
    }

    /// The store `id`'s record; `None` when there is no such store (a user that never wrote).
    ///
    /// # Errors
    /// A storage failure.
    pub fn store_info(&self, id: &str) -> Result<Option<StoreInfo>, Error> {
        crate::stores::store_info(&self.engine, id)
    }

    /// Stores ordered by id, strictly after `after`, at most `limit` of them, and whether more
    /// follow; archived ones only with `include_archived`.
    ///
    /// # Errors
    /// A storage failure.
    pub fn list_stores(
        &self,
        include_archived: bool,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<StoreInfo>, bool), Error> {
        crate::stores::list_stores(&self.engine, include_archived, after, limit)
    }

    /// Changes the store's name, description and metadata (`None` values remove keys).
    ///
    /// # Errors
    /// A storage failure. Refusals: [`ApiRefusal::NotFound`], [`ApiRefusal::Archived`].
    pub fn update_store(
        &self,
        id: &str,
        name: Option<&str>,
        description: Option<&str>,
        metadata: &BTreeMap<String, Option<String>>,
    ) -> Result<Result<StoreInfo, ApiRefusal>, Error> {
        self.acting_as(None)
            .update_store(id, name, description, metadata)
    }

    /// Archives the store: from now on read-only (its memories can still be read and deleted,
    /// their versions redacted, the store deleted). Archiving an archived store changes nothing.
    ///
    /// # Errors
    /// A storage failure. Refusal: [`ApiRefusal::NotFound`].
    pub fn archive_store(&self, id: &str) -> Result<Result<StoreInfo, ApiRefusal>, Error> {
        self.acting_as(None).archive_store(id)
    }

    /// Deletes the store `id` with every memory and version. `false` when there was none.
    ///
    /// # Errors
    /// A storage failure.
    pub fn delete_store(&self, id: &str) -> Result<bool, Error> {
        self.acting_as(None).delete_store(id)
    }

    // What operators ask of the whole database (`crate::admin`).

    /// Every user with at least one file (live or expired), with their totals, ordered by id.
    pub fn users(&self) -> Result<Vec<UserSummary>, Error> {
        crate::admin::users(&self.engine)
    }

    /// Checks the file beneath the records (redb's page checksums, for a database file) and
    /// every user's data against memkv's invariants (index, contents and their SHA-256, totals,
    /// access times) in one snapshot; returns the problems found as `(user, description)`, those
    /// of the file itself first, with an empty user. Changes nothing.
    pub fn check(&self) -> Result<Vec<(String, String)>, Error> {
        crate::admin::check(&self.engine)
    }

    /// Deletes every expired file (or, with `dry_run`, only lists them), one transaction per
    /// user. Expired files are already invisible; this reclaims their space.
    pub fn expire(&self, dry_run: bool) -> Result<Vec<ExpiredFile>, Error> {
        crate::admin::expire(&self.engine, dry_run)
    }

    /// Applies the history retention now, to every store: prunes the versions it no longer
    /// keeps, oldest first. Writes apply retention as they go; this reclaims the space of stores
    /// not written since, or after retention was tightened. One transaction per store, each of
    /// which may use the disk reserve on a full disk. Returns the stores that lost versions.
    ///
    /// # Errors
    /// A storage failure; stores pruned before it stay pruned.
    pub fn prune_history(&self) -> Result<Vec<PrunedHistory>, Error> {
        crate::admin::prune_history(&self.engine)
    }

    // The change log (`crate::changes`).

    /// The change log's entries after `after` (0: from the start), oldest first, at most
    /// `limit` (1 to 1,000); and the cursor for the next page. Every committed change of every
    /// face has one entry, numbered in commit order across the database; with `store`, that
    /// store's entries only, numbered in its own feed (1, 2, 3, … in the store's commit order),
    /// so that a store's page and cursor say nothing of other stores.
    ///
    /// # Errors
    /// [`Error::CursorExpired`] when retention removed entries after `after`, and
    /// [`Error::CursorAhead`] for a cursor past the log's end (another database's, or one from
    /// before a restore): start again from a full export. A storage failure.
    pub fn changes(
        &self,
        after: u64,
        limit: usize,
        store: Option<&str>,
    ) -> Result<ChangePage, Error> {
        crate::admin::changes(&self.engine, after, limit, store)
    }

    /// A future that resolves once a change commits through this database after this call
    /// (any store, any face), for long polls of [`Self::changes`]: make it, read, and await it
    /// when the read found nothing new. Commits of other processes (on PostgreSQL) do not wake
    /// it: [`Self::watch_remote`] tells of those.
    pub fn next_commit(&self) -> CommitSignal {
        CommitSignal::new(Arc::clone(&self.engine) as Arc<dyn crate::pipeline::AsSignal>)
    }

    /// Watches other processes' commits, on a database several processes write (PostgreSQL):
    /// every write transaction there that changes the API keys, a store's settings, the webhook
    /// endpoints or the change log notifies at its commit (change-log entries just after it,
    /// coalesced: docs/postgres.md), and `tell` is called with what
    /// changed, on a thread of the watch's own (so keep it short: set a flag, send on a
    /// channel, wake a waiter). Coalesced: a burst of commits is one call, or a few. Called
    /// with [`Changed::EVERYTHING`](crate::storage::watch::Changed::EVERYTHING) each time the
    /// watch has (re)connected: what was sent while it was not listening is lost. This process's
    /// own commits are told too. The watch holds one connection, and stops when the returned
    /// handle is dropped. `None` on a database only this process writes (redb: its waiters learn
    /// of commits directly, e.g. [`Self::next_commit`]) or a server that cannot notify. Keep a
    /// slow poll besides, for the time a lost connection takes to be found and made again.
    ///
    /// # Errors
    /// The watch's thread could not be started.
    pub fn watch_remote(
        &self,
        tell: impl Fn(crate::storage::watch::Changed) + Send + 'static,
    ) -> Result<Option<crate::storage::watch::RemoteWatch>, Error> {
        self.engine.backend.watch(Box::new(tell))
    }

    /// How many ranked-search indexes this handle has built (each store's first ranked search,
    /// and a rebuild when its index could not be brought up to date in place). For tests.
    #[doc(hidden)]
    pub fn ranked_index_builds(&self) -> u64 {
        self.indexes.builds()
    }

    /// The database's identity (32 hex digits, random, made at its first writable open; `None`
    /// before one): every export names it, and the change feed shows it, so that a follower
    /// keeping it beside its cursor sees when it follows another database (a restored copy has
    /// an identity of its own) and starts again from a full export.
    ///
    /// # Errors
    /// A storage failure.
    pub fn identity(&self) -> Result<Option<String>, Error> {
        crate::backup::identity::of(&self.engine.backend.begin_read()?)
    }

    /// The last `seq` of the change log (0: none yet).
    ///
    /// # Errors
    /// A storage failure.
    pub fn last_change(&self) -> Result<u64, Error> {
        crate::admin::last_change(&self.engine)
    }

    /// Applies the change log's retention ([`crate::DatabaseBuilder::change_retention`]) now;
    /// returns how many entries it removed. An embedded database applies it as it writes; on
    /// PostgreSQL, `memkv serve` calls this from time to time.
    ///
    /// # Errors
    /// A storage failure.
    pub fn trim_changes(&self) -> Result<u64, Error> {
        crate::admin::trim_changes(&self.engine)
    }

    // Webhook endpoints (`crate::webhooks`); `memkv serve` delivers to them.

    /// Adds an endpoint that `memkv serve` delivers the change log's entries to (every store's
    /// unless `stores` names some, every kind unless `events` does), signed with `secret`
    /// (`whsec_` and base64; the server makes one), in `format`. It gets the entries committed
    /// from now on.
    ///
    /// # Errors
    /// [`Error::InvalidWebhook`] for a URL that is not `http://` or `https://`, a malformed
    /// secret, or more than [`crate::MAX_WEBHOOKS`] endpoints; [`Error::InvalidUser`] for a
    /// store id memkv does not accept; a storage failure.
    pub fn add_webhook(
        &self,
        url: &str,
        secret: &str,
        stores: &[String],
        events: &[crate::ChangeKind],
        format: crate::WebhookFormat,
    ) -> Result<crate::Webhook, Error> {
        crate::webhooks::add(&self.engine, url, secret, stores, events, format)
    }

    /// Every webhook endpoint, by id, with how its deliveries stand.
    ///
    /// # Errors
    /// A storage failure.
    pub fn webhooks(&self) -> Result<Vec<crate::Webhook>, Error> {
        crate::webhooks::list(&self.engine)
    }

    /// Removes an endpoint; `false` if there was none with that id.
    ///
    /// # Errors
    /// A storage failure.
    pub fn remove_webhook(&self, id: &str) -> Result<bool, Error> {
        crate::webhooks::remove(&self.engine, id)
    }

    /// Records a delivery attempt of endpoint `id` (the deliverer's cursor, kept in the
    /// database so that a restart neither loses nor replays a delivery); `false` if the
    /// endpoint is gone.
    ///
    /// # Errors
    /// A storage failure.
    pub fn record_webhook_attempt(
        &self,
        id: &str,
        attempt: &crate::WebhookAttempt,
    ) -> Result<bool, Error> {
        crate::webhooks::record(&self.engine, id, attempt)
    }

    /// Takes the role `role` for this process if no other process of the database holds it
    /// (`memkv serve`'s webhook deliverer: one per database, also with several servers on one
    /// PostgreSQL), until the lease is dropped; `None` while another holds it. A database only
    /// this process writes (redb) always grants it.
    ///
    /// # Errors
    /// A storage failure.
    pub fn try_lease(&self, role: &str) -> Result<Option<Box<dyn crate::storage::Lease>>, Error> {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(role.as_bytes());
        let key = i64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        self.engine.backend.lease(key)
    }

    // Backups: export, import and plain directories (`crate::backup`).

    /// Writes a consistent snapshot of `users` (every store when empty) to `out`, one read
    /// transaction, streamed: memory stays constant however large the store. Per store: its
    /// record, its files with their memory ids, every version kept (redacted ones and those of
    /// deleted memories included). Expired files are left out.
    ///
    /// # Errors
    /// [`Error::UnknownUser`] if a user of `users` has neither files nor a store record;
    /// [`Error::Output`] if writing fails.
    pub fn export(
        &self,
        users: &[String],
        out: impl Write,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, Error> {
        crate::backup::export::export(&self.engine, users, None, out, progress)
    }

    /// An incremental export: what changed after the change log's `since` (the `seq` of the
    /// export it follows, full or incremental), as the whole current block of each store the
    /// log names after it (or a `store_deleted` line), from one read snapshot. Imported, in
    /// order, after that export, it makes the copy equal to this database
    /// (`docs/export-format.md`).
    ///
    /// # Errors
    /// [`Error::CursorExpired`] when retention removed entries after `since` (take a full
    /// export); [`Error::InvalidSince`] beyond the log's end; [`Error::Output`] if writing
    /// fails.
    pub fn export_since(
        &self,
        since: u64,
        users: &[String],
        out: impl Write,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, Error> {
        crate::backup::export::export(&self.engine, users, Some(since), out, progress)
    }

    /// Imports the export file `file`, every user in it: [`Self::import_from`] an
    /// [`ImportSource`] opened with this store's limits.
    ///
    /// # Errors
    /// As [`Self::import_from`].
    pub fn import(
        &self,
        file: &Path,
        conflict: Conflict,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, Error> {
        crate::backup::import::import(&self.engine, file, conflict, progress)
    }

    /// Imports an export: verifies all of it, then applies the files of `users` (every user when
    /// empty) in one transaction. On any problem nothing is changed and the error names the
    /// line. Files of other users are verified (checksums, format) but neither checked against
    /// this store's policies nor imported.
    ///
    /// # Errors
    /// [`Error::Import`] for a refused file or a conflict (a user of `users` without files in
    /// it is refused too); [`Error::Io`] if it cannot be read; storage errors.
    pub fn import_from(
        &self,
        source: &mut ImportSource,
        users: &[String],
        conflict: Conflict,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, Error> {
        crate::backup::import::import_from(&self.engine, source, users, conflict, progress)
    }

    /// Pass one of [`Self::import_from`], alone: reads and checks everything but the database
    /// (a dry run). Returns what would be imported into an empty store.
    ///
    /// # Errors
    /// As [`Self::import_from`], conflicts with existing files aside.
    pub fn verify_import(
        &self,
        source: &mut ImportSource,
        users: &[String],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, Error> {
        crate::backup::verify::verify_import(&self.engine, source, users, progress)
    }

    /// Imports a plain directory tree (such as the SDK handler's `memories/` folder) as `user`'s
    /// `/memories`, in one transaction. Symbolic links, special files, files that are not UTF-8
    /// and names the path rules reject are skipped and reported (or, with `strict`, refuse the
    /// whole import). Links are never followed: nothing outside `dir` is read. A file over the
    /// file-size limit is skipped on its size alone, and no file is read past that limit.
    /// Modification times in the future are taken as now.
    pub fn import_dir(
        &self,
        dir: &Path,
        user: &str,
        strict: bool,
        conflict: Conflict,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(Summary, Vec<Skipped>), Error> {
        crate::backup::dir::import_dir(&self.engine, dir, user, strict, conflict, progress)
    }

    /// Writes `user`'s live files under `dir` as plain files. `dir` must be missing (it is
    /// created) or an empty directory; never a symbolic link. Nothing is written through a link
    /// or over an existing file, so nothing outside `dir` changes; on an error, what was written
    /// is removed again.
    ///
    /// # Errors
    /// [`Error::UnknownUser`] if `user` has no files; [`Error::Io`] naming the file.
    pub fn export_dir(
        &self,
        user: &str,
        dir: &Path,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, Error> {
        crate::backup::dir::export_dir(&self.engine, user, dir, progress)
    }

    // ---- API keys (crate::keys) ----

    /// Adds a random key; returns its record and the key itself (`mkv_` and 64 hex digits),
    /// which is not kept (only its SHA-256 is): show it to the operator once.
    ///
    /// # Errors
    /// [`Error::InvalidKey`] for a label that is too long or holds control characters, an
    /// expiry that is not in the future, or more than [`crate::MAX_KEYS`] keys;
    /// [`Error::InvalidUser`] for a store id memkv does not accept; a storage failure.
    pub fn add_key(&self, new: &NewKey) -> Result<(ApiKey, String), Error> {
        keys::add(&self.engine, new)
    }

    /// Every API key, by id (expired ones included: [`ApiKey::expired_at`] tells).
    ///
    /// # Errors
    /// A storage failure.
    pub fn api_keys(&self) -> Result<Vec<ApiKey>, Error> {
        keys::list(&self.engine)
    }

    /// Revokes (removes) a key; `false` if there was none with that id.
    ///
    /// # Errors
    /// A storage failure.
    pub fn revoke_key(&self, id: &str) -> Result<bool, Error> {
        keys::revoke(&self.engine, id)
    }

    /// Adds keys kept elsewhere by hash (the keys file of earlier versions), all or none,
    /// passing over ids the database has; returns how many were added.
    ///
    /// # Errors
    /// [`Error::InvalidKey`] for an id not spelled `key_` and 12 hex digits, or too many keys;
    /// [`Error::InvalidUser`] for a store id memkv does not accept; a storage failure.
    pub fn import_keys(&self, keys: &[ImportedKey]) -> Result<usize, Error> {
        keys::import(&self.engine, keys)
    }

    /// Records when keys were last used (`(id, ms since the epoch)`), in one transaction; a
    /// time earlier than the one recorded, or a key revoked meanwhile, is passed over.
    ///
    /// # Errors
    /// A storage failure.
    pub fn record_key_use(&self, uses: &[(String, i64)]) -> Result<(), Error> {
        keys::record_use(&self.engine, uses)
    }

    /// How many changes of the keys this process has committed through this database (any
    /// handle of it): a cache of [`Self::api_keys`] that saw another number is stale. Changes
    /// other processes make are not counted: [`Self::watch_remote`] tells of those.
    pub fn key_changes(&self) -> u64 {
        self.engine
            .key_changes
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    // ---- per-store settings (crate::settings) ----

    /// Store `id`'s own settings, as the database keeps them (`None` fields: the defaults).
    ///
    /// # Errors
    /// [`Error::InvalidUser`] for an id memkv does not accept; a storage failure.
    pub fn store_settings(&self, id: &str) -> Result<StoreSettings, Error> {
        crate::settings::get(&self.engine, id)
    }

    /// Sets the fields of store `id`'s settings that `change` sets, and puts the fields named in
    /// `reset` (of [`crate::SETTINGS`]) back to the database's defaults; returns the store's
    /// settings. They apply to the store's next command in this process at once, and in other
    /// processes once they [`Self::refresh_store_settings`]. The store need not exist yet.
    ///
    /// # Errors
    /// [`Error::InvalidSettings`] for a zero quota or time-to-live, or an unknown name in
    /// `reset`; [`Error::InvalidUser`] for an id memkv does not accept; a storage failure.
    pub fn update_store_settings(
        &self,
        id: &str,
        change: &StoreSettings,
        reset: &[&str],
    ) -> Result<StoreSettings, Error> {
        crate::settings::update(&self.engine, id, change, reset)
    }

    /// What store `id`'s commands are checked against: its own settings over the defaults.
    ///
    /// # Errors
    /// [`Error::InvalidUser`] for an id memkv does not accept.
    pub fn effective_settings(&self, id: &str) -> Result<EffectiveSettings, Error> {
        crate::settings::effective(&self.engine, id)
    }

    /// Reads every store's settings again (other processes' changes; this process's own apply
    /// at once). `memkv serve` calls it when [`Self::watch_remote`] says settings changed, and
    /// every 5 s.
    ///
    /// # Errors
    /// A storage failure (the settings read before stay in force).
    pub fn refresh_store_settings(&self) -> Result<(), Error> {
        crate::settings::refresh(&self.engine)
    }

    /// Every store with settings of its own, as this handle last read them.
    pub fn stores_with_settings(&self) -> Vec<(String, StoreSettings)> {
        self.engine.store_settings.all()
    }
}
