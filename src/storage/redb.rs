//! The redb backend: every table definition and the format version live here, and only here.
//!
//! Each [`Space`] is one redb table of `&[u8] -> &[u8]`. A stored key is the user id,
//! length-prefixed, followed by the space's own key:
//!
//! ```text
//! u32 big-endian byte length of the user id | user id (UTF-8) | key
//! ```
//!
//! The length prefix keeps users apart: no user id, however spelled, is a prefix of another
//! user's keys. The layout of the keys and values inside a space is in [`crate::layout`]; both
//! are covered by [`FORMAT_VERSION`] and written down in `docs/design.md`.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use redb::{
    ConcurrencyMode, Database, DatabaseError, ReadOnlyDatabase, ReadOnlyTable, ReadTransaction,
    ReadableDatabase, ReadableTable, TableDefinition, TableHandle, WriteTransaction,
};

use super::{Backend, ReadTxn, Space, Visit, WriteTxn};
use crate::error::Error;

/// The storage format this build reads and writes. Bump it on any change to the tables below or
/// to [`crate::layout`], and say in `docs/design.md` how older files are treated.
pub const FORMAT_VERSION: u64 = 2;
/// The oldest format this build migrates on open (see `crate::migrate`).
pub const OLDEST_MIGRATABLE: u64 = 1;

const NODES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("memkv_nodes");
const CONTENTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("memkv_contents");
const TOTALS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("memkv_totals");
/// Since format 2.
const ACCESS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("memkv_access");
/// `format_version -> u64`.
const META: TableDefinition<&str, u64> = TableDefinition::new("memkv_meta");
const FORMAT_KEY: &str = "format_version";

fn table(space: Space) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
    match space {
        Space::Nodes => NODES,
        Space::Contents => CONTENTS,
        Space::Totals => TOTALS,
        Space::Access => ACCESS,
    }
}

/// How every memkv process opens a file: one writer, any number of read-only processes beside
/// it (operators can list, export and inspect while `memkv exec` runs). All handles must agree
/// on the mode, so it is fixed here.
const MODE: ConcurrencyMode = ConcurrencyMode::SingleWriter;

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

fn builder() -> redb::Builder {
    let mut b = Database::builder();
    b.set_concurrency_mode(MODE);
    b
}

impl RedbBackend {
    /// Opens the database at `path` for writing, creating the file if it does not exist.
    pub fn create(path: &Path) -> Result<Self, Error> {
        let db = builder().create(path).map_err(|e| open_error(e, path))?;
        Self::init(db, &path.display().to_string())
    }

    /// Opens an existing database for writing; a missing file is [`Error::NotFound`].
    pub fn open(path: &Path) -> Result<Self, Error> {
        check_exists(path)?;
        let db = builder().open(path).map_err(|e| open_error(e, path))?;
        Self::init(db, &path.display().to_string())
    }

    /// Opens an existing database read-only. Works while another process writes to it, and
    /// sees that process's commits in each new snapshot. A file left behind by a process that
    /// died mid-write is repaired first (by a brief writable open) when no other process has it.
    pub fn open_read_only(path: &Path) -> Result<Self, Error> {
        check_exists(path)?;
        let db = match builder().open_read_only(path) {
            // A process died mid-write: the file needs redb's repair, which only a writer can do.
            // Do it now when no other process writes (a running writer repaired it already).
            Err(DatabaseError::RepairAborted) => {
                drop(builder().open(path).map_err(|e| open_error(e, path))?);
                builder().open_read_only(path)
            }
            other => other,
        }
        .map_err(|e| open_error(e, path))?;
        let location = path.display().to_string();
        let txn = db.begin_read().map_err(Error::storage)?;
        let tables: Vec<String> = txn
            .list_tables()
            .map_err(Error::storage)?
            .map(|t| t.name().to_owned())
            .collect();
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
            .map(|v| v.value());
        check_version(found.unwrap_or(0), &location)?;
        drop(txn);
        Ok(RedbBackend {
            db: Db::Read(db),
            location,
        })
    }

    /// A database that lives in memory and is gone when dropped (tests, ephemeral agents).
    pub fn in_memory() -> Result<Self, Error> {
        let db = Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(Error::storage)?;
        Self::init(db, "memory")
    }

    /// Checks the format version, or stamps it into a new, empty database; creates missing tables.
    fn init(db: Database, location: &str) -> Result<Self, Error> {
        let txn = db.begin_write().map_err(Error::storage)?;
        let tables: Vec<String> = txn
            .list_tables()
            .map_err(Error::storage)?
            .map(|t| t.name().to_owned())
            .collect();
        let has_meta = tables.iter().any(|t| t == META.name());
        if !has_meta && !tables.is_empty() {
            return Err(Error::NotMemkv {
                location: location.to_owned(),
                reason: format!("it holds other tables ({})", tables.join(", ")),
            });
        }
        let complete = Space::ALL
            .iter()
            .all(|s| tables.iter().any(|t| t == table(*s).name()));
        {
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
            for space in Space::ALL {
                txn.open_table(table(space)).map_err(Error::storage)?;
            }
        }
        if has_meta && complete {
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

/// `len(user) | user | key`.
fn full_key(user: &str, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + user.len() + key.len());
    out.extend_from_slice(&(user.len() as u32).to_be_bytes());
    out.extend_from_slice(user.as_bytes());
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

/// Scans `[start, end)` of one table within one user's partition.
fn scan_table(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
    user: &str,
    start: &[u8],
    end: Option<&[u8]>,
    visit: Visit<'_>,
) -> Result<(), Error> {
    let prefix_len = 4 + user.len();
    let lower = full_key(user, start);
    let upper = end.map(|end| full_key(user, end));
    let range = match &upper {
        Some(upper) => table.range::<&[u8]>(lower.as_slice()..upper.as_slice()),
        None => table.range::<&[u8]>(lower.as_slice()..),
    }
    .map_err(Error::storage)?;
    for entry in range {
        let (k, v) = entry.map_err(Error::storage)?;
        let k = k.value();
        if upper.is_none() && !k.starts_with(&lower[..prefix_len]) {
            break;
        }
        if visit(&k[prefix_len..], v.value())?.is_break() {
            break;
        }
    }
    Ok(())
}

fn users_of_table(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
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
        if visit(&user)?.is_break() {
            return Ok(());
        }
        // Skip the rest of this user's keys: the smallest key above `len | user | …`.
        next = full_key(&user, &[]);
        match increment(&mut next) {
            true => {}
            false => return Ok(()),
        }
    }
}

/// The next byte string in order after every string that starts with `bytes`; false if none.
fn increment(bytes: &mut Vec<u8>) -> bool {
    while let Some(last) = bytes.pop() {
        if last < u8::MAX {
            bytes.push(last + 1);
            return true;
        }
    }
    false
}

/// A read-only snapshot over redb.
pub struct RedbRead {
    tables: Vec<ReadOnlyTable<&'static [u8], &'static [u8]>>,
    meta: ReadOnlyTable<&'static str, u64>,
    _txn: ReadTransaction,
}

impl RedbRead {
    fn table(&self, space: Space) -> &ReadOnlyTable<&'static [u8], &'static [u8]> {
        &self.tables[space as usize]
    }
}

impl ReadTxn for RedbRead {
    fn format_version(&self) -> Result<u64, Error> {
        let v = self.meta.get(FORMAT_KEY).map_err(Error::storage)?;
        Ok(v.map_or(0, |v| v.value()))
    }

    fn get(&self, space: Space, user: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let k = full_key(user, key);
        let v = self
            .table(space)
            .get(k.as_slice())
            .map_err(Error::storage)?;
        Ok(v.map(|v| v.value().to_vec()))
    }

    fn scan(
        &self,
        space: Space,
        user: &str,
        start: &[u8],
        end: Option<&[u8]>,
        visit: Visit<'_>,
    ) -> Result<(), Error> {
        scan_table(self.table(space), user, start, end, visit)
    }

    fn users(
        &self,
        space: Space,
        visit: &mut dyn FnMut(&str) -> Result<ControlFlow<()>, Error>,
    ) -> Result<(), Error> {
        users_of_table(self.table(space), visit)
    }
}

/// A write transaction over redb. Dropped without commit, redb aborts it.
pub struct RedbWrite {
    txn: WriteTransaction,
}

impl RedbWrite {
    fn open(&self, space: Space) -> Result<redb::Table<'_, &'static [u8], &'static [u8]>, Error> {
        self.txn.open_table(table(space)).map_err(Error::storage)
    }
}

impl ReadTxn for RedbWrite {
    fn format_version(&self) -> Result<u64, Error> {
        let meta = self.txn.open_table(META).map_err(Error::storage)?;
        let v = meta.get(FORMAT_KEY).map_err(Error::storage)?;
        Ok(v.map_or(0, |v| v.value()))
    }

    fn get(&self, space: Space, user: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let k = full_key(user, key);
        let t = self.open(space)?;
        let v = t.get(k.as_slice()).map_err(Error::storage)?;
        Ok(v.map(|v| v.value().to_vec()))
    }

    fn scan(
        &self,
        space: Space,
        user: &str,
        start: &[u8],
        end: Option<&[u8]>,
        visit: Visit<'_>,
    ) -> Result<(), Error> {
        scan_table(&self.open(space)?, user, start, end, visit)
    }

    fn users(
        &self,
        space: Space,
        visit: &mut dyn FnMut(&str) -> Result<ControlFlow<()>, Error>,
    ) -> Result<(), Error> {
        users_of_table(&self.open(space)?, visit)
    }
}

impl WriteTxn for RedbWrite {
    fn set_format_version(&mut self, version: u64) -> Result<(), Error> {
        self.txn
            .open_table(META)
            .map_err(Error::storage)?
            .insert(FORMAT_KEY, version)
            .map_err(Error::storage)?;
        Ok(())
    }

    fn put(&mut self, space: Space, user: &str, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let k = full_key(user, key);
        self.open(space)?
            .insert(k.as_slice(), value)
            .map_err(Error::storage)?;
        Ok(())
    }

    fn remove(&mut self, space: Space, user: &str, key: &[u8]) -> Result<(), Error> {
        let k = full_key(user, key);
        self.open(space)?
            .remove(k.as_slice())
            .map_err(Error::storage)?;
        Ok(())
    }

    fn remove_range(
        &mut self,
        space: Space,
        user: &str,
        start: &[u8],
        end: &[u8],
    ) -> Result<(), Error> {
        let lower = full_key(user, start);
        let upper = full_key(user, end);
        self.open(space)?
            .retain_in::<&[u8], _>(lower.as_slice()..upper.as_slice(), |_, _| false)
            .map_err(Error::storage)
    }

    fn commit(self) -> Result<(), Error> {
        self.txn.commit().map_err(Error::storage)
    }
}

impl Backend for RedbBackend {
    type Read<'a> = RedbRead;
    type Write<'a> = RedbWrite;

    fn location(&self) -> &str {
        &self.location
    }

    fn begin_read(&self) -> Result<RedbRead, Error> {
        let txn = match &self.db {
            Db::Write(db) => db.begin_read(),
            Db::Read(db) => db.begin_read(),
        }
        .map_err(Error::storage)?;
        let tables = Space::ALL
            .iter()
            .map(|s| txn.open_table(table(*s)).map_err(Error::storage))
            .collect::<Result<_, _>>()?;
        let meta = txn.open_table(META).map_err(Error::storage)?;
        Ok(RedbRead {
            tables,
            meta,
            _txn: txn,
        })
    }

    fn begin_write(&self) -> Result<RedbWrite, Error> {
        match &self.db {
            Db::Write(db) => Ok(RedbWrite {
                txn: db.begin_write().map_err(Error::storage)?,
            }),
            Db::Read(_) => Err(Error::ReadOnly),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(
        txn: &impl ReadTxn,
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

    #[test]
    fn users_are_partitioned_exactly() {
        let b = RedbBackend::in_memory().unwrap();
        let mut w = b.begin_write().unwrap();
        // "a" + key "b…" must never be confused with user "ab".
        w.put(Space::Contents, "a", b"bx", b"1").unwrap();
        w.put(Space::Contents, "ab", b"x", b"2").unwrap();
        w.put(Space::Contents, "ab", b"y", b"3").unwrap();
        w.put(Space::Nodes, "zed", b"k", b"4").unwrap();
        w.commit().unwrap();
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
        assert_eq!(r.get(Space::Contents, "a", b"x").unwrap(), None);
        let mut users = Vec::new();
        r.users(Space::Contents, &mut |u| {
            users.push(u.to_owned());
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        assert_eq!(users, ["a", "ab"]);
    }

    #[test]
    fn uncommitted_writes_leave_no_trace_and_ranges_remove() {
        let b = RedbBackend::in_memory().unwrap();
        let mut w = b.begin_write().unwrap();
        for k in [b"a1", b"a2", b"b1"] {
            w.put(Space::Nodes, "u", k, b"v").unwrap();
        }
        w.commit().unwrap();
        let mut w = b.begin_write().unwrap();
        w.remove_range(Space::Nodes, "u", b"a", b"b").unwrap();
        assert_eq!(
            collect(&w, Space::Nodes, "u", b"", None),
            vec![b"b1".to_vec()]
        );
        drop(w);
        let r = b.begin_read().unwrap();
        assert_eq!(collect(&r, Space::Nodes, "u", b"", None).len(), 3);
    }

    #[test]
    fn refuses_unknown_format_and_foreign_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        drop(RedbBackend::create(&path).unwrap());
        {
            let db = Database::open(&path).unwrap();
            let w = db.begin_write().unwrap();
            w.open_table(META).unwrap().insert(FORMAT_KEY, 99).unwrap();
            w.commit().unwrap();
        }
        let err = RedbBackend::open(&path).unwrap_err();
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
            RedbBackend::open(&foreign),
            Err(Error::NotMemkv { .. })
        ));

        let garbage = dir.path().join("garbage");
        std::fs::write(&garbage, vec![0x42u8; 10_000]).unwrap();
        assert!(RedbBackend::open(&garbage).is_err());
        assert!(matches!(
            RedbBackend::open(&dir.path().join("missing")),
            Err(Error::NotFound { .. })
        ));
    }
}
