//! API keys as the server sees them: the keys the database keeps ([`memkv::Database::api_keys`]),
//! cached and checked per request, and the keys file through which keys reach a database that a
//! running server holds.
//!
//! Every server on one database checks requests against the same keys: a key added or revoked
//! through any server's `/v1/keys`, or by `memkv keys` on the database, works (or stops) on every
//! server as soon as the commit's notification reaches it (a few milliseconds on PostgreSQL:
//! [`Keys::changed_elsewhere`], see the `remote` module), at the latest after [`FALLBACK_RELOAD`];
//! on a database that cannot notify, within a second ([`RELOAD`]); on the server that made the
//! change, at once.
//!
//! A redb file is held by one process at a time, so `memkv keys add` beside a running server
//! cannot write it: it appends the key (by hash) to the keys file (`DB.keys`) instead, which
//! the server imports within a second, and then renames to `DB.keys.imported`. The same
//! file is how the keys of earlier versions, which kept their keys only there, reach the
//! database: imported once when the server starts. One JSON object per line:
//!
//! ```text
//! {"id":"key_3f9a0c1d2e4b","store":"alice","sha256":"9b1c…","created":"2026-11-30T10:00:00Z"}
//! {"id":"key_7e21aa09b3c4","store":null,"sha256":"04d2…","created":"2026-11-30T10:01:00Z","label":"ops","expires_ms":1798000000000}
//! {"revoke":"key_3f9a0c1d2e4b"}
//! ```
//!
//! The file is replaced atomically (a private temporary file, fsynced, renamed over it) under an
//! exclusive lock on `FILE.lock`, which the importing server takes too.

mod file;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use memkv::{ApiKey, Database};
use subtle::ConstantTimeEq;

pub use file::{FileEntry, Imported, KeyFile, KeyRecord, KeysError};
pub use memkv::KeyScope as Scope;

use file::{Stamp, now_ms};

/// What a request's key gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// No key exists: nothing is allowed (keyless serving is `serve --no-auth`, decided at start,
    /// never by the keys table becoming empty).
    NoKeys,
    /// A known key.
    Key(Scope),
    /// No key was sent, though keys exist.
    Missing,
    /// The key sent is not known.
    Unknown,
    /// The key sent has expired.
    Expired,
    /// The keys could not be read: nothing is allowed until they can.
    Unavailable,
}

/// How often the keys are read again from the database when no notification tells of other
/// processes' changes: what another process changed is seen within this time.
pub const RELOAD: Duration = Duration::from_millis(500);
/// How often they are read again when notifications tell of those changes (or no other
/// process writes the database): for one lost while the listener reconnected.
/// The same as the other fallback polls (`remote::FALLBACK`).
pub const FALLBACK_RELOAD: Duration = Duration::from_secs(5);

/// The keys the server checks against, read from the database and kept current.
#[derive(Debug)]
pub struct Keys {
    db: Arc<Database>,
    file: Option<KeyFile>,
    state: RwLock<Table>,
    /// When each key was last used, not yet recorded in the database.
    uses: Mutex<HashMap<String, i64>>,
    /// Held by the one reload under way: the others go on with the table they have.
    reloading: Mutex<()>,
    /// Notifications that another process changed the keys, so far.
    notified: AtomicU64,
    /// Whether such changes are told ([`Keys::changed_elsewhere`]), or there are none: then
    /// [`FALLBACK_RELOAD`] instead of [`RELOAD`].
    told: AtomicBool,
}

#[derive(Debug)]
struct Table {
    /// Each key's hash, scope, id and expiry.
    entries: Vec<Entry>,
    /// The database's count of this process's key changes when loaded.
    changes: u64,
    /// [`Keys::notified`] when loaded.
    notified: u64,
    loaded: Instant,
    file: Option<Stamp>,
    /// The last load failed: refuse everything.
    broken: bool,
}

#[derive(Debug)]
struct Entry {
    sha256: [u8; 32],
    scope: Scope,
    id: String,
    expires_ms: Option<i64>,
}

impl Keys {
    /// Imports the keys file, if any (keys of earlier versions, or added beside a stopped
    /// server), and loads the database's keys.
    ///
    /// # Errors
    /// The file cannot be imported, or the keys cannot be read.
    pub fn load(db: Arc<Database>, file: Option<KeyFile>) -> Result<Keys, KeysError> {
        outside_runtime(|| Keys::load_here(db, file))
    }

    fn load_here(db: Arc<Database>, file: Option<KeyFile>) -> Result<Keys, KeysError> {
        if let Some(f) = &file {
            match import_logged(f, &db) {
                // A planted file never stops the server: it is refused, and said so.
                Err(e @ KeysError::Untrusted(..)) => {
                    tracing::warn!(error = %e, "refusing the keys file");
                }
                other => other?,
            }
        }
        let changes = db.key_changes();
        let entries = entries(&db.api_keys()?);
        Ok(Keys {
            state: RwLock::new(Table {
                entries,
                changes,
                notified: 0,
                loaded: Instant::now(),
                file: file.as_ref().and_then(KeyFile::stamp),
                broken: false,
            }),
            db,
            file,
            uses: Mutex::default(),
            reloading: Mutex::default(),
            notified: AtomicU64::new(0),
            told: AtomicBool::new(false),
        })
    }

    /// Says that another process changed the keys (a notification): the next request reads
    /// them again first.
    pub fn changed_elsewhere(&self) {
        self.notified.fetch_add(1, Ordering::AcqRel);
    }

    /// Says whether other processes' changes are told ([`Keys::changed_elsewhere`]), or none
    /// write the database: the keys are then read again only when told, and every
    /// [`FALLBACK_RELOAD`].
    pub fn set_told(&self, told: bool) {
        self.told.store(told, Ordering::Release);
    }

    /// Whether no key exists (as last loaded).
    pub fn is_empty(&self) -> bool {
        let table = self.state.read().expect("no panics under the lock");
        table.entries.is_empty() && !table.broken
    }

    /// How many keys exist (as last loaded).
    pub fn len(&self) -> usize {
        self.state
            .read()
            .expect("no panics under the lock")
            .entries
            .len()
    }

    /// What `key` (as sent, if any) may do. Compares hashes in constant time against every
    /// key, so timing tells nothing about which bytes matched.
    pub fn check(&self, key: Option<&str>) -> Access {
        self.identify(key).0
    }

    /// As [`Keys::check`], with the id of the key when it is a known one (`key_…`: what the
    /// memory-stores API records as the author of a change). A known key's use is noted, for
    /// [`Keys::record_uses`].
    pub fn identify(&self, key: Option<&str>) -> (Access, Option<String>) {
        self.refresh(false);
        let mut found = self.lookup(key);
        if matches!(found.0, Access::Unknown | Access::NoKeys) && self.file_changed() {
            // A key just written to the keys file: import it now rather than within a second.
            self.refresh(true);
            found = self.lookup(key);
        }
        if let (Access::Key(_), Some(id)) = &found {
            self.uses
                .lock()
                .expect("no panics under the lock")
                .insert(id.clone(), now_ms());
        }
        found
    }

    fn lookup(&self, key: Option<&str>) -> (Access, Option<String>) {
        let table = self.state.read().expect("no panics under the lock");
        if table.broken {
            return (Access::Unavailable, None);
        }
        if table.entries.is_empty() {
            return (Access::NoKeys, None);
        }
        let Some(key) = key else {
            return (Access::Missing, None);
        };
        let sent = memkv::keys::hash(key);
        let mut found: Option<&Entry> = None;
        for entry in &table.entries {
            if bool::from(entry.sha256.ct_eq(&sent)) {
                found = Some(entry);
            }
        }
        match found {
            None => (Access::Unknown, None),
            Some(e) if e.expires_ms.is_some_and(|at| now_ms() >= at) => (Access::Expired, None),
            Some(e) => (Access::Key(e.scope.clone()), Some(e.id.clone())),
        }
    }

    /// Whether the keys file changed since it was last imported (a key written beside a
    /// running server).
    pub fn file_changed(&self) -> bool {
        let Some(file) = &self.file else {
            return false;
        };
        let stamp = file.stamp();
        stamp.is_some() && stamp != self.state.read().expect("no panics under the lock").file
    }

    /// Reads the keys again when this process changed them, when a notification said another
    /// did, when [`RELOAD`] (told: [`FALLBACK_RELOAD`]) has passed since the last read, or when
    /// `now`; imports the keys file first when it changed.
    /// A failed read is tried again after that time too. One reload runs at a time: a request
    /// that finds one under way goes on with the table as it is, unless `now` or a change it
    /// must see (this process's, or one told) (then it waits for it, and reloads after it). The
    /// database is read with no lock of the table held; the new table replaces the old under a
    /// short write lock.
    pub fn refresh(&self, now: bool) {
        let (must, due) = self.stale();
        if !now && !must && !due {
            return;
        }
        // A change this process made, or one told, must be seen by the next request: wait for
        // a reload under way (it may have read the keys before the change), then read them
        // again unless that reload read them after it.
        let _one = if now || must {
            self.reloading.lock().expect("no panics under the lock")
        } else {
            match self.reloading.try_lock() {
                Ok(one) => one,
                Err(_) => return,
            }
        };
        if !now && self.stale() == (false, false) {
            return;
        }
        // On a tokio worker, the read may block (PostgreSQL's client runs a runtime of its own,
        // which may not be entered from a worker without leaving it first).
        outside_runtime(|| self.reload());
    }

    /// Whether the table misses a change it must see (this process's, or one told), and
    /// whether its time is up ([`RELOAD`]; told: [`FALLBACK_RELOAD`]).
    fn stale(&self) -> (bool, bool) {
        let table = self.state.read().expect("no panics under the lock");
        // A failed read is tried again soon, told or not.
        let every = if self.told.load(Ordering::Acquire) && !table.broken {
            FALLBACK_RELOAD
        } else {
            RELOAD
        };
        let must = table.changes != self.db.key_changes()
            || table.notified != self.notified.load(Ordering::Acquire);
        (must, table.loaded.elapsed() >= every)
    }

    fn reload(&self) {
        let known = self.state.read().expect("no panics under the lock").file;
        let mut file_stamp = known;
        if let Some(file) = &self.file {
            let stamp = file.stamp();
            if stamp.is_some() && stamp != known {
                match import_logged(file, &self.db) {
                    Ok(()) => file_stamp = file.stamp(),
                    // A file that cannot be parsed is not tried again until it changes.
                    Err(e @ KeysError::Corrupt(..)) => {
                        tracing::error!(error = %e, "cannot import the keys file; it is left as it is");
                        file_stamp = stamp;
                    }
                    // Nor is one that only another user could have written (said once).
                    Err(e @ KeysError::Untrusted(..)) => {
                        tracing::warn!(error = %e, "refusing the keys file");
                        file_stamp = stamp;
                    }
                    // The database's refusal or failure: tried again at the next reload.
                    Err(e) => {
                        tracing::error!(error = %e, "cannot import the keys file; trying again shortly");
                    }
                }
            }
        }
        let changes = self.db.key_changes();
        let notified = self.notified.load(Ordering::Acquire);
        let read = self.db.api_keys();
        let mut table = self.state.write().expect("no panics under the lock");
        table.file = file_stamp;
        table.notified = notified;
        match read {
            Ok(keys) => {
                table.entries = entries(&keys);
                table.changes = changes;
                table.broken = false;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot read the API keys; refusing requests");
                table.broken = true;
            }
        }
        table.loaded = Instant::now();
    }

    /// Records in the database when each key used since the last call was last used.
    ///
    /// # Errors
    /// A storage failure (the uses are kept for the next call).
    pub fn record_uses(&self) -> Result<(), memkv::Error> {
        let uses: Vec<(String, i64)> = self
            .uses
            .lock()
            .expect("no panics under the lock")
            .drain()
            .collect();
        if let Err(e) = self.db.record_key_use(&uses) {
            let mut pending = self.uses.lock().expect("no panics under the lock");
            for (id, at) in uses {
                let t = pending.entry(id).or_insert(at);
                *t = (*t).max(at);
            }
            return Err(e);
        }
        Ok(())
    }
}

/// Runs `f` where it may block: on a worker of a multi-threaded tokio runtime, in
/// `block_in_place` (the other workers take over its tasks meanwhile); elsewhere as it is.
fn outside_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

fn import_logged(file: &KeyFile, db: &Database) -> Result<(), KeysError> {
    if let Some(done) = file.import_into(db)? {
        tracing::info!(
            file = %file.path().display(),
            added = done.added,
            revoked = done.revoked,
            renamed_to = %done.renamed_to.display(),
            "keys file imported into the database"
        );
    }
    Ok(())
}

fn entries(keys: &[ApiKey]) -> Vec<Entry> {
    keys.iter()
        .map(|k| Entry {
            sha256: *k.sha256(),
            scope: k.scope.clone(),
            id: k.id.clone(),
            expires_ms: k.expires_ms,
        })
        .collect()
}

#[cfg(test)]
mod tests;
