//! Transactions over PostgreSQL. Each keeps what it has read and written in a local cache, so
//! that a command's reads cost one round trip (announced by [`ReadTxn::prefetch`]) and its
//! writes travel together with the commit: a write command costs two round trips, a `view` two.
//!
//! The cache holds every entry the transaction has seen (`None`: known to be absent) and the key
//! ranges it knows completely. Writes update it and queue their SQL; a read that misses the cache
//! sends the queued SQL first, in the same round trip, so the database agrees with the cache.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Bound, ControlFlow};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::super::{Fetch, ReadTxn, Space, Visit, WriteTxn};
use super::pool::Conn;
use super::sql;
use crate::error::Error;

pub(crate) type CacheKey = (u8, String, Vec<u8>);
/// `(space, user, start, end)`.
type KnownRange = (u8, String, Vec<u8>, Option<Vec<u8>>);

/// What a transaction knows about the database's state (as changed by its own writes).
#[derive(Default)]
pub(crate) struct Cache {
    entries: BTreeMap<CacheKey, Option<Vec<u8>>>,
    /// `(space, user, start, end)`: ranges whose every live entry is in `entries`.
    known: Vec<KnownRange>,
}

fn ck(space: Space, user: &str, key: &[u8]) -> CacheKey {
    (sql::space_number(space), user.to_owned(), key.to_vec())
}

impl Cache {
    fn covers(&self, space: Space, user: &str, start: &[u8], end: Option<&[u8]>) -> bool {
        let s = sql::space_number(space);
        self.known.iter().any(|(ks, ku, kstart, kend)| {
            *ks == s
                && ku == user
                && kstart.as_slice() <= start
                && match (kend, end) {
                    (None, _) => true,
                    (Some(_), None) => false,
                    (Some(kend), Some(end)) => end <= kend.as_slice(),
                }
        })
    }

    fn lookup(&self, space: Space, user: &str, key: &[u8]) -> Option<Option<Vec<u8>>> {
        if let Some(v) = self.entries.get(&ck(space, user, key)) {
            return Some(v.clone());
        }
        let mut end = key.to_vec();
        end.push(0);
        self.covers(space, user, key, Some(&end)).then_some(None)
    }

    fn scan(
        &self,
        space: Space,
        user: &str,
        start: &[u8],
        end: Option<&[u8]>,
        visit: Visit<'_>,
    ) -> Result<(), Error> {
        let s = sql::space_number(space);
        let lower = Bound::Included((s, user.to_owned(), start.to_vec()));
        for ((es, eu, key), value) in self.entries.range((lower, Bound::Unbounded)) {
            if *es != s || eu != user || end.is_some_and(|end| key.as_slice() >= end) {
                break;
            }
            if let Some(value) = value
                && visit(key, value)?.is_break()
            {
                break;
            }
        }
        Ok(())
    }

    /// Records the rows of a fetch (the database's state, with this transaction's writes).
    fn absorb(
        &mut self,
        fetches: &[Fetch],
        rows: Vec<postgres::SimpleQueryRow>,
    ) -> Result<(), Error> {
        for fetch in fetches {
            match fetch {
                Fetch::Get { space, user, key } => {
                    self.entries.insert(ck(*space, user, key), None);
                }
                Fetch::Range {
                    space,
                    user,
                    start,
                    end,
                } => {
                    self.drop_range(*space, user, start, end.as_deref());
                    self.known.push((
                        sql::space_number(*space),
                        user.clone(),
                        start.clone(),
                        end.clone(),
                    ));
                }
            }
        }
        for row in rows {
            let index: usize = row
                .get(0)
                .and_then(|i| i.parse().ok())
                .ok_or_else(|| Error::storage("a fetched row has no index"))?;
            let (space, user) = match &fetches[index] {
                Fetch::Get { space, user, .. } | Fetch::Range { space, user, .. } => (space, user),
            };
            let key = sql::unhex(row.get(1).unwrap_or_default())?;
            let value = sql::unhex(row.get(2).unwrap_or_default())?;
            self.entries.insert(ck(*space, user, &key), Some(value));
        }
        Ok(())
    }

    fn drop_range(&mut self, space: Space, user: &str, start: &[u8], end: Option<&[u8]>) {
        let s = sql::space_number(space);
        let doomed: Vec<CacheKey> = self
            .entries
            .range((s, user.to_owned(), start.to_vec())..)
            .map(|(k, _)| k)
            .take_while(|(es, eu, key)| {
                *es == s && eu == user && end.is_none_or(|end| key.as_slice() < end)
            })
            .cloned()
            .collect();
        for k in doomed {
            self.entries.remove(&k);
        }
    }
}

/// Where a transaction stands on its connection.
pub(crate) struct Session {
    pub(crate) conn: Option<Conn>,
    /// Sent before the first statement: `BEGIN …` and, for writers, the store locks.
    pub(crate) prologue: Option<String>,
    /// Statements not yet sent (a layout version).
    pub(crate) pending: String,
    /// Keys written and not yet sent: their final values are in the cache.
    pub(crate) dirty: BTreeSet<CacheKey>,
    /// Range removals not yet sent, sent before the keys.
    pub(crate) removed_ranges: Vec<(Space, String, Vec<u8>, Vec<u8>)>,
    pub(crate) cache: Cache,
    /// Whether anything has been sent (a transaction is open on the server).
    pub(crate) begun: bool,
    /// Whether the transaction was ended on the server.
    pub(crate) ended: bool,
    /// The database failure seen, if any, for the retry decision.
    pub(crate) failure: Option<postgres::Error>,
    pub(crate) location: String,
    /// A snapshot (whose cache may forget: the database answers the same) or a writer (whose
    /// cache holds its own writes).
    pub(crate) read_only: bool,
    /// The backend's round-trip counter.
    pub(crate) trips: Arc<AtomicU64>,
}

impl Session {
    pub(crate) fn new(
        conn: Conn,
        prologue: String,
        location: &str,
        read_only: bool,
        trips: Arc<AtomicU64>,
    ) -> Self {
        Session {
            conn: Some(conn),
            prologue: Some(prologue),
            pending: String::new(),
            dirty: BTreeSet::new(),
            removed_ranges: Vec::new(),
            cache: Cache::default(),
            begun: false,
            ended: false,
            failure: None,
            location: location.to_owned(),
            read_only,
            trips,
        }
    }

    /// Sends the prologue (once), the queued writes, `query` and `epilogue` in one round trip;
    /// returns the rows of the last statement that has any.
    pub(crate) fn run(
        &mut self,
        query: &str,
        epilogue: &str,
    ) -> Result<Vec<postgres::SimpleQueryRow>, Error> {
        let mut text = self.prologue.take().unwrap_or_default();
        self.render_writes(&mut text);
        text.push_str(&std::mem::take(&mut self.pending));
        text.push_str(query);
        text.push_str(epilogue);
        self.begun = true;
        self.trips.fetch_add(1, Ordering::Relaxed);
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| Error::storage("the connection was lost"))?;
        match conn.client().simple_query(&text) {
            Ok(messages) => Ok(sql::last_rows(messages)),
            Err(e) => {
                let err = super::query_error(&self.location, &e);
                self.failure = Some(e);
                Err(err)
            }
        }
    }

    /// The queued writes as SQL: range removals first, then one `DELETE` and one `INSERT … ON
    /// CONFLICT` for the final state of every key written (each key once).
    fn render_writes(&mut self, out: &mut String) {
        for (space, user, start, end) in self.removed_ranges.drain(..) {
            sql::remove_range(out, space, &user, &start, &end);
        }
        let dirty = std::mem::take(&mut self.dirty);
        let mut puts = Vec::new();
        let mut removes = Vec::new();
        for key in &dirty {
            match self.cache.entries.get(key) {
                Some(Some(value)) => puts.push((key, value.as_slice())),
                _ => removes.push(key),
            }
        }
        sql::remove_keys(out, &removes);
        sql::put_keys(out, &puts);
    }

    /// Forgets queued writes (the transaction is being rolled back).
    pub(crate) fn forget_writes(&mut self) {
        self.pending.clear();
        self.dirty.clear();
        self.removed_ranges.clear();
    }

    fn fetch(&mut self, fetches: &[Fetch], epilogue: &str) -> Result<(), Error> {
        if fetches.is_empty() && epilogue.is_empty() {
            return Ok(());
        }
        let query = if fetches.is_empty() {
            String::new()
        } else {
            sql::select(fetches) + ";\n"
        };
        let rows = self.run(&query, epilogue)?;
        self.cache.absorb(fetches, rows)
    }

    fn get(&mut self, space: Space, user: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        if let Some(v) = self.cache.lookup(space, user, key) {
            if self.read_only && space == Space::Contents && v.is_some() {
                // A snapshot reads the same bytes again if asked, so file contents (the bulk of
                // an export) leave the cache once read; memory stays bounded by a directory.
                let mut end = key.to_vec();
                end.push(0);
                if !self.cache.covers(space, user, key, Some(&end)) {
                    self.cache.entries.remove(&ck(space, user, key));
                }
            }
            return Ok(v);
        }
        let fetch = Fetch::Get {
            space,
            user: user.to_owned(),
            key: key.to_vec(),
        };
        self.fetch(std::slice::from_ref(&fetch), "")?;
        Ok(self.cache.lookup(space, user, key).flatten())
    }

    fn ensure_range(
        &mut self,
        space: Space,
        user: &str,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<(), Error> {
        if self.cache.covers(space, user, start, end) {
            return Ok(());
        }
        let fetch = Fetch::Range {
            space,
            user: user.to_owned(),
            start: start.to_vec(),
            end: end.map(<[u8]>::to_vec),
        };
        self.fetch(std::slice::from_ref(&fetch), "")
    }

    /// The fetches not already answered by the cache.
    fn missing(&self, fetches: &[Fetch]) -> Vec<Fetch> {
        fetches
            .iter()
            .filter(|f| match f {
                Fetch::Get { space, user, key } => self.cache.lookup(*space, user, key).is_none(),
                Fetch::Range {
                    space,
                    user,
                    start,
                    end,
                } => !self.cache.covers(*space, user, start, end.as_deref()),
            })
            .cloned()
            .collect()
    }

    fn layout_version(&mut self) -> Result<u64, Error> {
        let rows = self.run(
            "SELECT value FROM memkv_meta WHERE name = 'layout_version';\n",
            "",
        )?;
        Ok(rows
            .first()
            .and_then(|r| r.get(0))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    fn users(&mut self, space: Space) -> Result<Vec<String>, Error> {
        let query = format!(
            "SELECT DISTINCT store FROM {} WHERE space = {} ORDER BY store;\n",
            sql::ENTRIES,
            sql::space_number(space)
        );
        let rows = self.run(&query, "")?;
        rows.iter()
            .map(|r| {
                let bytes = sql::unhex(r.get(0).unwrap_or_default())?;
                String::from_utf8(bytes)
                    .map_err(|_| Error::Corrupt("a store id is not UTF-8".into()))
            })
            .collect()
    }
}

/// A read-only snapshot (`REPEATABLE READ READ ONLY`), begun with its first read.
pub struct PgRead {
    pub(crate) session: RefCell<Session>,
}

impl Drop for PgRead {
    fn drop(&mut self) {
        let session = self.session.get_mut();
        if session.begun && !session.ended {
            session.trips.fetch_add(1, Ordering::Relaxed);
            let ok = session
                .conn
                .as_mut()
                .is_some_and(|c| c.client().batch_execute("ROLLBACK").is_ok());
            if !ok && let Some(conn) = session.conn.take() {
                conn.discard();
            }
        }
    }
}

/// Reads are the same in a snapshot and a write transaction.
macro_rules! impl_read_txn {
    ($t:ty, $last:expr) => {
        impl ReadTxn for $t {
            fn layout_version(&self) -> Result<u64, Error> {
                self.session.borrow_mut().layout_version()
            }

            fn prefetch(&self, fetches: &[Fetch], last: bool) -> Result<(), Error> {
                let mut session = self.session.borrow_mut();
                let missing = session.missing(fetches);
                if $last && last && session.begun && !session.ended {
                    // The snapshot ends with this round trip: no read outside the cache follows.
                    session.ended = true;
                    return session.fetch(&missing, "COMMIT;");
                }
                session.fetch(&missing, "")
            }

            fn get(&self, space: Space, user: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
                self.session.borrow_mut().get(space, user, key)
            }

            fn scan(
                &self,
                space: Space,
                user: &str,
                start: &[u8],
                end: Option<&[u8]>,
                visit: Visit<'_>,
            ) -> Result<(), Error> {
                self.session
                    .borrow_mut()
                    .ensure_range(space, user, start, end)?;
                // Copied out: the visitor may read again.
                let mut entries = Vec::new();
                self.session
                    .borrow()
                    .cache
                    .scan(space, user, start, end, &mut |k, v| {
                        entries.push((k.to_vec(), v.to_vec()));
                        Ok(ControlFlow::Continue(()))
                    })?;
                for (k, v) in entries {
                    if visit(&k, &v)?.is_break() {
                        break;
                    }
                }
                Ok(())
            }

            fn users(
                &self,
                space: Space,
                visit: &mut dyn FnMut(&str) -> Result<ControlFlow<()>, Error>,
            ) -> Result<(), Error> {
                let users = self.session.borrow_mut().users(space)?;
                for user in users {
                    if visit(&user)?.is_break() {
                        break;
                    }
                }
                Ok(())
            }
        }
    };
}

impl_read_txn!(PgRead, true);
impl_read_txn!(PgWrite, false);

/// A write transaction (`READ COMMITTED`, after locking its stores): reads from the cache or in
/// one round trip, writes queued until the next round trip or the commit.
pub struct PgWrite {
    pub(crate) session: RefCell<Session>,
}

impl WriteTxn for PgWrite {
    fn put(&mut self, space: Space, user: &str, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let session = self.session.get_mut();
        let k = ck(space, user, key);
        session
            .cache
            .entries
            .insert(k.clone(), Some(value.to_vec()));
        session.dirty.insert(k);
        Ok(())
    }

    fn remove(&mut self, space: Space, user: &str, key: &[u8]) -> Result<(), Error> {
        let session = self.session.get_mut();
        let k = ck(space, user, key);
        session.cache.entries.insert(k.clone(), None);
        session.dirty.insert(k);
        Ok(())
    }

    fn remove_range(
        &mut self,
        space: Space,
        user: &str,
        start: &[u8],
        end: &[u8],
    ) -> Result<(), Error> {
        let session = self.session.get_mut();
        session
            .removed_ranges
            .push((space, user.to_owned(), start.to_vec(), end.to_vec()));
        session.cache.drop_range(space, user, start, Some(end));
        session.cache.known.push((
            sql::space_number(space),
            user.to_owned(),
            start.to_vec(),
            Some(end.to_vec()),
        ));
        Ok(())
    }

    fn set_layout_version(&mut self, version: u64) -> Result<(), Error> {
        let session = self.session.get_mut();
        session.pending.push_str(&format!(
            "UPDATE memkv_meta SET value = {version} WHERE name = 'layout_version';\n"
        ));
        Ok(())
    }
}
