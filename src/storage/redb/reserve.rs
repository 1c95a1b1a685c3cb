//! The disk reserve: a file beside the database (`DB.reserve`) that holds space on the disk for
//! writes that free space.
//!
//! A redb commit is copy-on-write: even a delete writes new pages before the old ones are free,
//! and with history kept a delete frees nothing at all. On a full disk every write would fail,
//! and a store that filled its disk could not be shrunk through memkv. So the backend keeps a
//! target number of bytes ([`Reserve::keep`]) allocated in this file (allocated for real, not a
//! sparse length).
//! When a write that frees space (`Backend::write_freeing`: a delete, a rename, expiry, pruning,
//! a redaction) finds the disk full, the reserve is given up (truncated to nothing) and the write
//! runs again; right after, the reserve takes back what it can. Other writes never touch it, so
//! they get [`crate::Error::DiskFull`] while the disk is full, and whatever the freeing writes
//! freed inside the file is theirs to reuse.
//!
//! At open, the reserve's goal is its target, but at most half of what it holds and the disk's free
//! space make together, so that a small disk still leaves room for the database. Given up, it takes
//! back what it can, up to that goal, and nothing beyond it while the process runs. A reopen after
//! a failure that gives the reserve up does so through the same [`Reserve`], so that the next
//! write takes it back (it once emptied the file behind the reserve's back, which then never
//! filled again).
//!
//! The file is opened through [`Files`]: never through a symbolic link, and only if it is a
//! regular file (a reserve that cannot be opened is not kept; nothing else is truncated).
//! Its name is never flushed into its directory: a reserve lost in a crash is made again.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::files::{Access, FileOps, Files};

/// How much a reserve grows in one step; a step the disk refuses is halved, down to
/// [`MIN_STEP`], so that little free space is left behind on a full disk.
const STEP: u64 = 1 << 20;
const MIN_STEP: u64 = 64 << 10;

/// Bytes held back for writes that free space, unless configured otherwise, for stores of at
/// most `max_bytes` each: enough to delete the largest store the quota allows in one command.
/// With history kept, a deleted file's content moves into the history (a copy), so a delete
/// writes somewhat more than the content it removes: deleting a directory of 60 MB (600 files
/// of 100 kB) grew a redb file by 75 MiB. 1.25 × `max_bytes` + 8 MiB covers that; 88 MiB at
/// the default quota.
pub fn default_disk_reserve(max_bytes: u64) -> u64 {
    max_bytes
        .saturating_add(max_bytes / 4)
        .saturating_add(8 << 20)
}

/// The reserve file of one database.
#[derive(Debug)]
pub(super) struct Reserve {
    files: Arc<dyn Files>,
    path: PathBuf,
    /// What it holds when it is not given up: the target, or less on a small disk.
    goal: u64,
    /// Bytes the file holds now (known without a system call on every commit).
    held: AtomicU64,
    /// Serializes filling and giving up.
    lock: Mutex<()>,
}

/// The reserve file of the database at `db`.
pub(crate) fn path_for(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".reserve");
    PathBuf::from(name)
}

impl Reserve {
    /// The reserve of the database at `db`, of `target` bytes (less on a small disk), filled
    /// now as far as the disk allows. A reserve that cannot be made at all leaves the database
    /// working without one.
    pub(super) fn keep(files: Arc<dyn Files>, db: &Path, target: u64) -> Reserve {
        let path = path_for(db);
        let goal = goal(&*files, &path, target).unwrap_or(0);
        let reserve = Reserve {
            files,
            path,
            goal,
            held: AtomicU64::new(0),
            lock: Mutex::new(()),
        };
        let _ = reserve.fill();
        reserve
    }

    /// Bytes held now.
    pub(super) fn held(&self) -> u64 {
        self.held.load(Ordering::Acquire)
    }

    /// Whether the reserve holds less than its goal.
    pub(super) fn short(&self) -> bool {
        self.held() < self.goal
    }

    /// Gives the reserve's space back to the disk; false if it held nothing.
    pub(super) fn release(&self) -> bool {
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.held.store(0, Ordering::Release);
        truncate(&*self.files, &self.path)
    }

    /// Grows the reserve towards its goal, step by step, until the disk refuses the smallest.
    pub(super) fn fill(&self) -> io::Result<()> {
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let file = self.files.open(&self.path, Access::Create)?;
        let mut len = file.len()?;
        let goal = self.goal;
        if len > goal {
            // A smaller reserve than a run before kept.
            file.set_len(goal)?;
            len = goal;
        }
        let mut step = STEP;
        let result = loop {
            if len >= goal {
                break Ok(());
            }
            let n = step.min(goal - len);
            match allocate(file.as_ref(), len, n) {
                Ok(()) => len += n,
                Err(_) if step > MIN_STEP => step /= 2,
                Err(e) => break Err(e),
            }
        };
        // What is held is what the file holds, whatever the last step did.
        let len = file.len().unwrap_or(len);
        let synced = file.sync_all();
        self.held.store(len.min(goal), Ordering::Release);
        result.and(synced)
    }
}

/// `target`, but at most half of what the reserve and the disk's free space make together, so
/// that the goal stays put from one open to the next instead of taking half again each time.
fn goal(files: &dyn Files, path: &Path, target: u64) -> io::Result<u64> {
    let file = files.open(path, Access::Create)?;
    let len = file.len()?;
    Ok(target.min(len.saturating_add(file.available()?) / 2))
}

/// Gives the reserve of the database at `db` back to the disk, whoever keeps it (a read-only
/// open that must repair the file, say); false if there was none, or it held nothing.
pub(super) fn release(files: &dyn Files, db: &Path) -> bool {
    truncate(files, &path_for(db))
}

/// Removes the reserve of the database at `db`, if any (a database that keeps none).
pub(super) fn remove(files: &dyn Files, db: &Path) {
    let _ = files.remove(&path_for(db));
}

/// Truncates the file at `path` to nothing; true if it held something and now holds nothing.
fn truncate(files: &dyn Files, path: &Path) -> bool {
    let Ok(file) = files.open(path, Access::Write) else {
        return false;
    };
    let held = file.len().is_ok_and(|len| len > 0);
    held && file.set_len(0).and_then(|()| file.sync_all()).is_ok()
}

/// Allocates `len` bytes at `offset`; a step only partly allocated is given back.
fn allocate(file: &dyn FileOps, offset: u64, len: u64) -> io::Result<()> {
    file.allocate(offset, len).inspect_err(|_| {
        let _ = file.set_len(offset);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserve_fills_gives_up_and_takes_back_its_space() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("memkv.redb");
        let files: Arc<dyn Files> = Arc::new(super::super::files::OsFiles);
        let reserve = Reserve::keep(Arc::clone(&files), &db, 3 * STEP + 5);
        let file = path_for(&db);
        assert_eq!(reserve.held(), 3 * STEP + 5);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 3 * STEP + 5);
        assert!(!reserve.short());
        // Allocated for real: the blocks are there, not a sparse length.
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            assert!(std::fs::metadata(&file).unwrap().blocks() * 512 >= 3 * STEP);
        }

        assert!(reserve.release());
        assert_eq!(reserve.held(), 0);
        assert!(reserve.short());
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 0);
        assert!(!reserve.release(), "nothing left to give up");

        reserve.fill().unwrap();
        assert_eq!(reserve.held(), 3 * STEP + 5);
        // A later open finds it full and leaves it so.
        let again = Reserve::keep(files, &db, 3 * STEP + 5);
        assert_eq!(again.held(), 3 * STEP + 5);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 3 * STEP + 5);
    }
}
