//! A version's content, rebuilt from how it is kept ([`Body`]): in full, from the live file, or
//! through the deltas of the versions after it (`super::body`).

use super::body::{Body, Delta, MAX_RUN};
use super::record::{self, VersionRecord};
use crate::error::Error;
use crate::storage::{ReadTxn, Space};

/// The content of the version `seq` of `user` (its record `record`): `None` for a deletion or a
/// redacted version.
pub(crate) fn content<T: ReadTxn + ?Sized>(
    txn: &T,
    user: &str,
    seq: u64,
    record: &VersionRecord,
) -> Result<Option<String>, Error> {
    let corrupt = |why: &str| Error::Corrupt(format!("{}: {why}", super::VersionId(seq)));
    let mut deltas: Vec<Delta> = Vec::new();
    let (mut at, mut body) = (seq, record.body.clone());
    let base = loop {
        match body {
            Body::Empty if deltas.is_empty() => return Ok(None),
            Body::Empty => return Err(corrupt("a delta leads to a version without content")),
            Body::Full(text) => break text,
            Body::Snapshot => break snapshot(txn, user, at)?,
            Body::Current { .. } => break current_content(txn, user, record.memory)?,
            Body::Delta(delta) => {
                // Each step goes to a later version, within a bounded run: no cycle can hold.
                if delta.next <= at || deltas.len() > MAX_RUN as usize {
                    return Err(corrupt("its deltas do not lead to a later full content"));
                }
                at = delta.next;
                deltas.push(delta);
                let next = record::version(txn, user, at)?
                    .ok_or_else(|| corrupt("a delta leads to a version not kept"))?;
                if next.memory != record.memory {
                    return Err(corrupt("a delta leads to another memory's version"));
                }
                body = next.body;
            }
        }
    };
    let mut text = base;
    for delta in deltas.iter().rev() {
        text = delta.apply(&text)?;
    }
    Ok(Some(text))
}

/// The content kept as the snapshot of version `seq`.
fn snapshot<T: ReadTxn + ?Sized>(txn: &T, user: &str, seq: u64) -> Result<String, Error> {
    let bytes = txn
        .get(Space::Snapshots, user, &record::seq_key(seq))?
        .ok_or_else(|| {
            Error::Corrupt(format!(
                "the snapshot of {} is missing",
                super::VersionId(seq)
            ))
        })?;
    String::from_utf8(bytes).map_err(|_| Error::Corrupt("a snapshot is not UTF-8".into()))
}

/// The live content of `memory`, the content of its latest version.
fn current_content<T: ReadTxn + ?Sized>(txn: &T, user: &str, memory: u64) -> Result<String, Error> {
    let missing = || Error::Corrupt(format!("{user:?}'s memory {memory} has no live content"));
    let key = record::memory_path_key(txn, user, memory)?.ok_or_else(missing)?;
    let bytes = txn.get(Space::Contents, user, &key)?.ok_or_else(missing)?;
    String::from_utf8(bytes).map_err(|_| Error::Corrupt("a file's content is not UTF-8".into()))
}
