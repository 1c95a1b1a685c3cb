//! Upgrades data written in an older storage format, on open, in one write transaction.
//!
//! Each step reads the old layout and writes the new one; `docs/design.md` lists what changed
//! in each version. `tests/data/format-vN.redb` are databases written by formats 1 to 3 that the
//! tests open through this path.

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::history::Operation;
use crate::history::record::{self, StoreRecord, VersionRecord};
use crate::layout::LAYOUT_VERSION as FORMAT_VERSION;
use crate::layout::{self, FileMeta, Node, Totals, UserTotals};
use crate::path::MemoryPath;
use crate::storage::{Backend, Finish, ReadTxn, Space, WriteTxn};

/// Brings the data in `backend` to [`FORMAT_VERSION`]. A read-only backend holding older data is
/// refused with [`Error::NeedsMigration`]. The backend has already refused unknown versions.
pub(crate) fn upgrade<B: Backend>(backend: &B) -> Result<(), Error> {
    let found = backend.begin_read()?.layout_version()?;
    if found == FORMAT_VERSION {
        return Ok(());
    }
    let result = backend.write(&[], |txn| {
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
            let version = VersionRecord {
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
            txn.put(Space::Lineage, &user, &record::lineage_key(seq, seq), &[])?;
            txn.put(Space::Ids, &user, &seq.to_be_bytes(), &content_key)?;
            let h = &mut store.history;
            h.oldest_ms = if h.versions == 0 {
                version.created_ms
            } else {
                h.oldest_ms.min(version.created_ms)
            };
            h.versions += 1;
            h.bytes += version.weight();
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
        record::put_store_record(txn, &user, &store)?;
    }
    Ok(())
}
