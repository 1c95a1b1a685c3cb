//! API keys: the keys file beside the database, and the table the server checks requests
//! against.
//!
//! A key is 32 random bytes, shown once as `mkv_` + 64 hex digits. The file keeps only its
//! SHA-256, one JSON object per line:
//!
//! ```text
//! {"id":"key_3f9a0c1d2e4b","store":"alice","sha256":"9b1c…","created":"2026-11-30T10:00:00Z"}
//! {"id":"key_7e21aa09b3c4","store":null,"sha256":"04d2…","created":"2026-11-30T10:01:00Z"}
//! ```
//!
//! `store: null` is an admin key (every store). The file is replaced atomically (a private
//! temporary file, fsynced, renamed over it) under an exclusive lock on `FILE.lock`, so
//! concurrent `memkv keys` commands cannot lose each other's keys. The running server notices a
//! new version by its inode, length and modification time (checked at most once a second, and
//! on a key it does not know), so adding or revoking a key needs no restart.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// What a key may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every store, and the operator routes (`/metrics`).
    Admin,
    /// One store (a memkv user id).
    Store(String),
}

/// One line of the keys file: a key without the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// `key_` + 12 hex digits: how `keys list` and `keys revoke` name it.
    pub id: String,
    /// The store it opens; `None` for an admin key.
    pub store: Option<String>,
    /// SHA-256 of the key, hex.
    pub sha256: String,
    /// When it was added (UTC).
    pub created: String,
}

impl KeyRecord {
    /// The scope of the key.
    pub fn scope(&self) -> Scope {
        match &self.store {
            Some(s) => Scope::Store(s.clone()),
            None => Scope::Admin,
        }
    }
}

/// A problem with the keys file.
#[derive(Debug)]
pub enum KeysError {
    /// Reading or writing it failed.
    Io(PathBuf, io::Error),
    /// A line that is not a key record.
    Corrupt(PathBuf, usize, String),
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
        }
    }
}

impl std::error::Error for KeysError {}

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
        let mut name = db.as_os_str().to_owned();
        name.push(".keys");
        KeyFile::new(name)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every key record; none if the file does not exist.
    ///
    /// # Errors
    /// The file cannot be read, or a line is not a record.
    pub fn list(&self) -> Result<Vec<KeyRecord>, KeysError> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io(e)),
        };
        parse(&self.path, BufReader::new(file))
    }

    /// Adds a new random key for `scope`; returns its record and the key itself (shown once).
    ///
    /// # Errors
    /// The file cannot be read or replaced.
    pub fn add(&self, scope: &Scope) -> Result<(KeyRecord, String), KeysError> {
        let (key, record) = new_key(scope).map_err(|e| self.io(e))?;
        self.update(|records| {
            records.push(record.clone());
            Ok(())
        })?;
        Ok((record, key))
    }

    /// Removes the key `id`; `false` if there was none.
    ///
    /// # Errors
    /// The file cannot be read or replaced.
    pub fn revoke(&self, id: &str) -> Result<bool, KeysError> {
        let mut found = false;
        self.update(|records| {
            let before = records.len();
            records.retain(|r| r.id != id);
            found = records.len() != before;
            Ok(())
        })?;
        Ok(found)
    }

    /// Read, change, replace atomically, under the lock.
    fn update(
        &self,
        change: impl FnOnce(&mut Vec<KeyRecord>) -> Result<(), KeysError>,
    ) -> Result<(), KeysError> {
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
        let mut records = self.list()?;
        change(&mut records)?;
        let tmp = with_suffix(&self.path, &format!(".tmp-{}", std::process::id()));
        let written = (|| {
            let mut file = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .mode(0o600)
                .open(&tmp)?;
            let mut text = String::new();
            for r in &records {
                text.push_str(&serde_json::to_string(r).expect("plain struct"));
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
    fn stamp(&self) -> io::Result<Option<Stamp>> {
        match fs::metadata(&self.path) {
            Ok(m) => Ok(Some(Stamp {
                inode: m.ino(),
                len: m.len(),
                modified: m.modified().ok(),
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn parse(path: &Path, reader: impl BufRead) -> Result<Vec<KeyRecord>, KeysError> {
    let mut records = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| KeysError::Io(path.to_owned(), e))?;
        if line.trim().is_empty() {
            continue;
        }
        let record: KeyRecord = serde_json::from_str(&line)
            .map_err(|e| KeysError::Corrupt(path.to_owned(), i + 1, e.to_string()))?;
        if decode_hash(&record.sha256).is_none() {
            return Err(KeysError::Corrupt(
                path.to_owned(),
                i + 1,
                "sha256 is not 64 hex digits".into(),
            ));
        }
        records.push(record);
    }
    Ok(records)
}

fn new_key(scope: &Scope) -> io::Result<(String, KeyRecord)> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| io::Error::other(e.to_string()))?;
    let mut id = [0u8; 6];
    getrandom::fill(&mut id).map_err(|e| io::Error::other(e.to_string()))?;
    let key = format!("mkv_{}", hex(&secret));
    let record = KeyRecord {
        id: format!("key_{}", hex(&id)),
        store: match scope {
            Scope::Admin => None,
            Scope::Store(s) => Some(s.clone()),
        },
        sha256: hex(&hash(&key)),
        created: memkv::utc(
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        ),
    };
    Ok((key, record))
}

fn hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
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
    /// The keys file could not be read: nothing is allowed until it can.
    Unavailable,
}

/// The keys the server checks against, reloaded when the file changes.
#[derive(Debug)]
pub struct Keys {
    file: KeyFile,
    state: RwLock<Table>,
}

#[derive(Debug)]
struct Table {
    /// Each key's hash, scope and id.
    entries: Vec<([u8; 32], Scope, String)>,
    stamp: Option<Stamp>,
    checked: Instant,
    /// The last load failed: refuse everything.
    broken: bool,
}

/// How often the file's stamp is looked at when every key is known.
const RECHECK: Duration = Duration::from_secs(1);

impl Keys {
    /// Loads `file`.
    ///
    /// # Errors
    /// The file exists but cannot be read or parsed.
    pub fn load(file: KeyFile) -> Result<Keys, KeysError> {
        let stamp = file.stamp().map_err(|e| file.io(e))?;
        let records = file.list()?;
        Ok(Keys {
            state: RwLock::new(Table {
                entries: entries(&records),
                stamp,
                checked: Instant::now(),
                broken: false,
            }),
            file,
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
    /// memory-stores API records as the author of a change).
    pub fn identify(&self, key: Option<&str>) -> (Access, Option<String>) {
        self.refresh(false);
        let found = self.lookup(key);
        if matches!(found.0, Access::Unknown | Access::NoKeys) {
            // Perhaps a key added a moment ago: look at the file now rather than within a
            // second (a stat; the file is read only if it changed), so the first key added
            // works at once.
            self.refresh(true);
            return self.lookup(key);
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
        let sent = hash(key);
        let mut found: Option<(&Scope, &String)> = None;
        for (stored, scope, id) in &table.entries {
            if bool::from(stored.ct_eq(&sent)) {
                found = Some((scope, id));
            }
        }
        found.map_or((Access::Unknown, None), |(s, id)| {
            (Access::Key(s.clone()), Some(id.clone()))
        })
    }

    /// Reloads the table if the file changed; looks at most once a [`RECHECK`] unless `now`.
    fn refresh(&self, now: bool) {
        {
            let table = self.state.read().expect("no panics under the lock");
            if !now && table.checked.elapsed() < RECHECK {
                return;
            }
        }
        // The common case of a look `now` (every request while no key exists): the file has
        // not changed, and a stat under the shared lock says so without serializing requests.
        if now && let Ok(stamp) = self.file.stamp() {
            let table = self.state.read().expect("no panics under the lock");
            if stamp == table.stamp && !table.broken {
                return;
            }
        }
        let mut table = self.state.write().expect("no panics under the lock");
        table.checked = Instant::now();
        let stamp = match self.file.stamp() {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the keys file; refusing requests");
                table.broken = true;
                return;
            }
        };
        if stamp == table.stamp && !table.broken {
            return;
        }
        match self.file.list() {
            Ok(records) => {
                tracing::info!(keys = records.len(), "keys file reloaded");
                table.entries = entries(&records);
                table.stamp = stamp;
                table.broken = false;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot read the keys file; refusing requests");
                table.broken = true;
            }
        }
    }
}

fn entries(records: &[KeyRecord]) -> Vec<([u8; 32], Scope, String)> {
    records
        .iter()
        .filter_map(|r| Some((decode_hash(&r.sha256)?, r.scope(), r.id.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_added_listed_checked_and_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let file = KeyFile::beside(&dir.path().join("db.redb"));
        assert_eq!(file.path(), dir.path().join("db.redb.keys"));
        let keys = Keys::load(file.clone()).unwrap();
        assert!(keys.is_empty());
        // No key: nothing is allowed, with or without a key sent.
        assert_eq!(keys.check(None), Access::NoKeys);
        assert_eq!(keys.check(Some("mkv_nope")), Access::NoKeys);

        let (admin, admin_key) = file.add(&Scope::Admin).unwrap();
        let (alice, alice_key) = file.add(&Scope::Store("alice".into())).unwrap();
        assert!(admin_key.starts_with("mkv_") && admin_key.len() == 68);
        assert!(admin.id.starts_with("key_") && admin.id.len() == 16);
        assert_ne!(admin.id, alice.id);
        // Only hashes are kept, and the file is private.
        let text = fs::read_to_string(file.path()).unwrap();
        assert!(!text.contains(&admin_key) && !text.contains(&alice_key[4..]));
        let mode = fs::metadata(file.path()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(file.list().unwrap(), vec![admin.clone(), alice.clone()]);

        // The running table sees the new keys at once (an unknown key forces a look).
        assert_eq!(keys.check(Some(&admin_key)), Access::Key(Scope::Admin));
        assert_eq!(
            keys.identify(Some(&alice_key)).1.as_deref(),
            Some(alice.id.as_str())
        );
        assert_eq!(keys.identify(Some("mkv_nope")).1, None);
        assert_eq!(
            keys.check(Some(&alice_key)),
            Access::Key(Scope::Store("alice".into()))
        );
        assert_eq!(keys.check(None), Access::Missing);
        assert_eq!(keys.check(Some("mkv_nope")), Access::Unknown);

        assert!(file.revoke(&alice.id).unwrap());
        assert!(!file.revoke(&alice.id).unwrap());
        assert_eq!(file.list().unwrap(), vec![admin]);
        // A revoked key is a known key until the next look, at most a second later.
        let deadline = Instant::now() + Duration::from_secs(5);
        while keys.check(Some(&alice_key)) != Access::Unknown {
            assert!(Instant::now() < deadline, "revocation not seen");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    #[test]
    fn revoking_the_last_key_or_removing_the_file_opens_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = KeyFile::new(dir.path().join("k"));
        let (record, key) = file.add(&Scope::Store("alice".into())).unwrap();
        let keys = Keys::load(file.clone()).unwrap();
        assert_eq!(
            keys.check(Some(&key)),
            Access::Key(Scope::Store("alice".into()))
        );
        assert!(file.revoke(&record.id).unwrap());
        // The revoked key is known until the next look, at most a second later; then it and
        // no key are both refused.
        let deadline = Instant::now() + Duration::from_secs(5);
        while keys.check(Some(&key)) != Access::NoKeys {
            assert!(Instant::now() < deadline, "revocation not seen");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(keys.check(None), Access::NoKeys);
        let (_, other) = file.add(&Scope::Admin).unwrap();
        assert_eq!(keys.check(Some(&other)), Access::Key(Scope::Admin));
        fs::rename(file.path(), dir.path().join("moved")).unwrap();
        assert_eq!(keys.check(Some("mkv_unknown")), Access::NoKeys);
        assert_eq!(keys.check(None), Access::NoKeys);
    }

    #[test]
    fn a_corrupt_file_refuses_everything() {
        let dir = tempfile::tempdir().unwrap();
        let file = KeyFile::new(dir.path().join("k"));
        let (_, key) = file.add(&Scope::Admin).unwrap();
        let keys = Keys::load(file.clone()).unwrap();
        assert_eq!(keys.check(Some(&key)), Access::Key(Scope::Admin));
        fs::write(file.path(), "not json\n").unwrap();
        assert!(Keys::load(file.clone()).is_err());
        assert_eq!(keys.check(Some("mkv_other")), Access::Unavailable);
        assert_eq!(keys.check(None), Access::Unavailable);
        assert!(!keys.is_empty());
    }

    #[test]
    fn hashes_round_trip() {
        let h = hash("x");
        assert_eq!(decode_hash(&hex(&h)), Some(h));
        assert_eq!(decode_hash("zz"), None);
        assert_eq!(decode_hash(&"é".repeat(32)), None);
    }
}
