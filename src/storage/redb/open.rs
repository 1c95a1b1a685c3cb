//! What opening a file checks and converts: the layout version and the table arrangement this
//! build knows (anything newer is refused before anything is touched), the per-space tables of
//! formats 1 and 2 (moved into `memkv_data`), a file left in need of repair, and redb's open
//! errors in memkv's terms. The tables themselves are defined in `storage/redb.rs`.

use std::path::Path;

use redb::{
    DatabaseError, ReadOnlyDatabase, ReadableDatabase, ReadableTable, TableDefinition,
    WriteTransaction,
};

use super::files::{self, Files, OsFiles, Storage};
use super::health::Health;
use super::txn::{self, full_key, user_of};
use super::{DATA, LEGACY, META, REDB_FORMAT, REDB_FORMAT_KEY, builder_for, reader};
use super::{journal, reserve};
use crate::error::Error;
use crate::layout::{LAYOUT_VERSION, OLDEST_MIGRATABLE};

/// Opens `path` with redb read-only, repairing it first if a writer died mid-write.
pub(super) fn open_read_only_db(path: &Path) -> Result<ReadOnlyDatabase, Error> {
    match reader().open_read_only(path) {
        // A process died mid-write: the file needs redb's repair, which only a writer can do.
        // Do it now when no other process writes (a running writer repaired it already).
        Err(DatabaseError::RepairAborted) => {
            if !may_write(path) {
                return Err(Error::NeedsWriter {
                    location: path.display().to_string(),
                    what: "it needs redb's repair (a writer stopped mid-write)".into(),
                });
            }
            drop(open_to_repair(path)?);
            reader().open_read_only(path)
        }
        other => other,
    }
    .map_err(|e| open_error(e, path))
}

/// Whether this process may write the file at `path` and the directory holding it (to repair
/// it, replay its journal and remove the journal).
pub(super) fn may_write(path: &Path) -> bool {
    #[cfg(unix)]
    {
        let may = |p: &Path| rustix::fs::access(p, rustix::fs::Access::WRITE_OK).is_ok();
        may(path) && may(files::parent_of(path))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        true
    }
}

/// Opens `path` for writing, which repairs it if a writer stopped mid-write. A repair needs free
/// space: on a full disk, the database's reserve (see `reserve`) is given up for it.
fn open_to_repair(path: &Path) -> Result<redb::Database, Error> {
    open_writable(path, &Writable::plain(&OsFiles)).map(|(db, _)| db)
}

/// How [`open_writable`] opens a file.
pub(super) struct Writable<'a> {
    /// The filesystem of the journal (and of the file, if it says so).
    pub(super) files: &'a dyn Files,
    /// Other processes may read the file meanwhile (see `builder_for`).
    pub(super) shared: bool,
    /// Gives the disk reserve up on a full disk; true if it held something.
    pub(super) release: &'a dyn Fn() -> bool,
}

impl<'a> Writable<'a> {
    /// Exclusive, the reserve given up by its path (no process keeps it).
    pub(super) fn plain(files: &'a dyn Files) -> Self {
        Writable {
            files,
            shared: false,
            release: &no_reserve_kept,
        }
    }
}

/// No process keeps the reserve: [`open_writable`] gives it up by its path.
fn no_reserve_kept() -> bool {
    false
}

/// Opens `path` for writing (see [`open_to_repair`] on a full disk) and replays the commits its
/// journal holds (see `journal`), then removes the journal. Returns the database and the number
/// of the last journaled commit it holds. A replay needs free pages too: on a full disk the
/// reserve is given up for it, as for a repair.
pub(super) fn open_writable(
    path: &Path,
    how: &Writable<'_>,
) -> Result<(redb::Database, u64), Error> {
    let release = || (how.release)() || reserve::release(how.files, path);
    match open_and_replay(path, how, false) {
        Err(Error::DiskFull { .. }) if release() => open_and_replay(path, how, false),
        other => other,
    }
    .map(|(db, applied, _)| (db, applied))
}

/// The database file at `path`, opened by redb for writing (or on the storage `files` gives).
fn open_redb(path: &Path, how: &Writable<'_>) -> Result<redb::Database, Error> {
    let builder = builder_for(how.shared);
    match how.files.database(path) {
        Some(storage) => builder.create_with_backend(Storage(storage)),
        None => builder.open(path),
    }
    .map_err(|e| open_error(e, path))
}

/// [`open_writable`]'s work; with `accept_damage`, a damaged journal's intact records are
/// replayed and where they end is returned (see `journal::read_after`).
fn open_and_replay(
    path: &Path,
    how: &Writable<'_>,
    accept_damage: bool,
) -> Result<(redb::Database, u64, Option<u64>), Error> {
    let db = open_redb(path, how)?;
    let location = path.display().to_string();
    let h = Health::new(&location);
    let journal_path = journal::path_of(path);
    let exists = how
        .files
        .exists(&journal_path)
        .map_err(|e| io_error(&journal_path, e))?;
    if !exists {
        let applied = txn::meta_value(&db, &h, journal::APPLIED_KEY)?;
        return Ok((db, applied, None));
    }
    // A file of an arrangement this build does not know is refused before anything is written.
    h.guard(|| {
        let txn = db.begin_read().map_err(|e| h.fail(e))?;
        match txn.open_table(META) {
            Ok(meta) => check_redb_format(&meta, &location, &h),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(()),
            Err(e) => Err(h.fail(e)),
        }
    })?;
    let applied = txn::meta_value(&db, &h, journal::APPLIED_KEY)?;
    let id = txn::meta_value(&db, &h, journal::ID_KEY)?;
    let found = journal::read_after(how.files, &journal_path, id, applied, accept_damage)?;
    let applied = if found.records.is_empty() {
        applied
    } else {
        txn::replay(&db, &h, applied, found.records)?
    };
    if found.damaged_at.is_none() {
        match how.files.remove(&journal_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io_error(&journal_path, e));
            }
            _ => {}
        }
    }
    Ok((db, applied, found.damaged_at))
}

/// Before a read-only open of `path`: a writer that died with commits in its journal that
/// the file does not hold yet leaves them to be replayed, by a brief writable open (refused
/// while another process writes). A journal whose records the file holds already (or an
/// empty one) needs nothing. Without write access to the file and its directory, the
/// open is refused with [`Error::NeedsWriter`], which says so.
pub(super) fn replay_for_reading(path: &Path) -> Result<(), Error> {
    let files = OsFiles;
    let journal_path = journal::path_of(path);
    if !files.exists(&journal_path).map_err(|source| Error::Io {
        path: journal_path.clone(),
        source,
    })? {
        return Ok(());
    }
    let health = Health::new(&path.display().to_string());
    let (applied, id) = {
        let db = health.guard(|| open_read_only_db(path))?;
        let applied = txn::meta_value(&db, &health, journal::APPLIED_KEY)?;
        let id = txn::meta_value(&db, &health, journal::ID_KEY)?;
        super::health::quietly(|| drop(db.close()));
        (applied, id)
    };
    let records = journal::pending(&files, path, id, applied)?;
    if records == 0 {
        return Ok(());
    }
    if !may_write(path) {
        return Err(Error::NeedsWriter {
            location: path.display().to_string(),
            what: format!(
                "its journal holds {records} acknowledged commit(s) that the file does not hold yet (a writer stopped without closing it)"
            ),
        });
    }
    drop(open_writable(path, &Writable::plain(&files))?);
    Ok(())
}

/// What `accept_journal_loss` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalLoss {
    /// Commits replayed from the journal (its intact records before any damage).
    pub replayed: usize,
    /// Where the damage began, if the journal was damaged: every record from this byte on is
    /// given up.
    pub damaged_at: Option<u64>,
    /// Where the damaged journal was kept (`DB.journal.damaged`, or with a number after it).
    pub kept_as: Option<std::path::PathBuf>,
}

/// Opens the database at `path` for writing, replaying the intact records of its journal even
/// if records after them are damaged (which a plain open refuses), and keeps a damaged journal
/// beside it under another name: the operator's explicit acceptance of losing those records.
pub(super) fn accept_journal_loss(path: &Path) -> Result<JournalLoss, Error> {
    check_exists(path)?;
    let files = OsFiles;
    let how = Writable::plain(&files);
    let journal_path = journal::path_of(path);
    let before = txn_applied(path, &how)?;
    let (db, applied, damaged_at) = open_and_replay(path, &how, true)?;
    drop(db);
    let replayed = usize::try_from(applied.saturating_sub(before)).unwrap_or(usize::MAX);
    let Some(offset) = damaged_at else {
        return Ok(JournalLoss {
            replayed,
            damaged_at: None,
            kept_as: None,
        });
    };
    let mut kept_as = journal_path.with_file_name(format!(
        "{}.damaged",
        journal_path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
    ));
    let mut n = 1;
    loop {
        match files.rename_new(&journal_path, &kept_as) {
            Ok(()) => break,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => {
                kept_as.set_extension(format!("damaged.{n}"));
                n += 1;
            }
            Err(e) => return Err(io_error(&journal_path, e)),
        }
    }
    files
        .sync_dir(files::parent_of(path))
        .map_err(|e| io_error(path, e))?;
    Ok(JournalLoss {
        replayed,
        damaged_at: Some(offset),
        kept_as: Some(kept_as),
    })
}

/// The number of the last journaled commit the file at `path` holds.
fn txn_applied(path: &Path, how: &Writable<'_>) -> Result<u64, Error> {
    let db = open_redb(path, how)?;
    let h = Health::new(&path.display().to_string());
    txn::meta_value(&db, &h, journal::APPLIED_KEY)
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// Moves the per-space tables of formats 1 and 2 into `memkv_data`; true if there were any.
pub(super) fn consolidate_legacy_tables(
    txn: &WriteTransaction,
    tables: &[String],
    h: &Health,
) -> Result<bool, Error> {
    let mut any = false;
    for (name, space) in LEGACY {
        if !tables.iter().any(|t| t == name) {
            continue;
        }
        any = true;
        let old_def: TableDefinition<&[u8], &[u8]> = TableDefinition::new(name);
        {
            let old = txn.open_table(old_def).map_err(|e| h.fail(e))?;
            let mut data = txn.open_table(DATA).map_err(|e| h.fail(e))?;
            for entry in old.iter().map_err(|e| h.fail(e))? {
                let (k, v) = entry.map_err(|e| h.fail(e))?;
                let k = k.value();
                let user = user_of(k)?;
                let key = full_key(user, space, &k[4 + user.len()..]);
                data.insert(key.as_slice(), v.value())
                    .map_err(|e| h.fail(e))?;
            }
        }
        txn.delete_table(old_def).map_err(|e| h.fail(e))?;
    }
    Ok(any)
}

pub(super) fn check_exists(path: &Path) -> Result<(), Error> {
    if path.exists() {
        Ok(())
    } else {
        Err(Error::NotFound {
            location: path.display().to_string(),
        })
    }
}

/// Versions this build reads, or migrates, pass; others are refused before anything is touched.
pub(super) fn check_version(found: u64, location: &str) -> Result<(), Error> {
    if (OLDEST_MIGRATABLE..=LAYOUT_VERSION).contains(&found) {
        Ok(())
    } else {
        Err(Error::UnsupportedFormat {
            location: location.to_owned(),
            found,
            supported: LAYOUT_VERSION,
        })
    }
}

/// A file whose tables are arranged in a way this build does not know is refused.
pub(super) fn check_redb_format(
    meta: &impl ReadableTable<&'static str, u64>,
    location: &str,
    health: &Health,
) -> Result<(), Error> {
    let found = meta
        .get(REDB_FORMAT_KEY)
        .map_err(|e| health.fail(e))?
        .map_or(REDB_FORMAT, |v| v.value());
    if found > REDB_FORMAT {
        return Err(Error::NotMemkv {
            location: location.to_owned(),
            reason: format!(
                "its redb tables are in arrangement {found}, this memkv knows {REDB_FORMAT}; use a newer memkv"
            ),
        });
    }
    Ok(())
}

pub(super) fn open_error(e: DatabaseError, path: &Path) -> Error {
    match e {
        DatabaseError::DatabaseAlreadyOpen => Error::Locked {
            location: path.display().to_string(),
        },
        DatabaseError::UpgradeRequired(v) => Error::NotMemkv {
            location: path.display().to_string(),
            reason: format!("it was written by an old redb (file format {v})"),
        },
        // A writer stopped mid-write (a crash, or a full disk): redb's repair rewrites the
        // file's allocator state, which needs free pages on the disk.
        DatabaseError::RepairAborted => Error::storage(format!(
            "{}: the database needs redb's repair (a writer stopped mid-write), which could not finish: it needs free space on the file's disk; free some and open it again (e.g. `memkv check`)",
            path.display()
        )),
        DatabaseError::Storage(redb::StorageError::Io(io)) if super::health::is_full(&io) => {
            Error::DiskFull {
                location: path.display().to_string(),
            }
        }
        DatabaseError::Storage(redb::StorageError::Io(io)) => {
            Error::storage(format!("{}: {io}", path.display()))
        }
        DatabaseError::Storage(redb::StorageError::Corrupted(reason))
            if reason.contains("magic number") =>
        {
            Error::NotMemkv {
                location: path.display().to_string(),
                reason: format!("not a redb file ({reason})"),
            }
        }
        DatabaseError::Storage(redb::StorageError::Corrupted(reason)) => {
            Error::storage(format!("{}: {reason}", path.display()))
        }
        other => Error::NotMemkv {
            location: path.display().to_string(),
            reason: other.to_string(),
        },
    }
}
