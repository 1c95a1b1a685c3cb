//! Transactions over the redb tables: the stored key of `(user, space, key)`, reads and scans
//! within one user's partition, and writes; every call into redb under [`Health::guard`].

use std::ops::ControlFlow;
use std::sync::{Arc, Mutex, PoisonError};

use redb::{
    Database, Durability, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable, Table,
    TableError, WriteTransaction,
};

use super::health::{self, Health};
use super::journal::{APPLIED_KEY, Journal, Op};
use super::{CHANGES, DATA, FORMAT_KEY, META, SNAPSHOTS, TRIMMED_KEY};
use crate::error::Error;
use crate::storage::{Finish, LogBounds, ReadTxn, Space, Visit, WriteTxn};

/// `len(user) | user`: the prefix of every key of `user`.
pub(super) fn user_prefix(user: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + user.len() + 1 + 32);
    out.extend_from_slice(&(user.len() as u32).to_be_bytes());
    out.extend_from_slice(user.as_bytes());
    out
}

/// `len(user) | user | space | key`.
pub(super) fn full_key(user: &str, space: Space, key: &[u8]) -> Vec<u8> {
    let mut out = user_prefix(user);
    out.push(space.numbers().redb);
    out.extend_from_slice(key);
    out
}

/// The user id of a stored key.
pub(super) fn user_of(key: &[u8]) -> Result<&str, Error> {
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
pub(super) fn after_prefix(prefix: &[u8]) -> Option<Vec<u8>> {
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

fn log_read_in(
    table: &impl ReadableTable<u64, Bytes>,
    h: &Health,
    after: u64,
    limit: usize,
) -> Result<Vec<(u64, Vec<u8>)>, Error> {
    h.guard(|| {
        let Some(first) = after.checked_add(1) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for entry in table.range(first..).map_err(|e| h.fail(e))?.take(limit) {
            let (k, v) = entry.map_err(|e| h.fail(e))?;
            out.push((k.value(), v.value().to_vec()));
        }
        Ok(out)
    })
}

fn log_bounds_in(
    table: Option<&impl ReadableTable<u64, Bytes>>,
    meta: &impl ReadableTable<&'static str, u64>,
    h: &Health,
) -> Result<LogBounds, Error> {
    h.guard(|| {
        let trimmed = meta
            .get(TRIMMED_KEY)
            .map_err(|e| h.fail(e))?
            .map_or(0, |v| v.value());
        let last = match table {
            Some(table) => table
                .last()
                .map_err(|e| h.fail(e))?
                .map_or(0, |(k, _)| k.value()),
            None => 0,
        };
        // An empty log after a trim still remembers how far it went.
        Ok(LogBounds {
            last: last.max(trimmed),
            trimmed,
        })
    })
}

fn get_in(
    table: &impl ReadableTable<Bytes, Bytes>,
    h: &Health,
    space: Space,
    user: &str,
    key: &[u8],
) -> Result<Option<Vec<u8>>, Error> {
    h.guard(|| {
        let k = full_key(user, space, key);
        let v = table.get(k.as_slice()).map_err(|e| h.fail(e))?;
        Ok(v.map(|v| v.value().to_vec()))
    })
}

/// Scans `[start, end)` of one space within one user's partition.
fn scan_in(
    table: &impl ReadableTable<Bytes, Bytes>,
    h: &Health,
    space: Space,
    user: &str,
    start: &[u8],
    end: Option<&[u8]>,
    visit: Visit<'_>,
) -> Result<(), Error> {
    h.guard(|| {
        let prefix_len = 4 + user.len() + 1;
        let lower = full_key(user, space, start);
        let upper = match end {
            Some(end) => full_key(user, space, end),
            // Every key of this user and space is below the next space byte.
            None => after_prefix(&lower[..prefix_len]).expect("space bytes are below 0xFF"),
        };
        let range = table
            .range::<&[u8]>(lower.as_slice()..upper.as_slice())
            .map_err(|e| h.fail(e))?;
        for entry in range {
            let (k, v) = entry.map_err(|e| h.fail(e))?;
            let key = k
                .value()
                .get(prefix_len..)
                .ok_or_else(|| Error::Corrupt("a stored key lies outside its range".into()))?;
            if visit(key, v.value())?.is_break() {
                break;
            }
        }
        Ok(())
    })
}

fn users_in(
    table: &impl ReadableTable<Bytes, Bytes>,
    h: &Health,
    space: Space,
    visit: &mut dyn FnMut(&str) -> Result<ControlFlow<()>, Error>,
) -> Result<(), Error> {
    let mut next: Vec<u8> = Vec::new();
    loop {
        let first = h.guard(|| {
            let first = table
                .range::<&[u8]>(next.as_slice()..)
                .map_err(|e| h.fail(e))?
                .next();
            match first {
                None => Ok(None),
                Some(entry) => {
                    let (k, _) = entry.map_err(|e| h.fail(e))?;
                    Ok(Some(user_of(k.value())?.to_owned()))
                }
            }
        })?;
        let Some(user) = first else { return Ok(()) };
        let mut has_space = false;
        scan_in(table, h, space, &user, &[], None, &mut |_, _| {
            has_space = true;
            Ok(ControlFlow::Break(()))
        })?;
        if has_space && visit(&user)?.is_break() {
            return Ok(());
        }
        // Skip the rest of this user's keys.
        match after_prefix(&user_prefix(&user)) {
            Some(after) if after > next => next = after,
            // A damaged page can hand back keys out of order; never loop on them.
            Some(_) => {
                return Err(Error::Corrupt("stored keys are out of order".into()));
            }
            None => return Ok(()),
        }
    }
}

/// A read-only snapshot over redb: its own, or the latest commit's, shared with every read
/// that began before the next commit (see `RedbBackend::begin_read`).
pub struct RedbRead {
    /// Dropped under [`Health::guard`] (see `Drop`); `None` only while dropping.
    inner: Option<Arc<ReadTables>>,
    health: Arc<Health>,
}

/// A read transaction and its tables, opened once.
pub(super) struct ReadTables {
    data: ReadOnlyTable<Bytes, Bytes>,
    /// `None` in a file of an older layout, which has none (it is created on a writable open).
    snapshots: Option<ReadOnlyTable<Bytes, Bytes>>,
    meta: ReadOnlyTable<&'static str, u64>,
    /// `None` in a file of an older layout (created on a writable open).
    changes: Option<ReadOnlyTable<u64, Bytes>>,
    _txn: ReadTransaction,
}

impl ReadTables {
    /// The tables of `txn`.
    pub(super) fn open(txn: ReadTransaction, h: &Health) -> Result<Self, Error> {
        h.guard(|| {
            let data = txn.open_table(DATA).map_err(|e| h.fail(e))?;
            let snapshots = match txn.open_table(SNAPSHOTS) {
                Ok(table) => Some(table),
                Err(TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(h.fail(e)),
            };
            let meta = txn.open_table(META).map_err(|e| h.fail(e))?;
            let changes = match txn.open_table(CHANGES) {
                Ok(table) => Some(table),
                Err(TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(h.fail(e)),
            };
            Ok(ReadTables {
                data,
                snapshots,
                meta,
                changes,
                _txn: txn,
            })
        })
    }

    /// The table of `space`; `None` when it has none yet, and so no entry.
    fn of(&self, space: Space) -> Option<&ReadOnlyTable<Bytes, Bytes>> {
        match space {
            Space::Snapshots => self.snapshots.as_ref(),
            _ => Some(&self.data),
        }
    }
}

impl Drop for RedbRead {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            health::quietly(|| drop(inner));
        }
    }
}

impl RedbRead {
    /// A snapshot over `tables` (which other snapshots may share).
    pub(super) fn over(tables: Arc<ReadTables>, health: Arc<Health>) -> Self {
        RedbRead {
            inner: Some(tables),
            health,
        }
    }

    pub(super) fn tables(&self) -> &ReadTables {
        self.inner.as_ref().expect("present until dropped")
    }
}

impl ReadTxn for RedbRead {
    fn layout_version(&self) -> Result<u64, Error> {
        let h = &*self.health;
        h.guard(|| {
            let v = self.tables().meta.get(FORMAT_KEY).map_err(|e| h.fail(e))?;
            Ok(v.map_or(0, |v| v.value()))
        })
    }

    fn get(&self, space: Space, user: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        match self.tables().of(space) {
            Some(table) => get_in(table, &self.health, space, user, key),
            None => Ok(None),
        }
    }

    fn scan(
        &self,
        space: Space,
        user: &str,
        start: &[u8],
        end: Option<&[u8]>,
        visit: Visit<'_>,
    ) -> Result<(), Error> {
        match self.tables().of(space) {
            Some(table) => scan_in(table, &self.health, space, user, start, end, visit),
            None => Ok(()),
        }
    }

    fn users(
        &self,
        space: Space,
        visit: &mut dyn FnMut(&str) -> Result<ControlFlow<()>, Error>,
    ) -> Result<(), Error> {
        match self.tables().of(space) {
            Some(table) => users_in(table, &self.health, space, visit),
            None => Ok(()),
        }
    }

    fn log_read(&self, after: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>, Error> {
        match &self.tables().changes {
            Some(table) => log_read_in(table, &self.health, after, limit),
            None => Ok(Vec::new()),
        }
    }

    fn log_bounds(&self) -> Result<LogBounds, Error> {
        let t = self.tables();
        log_bounds_in(t.changes.as_ref(), &t.meta, &self.health)
    }
}

/// The tables of one write transaction, opened once for all of it. Every effect on them goes
/// through the `do_*` methods, which also record it for the journal when there is one.
pub struct RedbWrite<'t> {
    data: Table<'t, Bytes, Bytes>,
    snapshots: Table<'t, Bytes, Bytes>,
    meta: Table<'t, &'static str, u64>,
    changes: Table<'t, u64, Bytes>,
    health: &'t Health,
    /// What this transaction changed, for the journal (`None`: no journal).
    ops: Option<Vec<Op>>,
}

impl<'t> RedbWrite<'t> {
    fn of(&self, space: Space) -> &Table<'t, Bytes, Bytes> {
        match space {
            Space::Snapshots => &self.snapshots,
            _ => &self.data,
        }
    }

    fn table(&mut self, snapshots: bool) -> &mut Table<'t, Bytes, Bytes> {
        if snapshots {
            &mut self.snapshots
        } else {
            &mut self.data
        }
    }

    fn record(&mut self, op: impl FnOnce() -> Op) {
        if let Some(ops) = &mut self.ops {
            ops.push(op());
        }
    }

    /// Inserts `value` under the stored `key` (the effect of [`Op::Put`]), recording it only
    /// when there is a journal: without one the value is never copied.
    fn insert(&mut self, snapshots: bool, key: Vec<u8>, value: &[u8]) -> Result<(), Error> {
        let h = self.health;
        h.guard(|| {
            self.table(snapshots)
                .insert(key.as_slice(), value)
                .map_err(|e| h.fail(e))?;
            Ok(())
        })?;
        self.record(|| Op::Put {
            snapshots,
            key,
            value: value.to_vec(),
        });
        Ok(())
    }

    /// Inserts the change-log entry `seq` (the effect of [`Op::LogPut`]), recorded as
    /// [`RedbWrite::insert`] records.
    fn insert_log(&mut self, seq: u64, value: &[u8]) -> Result<(), Error> {
        let h = self.health;
        h.guard(|| {
            self.changes.insert(seq, value).map_err(|e| h.fail(e))?;
            Ok(())
        })?;
        self.record(|| Op::LogPut {
            seq,
            value: value.to_vec(),
        });
        Ok(())
    }

    /// Applies `op` (and records it).
    fn apply(&mut self, op: Op) -> Result<(), Error> {
        match op {
            Op::Put {
                snapshots,
                key,
                value,
            } => return self.insert(snapshots, key, &value),
            Op::LogPut { seq, value } => return self.insert_log(seq, &value),
            _ => {}
        }
        let h = self.health;
        h.guard(|| {
            match &op {
                Op::Put { .. } | Op::LogPut { .. } => {}
                Op::Remove { snapshots, key } => {
                    self.table(*snapshots)
                        .remove(key.as_slice())
                        .map_err(|e| h.fail(e))?;
                }
                Op::RemoveRange {
                    snapshots,
                    start,
                    end,
                } => self
                    .table(*snapshots)
                    .retain_in::<&[u8], _>(start.as_slice()..end.as_slice(), |_, _| false)
                    .map_err(|e| h.fail(e))?,
                Op::Meta { key, value } => {
                    self.meta
                        .insert(key.as_str(), *value)
                        .map_err(|e| h.fail(e))?;
                }
                Op::LogTrim { through } => self
                    .changes
                    .retain_in(..=*through, |_, _| false)
                    .map_err(|e| h.fail(e))?,
            }
            Ok(())
        })?;
        self.record(|| op);
        Ok(())
    }
}

impl ReadTxn for RedbWrite<'_> {
    fn layout_version(&self) -> Result<u64, Error> {
        let h = self.health;
        h.guard(|| {
            let v = self.meta.get(FORMAT_KEY).map_err(|e| h.fail(e))?;
            Ok(v.map_or(0, |v| v.value()))
        })
    }

    fn get(&self, space: Space, user: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        get_in(self.of(space), self.health, space, user, key)
    }

    fn scan(
        &self,
        space: Space,
        user: &str,
        start: &[u8],
        end: Option<&[u8]>,
        visit: Visit<'_>,
    ) -> Result<(), Error> {
        scan_in(self.of(space), self.health, space, user, start, end, visit)
    }

    fn users(
        &self,
        space: Space,
        visit: &mut dyn FnMut(&str) -> Result<ControlFlow<()>, Error>,
    ) -> Result<(), Error> {
        users_in(self.of(space), self.health, space, visit)
    }

    fn log_read(&self, after: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>, Error> {
        log_read_in(&self.changes, self.health, after, limit)
    }

    fn log_bounds(&self) -> Result<LogBounds, Error> {
        log_bounds_in(Some(&self.changes), &self.meta, self.health)
    }
}

impl WriteTxn for RedbWrite<'_> {
    fn put(&mut self, space: Space, user: &str, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.insert(space == Space::Snapshots, full_key(user, space, key), value)
    }

    fn remove(&mut self, space: Space, user: &str, key: &[u8]) -> Result<(), Error> {
        self.apply(Op::Remove {
            snapshots: space == Space::Snapshots,
            key: full_key(user, space, key),
        })
    }

    fn remove_range(
        &mut self,
        space: Space,
        user: &str,
        start: &[u8],
        end: &[u8],
    ) -> Result<(), Error> {
        self.apply(Op::RemoveRange {
            snapshots: space == Space::Snapshots,
            start: full_key(user, space, start),
            end: full_key(user, space, end),
        })
    }

    fn set_layout_version(&mut self, version: u64) -> Result<(), Error> {
        self.apply(Op::Meta {
            key: FORMAT_KEY.to_owned(),
            value: version,
        })
    }

    fn log_append(&mut self, entries: &[Vec<u8>]) -> Result<(), Error> {
        // One writer at a time: the next number is the last one's successor.
        let first = self.log_bounds()?.last + 1;
        for (seq, entry) in (first..).zip(entries) {
            self.insert_log(seq, entry)?;
        }
        Ok(())
    }

    fn log_rewrite(&mut self, seq: u64, value: &[u8]) -> Result<(), Error> {
        let h = self.health;
        let present = h.guard(|| Ok(self.changes.get(seq).map_err(|e| h.fail(e))?.is_some()))?;
        if present {
            self.insert_log(seq, value)?;
        }
        Ok(())
    }

    fn log_trim(&mut self, through: u64) -> Result<(), Error> {
        let bounds = self.log_bounds()?;
        if through <= bounds.trimmed {
            return Ok(());
        }
        self.apply(Op::LogTrim { through })?;
        self.apply(Op::Meta {
            key: TRIMMED_KEY.to_owned(),
            value: through.min(bounds.last),
        })
    }

    fn log_skip(&mut self, to: u64) -> Result<(), Error> {
        let bounds = self.log_bounds()?;
        if to <= bounds.last {
            return Ok(());
        }
        self.apply(Op::LogTrim { through: to })?;
        self.apply(Op::Meta {
            key: TRIMMED_KEY.to_owned(),
            value: to,
        })
    }
}

/// The tables of `txn`, recording what changes for a journal if `journaled`.
fn open_tables<'t>(
    txn: &'t WriteTransaction,
    h: &'t Health,
    journaled: bool,
) -> Result<RedbWrite<'t>, Error> {
    h.guard(|| {
        Ok(RedbWrite {
            data: txn.open_table(DATA).map_err(|e| h.fail(e))?,
            snapshots: txn.open_table(SNAPSHOTS).map_err(|e| h.fail(e))?,
            meta: txn.open_table(META).map_err(|e| h.fail(e))?,
            changes: txn.open_table(CHANGES).map_err(|e| h.fail(e))?,
            health: h,
            ops: journaled.then(Vec::new),
        })
    })
}

/// The value of `key` in `memkv_meta` in `db`'s latest commit (0: none), e.g. the number of the
/// last journaled commit it holds.
pub(super) fn meta_value(db: &impl ReadableDatabase, h: &Health, key: &str) -> Result<u64, Error> {
    h.guard(|| {
        let txn = db.begin_read().map_err(|e| h.fail(e))?;
        let meta = match txn.open_table(META) {
            Ok(meta) => meta,
            Err(TableError::TableDoesNotExist(_)) => return Ok(0),
            Err(e) => return Err(h.fail(e)),
        };
        let value = meta.get(key).map_err(|e| h.fail(e))?;
        Ok(value.map_or(0, |v| v.value()))
    })
}

/// Applies each commit of `records` (a journal's, after `applied`) in one durable transaction.
pub(super) fn replay(
    db: &Database,
    h: &Health,
    applied: u64,
    records: Vec<Vec<Op>>,
) -> Result<u64, Error> {
    let txn = h.guard(|| db.begin_write().map_err(|e| h.fail(e)))?;
    let mut tables = open_tables(&txn, h, false)?;
    let mut number = applied;
    for ops in records {
        for op in ops {
            tables.apply(op)?;
        }
        number += 1;
    }
    tables.apply(Op::Meta {
        key: APPLIED_KEY.to_owned(),
        value: number,
    })?;
    health::quietly(|| drop(tables));
    h.guard(|| txn.commit().map_err(|e| h.fail(e)))?;
    Ok(number)
}

/// Runs `f` in one write transaction of `db`, committed if it says so (see
/// [`crate::storage::Backend::write`]): through `journal` when there is one (see `journal`),
/// else with redb's durable commit.
pub(super) fn write<R>(
    db: &Database,
    h: &Health,
    journal: Option<&Mutex<Journal>>,
    mut f: impl FnMut(&mut dyn WriteTxn) -> Result<(R, Finish), Error>,
) -> Result<R, Error> {
    let mut txn = h.guard(|| db.begin_write().map_err(|e| h.fail(e)))?;
    let mut tables = open_tables(&txn, h, journal.is_some())?;
    let outcome = f(&mut tables);
    let value = match outcome {
        Ok((value, Finish::Commit)) => value,
        Ok((value, Finish::Abort)) => {
            health::quietly(|| drop(tables));
            h.guard(|| txn.abort().map_err(|e| h.fail(e)))?;
            return Ok(value);
        }
        Err(e) => {
            health::quietly(|| drop(tables));
            // The transaction is dropped uncommitted either way; its own error adds nothing.
            let _ = txn.abort();
            return Err(e);
        }
    };
    let Some(journal) = journal else {
        health::quietly(|| drop(tables));
        h.guard(|| txn.commit().map_err(|e| h.fail(e)))?;
        return Ok(value);
    };
    let mut journal = journal.lock().unwrap_or_else(PoisonError::into_inner);
    let number = journal.next();
    let ops = tables.ops.take().unwrap_or_default();
    let checkpoint = journal.checkpoint_due(ops.iter().map(Op::size).sum());
    if ops.is_empty() && !checkpoint {
        health::quietly(|| drop(tables));
        // Nothing to make durable: a commit that only redb's memory holds loses nothing.
        return h
            .guard(|| {
                txn.set_durability(Durability::None)
                    .map_err(|e| Error::storage(e.to_string()))?;
                txn.commit().map_err(|e| h.fail(e))
            })
            .map(|()| value);
    }
    let stamped = tables.apply(Op::Meta {
        key: APPLIED_KEY.to_owned(),
        value: number,
    });
    health::quietly(|| drop(tables));
    if let Err(e) = stamped {
        let _ = txn.abort();
        return Err(e);
    }
    if checkpoint {
        h.guard(|| txn.commit().map_err(|e| h.fail(e)))?;
        // Everything up to `number` is in the file: the journal starts over.
        journal.checkpointed(number);
        return Ok(value);
    }
    if let Err(e) = journal.append(number, ops) {
        let _ = txn.abort();
        if matches!(e, Error::OutcomeUnknown { .. }) {
            // Fail-stop: the journal's state is unknown; the reopen before the next
            // transaction replays what the disk holds, and a new journal starts.
            h.force_reopen();
        }
        return Err(e);
    }
    // Durable from here on: a commit that redb fails now is applied by the replay of the
    // reopen that the failure forces before the next transaction.
    let committed = h.guard(|| {
        txn.set_durability(Durability::None)
            .map_err(|e| Error::storage(e.to_string()))?;
        txn.commit().map_err(|e| h.fail(e))
    });
    if let Err(e) = committed {
        if matches!(e, Error::DiskFull { .. }) {
            journal.go_direct();
        }
        h.force_reopen();
    }
    Ok(value)
}

/// A redb-durable commit of everything `journal` holds, which then starts over (see
/// `RedbBackend::checkpoint`).
pub(super) fn checkpoint(
    db: &Database,
    h: &Health,
    journal: &Mutex<Journal>,
    erase: bool,
) -> Result<(), Error> {
    // redb's write lock first, as in `write`: no commit comes between the checkpoint and the
    // erase.
    let txn = h.guard(|| db.begin_write().map_err(|e| h.fail(e)))?;
    let mut journal = journal.lock().unwrap_or_else(PoisonError::into_inner);
    if journal.holds_commits() {
        let last = journal.next() - 1;
        h.guard(|| {
            txn.open_table(META)
                .map_err(|e| h.fail(e))?
                .insert(APPLIED_KEY, last)
                .map_err(|e| h.fail(e))?;
            txn.commit().map_err(|e| h.fail(e))
        })?;
        journal.checkpointed(last);
    } else {
        let _ = txn.abort();
    }
    if erase {
        journal
            .erase()
            .map_err(|e| Error::storage(format!("the journal could not be cut: {e}")))?;
    }
    Ok(())
}
