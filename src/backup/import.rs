//! `memkv import`: an export file verified whole, then applied in one write transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::history::{self, Block, VersionLine};
use super::{
    Conflict, EXPORT_FORMAT, EXPORT_VERSION, Entry, HISTORY_VERSION, Line, MAX_CLOCK_SKEW_MS,
    Progress, Summary, hex, import_error, max_line_bytes, sha256_hex,
};
use crate::error::Error;
use crate::exec;
use crate::history::append;
use crate::history::body::Body;
use crate::history::record::{self, StoreRecord};
use crate::history::{Actor, MemoryId, VersionId};
use crate::layout::{self, FileMeta, Node};
use crate::limits::Limits;
use crate::messages;
use crate::path::MemoryPath;
use crate::secrets::SecretPolicy;
use crate::storage::{Backend, Finish, Space, WriteTxn};
use crate::store::{Store, validate_user};
use crate::tree::Tree;

/// An export file ready to be imported: read twice (verify, then apply), so it must be a file
/// that can be read again. A regular file is read in place; anything else (standard input, a
/// named pipe, a process substitution `<(…)`, a device) is first copied into an anonymous
/// temporary file (unlinked while open: nothing is left behind, even by a killed process).
///
/// Open the source before the database: a pipe may wait for its writer, and nothing should wait
/// while the database is locked. The copy reads lines of at most the longest line an import
/// accepts, so input without newlines (`/dev/zero`) is refused after a bounded read.
pub struct ImportSource {
    file: File,
    name: PathBuf,
    cap: usize,
}

impl ImportSource {
    /// Opens `path` (following links: `/dev/fd/N` works) for an import under `limits`.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path` (a directory is refused); [`Error::Import`] for a line over
    /// the length cap met while copying a non-regular input.
    pub fn open(path: &Path, limits: &Limits) -> Result<Self, Error> {
        let fail = |source: io::Error| Error::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(fail)?;
        let meta = file.metadata().map_err(fail)?;
        if meta.is_dir() {
            return Err(fail(io::Error::other(
                "is a directory (to import a plain directory tree, use --from-dir)",
            )));
        }
        if meta.is_file() {
            return Ok(ImportSource {
                file,
                name: path.to_owned(),
                cap: max_line_bytes(limits),
            });
        }
        Self::spool(file, path, limits)
    }

    /// Copies standard input for an import under `limits`.
    ///
    /// # Errors
    /// As [`Self::open`].
    pub fn stdin(limits: &Limits) -> Result<Self, Error> {
        Self::spool(io::stdin().lock(), Path::new("standard input"), limits)
    }

    /// Copies `input` (named `name` in errors) into an anonymous temporary file.
    ///
    /// # Errors
    /// As [`Self::open`].
    pub fn spool(input: impl Read, name: &Path, limits: &Limits) -> Result<Self, Error> {
        let cap = max_line_bytes(limits);
        let tmp_error = |source: io::Error| Error::Io {
            path: std::env::temp_dir(),
            source,
        };
        let mut spool = tempfile::tempfile().map_err(tmp_error)?;
        let mut reader = BufReader::new(input);
        let mut out = BufWriter::new(&mut spool);
        let mut line = Vec::new();
        let mut n = 0;
        while next_line(&mut reader, &mut line, cap, n + 1, name)? {
            n += 1;
            // Input that is not an export at all (`yes`, random bytes) stops at its first line
            // rather than filling the temporary directory.
            if n == 1 && !matches!(parse_line(1, &mut line.clone())?, Line::Header { .. }) {
                return Err(import_error(1, NOT_A_HEADER));
            }
            out.write_all(&line).map_err(tmp_error)?;
        }
        out.flush().map_err(tmp_error)?;
        drop(out);
        Ok(ImportSource {
            file: spool,
            name: name.to_owned(),
            cap,
        })
    }

    fn rewind(&mut self) -> Result<BufReader<&File>, Error> {
        self.file.rewind().map_err(|source| Error::Io {
            path: self.name.clone(),
            source,
        })?;
        Ok(BufReader::with_capacity(64 * 1024, &self.file))
    }
}

/// Reads the next line (with its newline) into `line`: `false` at the end. A line over `cap`
/// bytes is refused as soon as the cap is passed.
fn next_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    cap: usize,
    n: u64,
    name: &Path,
) -> Result<bool, Error> {
    line.clear();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    let read = reader
        .take(limit)
        .read_until(b'\n', line)
        .map_err(|source| Error::Io {
            path: name.to_owned(),
            source,
        })?;
    if read as u64 == limit && line.last() != Some(&b'\n') {
        return Err(import_error(
            n,
            format!(
                "longer than {cap} bytes, the longest line an import reads under this file-size limit"
            ),
        ));
    }
    Ok(read > 0)
}

impl<B: Backend> Store<B> {
    /// Imports the export file `file`, every user in it: [`Self::import_from`] an
    /// [`ImportSource`] opened with this store's limits.
    ///
    /// # Errors
    /// As [`Self::import_from`].
    pub fn import(
        &self,
        file: &Path,
        conflict: Conflict,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, Error> {
        let mut source = ImportSource::open(file, self.limits())?;
        self.import_from(&mut source, &[], conflict, progress)
    }

    /// Imports an export: verifies all of it, then applies the files of `users` (every user when
    /// empty) in one transaction. On any problem nothing is changed and the error names the
    /// line. Files of other users are verified (checksums, format) but neither checked against
    /// this store's policies nor imported.
    ///
    /// # Errors
    /// [`Error::Import`] for a refused file or a conflict (a user of `users` without files in
    /// it is refused too); [`Error::Io`] if it cannot be read; storage errors.
    pub fn import_from(
        &self,
        source: &mut ImportSource,
        users: &[String],
        conflict: Conflict,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, Error> {
        let verified = self.verify(source, users, progress)?;
        let lock: Vec<&str> = verified.users.iter().map(String::as_str).collect();
        let mut fetches = Vec::new();
        for user in &lock {
            crate::tree::index_fetches(user, &mut fetches);
        }
        self.backend.write(&lock, |txn| {
            // One round trip for every read of the import (on a networked backend).
            txn.prefetch(&fetches, false)?;
            let mut digest = Sha256::new();
            let mut summary = Summary::default();
            let mut imported = BTreeSet::new();
            let mut done = 0;
            // The stores of a version-2 export being restored exactly, with their records
            // (`Some`), or merged into an existing store like a version-1 export (`None`).
            let mut stores: BTreeMap<String, Option<StoreRecord>> = BTreeMap::new();
            // The latest version of each file restored exactly, and the hash of its content:
            // that version keeps no content of its own (the file has it).
            let mut latest: BTreeMap<(String, u64), [u8; 32]> = BTreeMap::new();
            // Each restored memory's latest version so far (versions come oldest first), and
            // whether it is live: the chain of its versions, and its `Ids` entry.
            let mut chains: BTreeMap<(String, u64), (u64, bool)> = BTreeMap::new();
            let mut apply_line = |n: u64, raw: &[u8], line: Line| -> Result<(), Error> {
                match line {
                    Line::Store { ref user, .. } => {
                        digest.update(raw);
                        if !selected(users, user) {
                            return Ok(());
                        }
                        let exists = record::store_record(txn, user)?.is_some()
                            || txn.get(Space::Totals, user, &[])?.is_some();
                        let restore = if exists {
                            summary.merged += 1;
                            None
                        } else {
                            history::restored_store(&line)
                        };
                        imported.insert(user.clone());
                        stores.insert(user.clone(), restore);
                        Ok(())
                    }
                    Line::File {
                        user,
                        path,
                        memory,
                        version,
                        content,
                        created_ms,
                        modified_ms,
                        accessed_ms,
                        ..
                    } => {
                        digest.update(raw);
                        if !selected(users, &user) {
                            return Ok(());
                        }
                        let path =
                            MemoryPath::parse(&path).map_err(|e| import_error(n, e.to_string()))?;
                        let mut meta = FileMeta::times(created_ms, modified_ms, accessed_ms);
                        let exact = matches!(stores.get(&user), Some(Some(_)));
                        if exact {
                            let memory = memory.and_then(|t| t.parse::<MemoryId>().ok());
                            let version = version.and_then(|t| t.parse::<VersionId>().ok());
                            let (Some(memory), Some(version)) = (memory, version) else {
                                return Err(import_error(n, "a file line was not verified"));
                            };
                            (meta.memory, meta.version) = (memory.0, version.0);
                        }
                        let entry = Entry {
                            meta,
                            user,
                            path,
                            content,
                        };
                        imported.insert(entry.user.clone());
                        let applied = if exact {
                            self.restore_entry(txn, &entry, &mut summary).map(|sha256| {
                                latest.insert((entry.user.clone(), entry.meta.version), sha256);
                                chains.insert((entry.user.clone(), entry.meta.memory), (0, true));
                            })
                        } else {
                            self.apply(txn, &entry, conflict, &mut summary)
                        };
                        applied.map_err(|reason| import_error(n, reason))?;
                        done += 1;
                        progress(Progress {
                            phase: "importing",
                            done,
                            total: Some(verified.files),
                        });
                        Ok(())
                    }
                    Line::Version(v) => {
                        digest.update(raw);
                        if let Some(Some(store)) = stores.get_mut(&v.user) {
                            let secrets = self.settings(&v.user).secrets;
                            let (seq, mut record) = v
                                .restored(|content| guarded(secrets, &v, content))
                                .map_err(|reason| import_error(n, reason))?;
                            if record.sha256.is_some()
                                && latest.get(&(v.user.clone(), seq)) == record.sha256.as_ref()
                            {
                                record.body = Body::Current { run: 0 };
                            }
                            let chain = chains
                                .entry((v.user.clone(), record.memory))
                                .or_insert((0, false));
                            record.previous = Some(chain.0).filter(|&p| p > 0);
                            chain.0 = seq;
                            append::restore_version(txn, &v.user, seq, &record)?;
                            history::count_version(store, &record);
                            summary.versions += 1;
                        }
                        Ok(())
                    }
                    Line::Header { .. } | Line::Trailer { .. } => Ok(()),
                }
            };
            for_each_line(source, &mut apply_line)?;
            // A deleted memory whose versions were restored: its entry names the last one.
            for ((user, memory), (last, live)) in &chains {
                if !live && *last > 0 {
                    let entry = record::IdEntry::Deleted { latest: *last };
                    record::put_id_entry(txn, user, *memory, &entry)?;
                }
            }
            for (user, store) in &stores {
                if let Some(store) = store {
                    record::put_store_record(txn, user, store)?;
                }
            }
            // The file must not have changed since it was verified.
            if hex(&digest.finalize()) != verified.files_digest {
                return Err(import_error(
                    0,
                    "the file changed while it was being imported",
                ));
            }
            summary.users = imported.len() as u64;
            Ok((summary, Finish::Commit))
        })
    }

    /// Pass one of [`Self::import_from`], alone: reads and checks everything but the database
    /// (a dry run). Returns what would be imported into an empty store.
    ///
    /// # Errors
    /// As [`Self::import_from`], conflicts with existing files aside.
    pub fn verify_import(
        &self,
        source: &mut ImportSource,
        users: &[String],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, Error> {
        let verified = self.verify(source, users, progress)?;
        Ok(verified.selected)
    }

    fn verify(
        &self,
        source: &mut ImportSource,
        users: &[String],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Verified, Error> {
        let mut seen_header = false;
        let mut trailer: Option<(u64, Line)> = None;
        let mut all = Sha256::new();
        let mut files_digest = Sha256::new();
        let mut files = 0u64;
        let mut bytes = 0u64;
        let mut everyone = BTreeSet::new();
        let mut plans: BTreeMap<String, UserPlan> = BTreeMap::new();
        let mut selected_summary = Summary::default();
        // Version 2: the header's version, the store whose block is being read, the stores
        // seen, the version lines.
        let mut format_version = 0;
        let mut block: Option<Block> = None;
        let mut stores = BTreeSet::new();
        let mut versions = 0u64;
        let limits = *self.limits();
        let latest = self.now_ms().saturating_add(MAX_CLOCK_SKEW_MS);
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
                    if !(1..=EXPORT_VERSION).contains(&version) {
                        return Err(import_error(
                            n,
                            format!(
                                "export format version {version}; this memkv reads versions 1 to {EXPORT_VERSION}"
                            ),
                        ));
                    }
                    format_version = version;
                    seen_header = true;
                }
                _ if !seen_header => {
                    return Err(import_error(n, NOT_A_HEADER));
                }
                Line::Store { ref user, .. } => {
                    if format_version < HISTORY_VERSION {
                        return Err(import_error(
                            n,
                            format!("a store line in a version-{format_version} export"),
                        ));
                    }
                    validate_user(user).map_err(|e| import_error(n, e.to_string()))?;
                    if !stores.insert(user.clone()) {
                        return Err(import_error(
                            n,
                            format!("a second store line for user {user:?}"),
                        ));
                    }
                    block = Some(Block::store(n, user, &line, latest)?);
                    everyone.insert(user.clone());
                    if selected(users, user) {
                        plans.entry(user.clone()).or_default();
                    }
                    files_digest.update(raw);
                }
                Line::Version(ref v) => {
                    match &mut block {
                        Some(b) if b.user == v.user => b.version(n, v, latest)?,
                        _ => {
                            return Err(import_error(
                                n,
                                format!(
                                    "a version line of user {:?} outside the lines of its store",
                                    v.user
                                ),
                            ));
                        }
                    }
                    if selected(users, &v.user)
                        && let Some(content) = &v.content
                    {
                        guarded(self.settings(&v.user).secrets, v, content)
                            .map_err(|reason| import_error(n, reason))?;
                    }
                    versions += 1;
                    files_digest.update(raw);
                }
                Line::File {
                    user,
                    path,
                    memory,
                    version,
                    content,
                    sha256,
                    created_ms,
                    modified_ms,
                    accessed_ms,
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
                    if format_version >= HISTORY_VERSION {
                        match &mut block {
                            Some(b) if b.user == user => {
                                b.file(n, &path, memory.as_deref(), version.as_deref(), &sha256)?
                            }
                            _ => {
                                return Err(import_error(
                                    n,
                                    format!(
                                        "{path}: a file line of user {user:?} outside the lines of its store"
                                    ),
                                ));
                            }
                        }
                    } else if memory.is_some() || version.is_some() {
                        return Err(import_error(
                            n,
                            format!("{path}: ids on a file line of a version-1 export"),
                        ));
                    }
                    for (field, ms) in [
                        ("created_ms", created_ms),
                        ("modified_ms", modified_ms),
                        ("accessed_ms", accessed_ms),
                    ] {
                        if !(0..=latest).contains(&ms) {
                            return Err(import_error(
                                n,
                                format!(
                                    "{path}: {field} {ms} is out of range (0, 1970-01-01, to a day after this machine's clock, {})",
                                    crate::time::utc(latest)
                                ),
                            ));
                        }
                    }
                    files += 1;
                    bytes += content.len() as u64;
                    files_digest.update(raw);
                    everyone.insert(user.clone());
                    if selected(users, &user) {
                        let settings = self.settings(&user);
                        let (guarded, _) =
                            exec::guard(settings.secrets, &content).map_err(|why| {
                                import_error(
                                    n,
                                    format!("{path}: {}", messages::refusal_reason(&path, &why)),
                                )
                            })?;
                        if let Some(why) =
                            exec::check_limits(&limits, &guarded, None, Default::default())
                        {
                            return Err(import_error(n, messages::refusal_reason(&path, &why)));
                        }
                        let plan = plans.entry(user.clone()).or_default();
                        plan.add(n, parsed, guarded.len() as u64)?;
                        if plan.files > limits.max_files || plan.bytes > limits.max_bytes {
                            return Err(import_error(
                                n,
                                format!(
                                    "user {user:?} would exceed the quota ({} files, {} bytes)",
                                    limits.max_files, limits.max_bytes
                                ),
                            ));
                        }
                        selected_summary.files += 1;
                        selected_summary.bytes += guarded.len() as u64;
                    }
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
        let lines = for_each_line(source, &mut check)?;
        if lines == 0 {
            return Err(import_error(0, "the file is empty"));
        }
        let Some((
            n,
            Line::Trailer {
                files: want_files,
                users: want_users,
                versions: want_versions,
                bytes: want_bytes,
                sha256,
            },
        )) = trailer
        else {
            return Err(import_error(
                0,
                "the file ends without a trailer (truncated?)",
            ));
        };
        if hex(&all.finalize()) != sha256 {
            return Err(import_error(
                n,
                "the digest does not match the lines before it (changed or reordered)",
            ));
        }
        if (want_files, want_users, want_bytes) != (files, everyone.len() as u64, bytes) {
            return Err(import_error(
                n,
                format!(
                    "the trailer counts {want_files} files, {want_users} users, {want_bytes} bytes; the file holds {files}, {}, {bytes}",
                    everyone.len()
                ),
            ));
        }
        let have_versions = (format_version >= HISTORY_VERSION).then_some(versions);
        if want_versions != have_versions {
            return Err(import_error(
                n,
                format!(
                    "the trailer counts {} versions; the file holds {}",
                    want_versions.map_or("no".to_owned(), |v| v.to_string()),
                    have_versions.map_or("none (version 1)".to_owned(), |v| v.to_string())
                ),
            ));
        }
        if let Some(missing) = users.iter().find(|u| !everyone.contains(*u)) {
            return Err(import_error(
                0,
                format!("the file holds no files of user {missing:?}"),
            ));
        }
        selected_summary.users = plans.len() as u64;
        Ok(Verified {
            files: selected_summary.files,
            files_digest: hex(&files_digest.finalize()),
            selected: selected_summary,
            users: plans.into_keys().collect(),
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
        let rec = settings.recorder(self.now_ms(), Some(&Actor::operator()));
        let mut tree = Tree::new(txn, &entry.user, rec);
        let fail = |e: Error| e.to_string();
        if tree.archived().map_err(fail)? {
            return Err(format!(
                "cannot import {} for user {:?}: the memory store is archived and read-only",
                entry.path, entry.user
            ));
        }
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
            // A file where a directory is, or below a file, is a conflict whatever the policy:
            // neither skipping nor replacing a single file resolves it.
            (Some(Node::Dir(_)), _) | (None, Some(_)) => {
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
        let (content, _) = exec::guard(settings.secrets, &entry.content)
            .map_err(|why| format!("{path}: {}", messages::refusal(&path.to_string(), &why)))?;
        let totals = tree.read().totals().map_err(fail)?;
        if let Some(why) = exec::check_limits(&settings.limits, &content, old, totals) {
            return Err(format!(
                "user {:?}: {}",
                entry.user,
                messages::refusal_reason(&path.to_string(), &why)
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

impl<B: Backend> Store<B> {
    /// Writes one file of a store a version-2 export restores exactly (it did not exist): with
    /// its memory id and version, recording nothing. Pass one checked its path against the
    /// store's other files, the limits and the quotas (against an empty store), so only the
    /// secrets policy is applied again, for the content to write.
    fn restore_entry(
        &self,
        txn: &mut dyn WriteTxn,
        entry: &Entry,
        summary: &mut Summary,
    ) -> Result<[u8; 32], String> {
        let settings = self.settings(&entry.user);
        let mut tree = Tree::new(txn, &entry.user, settings.recorder(self.now_ms(), None));
        let (content, _) = exec::guard(settings.secrets, &entry.content).map_err(|why| {
            format!(
                "{}: {}",
                entry.path,
                messages::refusal(&entry.path.to_string(), &why)
            )
        })?;
        tree.restore_file(&entry.path, &content, entry.meta)
            .map_err(|e| e.to_string())?;
        summary.files += 1;
        summary.bytes += content.len() as u64;
        Ok(layout::sha256(content.as_bytes()))
    }
}

/// `content` of the version `v` under the secrets policy, or why it is refused.
fn guarded(policy: SecretPolicy, v: &VersionLine, content: &str) -> Result<String, String> {
    exec::guard(policy, content)
        .map(|(guarded, _)| guarded.into_owned())
        .map_err(|why| {
            let path = v.path.as_deref().unwrap_or("a memory");
            format!("{}: {}", v.id, messages::refusal_reason(path, &why))
        })
}

struct Verified {
    /// Files of the selected users.
    files: u64,
    /// Digest of every file line, to detect a file that changes between the two passes.
    files_digest: String,
    /// What would be imported into an empty store.
    selected: Summary,
    /// The users it writes to (locked by the import).
    users: Vec<String>,
}

fn selected(users: &[String], user: &str) -> bool {
    users.is_empty() || users.iter().any(|u| u == user)
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

/// Called with each line's number, raw bytes (with its newline) and parsed value.
type LineVisit<'v> = &'v mut dyn FnMut(u64, &[u8], Line) -> Result<(), Error>;

/// The UTF-8 byte order mark some editors put at the start of a text file.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// Calls `f` with each line of `source`, from its start; returns the number of lines. A UTF-8
/// byte order mark before the first line is skipped (and not part of the digest).
fn for_each_line(source: &mut ImportSource, f: LineVisit<'_>) -> Result<u64, Error> {
    let (cap, name) = (source.cap, source.name.clone());
    let mut reader = source.rewind()?;
    let mut raw = Vec::new();
    let mut n = 0;
    while next_line(&mut reader, &mut raw, cap, n + 1, &name)? {
        n += 1;
        let line = parse_line(n, &mut raw)?;
        f(n, &raw, line)?;
    }
    Ok(n)
}

/// Parses line `n` (with its newline); a byte order mark before line 1 is removed from `raw`.
fn parse_line(n: u64, raw: &mut Vec<u8>) -> Result<Line, Error> {
    if n == 1 && raw.starts_with(BOM) {
        raw.drain(..BOM.len());
    }
    if raw.last() != Some(&b'\n') {
        return Err(import_error(n, "the last line has no newline (truncated?)"));
    }
    let text = std::str::from_utf8(raw).map_err(|_| import_error(n, "not UTF-8"))?;
    serde_json::from_str(text).map_err(|e| import_error(n, format!("not a valid export line: {e}")))
}

const NOT_A_HEADER: &str = "the first line is not a memkv export header";
