//! The redb backend: every table definition and the format version live here, and only here.
//!
//! All spaces share one redb table, `memkv_data` (`&[u8] -> &[u8]`), so that one command
//! touches one B-tree, and a user's entries sit together in it. A stored key is:
//!
//! ```text
//! u32 big-endian byte length of the user id | user id (UTF-8) | space byte | key
//! ```
//!
//! The length prefix keeps users apart: no user id, however spelled, is a prefix of another
//! user's keys. The layout of the keys and values inside a space is in `crate::layout`; both
//! are covered by [`FORMAT_VERSION`] and written down in `docs/design.md`.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use redb::{
    ConcurrencyMode, Database, DatabaseError, ReadOnlyDatabase, ReadOnlyTable, ReadTransaction,
    ReadableDatabase, ReadableTable, Table, TableDefinition, TableHandle, WriteTransaction,
};

use super::{Backend, Finish, ReadTxn, Space, Visit, WriteTxn};
use crate::error::Error;

/// The storage format this build reads and writes. Bump it on any change to the tables below or
/// to `crate::layout`, and say in `docs/design.md` how older files are treated.
pub const FORMAT_VERSION: u64 = 4;
/// The oldest format this build migrates on open (see `crate::migrate`).
pub const OLDEST_MIGRATABLE: u64 = 1;

/// Every space, since format 3.
const DATA: TableDefinition<&[u8], &[u8]> = TableDefinition::new("memkv_data");
/// `format_version -> u64`.
const META: TableDefinition<&str, u64> = TableDefinition::new("memkv_meta");
const FORMAT_KEY: &str = "format_version";

/// Formats 1 and 2 kept each space in a table of its own, keyed `len | user | key`.
const LEGACY: [(&str, Space); 4] = [
    ("memkv_nodes", Space::Nodes),
    ("memkv_contents", Space::Contents),
    ("memkv_totals", Space::Totals),
    ("memkv_access", Space::Access),
];

/// The small, hot records first and the contents last, so that the records one write touches
/// share as few pages as they can: the newest access entries (the end of `Access`), the user's
/// totals and the top-level directories (the start of `Nodes`) sit side by side.
fn space_byte(space: Space) -> u8 {
    match space {
        Space::Access => 1,
        Space::Totals => 2,
        Space::Nodes => 3,
        Space::Contents => 4,
    }
}

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

enum Db {
    Write(Database),
    Read(ReadOnlyDatabase),
}

/// The embedded default backend: one redb file (or memory), one writer at a time.
pub struct RedbBackend {
    db: Db,
    location: String,
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
    /// Opens the database at `path` for writing, creating the file if it does not exist.
    /// `shared` lets read-only processes open it meanwhile (at a second flush per commit).
    pub fn create(path: &Path, shared: bool) -> Result<Self, Error> {
        let db = builder_for(shared)
            .create(path)
            .map_err(|e| open_error(e, path))?;
        Self::init(db, &path.display().to_string())
    }

    /// Opens an existing database for writing; a missing file is [`Error::NotFound`].
    pub fn open(path: &Path, shared: bool) -> Result<Self, Error> {
        check_exists(path)?;
        let db = builder_for(shared)
            .open(path)
            .map_err(|e| open_error(e, path))?;
        Self::init(db, &path.display().to_string())
    }

    /// Opens an existing database read-only. Works while another process writes to it, and
    /// sees that process's commits in each new snapshot. A file left behind by a process that
    /// died mid-write is repaired first (by a brief writable open) when no other process has it.
    pub fn open_read_only(path: &Path) -> Result<Self, Error> {
        check_exists(path)?;
        let db = match reader().open_read_only(path) {
            // A process died mid-write: the file needs redb's repair, which only a writer can do.
            // Do it now when no other process writes (a running writer repaired it already).
            Err(DatabaseError::RepairAborted) => {
                drop(
                    builder_for(false)
                        .open(path)
                        .map_err(|e| open_error(e, path))?,
                );
                reader().open_read_only(path)
            }
            other => other,
        }
        .map_err(|e| open_error(e, path))?;
        let location = path.display().to_string();
        let txn = db.begin_read().map_err(Error::storage)?;
        let tables = table_names(txn.list_tables().map_err(Error::storage)?);
        if !tables.iter().any(|t| t == META.name()) {
            return Err(Error::NotMemkv {
                location,
                reason: "it has no memkv tables".into(),
            });
        }
        let found = txn
            .open_table(META)
            .map_err(Error::storage)?
            .get(FORMAT_KEY)
            .map_err(Error::storage)?
            .map_or(0, |v| v.value());
        check_version(found, &location)?;
        if found < FORMAT_VERSION {
            return Err(Error::NeedsMigration {
                location,
                found,
                supported: FORMAT_VERSION,
            });
        }
        drop(txn);
        Ok(RedbBackend {
            db: Db::Read(db),
            location,
        })
    }

    /// A database on any redb storage backend (an encrypted or remote block store, or a backend
    /// that fails on purpose in tests). `location` names it in messages. The backend is used
    /// exclusively by this process.
    pub fn with_storage(storage: impl redb::StorageBackend, location: &str) -> Result<Self, Error> {
        let db = Database::builder()
            .create_with_backend(storage)
            .map_err(Error::storage)?;
        Self::init(db, location)
    }

    /// A database that lives in memory and is gone when dropped (tests, ephemeral agents).
    pub fn in_memory() -> Result<Self, Error> {
        let db = Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(Error::storage)?;
        Self::init(db, "memory")
    }

    /// Checks the format version, or stamps it into a new, empty database; converts the table
    /// layout of formats 1 and 2 (the logical migration is `crate::migrate`'s).
    fn init(db: Database, location: &str) -> Result<Self, Error> {
        let txn = db.begin_write().map_err(Error::storage)?;
        let tables = table_names(txn.list_tables().map_err(Error::storage)?);
        let has_meta = tables.iter().any(|t| t == META.name());
        if !has_meta && !tables.is_empty() {
            return Err(Error::NotMemkv {
                location: location.to_owned(),
                reason: format!("it holds other tables ({})", tables.join(", ")),
            });
        }
        let found = {
            let mut meta = txn.open_table(META).map_err(Error::storage)?;
            let found = meta
                .get(FORMAT_KEY)
                .map_err(Error::storage)?
                .map(|v| v.value());
            match found {
                Some(found) => check_version(found, location)?,
                None => {
                    meta.insert(FORMAT_KEY, FORMAT_VERSION)
                        .map_err(Error::storage)?;
                }
            }
            found
        };
        let legacy = consolidate_legacy_tables(&txn, &tables)?;
        let complete = tables.iter().any(|t| t == DATA.name());
        txn.open_table(DATA).map_err(Error::storage)?;
        if found.is_some() && complete && !legacy {
            // Nothing changed: don't spend a disk flush on opening.
            txn.abort().map_err(Error::storage)?;
        } else {
            txn.commit().map_err(Error::storage)?;
        }
        Ok(RedbBackend {
            db: Db::Write(db),
            location: location.to_owned(),
        })
    }
}

/// Moves the per-space tables of formats 1 and 2 into `memkv_data`; true if there were any.
fn consolidate_legacy_tables(txn: &WriteTransaction, tables: &[String]) -> Result<bool, Error> {
    let mut any = false;
    for (name, space) in LEGACY {
        if !tables.iter().any(|t| t == name) {
            continue;
        }
        any = true;
        let old_def: TableDefinition<&[u8], &[u8]> = TableDefinition::new(name);
        {
            let old = txn.open_table(old_def).map_err(Error::storage)?;
            let mut data = txn.open_table(DATA).map_err(Error::storage)?;
            for entry in old.iter().map_err(Error::storage)? {
                let (k, v) = entry.map_err(Error::storage)?;
                let k = k.value();
                let user = user_of(k)?;
                let key = full_key(user, space, &k[4 + user.len()..]);
                data.insert(key.as_slice(), v.value())
                    .map_err(Error::storage)?;
            }
        }
        txn.delete_table(old_def).map_err(Error::storage)?;
    }
    Ok(any)
}

fn check_exists(path: &Path) -> Result<(), Error> {
    if path.exists() {
        Ok(())
    } else {
        Err(Error::NotFound {
            path: path.to_owned(),
        })
    }
}

/// Versions this build reads, or migrates, pass; others are refused before anything is touched.
fn check_version(found: u64, location: &str) -> Result<(), Error> {
    if (OLDEST_MIGRATABLE..=FORMAT_VERSION).contains(&found) {
        Ok(())
    } else {
        Err(Error::UnsupportedFormat {
            location: location.to_owned(),
            found,
            supported: FORMAT_VERSION,
        })
    }
}

fn open_error(e: DatabaseError, path: &Path) -> Error {
    match e {
        DatabaseError::DatabaseAlreadyOpen => Error::Locked {
            path: PathBuf::from(path),
        },
        DatabaseError::UpgradeRequired(v) => Error::NotMemkv {
            location: path.display().to_string(),
            reason: format!("it was written by an old redb (file format {v})"),
        },
        DatabaseError::Storage(redb::StorageError::Io(io)) => Error::storage(io),
        other => Error::NotMemkv {
            location: path.display().to_string(),
            reason: other.to_string(),
        },
    }
}

/// `len(user) | user`: the prefix of every key of `user`.
fn user_prefix(user: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + user.len() + 1 + 32);
    out.extend_from_slice(&(user.len() as u32).to_be_bytes());
    out.extend_from_slice(user.as_bytes());
    out
}

/// `len(user) | user | space | key`.
fn full_key(user: &str, space: Space, key: &[u8]) -> Vec<u8> {
    let mut out = user_prefix(user);
    out.push(space_byte(space));
    out.extend_from_slice(key);
    out
}

/// The user id of a stored key.
fn user_of(key: &[u8]) -> Result<&str, Error> {
    let corrupt = || Error::Corrupt("a stored key has no valid user prefix".into());
    let len = u32::from_be_bytes(
        key.get(..4)
            .ok_or_else(corrupt)?
            .try_into()
            .map_err(|_| corrupt())?,
    );
    let user = key.get(4..4 + len as usize).ok_or_else(corrupt)?;
    std::str::from_utf8(user).map_err(|_| corrupt())
}

/// The smallest byte string above every string that starts with `prefix`; `None` if there is
/// none (all bytes 0xFF).
fn after_prefix(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut bytes = prefix.to_vec();
    while let Some(last) = bytes.pop() {
        if last < u8::MAX {
            bytes.push(last + 1);
            return Some(bytes);
        }
    }
    None
}

type Bytes = &'static [u8];

fn get_in(
    table: &impl ReadableTable<Bytes, Bytes>,
    space: Space,
    user: &str,
    key: &[u8],
) -> Result<Option<Vec<u8>>, Error> {
    let k = full_key(user, space, key);
    let v = table.get(k.as_slice()).map_err(Error::storage)?;
    Ok(v.map(|v| v.value().to_vec()))
}

/// Scans `[start, end)` of one space within one user's partition.
fn scan_in(
    table: &impl ReadableTable<Bytes, Bytes>,
    space: Space,
    user: &str,
    start: &[u8],
    end: Option<&[u8]>,
    visit: Visit<'_>,
) -> Result<(), Error> {
    let prefix_len = 4 + user.len() + 1;
    let lower = full_key(user, space, start);
    let upper = match end {
        Some(end) => full_key(user, space, end),
        // Every key of this user and space is below the next space byte.
        None => after_prefix(&lower[..prefix_len]).expect("space bytes are below 0xFF"),
    };
    let range = table
        .range::<&[u8]>(lower.as_slice()..upper.as_slice())
        .map_err(Error::storage)?;
    for entry in range {
        let (k, v) = entry.map_err(Error::storage)?;
        if visit(&k.value()[prefix_len..], v.value())?.is_break() {
            break;
        }
    }
    Ok(())
}

fn users_in(
    table: &impl ReadableTable<Bytes, Bytes>,
    space: Space,
    visit: &mut dyn FnMut(&str) -> Result<ControlFlow<()>, Error>,
) -> Result<(), Error> {
    let mut next: Vec<u8> = Vec::new();
    loop {
        let first = table
            .range::<&[u8]>(next.as_slice()..)
            .map_err(Error::storage)?
            .next();
        let Some(entry) = first else { return Ok(()) };
        let (k, _) = entry.map_err(Error::storage)?;
        let user = user_of(k.value())?.to_owned();
        let mut has_space = false;
        scan_in(table, space, &user, &[], None, &mut |_, _| {
            has_space = true;
            Ok(ControlFlow::Break(()))
        })?;
        if has_space && visit(&user)?.is_break() {
            return Ok(());
        }
        // Skip the rest of this user's keys.
        match after_prefix(&user_prefix(&user)) {
            Some(after) => next = after,
            None => return Ok(()),
        }
    }
}

/// A read-only snapshot over redb.
pub struct RedbRead {
    data: ReadOnlyTable<Bytes, Bytes>,
    meta: ReadOnlyTable<&'static str, u64>,
    _txn: ReadTransaction,
}

/// Reads are the same over a snapshot's tables and a write transaction's.
macro_rules! impl_read_txn {
    ($t:ty) => {
        impl ReadTxn for $t {
            fn format_version(&self) -> Result<u64, Error> {
                let v = self.meta.get(FORMAT_KEY).map_err(Error::storage)?;
                Ok(v.map_or(0, |v| v.value()))
            }

            fn get(&self, space: Space, user: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
                get_in(&self.data, space, user, key)
            }

            fn scan(
                &self,
                space: Space,
                user: &str,
                start: &[u8],
                end: Option<&[u8]>,
                visit: Visit<'_>,
            ) -> Result<(), Error> {
                scan_in(&self.data, space, user, start, end, visit)
            }

            fn users(
                &self,
                space: Space,
                visit: &mut dyn FnMut(&str) -> Result<ControlFlow<()>, Error>,
            ) -> Result<(), Error> {
                users_in(&self.data, space, visit)
            }
        }
    };
}

impl_read_txn!(RedbRead);
impl_read_txn!(RedbWrite<'_>);

/// The tables of one write transaction, opened once for all of it.
pub struct RedbWrite<'t> {
    data: Table<'t, Bytes, Bytes>,
    meta: Table<'t, &'static str, u64>,
}

impl WriteTxn for RedbWrite<'_> {
    fn put(&mut self, space: Space, user: &str, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let k = full_key(user, space, key);
        self.data
            .insert(k.as_slice(), value)
            .map_err(Error::storage)?;
        Ok(())
    }

    fn remove(&mut self, space: Space, user: &str, key: &[u8]) -> Result<(), Error> {
        let k = full_key(user, space, key);
        self.data.remove(k.as_slice()).map_err(Error::storage)?;
        Ok(())
    }

    fn remove_range(
        &mut self,
        space: Space,
        user: &str,
        start: &[u8],
        end: &[u8],
    ) -> Result<(), Error> {
        let lower = full_key(user, space, start);
        let upper = full_key(user, space, end);
        self.data
            .retain_in::<&[u8], _>(lower.as_slice()..upper.as_slice(), |_, _| false)
            .map_err(Error::storage)
    }

    fn set_format_version(&mut self, version: u64) -> Result<(), Error> {
        self.meta
            .insert(FORMAT_KEY, version)
            .map_err(Error::storage)?;
        Ok(())
    }
}

impl Backend for RedbBackend {
    type Read<'a> = RedbRead;

    fn location(&self) -> &str {
        &self.location
    }

    fn begin_read(&self) -> Result<RedbRead, Error> {
        let txn = match &self.db {
            Db::Write(db) => db.begin_read(),
            Db::Read(db) => db.begin_read(),
        }
        .map_err(Error::storage)?;
        let data = txn.open_table(DATA).map_err(Error::storage)?;
        let meta = txn.open_table(META).map_err(Error::storage)?;
        Ok(RedbRead {
            data,
            meta,
            _txn: txn,
        })
    }

    fn write<R>(
        &self,
        f: impl FnOnce(&mut dyn WriteTxn) -> Result<(R, Finish), Error>,
    ) -> Result<R, Error> {
        let Db::Write(db) = &self.db else {
            return Err(Error::ReadOnly);
        };
        let txn = db.begin_write().map_err(Error::storage)?;
        let outcome = {
            let mut tables = RedbWrite {
                data: txn.open_table(DATA).map_err(Error::storage)?,
                meta: txn.open_table(META).map_err(Error::storage)?,
            };
            f(&mut tables)
        };
        match outcome {
            Ok((value, Finish::Commit)) => {
                txn.commit().map_err(Error::storage)?;
                Ok(value)
            }
            Ok((value, Finish::Abort)) => {
                txn.abort().map_err(Error::storage)?;
                Ok(value)
            }
            Err(e) => {
                // The transaction is dropped uncommitted either way; its own error adds nothing.
                let _ = txn.abort();
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(
        txn: &dyn ReadTxn,
        space: Space,
        user: &str,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        txn.scan(space, user, start, end, &mut |k, _| {
            out.push(k.to_vec());
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        out
    }

    fn commit(b: &RedbBackend, f: impl FnOnce(&mut dyn WriteTxn)) {
        b.write(|w| {
            f(w);
            Ok(((), Finish::Commit))
        })
        .unwrap();
    }

    #[test]
    fn users_and_spaces_are_partitioned_exactly() {
        let b = RedbBackend::in_memory().unwrap();
        commit(&b, |w| {
            // "a" + key "b…" must never be confused with user "ab".
            w.put(Space::Contents, "a", b"bx", b"1").unwrap();
            w.put(Space::Contents, "ab", b"x", b"2").unwrap();
            w.put(Space::Contents, "ab", b"y", b"3").unwrap();
            w.put(Space::Nodes, "ab", b"x", b"n").unwrap();
            w.put(Space::Nodes, "zed", b"k", b"4").unwrap();
        });
        let r = b.begin_read().unwrap();
        assert_eq!(
            collect(&r, Space::Contents, "a", b"", None),
            vec![b"bx".to_vec()]
        );
        assert_eq!(
            collect(&r, Space::Contents, "ab", b"", None),
            vec![b"x".to_vec(), b"y".to_vec()]
        );
        assert_eq!(
            collect(&r, Space::Contents, "ab", b"x", Some(b"y")),
            vec![b"x".to_vec()]
        );
        assert_eq!(
            collect(&r, Space::Nodes, "ab", b"", None),
            vec![b"x".to_vec()]
        );
        assert_eq!(r.get(Space::Contents, "a", b"x").unwrap(), None);
        assert_eq!(
            r.get(Space::Nodes, "ab", b"x").unwrap(),
            Some(b"n".to_vec())
        );
        let mut users = Vec::new();
        r.users(Space::Contents, &mut |u| {
            users.push(u.to_owned());
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        assert_eq!(users, ["a", "ab"]);
    }

    #[test]
    fn aborted_writes_leave_no_trace_and_ranges_remove() {
        let b = RedbBackend::in_memory().unwrap();
        commit(&b, |w| {
            for k in [b"a1", b"a2", b"b1"] {
                w.put(Space::Nodes, "u", k, b"v").unwrap();
            }
        });
        let seen = b
            .write(|w| {
                w.remove_range(Space::Nodes, "u", b"a", b"b").unwrap();
                Ok((collect(w, Space::Nodes, "u", b"", None), Finish::Abort))
            })
            .unwrap();
        assert_eq!(seen, vec![b"b1".to_vec()]);
        let failed: Result<(), Error> = b.write(|w| {
            w.remove(Space::Nodes, "u", b"a1").unwrap();
            Err(Error::Corrupt("stop".into()))
        });
        assert!(failed.is_err());
        let r = b.begin_read().unwrap();
        assert_eq!(collect(&r, Space::Nodes, "u", b"", None).len(), 3);
    }

    #[test]
    fn refuses_unknown_format_and_foreign_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        drop(RedbBackend::create(&path, false).unwrap());
        {
            let db = Database::open(&path).unwrap();
            let w = db.begin_write().unwrap();
            w.open_table(META).unwrap().insert(FORMAT_KEY, 99).unwrap();
            w.commit().unwrap();
        }
        let err = RedbBackend::open(&path, false).unwrap_err();
        assert!(
            matches!(
                err,
                Error::UnsupportedFormat {
                    found: 99,
                    supported: FORMAT_VERSION,
                    ..
                }
            ),
            "{err}"
        );
        let err = RedbBackend::open_read_only(&path).unwrap_err();
        assert!(
            matches!(err, Error::UnsupportedFormat { found: 99, .. }),
            "{err}"
        );

        let foreign = dir.path().join("foreign");
        {
            let db = Database::create(&foreign).unwrap();
            let w = db.begin_write().unwrap();
            w.open_table(TableDefinition::<&str, u64>::new("other"))
                .unwrap()
                .insert("x", 1)
                .unwrap();
            w.commit().unwrap();
        }
        assert!(matches!(
            RedbBackend::open(&foreign, false),
            Err(Error::NotMemkv { .. })
        ));
        assert!(matches!(
            RedbBackend::open_read_only(&foreign),
            Err(Error::NotMemkv { .. })
        ));

        let garbage = dir.path().join("garbage");
        std::fs::write(&garbage, vec![0x42u8; 10_000]).unwrap();
        assert!(RedbBackend::open(&garbage, false).is_err());
        assert_eq!(std::fs::read(&garbage).unwrap(), vec![0x42u8; 10_000]);
        assert!(matches!(
            RedbBackend::open(&dir.path().join("missing"), false),
            Err(Error::NotFound { .. })
        ));
    }

    #[test]
    fn read_only_handles_do_not_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        drop(RedbBackend::create(&path, false).unwrap());
        let r = RedbBackend::open_read_only(&path).unwrap();
        assert!(matches!(
            r.write(|_| Ok(((), Finish::Commit))),
            Err(Error::ReadOnly)
        ));
    }
}
