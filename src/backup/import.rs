//! `memkv import`: an export file verified whole, then applied in one write transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::{
    Conflict, EXPORT_FORMAT, EXPORT_VERSION, Entry, Line, Progress, Summary, hex, import_error,
    io_error, sha256_hex,
};
use crate::error::Error;
use crate::exec;
use crate::layout::{FileMeta, Node};
use crate::path::MemoryPath;
use crate::storage::{Backend, Finish, WriteTxn};
use crate::store::{Store, validate_user};
use crate::tree::Tree;

impl<B: Backend> Store<B> {
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
                let meta = FileMeta::times(created_ms, modified_ms, accessed_ms);
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
    pub(super) fn apply(
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
