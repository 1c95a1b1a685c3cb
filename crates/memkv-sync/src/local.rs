//! The synced folder on disk: scanning it, reading a file, and writing, renaming and removing
//! files so that an agent never sees a half-written one and nothing outside the folder is ever
//! reached.
//!
//! - Symbolic links are never followed: a link is reported and skipped, a folder on the way to a
//!   file that is a link makes the file unreachable, and files are opened with `O_NOFOLLOW`.
//! - Only regular files are read (opened non-blocking, so a FIFO cannot stall the sync), up to a
//!   size bound, and only UTF-8 text (what a memory holds).
//! - A file is written as a temporary file in its own folder (hidden, so never synced), flushed,
//!   and renamed over the name; just before the rename the name is looked at again, and a file an
//!   agent changed meanwhile is left alone (the sync looks at it again).
//!
//! A file's [`Fp`] (size, modification time, inode) says whether it changed since the sync last
//! read or wrote it without reading it again.

use std::collections::BTreeMap;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::rules::Rules;

/// Folders deeper than this are not scanned (memkv's own paths are far shallower).
const MAX_DEPTH: usize = 64;

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fp {
    pub len: u64,
    pub mtime_ns: i64,
    pub ino: u64,
}

impl Fp {
    fn of(m: &Metadata) -> Fp {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Fp {
                len: m.len(),
                mtime_ns: m
                    .mtime()
                    .saturating_mul(1_000_000_000)
                    .saturating_add(m.mtime_nsec()),
                ino: m.ino(),
            }
        }
        #[cfg(not(unix))]
        {
            let mtime_ns = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as i64);
            Fp {
                len: m.len(),
                mtime_ns,
                ino: 0,
            }
        }
    }
}

/// A file read whole.
#[derive(Debug, Clone)]
pub struct LocalFile {
    pub content: String,
    pub sha: String,
    pub fp: Fp,
}

/// Why a file is not synced (until it changes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Skip {
    /// A symbolic link, to a file or a folder: never followed.
    Symlink,
    /// A FIFO, socket or device.
    NotRegular,
    /// Larger than the bound.
    TooLarge(u64),
    /// Not UTF-8 text.
    NotText,
    /// A name that is not UTF-8.
    BadName,
    /// The store refuses it (the server's words).
    Refused(String),
    /// A folder the sync may not read.
    Unreadable(String),
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Skip::Symlink => f.write_str("a symbolic link: not followed"),
            Skip::NotRegular => f.write_str("not a regular file (a FIFO, socket or device)"),
            Skip::TooLarge(n) => write!(f, "{n} bytes: larger than the sync's bound"),
            Skip::NotText => f.write_str("not UTF-8 text"),
            Skip::BadName => f.write_str("a name that is not UTF-8"),
            Skip::Refused(why) => write!(f, "refused by the store: {why}"),
            Skip::Unreadable(why) => write!(f, "a folder that cannot be read: {why}"),
        }
    }
}

/// What a look at one name found.
#[derive(Debug)]
pub enum Found {
    Absent,
    File(LocalFile),
    Skipped(Skip, Option<Fp>),
    /// Written while it was read.
    Changing,
}

/// A scan of the whole folder.
#[derive(Debug, Default)]
pub struct Scan {
    /// Every file synced, by folder-relative name.
    pub files: BTreeMap<String, Fp>,
    /// Every file left out for a reason worth reporting.
    pub skipped: BTreeMap<String, Skip>,
    /// The sync's own temporary files (left by a sync that was killed while writing).
    pub temporaries: Vec<PathBuf>,
}

/// The names of the sync's temporary files: `.memkv-sync-…tmp`.
const TEMP_PREFIX: &str = ".memkv-sync-";
const TEMP_SUFFIX: &str = ".tmp";

/// The synced folder.
#[derive(Debug)]
pub struct Folder {
    root: PathBuf,
    /// The device the root was on when opened: a mount point whose file system went away
    /// (an unmounted drive) shows an empty folder on another device, which must not read as
    /// "every file deleted".
    device: u64,
    pub rules: Rules,
    max_bytes: u64,
}

/// An I/O failure, naming the file.
fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

impl Folder {
    /// The folder at `root` (which must exist and be a folder, not a link), reading files of
    /// at most `max_bytes`.
    ///
    /// # Errors
    /// `root` is missing, not a folder, or its `.memkvignore` is bad.
    pub fn open(root: &Path, max_bytes: u64) -> Result<Folder, String> {
        let meta = fs::symlink_metadata(root).map_err(|e| format!("{}: {e}", root.display()))?;
        if !meta.is_dir() {
            return Err(format!("{}: not a folder", root.display()));
        }
        Ok(Folder {
            root: root.to_owned(),
            device: device(&meta),
            rules: Rules::load(root)?,
            max_bytes,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The rules again (after `.memkvignore` changed).
    pub fn reload_rules(&mut self) -> Result<(), String> {
        self.rules = Rules::load(&self.root)?;
        Ok(())
    }

    fn full(&self, rel: &str) -> PathBuf {
        let mut p = self.root.clone();
        p.extend(rel.split('/'));
        p
    }

    /// Every file of the folder, without reading any.
    pub fn scan(&self) -> io::Result<Scan> {
        let root = fs::symlink_metadata(&self.root).map_err(|e| named(&self.root, e))?;
        if root.file_type().is_symlink() || !root.is_dir() {
            return Err(io::Error::other(format!(
                "{}: no longer a folder (replaced by a link or a file): not synced until it is one again",
                self.root.display()
            )));
        }
        if device(&root) != self.device {
            return Err(io::Error::other(format!(
                "{}: now on another device (its drive unmounted?): not synced until it is back",
                self.root.display()
            )));
        }
        let mut scan = Scan::default();
        let mut stack = vec![(self.root.clone(), String::new(), 0usize)];
        while let Some((dir, prefix, depth)) = stack.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                // A folder removed while scanning: nothing in it.
                Err(e) if e.kind() == io::ErrorKind::NotFound && depth > 0 => continue,
                // A folder the sync may not read (`lost+found`): left out, and reported.
                Err(e) if depth > 0 => {
                    let rel = prefix.trim_end_matches('/').to_owned();
                    scan.skipped.insert(rel, Skip::Unreadable(e.to_string()));
                    continue;
                }
                Err(e) => return Err(named(&dir, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| named(&dir, e))?;
                let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                    let shown = format!("{prefix}{}", entry.file_name().to_string_lossy());
                    scan.skipped.insert(shown, Skip::BadName);
                    continue;
                };
                let rel = format!("{prefix}{name}");
                if name.starts_with(TEMP_PREFIX) && name.ends_with(TEMP_SUFFIX) {
                    scan.temporaries.push(entry.path());
                    continue;
                }
                let meta = match fs::symlink_metadata(entry.path()) {
                    Ok(m) => m,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(named(&entry.path(), e)),
                };
                let kind = meta.file_type();
                if self.rules.ignored(&rel, kind.is_dir()) {
                    continue;
                }
                if kind.is_symlink() {
                    scan.skipped.insert(rel, Skip::Symlink);
                } else if kind.is_dir() {
                    if depth + 1 < MAX_DEPTH {
                        stack.push((entry.path(), format!("{rel}/"), depth + 1));
                    }
                } else if kind.is_file() {
                    scan.files.insert(rel, Fp::of(&meta));
                } else {
                    scan.skipped.insert(rel, Skip::NotRegular);
                }
            }
        }
        Ok(scan)
    }

    /// Whether every folder on the way to `rel` is a real folder (no link); `Ok(false)` when one
    /// is missing.
    fn way_is_clear(&self, rel: &str) -> Result<bool, Skip> {
        let mut at = self.root.clone();
        let segments: Vec<&str> = rel.split('/').collect();
        for seg in &segments[..segments.len() - 1] {
            at.push(seg);
            match fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => return Err(Skip::Symlink),
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(Skip::NotRegular),
                Err(_) => return Ok(false),
            }
        }
        Ok(true)
    }

    /// What `rel` is now: its fingerprint only.
    pub fn stat(&self, rel: &str) -> Result<Option<Fp>, Skip> {
        if !self.way_is_clear(rel)? {
            return Ok(None);
        }
        match fs::symlink_metadata(self.full(rel)) {
            Ok(m) if m.file_type().is_symlink() => Err(Skip::Symlink),
            Ok(m) if m.is_file() => Ok(Some(Fp::of(&m))),
            Ok(m) if m.is_dir() => Ok(None),
            Ok(_) => Err(Skip::NotRegular),
            Err(_) => Ok(None),
        }
    }

    /// `rel` read whole, if it is a file the sync may read.
    pub fn read(&self, rel: &str) -> io::Result<Found> {
        match self.way_is_clear(rel) {
            Err(skip) => return Ok(Found::Skipped(skip, None)),
            Ok(false) => return Ok(Found::Absent),
            Ok(true) => {}
        }
        let path = self.full(rel);
        let mut options = OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
        }
        let mut file = match options.open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Absent),
            Err(e) if is_dir(&e) => return Ok(Found::Absent),
            Err(e) if is_link(&e) => return Ok(Found::Skipped(Skip::Symlink, None)),
            Err(e) => return Err(named(&path, e)),
        };
        let meta = file.metadata().map_err(|e| named(&path, e))?;
        let fp = Fp::of(&meta);
        if meta.is_dir() {
            return Ok(Found::Absent);
        }
        if !meta.is_file() {
            return Ok(Found::Skipped(Skip::NotRegular, Some(fp)));
        }
        if meta.len() > self.max_bytes {
            return Ok(Found::Skipped(Skip::TooLarge(meta.len()), Some(fp)));
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        (&mut file)
            .take(self.max_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| named(&path, e))?;
        if bytes.len() as u64 > self.max_bytes {
            return Ok(Found::Skipped(Skip::TooLarge(bytes.len() as u64), Some(fp)));
        }
        // A write during the read shows in the fingerprint: the content read may be a mix, and
        // the fingerprint is the one from before the read (what the content is of).
        if Fp::of(&file.metadata().map_err(|e| named(&path, e))?) != fp {
            return Ok(Found::Changing);
        }
        match String::from_utf8(bytes) {
            Ok(content) => Ok(Found::File(LocalFile {
                sha: sha256(&content),
                content,
                fp,
            })),
            Err(_) => Ok(Found::Skipped(Skip::NotText, Some(fp))),
        }
    }

    /// The files beside `rel` in its folder (folder-relative names), `rel` included.
    pub fn siblings(&self, rel: &str) -> Vec<String> {
        let dir = match rel.rfind('/') {
            Some(i) => &rel[..=i],
            None => "",
        };
        let Ok(entries) = fs::read_dir(self.full(rel).parent().unwrap_or(&self.root)) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().to_str().map(|n| format!("{dir}{n}")))
            .collect()
    }

    /// Makes the folders on the way to `rel`, refusing links.
    fn make_way(&self, rel: &str) -> io::Result<()> {
        let mut at = self.root.clone();
        let segments: Vec<&str> = rel.split('/').collect();
        for seg in &segments[..segments.len() - 1] {
            at.push(seg);
            match fs::symlink_metadata(&at) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(io::Error::other(format!(
                        "{}: not a folder (a file or a link is in the way)",
                        at.display()
                    )));
                }
                Err(_) => match fs::create_dir(&at) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(named(&at, e)),
                },
            }
        }
        Ok(())
    }

    /// Writes `content` to `rel` atomically, if `rel` is still as `expected` (`None`: absent);
    /// `Ok(None)` when it is not (an agent changed it: nothing is written). The new file's
    /// fingerprint otherwise.
    pub fn write(&self, rel: &str, content: &str, expected: Option<Fp>) -> io::Result<Option<Fp>> {
        self.make_way(rel)?;
        let path = self.full(rel);
        let dir = path.parent().expect("a file has a folder");
        let mut tmp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .suffix(TEMP_SUFFIX)
            .tempfile_in(dir)
            .map_err(|e| named(dir, e))?;
        tmp.write_all(content.as_bytes())
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| named(tmp.path(), e))?;
        // A rename keeps the modification time and the inode: this is the file's fingerprint.
        let fp = Fp::of(&tmp.as_file().metadata()?);
        match self.stat(rel) {
            Err(skip) => {
                return Err(io::Error::other(format!("{}: {skip}", path.display())));
            }
            Ok(now) if now != expected => return Ok(None),
            Ok(_) => {}
        }
        tmp.persist(&path).map_err(|e| named(&path, e.error))?;
        sync_dir(dir);
        Ok(Some(fp))
    }

    /// Removes `rel` if it is still as `expected`, and the folders it leaves empty; `false` when
    /// it changed (nothing removed).
    pub fn remove(&self, rel: &str, expected: Fp) -> io::Result<bool> {
        if self.stat(rel).ok().flatten() != Some(expected) {
            return Ok(false);
        }
        let path = self.full(rel);
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(named(&path, e)),
        }
        self.prune(rel);
        Ok(true)
    }

    /// Renames `from` to `to` if `from` is still as `expected` and `to` is free; `false` when
    /// not (nothing moved).
    pub fn rename(&self, from: &str, to: &str, expected: Fp) -> io::Result<bool> {
        if self.stat(from).ok().flatten() != Some(expected)
            || !matches!(self.stat(to), Ok(None))
            || fs::symlink_metadata(self.full(to)).is_ok()
        {
            return Ok(false);
        }
        self.make_way(to)?;
        let (a, b) = (self.full(from), self.full(to));
        fs::rename(&a, &b).map_err(|e| named(&a, e))?;
        if let Some(dir) = b.parent() {
            sync_dir(dir);
        }
        self.prune(from);
        Ok(true)
    }

    /// Removes the folders on the way to `rel` that are now empty (memories have no empty
    /// folders), up to the root.
    fn prune(&self, rel: &str) {
        let mut segments: Vec<&str> = rel.split('/').collect();
        segments.pop();
        while !segments.is_empty() {
            let dir = self.full(&segments.join("/"));
            if fs::remove_dir(&dir).is_err() {
                return;
            }
            segments.pop();
        }
    }
}

/// The device a file is on (0 where the platform does not say).
fn device(m: &Metadata) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        m.dev()
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        0
    }
}

fn is_dir(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::EISDIR)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

fn is_link(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::ELOOP)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// Flushes a folder's entries (a rename in it), where the platform can.
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// The SHA-256 of `text`, as the API writes it (64 lowercase hex digits).
pub fn sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder() -> (tempfile::TempDir, Folder) {
        let dir = tempfile::tempdir().unwrap();
        let f = Folder::open(dir.path(), 1024).unwrap();
        (dir, f)
    }

    #[test]
    fn writes_are_atomic_and_guarded_by_the_fingerprint() {
        let (dir, f) = folder();
        let fp = f.write("a/b.md", "one\n", None).unwrap().unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("a/b.md")).unwrap(),
            "one\n"
        );
        assert_eq!(f.stat("a/b.md").unwrap(), Some(fp));
        // Expected absent, but a file is there: nothing written.
        assert_eq!(f.write("a/b.md", "two\n", None).unwrap(), None);
        assert_eq!(
            fs::read_to_string(dir.path().join("a/b.md")).unwrap(),
            "one\n"
        );
        let fp2 = f.write("a/b.md", "two\n", Some(fp)).unwrap().unwrap();
        assert_ne!(fp, fp2);
        // No temporary file is left behind.
        let names: Vec<_> = fs::read_dir(dir.path().join("a")).unwrap().collect();
        assert_eq!(names.len(), 1);
        assert!(!f.remove("a/b.md", fp).unwrap());
        assert!(f.remove("a/b.md", fp2).unwrap());
        assert!(!dir.path().join("a").exists(), "the emptied folder goes");
    }

    #[cfg(unix)]
    #[test]
    fn links_fifos_large_and_binary_files_are_skipped() {
        let (dir, f) = folder();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("l.md")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("ld")).unwrap();
        let fifo = dir.path().join("p.md");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        fs::write(dir.path().join("big.md"), vec![b'x'; 2000]).unwrap();
        fs::write(dir.path().join("bin.md"), [0xff, 0xfe, 0]).unwrap();
        fs::write(dir.path().join("ok.md"), "fine").unwrap();
        let scan = f.scan().unwrap();
        assert_eq!(scan.skipped.get("l.md"), Some(&Skip::Symlink));
        assert_eq!(scan.skipped.get("ld"), Some(&Skip::Symlink));
        assert_eq!(scan.skipped.get("p.md"), Some(&Skip::NotRegular));
        assert_eq!(
            scan.files.keys().collect::<Vec<_>>(),
            ["big.md", "bin.md", "ok.md"]
        );
        assert!(matches!(
            f.read("l.md").unwrap(),
            Found::Skipped(Skip::Symlink, _)
        ));
        assert!(matches!(
            f.read("ld/secret").unwrap(),
            Found::Skipped(Skip::Symlink, _)
        ));
        assert!(matches!(
            f.read("p.md").unwrap(),
            Found::Skipped(Skip::NotRegular, _)
        ));
        assert!(matches!(
            f.read("big.md").unwrap(),
            Found::Skipped(Skip::TooLarge(2000), _)
        ));
        assert!(matches!(
            f.read("bin.md").unwrap(),
            Found::Skipped(Skip::NotText, _)
        ));
        let Found::File(ok) = f.read("ok.md").unwrap() else {
            panic!()
        };
        assert_eq!(ok.content, "fine");
        // Writing through a linked folder is refused; the outside is untouched.
        assert!(f.write("ld/secret", "x", None).is_err());
        assert_eq!(
            fs::read_to_string(outside.path().join("secret")).unwrap(),
            "s"
        );
    }
}
