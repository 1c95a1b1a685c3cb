//! The sync's own state, one redb file per folder (outside the folder): for each file the last
//! state both sides agreed on (the 3-way base: the memory's id and content hash, and the file's
//! fingerprint when it was that content), the change feed's cursor, and the files left out.
//!
//! Every change is committed with a flush as soon as it is known (a redb commit with immediate
//! durability, about a millisecond here): a base lost in a crash would make the sync's own
//! upload or download look like a change from elsewhere, and a file edited meanwhile a
//! conflict. Every step is idempotent against the store as well (uploads carry a
//! `content_sha256` precondition, and a file and a memory with the same hash are agreed whatever
//! the base says), so a step cut short is done again, never twice.
//!
//! redb holds the file exclusively: a second sync of the same folder is refused at once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::Error;
use crate::local::{Fp, Skip};

/// Memory path → [`Base`].
const BASES: TableDefinition<&str, &[u8]> = TableDefinition::new("bases");
/// Folder-relative name → ([`Skip`], the file's fingerprint then).
const SKIPPED: TableDefinition<&str, &[u8]> = TableDefinition::new("skipped");
/// Memory path → what a write sent and not yet answered will make it (`None`: deleted).
const SENT: TableDefinition<&str, &[u8]> = TableDefinition::new("sent");
/// Memory path → (memory id, content hash) of a download being written to the file.
const FETCHED: TableDefinition<&str, &[u8]> = TableDefinition::new("fetched");
/// `identity`, `cursor`.
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// The state file's layout; another is refused.
const LAYOUT: u32 = 1;

/// What both sides last agreed a file is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Base {
    /// The memory's id.
    pub id: String,
    /// The content's SHA-256 (hex).
    pub sha: String,
    /// The file's fingerprint when it held that content (`None`: not known, read it to tell).
    pub fp: Option<Fp>,
}

/// Where the change feed was read up to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// The database the numbers belong to (the feed's `database`).
    pub database: Option<String>,
    pub after: u64,
}

/// What a state file belongs to: a state used for another folder or store is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Identity {
    layout: u32,
    folder: PathBuf,
    url: String,
    store: String,
}

/// The state of one folder's sync.
pub struct State {
    db: Database,
    path: PathBuf,
}

fn store_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::State(format!("{}: {e}", path.display()))
}

impl State {
    /// Opens (or makes) the state in folder `dir` for syncing `folder` with `store` at `url`.
    ///
    /// # Errors
    /// [`Error::Busy`] when another sync holds it; [`Error::State`] when it belongs to another
    /// folder or store, has a layout this memkv does not know, or cannot be opened.
    pub fn open(dir: &Path, folder: &Path, url: &str, store: &str) -> Result<State, Error> {
        std::fs::create_dir_all(dir).map_err(|e| store_err(dir, e))?;
        let path = dir.join("state.redb");
        let db = match Database::create(&path) {
            Ok(db) => db,
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                return Err(Error::Busy(dir.to_owned()));
            }
            Err(e) => return Err(store_err(&path, e)),
        };
        let state = State { db, path };
        let wanted = Identity {
            layout: LAYOUT,
            folder: folder.to_owned(),
            url: url.trim_end_matches('/').to_owned(),
            store: store.to_owned(),
        };
        match state.meta::<Identity>("identity")? {
            None => state.put(META, "identity", Some(&wanted))?,
            Some(have) if have.layout != LAYOUT => {
                return Err(Error::State(format!(
                    "{}: state layout {} is not one this memkv knows ({LAYOUT})",
                    state.path.display(),
                    have.layout
                )));
            }
            Some(have) if have != wanted => {
                return Err(Error::State(format!(
                    "{} is the state of folder {} with store {} at {}: give each folder a state of its own (--state)",
                    dir.display(),
                    have.folder.display(),
                    have.store,
                    have.url
                )));
            }
            Some(_) => {}
        }
        Ok(state)
    }

    fn meta<T: for<'a> Deserialize<'a>>(&self, name: &str) -> Result<Option<T>, Error> {
        self.row(META, name)
    }

    /// `key`'s row of table `def`, if there is one.
    fn row<T: for<'a> Deserialize<'a>>(
        &self,
        def: TableDefinition<&str, &[u8]>,
        key: &str,
    ) -> Result<Option<T>, Error> {
        let txn = self.db.begin_read().map_err(|e| store_err(&self.path, e))?;
        let table = match txn.open_table(def) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(store_err(&self.path, e)),
        };
        let value = table.get(key).map_err(|e| store_err(&self.path, e))?;
        value
            .map(|v| postcard::from_bytes(v.value()).map_err(|e| store_err(&self.path, e)))
            .transpose()
    }

    /// One write transaction, committed with a flush.
    fn write(
        &self,
        body: impl FnOnce(&redb::WriteTransaction) -> Result<(), redb::Error>,
    ) -> Result<(), Error> {
        let txn = self
            .db
            .begin_write()
            .map_err(|e| store_err(&self.path, e))?;
        body(&txn).map_err(|e| store_err(&self.path, e))?;
        txn.commit().map_err(|e| store_err(&self.path, e))
    }

    /// The feed's cursor.
    pub fn cursor(&self) -> Result<Option<Cursor>, Error> {
        self.meta("cursor")
    }

    /// Records the cursor.
    pub fn set_cursor(&self, cursor: Option<&Cursor>) -> Result<(), Error> {
        self.put(META, "cursor", cursor)
    }

    /// Every base, by memory path.
    pub fn bases(&self) -> Result<BTreeMap<String, Base>, Error> {
        self.all(BASES)
    }

    fn all<T: for<'a> Deserialize<'a>>(
        &self,
        def: TableDefinition<&str, &[u8]>,
    ) -> Result<BTreeMap<String, T>, Error> {
        let txn = self.db.begin_read().map_err(|e| store_err(&self.path, e))?;
        let table = match txn.open_table(def) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(BTreeMap::new()),
            Err(e) => return Err(store_err(&self.path, e)),
        };
        let mut out = BTreeMap::new();
        for row in table.iter().map_err(|e| store_err(&self.path, e))? {
            let (k, v) = row.map_err(|e| store_err(&self.path, e))?;
            let value = postcard::from_bytes(v.value()).map_err(|e| store_err(&self.path, e))?;
            out.insert(k.value().to_owned(), value);
        }
        Ok(out)
    }

    /// Sets (or with `None` removes) the base of `path`.
    pub fn set_base(&self, path: &str, base: Option<&Base>) -> Result<(), Error> {
        self.put(BASES, path, base)
    }

    /// Sets (or with `None` removes) `key`'s row of table `def`, flushed.
    fn put<T: Serialize>(
        &self,
        def: TableDefinition<&str, &[u8]>,
        key: &str,
        value: Option<&T>,
    ) -> Result<(), Error> {
        self.write(|txn| {
            let mut t = txn.open_table(def)?;
            match value {
                Some(v) => {
                    let bytes = postcard::to_allocvec(v).expect("state values serialize");
                    t.insert(key, bytes.as_slice())?;
                }
                None => {
                    t.remove(key)?;
                }
            }
            Ok(())
        })
    }

    /// Each of `bases` set (or removed) and its write sent cleared, in one flushed commit: how
    /// an answered write ends.
    pub fn settle(&self, bases: &[(&str, Option<&Base>)]) -> Result<(), Error> {
        self.write(|txn| {
            let mut b = txn.open_table(BASES)?;
            let mut sent = txn.open_table(SENT)?;
            let mut fetched = txn.open_table(FETCHED)?;
            for (path, base) in bases {
                match base {
                    Some(base) => {
                        let bytes = postcard::to_allocvec(base).expect("bases serialize");
                        b.insert(*path, bytes.as_slice())?;
                    }
                    None => {
                        b.remove(*path)?;
                    }
                }
                sent.remove(*path)?;
                fetched.remove(*path)?;
            }
            Ok(())
        })
    }

    /// Every download being written: path → (memory id, content hash).
    pub fn fetched(&self) -> Result<BTreeMap<String, (String, String)>, Error> {
        self.all(FETCHED)
    }

    /// Records (or with `None` clears) the download being written to `path`.
    pub fn set_fetched(&self, path: &str, memory: Option<&(String, String)>) -> Result<(), Error> {
        self.put(FETCHED, path, memory)
    }

    /// Every write sent and not yet answered.
    pub fn sent(&self) -> Result<BTreeMap<String, Option<String>>, Error> {
        self.all(SENT)
    }

    /// Records (or with `None` clears) the write sent for `path`.
    pub fn set_sent(&self, path: &str, sha: Option<&Option<String>>) -> Result<(), Error> {
        self.put(SENT, path, sha)
    }

    /// Every file left out, with its fingerprint when it was looked at.
    pub fn skipped(&self) -> Result<BTreeMap<String, (Skip, Option<Fp>)>, Error> {
        self.all(SKIPPED)
    }

    /// Why `rel` is left out, if it is.
    pub fn skip_of(&self, rel: &str) -> Result<Option<(Skip, Option<Fp>)>, Error> {
        self.row(SKIPPED, rel)
    }

    /// Records (or with `None` clears) why `rel` is left out.
    pub fn set_skipped(&self, rel: &str, skip: Option<(&Skip, Option<Fp>)>) -> Result<(), Error> {
        self.put(SKIPPED, rel, skip.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_keeps_bases_and_cursor_and_refuses_another_folder() {
        let dir = tempfile::tempdir().unwrap();
        let f = Path::new("/f");
        {
            let s = State::open(dir.path(), f, "http://h/", "s").unwrap();
            assert!(matches!(
                State::open(dir.path(), f, "http://h", "s"),
                Err(Error::Busy(_))
            ));
            let b = Base {
                id: "mem_1".into(),
                sha: "ab".into(),
                fp: None,
            };
            s.set_base("/a.md", Some(&b)).unwrap();
            s.set_cursor(Some(&Cursor {
                database: Some("d".into()),
                after: 7,
            }))
            .unwrap();
            s.set_skipped("x", Some((&Skip::NotText, None))).unwrap();
        }
        let s = State::open(dir.path(), f, "http://h", "s").unwrap();
        assert_eq!(s.bases().unwrap()["/a.md"].id, "mem_1");
        assert_eq!(s.cursor().unwrap().unwrap().after, 7);
        assert_eq!(s.skipped().unwrap()["x"].0, Skip::NotText);
        drop(s);
        let e = State::open(dir.path(), Path::new("/g"), "http://h", "s")
            .err()
            .unwrap();
        assert!(e.to_string().contains("folder /f"), "{e}");
    }
}
