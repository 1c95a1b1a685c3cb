//! The stored records of history and the store: their keys, and reading and writing them.
//! `super::append` changes them as a write transaction records changes; `super::content` reads
//! a version's content.
//!
//! Keys (all per user; `docs/design.md`):
//! - [`Space::Store`], key empty: the [`StoreRecord`] (name, description, metadata, archival,
//!   the next sequence number, the history's totals);
//! - [`Space::Versions`], key `seq` (u64 big-endian): a [`VersionRecord`], which names the
//!   memory's version before it (so a memory's versions are a chain, newest to oldest);
//! - [`Space::Memories`], key [`memory_key`] (the id in descending order): an [`IdEntry`], the
//!   memory's path while it is live, and the last version of a deleted one while that version is
//!   kept.

use serde::{Deserialize, Serialize};

use super::body::Body;
use super::{Actor, HistoryTotals, Operation, Redaction};
use crate::error::Error;
use crate::layout;
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

/// One stored version. Its content is kept as [`Body`] says (`crate::history::body`); its hash
/// and size always describe the whole content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct VersionRecord {
    pub memory: u64,
    pub operation: Operation,
    pub created_ms: i64,
    pub actor: Option<Actor>,
    pub path: Option<String>,
    pub body: Body,
    pub sha256: Option<[u8; 32]>,
    pub size: Option<u64>,
    pub redacted: Option<Redaction>,
    /// The memory's version before this one when this one was written (since pruned, maybe).
    pub previous: Option<u64>,
}

/// A memory's entry in [`Space::Memories`]: where the chain of its versions starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum IdEntry {
    /// A live memory: the content key of its path (its file names its latest version). Written
    /// when the memory is created or moved, not when only its content changes.
    Live(Vec<u8>),
    /// A deleted memory whose last version is kept.
    Deleted { latest: u64 },
}

impl VersionRecord {
    /// What the version counts toward the history budget: its path, and its content unless
    /// that is the live file's (the latest version of a live memory). Counted whole, however it
    /// is stored (a delta stores less), so that the count does not depend on how the history
    /// came about (written, imported, migrated).
    pub fn weight(&self) -> u64 {
        let content = match self.body {
            Body::Empty | Body::Current { .. } => 0,
            Body::Full(_) | Body::Delta(_) | Body::Snapshot => self.size.unwrap_or(0),
        };
        self.path.as_ref().map_or(0, String::len) as u64 + content
    }
}

pub(crate) fn seq_key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
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
    txn.get(Space::Store, user, &[])?
        .map(|bytes| layout::decode(&bytes, "store record"))
        .transpose()
}

pub(crate) fn put_store_record<T: WriteTxn + ?Sized>(
    txn: &mut T,
    user: &str,
    record: &StoreRecord,
) -> Result<(), Error> {
    txn.put(Space::Store, user, &[], &layout::encode(record))
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

/// Stores the version `seq` of `user`.
pub(crate) fn put_version<T: WriteTxn + ?Sized>(
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
    )
}

/// Stores the version `seq` of `user`, a number never used before (the store's `next_seq`):
/// see [`WriteTxn::put_new`].
pub(crate) fn put_new_version<T: WriteTxn + ?Sized>(
    txn: &mut T,
    user: &str,
    seq: u64,
    record: &VersionRecord,
) -> Result<(), Error> {
    txn.put_new(
        Space::Versions,
        user,
        &seq_key(seq),
        &layout::encode(record),
    )
}

/// The key of `memory` in [`Space::Memories`]: `u64::MAX - memory`, big-endian, so that the
/// newest memory comes first.
pub(crate) fn memory_key(memory: u64) -> [u8; 8] {
    (u64::MAX - memory).to_be_bytes()
}

/// The memory of a [`memory_key`].
pub(crate) fn decode_memory_key(key: &[u8]) -> Result<u64, Error> {
    Ok(u64::MAX - decode_seq(key)?)
}

/// The entry of `memory` in [`Space::Memories`]: for a live memory, or a deleted one with
/// versions.
pub(crate) fn id_entry<T: ReadTxn + ?Sized>(
    txn: &T,
    user: &str,
    memory: u64,
) -> Result<Option<IdEntry>, Error> {
    txn.get(Space::Memories, user, &memory_key(memory))?
        .map(|bytes| layout::decode(&bytes, "memory id entry"))
        .transpose()
}

pub(crate) fn put_id_entry<T: WriteTxn + ?Sized>(
    txn: &mut T,
    user: &str,
    memory: u64,
    entry: &IdEntry,
) -> Result<(), Error> {
    txn.put(
        Space::Memories,
        user,
        &memory_key(memory),
        &layout::encode(entry),
    )
}

/// The entry of a new memory (its id a version number never used before): see
/// [`WriteTxn::put_new`].
pub(crate) fn put_new_id_entry<T: WriteTxn + ?Sized>(
    txn: &mut T,
    user: &str,
    memory: u64,
    entry: &IdEntry,
) -> Result<(), Error> {
    txn.put_new(
        Space::Memories,
        user,
        &memory_key(memory),
        &layout::encode(entry),
    )
}

/// The content key of the live memory `memory`'s path.
pub(crate) fn memory_path_key<T: ReadTxn + ?Sized>(
    txn: &T,
    user: &str,
    memory: u64,
) -> Result<Option<Vec<u8>>, Error> {
    Ok(match id_entry(txn, user, memory)? {
        Some(IdEntry::Live(key)) => Some(key),
        _ => None,
    })
}

/// The latest version of `memory`, live or deleted, if it has an entry.
pub(crate) fn latest_version<T: ReadTxn + ?Sized>(
    txn: &T,
    user: &str,
    memory: u64,
) -> Result<Option<u64>, Error> {
    match id_entry(txn, user, memory)? {
        None => Ok(None),
        Some(IdEntry::Deleted { latest }) => Ok(Some(latest)),
        Some(IdEntry::Live(key)) => {
            let path = layout::path_of_content_key(&key)?;
            match txn.get(Space::Nodes, user, &layout::node_key(&path))? {
                Some(bytes) => match layout::decode(&bytes, "index node")? {
                    layout::Node::File(meta) => Ok(Some(meta.version)),
                    layout::Node::Dir(_) => Err(Error::Corrupt(format!(
                        "memory {memory} is at {path}, a directory"
                    ))),
                },
                None => Err(Error::Corrupt(format!(
                    "memory {memory} is at {path}, no file"
                ))),
            }
        }
    }
}
