//! The keys file (`DB.keys`): keys by hash, and revocations, for a server to import.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use memkv::{Database, ImportedKey, KeyScope, NewKey};
use serde::{Deserialize, Serialize};

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

/// A key in the keys file. Every field is spelled out (`store` too: `null` for an admin key), so
/// that a line with a misspelt field is refused rather than read as something else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRecord {
    /// `key_` + 12 hex digits.
    pub id: String,
    /// The store it opens; `None` for an admin key (written `null`, never left out).
    #[serde(deserialize_with = "present")]
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

/// An `Option` that must be in the line (`null` or a value): serde reads a missing `Option` as
/// `None`, which here would be an admin key.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::<String>::deserialize(d)
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
    /// The file is not one the server's user alone could have written (another owner, writable
    /// by group or others, not a regular file): never imported, since it would grant keys.
    Untrusted(PathBuf, String),
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
            KeysError::Untrusted(path, why) => write!(
                f,
                "{}: not imported: {why}; a keys file grants keys, so only one that the server's user owns and no one else may write is imported (`chmod go-w`, or remove it and add the keys again with `memkv keys add`)",
                path.display()
            ),
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
        self.entries_of(file)
    }

    /// The file, opened to be imported: refused unless the server's user (or root) owns it,
    /// no one else may write it, and it is a regular file reached without a symbolic link
    /// (checked on the open file, so what is checked is what is read).
    fn open_trusted(&self) -> Result<Option<File>, KeysError> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let file = match rustix::fs::open(&self.path, flags, Mode::empty()) {
            Ok(fd) => File::from(fd),
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(rustix::io::Errno::LOOP) => {
                return Err(self.untrusted("it is a symbolic link"));
            }
            Err(e) => return Err(self.io(e.into())),
        };
        let meta = file.metadata().map_err(|e| self.io(e))?;
        let me = rustix::process::geteuid().as_raw();
        if !meta.is_file() {
            return Err(self.untrusted("it is not a regular file"));
        }
        if meta.uid() != me && meta.uid() != 0 {
            return Err(self.untrusted(&format!(
                "it belongs to user {}, not to the server's user ({me})",
                meta.uid()
            )));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(self.untrusted(&format!(
                "its mode {:o} lets group or others write it",
                meta.mode() & 0o777
            )));
        }
        Ok(Some(file))
    }

    fn untrusted(&self, why: &str) -> KeysError {
        KeysError::Untrusted(self.path.clone(), why.to_owned())
    }

    fn entries_of(&self, file: File) -> Result<Vec<FileEntry>, KeysError> {
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
            sha256: hex::encode(memkv::keys::hash(&key)),
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
    /// The file cannot be read or renamed; a line is not an entry; the database refuses; the
    /// file is not one only the server's user could have written ([`KeysError::Untrusted`]).
    pub fn import_into(&self, db: &Database) -> Result<Option<Imported>, KeysError> {
        if fs::symlink_metadata(&self.path).is_err() {
            return Ok(None);
        }
        let _lock = self.lock()?;
        let Some(file) = self.open_trusted()? else {
            return Ok(None);
        };
        let entries = self.entries_of(file)?;
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
    pub(super) fn stamp(&self) -> Option<Stamp> {
        // The link itself (an untrusted one is refused, and tried again when it changes); its
        // owner and mode too, so that a refused file is tried again once they are mended.
        fs::symlink_metadata(&self.path).ok().map(|m| Stamp {
            inode: m.ino(),
            len: m.len(),
            modified: m.modified().ok(),
            owner: (m.uid(), m.mode()),
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

pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn decode_hash(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
    owner: (u32, u32),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_round_trip() {
        let h = memkv::keys::hash("x");
        assert_eq!(decode_hash(&hex::encode(h)), Some(h));
        assert_eq!(decode_hash("zz"), None);
        assert_eq!(decode_hash(&"é".repeat(32)), None);
    }

    #[test]
    fn a_line_must_spell_out_every_field() {
        let dir = tempfile::tempdir().unwrap();
        let file = KeyFile::new(dir.path().join("k"));
        let h = hex::encode([7u8; 32]);
        for (line, ok) in [
            (
                format!(
                    r#"{{"id":"key_0123456789ab","store":null,"sha256":"{h}","created":"2026-11-30T10:00:00Z"}}"#
                ),
                true,
            ),
            (
                format!(
                    r#"{{"id":"key_0123456789ab","store":"a","sha256":"{h}","created":"2026-11-30T10:00:00Z","read_only":true}}"#
                ),
                true,
            ),
            // No `store`: not an admin key by omission.
            (
                format!(
                    r#"{{"id":"key_0123456789ab","sha256":"{h}","created":"2026-11-30T10:00:00Z"}}"#
                ),
                false,
            ),
            // A misspelt field.
            (
                format!(
                    r#"{{"id":"key_0123456789ab","stor":"a","store":null,"sha256":"{h}","created":"2026-11-30T10:00:00Z"}}"#
                ),
                false,
            ),
            (r#"{"revoke":"key_0123456789ab"}"#.to_owned(), true),
        ] {
            fs::write(file.path(), format!("{line}\n")).unwrap();
            assert_eq!(file.entries().is_ok(), ok, "{line}");
        }
    }
}
