//! Creating a database file so that a crash can never leave a file that cannot be opened.
//!
//! redb initialises a new file in place: it sizes it, writes a header, flushes, then writes its
//! magic number. A process killed before that leaves a file of zeros (or a header without the
//! magic number) that redb refuses ever after ("Not a redb database"). So:
//!
//! - a new database is initialised in a temporary file beside the target (created exclusively),
//!   flushed, then linked into place (never over an existing file), and the directory is
//!   flushed: the target path holds either nothing or a complete database;
//! - a file left by an interrupted creation (by an older memkv, or by another program that
//!   creates files in place) is recognised, because it holds no committed data: no magic number,
//!   and nothing but zeros after where redb's header would be. It is initialised again the same
//!   way. Any other file, memkv's or not, is left untouched.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::Error;

/// redb's header: a 9-byte magic number, then fields, in the first 320 bytes.
const HEADER_BYTES: usize = 320;
const MAGIC_BYTES: usize = 9;
/// A file that redb sized for a new database is small; anything larger holds data (or is not
/// redb's), and is never taken for an interrupted creation.
const MAX_UNINITIALISED_BYTES: u64 = 16 << 20;

/// Whether the file at `path` holds no committed data: it is shorter than redb's magic number
/// or lacks it, and every byte after the header is zero. (A missing file is not such a file.)
pub(super) fn holds_no_data(path: &Path) -> io::Result<bool> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    if !file.metadata()?.is_file() || len > MAX_UNINITIALISED_BYTES {
        return Ok(false);
    }
    let mut head = vec![0u8; HEADER_BYTES.min(len as usize)];
    file.read_exact(&mut head)?;
    if head.iter().take(MAGIC_BYTES).any(|&b| b != 0) {
        return Ok(false);
    }
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(true);
        }
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
    }
}

/// Makes sure `path` holds a database: if it is missing (and `create`), or holds no committed
/// data, `initialise` builds one in a temporary file beside it, which is then put in place.
/// A database that another process put there meanwhile is kept.
pub(super) fn ensure(
    path: &Path,
    create: bool,
    initialise: impl FnOnce(&Path) -> Result<(), Error>,
) -> Result<(), Error> {
    let replace = match fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if !create {
                return Err(Error::NotFound {
                    location: path.display().to_string(),
                });
            }
            false
        }
        Err(e) => return Err(io_error(path, e)),
        Ok(_) => {
            if !holds_no_data(path).map_err(|e| io_error(path, e))? {
                return Ok(());
            }
            true
        }
    };
    let tmp = temporary_name(path);
    // Exclusive: never a file (or a link) that someone else put there. Its owner's alone,
    // whatever the umask: memories are personal.
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(&tmp).map_err(|e| io_error(&tmp, e))?;
    let placed = initialise(&tmp).and_then(|()| {
        File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(|e| io_error(&tmp, e))?;
        put_in_place(&tmp, path, replace)?;
        sync_dir(path).map_err(|e| io_error(path, e))
    });
    // Gone already when it was renamed; otherwise it is ours to remove.
    let _ = fs::remove_file(&tmp);
    placed
}

/// Moves the initialised `tmp` to `path`: without replacing anything, or replacing a file that
/// (still) holds no data.
fn put_in_place(tmp: &Path, path: &Path, replace: bool) -> Result<(), Error> {
    if replace {
        if holds_no_data(path).map_err(|e| io_error(path, e))? {
            fs::rename(tmp, path).map_err(|e| io_error(path, e))?;
        }
        return Ok(());
    }
    match fs::hard_link(tmp, path) {
        Ok(()) => Ok(()),
        // Another process created it meanwhile: use theirs.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        // A filesystem without hard links: a rename, which cannot refuse to replace.
        Err(_) if !path.exists() => fs::rename(tmp, path).map_err(|e| io_error(path, e)),
        Err(_) => Ok(()),
    }
}

/// `.NAME.PID-NANOS.creating` in the same directory (so the rename stays on one filesystem).
pub(super) fn temporary_name(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    path.with_file_name(format!(".{name}.{}-{nanos}.creating", std::process::id()))
}

/// Flushes the directory holding `path`, so that the new name is durable.
pub(super) fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

fn io_error(path: &Path, source: io::Error) -> Error {
    Error::Io {
        path: path.to_owned(),
        source,
    }
}
