//! Backup and restore: `memkv export` / `memkv import`, in the JSON Lines format of
//! `docs/export-format.md`, and migration from and to plain directories.
//!
//! An export is one read snapshot, streamed. An import is verified whole first (format, every
//! line, every checksum, the trailer, every path and limit), then applied in one write
//! transaction: all or nothing. Both go through the same path rules, limits, secrets policy and
//! transactions as the six commands.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::ops::ControlFlow;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::exec::{self, Expired};
use crate::layout::{FileMeta, Node};
use crate::path::MemoryPath;
use crate::storage::{Backend, Finish, WriteTxn};
use crate::store::{Store, validate_user};
use crate::tree::{Tree, TreeRead};

/// The `format` of an export's header line.
pub const EXPORT_FORMAT: &str = "memkv-export";
/// The version of the export format this build writes and reads.
pub const EXPORT_VERSION: u64 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Line {
    Header {
        format: String,
        version: u64,
        created_ms: i64,
        created: String,
        memkv_version: String,
    },
    File {
        user: String,
        path: String,
        content: String,
        created_ms: i64,
        modified_ms: i64,
        accessed_ms: i64,
        sha256: String,
    },
    Trailer {
        files: u64,
        users: u64,
        bytes: u64,
        sha256: String,
    },
}

/// What an export or import moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Summary {
    /// Files written.
    pub files: u64,
    /// Distinct users among them.
    pub users: u64,
    /// Bytes of content.
    pub bytes: u64,
    /// Files left alone because they existed (`--skip-existing`).
    pub skipped: u64,
    /// Existing files overwritten (`--replace`).
    pub replaced: u64,
}

/// How far a long operation has come, for progress bars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// What is going on: `exporting`, `verifying`, `importing`.
    pub phase: &'static str,
    /// Files done in this phase.
    pub done: u64,
    /// Files in all, when known.
    pub total: Option<u64>,
}

/// What an import does with a file that already exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Conflict {
    /// Refuse the whole import (the default).
    #[default]
    Refuse,
    /// Keep the existing file, import the rest.
    Skip,
    /// Overwrite the existing file (a directory, or a file in the way of a path, still refuses).
    Replace,
}

/// A file an import from a directory left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The file, relative to the directory.
    pub path: PathBuf,
    /// Why it was left out.
    pub reason: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

fn import_error(line: u64, reason: impl Into<String>) -> Error {
    Error::Import {
        line,
        reason: reason.into(),
    }
}

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

/// One file about to be imported, from a line or from a directory.
struct Entry {
    user: String,
    path: MemoryPath,
    content: String,
    meta: FileMeta,
}

impl<B: Backend> Store<B> {
    /// Writes a consistent snapshot of `users` (every user when empty) to `out`, one read
    /// transaction, streamed: memory stays constant however large the store. Expired files are
    /// left out.
    pub fn export(
        &self,
        users: &[String],
        out: impl Write,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, Error> {
        let txn = self.backend.begin_read()?;
        let selected: Vec<_> = self
            .users()?
            .into_iter()
            .filter(|u| users.is_empty() || users.contains(&u.user))
            .collect();
        let total: u64 = selected.iter().map(|u| u.files).sum();
        let mut out = Hashing {
            inner: BufWriter::new(out),
            hasher: Sha256::new(),
        };
        let write_line = |out: &mut Hashing<BufWriter<_>>, line: &Line| -> Result<(), Error> {
            serde_json::to_writer(&mut *out, line).map_err(|e| Error::storage(e.to_string()))?;
            out.write_all(b"\n")
                .map_err(|e| Error::storage(format!("writing the export: {e}")))
        };
        let now = self.now_ms();
        write_line(
            &mut out,
            &Line::Header {
                format: EXPORT_FORMAT.into(),
                version: EXPORT_VERSION,
                created_ms: now,
                created: crate::time::utc(now),
                memkv_version: env!("CARGO_PKG_VERSION").into(),
            },
        )?;
        let mut summary = Summary::default();
        for user in &selected {
            let tree = TreeRead::new(&txn, &user.user);
            let expired = Expired::load(&tree, self.settings(&user.user).expiry_cutoff(now))?;
            let mut any = false;
            tree.files(&mut |path, meta| {
                if expired.contains(&path) {
                    return Ok(ControlFlow::Continue(()));
                }
                let content = tree
                    .content(&path)?
                    .ok_or_else(|| Error::Corrupt(format!("{path} has no content")))?;
                write_line(
                    &mut out,
                    &Line::File {
                        user: user.user.clone(),
                        path: path.to_string(),
                        sha256: sha256_hex(content.as_bytes()),
                        content,
                        created_ms: meta.created_ms,
                        modified_ms: meta.modified_ms,
                        accessed_ms: meta.accessed_ms,
                    },
                )?;
                any = true;
                summary.files += 1;
                summary.bytes += meta.size;
                progress(Progress {
                    phase: "exporting",
                    done: summary.files,
                    total: Some(total),
                });
                Ok(ControlFlow::Continue(()))
            })?;
            summary.users += u64::from(any);
        }
        let digest = hex(&out.hasher.clone().finalize());
        write_line(
            &mut out,
            &Line::Trailer {
                files: summary.files,
                users: summary.users,
                bytes: summary.bytes,
                sha256: digest,
            },
        )?;
        out.flush()
            .map_err(|e| Error::storage(format!("writing the export: {e}")))?;
        Ok(summary)
    }

    /// Imports an export file: verifies all of it, then applies it in one transaction. On any
    /// problem nothing is changed and the error names the line.
    pub fn import(
        &self,
        file: &Path,
        conflict: Conflict,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, Error> {
        let verified = self.verify_export(file, progress)?;
        self.backend.write(|txn| {
            let mut digest = Sha256::new();
            let mut summary = Summary::default();
            let mut users = BTreeSet::new();
            let mut done = 0;
            let mut apply_line = |n: u64, raw: &[u8], line: Line| -> Result<(), Error> {
                let Line::File {
                    user,
                    path,
                    content,
                    created_ms,
                    modified_ms,
                    accessed_ms,
                    ..
                } = line
                else {
                    return Ok(());
                };
                digest.update(raw);
                let path = MemoryPath::parse(&path).map_err(|e| import_error(n, e.to_string()))?;
                let meta = FileMeta {
                    size: content.len() as u64,
                    created_ms,
                    modified_ms,
                    accessed_ms,
                };
                let entry = Entry {
                    meta,
                    user,
                    path,
                    content,
                };
                users.insert(entry.user.clone());
                self.apply(txn, &entry, conflict, &mut summary)
                    .map_err(|reason| import_error(n, reason))?;
                done += 1;
                progress(Progress {
                    phase: "importing",
                    done,
                    total: Some(verified.files),
                });
                Ok(())
            };
            for_each_line(file, &mut apply_line)?;
            // The file must not have changed since it was verified.
            if hex(&digest.finalize()) != verified.files_digest {
                return Err(import_error(
                    0,
                    "the file changed while it was being imported",
                ));
            }
            summary.users = users.len() as u64;
            Ok((summary, Finish::Commit))
        })
    }

    /// Pass one of [`Self::import`]: everything but the database.
    fn verify_export(
        &self,
        file: &Path,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Verified, Error> {
        let mut seen_header = false;
        let mut trailer: Option<(u64, Line)> = None;
        let mut all = Sha256::new();
        let mut files_digest = Sha256::new();
        let mut files = 0u64;
        let mut bytes = 0u64;
        let mut users: BTreeMap<String, UserPlan> = BTreeMap::new();
        let limits = *self.limits();
        let mut check = |n: u64, raw: &[u8], line: Line| -> Result<(), Error> {
            if trailer.is_some() {
                return Err(import_error(n, "content after the trailer"));
            }
            match line {
                Line::Header {
                    format, version, ..
                } => {
                    if n != 1 {
                        return Err(import_error(n, "a second header"));
                    }
                    if format != EXPORT_FORMAT {
                        return Err(import_error(
                            n,
                            format!("not a memkv export (format {format:?})"),
                        ));
                    }
                    if version != EXPORT_VERSION {
                        return Err(import_error(
                            n,
                            format!(
                                "export format version {version}; this memkv reads version {EXPORT_VERSION}"
                            ),
                        ));
                    }
                    seen_header = true;
                }
                _ if !seen_header => {
                    return Err(import_error(
                        n,
                        "the first line is not a memkv export header",
                    ));
                }
                Line::File {
                    user,
                    path,
                    content,
                    sha256,
                    ..
                } => {
                    if sha256_hex(content.as_bytes()) != sha256 {
                        return Err(import_error(
                            n,
                            format!("checksum mismatch for {path}: the content was changed"),
                        ));
                    }
                    validate_user(&user).map_err(|e| import_error(n, e.to_string()))?;
                    let parsed = MemoryPath::parse(&path)
                        .map_err(|e| import_error(n, format!("invalid path {path:?}: {e}")))?;
                    if parsed.to_string() != path {
                        return Err(import_error(
                            n,
                            format!("path {path:?} is not in canonical form ({parsed})"),
                        ));
                    }
                    if parsed.is_root() {
                        return Err(import_error(n, "/memories itself cannot be a file"));
                    }
                    let settings = self.settings(&user);
                    let (guarded, _) = exec::guard(settings.secrets, &content).map_err(|m| {
                        import_error(n, format!("{path}: {}", m.trim_start_matches("Error: ")))
                    })?;
                    if let Some(m) =
                        exec::check_limits(&limits, &path, &guarded, None, Default::default())
                    {
                        return Err(import_error(n, m.trim_start_matches("Error: ").to_owned()));
                    }
                    users
                        .entry(user.clone())
                        .or_default()
                        .add(n, parsed, guarded.len() as u64)?;
                    let plan = &users[&user];
                    if plan.files > limits.max_files || plan.bytes > limits.max_bytes {
                        return Err(import_error(
                            n,
                            format!(
                                "user {user:?} would exceed the quota ({} files, {} bytes)",
                                limits.max_files, limits.max_bytes
                            ),
                        ));
                    }
                    files += 1;
                    bytes += content.len() as u64;
                    files_digest.update(raw);
                    progress(Progress {
                        phase: "verifying",
                        done: files,
                        total: None,
                    });
                }
                Line::Trailer { .. } => {
                    trailer = Some((n, line));
                    return Ok(());
                }
            }
            all.update(raw);
            Ok(())
        };
        let lines = for_each_line(file, &mut check)?;
        if lines == 0 {
            return Err(import_error(1, "the file is empty"));
        }
        let Some((
            n,
            Line::Trailer {
                files: want_files,
                users: want_users,
                bytes: want_bytes,
                sha256,
            },
        )) = trailer
        else {
            return Err(import_error(
                lines + 1,
                "the file ends without a trailer (truncated?)",
            ));
        };
        if hex(&all.finalize()) != sha256 {
            return Err(import_error(
                n,
                "the digest does not match the lines before it (changed or reordered)",
            ));
        }
        if (want_files, want_users, want_bytes) != (files, users.len() as u64, bytes) {
            return Err(import_error(
                n,
                format!(
                    "the trailer counts {want_files} files, {want_users} users, {want_bytes} bytes; the file holds {files}, {}, {bytes}",
                    users.len()
                ),
            ));
        }
        Ok(Verified {
            files,
            files_digest: hex(&files_digest.finalize()),
        })
    }

    /// Writes one entry inside the import transaction, applying the conflict policy, the
    /// secrets policy and the limits. `Err` is the reason to refuse the whole import.
    fn apply(
        &self,
        txn: &mut dyn WriteTxn,
        entry: &Entry,
        conflict: Conflict,
        summary: &mut Summary,
    ) -> Result<(), String> {
        let settings = self.settings(&entry.user);
        let mut tree = Tree::new(txn, &entry.user);
        let fail = |e: Error| e.to_string();
        // Expired files are gone for imports too (after the first entry this finds nothing).
        exec::sweep(&mut tree, settings.expiry_cutoff(self.now_ms())).map_err(fail)?;
        let path = &entry.path;
        let existing = tree.read().node(path).map_err(fail)?;
        let in_the_way = tree.read().file_ancestor(path).map_err(fail)?;
        let old = match (existing, &in_the_way) {
            (None, None) => None,
            (Some(Node::File(meta)), _) => match conflict {
                Conflict::Refuse => {
                    return Err(format!(
                        "{path} already exists for user {:?} (use --skip-existing or --replace)",
                        entry.user
                    ));
                }
                Conflict::Skip => {
                    summary.skipped += 1;
                    return Ok(());
                }
                Conflict::Replace => Some(meta),
            },
            (Some(Node::Dir(_)), _) | (None, Some(_)) => {
                if conflict == Conflict::Skip {
                    summary.skipped += 1;
                    return Ok(());
                }
                let why = match in_the_way {
                    Some(parent) => format!("{parent} is a file"),
                    None => format!("{path} is a directory"),
                };
                return Err(format!(
                    "cannot import {path} for user {:?}: {why}",
                    entry.user
                ));
            }
        };
        let (content, _) =
            exec::guard(settings.secrets, &entry.content).map_err(|m| format!("{path}: {m}"))?;
        let totals = tree.read().totals().map_err(fail)?;
        if let Some(m) =
            exec::check_limits(&settings.limits, &path.to_string(), &content, old, totals)
        {
            return Err(format!(
                "user {:?}: {}",
                entry.user,
                m.trim_start_matches("Error: ")
            ));
        }
        tree.write_file(path, &content, old, entry.meta)
            .map_err(fail)?;
        summary.files += 1;
        summary.bytes += content.len() as u64;
        summary.replaced += u64::from(old.is_some());
        Ok(())
    }

    /// Imports a plain directory tree (such as the SDK handler's `memories/` folder) as `user`'s
    /// `/memories`, in one transaction. Symbolic links, special files, files that are not UTF-8
    /// and names the path rules reject are skipped and reported (or, with `strict`, refuse the
    /// whole import). Links are never followed: nothing outside `dir` is read.
    pub fn import_dir(
        &self,
        dir: &Path,
        user: &str,
        strict: bool,
        conflict: Conflict,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(Summary, Vec<Skipped>), Error> {
        validate_user(user)?;
        let meta = fs::metadata(dir).map_err(io_error(dir))?;
        if !meta.is_dir() {
            return Err(Error::Io {
                path: dir.to_owned(),
                source: io::Error::other("not a directory"),
            });
        }
        let mut entries = Vec::new();
        let mut skipped = Vec::new();
        let now = self.now_ms();
        walk_dir(dir, Path::new(""), user, now, &mut entries, &mut skipped)?;
        // Names that differ only in Unicode normalization are one memory path.
        let mut seen = BTreeSet::new();
        entries.retain(|(rel, e): &(PathBuf, Entry)| {
            let fresh = seen.insert(e.path.clone());
            if !fresh {
                skipped.push(Skipped {
                    path: rel.clone(),
                    reason: format!(
                        "its name is the same memory path as another file ({})",
                        e.path
                    ),
                });
            }
            fresh
        });
        if strict && let Some(first) = skipped.first() {
            return Err(Error::Io {
                path: dir.join(&first.path),
                source: io::Error::other(format!(
                    "{} (--strict refuses the whole import)",
                    first.reason
                )),
            });
        }
        let total = entries.len() as u64;
        let summary = self.backend.write(|txn| {
            let mut summary = Summary::default();
            for (i, (rel, entry)) in entries.iter().enumerate() {
                self.apply(txn, entry, conflict, &mut summary)
                    .map_err(|reason| Error::Io {
                        path: dir.join(rel),
                        source: io::Error::other(reason),
                    })?;
                progress(Progress {
                    phase: "importing",
                    done: i as u64 + 1,
                    total: Some(total),
                });
            }
            summary.users = u64::from(summary.files > 0);
            Ok((summary, Finish::Commit))
        })?;
        Ok((summary, skipped))
    }

    /// Writes `user`'s live files under `dir` as plain files (created if missing). Refuses to
    /// write through a symbolic link or over an existing file, so nothing outside `dir` changes.
    pub fn export_dir(
        &self,
        user: &str,
        dir: &Path,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, Error> {
        let handle = self.user(user)?;
        if let Ok(meta) = fs::symlink_metadata(dir)
            && !meta.is_dir()
        {
            return Err(Error::Io {
                path: dir.to_owned(),
                source: io::Error::other("not a directory (symbolic links are not followed)"),
            });
        }
        fs::create_dir_all(dir).map_err(io_error(dir))?;
        let files = handle.files()?;
        let total = files.len() as u64;
        let mut summary = Summary::default();
        for f in files {
            let content = handle
                .read_file(&f.path.to_string())?
                .ok_or_else(|| Error::Corrupt(format!("{} vanished during the export", f.path)))?;
            let mut target = dir.to_owned();
            let (name, parents) = f
                .path
                .segments()
                .split_last()
                .expect("files are below the root");
            for segment in parents {
                target.push(segment);
                match fs::symlink_metadata(&target) {
                    Ok(meta) if meta.is_dir() => {}
                    Ok(_) => {
                        return Err(Error::Io {
                            path: target,
                            source: io::Error::other(
                                "exists and is not a directory (symbolic links are not followed)",
                            ),
                        });
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        fs::create_dir(&target).map_err(io_error(&target))?
                    }
                    Err(e) => {
                        return Err(Error::Io {
                            path: target,
                            source: e,
                        });
                    }
                }
            }
            target.push(name);
            let mut out = OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&target)
                .map_err(io_error(&target))?;
            out.write_all(content.as_bytes())
                .map_err(io_error(&target))?;
            let mtime = UNIX_EPOCH + Duration::from_millis(f.modified_ms.max(0) as u64);
            out.set_modified(mtime).map_err(io_error(&target))?;
            summary.files += 1;
            summary.bytes += f.size;
            progress(Progress {
                phase: "exporting",
                done: summary.files,
                total: Some(total),
            });
        }
        summary.users = u64::from(summary.files > 0);
        Ok(summary)
    }
}

struct Verified {
    files: u64,
    /// Digest of the file lines, to detect a file that changes between the two passes.
    files_digest: String,
}

/// Per-user bookkeeping of the verify pass: duplicates, file/directory clashes, quotas.
#[derive(Default)]
struct UserPlan {
    files: u64,
    bytes: u64,
    paths: BTreeSet<MemoryPath>,
    dirs: BTreeSet<MemoryPath>,
}

impl UserPlan {
    fn add(&mut self, line: u64, path: MemoryPath, bytes: u64) -> Result<(), Error> {
        if self.paths.contains(&path) {
            return Err(import_error(line, format!("duplicate path {path}")));
        }
        if self.dirs.contains(&path) {
            return Err(import_error(
                line,
                format!("{path} is also a directory of other files"),
            ));
        }
        for dir in path.ancestors().skip(1) {
            if self.paths.contains(&dir) {
                return Err(import_error(
                    line,
                    format!("{path} lies below the file {dir}"),
                ));
            }
            self.dirs.insert(dir);
        }
        self.paths.insert(path);
        self.files += 1;
        self.bytes += bytes;
        Ok(())
    }
}

/// Calls `f` with each line's number, raw bytes (with its newline) and parsed value; returns
/// the number of lines.
/// Called with each line's number, raw bytes and parsed value.
type LineVisit<'v> = &'v mut dyn FnMut(u64, &[u8], Line) -> Result<(), Error>;

fn for_each_line(file: &Path, f: LineVisit<'_>) -> Result<u64, Error> {
    let mut reader = BufReader::new(File::open(file).map_err(io_error(file))?);
    let mut raw = Vec::new();
    let mut n = 0;
    loop {
        raw.clear();
        if reader.read_until(b'\n', &mut raw).map_err(io_error(file))? == 0 {
            return Ok(n);
        }
        n += 1;
        if raw.last() != Some(&b'\n') {
            return Err(import_error(n, "the last line has no newline (truncated?)"));
        }
        let text = std::str::from_utf8(&raw).map_err(|_| import_error(n, "not UTF-8"))?;
        let line: Line = serde_json::from_str(text)
            .map_err(|e| import_error(n, format!("not a valid export line: {e}")))?;
        f(n, &raw, line)?;
    }
}

fn walk_dir(
    root: &Path,
    rel: &Path,
    user: &str,
    now: i64,
    entries: &mut Vec<(PathBuf, Entry)>,
    skipped: &mut Vec<Skipped>,
) -> Result<(), Error> {
    let dir = root.join(rel);
    let mut children: Vec<_> = fs::read_dir(&dir)
        .map_err(io_error(&dir))?
        .collect::<Result<_, _>>()
        .map_err(io_error(&dir))?;
    children.sort_by_key(|c| c.file_name());
    for child in children {
        let rel_child = rel.join(child.file_name());
        let skip = |reason: &str| Skipped {
            path: rel_child.clone(),
            reason: reason.to_owned(),
        };
        // Never follows a link: the type is that of the entry itself.
        let meta = fs::symlink_metadata(child.path()).map_err(io_error(&child.path()))?;
        if meta.file_type().is_symlink() {
            skipped.push(skip("symbolic link (not followed)"));
            continue;
        }
        let Some(name) = child.file_name().to_str().map(str::to_owned) else {
            skipped.push(skip("the name is not UTF-8"));
            continue;
        };
        if meta.is_dir() {
            walk_dir(root, &rel_child, user, now, entries, skipped)?;
            continue;
        }
        if !meta.is_file() {
            skipped.push(skip("special file"));
            continue;
        }
        let _ = name;
        let segments: Vec<String> = rel_child
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let raw = format!("/memories/{}", segments.join("/"));
        let path = match MemoryPath::parse(&raw) {
            Ok(path) => path,
            Err(e) => {
                skipped.push(skip(&format!("not a valid memory path ({e})")));
                continue;
            }
        };
        let mut file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(child.path())
        {
            Ok(file) => file,
            Err(e) => {
                skipped.push(skip(&format!("cannot be read ({e})")));
                continue;
            }
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(io_error(&child.path()))?;
        let Ok(content) = String::from_utf8(bytes) else {
            skipped.push(skip("the content is not UTF-8"));
            continue;
        };
        let ms = |t: io::Result<SystemTime>| {
            t.ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(now, |d| d.as_millis() as i64)
        };
        let modified_ms = ms(meta.modified());
        let created_ms = ms(meta.created()).min(modified_ms);
        entries.push((
            rel_child.clone(),
            Entry {
                user: user.to_owned(),
                path,
                meta: FileMeta {
                    size: content.len() as u64,
                    created_ms,
                    modified_ms,
                    accessed_ms: now,
                },
                content,
            },
        ));
    }
    Ok(())
}
