//! A database opened once per process, whichever objects of a program name it.
//!
//! redb lets one handle write a file, and one process at a time: two objects of one program that
//! name the same file (a memory tool and a search tool) must share a handle, and a read-only open
//! beside the program's own writable one is that handle too, read-only. The registry holds each
//! handle weakly, keyed by the file's canonical path (or the URL), so the file is released with
//! the program's last object; a handle being dropped (flushing, joining its writer) is waited
//! for, not mistaken for another process. A child made by `fork` inherits the registry and the
//! parent's handles: it may use neither (its writes would be lost under the parent's), so the
//! registry and every handle remember the process that made them.

use std::collections::HashMap;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use memkv::Database;

/// The in-memory database's name: every [`open`] of it is a new, empty database.
pub const IN_MEMORY: &str = ":memory:";

/// How long an open waits for the same file's handle, being dropped by another thread, to let go.
const CLOSING_WAIT: Duration = Duration::from_secs(30);

/// An open database and how it was opened.
#[derive(Clone)]
pub struct Opened {
    /// The database, shared by every [`Opened`] of the same file in this process.
    pub db: Arc<Shared>,
    /// Opened read-only: writes answer the memory tool's read-only message.
    pub read_only: bool,
}

impl Opened {
    /// Whether this process may use the handle: a child of `fork` may not use its parent's.
    pub fn usable(&self) -> Result<(), String> {
        if self.db.pid == std::process::id() {
            Ok(())
        } else {
            Err(format!(
                "{}: this database was opened by process {}, of which this process is a fork; open it again here (one process at a time may write a memkv database)",
                self.db.location(),
                self.db.pid
            ))
        }
    }
}

/// A database of the registry: dropped, it leaves the registry and wakes an open waiting for it.
pub struct Shared {
    db: Option<Database>,
    key: Option<PathBuf>,
    writable: bool,
    pid: u32,
}

impl Deref for Shared {
    type Target = Database;

    fn deref(&self) -> &Database {
        self.db.as_ref().expect("a database until it is dropped")
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The file is released first (its writer joined, its last flush done), then the entry.
        drop(self.db.take());
        if let Some(key) = &self.key {
            let mut open = lock();
            if let Some(map) = open.as_mut()
                && map.get(key).is_some_and(|e| e.db.strong_count() == 0)
            {
                map.remove(key);
            }
            CLOSED.notify_all();
        }
    }
}

struct Entry {
    db: Weak<Shared>,
    pid: u32,
}

/// What is open in this process, by file (canonical path) or URL.
static OPEN: Mutex<Option<HashMap<PathBuf, Entry>>> = Mutex::new(None);
/// Signalled whenever a registered handle has been dropped.
static CLOSED: Condvar = Condvar::new();

fn lock() -> std::sync::MutexGuard<'static, Option<HashMap<PathBuf, Entry>>> {
    OPEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why an open is refused.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The library's refusal (`Locked`: another process writes the file, …).
    #[error(transparent)]
    Memkv(#[from] memkv::Error),
    /// This process has the file open read-only, and a writable open was asked for.
    #[error(
        "{0}: this process has the database open read-only; close that first to open it for writing"
    )]
    ReadOnlyHere(String),
}

/// Opens `location`: a redb file (created if missing), [`IN_MEMORY`], or a `postgres://` URL.
/// A location this process has open already gives the same database (read-only if asked).
/// `read_only` opens an existing file read-only (beside a writer of another process that opened
/// it `shared`); `shared` lets such readers in beside this writer (it applies when the file is
/// first opened in this process).
///
/// # Errors
/// [`OpenError::Memkv`] with [`memkv::Error::Locked`] when another process has the file open
/// for writing, [`memkv::Error::NotFound`] for a read-only open of a file that does not exist, …;
/// [`OpenError::ReadOnlyHere`] for a writable open of a file this process holds read-only.
pub fn open(location: &str, read_only: bool, shared: bool) -> Result<Opened, OpenError> {
    let pid = std::process::id();
    if location == IN_MEMORY {
        let db = Database::in_memory()?;
        return Ok(Opened {
            db: Arc::new(Shared {
                db: Some(db),
                key: None,
                writable: true,
                pid,
            }),
            read_only,
        });
    }
    let key = canonical(location);
    let deadline = Instant::now() + CLOSING_WAIT;
    let mut open = lock();
    loop {
        let map = open.get_or_insert_with(HashMap::new);
        match map.get(&key) {
            // A fork's inheritance: not this process's.
            Some(entry) if entry.pid != pid => {
                map.remove(&key);
            }
            Some(entry) => match entry.db.upgrade() {
                Some(db) if db.writable || read_only => return Ok(Opened { db, read_only }),
                Some(db) => {
                    // Let go of the lock first: dropping the last handle takes it.
                    drop(open);
                    drop(db);
                    return Err(OpenError::ReadOnlyHere(location.to_owned()));
                }
                // Being dropped by another thread: wait until it has let go of the file.
                None => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        map.remove(&key);
                        continue;
                    }
                    open = CLOSED
                        .wait_timeout(open, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    continue;
                }
            },
            None => {}
        }
        let builder = Database::builder().shared(shared);
        let db = if read_only {
            builder.open_read_only(location)?
        } else {
            builder.open(location)?
        };
        let db = Arc::new(Shared {
            db: Some(db),
            key: Some(key.clone()),
            writable: !read_only,
            pid,
        });
        map.insert(
            key,
            Entry {
                db: Arc::downgrade(&db),
                pid,
            },
        );
        return Ok(Opened { db, read_only });
    }
}

/// The key of `location`: a file's canonical path (its folder's, for a file not made yet), or
/// the URL as given.
fn canonical(location: &str) -> PathBuf {
    let path = Path::new(location);
    if location.contains("://") {
        return path.to_owned();
    }
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            dir.canonicalize()
                .map_or_else(|_| path.to_owned(), |d| d.join(name))
        }
        _ => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_is_opened_once_per_process_and_closed_with_its_last_object() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.redb");
        let a = open(file.to_str().unwrap(), false, false).unwrap();
        // Another spelling of the same file: the same database, not a refusal.
        let other = format!("{}/./memory.redb", dir.path().display());
        let b = open(&other, false, false).unwrap();
        assert!(Arc::ptr_eq(&a.db, &b.db));
        // Read-only beside this process's own writer: the same handle, read-only.
        let r = open(file.to_str().unwrap(), true, false).unwrap();
        assert!(Arc::ptr_eq(&a.db, &r.db) && r.read_only);
        drop((a, b, r));
        // Closed: opened again (a new handle), which a lingering one would have refused.
        let c = open(file.to_str().unwrap(), false, false).unwrap();
        assert_eq!(Arc::strong_count(&c.db), 1);
    }

    #[test]
    fn a_writable_open_beside_this_processs_read_only_one_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.redb");
        drop(open(file.to_str().unwrap(), false, false).unwrap());
        let r = open(file.to_str().unwrap(), true, false).unwrap();
        let refused = open(file.to_str().unwrap(), false, false).err().unwrap();
        assert!(matches!(refused, OpenError::ReadOnlyHere(_)), "{refused}");
        drop(r);
        assert!(open(file.to_str().unwrap(), false, false).is_ok());
    }

    #[test]
    fn threads_closing_and_opening_one_file_never_see_it_locked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.redb");
        let file = file.to_str().unwrap().to_owned();
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let file = file.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let o = open(&file, false, false).unwrap();
                        o.db.user("t").unwrap();
                        drop(o);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn in_memory_databases_are_each_their_own() {
        let a = open(IN_MEMORY, false, false).unwrap();
        let b = open(IN_MEMORY, false, false).unwrap();
        assert!(!Arc::ptr_eq(&a.db, &b.db));
    }
}
