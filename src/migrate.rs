//! Upgrades data written in an older storage format, on open, in one write transaction.
//!
//! Each step reads the old layout and writes the new one; `docs/design.md` lists what changed
//! in each version. `tests/data/format-vN.redb` are databases written by formats 1 to 3 that the
//! tests open through this path.

use std::ops::ControlFlow;

use serde::Deserialize;

use crate::error::Error;
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
            let meta = FileMeta {
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
                &layout::encode(&Node::File(meta)),
            )?;
        }
    }
    Ok(())
}
