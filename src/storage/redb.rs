//! The redb backend: every table definition and the format version live here, and only here.
//!
//! All spaces but one share one redb table, `memkv_data` (`&[u8] -> &[u8]`), so that one
//! command touches one B-tree, and a user's entries sit together in it. `Snapshots`, whose
//! values are whole contents written now and then, have a table of their own,
//! `memkv_snapshots`, keyed alike, so that their large values never share a page with the
//! records every write rewrites. A stored key is:
//!
//! ```text
//! u32 big-endian byte length of the user id | user id (UTF-8) | space byte | key
//! ```
//!
//! The length prefix keeps users apart: no user id, however spelled, is a prefix of another
//! user's keys. The layout of the keys and values inside a space is in `crate::layout`, versioned
//! by `crate::layout::LAYOUT_VERSION` (stored under `format_version` in `memkv_meta`, the name it
//! has always had); how redb holds them is versioned by [`REDB_FORMAT`] (stored under
//! `redb_format`). Both are written down in `docs/design.md`.

mod compact;
mod create;
pub mod files;
mod health;
mod journal;
mod open;
pub(crate) mod reserve;
mod txn;
mod verify;

pub use self::compact::Compacted;
pub use self::open::JournalLoss;
pub use self::reserve::default_disk_reserve;
pub use self::txn::{RedbRead, RedbWrite};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use redb::{
    ConcurrencyMode, Database, ReadOnlyDatabase, ReadableDatabase, ReadableTable, TableDefinition,
    TableHandle,
};

use self::files::{Files, OsFiles};
use self::health::Health;
use self::journal::Journal;
use self::open::{
    Writable, check_exists, check_redb_format, check_version, consolidate_legacy_tables,
    open_error, open_read_only_db, open_writable,
};
use self::reserve::Reserve;
use self::txn::ReadTables;
use super::{Backend, Finish, Space, WriteTxn};
use crate::error::Error;

use crate::layout::LAYOUT_VERSION;

/// How this backend arranges the layout in redb tables (physical, not logical). 1 = every space
/// in one table, `memkv_data`, and is not written down: a file without the `redb_format` key is
/// 1 (or an older arrangement, converted on open). 2 = as 1, and commits since the last
/// checkpoint may be held in the journal beside the file (`journal`), which a build that knows
/// only 1 would ignore; every writable open stamps it. A file with a newer arrangement than this
/// build knows is refused.
pub const REDB_FORMAT: u64 = 2;

/// Every space, since format 3, but `Snapshots`.
const DATA: TableDefinition<&[u8], &[u8]> = TableDefinition::new("memkv_data");
/// The `Snapshots` space (since layout 6).
const SNAPSHOTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("memkv_snapshots");
/// The change log (since layout 7): `seq -> entry` (`crate::changes`).
const CHANGES: TableDefinition<u64, &[u8]> = TableDefinition::new("memkv_changes");
/// The `seq` through which retention trimmed the change log, in `META`.
const TRIMMED_KEY: &str = "changes_trimmed";
/// `format_version -> u64`.
const META: TableDefinition<&str, u64> = TableDefinition::new("memkv_meta");
const FORMAT_KEY: &str = "format_version";
const REDB_FORMAT_KEY: &str = "redb_format";

/// Formats 1 and 2 kept each space in a table of its own, keyed `len | user | key`.
const LEGACY: [(&str, Space); 4] = [
    ("memkv_nodes", Space::Nodes),
    ("memkv_contents", Space::Contents),
    ("memkv_totals", Space::Totals),
    ("memkv_access", Space::Access),
];

/// How a writer shares the file with other processes.
///
/// - Exclusive (the default): the writer locks the whole file. One flush per commit.
/// - Shared: one writer, and any number of read-only processes beside it (operators can list,
///   export and inspect while `memkv exec` runs). redb then flushes twice per commit.
///
/// Read-only handles always open in redb's `SingleWriter` mode: they coexist with a shared
/// writer and are refused, cleanly, by an exclusive one (and refuse it).
fn builder_for(shared: bool) -> redb::Builder {
    let mut b = Database::builder();
    b.set_concurrency_mode(if shared {
        ConcurrencyMode::SingleWriter
    } else {
        ConcurrencyMode::ExclusiveWriter
    });
    b
}

/// How the database was opened: how to open it again after a failure.
#[derive(Debug)]
enum Origin {
    /// A file, for writing.
    File { path: PathBuf, shared: bool },
    /// A file, read-only.
    ReadOnlyFile { path: PathBuf },
    /// Memory or a caller's storage backend, which redb owns: never reopened.
    Fixed,
}

enum Db {
    Write(Database),
    Read(ReadOnlyDatabase),
}

impl Db {
    fn close(self) {
        // Closing releases the file and its locks at once, even while read transactions live;
        // its own error adds nothing to the failure that led here.
        let _ = match self {
            Db::Write(db) => db.close(),
            Db::Read(db) => db.close(),
        };
    }
}

/// The embedded default backend: one redb file (or memory), one writer at a time.
///
/// After an I/O error or a panic inside redb (see `health`), the file is closed and opened again
/// before the next transaction, so a full disk or a transient failure does not outlive its
/// cause.
pub struct RedbBackend {
    /// The latest commit's snapshot, which reads share (see [`RedbBackend::begin_read`]).
    /// Declared before `db`, so dropped before the database it reads.
    latest: Mutex<Latest>,
    /// `None` while closed after a failure that a reopen has not repaired yet.
    db: RwLock<Option<Arc<Db>>>,
    origin: Origin,
    health: Arc<Health>,
    location: String,
    /// Space on the disk kept for writes that free space (a file database's; see `reserve`).
    reserve: Option<Reserve>,
    /// The journal through which commits are made durable (a file opened exclusively).
    journal: Option<Box<Mutex<Journal>>>,
    /// The filesystem of the journal and the reserve (see `files`).
    files: Arc<dyn Files>,
}

/// The snapshot of the latest commit, and how many commits this process has made: a snapshot
/// begun under one count is shared only if no commit ended since.
#[derive(Default)]
struct Latest {
    commits: u64,
    tables: Option<Arc<ReadTables>>,
}

impl std::fmt::Debug for RedbBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbBackend")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

fn reader() -> redb::Builder {
    builder_for(true)
}

fn table_names(names: impl Iterator<Item = impl TableHandle>) -> Vec<String> {
    names.map(|t| t.name().to_owned()).collect()
}

impl RedbBackend {
    /// Opens the database at `path` for writing, creating the file if it does not exist (or if
    /// it holds no committed data: an interrupted creation). `shared` lets read-only processes
    /// open it meanwhile (at a second flush per commit).
    pub fn create(path: &Path, shared: bool) -> Result<Self, Error> {
        Self::ensure_and_open(path, shared, true)
    }

    /// Opens an existing database for writing; a missing file is [`Error::NotFound`].
    pub fn open(path: &Path, shared: bool) -> Result<Self, Error> {
        Self::ensure_and_open(path, shared, false)
    }

    /// Opens (or creates) the database at `path` for writing, exclusively, with its journal
    /// and reserve on `files`, and the file itself too if `files` gives redb a storage for it
    /// ([`Files::database`]): a test's filesystem that crashes at any call.
    pub fn open_with_files(path: &Path, files: Arc<dyn Files>) -> Result<Self, Error> {
        if files.database(path).is_some() {
            return Self::open_on(path, false, files);
        }
        Self::ensure(path, true)?;
        Self::open_on(path, false, files)
    }

    /// Recovers the database at `path` from a damaged journal, which an open refuses: the
    /// journal's intact records before the damage are replayed, and the journal is kept beside
    /// the file as `DB.journal.damaged` (the commits in it from the damage on are given up).
    /// A journal without damage is simply replayed. The operator's explicit choice
    /// (`memkv check --accept-journal-loss`).
    pub fn accept_journal_loss(path: &Path) -> Result<JournalLoss, Error> {
        self::open::accept_journal_loss(path)
    }

    /// Rewrites the database at `path` into a new file holding only its live data, and renames
    /// it over the old one: the pages redb freed (what redactions erased, deleted stores, expired
    /// and pruned history) are gone from the file, and it is as small as its data. Its journal is
    /// replayed and removed first. No other process may have the file open
    /// ([`Error::Locked`]); the operator's `memkv compact`.
    pub fn compact(path: &Path) -> Result<Compacted, Error> {
        self::compact::compact(path)
    }

    fn ensure_and_open(path: &Path, shared: bool, create: bool) -> Result<Self, Error> {
        Self::ensure(path, create)?;
        Self::open_on(path, shared, Arc::new(OsFiles))
    }

    /// Creates the file at `path` if it is missing (and `create`) or holds no committed data.
    fn ensure(path: &Path, create: bool) -> Result<(), Error> {
        let health = Arc::new(Health::new(&path.display().to_string()));
        create::ensure(path, create, |tmp| {
            let location = tmp.display().to_string();
            let db = health.guard(|| {
                builder_for(false)
                    .create(tmp)
                    .map_err(|e| open_error(e, tmp))
            })?;
            let backend = Self::init(db, Origin::Fixed, &location)?;
            backend.close();
            Ok(())
        })
    }

    /// Opens the file at `path` for writing, replaying its journal, and starts a journal when
    /// not `shared`.
    fn open_on(path: &Path, shared: bool, files: Arc<dyn Files>) -> Result<Self, Error> {
        let health = Health::new(&path.display().to_string());
        let how = Writable {
            shared,
            ..Writable::plain(&*files)
        };
        let (db, applied) = health.guard(|| open_writable(path, &how))?;
        let origin = Origin::File {
            path: path.to_owned(),
            shared,
        };
        let mut backend = Self::init(db, origin, &path.display().to_string())?;
        backend.files = Arc::clone(&files);
        if !shared {
            let journal = Journal::open(files, path, backend.id()?, applied)?;
            backend.journal = Some(Box::new(Mutex::new(journal)));
        }
        Ok(backend)
    }

    /// Opens an existing database read-only. Works while another process writes to it, and
    /// sees that process's commits in each new snapshot. A file left behind by a process that
    /// died mid-write is repaired first (by a brief writable open) when no other process has it.
    pub fn open_read_only(path: &Path) -> Result<Self, Error> {
        check_exists(path)?;
        let location = path.display().to_string();
        self::open::replay_for_reading(path)?;
        if create::holds_no_data(path).unwrap_or(false) {
            return Err(Error::NotMemkv {
                location,
                reason: "it holds no committed data (its creation was interrupted); open it \
                         once for writing to initialise it"
                    .into(),
            });
        }
        let health = Arc::new(Health::new(&location));
        let db = health.guard(|| open_read_only_db(path))?;
        health.guard(|| {
            let txn = db.begin_read().map_err(|e| health.fail(e))?;
            let tables = table_names(txn.list_tables().map_err(|e| health.fail(e))?);
            if !tables.iter().any(|t| t == META.name()) {
                return Err(Error::NotMemkv {
                    location: location.clone(),
                    reason: "it has no memkv tables".into(),
                });
            }
            let found = txn
                .open_table(META)
                .map_err(|e| health.fail(e))?
                .get(FORMAT_KEY)
                .map_err(|e| health.fail(e))?
                .map_or(0, |v| v.value());
            check_version(found, &location)?;
            let meta = txn.open_table(META).map_err(|e| health.fail(e))?;
            check_redb_format(&meta, &location, &health)?;
            if found < LAYOUT_VERSION {
                return Err(Error::NeedsMigration {
                    location: location.clone(),
                    found,
                    supported: LAYOUT_VERSION,
                });
            }
            Ok(())
        })?;
        Ok(RedbBackend {
            db: RwLock::new(Some(Arc::new(Db::Read(db)))),
            latest: Mutex::default(),
            origin: Origin::ReadOnlyFile {
                path: path.to_owned(),
            },
            health,
            location,
            reserve: None,
            journal: None,
            files: Arc::new(OsFiles),
        })
    }

    /// A database on any redb storage backend (an encrypted or remote block store, or a backend
    /// that fails on purpose in tests). `location` names it in messages. The backend is used
    /// exclusively by this process. redb owns it, so after an I/O error it is not reopened:
    /// every later transaction fails until the store is opened again.
    pub fn with_storage(storage: impl redb::StorageBackend, location: &str) -> Result<Self, Error> {
        let health = Health::new(location);
        let db = health.guard(|| {
            Database::builder()
                .create_with_backend(storage)
                .map_err(|e| health.fail(e))
        })?;
        Self::init(db, Origin::Fixed, location)
    }

    /// A database that lives in memory and is gone when dropped (tests, ephemeral agents).
    pub fn in_memory() -> Result<Self, Error> {
        let health = Health::new("memory");
        let db = Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(|e| health.fail(e))?;
        Self::init(db, Origin::Fixed, "memory")
    }

    /// Checks the format version, or stamps it into a new, empty database; converts the table
    /// layout of formats 1 and 2 (the logical migration is `crate::migrate`'s).
    fn init(db: Database, origin: Origin, location: &str) -> Result<Self, Error> {
        let health = Arc::new(Health::new(location));
        let h = &health;
        h.guard(|| {
            let txn = db.begin_write().map_err(|e| h.fail(e))?;
            let tables = table_names(txn.list_tables().map_err(|e| h.fail(e))?);
            let has_meta = tables.iter().any(|t| t == META.name());
            if !has_meta && !tables.is_empty() {
                return Err(Error::NotMemkv {
                    location: location.to_owned(),
                    reason: format!("it holds other tables ({})", tables.join(", ")),
                });
            }
            let found = {
                let mut meta = txn.open_table(META).map_err(|e| h.fail(e))?;
                let found = meta
                    .get(FORMAT_KEY)
                    .map_err(|e| h.fail(e))?
                    .map(|v| v.value());
                match found {
                    Some(found) => check_version(found, location)?,
                    None => {
                        meta.insert(FORMAT_KEY, LAYOUT_VERSION)
                            .map_err(|e| h.fail(e))?;
                    }
                }
                check_redb_format(&meta, location, h)?;
                let arranged = meta
                    .get(REDB_FORMAT_KEY)
                    .map_err(|e| h.fail(e))?
                    .map(|v| v.value());
                if arranged != Some(REDB_FORMAT) {
                    meta.insert(REDB_FORMAT_KEY, REDB_FORMAT)
                        .map_err(|e| h.fail(e))?;
                }
                let identified = meta.get(journal::ID_KEY).map_err(|e| h.fail(e))?.is_some();
                if !identified {
                    meta.insert(journal::ID_KEY, journal::new_id())
                        .map_err(|e| h.fail(e))?;
                }
                (found, arranged == Some(REDB_FORMAT) && identified)
            };
            let (found, arranged) = found;
            let legacy = consolidate_legacy_tables(&txn, &tables, h)?;
            let complete = [DATA.name(), SNAPSHOTS.name(), CHANGES.name()]
                .iter()
                .all(|name| tables.iter().any(|t| t == name));
            txn.open_table(DATA).map_err(|e| h.fail(e))?;
            txn.open_table(SNAPSHOTS).map_err(|e| h.fail(e))?;
            txn.open_table(CHANGES).map_err(|e| h.fail(e))?;
            if found.is_some() && complete && arranged && !legacy {
                // Nothing changed: don't spend a disk flush on opening.
                txn.abort().map_err(|e| h.fail(e))
            } else {
                txn.commit().map_err(|e| h.fail(e))
            }
        })?;
        Ok(RedbBackend {
            db: RwLock::new(Some(Arc::new(Db::Write(db)))),
            latest: Mutex::default(),
            origin,
            health,
            location: location.to_owned(),
            reserve: None,
            journal: None,
            files: Arc::new(OsFiles),
        })
    }

    /// Keeps `bytes` of the disk in reserve beside a database file opened for writing, for
    /// writes that free space when the disk is full ([`Backend::write_freeing`]; see
    /// `reserve`). Nothing for memory, a caller's storage or a read-only open.
    #[must_use]
    pub fn with_disk_reserve(mut self, bytes: u64) -> Self {
        if let Origin::File { path, .. } = &self.origin {
            if bytes > 0 {
                self.reserve = Some(Reserve::keep(Arc::clone(&self.files), path, bytes));
            } else {
                reserve::remove(&*self.files, path);
            }
        }
        self
    }

    /// A checkpoint every `records` journaled commits instead of every 2,048 (and 4 MiB), for
    /// tests that cross many checkpoints in few commits.
    #[doc(hidden)]
    #[must_use]
    pub fn checkpoint_every(self, records: u64) -> Self {
        if let Some(journal) = &self.journal {
            journal
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .checkpoint_every(records);
        }
        self
    }

    /// Bytes of the disk the reserve holds now (0 without one).
    pub fn disk_reserve(&self) -> u64 {
        self.reserve.as_ref().map_or(0, Reserve::held)
    }

    /// One write transaction (see [`Backend::write`]).
    fn write_once<R>(
        &self,
        f: impl FnMut(&mut dyn WriteTxn) -> Result<(R, Finish), Error>,
    ) -> Result<R, Error> {
        let db = self.current()?;
        let Db::Write(redb) = &*db else {
            return Err(Error::ReadOnly);
        };
        let result = txn::write(redb, &self.health, self.journal.as_deref(), f);
        // Before the caller answers anyone: reads from now on see this commit.
        let commits = self.committed();
        if let Ok(tables) = self.snapshot(&db) {
            self.share(commits, &Arc::new(tables));
        }
        result
    }

    /// Takes back the reserve's space when it is short of it (after it was given up, or while
    /// the disk was full): before any other write may use it.
    fn top_up(&self) {
        if let Some(reserve) = &self.reserve
            && reserve.short()
        {
            let _ = reserve.fill();
        }
    }

    /// Closes the file now (and its locks), whatever handles are left.
    fn close(&self) {
        let _ = self.checkpoint();
        self.committed(); // the shared snapshot holds the database open
        let slot = self
            .db
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(db) = slot.and_then(|db| Arc::try_unwrap(db).ok()) {
            db.close();
        }
    }

    /// The database's id (see `journal`), which `init` stamped.
    fn id(&self) -> Result<u64, Error> {
        let db = self.current()?;
        match &*db {
            Db::Write(redb) => txn::meta_value(redb, &self.health, journal::ID_KEY),
            Db::Read(_) => Ok(0),
        }
    }

    /// Makes every commit the journal holds part of the file itself (one redb-durable commit)
    /// and empties the journal: the file alone is then the whole database.
    pub fn checkpoint(&self) -> Result<(), Error> {
        let Some(journal) = &self.journal else {
            return Ok(());
        };
        if !journal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .holds_commits()
        {
            return Ok(());
        }
        let db = self.current()?;
        let Db::Write(redb) = &*db else {
            return Ok(());
        };
        txn::checkpoint(redb, &self.health, journal, false)
    }

    /// A new snapshot of `db`'s latest commit.
    fn snapshot(&self, db: &Db) -> Result<ReadTables, Error> {
        let h = &self.health;
        let txn = h.guard(|| {
            match db {
                Db::Write(db) => db.begin_read(),
                Db::Read(db) => db.begin_read(),
            }
            .map_err(|e| h.fail(e))
        })?;
        ReadTables::open(txn, h)
    }

    /// A transaction may have committed: the shared snapshot is dropped. Returns the count of
    /// commits, to share a snapshot begun after this.
    fn committed(&self) -> u64 {
        let mut latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        latest.commits += 1;
        let old = latest.tables.take();
        let commits = latest.commits;
        drop(latest);
        // Outside the lock: the last reference closes a read transaction.
        health::quietly(|| drop(old));
        commits
    }

    /// Shares `tables` (begun when `commits` commits had ended) unless a commit ended since.
    fn share(&self, commits: u64, tables: &Arc<ReadTables>) {
        let mut latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        if latest.commits == commits && latest.tables.is_none() {
            latest.tables = Some(Arc::clone(tables));
        }
    }

    /// The open database, reopened first if a failure left it unusable.
    fn current(&self) -> Result<Arc<Db>, Error> {
        if self.health.failed() {
            self.reopen()?;
        }
        let slot = self.db.read().unwrap_or_else(PoisonError::into_inner);
        slot.clone().ok_or_else(|| {
            Error::storage("the database was closed after a failure and could not be reopened")
        })
    }

    /// Closes the database and opens it again (a file only). On failure it stays closed and the
    /// next transaction tries again.
    fn reopen(&self) -> Result<(), Error> {
        let (path, writer) = match &self.origin {
            Origin::File { path, shared } => (path, Some(*shared)),
            Origin::ReadOnlyFile { path } => (path, None),
            Origin::Fixed => return Ok(()),
        };
        let mut slot = self.db.write().unwrap_or_else(PoisonError::into_inner);
        if !self.health.failed() {
            return Ok(()); // another thread reopened it meanwhile
        }
        // The shared snapshot holds the old database open.
        self.committed();
        if let Some(old) = slot.take() {
            // A writer still using it keeps it open; the open below then fails until it is done.
            if let Ok(old) = Arc::try_unwrap(old) {
                health::quietly(|| old.close());
            }
        }
        let db = self.health.guard(|| match writer {
            Some(shared) => {
                // On a full disk the reserve is given up through the backend's own handle,
                // which then knows to take it back (`top_up`).
                let release = || self.reserve.as_ref().is_some_and(Reserve::release);
                let how = Writable {
                    files: &*self.files,
                    shared,
                    release: &release,
                };
                let (db, applied) = open_writable(path, &how)?;
                if let Some(journal) = &self.journal {
                    // The replay above applied every record of the old journal.
                    let id = txn::meta_value(&db, &self.health, journal::ID_KEY)?;
                    let mut journal = journal.lock().unwrap_or_else(PoisonError::into_inner);
                    let fresh = Journal::open(Arc::clone(&self.files), path, id, applied)?;
                    *journal = journal.succeeded_by(fresh);
                }
                Ok(Db::Write(db))
            }
            None => open_read_only_db(path).map(Db::Read),
        })?;
        *slot = Some(Arc::new(db));
        self.health.healed();
        Ok(())
    }
}

impl Backend for RedbBackend {
    type Read<'a> = RedbRead;

    fn location(&self) -> &str {
        &self.location
    }

    fn erased(&self) -> Result<(), Error> {
        let Some(journal) = &self.journal else {
            return Ok(());
        };
        let db = self.current()?;
        let Db::Write(redb) = &*db else {
            return Ok(());
        };
        // The checkpoint and the cut under one hold of redb's write lock and the journal's.
        txn::checkpoint(redb, &self.health, journal, true)
    }

    /// redb's page checksums, on a file (see `verify`); nothing for memory or a caller's storage.
    fn verify_storage(&self) -> Result<Vec<String>, Error> {
        // The check reads the file, which holds journaled commits only after a checkpoint.
        self.checkpoint()?;
        match &self.origin {
            // A file on the caller's storage (see `Files::database`): as for `Fixed`.
            Origin::File { path, .. } if self.files.database(path).is_some() => Ok(Vec::new()),
            Origin::File { path, .. } | Origin::ReadOnlyFile { path } => verify::pages(path),
            Origin::Fixed => Ok(Vec::new()),
        }
    }

    /// For a database this process writes, the snapshot of the latest commit is opened once
    /// (by the writer, right after the commit) and shared by every read that begins before the
    /// next: a read then takes none of the locks that redb's `begin_read` shares with a commit
    /// in progress, which under a server's load made a `view` wait for the writer thread. A
    /// command answered after its commit is seen by every read that begins after the answer.
    /// A database another process writes (a read-only open) gets a snapshot per read.
    fn begin_read(&self) -> Result<RedbRead, Error> {
        let db = self.current()?;
        let ours = matches!(&*db, Db::Write(_));
        let commits = if ours {
            let latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(tables) = &latest.tables {
                return Ok(RedbRead::over(Arc::clone(tables), Arc::clone(&self.health)));
            }
            Some(latest.commits)
        } else {
            None
        };
        let tables = Arc::new(self.snapshot(&db)?);
        if let Some(commits) = commits {
            self.share(commits, &tables);
        }
        Ok(RedbRead::over(tables, Arc::clone(&self.health)))
    }

    /// redb has one writer at a time, so `lock` needs nothing, and a redb transaction never
    /// fails for another writer's sake: `f` runs once.
    fn write<R>(
        &self,
        _lock: &[&str],
        f: impl FnMut(&mut dyn WriteTxn) -> Result<(R, Finish), Error>,
    ) -> Result<R, Error> {
        let result = self.write_once(f);
        self.top_up();
        result
    }

    /// On a full disk, gives up the reserve and runs `f` once more; then takes the reserve back,
    /// as far as the disk allows.
    fn write_freeing<R>(
        &self,
        _lock: &[&str],
        mut f: impl FnMut(&mut dyn WriteTxn) -> Result<(R, Finish), Error>,
    ) -> Result<R, Error> {
        let result = match self.write_once(&mut f) {
            Err(Error::DiskFull { .. }) if self.reserve.as_ref().is_some_and(Reserve::release) => {
                self.write_once(&mut f)
            }
            other => other,
        };
        self.top_up();
        result
    }
}

impl Drop for RedbBackend {
    /// A clean close checkpoints (see `journal`): the file alone is then the whole database.
    fn drop(&mut self) {
        if let Some(journal) = &self.journal
            && !self.health.failed()
            && self.checkpoint().is_ok()
        {
            journal
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove();
        }
    }
}

#[cfg(test)]
mod tests;
