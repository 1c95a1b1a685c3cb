//! What a transaction over PostgreSQL ([`super::txn`]) stands on: its connection, and a local
//! cache of what it has read and written, so
//! that a command's reads cost one round trip (announced by [`ReadTxn::prefetch`]) and its
//! writes travel together with the commit: a write command costs two round trips, a `view` two.
//! A write whose announced reads the memo ([`super::memo`]) can answer assumes them instead, and
//! sends the assumptions with its writes and commit, to be checked there: one round trip.
//!
//! The cache holds every entry the transaction has seen (`None`: known to be absent) and the key
//! ranges it knows completely. Writes update it and queue their SQL; a read that misses the cache
//! sends the queued SQL first, in the same round trip, so the database agrees with the cache.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::super::{Fetch, LogBounds, Space};
#[cfg(doc)]
use super::super::{ReadTxn, WriteTxn};
use super::Shared;
use super::cache::{Cache, CacheKey, ck};
use super::pool::{Conn, Prepared};
use super::sql;
use crate::error::Error;
use crate::storage::watch::Changed;

/// Where a transaction stands on its connection.
pub(crate) struct Session {
    pub(crate) conn: Option<Conn>,
    /// Sent before the first statement: `BEGIN …` and, for writers, the store locks.
    pub(crate) prologue: Option<String>,
    /// Statements not yet sent (a layout version).
    pub(crate) pending: String,
    /// Keys written and not yet sent: their final values are in the cache.
    pub(crate) dirty: BTreeSet<CacheKey>,
    /// Keys of `dirty` that were absent when the transaction began ([`WriteTxn::put_new`]).
    pub(crate) fresh: HashSet<CacheKey>,
    /// Range removals not yet sent, sent before the keys.
    pub(crate) removed_ranges: Vec<(Space, String, Vec<u8>, Vec<u8>)>,
    pub(crate) cache: Cache,
    /// Whether anything has been sent (a transaction is open on the server).
    pub(crate) begun: bool,
    /// Whether the transaction was ended on the server.
    pub(crate) ended: bool,
    /// The database failure seen, if any, for the retry decision.
    pub(crate) failure: Option<postgres::Error>,
    /// A snapshot (whose cache may forget: the database answers the same) or a writer (whose
    /// cache holds its own writes).
    pub(crate) read_only: bool,
    pub(crate) shared: Arc<Shared>,
    /// The stores this writer locks (none for a snapshot), whose entries it may assume from
    /// the memo if `may_assume`.
    pub(crate) locked: Vec<String>,
    pub(crate) may_assume: bool,
    /// Entries assumed and not yet checked, with the value assumed.
    pub(crate) unchecked: Vec<(CacheKey, Option<Vec<u8>>)>,
    /// Whether anything was assumed (checked or not).
    pub(crate) assumed: bool,
    /// A check failed: the transaction must run again, with real reads.
    pub(crate) stale: bool,
    /// Whether a commit that is the only round trip may be one call of `pg_temp.memkv_write`:
    /// a writer that locks stores whose rows it knows exist, on a connection in no transaction.
    pub(crate) one_call: bool,
    /// For the memo: keys read (or assumed), keys written and ranges removed.
    pub(crate) read_keys: BTreeSet<CacheKey>,
    pub(crate) written: BTreeSet<CacheKey>,
    pub(crate) removed_log: Vec<(u8, String, Vec<u8>, Vec<u8>)>,
    /// Change-log entries to append, sent last (see [`sql::log_append`]).
    pub(crate) log: Vec<Vec<u8>>,
    /// What this writer changed that other processes watch ([`super::listen`]): notified with
    /// its commit.
    pub(crate) changed: Changed,
    /// Bookkeeping only (`WriteTxn::quiet`): nothing is noted for the notification.
    pub(crate) quiet: bool,
}

impl Session {
    pub(crate) fn new(
        conn: Conn,
        prologue: String,
        read_only: bool,
        shared: &Arc<Shared>,
        locked: Vec<String>,
    ) -> Self {
        Session {
            conn: Some(conn),
            prologue: Some(prologue),
            pending: String::new(),
            dirty: BTreeSet::new(),
            fresh: HashSet::new(),
            removed_ranges: Vec::new(),
            cache: Cache::default(),
            begun: false,
            ended: false,
            failure: None,
            read_only,
            shared: Arc::clone(shared),
            locked,
            may_assume: false,
            unchecked: Vec::new(),
            assumed: false,
            stale: false,
            one_call: false,
            read_keys: BTreeSet::new(),
            written: BTreeSet::new(),
            removed_log: Vec::new(),
            log: Vec::new(),
            changed: Changed::default(),
            quiet: false,
        }
    }

    /// Notes a write of `space`, for the commit's notification (none in a quiet transaction:
    /// `WriteTxn::quiet`).
    pub(crate) fn note(&mut self, space: Space) {
        if self.quiet {
            return;
        }
        match space {
            Space::Keys => self.changed.keys = true,
            Space::Settings => self.changed.settings = true,
            Space::Webhooks => self.changed.webhooks = true,
            _ => {}
        }
    }

    /// Sends the prologue (once), the check of what was assumed, the queued writes, `query` and
    /// `epilogue` in one round trip; returns the rows of the last statement that has any. A
    /// commit that is the transaction's only round trip is one call of `pg_temp.memkv_write`
    /// where it can be ([`Session::commit_in_one_call`]).
    pub(crate) fn run(
        &mut self,
        query: &str,
        epilogue: &str,
    ) -> Result<Vec<postgres::SimpleQueryRow>, Error> {
        self.begun = true;
        self.shared.trips.fetch_add(1, Ordering::Relaxed);
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| Error::storage("the connection was lost"))?;
        if conn.prepared.is_none() {
            // Once per connection, before its first transaction (not counted as a round trip
            // of one: a pool's connections live long).
            let merge = self.shared.merge.load(Ordering::Relaxed);
            let generic = self.shared.generic.load(Ordering::Relaxed);
            if let Err(e) = conn
                .client()
                .batch_execute(&sql::prepare_all(merge, generic))
            {
                let err = super::query_error(&self.shared.location, &e);
                self.failure = Some(e);
                return Err(err);
            }
            let _ = conn.client().batch_execute(sql::INDEX_SCANS);
            conn.prepared = Some(Prepared {
                write: super::write_fn::prepare_write(conn.client(), merge),
            });
        }
        // A commit that is the transaction's only round trip, with nothing the call cannot
        // carry (a range removal, a layout version, a notification: see `super::listen`).
        let whole = self.one_call
            && self.prologue.is_some()
            && query.is_empty()
            && epilogue == "COMMIT;"
            && self.pending.is_empty()
            && self.removed_ranges.is_empty()
            && !(self.changed.keys || self.changed.settings || self.changed.webhooks);
        if whole && let Some(call) = conn.prepared.as_ref().and_then(|p| p.write.clone()) {
            return self.commit_in_one_call(&call).map(|()| Vec::new());
        }
        let mut text = self.prologue.take().unwrap_or_default();
        sql::check(&mut text, &std::mem::take(&mut self.unchecked));
        self.render_writes(&mut text);
        text.push_str(&std::mem::take(&mut self.pending));
        text.push_str(query);
        let told = Changed {
            changes: false,
            ..self.changed
        };
        if epilogue == "COMMIT;"
            && !told.is_empty()
            && let Some(channel) = self.shared.channel.get()
        {
            text.push_str(&super::listen::notify(channel, told));
        }
        text.push_str(epilogue);
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| Error::storage("the connection was lost"))?;
        match conn.client().simple_query(&text) {
            Ok(messages) => Ok(sql::last_rows(messages)),
            Err(e) => Err(self.failed(e)),
        }
    }

    /// Notes a failed round trip: whether an assumption was stale, and the failure itself.
    pub(super) fn failed(&mut self, e: postgres::Error) -> Error {
        self.stale = e.as_db_error().is_some_and(|db| {
            *db.code() == postgres::error::SqlState::INVALID_TEXT_REPRESENTATION
                && db.message().contains(sql::STALE)
        });
        let err = super::query_error(&self.shared.location, &e);
        self.failure = Some(e);
        err
    }

    /// The queued writes as SQL: range removals first, then one `DELETE` and one upsert for the
    /// final state of every key written (each key once).
    fn render_writes(&mut self, out: &mut String) {
        for (space, user, start, end) in self.removed_ranges.drain(..) {
            sql::remove_range(out, space, &user, &start, &end);
            self.removed_log
                .push((sql::space_number(space), user, start, end));
        }
        let dirty = std::mem::take(&mut self.dirty);
        let (puts, removes) = final_state(&self.cache, &dirty);
        sql::remove_keys(out, &removes);
        sql::put_keys(out, &puts);
        self.written.extend(dirty);
        sql::log_append(out, &std::mem::take(&mut self.log));
    }

    /// Answers `fetches` (the missing part of a write's announced reads) from the memo, when it
    /// can: only point reads of stores this writer locks and the memo knows. A key the memo
    /// lacks is assumed absent (a new file's node, say). Returns whether it did.
    pub(super) fn assume(&mut self, fetches: &[Fetch]) -> bool {
        if !self.may_assume || fetches.is_empty() {
            return false;
        }
        let mut keys = Vec::with_capacity(fetches.len());
        for fetch in fetches {
            match fetch {
                Fetch::Get { space, user, key } if self.locked.contains(user) => {
                    keys.push((user.as_str(), sql::space_number(*space), key.as_slice()));
                }
                _ => return false,
            }
        }
        let Some(values) = self.shared.memo.answer(&keys) else {
            return false;
        };
        for ((user, space, key), value) in keys.into_iter().zip(values) {
            let k: CacheKey = (space, user.to_owned(), key.to_vec());
            self.cache.entries.insert(k.clone(), value.clone());
            self.read_keys.insert(k.clone());
            self.unchecked.push((k, value));
        }
        self.assumed = true;
        true
    }

    /// After the commit: what this transaction read and wrote, for the memo.
    pub(crate) fn teach_memo<'a>(&'a self) {
        use super::memo::Entry;
        type Learned<'a> = (
            Vec<(u8, &'a [u8], &'a [u8])>,
            Vec<Entry<'a>>,
            Vec<Entry<'a>>,
        );
        // One pass over each set, by store: a batch of many stores must not scan its keys once
        // per store.
        let mut by_user: HashMap<&str, Learned<'_>> = self
            .locked
            .iter()
            .map(|u| (u.as_str(), Learned::default()))
            .collect();
        for (space, user, start, end) in &self.removed_log {
            if let Some(l) = by_user.get_mut(user.as_str()) {
                l.0.push((*space, start.as_slice(), end.as_slice()));
            }
        }
        // A key the cache no longer has was in a removed range: absent.
        let cache = &self.cache;
        let entry = |k: &'a CacheKey| -> Entry<'a> {
            let value = cache.entries.get(k).and_then(Option::as_deref);
            (k.0, k.2.as_slice(), value)
        };
        for k in &self.read_keys {
            if let Some(l) = by_user.get_mut(k.1.as_str()) {
                l.1.push(entry(k));
            }
        }
        for k in &self.written {
            if let Some(l) = by_user.get_mut(k.1.as_str()) {
                l.2.push(entry(k));
            }
        }
        for (user, (removed, read, written)) in by_user {
            self.shared
                .memo
                .learn(user, &removed, &read, &written, self.assumed);
        }
    }

    /// Forgets queued writes (the transaction is being rolled back).
    pub(crate) fn forget_writes(&mut self) {
        self.pending.clear();
        self.log.clear();
        self.dirty.clear();
        self.fresh.clear();
        self.removed_ranges.clear();
    }

    pub(super) fn fetch(&mut self, fetches: &[Fetch], epilogue: &str) -> Result<(), Error> {
        if fetches.is_empty() && epilogue.is_empty() {
            return Ok(());
        }
        let query = if fetches.is_empty() {
            String::new()
        } else {
            sql::select(fetches) + ";\n"
        };
        let rows = self.run(&query, epilogue)?;
        if !self.read_only {
            for fetch in fetches {
                if let Fetch::Get { space, user, key } = fetch {
                    self.read_keys.insert(ck(*space, user, key));
                }
            }
        }
        self.cache.absorb(fetches, rows)
    }

    pub(super) fn get(
        &mut self,
        space: Space,
        user: &str,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, Error> {
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

    pub(super) fn ensure_range(
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
    pub(super) fn missing(&self, fetches: &[Fetch]) -> Vec<Fetch> {
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

    pub(super) fn log_read(
        &mut self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, Error> {
        let rows = self.run(&sql::log_read(after, limit), "")?;
        rows.iter()
            .map(|r| {
                let seq = r
                    .get(0)
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| Error::Corrupt("a change-log number is not a number".into()))?;
                Ok((seq, sql::unhex(r.get(1).unwrap_or_default())?))
            })
            .collect()
    }

    pub(super) fn log_bounds(&mut self) -> Result<LogBounds, Error> {
        let rows = self.run(sql::LOG_BOUNDS, "")?;
        let number = |i: usize| {
            rows.first()
                .and_then(|r| r.get(i))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Ok(LogBounds {
            last: number(0),
            trimmed: number(1),
        })
    }

    pub(super) fn layout_version(&mut self) -> Result<u64, Error> {
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

    pub(super) fn users(&mut self, space: Space) -> Result<Vec<String>, Error> {
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

/// What the keys written (`dirty`) end as: stored with their value in `cache`, or removed.
pub(super) fn final_state<'a>(
    cache: &'a Cache,
    dirty: &'a BTreeSet<CacheKey>,
) -> (Vec<(&'a CacheKey, &'a [u8])>, Vec<&'a CacheKey>) {
    let mut puts = Vec::new();
    let mut removes = Vec::new();
    for key in dirty {
        match cache.entries.get(key) {
            Some(Some(value)) => puts.push((key, value.as_slice())),
            _ => removes.push(key),
        }
    }
    (puts, removes)
}
