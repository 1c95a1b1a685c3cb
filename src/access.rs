//! Access times noted by reads, written later with the writes (never a flush on the read path).
//!
//! A `view` of a file whose recorded access time is older than the granularity must refresh it
//! (for expiry), but a read should neither wait for a disk flush nor fail because of one. So
//! the view only notes the time here, in memory, and returns. The notes are written:
//!
//! - by the next write batch (group commit), in its own transaction, before its commands: no
//!   flush of their own;
//! - by [`crate::Database::flush_access_times`]: when a database is dropped, before `expire` deletes
//!   anything, and by a read that finds more than [`MAX_PENDING`] notes waiting (one write for
//!   all of them).
//!
//! Until then, every expiry decision of this process counts a noted time as recorded: a file
//! viewed is live whether or not its note has been written yet.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::error::Error;
use crate::history::Retention;
use crate::history::append::Recorder;
use crate::history::change::Changes;
use crate::layout::Node;
use crate::path::MemoryPath;
use crate::storage::WriteTxn;
use crate::tree::Tree;

/// More notes than this waiting makes the read that adds one write them all.
pub(crate) const MAX_PENDING: usize = 4096;

/// One noted access: user, file, time (ms since the epoch).
pub(crate) type Note = (String, MemoryPath, i64);

/// The notes not yet written, per user and file (the latest time of each).
#[derive(Debug, Default)]
pub(crate) struct PendingAccess {
    notes: Mutex<HashMap<String, HashMap<MemoryPath, i64>>>,
}

impl PendingAccess {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, HashMap<MemoryPath, i64>>> {
        self.notes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that `user` used `path` at `at_ms`; returns how many notes are waiting.
    pub(crate) fn note(&self, user: &str, path: &MemoryPath, at_ms: i64) -> usize {
        let mut notes = self.lock();
        let files = notes.entry(user.to_owned()).or_default();
        let t = files.entry(path.clone()).or_insert(at_ms);
        *t = (*t).max(at_ms);
        notes.values().map(HashMap::len).sum()
    }

    /// Takes every note, to be written.
    pub(crate) fn take(&self) -> Vec<Note> {
        let notes = std::mem::take(&mut *self.lock());
        notes
            .into_iter()
            .flat_map(|(user, files)| {
                files
                    .into_iter()
                    .map(move |(path, t)| (user.clone(), path, t))
            })
            .collect()
    }

    /// Puts back notes whose write failed.
    pub(crate) fn restore(&self, taken: Vec<Note>) {
        for (user, path, t) in taken {
            self.note(&user, &path, t);
        }
    }

    /// The noted times of `user`'s files.
    pub(crate) fn noted(&self, user: &str) -> HashMap<MemoryPath, i64> {
        self.lock().get(user).cloned().unwrap_or_default()
    }

    /// The files of `user` noted as used after `cutoff_ms`: live, whatever their recorded time.
    pub(crate) fn used_after(&self, user: &str, cutoff_ms: i64) -> Vec<MemoryPath> {
        self.lock().get(user).map_or_else(Vec::new, |files| {
            files
                .iter()
                .filter(|&(_, &t)| t > cutoff_ms)
                .map(|(p, _)| p.clone())
                .collect()
        })
    }
}

/// Writes `notes` in `txn`: each file that still exists gets the later of its recorded and its
/// noted time.
pub(crate) fn apply<T: WriteTxn + ?Sized>(
    txn: &mut T,
    notes: &[Note],
    changes: &Changes,
) -> Result<(), Error> {
    for (user, path, t) in notes {
        // A read changes no memory: nothing is recorded (a touch appends no version).
        let rec = Recorder {
            actor: None,
            now_ms: *t,
            retention: Retention::NONE,
            changes,
        };
        let mut tree = Tree::new(txn, user, rec);
        if let Some(Node::File(meta)) = tree.read().node(path)?
            && meta.accessed_ms < *t
        {
            tree.touch(path, meta, *t)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_keep_the_latest_time_and_round_trip() {
        let pending = PendingAccess::default();
        let a = MemoryPath::parse("/memories/a").unwrap();
        let b = MemoryPath::parse("/memories/b").unwrap();
        assert_eq!(pending.note("u", &a, 10), 1);
        assert_eq!(pending.note("u", &a, 5), 1);
        assert_eq!(pending.note("v", &b, 7), 2);
        assert_eq!(pending.used_after("u", 9), vec![a.clone()]);
        assert!(pending.used_after("u", 10).is_empty());
        let mut taken = pending.take();
        taken.sort();
        assert_eq!(taken, vec![("u".into(), a, 10), ("v".into(), b, 7)]);
        assert!(pending.take().is_empty());
        pending.restore(taken);
        assert_eq!(pending.take().len(), 2);
    }
}
