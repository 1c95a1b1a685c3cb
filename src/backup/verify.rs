//! Pass one of an import: every line read and checked, nothing written (`memkv import
//! --dry-run` is this pass alone).

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use super::history::{Block, VersionLine};
use super::source::{ImportSource, NOT_A_HEADER, for_each_line};
use super::{
    EXPORT_FORMAT, EXPORT_VERSION, HISTORY_VERSION, IDENTITY_VERSION, INCREMENTAL_VERSION, Line,
    MAX_CLOCK_SKEW_MS, Progress, Summary, import_error, sha256_hex,
};
use crate::error::Error;
use crate::exec;
use crate::messages;
use crate::path::MemoryPath;
use crate::pipeline::Engine;
use crate::secrets::SecretPolicy;
use crate::user_id::validate_user;

/// The body of [`crate::Database::verify_import`].
pub(crate) fn verify_import(
    db: &Engine,
    source: &mut ImportSource,
    users: &[String],
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, Error> {
    let verified = verify(db, source, users, progress)?;
    Ok(verified.selected)
}

pub(super) fn verify(
    db: &Engine,
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
    let mut positions: (Option<u64>, Option<u64>) = (None, None);
    let mut from: Option<String> = None;
    let mut deleted = Vec::new();
    let mut block: Option<Block> = None;
    let mut stores = BTreeSet::new();
    let mut versions = 0u64;
    let limits = db.limits;
    let latest = db.now_ms().saturating_add(MAX_CLOCK_SKEW_MS);
    let mut check = |n: u64, raw: &[u8], line: Line| -> Result<(), Error> {
        if trailer.is_some() {
            return Err(import_error(n, "content after the trailer"));
        }
        match line {
            Line::Header {
                format,
                version,
                seq,
                base_seq,
                database,
                ..
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
                if version < INCREMENTAL_VERSION && (seq.is_some() || base_seq.is_some()) {
                    return Err(import_error(
                        n,
                        format!("a change-log position in a version-{version} export"),
                    ));
                }
                if let (Some(base), Some(seq)) = (base_seq, seq)
                    && base > seq
                {
                    return Err(import_error(
                        n,
                        format!("an incremental export from seq {base} back to {seq}"),
                    ));
                }
                if base_seq.is_some() && seq.is_none() {
                    return Err(import_error(n, "an incremental export without its seq"));
                }
                if version < IDENTITY_VERSION && database.is_some() {
                    return Err(import_error(
                        n,
                        format!("a database identity in a version-{version} export"),
                    ));
                }
                if let Some(id) = &database
                    && (id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()))
                {
                    return Err(import_error(
                        n,
                        format!("database {id:?} is not an identity (32 hex digits)"),
                    ));
                }
                from = database;
                positions = (base_seq, seq);
                format_version = version;
                seen_header = true;
            }
            _ if !seen_header => {
                return Err(import_error(n, NOT_A_HEADER));
            }
            Line::StoreDeleted { ref user } => {
                if positions.0.is_none() {
                    return Err(import_error(
                        n,
                        "a store_deleted line outside an incremental export",
                    ));
                }
                validate_user(user).map_err(|e| import_error(n, e.to_string()))?;
                if !stores.insert(user.clone()) {
                    return Err(import_error(
                        n,
                        format!("user {user:?} is both deleted and exported"),
                    ));
                }
                if selected(users, user) {
                    deleted.push(user.clone());
                }
                files_digest.update(raw);
            }
            Line::Store {
                ref user, feed_seq, ..
            } => {
                if format_version < HISTORY_VERSION {
                    return Err(import_error(
                        n,
                        format!("a store line in a version-{format_version} export"),
                    ));
                }
                if feed_seq.is_some() && format_version < IDENTITY_VERSION {
                    return Err(import_error(
                        n,
                        format!("a feed_seq in a version-{format_version} export"),
                    ));
                }
                if feed_seq.is_some_and(|at| at > super::history::MAX_NEXT_SEQ) {
                    return Err(import_error(n, "feed_seq is beyond 2^53"));
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
                    guarded(db.settings(&v.user).secrets, v, content)
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
                    let settings = db.settings(&user);
                    let (guarded, _) = exec::guard(settings.secrets, &content).map_err(|why| {
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
    if hex::encode(all.finalize()) != sha256 {
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
    let mut writes: Vec<String> = plans.keys().cloned().collect();
    writes.extend(deleted.iter().cloned());
    writes.sort();
    Ok(Verified {
        base_seq: positions.0,
        seq: positions.1,
        database: from,
        deleted,
        files: selected_summary.files,
        files_digest: hex::encode(files_digest.finalize()),
        selected: selected_summary,
        users: writes,
    })
}

pub(super) struct Verified {
    /// An incremental export: the `seq` it starts after.
    pub(super) base_seq: Option<u64>,
    /// The change-log position the export covers up to (version 3).
    pub(super) seq: Option<u64>,
    /// The identity of the database it was taken from (version 4).
    pub(super) database: Option<String>,
    /// The stores an incremental export deletes (of those selected).
    pub(super) deleted: Vec<String>,
    /// Files of the selected users.
    pub(super) files: u64,
    /// Digest of every file line, to detect a file that changes between the two passes.
    pub(super) files_digest: String,
    /// What would be imported into an empty store.
    pub(super) selected: Summary,
    /// The users it writes to (locked by the import).
    pub(super) users: Vec<String>,
}

pub(super) fn selected(users: &[String], user: &str) -> bool {
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

/// `content` of the version `v` under the secrets policy, or why it is refused.
pub(super) fn guarded(
    policy: SecretPolicy,
    v: &VersionLine,
    content: &str,
) -> Result<String, String> {
    exec::guard(policy, content)
        .map(|(guarded, _)| guarded.into_owned())
        .map_err(|why| {
            let path = v.path.as_deref().unwrap_or("a memory");
            format!("{}: {}", v.id, messages::refusal_reason(path, &why))
        })
}
