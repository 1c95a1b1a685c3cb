//! How a write transaction records changes: appends versions (retiring the memory's previous
//! one into a delta or a snapshot, `super::body`), prunes what retention no longer keeps, and
//! redacts. `crate::tree` calls [`append`] for every change it makes to a file.

use std::ops::ControlFlow;

use super::body::{Body, Delta, MAX_RUN};
use super::content;
use super::record::{
    IdEntry, StoreRecord, VersionRecord, decode_seq, id_entry, memory_key, put_id_entry,
    put_new_id_entry, put_new_version, put_store_record, put_version, seq_key, store_record,
    version,
};
use super::{Actor, HistoryTotals, MemoryId, Operation, Redaction, Retention, VersionId};
use crate::error::Error;
use crate::history::change::{self, ChangeKind, Changes};
use crate::layout;
use crate::path::MemoryPath;
use crate::storage::{Fetch, ReadTxn, Space, WriteTxn};
use crate::time::millis;

/// Who writes, when, how much history the store keeps, and where the transaction's changes are
/// noted for the commit hooks (`crate::history::change`): what a write transaction's changes are
/// recorded with.
#[derive(Debug, Clone)]
pub(crate) struct Recorder<'c> {
    pub actor: Option<Actor>,
    pub now_ms: i64,
    pub retention: Retention,
    pub changes: &'c Changes,
}

/// What one change to a memory records.
pub(crate) struct Change<'a> {
    /// The memory as it was, or `None` for a new one (its id is then the version's number).
    pub previous: Option<Previous<'a>>,
    pub operation: Operation,
    /// The path after the change (before it, for a deletion).
    pub path: &'a MemoryPath,
    /// The content after the change; `None` for a deletion.
    pub content: Option<&'a str>,
    pub sha256: Option<[u8; 32]>,
    /// The content is the memory's previous content (a move that changes nothing else).
    pub unchanged: bool,
}

/// A memory before a change: its id, its latest version, that version's content, and the path
/// it leaves when the change moves it.
pub(crate) struct Previous<'a> {
    pub memory: u64,
    pub version: u64,
    pub content: Before<'a>,
    pub moved_from: Option<&'a MemoryPath>,
}

/// Where the content of a memory's latest version is, before a change.
pub(crate) enum Before<'a> {
    /// At hand.
    Text(&'a str),
    /// In the live file at this path, not changed yet (read only if needed).
    File(&'a MemoryPath),
}

/// Appends the version of `change` for `user` and returns `(memory, version)` numbers. Takes
/// the next sequence number from the store's record (creating the record on the store's first
/// write), retires the memory's previous version (`crate::history::body`), then prunes what
/// `rec.retention` no longer keeps, and notes the change for the commit hooks.
pub(crate) fn append<T: WriteTxn + ?Sized>(
    txn: &mut T,
    user: &str,
    rec: &Recorder<'_>,
    change: Change<'_>,
) -> Result<(u64, u64), Error> {
    let mut store = store_record(txn, user)?.unwrap_or_else(|| StoreRecord::new(user, rec.now_ms));
    let seq = store.next_seq;
    store.next_seq = seq
        .checked_add(1)
        .ok_or_else(|| Error::Corrupt("the version sequence is exhausted".into()))?;
    let memory = change.previous.as_ref().map_or(seq, |p| p.memory);
    let keeps = !rec.retention.keeps_nothing();
    match (change.operation, &change.previous) {
        // A deleted memory keeps its entry while its last version is kept (`prune` removes it).
        (Operation::Deleted, _) if !keeps => {
            txn.remove(Space::Memories, user, &memory_key(memory))?
        }
        (Operation::Deleted, _) => {
            put_id_entry(txn, user, memory, &IdEntry::Deleted { latest: seq })?
        }
        (_, Some(previous)) if previous.moved_from.is_none() => {} // same path: the entry stands
        (_, Some(_)) => {
            let key = layout::content_key(change.path);
            put_id_entry(txn, user, memory, &IdEntry::Live(key))?
        }
        // A new memory: its id is `seq`, never used before.
        (_, None) => {
            let key = layout::content_key(change.path);
            put_new_id_entry(txn, user, memory, &IdEntry::Live(key))?
        }
    }
    if keeps {
        // A store that keeps nothing prunes every version below, so none needs retiring.
        let run = match &change.previous {
            Some(previous) if store.history.versions > 0 => retire(
                txn,
                user,
                previous,
                (seq, change.content),
                &mut store.history,
            )?,
            _ => 0,
        };
        let record = VersionRecord {
            memory,
            operation: change.operation,
            created_ms: rec.now_ms,
            actor: rec.actor.clone(),
            size: change.content.map(|c| c.len() as u64),
            body: match change.content {
                Some(_) => Body::Current { run },
                None => Body::Empty,
            },
            sha256: change.sha256,
            path: Some(change.path.to_string()),
            redacted: None,
            previous: change.previous.as_ref().map(|p| p.version),
        };
        put_new_version(txn, user, seq, &record)?;
        if store.history.versions == 0 {
            store.history.oldest_ms = rec.now_ms;
        }
        store.history.versions += 1;
        store.history.bytes += record.weight();
    }
    prune(txn, user, &mut store, &rec.retention, rec.now_ms)?;
    put_store_record(txn, user, &store)?;
    let moved_from = change.previous.as_ref().and_then(|p| p.moved_from);
    let kind = match change.operation {
        Operation::Created => ChangeKind::MemoryCreated,
        Operation::Deleted => ChangeKind::MemoryDeleted,
        Operation::Modified if moved_from.is_some() && change.unchanged => {
            ChangeKind::MemoryRenamed
        }
        Operation::Modified => ChangeKind::MemoryModified,
    };
    rec.changes.note(change::Change {
        kind,
        store: user.to_owned(),
        memory: Some(MemoryId(memory)),
        version: Some(VersionId(seq)),
        path: Some(change.path.to_string()),
        previous_path: moved_from.map(ToString::to_string),
        sha256: change.sha256,
        size: change.content.map(|c| c.len() as u64),
        actor: rec.actor.clone(),
        at_ms: rec.now_ms,
    });
    Ok((memory, seq))
}

/// Fetches what retiring the latest versions `versions` of several memories reads (each version,
/// and the content of its live file when given) at once, where reads cost round trips (for a
/// directory's `rename` or `delete`, all of them in one). These reads follow from the memories'
/// index entries, so they come after the command's announced reads ([`ReadTxn::read_ahead`]).
pub(crate) fn prefetch_latest<T: ReadTxn + ?Sized>(
    txn: &T,
    user: &str,
    versions: &[(u64, Option<&MemoryPath>)],
) -> Result<(), Error> {
    let mut fetches = Vec::new();
    for (version, path) in versions {
        fetches.push(Fetch::Get {
            space: Space::Versions,
            user: user.to_owned(),
            key: seq_key(*version).to_vec(),
        });
        if let Some(path) = path {
            fetches.push(Fetch::Get {
                space: Space::Contents,
                user: user.to_owned(),
                key: layout::content_key(path),
            });
        }
    }
    txn.read_ahead(&fetches)
}

/// Turns the memory's latest version, which kept no content (the live file had it), into a
/// delta against `next` (the new version's number, and its content: `None` for a deletion) or,
/// after [`MAX_RUN`] deltas in a row or for a deletion, into a snapshot; recounts its
/// weight in `totals`. Returns how many deltas then lead up to the new version.
fn retire<T: WriteTxn + ?Sized>(
    txn: &mut T,
    user: &str,
    previous: &Previous<'_>,
    (next_seq, next): (u64, Option<&str>),
    totals: &mut HistoryTotals,
) -> Result<u32, Error> {
    if let Before::File(path) = previous.content {
        // One round trip for both reads, where reads cost one.
        prefetch_latest(txn, user, &[(previous.version, Some(path))])?;
    }
    let Some(mut old) = version(txn, user, previous.version)? else {
        return Ok(0); // pruned
    };
    let run = match old.body {
        Body::Current { run } => run,
        // Kept in full (migrated or imported), or redacted: nothing depends on the live file.
        Body::Full(_) | Body::Snapshot | Body::Empty => return Ok(0),
        Body::Delta(_) => {
            return Err(Error::Corrupt(format!(
                "the latest version of {user:?}'s memory {} is a delta",
                previous.memory
            )));
        }
    };
    let read;
    let before = match previous.content {
        Before::Text(text) => text,
        Before::File(path) => {
            let bytes = txn
                .get(Space::Contents, user, &layout::content_key(path))?
                .ok_or_else(|| Error::Corrupt(format!("{path} has no content")))?;
            read = String::from_utf8(bytes)
                .map_err(|_| Error::Corrupt(format!("the content of {path} is not UTF-8")))?;
            &read
        }
    };
    let (body, next_run) = match next {
        Some(next) if run < MAX_RUN => {
            (Body::Delta(Delta::between(next_seq, before, next)), run + 1)
        }
        _ => {
            put_snapshot(txn, user, previous.version, before)?;
            (Body::Snapshot, 0)
        }
    };
    totals.bytes = totals.bytes.saturating_sub(old.weight());
    old.body = body;
    totals.bytes += old.weight();
    put_version(txn, user, previous.version, &old)?;
    Ok(next_run)
}

/// Keeps `content` as the snapshot of version `seq` (its body: [`Body::Snapshot`]).
fn put_snapshot<T: WriteTxn + ?Sized>(
    txn: &mut T,
    user: &str,
    seq: u64,
    content: &str,
) -> Result<(), Error> {
    txn.put(Space::Snapshots, user, &seq_key(seq), content.as_bytes())
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
        if let Body::Snapshot = record.body {
            txn.remove(Space::Snapshots, user, &seq_key(seq))?;
        }
        // The last version of a deleted memory: nothing of it is kept any more.
        if let Some(IdEntry::Deleted { latest }) = id_entry(txn, user, record.memory)?
            && latest == seq
        {
            txn.remove(Space::Memories, user, &memory_key(record.memory))?;
        }
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
/// whom. `None` when no such version is kept; a redacted version stays as it is. The version
/// before it, if a delta against its content, is first made a snapshot.
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
    let mut store = store_record(txn, user)?
        .ok_or_else(|| Error::Corrupt(format!("{user:?} has versions but no store record")))?;
    if let Some(before) = record.previous
        && let Some(mut earlier) = version(txn, user, before)?
        && let Body::Delta(_) = earlier.body
    {
        let content = content::content(txn, user, before, &earlier)?
            .ok_or_else(|| Error::Corrupt("a delta without content".into()))?;
        store.history.bytes = store.history.bytes.saturating_sub(earlier.weight());
        put_snapshot(txn, user, before, &content)?;
        earlier.body = Body::Snapshot;
        store.history.bytes += earlier.weight();
        put_version(txn, user, before, &earlier)?;
    }
    store.history.bytes = store.history.bytes.saturating_sub(record.weight());
    if let Body::Snapshot = record.body {
        txn.remove(Space::Snapshots, user, &seq_key(seq))?;
    }
    record.path = None;
    record.body = Body::Empty;
    record.sha256 = None;
    record.size = None;
    record.redacted = Some(Redaction { at_ms: now_ms, by });
    put_version(txn, user, seq, &record)?;
    put_store_record(txn, user, &store)?;
    Ok(Some(record))
}

/// Puts the version `seq` of `user` as an import restores it (its `previous` set by the
/// caller); the caller counts it in the store record and writes the memory's [`IdEntry`].
pub(crate) fn restore_version<T: WriteTxn + ?Sized>(
    txn: &mut T,
    user: &str,
    seq: u64,
    record: &VersionRecord,
) -> Result<(), Error> {
    put_version(txn, user, seq, record)
}
