//! `memkv import`: an export file verified whole, then applied in one write transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::source::{ImportSource, for_each_line};
use super::verify::{guarded, selected};
use super::{Conflict, Entry, Line, Progress, Summary, import_error};
use super::{history, identity};
use crate::error::Error;
use crate::exec;
use crate::history::append;
use crate::history::body::Body;
use crate::history::change::{Change, ChangeKind, Changes};
use crate::history::record::{self, StoreRecord};
use crate::history::{Actor, MemoryId, VersionId};
use crate::layout::{self, FileMeta, Node};
use crate::limits::Refusal;
use crate::messages;
use crate::path::MemoryPath;
use crate::pipeline::Engine;
use crate::storage::{Finish, Space, WriteTxn};
use crate::tree::Tree;

/// The body of [`crate::Database::import`].
pub(crate) fn import(
    db: &Engine,
    file: &Path,
    conflict: Conflict,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, Error> {
    let mut source = ImportSource::open(file, &db.limits)?;
    import_from(db, &mut source, &[], conflict, progress)
}

/// The body of [`crate::Database::import_from`].
pub(crate) fn import_from(
    db: &Engine,
    source: &mut ImportSource,
    users: &[String],
    conflict: Conflict,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, Error> {
    let verified = super::verify::verify(db, source, users, progress)?;
    let lock: Vec<&str> = verified.users.iter().map(String::as_str).collect();
    let mut fetches = Vec::new();
    for user in &lock {
        crate::tree::index_fetches(user, &mut fetches);
    }
    let incremental = verified.base_seq.is_some();
    if incremental && !users.is_empty() {
        // The database would then stand at the export's `seq` for some stores only.
        return Err(import_error(
            0,
            "an incremental export is imported whole (without --user): it moves the whole database on to its seq",
        ));
    }
    let mut lock = lock;
    if verified.seq.is_some() {
        // The database's own record of where it stands (`restored`).
        lock.push("");
    }
    db.transact(&lock, false, |txn, changes| {
        // One round trip for every read of the import (on a networked backend).
        txn.prefetch(&fetches, false)?;
        if let Some(base) = verified.base_seq {
            check_base(txn, base, verified.seq.unwrap_or(base))?;
            check_origin(txn, verified.database.as_deref())?;
            for user in &verified.deleted {
                remove_store(txn, changes, user, db.now_ms())?;
            }
        }
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
                Line::Store {
                    ref user, feed_seq, ..
                } => {
                    digest.update(raw);
                    if !selected(users, user) {
                        return Ok(());
                    }
                    let mut exists = record::store_record(txn, user)?.is_some()
                        || txn.get(Space::Totals, user, &[])?.is_some();
                    if incremental && exists {
                        // An incremental export holds the whole store as it is now.
                        remove_store(txn, changes, user, db.now_ms())?;
                        exists = false;
                    }
                    let restore = if exists {
                        summary.merged += 1;
                        None
                    } else {
                        history::restored_store(&line)
                    };
                    // Restored exactly: its feed goes on from where the export's stood (from
                    // the export's seq, which no feed number of it exceeds, for an export
                    // before feeds), so no number it gave out is given again.
                    if restore.is_some()
                        && let Some(at) = feed_seq.or(verified.seq)
                    {
                        crate::changes::feed::restored(txn, user, at)?;
                    }
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
                        restore_entry(db, txn, changes, &entry, &mut summary).map(|sha256| {
                            latest.insert((entry.user.clone(), entry.meta.version), sha256);
                            chains.insert((entry.user.clone(), entry.meta.memory), (0, true));
                        })
                    } else {
                        apply(db, txn, changes, &entry, conflict, &mut summary)
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
                        let secrets = db.settings(&v.user).secrets;
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
                Line::StoreDeleted { .. } => {
                    digest.update(raw);
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
                let now = db.now_ms();
                changes.note(Change::of_store(ChangeKind::StoreCreated, user, now));
            }
        }
        // The file must not have changed since it was verified.
        if hex::encode(digest.finalize()) != verified.files_digest {
            return Err(import_error(
                0,
                "the file changed while it was being imported",
            ));
        }
        summary.users = imported.len() as u64;
        // Where the database now stands, for the next incremental export: only when every
        // store of the export was restored exactly.
        // (Not after a merge, or an import of some stores only: the database then follows no
        // one export, and no incremental export applies to it.)
        if let Some(seq) = verified.seq {
            if summary.merged == 0 && users.is_empty() {
                txn.put(Space::Database, "", RESTORED, &seq.to_be_bytes())?;
                identity::set_restored_from(txn, verified.database.as_deref())?;
                // The log is numbered on from where the exported database's stood: no cursor
                // of its followers means a different change here.
                if crate::changes::skip(txn, seq)? {
                    // The endpoints' cursors named entries the restore removed: each goes on
                    // from the restore, as one added now would.
                    crate::webhooks::move_on(txn, seq)?;
                }
            } else {
                txn.remove(Space::Database, "", RESTORED)?;
                identity::set_restored_from(txn, None)?;
            }
        }
        Ok((summary, Finish::Commit))
    })
}

/// The key of the `seq` of the last export an import applied, in `Space::Database`.
const RESTORED: &[u8] = b"restored";

/// Whether an incremental export covering `base + 1 ..= seq` follows what this database was
/// restored to: refused with the gap, the overlap, or the missing base.
fn check_base(txn: &dyn WriteTxn, base: u64, seq: u64) -> Result<(), Error> {
    let at = txn
        .get(Space::Database, "", RESTORED)?
        .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
        .map(u64::from_be_bytes);
    let why = match at {
        None => format!(
            "this incremental export covers seq {} to {seq}, and this database was not restored from an export (import the full export it follows first)",
            base + 1
        ),
        Some(at) if at < base => format!(
            "a gap: this database was restored up to seq {at}, and this incremental export starts after {base} (import the exports between them first)"
        ),
        Some(at) if at > base => format!(
            "an overlap: this database was restored up to seq {at} already, and this incremental export starts after {base}"
        ),
        Some(_) => return Ok(()),
    };
    Err(import_error(0, why))
}

/// Whether an incremental export taken from database `from` follows the full export this
/// database was restored from: refused when both name a database and the two differ. An export
/// that names none (format 3 and before, or a database first opened read-only by a build that
/// knows identities) is taken on trust, as before identities.
fn check_origin(txn: &dyn WriteTxn, from: Option<&str>) -> Result<(), Error> {
    match (identity::restored_from(txn)?, from) {
        (Some(restored), Some(from)) if restored != from => Err(import_error(
            0,
            format!(
                "this incremental export was taken from database {from}, and this database was restored from an export of database {restored}; import a full export of the database it follows first"
            ),
        )),
        _ => Ok(()),
    }
}

/// Removes every entry of store `user`, if it has any (an incremental export replaces or
/// deletes it).
fn remove_store(
    txn: &mut dyn WriteTxn,
    changes: &Changes,
    user: &str,
    now_ms: i64,
) -> Result<(), Error> {
    let exists =
        record::store_record(txn, user)?.is_some() || txn.get(Space::Totals, user, &[])?.is_some();
    if exists {
        // Its settings stay: exports carry none, and they are the operator's, not the data's.
        for space in Space::ALL
            .into_iter()
            .filter(|s| !matches!(s, Space::Settings | Space::Feed))
        {
            txn.remove_range(space, user, &[], &crate::stores::ALL_KEYS_END)?;
        }
        changes.note(Change::of_store(ChangeKind::StoreDeleted, user, now_ms));
    }
    Ok(())
}

/// Writes one entry inside the import transaction, applying the conflict policy, the
/// secrets policy and the limits. `Err` is the reason to refuse the whole import.
pub(super) fn apply(
    db: &Engine,
    txn: &mut dyn WriteTxn,
    changes: &Changes,
    entry: &Entry,
    conflict: Conflict,
    summary: &mut Summary,
) -> Result<(), String> {
    let settings = db.settings(&entry.user);
    let rec = settings.recorder(db.now_ms(), Some(&Actor::operator()), changes);
    let mut tree = Tree::new(txn, &entry.user, rec);
    let fail = |e: Error| e.to_string();
    if tree.archived().map_err(fail)? {
        return Err(format!(
            "cannot import {} for user {:?}: the memory store is archived and read-only",
            entry.path, entry.user
        ));
    }
    // Expired files are gone for imports too (after the first entry this finds nothing).
    exec::sweep(&mut tree, settings.expiry_cutoff(db.now_ms())).map_err(fail)?;
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
    let content = match exec::admit(&tree, &settings, &entry.content, old).map_err(fail)? {
        Ok(admitted) => admitted.content,
        Err(why @ Refusal::Secret { .. }) => {
            return Err(format!(
                "{path}: {}",
                messages::refusal(&path.to_string(), &why)
            ));
        }
        Err(why) => {
            return Err(format!(
                "user {:?}: {}",
                entry.user,
                messages::refusal_reason(&path.to_string(), &why)
            ));
        }
    };
    tree.write_file(path, &content, old, entry.meta)
        .map_err(fail)?;
    summary.files += 1;
    summary.bytes += content.len() as u64;
    summary.replaced += u64::from(old.is_some());
    Ok(())
}

/// Writes one file of a store a version-2 export restores exactly (it did not exist): with
/// its memory id and version, recording nothing. Pass one checked its path against the
/// store's other files, the limits and the quotas (against an empty store), so only the
/// secrets policy is applied again, for the content to write.
fn restore_entry(
    db: &Engine,
    txn: &mut dyn WriteTxn,
    changes: &Changes,
    entry: &Entry,
    summary: &mut Summary,
) -> Result<[u8; 32], String> {
    let settings = db.settings(&entry.user);
    let rec = settings.recorder(db.now_ms(), Some(&Actor::operator()), changes);
    let mut tree = Tree::new(txn, &entry.user, rec);
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
