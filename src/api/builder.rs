//! [`DatabaseBuilder`]: how a [`Database`] is configured and opened.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::Database;
use crate::access::PendingAccess;
use crate::changes::ChangeRetention;
use crate::error::Error;
use crate::history::Retention;
use crate::history::change::{CommitHook, Hooks};
use crate::limits::{Expiry, Limits};
use crate::migrate;
use crate::pipeline::{Clock, Commits, Engine, Pipeline};
use crate::secrets::SecretPolicy;
use crate::storage::redb::{RedbBackend, default_disk_reserve};
use crate::storage::{AnyBackend, is_postgres_url};

/// Configures a [`Database`]. Every limit defaults to PROTOCOL.md's value ([`Limits::DEFAULT`]);
/// expiry is off and the secrets policy is [`SecretPolicy::Reject`] unless set.
#[derive(Clone, Default)]
pub struct DatabaseBuilder {
    limits: Limits,
    expiry: Expiry,
    secrets: SecretPolicy,
    clock: Clock,
    shared: bool,
    retention: Retention,
    /// `None`: [`default_disk_reserve`] of the byte quota.
    disk_reserve: Option<u64>,
    /// PostgreSQL without its fast path ([`Self::postgres_fast_path`]).
    no_fast_path: bool,
    /// PostgreSQL with the statements of older servers ([`Self::postgres_older_statements`]).
    older_statements: bool,
    hooks: Vec<Arc<dyn CommitHook>>,
    changes: ChangeRetention,
}

impl std::fmt::Debug for DatabaseBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseBuilder")
            .field("limits", &self.limits)
            .field("expiry", &self.expiry)
            .field("secrets", &self.secrets)
            .field("clock", &self.clock)
            .field("shared", &self.shared)
            .field("retention", &self.retention)
            .field("disk_reserve", &self.disk_reserve)
            .field("no_fast_path", &self.no_fast_path)
            .field("older_statements", &self.older_statements)
            .field("hooks", &self.hooks.len())
            .field("changes", &self.changes)
            .finish()
    }
}

impl DatabaseBuilder {
    /// Adds a hook that sees every committed change, of every face (see [`CommitHook`]);
    /// hooks are called in the order they were added.
    pub fn commit_hook(mut self, hook: Arc<dyn CommitHook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// What to do with secrets in content about to be written. Default = [`SecretPolicy::Reject`].
    pub fn secrets(mut self, policy: SecretPolicy) -> Self {
        self.secrets = policy;
        self
    }

    /// Expiry settings at once. Default = off.
    pub fn expiry(mut self, expiry: Expiry) -> Self {
        self.expiry = expiry;
        self
    }

    /// Files unused (not created, written or viewed) for `ttl` expire. Default = never.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.expiry.ttl = Some(ttl);
        self
    }

    /// A time-to-live for one user, overriding [`Self::ttl`]; `None` exempts the user.
    pub fn user_ttl(mut self, user: impl Into<String>, ttl: Option<Duration>) -> Self {
        self.expiry.per_user.insert(user.into(), ttl);
        self
    }

    /// Let read-only processes ([`Self::open_read_only`]; `memkv users`, `export` …) open the
    /// database while this store writes to it. Costs a second disk flush per commit, so it is
    /// off by default: a second process is then refused with [`Error::Locked`].
    pub fn shared(mut self, shared: bool) -> Self {
        self.shared = shared;
        self
    }

    /// The clock for file times and expiry. Default = the system clock. For simulations and
    /// tests of applications that depend on expiry.
    pub fn clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.clock = Clock(Some(Arc::new(clock)));
        self
    }

    /// How much history each store keeps (versions of every change). Default =
    /// [`Retention::DEFAULT`]; [`Retention::NONE`] keeps none.
    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// How much of the change log is kept ([`crate::Database::changes`]). Default =
    /// [`ChangeRetention::DEFAULT`]: 30 days and 1,000,000 entries.
    pub fn change_retention(mut self, retention: ChangeRetention) -> Self {
        self.changes = retention;
        self
    }

    /// How stale a recorded access time may get before a read refreshes it (with a write).
    /// Default = 1 hour.
    pub fn access_granularity(mut self, granularity: Duration) -> Self {
        self.expiry.granularity = granularity;
        self
    }

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

    /// Bytes of the disk to keep in reserve beside a redb file opened for writing (in
    /// `DB.reserve`), for writes that free space when the disk is full: deletes, renames,
    /// [`Database::expire`], history pruning and redactions then still commit, while other writes
    /// fail with [`Error::DiskFull`]. 0 keeps none. Default: enough to delete the largest store
    /// the byte quota allows in one command, 1.25 × [`Self::max_bytes`] + 8 MiB (88 MiB);
    /// a reserve made for the first time takes at most half of the disk's free space. Nothing
    /// for PostgreSQL, whose server owns its disk.
    pub fn disk_reserve(mut self, bytes: u64) -> Self {
        self.disk_reserve = Some(bytes);
        self
    }

    /// Whether PostgreSQL writes may take the fast path (default: yes): assume what this process
    /// last saw of a store instead of reading it, and commit a write whose reads were all
    /// assumed in one call of a server-side function (docs/postgres.md). Off, every write reads
    /// what it needs and commits in plain statements: the baseline, slower by a round trip or
    /// more per write, with the same answers. Nothing for redb.
    pub fn postgres_fast_path(mut self, on: bool) -> Self {
        self.no_fast_path = !on;
        self
    }

    /// Whether PostgreSQL writes use the statements memkv uses on servers older than
    /// PostgreSQL 15 and 12 (default: no, each server gets what it supports):
    /// `INSERT … ON CONFLICT` instead of `MERGE`, no `plan_cache_mode`. The answers are the
    /// same. Nothing for redb.
    pub fn postgres_older_statements(mut self, on: bool) -> Self {
        self.older_statements = on;
        self
    }

    /// Opens the database at `db` for writing, creating it if it does not exist: a redb file at
    /// a path, or a PostgreSQL database at a `postgres://` / `postgresql://` URL (with the
    /// `postgres` feature; its tables are created on first use). Data in an older layout is
    /// migrated, in one transaction.
    ///
    /// # Errors
    /// [`Error::Locked`] if another process has the redb file open for writing,
    /// [`Error::UnsupportedFormat`] or [`Error::NotMemkv`] if it is not a database this build can
    /// use, [`Error::Storage`] on I/O or connection failure.
    pub fn open(self, db: impl AsRef<OsStr>) -> Result<Database, Error> {
        let backend = self.connect(db.as_ref(), Mode::Create)?;
        self.backend(backend)
    }

    /// Opens an existing database for writing; [`Error::NotFound`] if there is none (for
    /// PostgreSQL: if memkv's tables have not been created, e.g. by `memkv init`).
    pub fn open_existing(self, db: impl AsRef<OsStr>) -> Result<Database, Error> {
        let backend = self.connect(db.as_ref(), Mode::Existing)?;
        self.backend(backend)
    }

    /// Opens an existing database read-only: works while a process that opened it with
    /// [`Self::shared`] writes to it, and every command sees the latest commit. Writes fail with
    /// [`Error::ReadOnly`]; a database that needs a migration is refused with
    /// [`Error::NeedsMigration`].
    pub fn open_read_only(self, db: impl AsRef<OsStr>) -> Result<Database, Error> {
        let backend = self.connect(db.as_ref(), Mode::ReadOnly)?;
        self.backend(backend)
    }

    fn connect(&self, db: &OsStr, mode: Mode) -> Result<AnyBackend, Error> {
        if let Some(url) = db.to_str().filter(|d| is_postgres_url(d)) {
            return postgres_backend(url, mode, !self.no_fast_path, self.older_statements);
        }
        let path = Path::new(db);
        let reserve = self
            .disk_reserve
            .unwrap_or_else(|| default_disk_reserve(self.limits.max_bytes));
        Ok(AnyBackend::Redb(match mode {
            Mode::Create => RedbBackend::create(path, self.shared)?.with_disk_reserve(reserve),
            Mode::Existing => RedbBackend::open(path, self.shared)?.with_disk_reserve(reserve),
            Mode::ReadOnly => RedbBackend::open_read_only(path)?,
        }))
    }

    /// A store in memory, gone when dropped.
    pub fn in_memory(self) -> Result<Database, Error> {
        self.backend(AnyBackend::Redb(RedbBackend::in_memory()?))
    }

    /// A database over any [`crate::storage::Backend`]; migrates older formats when the backend is
    /// writable.
    pub fn backend(self, backend: AnyBackend) -> Result<Database, Error> {
        let commits = Commits {
            hooks: Hooks::new(self.hooks),
            changes: self.changes,
            signal: Default::default(),
        };
        migrate::upgrade(&backend, &commits)?;
        crate::backup::identity::ensure(&backend, &commits);
        let engine = Engine {
            backend,
            limits: self.limits,
            expiry: self.expiry,
            secrets: self.secrets,
            clock: self.clock,
            retention: self.retention,
            pipeline: Pipeline::new(commits),
            access: PendingAccess::default(),
            key_changes: Default::default(),
            store_settings: Default::default(),
        };
        // Each store's own settings, laid over the defaults above from the first command on.
        crate::settings::refresh(&engine)?;
        Ok(Database {
            engine: Arc::new(engine),
            indexes: Default::default(),
        })
    }
}

/// How [`DatabaseBuilder::connect`] opens a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Create,
    Existing,
    ReadOnly,
}

#[cfg(feature = "postgres")]
fn postgres_backend(
    url: &str,
    mode: Mode,
    fast_path: bool,
    older_statements: bool,
) -> Result<AnyBackend, Error> {
    use crate::storage::postgres::{Access, PgBackend};
    let access = match mode {
        Mode::Create => Access::Create,
        Mode::Existing => Access::Existing,
        Mode::ReadOnly => Access::ReadOnly,
    };
    let backend = PgBackend::connect(url, access)?;
    backend.set_fast_path(fast_path);
    if older_statements {
        backend.use_older_statements();
    }
    Ok(AnyBackend::Postgres(backend))
}

#[cfg(not(feature = "postgres"))]
fn postgres_backend(
    url: &str,
    _mode: Mode,
    _fast_path: bool,
    _older_statements: bool,
) -> Result<AnyBackend, Error> {
    Err(Error::Unsupported {
        location: crate::storage::redact_url(url),
        reason: "this memkv was built without PostgreSQL support (cargo feature `postgres`)".into(),
    })
}
