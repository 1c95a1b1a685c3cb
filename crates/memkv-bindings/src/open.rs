//! A database opened once per process, whichever objects of a program name it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use memkv::Database;

/// The in-memory database's name: every [`open`] of it is a new, empty database.
pub const IN_MEMORY: &str = ":memory:";

/// An open database and how it was opened.
#[derive(Clone)]
pub struct Opened {
    /// The database, shared by every [`Opened`] of the same file in this process.
    pub db: Arc<Database>,
    /// Opened read-only: writes answer the memory tool's read-only message.
    pub read_only: bool,
}

/// What is open in this process, by file (canonical path) or URL: held weakly, so that the
/// file is closed (and another process may open it) once the program drops its last object.
static OPEN: Mutex<Option<Registry>> = Mutex::new(None);

/// Each open database by (where, read-only).
type Registry = HashMap<(PathBuf, bool), Weak<Database>>;

/// Opens `location`: a redb file (created if missing), [`IN_MEMORY`], or a `postgres://` URL.
/// A location this process has open already (in the same mode) gives the same database.
/// `read_only` opens an existing file read-only (beside a writer that opened it `shared`);
/// `shared` lets such readers in beside this writer.
///
/// # Errors
/// The library's: [`memkv::Error::Locked`] when another process has the file open for writing,
/// [`memkv::Error::NotFound`] for a read-only open of a file that does not exist, …
pub fn open(location: &str, read_only: bool, shared: bool) -> Result<Opened, memkv::Error> {
    if location == IN_MEMORY {
        return Ok(Opened {
            db: Arc::new(Database::in_memory()?),
            read_only,
        });
    }
    let key = (canonical(location), read_only);
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    let open = open.get_or_insert_with(HashMap::new);
    open.retain(|_, db| db.strong_count() > 0);
    if let Some(db) = open.get(&key).and_then(Weak::upgrade) {
        return Ok(Opened { db, read_only });
    }
    let builder = Database::builder().shared(shared);
    let db = Arc::new(if read_only {
        builder.open_read_only(location)?
    } else {
        builder.open(location)?
    });
    open.insert(key, Arc::downgrade(&db));
    Ok(Opened { db, read_only })
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
        drop((a, b));
        // Closed: opened again (a new handle), which a lingering one would have refused.
        let c = open(file.to_str().unwrap(), false, false).unwrap();
        assert_eq!(Arc::strong_count(&c.db), 1);
    }

    #[test]
    fn in_memory_databases_are_each_their_own() {
        let a = open(IN_MEMORY, false, false).unwrap();
        let b = open(IN_MEMORY, false, false).unwrap();
        assert!(!Arc::ptr_eq(&a.db, &b.db));
    }
}
