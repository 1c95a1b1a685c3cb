//! Each store's own numbering of its change-log entries, so that a store's feed says nothing of
//! other stores: its entries are numbered 1, 2, 3, … in the store's commit order, and its cursor
//! moves over its own entries only.
//!
//! `Space::Feed`, under the store's id: its [`Bounds`] under the empty key, and a copy of each
//! of its entries (the global log's record, which carries the number) under `e` and the number
//! (8 bytes, big-endian). Numbers are given in the writer's transaction, under the store's lock
//! (every write of a store holds it), so on every backend a reader that sees number n sees every
//! number below it. The copies are trimmed and scrubbed with the global log's entries, so a
//! store's feed holds exactly the entries of the store the log holds. The space is kept when the
//! store is deleted: a store id's numbers are never given again.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use super::entry::{ChangeEntry, Record};
use super::{CHUNK, ChangePage};
use crate::error::Error;
use crate::storage::{Fetch, ReadTxn, Space, WriteTxn};

/// Where a store's feed stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Bounds {
    /// The last number given (0: none yet).
    pub last: u64,
    /// Every entry up to this number is gone (retention, or a restore).
    pub trimmed: u64,
}

const BOUNDS: &[u8] = &[];

fn entry_key(n: u64) -> [u8; 9] {
    let mut key = [b'e'; 9];
    key[1..].copy_from_slice(&n.to_be_bytes());
    key
}

/// The key after every entry's.
const END: [u8; 1] = [b'f'];

/// The bounds of `store`'s feed.
pub(crate) fn bounds(txn: &dyn ReadTxn, store: &str) -> Result<Bounds, Error> {
    match txn.get(Space::Feed, store, BOUNDS)? {
        None => Ok(Bounds::default()),
        Some(bytes) => postcard::from_bytes(&bytes)
            .map_err(|e| Error::Corrupt(format!("{store}: the feed's bounds do not decode: {e}"))),
    }
}

pub(crate) fn put_bounds(txn: &mut dyn WriteTxn, store: &str, b: Bounds) -> Result<(), Error> {
    let bytes = postcard::to_allocvec(&b).expect("bounds always encode");
    txn.put(Space::Feed, store, BOUNDS, &bytes)
}

/// What a write of `store` reads of its feed (for a backend's one-round-trip prefetch).
pub(crate) fn fetch(store: &str) -> Fetch {
    Fetch::Get {
        space: Space::Feed,
        user: store.to_owned(),
        key: BOUNDS.to_vec(),
    }
}

/// Numbers `records` (in order) in their stores' feeds and stores their copies. Returns their
/// bytes, in order, for the global log.
pub(super) fn number(
    txn: &mut dyn WriteTxn,
    records: &mut [Record],
) -> Result<Vec<Vec<u8>>, Error> {
    let mut feeds: BTreeMap<String, Bounds> = BTreeMap::new();
    for record in records.iter_mut() {
        if !feeds.contains_key(&record.store) {
            let b = bounds(txn, &record.store)?;
            feeds.insert(record.store.clone(), b);
        }
        let b = feeds.get_mut(&record.store).expect("inserted above");
        b.last += 1;
        record.store_seq = b.last;
    }
    let mut encoded = Vec::with_capacity(records.len());
    for record in records.iter() {
        let bytes = record.encode();
        put_copy(txn, record, &bytes)?;
        encoded.push(bytes);
    }
    for (store, b) in feeds {
        put_bounds(txn, &store, b)?;
    }
    Ok(encoded)
}

/// Stores `bytes`, the encoding of numbered `record`, as its copy in its store's feed.
fn put_copy(txn: &mut dyn WriteTxn, record: &Record, bytes: &[u8]) -> Result<(), Error> {
    txn.put(
        Space::Feed,
        &record.store,
        &entry_key(record.store_seq),
        bytes,
    )
}

/// The copy of a global entry rewritten (a redaction's scrub).
pub(super) fn rewrite(txn: &mut dyn WriteTxn, record: &Record, bytes: &[u8]) -> Result<(), Error> {
    if record.store_seq == 0 {
        return Ok(());
    }
    put_copy(txn, record, bytes)
}

/// Before the global log's entries in `after + 1 ..= through` are removed: their copies go
/// too, and each store's `trimmed` moves on.
pub(super) fn trim(txn: &mut dyn WriteTxn, after: u64, through: u64) -> Result<(), Error> {
    let mut gone: BTreeMap<String, u64> = BTreeMap::new();
    let mut at = after;
    while at < through {
        let chunk = txn.log_read(at, CHUNK)?;
        let Some(&(last, _)) = chunk.last() else {
            break;
        };
        for (seq, bytes) in chunk {
            if seq > through {
                break;
            }
            let record = Record::decode(&bytes)?;
            if record.store_seq > 0 {
                let n = gone.entry(record.store).or_default();
                *n = (*n).max(record.store_seq);
            }
        }
        at = last;
    }
    for (store, through) in gone {
        txn.remove_range(Space::Feed, &store, &entry_key(0), &entry_key(through + 1))?;
        let mut b = bounds(txn, &store)?;
        b.trimmed = b.trimmed.max(through);
        put_bounds(txn, &store, b)?;
    }
    Ok(())
}

/// A store restored from an export whose feed stood at `at`: its numbers go on from there
/// (none it gave out is given again), the entries before it gone.
pub(crate) fn restored(txn: &mut dyn WriteTxn, store: &str, at: u64) -> Result<(), Error> {
    let b = bounds(txn, store)?;
    if b.last >= at {
        return Ok(());
    }
    txn.remove_range(Space::Feed, store, &entry_key(0), &END)?;
    put_bounds(
        txn,
        store,
        Bounds {
            last: at,
            trimmed: at,
        },
    )
}

/// A page of `store`'s feed after its number `after`.
pub(super) fn read(
    txn: &dyn ReadTxn,
    store: &str,
    after: u64,
    limit: usize,
) -> Result<ChangePage, Error> {
    let b = bounds(txn, store)?;
    if after < b.trimmed {
        return Err(Error::CursorExpired {
            after,
            trimmed: b.trimmed,
        });
    }
    if after > b.last {
        return Err(Error::CursorAhead {
            after,
            last: b.last,
        });
    }
    let mut page = ChangePage {
        entries: Vec::new(),
        next_after: after,
    };
    let mut failed = None;
    let start = entry_key(after.saturating_add(1));
    txn.scan(Space::Feed, store, &start, Some(&END), &mut |_, bytes| {
        match Record::decode(bytes).and_then(|r| {
            let seq = r.store_seq;
            r.change().map(|change| ChangeEntry { seq, change })
        }) {
            Ok(entry) => {
                page.next_after = entry.seq;
                page.entries.push(entry);
            }
            Err(e) => {
                failed = Some(e);
                return Ok(ControlFlow::Break(()));
            }
        }
        if page.entries.len() >= limit {
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(page),
    }
}

/// Format 8 to 9: every entry the log holds is numbered in its store's feed, in log order, and
/// rewritten with its number.
pub(crate) fn migrate(txn: &mut dyn WriteTxn) -> Result<(), Error> {
    txn.log_hold()?;
    txn.log_settle()?;
    let mut at = txn.log_bounds()?.trimmed;
    let mut feeds: BTreeMap<String, Bounds> = BTreeMap::new();
    loop {
        let chunk = txn.log_read(at, CHUNK)?;
        let Some(&(last, _)) = chunk.last() else {
            break;
        };
        for (seq, bytes) in chunk {
            let mut record = Record::decode(&bytes)?;
            let b = feeds.entry(record.store.clone()).or_default();
            b.last += 1;
            record.store_seq = b.last;
            let bytes = record.encode();
            txn.log_rewrite(seq, &bytes)?;
            put_copy(txn, &record, &bytes)?;
        }
        at = last;
    }
    for (store, b) in feeds {
        put_bounds(txn, &store, b)?;
    }
    Ok(())
}
