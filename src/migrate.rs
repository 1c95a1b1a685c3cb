//! Upgrades data written in an older storage format, on open, in one write transaction.
//!
//! Each step reads the old layout and writes the new one; `docs/design.md` lists what changed
//! in each version. `tests/data/format-v1.redb` is a database written by format 1 that the tests
//! open through this path.

use std::ops::ControlFlow;

use crate::error::Error;
use crate::layout::{self, Totals, UserTotals};
use crate::storage::redb::FORMAT_VERSION;
use crate::storage::{Backend, Finish, ReadTxn, Space, WriteTxn};
use crate::tree::TreeRead;

/// Brings the data in `backend` to [`FORMAT_VERSION`]. A read-only backend holding older data is
/// refused with [`Error::NeedsMigration`]. The backend has already refused unknown versions.
pub(crate) fn upgrade<B: Backend>(backend: &B) -> Result<(), Error> {
    let found = backend.begin_read()?.format_version()?;
    if found == FORMAT_VERSION {
        return Ok(());
    }
    let result = backend.write(|txn| {
        // Re-read inside the write transaction: another process may have migrated meanwhile.
        let mut version = txn.format_version()?;
        while version < FORMAT_VERSION {
            match version {
                1 => v1_to_v2(txn)?,
                // Format 3 changed only how the redb backend lays out the spaces in tables,
                // which it converts itself when it opens the file.
                2 => {}
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
        txn.set_format_version(FORMAT_VERSION)?;
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

/// Format 2 added the access-time index (`Space::Access`) and the users' last-write time.
fn v1_to_v2(txn: &mut dyn WriteTxn) -> Result<(), Error> {
    let mut users = Vec::new();
    txn.users(Space::Totals, &mut |u| {
        users.push(u.to_owned());
        Ok(ControlFlow::Continue(()))
    })?;
    for user in users {
        let old: Totals = match txn.get(Space::Totals, &user, &[])? {
            Some(bytes) => layout::decode(&bytes, "format-1 user totals")?,
            None => continue,
        };
        let mut files = Vec::new();
        TreeRead::new(&*txn, &user).files(&mut |path, meta| {
            files.push((path, meta));
            Ok(ControlFlow::Continue(()))
        })?;
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
