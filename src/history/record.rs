//! The stored records of history and the store, and how a write transaction appends, prunes
//! and redacts them. `crate::tree` calls [`append`] for every change it makes to a file.
//!
//! Keys (all per user; `docs/design.md`):
//! - [`Space::Meta`], key empty: the [`StoreRecord`] (name, description, metadata, archival,
//!   the next sequence number, the history's totals);
//! - [`Space::Versions`], key `seq` (u64 big-endian): a [`VersionRecord`];
//! - [`Space::Lineage`], key `memory seq` (2 × u64 big-endian), empty value: a memory's versions;
//! - [`Space::Ids`], key `memory` (u64 big-endian): the content key of a live memory's path.

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use super::{Actor, HistoryTotals, Operation, Redaction, Retention};
use crate::error::Error;
use crate::layout;
use crate::limits::millis;
use crate::path::MemoryPath;
use crate::storage::{ReadTxn, Space, WriteTxn};

/// A store's own record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoreRecord {
    pub name: String,
    pub description: String,
    pub metadata: Vec<(String, String)>,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub archived_ms: Option<i64>,
    /// The next sequence number: every version (and so every memory id) takes one.
    pub next_seq: u64,
    pub history: HistoryTotals,
}

impl StoreRecord {
    /// The record a store gets on its first write: named after its id.
    pub fn new(user: &str, now_ms: i64) -> Self {
        StoreRecord {
            name: user.to_owned(),
            description: String::new(),
            metadata: Vec::new(),
            created_ms: now_ms,
            updated_ms: now_ms,
            archived_ms: None,
            next_seq: 1,
            history: HistoryTotals::default(),
        }
    }
}

/// One stored version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct VersionRecord {
    pub memory: u64,
    pub operation: Operation,
    pub created_ms: i64,
    pub actor: Option<Actor>,
    pub path: Option<String>,
    pub content: Option<String>,
    pub sha256: Option<[u8; 32]>,
    pub size: Option<u64>,
    pub redacted: Option<Redaction>,
}

impl VersionRecord {
    /// What the version counts toward the history budget: its path and content.
    pub fn weight(&self) -> u64 {
        (self.path.as_ref().map_or(0, String::len) + self.content.as_ref().map_or(0, String::len))
            as u64
    }
}

/// Who writes, when, and how much history the store keeps: what a write transaction's changes
/// are recorded with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recorder {
    pub actor: Option<Actor>,
    pub now_ms: i64,
    pub retention: Retention,
}

pub(crate) fn seq_key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

pub(crate) fn lineage_key(memory: u64, seq: u64) -> [u8; 16] {
    let mut key = [0; 16];
    key[..8].copy_from_slice(&memory.to_be_bytes());
    key[8..].copy_from_slice(&seq.to_be_bytes());
    key
}

pub(crate) fn decode_seq(key: &[u8]) -> Result<u64, Error> {
    let bytes: [u8; 8] = key
        .try_into()
        .map_err(|_| Error::Corrupt("a version key is not 8 bytes".into()))?;
    Ok(u64::from_be_bytes(bytes))
}

/// The store's record, if it has one.
pub(crate) fn store_record<T: ReadTxn + ?Sized>(
    txn: &T,
    user: &str,
) -> Result<Option<StoreRecord>, Error> {
    txn.get(Space::Meta, user, &[])?
        .map(|bytes| layout::decode(&bytes, "store record"))
        .transpose()
}

pub(crate) fn put_store_record<T: WriteTxn + ?Sized>(
    txn: &mut T,
    user: &str,
    record: &StoreRecord,
) -> Result<(), Error> {
    txn.put(Space::Meta, user, &[], &layout::encode(record))
}

/// The version `seq` of `user`, if kept.
pub(crate) fn version<T: ReadTxn + ?Sized>(
    txn: &T,
    user: &str,
    seq: u64,
) -> Result<Option<VersionRecord>, Error> {
    txn.get(Space::Versions, user, &seq_key(seq))?
        .map(|bytes| layout::decode(&bytes, "version"))
        .transpose()
}

/// The content key of the live memory `memory`'s path.
pub(crate) fn memory_path_key<T: ReadTxn + ?Sized>(
    txn: &T,
    user: &str,
    memory: u64,
) -> Result<Option<Vec<u8>>, Error> {
    txn.get(Space::Ids, user, &memory.to_be_bytes())
}

/// What one change to a memory records.
pub(crate) struct Change<'a> {
    /// The memory, or `None` for a new one (its id is then the version's number).
    pub memory: Option<u64>,
    pub operation: Operation,
    /// The path after the change (before it, for a deletion).
    pub path: &'a MemoryPath,
    /// The content after the change; `None` for a deletion.
    pub content: Option<&'a str>,
    pub sha256: Option<[u8; 32]>,
}

/// Appends the version of `change` for `user` and returns `(memory, version)` numbers. Takes
/// the next sequence number from the store's record (creating the record on the store's first
/// write), then prunes what `rec.retention` no longer keeps.
pub(crate) fn append<T: WriteTxn + ?Sized>(
    txn: &mut T,
    user: &str,
    rec: &Recorder,
    change: Change<'_>,
) -> Result<(u64, u64), Error> {
    let mut store = store_record(txn, user)?.unwrap_or_else(|| StoreRecord::new(user, rec.now_ms));
    let seq = store.next_seq;
    store.next_seq = seq
        .checked_add(1)
        .ok_or_else(|| Error::Corrupt("the version sequence is exhausted".into()))?;
    let memory = change.memory.unwrap_or(seq);
    match change.operation {
        Operation::Deleted => txn.remove(Space::Ids, user, &memory.to_be_bytes())?,
        _ => {
            let key = layout::content_key(change.path);
            txn.put(Space::Ids, user, &memory.to_be_bytes(), &key)?;
        }
    }
    if !rec.retention.keeps_nothing() {
        let record = VersionRecord {
            memory,
            operation: change.operation,
            created_ms: rec.now_ms,
            actor: rec.actor.clone(),
            size: change.content.map(|c| c.len() as u64),
            content: change.content.map(str::to_owned),
            sha256: change.sha256,
            path: Some(change.path.to_string()),
            redacted: None,
        };
        txn.put(
            Space::Versions,
            user,
            &seq_key(seq),
            &layout::encode(&record),
        )?;
        txn.put(Space::Lineage, user, &lineage_key(memory, seq), &[])?;
        if store.history.versions == 0 {
            store.history.oldest_ms = rec.now_ms;
        }
        store.history.versions += 1;
        store.history.bytes += record.weight();
    }
    prune(txn, user, &mut store, &rec.retention, rec.now_ms)?;
    put_store_record(txn, user, &store)?;
    Ok((memory, seq))
}

/// Removes the oldest versions while `retention` is exceeded, counting them in `store`.
pub(crate) fn prune<T: WriteTxn + ?Sized>(
    txn: &mut T,
    user: &str,
    store: &mut StoreRecord,
    retention: &Retention,
    now_ms: i64,
) -> Result<(), Error> {
    let too_old = |h: &HistoryTotals| match retention.max_age {
        Some(age) => h.versions > 0 && h.oldest_ms <= now_ms.saturating_sub(millis(age)),
        None => false,
    };
    let over = |h: &HistoryTotals| {
        retention.max_versions.is_some_and(|n| h.versions > n)
            || retention.max_bytes.is_some_and(|n| h.bytes > n)
            || too_old(h)
    };
    while over(&store.history) {
        let Some((seq, record)) = oldest(txn, user)? else {
            return Err(Error::Corrupt(format!(
                "the history of {user:?} counts {} versions but holds none",
                store.history.versions
            )));
        };
        txn.remove(Space::Versions, user, &seq_key(seq))?;
        txn.remove(Space::Lineage, user, &lineage_key(record.memory, seq))?;
        let h = &mut store.history;
        h.versions -= 1;
        h.bytes = h.bytes.saturating_sub(record.weight());
        h.pruned_versions += 1;
        h.pruned_bytes += record.weight();
        h.oldest_ms = match oldest(txn, user)? {
            Some((_, next)) => next.created_ms,
            None => 0,
        };
    }
    Ok(())
}

/// The oldest version kept.
fn oldest<T: ReadTxn + ?Sized>(txn: &T, user: &str) -> Result<Option<(u64, VersionRecord)>, Error> {
    let mut found = None;
    txn.scan(Space::Versions, user, &[], None, &mut |key, value| {
        found = Some((decode_seq(key)?, layout::decode(value, "version")?));
        Ok(ControlFlow::Break(()))
    })?;
    Ok(found)
}

/// Redacts the version `seq`: nulls its path, content, hash and size, and records when and by
/// whom. `None` when no such version is kept; a redacted version stays as it is.
pub(crate) fn redact<T: WriteTxn + ?Sized>(
    txn: &mut T,
    user: &str,
    seq: u64,
    by: Option<Actor>,
    now_ms: i64,
) -> Result<Option<VersionRecord>, Error> {
    let Some(mut record) = version(txn, user, seq)? else {
        return Ok(None);
    };
    if record.redacted.is_some() {
        return Ok(Some(record));
    }
    let weight = record.weight();
    record.path = None;
    record.content = None;
    record.sha256 = None;
    record.size = None;
    record.redacted = Some(Redaction { at_ms: now_ms, by });
    txn.put(
        Space::Versions,
        user,
        &seq_key(seq),
        &layout::encode(&record),
    )?;
    let mut store = store_record(txn, user)?
        .ok_or_else(|| Error::Corrupt(format!("{user:?} has versions but no store record")))?;
    store.history.bytes = store.history.bytes.saturating_sub(weight);
    put_store_record(txn, user, &store)?;
    Ok(Some(record))
}

/// Puts the version `seq` of `user` as an import restores it, with its lineage entry; the
/// caller counts it in the store record.
pub(crate) fn restore_version<T: WriteTxn + ?Sized>(
    txn: &mut T,
    user: &str,
    seq: u64,
    record: &VersionRecord,
) -> Result<(), Error> {
    txn.put(
        Space::Versions,
        user,
        &seq_key(seq),
        &layout::encode(record),
    )?;
    txn.put(Space::Lineage, user, &lineage_key(record.memory, seq), &[])
}
