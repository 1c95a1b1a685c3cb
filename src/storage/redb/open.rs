//! What opening a file checks and converts: the layout version and the table arrangement this
//! build knows (anything newer is refused before anything is touched), the per-space tables of
//! formats 1 and 2 (moved into `memkv_data`), a file left in need of repair, and redb's open
//! errors in memkv's terms. The tables themselves are defined in `storage/redb.rs`.

use std::path::Path;

use redb::{
    DatabaseError, ReadOnlyDatabase, ReadableDatabase, ReadableTable, TableDefinition,
    WriteTransaction,
};

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
            drop(open_to_repair(path)?);
            reader().open_read_only(path)
        }
        other => other,
    }
    .map_err(|e| open_error(e, path))
}

/// Opens `path` for writing, which repairs it if a writer stopped mid-write. A repair needs free
/// space: on a full disk, the database's reserve (see `reserve`) is given up for it.
fn open_to_repair(path: &Path) -> Result<redb::Database, Error> {
    open_writable(path, false).map(|(db, _)| db)
}

/// Opens `path` for writing (see [`open_to_repair`] on a full disk) and replays the commits its
/// journal holds (see `journal`), then removes the journal. Returns the database and the number
/// of the last journaled commit it holds. A replay needs free pages too: on a full disk the
/// reserve is given up for it, as for a repair.
pub(super) fn open_writable(path: &Path, shared: bool) -> Result<(redb::Database, u64), Error> {
    match open_and_replay(path, shared) {
        Err(Error::DiskFull { .. }) if reserve::release(path) => open_and_replay(path, shared),
        other => other,
    }
}

fn open_and_replay(path: &Path, shared: bool) -> Result<(redb::Database, u64), Error> {
    let db = builder_for(shared)
        .open(path)
        .map_err(|e| open_error(e, path))?;
    let location = path.display().to_string();
    let h = Health::new(&location);
    let journal_path = journal::path_of(path);
    if !journal_path.exists() {
        let applied = txn::meta_value(&db, &h, journal::APPLIED_KEY)?;
        return Ok((db, applied));
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
    let records = journal::read_after(&journal_path, id, applied)?;
    let applied = if records.is_empty() {
        applied
    } else {
        txn::replay(&db, &h, applied, records)?
    };
    match std::fs::remove_file(&journal_path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io {
            path: journal_path,
            source: e,
        }),
        _ => Ok((db, applied)),
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
