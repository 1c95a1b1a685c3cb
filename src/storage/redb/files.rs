//! The file layer under the journal and the disk reserve: every open, read, write, flush,
//! length change, removal and directory flush they make goes through [`Files`], so that a test
//! can put a filesystem of its own underneath (one that crashes at any call and keeps only what
//! POSIX promises was flushed: `tests/it/crash.rs`), and a database file too
//! ([`Files::database`]).
//!
//! [`OsFiles`], the real one, opens only regular files, never through a symbolic link
//! (`O_NOFOLLOW`), and never waits on a FIFO or a device (`O_NONBLOCK`, then a check of what was
//! opened): a file beside the database that something else put there is refused with its name,
//! not followed, truncated or waited on. What it creates is readable by its owner alone (0600).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// How [`Files::open`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reading only; the file must exist.
    Read,
    /// Reading and writing; the file must exist.
    Write,
    /// Reading and writing, created (empty) if missing.
    Create,
}

/// One open file (see [`Files`]).
#[allow(clippy::len_without_is_empty)] // a file's length, as redb's `StorageBackend` has it
pub trait FileOps: Send + Sync + fmt::Debug {
    /// The file's length.
    fn len(&self) -> io::Result<u64>;
    /// Fills `buf` from `offset`; an error if the file ends before.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `data` at `offset`.
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()>;
    /// Flushes the file's data (and the length its data needs), `fdatasync`.
    fn sync_data(&self) -> io::Result<()>;
    /// Flushes the file's data and metadata, `fsync`.
    fn sync_all(&self) -> io::Result<()>;
    /// Sets the file's length (zeros when it grows).
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Allocates `len` bytes at `offset` on the disk: blocks, not a sparse length.
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()>;
    /// Bytes free for this process on the disk holding the file.
    fn available(&self) -> io::Result<u64>;
}

/// The filesystem as the journal and the reserve see it.
pub trait Files: Send + Sync + fmt::Debug {
    /// Opens the regular file at `path`; a symbolic link, a FIFO, a device or a directory there
    /// is refused (an error of kind [`io::ErrorKind::InvalidInput`] that says what it is).
    fn open(&self, path: &Path, access: Access) -> io::Result<Box<dyn FileOps>>;
    /// Whether anything (of any kind, a dangling link too) is at `path`.
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// Removes the name `path`.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Renames `from` to `to`, replacing nothing: an error if `to` exists.
    fn rename_new(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Flushes the directory `dir`: the names created or removed in it are durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// The storage redb should use for the database file at `path`, or `None` for the file
    /// itself (redb opens it, with its locks).
    fn database(&self, _path: &Path) -> Option<Box<dyn redb::StorageBackend>> {
        None
    }
}

/// The directory holding `path` (`.` for a bare name).
pub(crate) fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The host's filesystem.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFiles;

#[derive(Debug)]
struct OsFile(File);

fn refused(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what}, not a regular file: memkv opens its own files only; move it away"),
    )
}

impl Files for OsFiles {
    fn open(&self, path: &Path, access: Access) -> io::Result<Box<dyn FileOps>> {
        let mut options = OpenOptions::new();
        options.read(true);
        match access {
            Access::Read => {}
            Access::Write => {
                options.write(true);
            }
            Access::Create => {
                options.write(true).create(true).truncate(false);
            }
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // A file made here is its owner's alone, whatever the umask: it holds memories.
            options
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .mode(0o600);
        }
        let file = match options.open(path) {
            Ok(file) => file,
            #[cfg(unix)]
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(refused("a symbolic link"));
            }
            #[cfg(unix)]
            Err(e) if e.raw_os_error() == Some(libc::EISDIR) => {
                return Err(refused("a directory"));
            }
            Err(e) => return Err(e),
        };
        let kind = file.metadata()?.file_type();
        if !kind.is_file() {
            return Err(refused(&describe(kind)));
        }
        Ok(Box::new(OsFile(file)))
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        match std::fs::symlink_metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn rename_new(&self, from: &Path, to: &Path) -> io::Result<()> {
        // A hard link refuses an existing target; the old name is then removed.
        std::fs::hard_link(from, to)?;
        std::fs::remove_file(from)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

/// What a file that is not a regular file is, in words.
fn describe(kind: std::fs::FileType) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO".into();
        }
        if kind.is_socket() {
            return "a socket".into();
        }
        if kind.is_block_device() || kind.is_char_device() {
            return "a device".into();
        }
    }
    if kind.is_dir() {
        "a directory".into()
    } else {
        "something else".into()
    }
}

impl FileOps for OsFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.0.read_exact_at(buf, offset)
    }

    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.0.write_all_at(data, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.0.sync_all()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        allocate(&self.0, offset, len)
    }

    fn available(&self) -> io::Result<u64> {
        available(&self.0)
    }
}

/// Bytes free for this process on the disk holding `file`.
#[cfg(unix)]
fn available(file: &File) -> io::Result<u64> {
    let stat = rustix::fs::fstatvfs(file)?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

#[cfg(not(unix))]
fn available(_file: &File) -> io::Result<u64> {
    Ok(u64::MAX)
}

/// Allocates `len` bytes of `file` at `offset` on the disk (blocks, not a sparse length).
#[cfg(target_os = "linux")]
fn allocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use rustix::io::Errno;
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), offset, len) {
        Ok(()) => Ok(()),
        // A filesystem without fallocate: write the bytes.
        Err(Errno::OPNOTSUPP | Errno::INVAL) => write_bytes(file, offset, len),
        Err(e) => Err(e.into()),
    }
}

#[cfg(not(target_os = "linux"))]
fn allocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    write_bytes(file, offset, len)
}

/// Writes `len` zeros at `offset`, so that the disk allocates them.
fn write_bytes(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let chunk = vec![0u8; 64 << 10];
    let mut at = offset;
    while at < offset + len {
        let n = (offset + len - at).min(chunk.len() as u64) as usize;
        if let Err(e) = file.write_all_at(&chunk[..n], at) {
            // Keep only whole steps: a partly written step is given back.
            let _ = file.set_len(offset);
            return Err(e);
        }
        at += n as u64;
    }
    Ok(())
}

/// redb's storage for a [`Files::database`].
#[derive(Debug)]
pub(super) struct Storage(pub(super) Box<dyn redb::StorageBackend>);

impl redb::StorageBackend for Storage {
    fn len(&self) -> io::Result<u64> {
        self.0.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.0.read(offset, out)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.0.write(offset, data)
    }

    fn close(&self) -> io::Result<()> {
        self.0.close()
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn links_fifos_and_directories_are_refused_and_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"someone else's").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from(0o600)).unwrap();
        for (path, what) in [
            (&link, "a symbolic link"),
            (&dangling, "a symbolic link"),
            (&fifo, "a FIFO"),
            (&dir.path().to_path_buf(), "a directory"),
        ] {
            for access in [Access::Read, Access::Write, Access::Create] {
                let e = OsFiles.open(path, access).unwrap_err();
                assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{path:?} {access:?}");
                assert!(e.to_string().starts_with(what), "{e}");
            }
        }
        assert!(!dir.path().join("nowhere").exists(), "a link was followed");
        assert_eq!(std::fs::read(&outside).unwrap(), b"someone else's");
        assert!(OsFiles.exists(&dangling).unwrap());
        assert!(!OsFiles.exists(&dir.path().join("nowhere")).unwrap());
    }

    #[test]
    fn a_regular_file_reads_writes_and_renames_without_replacing() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let f = OsFiles.open(&a, Access::Create).unwrap();
        f.write_at(b"hello", 3).unwrap();
        f.sync_data().unwrap();
        assert_eq!(f.len().unwrap(), 8);
        let mut buf = [0u8; 5];
        f.read_at(&mut buf, 3).unwrap();
        assert_eq!(&buf, b"hello");
        assert!(f.read_at(&mut buf, 4).is_err(), "past the end");
        let b = dir.path().join("b");
        std::fs::write(&b, b"kept").unwrap();
        assert!(OsFiles.rename_new(&a, &b).is_err());
        assert_eq!(std::fs::read(&b).unwrap(), b"kept");
        OsFiles.rename_new(&a, &dir.path().join("c")).unwrap();
        assert!(!a.exists());
        OsFiles.sync_dir(dir.path()).unwrap();
    }
}
