//! `memkv export`: one read snapshot, streamed as JSON Lines.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::ops::ControlFlow;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use sha2::{Digest, Sha256};

use super::{EXPORT_FORMAT, EXPORT_VERSION, Line, Progress, Summary, history, sha256_hex};
use crate::error::Error;
use crate::exec::Expired;
use crate::history::{MemoryId, VersionId};
use crate::history::{content, record};
use crate::layout;
use crate::pipeline::Engine;
use crate::storage::redb::reserve;
use crate::storage::{Backend, ReadTxn, Space};
use crate::tree::TreeRead;

/// How many versions an export reads at a time.
const VERSION_CHUNK: usize = 256;

/// A writer that hashes what passes through it.
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The body of [`crate::Database::export`].
pub(crate) fn export(
    db: &Engine,
    users: &[String],
    since: Option<u64>,
    out: impl Write,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, Error> {
    // The header's `seq` covers every change the snapshot holds.
    db.settle_log()?;
    let txn = db.backend.begin_read()?;
    let bounds = txn.log_bounds()?;
    // An incremental export: the stores the change log names after `since`, each exported
    // whole (or as deleted), so that applying it to a copy at `since` makes the copy equal.
    if since.is_some() && !users.is_empty() {
        // An incremental export moves a copy on to its `seq`: of some stores only, the others'
        // changes in its range would be lost to the copy.
        return Err(Error::Unsupported {
            location: db.backend.location().to_owned(),
            reason: "an incremental export covers every store: it cannot be limited to some users"
                .into(),
        });
    }
    let touched = match since {
        None => None,
        Some(after) => Some(touched_since(&txn, after, bounds)?),
    };
    // Every store: those with files, and those with only a record (all memories deleted,
    // or created through the memory-stores API and not written yet).
    let mut all = BTreeSet::new();
    for space in [Space::Store, Space::Totals] {
        txn.users(space, &mut |u| {
            all.insert(u.to_owned());
            Ok(ControlFlow::Continue(()))
        })?;
    }
    if touched.is_none()
        && let Some(missing) = users.iter().find(|u| !all.contains(*u))
    {
        return Err(Error::UnknownUser {
            user: missing.clone(),
        });
    }
    let wanted = |u: &String| users.is_empty() || users.contains(u);
    let deleted: Vec<String> = match &touched {
        Some(t) => t
            .iter()
            .filter(|u| wanted(u) && !all.contains(*u))
            .cloned()
            .collect(),
        None => Vec::new(),
    };
    let selected: Vec<String> = all
        .into_iter()
        .filter(|u| wanted(u) && touched.as_ref().is_none_or(|t| t.contains(u)))
        .collect();
    let mut total = 0;
    for user in &selected {
        total += TreeRead::new(&txn, user).totals()?.files;
    }
    let mut out = Hashing {
        inner: BufWriter::new(out),
        hasher: Sha256::new(),
    };
    let write_line = |out: &mut Hashing<BufWriter<_>>, line: &Line| -> Result<(), Error> {
        serde_json::to_writer(&mut *out, line).map_err(|e| Error::Output(e.into()))?;
        out.write_all(b"\n").map_err(Error::Output)
    };
    let now = db.now_ms();
    write_line(
        &mut out,
        &Line::Header {
            format: EXPORT_FORMAT.into(),
            version: EXPORT_VERSION,
            created_ms: now,
            created: crate::time::utc(now),
            memkv_version: env!("CARGO_PKG_VERSION").into(),
            seq: Some(bounds.last),
            base_seq: since,
            database: super::identity::of(&txn)?,
        },
    )?;
    let mut summary = Summary::default();
    for user in &deleted {
        write_line(&mut out, &Line::StoreDeleted { user: user.clone() })?;
    }
    for user in &selected {
        let Some(record) = record::store_record(&txn, user)? else {
            return Err(Error::Corrupt(format!(
                "{user:?} has files but no store record (run memkv check)"
            )));
        };
        let feed_seq = crate::changes::feed::bounds(&txn, user)?.last;
        write_line(&mut out, &history::store_line(user, &record, feed_seq))?;
        summary.users += 1;
        let tree = TreeRead::new(&txn, user);
        let cutoff = db.settings(user).expiry_cutoff(now);
        // Files viewed since their recorded time are live (`crate::access`).
        let expired = Expired::load(&tree, cutoff)?.except(&db.used_after(user, cutoff));
        tree.files_with_contents(&mut |path, meta| {
            if expired.contains(&path) {
                return Ok(ControlFlow::Continue(()));
            }
            let content = tree
                .content(&path)?
                .ok_or_else(|| Error::Corrupt(format!("{path} has no content")))?;
            write_line(
                &mut out,
                &Line::File {
                    user: user.clone(),
                    path: path.to_string(),
                    memory: Some(MemoryId(meta.memory).to_string()),
                    version: Some(VersionId(meta.version).to_string()),
                    sha256: sha256_hex(content.as_bytes()),
                    content,
                    created_ms: meta.created_ms,
                    modified_ms: meta.modified_ms,
                    accessed_ms: meta.accessed_ms,
                },
            )?;
            summary.files += 1;
            summary.bytes += meta.size;
            progress(Progress {
                phase: "exporting",
                done: summary.files,
                total: Some(total),
            });
            Ok(ControlFlow::Continue(()))
        })?;
        // Every version kept, oldest first: redacted ones, and those of deleted memories.
        // Read a chunk at a time: rebuilding a delta's content reads other versions.
        let mut from = 0;
        loop {
            let mut chunk = Vec::new();
            txn.scan(
                Space::Versions,
                user,
                &record::seq_key(from),
                None,
                &mut |key, value| {
                    chunk.push((record::decode_seq(key)?, layout::decode(value, "version")?));
                    Ok(match chunk.len() < VERSION_CHUNK {
                        true => ControlFlow::Continue(()),
                        false => ControlFlow::Break(()),
                    })
                },
            )?;
            let Some(&(last, _)) = chunk.last() else {
                break;
            };
            for (seq, version) in chunk {
                let content = content::content(&txn, user, seq, &version)?;
                write_line(
                    &mut out,
                    &history::version_line(user, seq, version, content),
                )?;
                summary.versions += 1;
            }
            match last.checked_add(1) {
                Some(next) => from = next,
                None => break,
            }
        }
    }
    let digest = hex::encode(out.hasher.clone().finalize());
    write_line(
        &mut out,
        &Line::Trailer {
            files: summary.files,
            users: summary.users,
            versions: Some(summary.versions),
            bytes: summary.bytes,
            sha256: digest,
        },
    )?;
    out.flush().map_err(Error::Output)?;
    Ok(summary)
}

/// The stores with an entry in the change log after `after`; refused when retention removed
/// some of those entries, or when `after` is beyond the log's end.
fn touched_since(
    txn: &dyn ReadTxn,
    after: u64,
    bounds: crate::storage::LogBounds,
) -> Result<BTreeSet<String>, Error> {
    if after > bounds.last {
        return Err(Error::InvalidSince {
            since: after,
            last: bounds.last,
        });
    }
    if after < bounds.trimmed {
        return Err(Error::CursorExpired {
            after,
            trimmed: bounds.trimmed,
        });
    }
    let mut touched = BTreeSet::new();
    let mut cursor = after;
    loop {
        let page = crate::changes::read(txn, cursor, 1000, None)?;
        if page.entries.is_empty() {
            return Ok(touched);
        }
        cursor = page.next_after;
        touched.extend(page.entries.into_iter().map(|e| e.change.store));
    }
}

/// The file `memkv export -o` writes: a private temporary file (mode 0600, a random name,
/// created exclusively, so never through a planted link) beside the target, renamed over it by
/// [`ExportFile::finish`] only once the export is complete. Dropped unfinished, it is removed.
/// Every write error names the target.
pub struct ExportFile {
    target: PathBuf,
    tmp: Option<NamedTempFile>,
}

impl ExportFile {
    /// Prepares an export to `target`. Refuses a directory, and the database file itself
    /// (`database`: the same file under any name, through a link or a hard link).
    ///
    /// # Errors
    /// [`Error::Io`] naming `target`.
    pub fn create(target: &Path, database: Option<&Path>) -> Result<Self, Error> {
        let fail = |source: io::Error| Error::Io {
            path: target.to_owned(),
            source,
        };
        match fs::metadata(target) {
            Ok(meta) if meta.is_dir() => return Err(fail(io::Error::other("is a directory"))),
            Ok(meta) => {
                let same = |file: &Path| {
                    fs::metadata(file).is_ok_and(|f| (f.dev(), f.ino()) == (meta.dev(), meta.ino()))
                };
                if database.is_some_and(same) {
                    return Err(fail(io::Error::other(
                        "is the database itself (export to another file)",
                    )));
                }
                if database.is_some_and(|db| same(&reserve::path_for(db))) {
                    return Err(fail(io::Error::other(
                        "is the database's disk reserve (export to another file)",
                    )));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(e)),
        }
        let name = target
            .file_name()
            .ok_or_else(|| fail(io::Error::other("not a file name")))?;
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(name);
        prefix.push(".");
        let tmp = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".partial")
            .permissions(fs::Permissions::from_mode(0o600))
            .tempfile_in(parent)
            .map_err(|e| {
                fail(io::Error::new(
                    e.kind(),
                    format!("creating a temporary file in {}: {e}", parent.display()),
                ))
            })?;
        Ok(ExportFile {
            target: target.to_owned(),
            tmp: Some(tmp),
        })
    }

    /// Flushes the file to disk and renames it over the target.
    ///
    /// # Errors
    /// [`Error::Io`] naming the target; the temporary file is removed.
    pub fn finish(mut self) -> Result<(), Error> {
        let tmp = self.tmp.take().expect("finished once");
        let fail = |source: io::Error| Error::Io {
            path: self.target.clone(),
            source,
        };
        tmp.as_file().sync_all().map_err(fail)?;
        tmp.persist(&self.target).map_err(|e| fail(e.error))?;
        if let Some(parent) = self.target.parent().filter(|p| !p.as_os_str().is_empty())
            && let Ok(dir) = File::open(parent)
        {
            // The rename itself is durable once the directory is.
            let _ = dir.sync_all();
        }
        Ok(())
    }

    fn named(&self, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("{}: {e}", self.target.display()))
    }
}

impl Write for ExportFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let tmp = self.tmp.as_mut().expect("not finished");
        tmp.write(buf).map_err(|e| self.named(e))
    }

    fn flush(&mut self) -> io::Result<()> {
        let tmp = self.tmp.as_mut().expect("not finished");
        tmp.flush().map_err(|e| self.named(e))
    }
}
