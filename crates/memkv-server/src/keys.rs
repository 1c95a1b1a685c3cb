//! API keys as the server sees them: the keys the database keeps ([`memkv::Database::api_keys`]),
//! cached and checked per request, and the keys file through which keys reach a database that a
//! running server holds.
//!
//! Every server on one database checks requests against the same keys: a key added or revoked
//! through any server's `/v1/keys`, or by `memkv keys` on the database, works (or stops) on every
//! server within a second ([`RELOAD`]); on the server that made the change, at once.
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

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use memkv::{ApiKey, Database, ImportedKey, KeyScope, NewKey};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

pub use memkv::KeyScope as Scope;

/// One line of the keys file: a key without the key, or a revocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FileEntry {
    /// A key to add.
    Add(KeyRecord),
    /// A key to revoke.
    Revoke {
        /// Its id.
        revoke: String,
    },
}

/// A key in the keys file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// `key_` + 12 hex digits.
    pub id: String,
    /// The store it opens; `None` for an admin key.
    pub store: Option<String>,
    /// SHA-256 of the key, hex.
    pub sha256: String,
    /// When it was added (UTC).
    pub created: String,
    /// Reads only (a store key).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// The operator's words for it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
    /// When it stops working, ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ms: Option<i64>,
}

impl KeyRecord {
    fn imported(&self, path: &Path, line: usize) -> Result<ImportedKey, KeysError> {
        let corrupt = |why: &str| KeysError::Corrupt(path.to_owned(), line, why.to_owned());
        let sha256 =
            decode_hash(&self.sha256).ok_or_else(|| corrupt("sha256 is not 64 hex digits"))?;
        let created_ms = memkv::parse_rfc3339(&self.created)
            .ok_or_else(|| corrupt("created is not a UTC time"))?;
        let scope = match &self.store {
            None if self.read_only => return Err(corrupt("an admin key cannot be read-only")),
            None => KeyScope::Admin,
            Some(store) => KeyScope::Store {
                store: store.clone(),
                read_only: self.read_only,
            },
        };
        Ok(ImportedKey {
            id: self.id.clone(),
            scope,
            sha256,
            label: self.label.clone(),
            created_ms,
            expires_ms: self.expires_ms,
        })
    }
}

/// A problem with the keys file.
#[derive(Debug)]
pub enum KeysError {
    /// Reading or writing it failed.
    Io(PathBuf, io::Error),
    /// A line that is not a key record.
    Corrupt(PathBuf, usize, String),
    /// The database refused the keys (or failed).
    Database(memkv::Error),
}

impl std::fmt::Display for KeysError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeysError::Io(path, e) => write!(f, "{}: {e}", path.display()),
            KeysError::Corrupt(path, line, e) => {
                write!(
                    f,
                    "{}: line {line} is not a key record: {e}",
                    path.display()
                )
            }
            KeysError::Database(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for KeysError {}

impl From<memkv::Error> for KeysError {
    fn from(e: memkv::Error) -> Self {
        KeysError::Database(e)
    }
}

/// The keys file of a database (`DB.keys` unless given).
#[derive(Debug, Clone)]
pub struct KeyFile {
    path: PathBuf,
}

impl KeyFile {
    /// The keys file at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        KeyFile { path: path.into() }
    }

    /// The default keys file of the database at `db`: `DB.keys`.
    pub fn beside(db: &Path) -> Self {
        KeyFile::new(with_suffix(db, ".keys"))
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where it goes once imported: `FILE.imported`.
    pub fn imported_path(&self) -> PathBuf {
        with_suffix(&self.path, ".imported")
    }

    /// Every line; none if the file does not exist.
    ///
    /// # Errors
    /// The file cannot be read, or a line is not an entry.
    pub fn entries(&self) -> Result<Vec<FileEntry>, KeysError> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io(e)),
        };
        let mut out = Vec::new();
        for (i, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| self.io(e))?;
            if line.trim().is_empty() {
                continue;
            }
            let entry: FileEntry = serde_json::from_str(&line)
                .map_err(|e| KeysError::Corrupt(self.path.clone(), i + 1, e.to_string()))?;
            if let FileEntry::Add(record) = &entry {
                record.imported(&self.path, i + 1)?;
            }
            out.push(entry);
        }
        Ok(out)
    }

    /// Writes a new random key for the server holding the database to import; returns its
    /// record and the key itself (shown once).
    ///
    /// # Errors
    /// The file cannot be read or replaced; no random bytes.
    pub fn add(&self, new: &NewKey) -> Result<(KeyRecord, String), KeysError> {
        let (id, key) = memkv::keys::generate()?;
        let record = KeyRecord {
            id,
            store: new.scope.store().map(str::to_owned),
            sha256: hex(&memkv::keys::hash(&key)),
            created: memkv::utc(now_ms()),
            read_only: new.scope.read_only(),
            label: new.label.clone(),
            expires_ms: new.expires_ms,
        };
        self.update(|entries| entries.push(FileEntry::Add(record.clone())))?;
        Ok((record, key))
    }

    /// Writes a revocation for the server holding the database to apply.
    ///
    /// # Errors
    /// The file cannot be read or replaced.
    pub fn revoke(&self, id: &str) -> Result<(), KeysError> {
        self.update(|entries| {
            entries.push(FileEntry::Revoke {
                revoke: id.to_owned(),
            });
        })
    }

    /// Applies the file to `db` (its keys added, all or none, ids the database has passed
    /// over; then its revocations) and renames it to [`Self::imported_path`], under the lock;
    /// `None` when there is no file.
    ///
    /// # Errors
    /// The file cannot be read or renamed; a line is not an entry; the database refuses.
    pub fn import_into(&self, db: &Database) -> Result<Option<Imported>, KeysError> {
        if !self.path.exists() {
            return Ok(None);
        }
        let _lock = self.lock()?;
        let entries = match self.entries() {
            Ok(e) if !self.path.exists() => {
                debug_assert!(e.is_empty());
                return Ok(None);
            }
            other => other?,
        };
        let mut adds = Vec::new();
        let mut revokes = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            match entry {
                FileEntry::Add(r) => adds.push(r.imported(&self.path, i + 1)?),
                FileEntry::Revoke { revoke } => revokes.push(revoke.clone()),
            }
        }
        let added = db.import_keys(&adds)?;
        let mut revoked = 0;
        for id in &revokes {
            revoked += usize::from(db.revoke_key(id)?);
        }
        fs::rename(&self.path, self.imported_path()).map_err(|e| self.io(e))?;
        Ok(Some(Imported {
            added,
            revoked,
            renamed_to: self.imported_path(),
        }))
    }

    fn lock(&self) -> Result<File, KeysError> {
        if let Some(dir) = self.dir() {
            fs::create_dir_all(dir).map_err(|e| self.io(e))?;
        }
        let lock_path = with_suffix(&self.path, ".lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| KeysError::Io(lock_path.clone(), e))?;
        lock.lock().map_err(|e| KeysError::Io(lock_path, e))?;
        Ok(lock)
    }

    /// Read, change, replace atomically, under the lock.
    fn update(&self, change: impl FnOnce(&mut Vec<FileEntry>)) -> Result<(), KeysError> {
        let _lock = self.lock()?;
        let mut entries = self.entries()?;
        change(&mut entries);
        let tmp = with_suffix(&self.path, &format!(".tmp-{}", std::process::id()));
        let written = (|| {
            let mut file = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .mode(0o600)
                .open(&tmp)?;
            let mut text = String::new();
            for e in &entries {
                text.push_str(&serde_json::to_string(e).expect("plain struct"));
                text.push('\n');
            }
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            fs::rename(&tmp, &self.path)?;
            if let Some(dir) = self.dir() {
                File::open(dir)?.sync_all()?;
            }
            Ok(())
        })();
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written.map_err(|e| self.io(e))
    }

    fn dir(&self) -> Option<&Path> {
        self.path.parent().filter(|p| !p.as_os_str().is_empty())
    }

    fn io(&self, e: io::Error) -> KeysError {
        KeysError::Io(self.path.clone(), e)
    }

    /// What identifies the file's current version, or `None` if it does not exist.
    fn stamp(&self) -> Option<Stamp> {
        fs::metadata(&self.path).ok().map(|m| Stamp {
            inode: m.ino(),
            len: m.len(),
            modified: m.modified().ok(),
        })
    }
}

/// What [`KeyFile::import_into`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// Keys added to the database.
    pub added: usize,
    /// Keys revoked.
    pub revoked: usize,
    /// Where the file went.
    pub renamed_to: PathBuf,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_hash(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

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

/// How often the keys are read again from the database: what another process changed is seen
/// within this time.
pub const RELOAD: Duration = Duration::from_millis(500);

/// The keys the server checks against, read from the database and kept current.
#[derive(Debug)]
pub struct Keys {
    db: Arc<Database>,
    file: Option<KeyFile>,
    state: RwLock<Table>,
    /// When each key was last used, not yet recorded in the database.
    uses: Mutex<HashMap<String, i64>>,
}

#[derive(Debug)]
struct Table {
    /// Each key's hash, scope, id and expiry.
    entries: Vec<Entry>,
    /// The database's count of this process's key changes when loaded.
    changes: u64,
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
            import_logged(f, &db)?;
        }
        let changes = db.key_changes();
        let entries = entries(&db.api_keys()?);
        Ok(Keys {
            state: RwLock::new(Table {
                entries,
                changes,
                loaded: Instant::now(),
                file: file.as_ref().and_then(KeyFile::stamp),
                broken: false,
            }),
            db,
            file,
            uses: Mutex::default(),
        })
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

    fn file_changed(&self) -> bool {
        let Some(file) = &self.file else {
            return false;
        };
        let stamp = file.stamp();
        stamp.is_some() && stamp != self.state.read().expect("no panics under the lock").file
    }

    /// Reads the keys again when this process changed them, when [`RELOAD`] has passed since
    /// the last read, or when `now`; imports the keys file first when it changed.
    pub fn refresh(&self, now: bool) {
        {
            let table = self.state.read().expect("no panics under the lock");
            if !now
                && !table.broken
                && table.changes == self.db.key_changes()
                && table.loaded.elapsed() < RELOAD
            {
                return;
            }
        }
        // On a tokio worker, the read may block (PostgreSQL's client runs a runtime of its own,
        // which may not be entered from a worker without leaving it first).
        outside_runtime(|| self.reload());
    }

    fn reload(&self) {
        let mut table = self.state.write().expect("no panics under the lock");
        let stamp = self.file.as_ref().and_then(KeyFile::stamp);
        if let Some(file) = &self.file
            && stamp.is_some()
            && stamp != table.file
        {
            if let Err(e) = import_logged(file, &self.db) {
                tracing::error!(error = %e, file = %file.path().display(), "cannot import the keys file");
            }
            table.file = file.stamp();
        }
        let changes = self.db.key_changes();
        match self.db.api_keys() {
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
mod tests {
    use super::*;

    fn store(s: &str) -> Scope {
        Scope::Store {
            store: s.into(),
            read_only: false,
        }
    }

    #[test]
    fn keys_are_added_checked_and_revoked_in_the_database() {
        let db = Arc::new(Database::in_memory().unwrap());
        let keys = Keys::load(Arc::clone(&db), None).unwrap();
        assert!(keys.is_empty());
        // No key: nothing is allowed, with or without a key sent.
        assert_eq!(keys.check(None), Access::NoKeys);
        assert_eq!(keys.check(Some("mkv_nope")), Access::NoKeys);

        let (admin, admin_key) = db.add_key(&NewKey::new(Scope::Admin)).unwrap();
        let (alice, alice_key) = db.add_key(&NewKey::new(store("alice"))).unwrap();
        assert!(admin_key.starts_with("mkv_") && admin_key.len() == 68);
        assert!(memkv::keys::valid_id(&admin.id));
        assert_ne!(admin.id, alice.id);
        // A change this process made is seen at once.
        assert_eq!(keys.check(Some(&admin_key)), Access::Key(Scope::Admin));
        assert_eq!(
            keys.identify(Some(&alice_key)).1.as_deref(),
            Some(alice.id.as_str())
        );
        assert_eq!(keys.identify(Some("mkv_nope")), (Access::Unknown, None));
        assert_eq!(keys.check(None), Access::Missing);
        // Uses are recorded when asked.
        keys.record_uses().unwrap();
        let listed = db.api_keys().unwrap();
        assert!(
            listed.iter().all(|k| k.last_used_ms.is_some()),
            "{listed:?}"
        );

        assert!(db.revoke_key(&alice.id).unwrap());
        assert!(!db.revoke_key(&alice.id).unwrap());
        assert_eq!(keys.check(Some(&alice_key)), Access::Unknown);
        assert!(db.revoke_key(&admin.id).unwrap());
        assert_eq!(keys.check(Some(&admin_key)), Access::NoKeys);
    }

    #[test]
    fn an_expired_key_is_refused() {
        let db = Arc::new(Database::in_memory().unwrap());
        let keys = Keys::load(Arc::clone(&db), None).unwrap();
        let mut new = NewKey::new(store("alice"));
        new.expires_ms = Some(now_ms() + 300);
        let (_, key) = db.add_key(&new).unwrap();
        assert_eq!(keys.check(Some(&key)), Access::Key(store("alice")));
        let deadline = Instant::now() + Duration::from_secs(5);
        while keys.check(Some(&key)) != Access::Expired {
            assert!(Instant::now() < deadline, "the key never expired");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn the_keys_file_is_imported_and_renamed() {
        let dir = tempfile::tempdir().unwrap();
        let file = KeyFile::beside(&dir.path().join("db.redb"));
        assert_eq!(file.path(), dir.path().join("db.redb.keys"));
        let mut ro = NewKey::new(Scope::Store {
            store: "bob".into(),
            read_only: true,
        });
        ro.label = "auditor".into();
        let (admin, admin_key) = file.add(&NewKey::new(Scope::Admin)).unwrap();
        let (_, bob_key) = file.add(&ro).unwrap();
        // Only hashes are kept, and the file is private.
        let text = fs::read_to_string(file.path()).unwrap();
        assert!(!text.contains(&admin_key) && !text.contains(&bob_key[4..]));
        let mode = fs::metadata(file.path()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let db = Arc::new(Database::in_memory().unwrap());
        let keys = Keys::load(Arc::clone(&db), Some(file.clone())).unwrap();
        assert!(!file.path().exists() && file.imported_path().exists());
        assert_eq!(keys.check(Some(&admin_key)), Access::Key(Scope::Admin));
        assert_eq!(keys.check(Some(&bob_key)), Access::Key(ro.scope.clone()));
        let listed = db.api_keys().unwrap();
        assert_eq!(listed.len(), 2);
        assert!(listed.iter().any(|k| k.label == "auditor"));

        // A key written to the file while the server runs works at once; a revocation
        // written there is applied at once too.
        let (_, carol_key) = file.add(&NewKey::new(store("carol"))).unwrap();
        assert_eq!(keys.check(Some(&carol_key)), Access::Key(store("carol")));
        file.revoke(&admin.id).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while keys.check(Some(&admin_key)) != Access::Unknown {
            assert!(Instant::now() < deadline, "revocation not seen");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(db.api_keys().unwrap().len(), 2);
    }

    #[test]
    fn a_corrupt_file_is_refused_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let file = KeyFile::new(dir.path().join("k"));
        fs::write(file.path(), "not json\n").unwrap();
        let db = Arc::new(Database::in_memory().unwrap());
        assert!(Keys::load(Arc::clone(&db), Some(file.clone())).is_err());
        assert!(file.path().exists());
        assert!(db.api_keys().unwrap().is_empty());
    }

    #[test]
    fn hashes_round_trip() {
        let h = memkv::keys::hash("x");
        assert_eq!(decode_hash(&hex(&h)), Some(h));
        assert_eq!(decode_hash("zz"), None);
        assert_eq!(decode_hash(&"é".repeat(32)), None);
    }
}
