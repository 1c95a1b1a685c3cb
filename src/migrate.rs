//! Upgrades data written in an older storage format, on open, in one write transaction.
//!
//! Each step reads the old layout and writes the new one; `docs/design.md` lists what changed
//! in each version. `tests/data/format-vN.redb` are databases written by formats 1 to 3 that the
//! tests open through this path.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::history::body::Body;
use crate::history::record::{self, IdEntry, StoreRecord, VersionRecord};
use crate::history::{Actor, Operation, Redaction};
use crate::layout::LAYOUT_VERSION as FORMAT_VERSION;
use crate::layout::{self, FileMeta, Node, Totals, UserTotals};
use crate::path::MemoryPath;
use crate::pipeline::Commits;
use crate::storage::{AnyBackend, Backend, Finish, ReadTxn, Space, WriteTxn};

/// Brings the data in `backend` to [`FORMAT_VERSION`]. A read-only backend holding older data is
/// refused with [`Error::NeedsMigration`]. The backend has already refused unknown versions.
/// Runs through the write pipeline's [`crate::pipeline::transact`]; it changes the layout, not
/// a memory, so it notes no change for `hooks`.
pub(crate) fn upgrade(backend: &AnyBackend, commits: &Commits) -> Result<(), Error> {
    let found = backend.begin_read()?.layout_version()?;
    if found == FORMAT_VERSION {
        return Ok(());
    }
    let result = crate::pipeline::transact(backend, commits, &[], false, |txn, _| {
        // Re-read inside the write transaction: another process may have migrated meanwhile.
        let mut version = txn.layout_version()?;
        while version < FORMAT_VERSION {
            match version {
                1 => v1_to_v2(txn)?,
                // Format 3 changed only how the redb backend lays out the spaces in tables,
                // which it converts itself when it opens the file.
                2 => {}
                3 => v3_to_v4(txn)?,
                4 => v4_to_v5(txn)?,
                5 => v5_to_v6(txn)?,
                // Format 7 added the change log, which starts empty: each backend makes its
                // table when it opens the database for writing.
                6 => {}
                // Format 8 added the keys and each store's settings, which start empty
                // (`memkv serve` imports a keys file of earlier versions when it starts).
                7 => {}
                // Format 9 numbers each store's entries in a feed of its own.
                8 => crate::changes::feed::migrate(txn)?,
                other => {
                    return Err(Error::UnsupportedFormat {
                        location: backend.location().to_owned(),
                        found: other,
                        supported: FORMAT_VERSION,
                    });
                }
            }
            version += 1;
        }
        txn.set_layout_version(FORMAT_VERSION)?;
        Ok(((), Finish::Commit))
    });
    match result {
        Err(Error::ReadOnly) => Err(Error::NeedsMigration {
            location: backend.location().to_owned(),
            found,
            supported: FORMAT_VERSION,
        }),
        other => other,
    }
}

/// `FileMeta` as formats 1 to 3 stored it: without the content hash.
#[derive(Debug, Clone, Copy, Deserialize)]
struct FileMetaV3 {
    size: u64,
    created_ms: i64,
    modified_ms: i64,
    accessed_ms: i64,
}

/// `Node` as formats 1 to 3 stored it (same variants and tags as today's).
#[derive(Debug, Clone, Copy, Deserialize)]
enum NodeV3 {
    File(FileMetaV3),
    #[allow(dead_code)] // decoded to tell it apart, never used
    Dir(Totals),
}

/// `FileMeta` as format 4 stored it: without the memory and version ids.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct FileMetaV4 {
    size: u64,
    sha256: [u8; 32],
    created_ms: i64,
    modified_ms: i64,
    accessed_ms: i64,
}

/// `Node` as format 4 stored it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
enum NodeV4 {
    File(FileMetaV4),
    Dir(Totals),
}

/// Every user that has an entry in `space`.
fn users_of(txn: &dyn WriteTxn, space: Space) -> Result<Vec<String>, Error> {
    let mut users = Vec::new();
    txn.users(space, &mut |u| {
        users.push(u.to_owned());
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(users)
}

/// The files of `user` in a format-1 to format-3 index: `(path, metadata)`, in key order.
fn files_v3(txn: &dyn WriteTxn, user: &str) -> Result<Vec<(MemoryPath, FileMetaV3)>, Error> {
    let mut files = Vec::new();
    txn.scan(Space::Nodes, user, &[], None, &mut |key, value| {
        if let NodeV3::File(meta) = layout::decode(value, "format-3 index node")? {
            let path = layout::path_of_content_key(&layout::content_key_of_node_key(key)?)?;
            files.push((path, meta));
        }
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(files)
}

/// Format 2 added the access-time index (`Space::Access`) and the users' last-write time.
fn v1_to_v2(txn: &mut dyn WriteTxn) -> Result<(), Error> {
    for user in users_of(txn, Space::Totals)? {
        let old: Totals = match txn.get(Space::Totals, &user, &[])? {
            Some(bytes) => layout::decode(&bytes, "format-1 user totals")?,
            None => continue,
        };
        let files = files_v3(txn, &user)?;
        let mut last_write_ms = i64::MIN;
        for (path, meta) in &files {
            txn.put(
                Space::Access,
                &user,
                &layout::access_key(meta.accessed_ms, path),
                &layout::encode(&meta.size),
            )?;
            last_write_ms = last_write_ms.max(meta.modified_ms);
        }
        let totals = UserTotals {
            files: old.files,
            bytes: old.bytes,
            last_write_ms,
        };
        txn.put(Space::Totals, &user, &[], &layout::encode(&totals))?;
    }
    Ok(())
}

/// Format 4 added the SHA-256 of each file's content to its index node. A file whose content
/// is missing (a damaged database) gets the hash of no content, which `check` then reports.
fn v3_to_v4(txn: &mut dyn WriteTxn) -> Result<(), Error> {
    for user in users_of(txn, Space::Nodes)? {
        for (path, old) in files_v3(txn, &user)? {
            let content = txn
                .get(Space::Contents, &user, &layout::content_key(&path))?
                .unwrap_or_default();
            let meta = FileMetaV4 {
                size: old.size,
                sha256: layout::sha256(&content),
                created_ms: old.created_ms,
                modified_ms: old.modified_ms,
                accessed_ms: old.accessed_ms,
            };
            txn.put(
                Space::Nodes,
                &user,
                &layout::node_key(&path),
                &layout::encode(&NodeV4::File(meta)),
            )?;
        }
    }
    Ok(())
}

/// Format 5 added history: each file becomes a memory with an id and one `created` version of
/// its current content (at its last modification, by nobody recorded), and each store gets its
/// record (named after its id, created when its oldest file was).
fn v4_to_v5(txn: &mut dyn WriteTxn) -> Result<(), Error> {
    for user in users_of(txn, Space::Nodes)? {
        let mut files = Vec::new();
        txn.scan(Space::Nodes, &user, &[], None, &mut |key, value| {
            if let NodeV4::File(meta) = layout::decode(value, "format-4 index node")? {
                files.push((key.to_vec(), meta));
            }
            Ok(ControlFlow::Continue(()))
        })?;
        let created_ms = files.iter().map(|(_, m)| m.created_ms).min().unwrap_or(0);
        let mut store = StoreRecord::new(&user, created_ms);
        for (node_key, old) in files {
            let content_key = layout::content_key_of_node_key(&node_key)?;
            let path = layout::path_of_content_key(&content_key)?;
            let content = txn
                .get(Space::Contents, &user, &content_key)?
                .unwrap_or_default();
            let content = String::from_utf8(content)
                .map_err(|_| Error::Corrupt(format!("the content of {path} is not UTF-8")))?;
            let seq = store.next_seq;
            store.next_seq += 1;
            let version = VersionRecordV5 {
                memory: seq,
                operation: Operation::Created,
                created_ms: old.modified_ms,
                actor: None,
                path: Some(path.to_string()),
                size: Some(content.len() as u64),
                content: Some(content),
                sha256: Some(old.sha256),
                redacted: None,
            };
            txn.put(
                Space::Versions,
                &user,
                &record::seq_key(seq),
                &layout::encode(&version),
            )?;
            txn.put(Space::Lineage, &user, &lineage_key_v5(seq, seq), &[])?;
            txn.put(Space::Ids, &user, &seq.to_be_bytes(), &content_key)?;
            let h = &mut store.history;
            h.oldest_ms = if h.versions == 0 {
                version.created_ms
            } else {
                h.oldest_ms.min(version.created_ms)
            };
            h.versions += 1;
            h.bytes += (version.path.as_ref().map_or(0, String::len)
                + version.content.as_ref().map_or(0, String::len)) as u64;
            let meta = FileMeta {
                memory: seq,
                version: seq,
                size: old.size,
                sha256: old.sha256,
                created_ms: old.created_ms,
                modified_ms: old.modified_ms,
                accessed_ms: old.accessed_ms,
            };
            txn.put(
                Space::Nodes,
                &user,
                &node_key,
                &layout::encode(&Node::File(meta)),
            )?;
        }
        txn.put(Space::Meta, &user, &[], &layout::encode(&store))?; // format 5's place
    }
    Ok(())
}

/// A version as format 5 stored it: every version with its full content.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct VersionRecordV5 {
    memory: u64,
    operation: Operation,
    created_ms: i64,
    actor: Option<Actor>,
    path: Option<String>,
    content: Option<String>,
    sha256: Option<[u8; 32]>,
    size: Option<u64>,
    redacted: Option<Redaction>,
}

/// Format 5's index of each memory's versions: `memory seq`, empty values.
fn lineage_key_v5(memory: u64, seq: u64) -> [u8; 16] {
    let mut key = [0; 16];
    key[..8].copy_from_slice(&memory.to_be_bytes());
    key[8..].copy_from_slice(&seq.to_be_bytes());
    key
}

/// Format 6 keeps a memory's latest version's content only in the file and older ones as
/// deltas (`crate::history::body`), and chains each memory's versions (each names the one
/// before it; `Ids` names the latest, for deleted memories too) instead of indexing them in
/// `Lineage`; the store record moves from `Meta` to `Store`, beside the newest versions.
/// Format-5 versions keep their full content (the new form allows it; what they count toward
/// the history budget is unchanged), get their `previous`, and `Lineage` goes.
fn v5_to_v6(txn: &mut dyn WriteTxn) -> Result<(), Error> {
    let mut users = users_of(txn, Space::Versions)?;
    users.extend(users_of(txn, Space::Ids)?);
    users.extend(users_of(txn, Space::Meta)?);
    users.sort();
    users.dedup();
    for user in users {
        let mut versions = Vec::new();
        txn.scan(Space::Versions, &user, &[], None, &mut |key, value| {
            let old: VersionRecordV5 = layout::decode(value, "format-5 version")?;
            versions.push((record::decode_seq(key)?, old));
            Ok(ControlFlow::Continue(()))
        })?;
        // Each memory's latest version kept, in sequence order.
        let mut latest: BTreeMap<u64, u64> = BTreeMap::new();
        for (seq, old) in versions {
            let previous = latest.insert(old.memory, seq);
            let new = VersionRecord {
                memory: old.memory,
                operation: old.operation,
                created_ms: old.created_ms,
                actor: old.actor,
                path: old.path,
                body: old.content.map_or(Body::Empty, Body::Full),
                sha256: old.sha256,
                size: old.size,
                redacted: old.redacted,
                previous,
            };
            record::put_version(txn, &user, seq, &new)?;
        }
        // Live memories: format 5 kept the content key alone, in `Ids`.
        let mut live = Vec::new();
        txn.scan(Space::Ids, &user, &[], None, &mut |key, value| {
            live.push((record::decode_seq(key)?, value.to_vec()));
            Ok(ControlFlow::Continue(()))
        })?;
        for (memory, content_key) in live {
            let path = layout::path_of_content_key(&content_key)?;
            let Some(bytes) = txn.get(Space::Nodes, &user, &layout::node_key(&path))? else {
                return Err(Error::Corrupt(format!(
                    "memory {memory} is at {path}, no file"
                )));
            };
            let Node::File(meta) = layout::decode(&bytes, "index node")? else {
                return Err(Error::Corrupt(format!(
                    "memory {memory} is at {path}, no file"
                )));
            };
            if meta.memory != memory {
                return Err(Error::Corrupt(format!(
                    "memory {memory} is at {path}, another's"
                )));
            }
            latest.remove(&memory);
            record::put_id_entry(txn, &user, memory, &IdEntry::Live(content_key))?;
        }
        // Deleted memories with versions kept.
        for (memory, seq) in latest {
            record::put_id_entry(txn, &user, memory, &IdEntry::Deleted { latest: seq })?;
        }
        txn.remove_range(Space::Lineage, &user, &[], &[0xff; 17])?;
        txn.remove_range(Space::Ids, &user, &[], &[0xff; 9])?;
        if let Some(store) = txn.get(Space::Meta, &user, &[])? {
            txn.put(Space::Store, &user, &[], &store)?;
            txn.remove(Space::Meta, &user, &[])?;
        }
    }
    Ok(())
}
