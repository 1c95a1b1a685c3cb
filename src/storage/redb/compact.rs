//! [`RedbBackend::compact`]: the database rewritten into a new file that holds only its live
//! data, renamed over the old one. redb reuses the pages a commit frees, but until then they keep
//! their bytes: what a redaction erased, a deleted store, expired and pruned history. After this,
//! no file memkv keeps holds them (docs/design.md, what a redaction erases on disk), and the file
//! is as small as its data.

use std::fs::{self, File, OpenOptions};
use std::path::Path;

use redb::{ReadableDatabase, ReadableTable, TableDefinition, TableHandle};

use super::create::{sync_dir, temporary_name};
use super::health::Health;
use super::open::open_error;
use super::{CHANGES, DATA, META, RedbBackend, SNAPSHOTS, builder_for};
use crate::error::Error;

/// What [`RedbBackend::compact`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    /// The file's size before, in bytes.
    pub before: u64,
    /// Its size after.
    pub after: u64,
}

/// The body of [`RedbBackend::compact`].
pub(super) fn compact(path: &Path) -> Result<Compacted, Error> {
    // Its journal replayed and checkpointed, and removed by the clean close: the file alone is
    // then the whole database (and the journal's stale frames are gone with it).
    drop(RedbBackend::open(path, false)?);
    let io = |p: &Path| {
        let p = p.to_owned();
        move |source| Error::Io { path: p, source }
    };
    let before = fs::metadata(path).map_err(io(path))?.len();
    let h = Health::new(&path.display().to_string());
    // Held, and so locked against any other process, until the new file is in place.
    let source = h.guard(|| {
        builder_for(false)
            .open(path)
            .map_err(|e| open_error(e, path))
    })?;
    let tmp = temporary_name(path);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(&tmp).map_err(io(&tmp))?;
    let placed = same_owner_and_mode(path, &tmp)
        .and_then(|()| copy(&h, &source, &tmp))
        .and_then(|()| {
            File::open(&tmp)
                .and_then(|f| f.sync_all())
                .map_err(io(&tmp))?;
            fs::rename(&tmp, path).map_err(io(path))?;
            sync_dir(path).map_err(io(path))
        });
    let _ = fs::remove_file(&tmp);
    drop(source);
    placed?;
    let after = fs::metadata(path).map_err(io(path))?.len();
    Ok(Compacted { before, after })
}

/// The new file gets the old one's mode and, where it differs from the caller's, its owner (as
/// root may give it), so that the server that owns the database can still open it; a caller
/// who cannot give it is refused before anything is copied.
fn same_owner_and_mode(path: &Path, tmp: &Path) -> Result<(), Error> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let io = |p: &Path| {
            let p = p.to_owned();
            move |source| Error::Io { path: p, source }
        };
        let old = fs::metadata(path).map_err(io(path))?;
        let new = fs::metadata(tmp).map_err(io(tmp))?;
        if (old.uid(), old.gid()) != (new.uid(), new.gid()) {
            std::os::unix::fs::chown(tmp, Some(old.uid()), Some(old.gid())).map_err(|e| {
                Error::Unsupported {
                    location: path.display().to_string(),
                    reason: format!(
                        "the file belongs to user {} and the new one could not be given to it ({e}): run compact as that user",
                        old.uid()
                    ),
                }
            })?;
        }
        fs::set_permissions(tmp, fs::Permissions::from_mode(old.mode() & 0o7777))
            .map_err(io(tmp))?;
    }
    Ok(())
}

/// Every entry of every table of `source` into a new database at `tmp`, in one commit.
fn copy(h: &Health, source: &redb::Database, tmp: &Path) -> Result<(), Error> {
    h.guard(|| {
        let mut dest = builder_for(false)
            .create(tmp)
            .map_err(|e| open_error(e, tmp))?;
        let read = source.begin_read().map_err(|e| h.fail(e))?;
        let known = [DATA.name(), SNAPSHOTS.name(), CHANGES.name(), META.name()];
        for table in read.list_tables().map_err(|e| h.fail(e))? {
            if !known.contains(&table.name()) {
                return Err(Error::Unsupported {
                    location: tmp.display().to_string(),
                    reason: format!(
                        "the file holds a table memkv does not know ({}): not compacted",
                        table.name()
                    ),
                });
            }
        }
        let write = dest.begin_write().map_err(|e| h.fail(e))?;
        copy_table(h, &read, &write, DATA)?;
        copy_table(h, &read, &write, SNAPSHOTS)?;
        copy_table(h, &read, &write, CHANGES)?;
        copy_table(h, &read, &write, META)?;
        write.commit().map_err(|e| h.fail(e))?;
        // redb's own compaction of the new file: its free space moved to the end, cut off.
        while dest.compact().map_err(|e| h.fail(e))? {}
        Ok(())
    })
}

fn copy_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    h: &Health,
    read: &redb::ReadTransaction,
    write: &redb::WriteTransaction,
    table: TableDefinition<K, V>,
) -> Result<(), Error> {
    let from = match read.open_table(table) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
        Err(e) => return Err(h.fail(e)),
    };
    let mut to = write.open_table(table).map_err(|e| h.fail(e))?;
    for entry in from.iter().map_err(|e| h.fail(e))? {
        let (k, v) = entry.map_err(|e| h.fail(e))?;
        to.insert(k.value(), v.value()).map_err(|e| h.fail(e))?;
    }
    Ok(())
}
