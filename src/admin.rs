//! What operators ask of the whole database: its users (memory stores), a full check, expiry,
//! history pruning; and of one memory store, its files and their contents.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use crate::changes::ChangePage;
use crate::check;
use crate::error::Error;
use crate::exec;
use crate::history::append;
use crate::history::record::{put_store_record, store_record};
use crate::layout::Node;
use crate::path::MemoryPath;
use crate::pipeline::{Engine, Scope};
use crate::storage::{Backend, Finish, ReadTxn, Space};
use crate::tree::{Tree, TreeRead};

/// One file of a user's tree, as listed by [`crate::MemoryStore::files`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// Canonical path.
    pub path: MemoryPath,
    /// Length in bytes.
    pub size: u64,
    /// SHA-256 of the content's UTF-8 bytes, in lowercase hexadecimal.
    pub sha256: String,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// Last content change, milliseconds since the Unix epoch.
    pub modified_ms: i64,
    /// Last use, milliseconds since the Unix epoch (recorded coarsely, see [`crate::Expiry`]).
    pub accessed_ms: i64,
}

/// What [`crate::Database::prune_history`] pruned from one store.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrunedHistory {
    /// The store (user) id.
    pub user: String,
    /// Versions pruned.
    pub versions: u64,
    /// Their bytes (paths and contents).
    pub bytes: u64,
}

/// One user's share of a store, as listed by [`crate::Database::users`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UserSummary {
    /// The user id.
    pub user: String,
    /// Number of live files.
    pub files: u64,
    /// Bytes of those files.
    pub bytes: u64,
    /// When the user last created or changed a file (ms since the epoch).
    pub last_write_ms: i64,
    /// Files that have expired but are not deleted yet (invisible to every command).
    pub expired_files: u64,
    /// Bytes of those files.
    pub expired_bytes: u64,
}

/// A file deleted (or, in a dry run, due to be deleted) by [`crate::Database::expire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredFile {
    /// The owner.
    pub user: String,
    /// The file.
    pub path: MemoryPath,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last used (ms since the epoch; recorded coarsely, see [`crate::Expiry`]).
    pub last_used_ms: i64,
}

/// The body of [`crate::Database::users`].
pub(crate) fn users(db: &Engine) -> Result<Vec<UserSummary>, Error> {
    let now = db.now_ms();
    let txn = db.backend.begin_read()?;
    let mut ids = Vec::new();
    txn.users(Space::Totals, &mut |u| {
        ids.push(u.to_owned());
        Ok(ControlFlow::Continue(()))
    })?;
    // Backends order users by their key encoding; operators expect the ids' own order.
    ids.sort();
    ids.into_iter()
        .map(|user| {
            let tree = TreeRead::new(&txn, &user);
            let t = tree.totals()?;
            let cutoff = db.settings(&user).expiry_cutoff(now);
            let used = db.used_after(&user, cutoff);
            let (expired_files, expired_bytes) = match cutoff {
                Some(cutoff) => tree
                    .unused_since(cutoff)?
                    .iter()
                    .filter(|(path, _, _)| !used.contains(path))
                    .fold((0, 0), |(n, b), (_, size, _)| (n + 1, b + size)),
                None => (0, 0),
            };
            Ok(UserSummary {
                files: t.files - expired_files,
                bytes: t.bytes - expired_bytes,
                last_write_ms: t.last_write_ms,
                expired_files,
                expired_bytes,
                user,
            })
        })
        .collect()
}

/// The body of [`crate::Database::check`].
pub(crate) fn check(db: &Engine) -> Result<Vec<(String, String)>, Error> {
    let mut out: Vec<(String, String)> = db
        .backend
        .verify_storage()?
        .into_iter()
        .map(|problem| (String::new(), problem))
        .collect();
    match check_records(db) {
        Ok(found) => out.extend(found),
        // Damaged pages already found: the records they hold are part of that damage.
        Err(e @ Error::Corrupt(_)) if !out.is_empty() => out.push((String::new(), e.to_string())),
        Err(e) => return Err(e),
    }
    Ok(out)
}

fn check_records(db: &Engine) -> Result<Vec<(String, String)>, Error> {
    let txn = db.backend.begin_read()?;
    let mut users = BTreeSet::new();
    // The webhook endpoints, the keys and the database's records live under the empty user
    // id, which is no store; settings may be set for a store before it holds anything.
    for space in Space::ALL.into_iter().filter(|s| {
        !matches!(
            s,
            Space::Webhooks | Space::Database | Space::Keys | Space::Settings | Space::Feed
        )
    }) {
        txn.users(space, &mut |u| {
            users.insert(u.to_owned());
            Ok(ControlFlow::Continue(()))
        })?;
    }
    let mut out = Vec::new();
    for user in users {
        for problem in check::check_user(&txn, &user)? {
            out.push((user.clone(), problem));
        }
    }
    Ok(out)
}

/// The body of [`crate::Database::expire`].
pub(crate) fn expire(db: &Engine, dry_run: bool) -> Result<Vec<ExpiredFile>, Error> {
    db.flush_access_times()?;
    let now = db.now_ms();
    let mut out = Vec::new();
    for user in users(db)? {
        let Some(cutoff) = db.settings(&user.user).expiry_cutoff(now) else {
            continue;
        };
        let found = if dry_run {
            let txn = db.backend.begin_read()?;
            TreeRead::new(&txn, &user.user).unused_since(cutoff)?
        } else {
            db.transact(&[&user.user], true, |txn, changes| {
                let rec = db.settings(&user.user).recorder(now, None, changes);
                let swept = exec::sweep(&mut Tree::new(txn, &user.user, rec), Some(cutoff))?;
                Ok((swept, Finish::Commit))
            })?
        };
        out.extend(
            found
                .into_iter()
                .map(|(path, size, last_used_ms)| ExpiredFile {
                    user: user.user.clone(),
                    path,
                    size,
                    last_used_ms,
                }),
        );
    }
    Ok(out)
}

/// The body of [`crate::Database::prune_history`].
pub(crate) fn prune_history(db: &Engine) -> Result<Vec<PrunedHistory>, Error> {
    let mut users = Vec::new();
    db.backend.begin_read()?.users(Space::Store, &mut |u| {
        users.push(u.to_owned());
        Ok(ControlFlow::Continue(()))
    })?;
    let now = db.now_ms();
    let mut out = Vec::new();
    for user in users {
        let retention = db.settings(&user).retention;
        // Pruning drops versions no one can ask for any more; it changes no memory, so it
        // notes no change.
        let pruned = db.transact(&[&user], true, |txn, _| {
            let Some(mut record) = store_record(txn, &user)? else {
                return Ok((None, Finish::Abort));
            };
            let before = record.history;
            append::prune(txn, &user, &mut record, &retention, now)?;
            let versions = record.history.pruned_versions - before.pruned_versions;
            if versions == 0 {
                return Ok((None, Finish::Abort));
            }
            put_store_record(txn, &user, &record)?;
            let bytes = record.history.pruned_bytes - before.pruned_bytes;
            Ok((Some((versions, bytes)), Finish::Commit))
        })?;
        if let Some((versions, bytes)) = pruned {
            out.push(PrunedHistory {
                user,
                versions,
                bytes,
            });
        }
    }
    Ok(out)
}

/// The body of [`crate::MemoryStore::files`].
pub(crate) fn files(scope: Scope<'_>) -> Result<Vec<FileInfo>, Error> {
    let txn = scope.engine.backend.begin_read()?;
    let tree = TreeRead::new(&txn, scope.user);
    let expired = scope.engine.expired(scope.user, &tree)?;
    // A view noted but not yet written is a use all the same.
    let noted = scope.engine.access.noted(scope.user);
    let mut out = Vec::new();
    tree.files(&mut |path, meta| {
        if !expired.contains(&path) {
            let accessed_ms = noted
                .get(&path)
                .map_or(meta.accessed_ms, |&t| t.max(meta.accessed_ms));
            out.push(FileInfo {
                path,
                size: meta.size,
                sha256: hex::encode(meta.sha256),
                created_ms: meta.created_ms,
                modified_ms: meta.modified_ms,
                accessed_ms,
            });
        }
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(out)
}

/// The body of [`crate::MemoryStore::read_file`].
pub(crate) fn read_file(scope: Scope<'_>, path: &str) -> Result<Option<String>, Error> {
    let parsed = MemoryPath::parse(path).map_err(|reason| Error::InvalidPath {
        path: path.to_owned(),
        reason,
    })?;
    let txn = scope.engine.backend.begin_read()?;
    let tree = TreeRead::new(&txn, scope.user);
    match tree.node(&parsed)? {
        Some(Node::File(_)) if !scope.engine.expired(scope.user, &tree)?.contains(&parsed) => {
            tree.content(&parsed)
        }
        _ => Ok(None),
    }
}

/// The body of [`crate::Database::changes`].
pub(crate) fn changes(
    db: &Engine,
    after: u64,
    limit: usize,
    store: Option<&str>,
) -> Result<ChangePage, Error> {
    if let Some(store) = store {
        crate::user_id::validate_user(store)?;
    }
    db.settle_log()?;
    let txn = db.backend.begin_read()?;
    crate::changes::read(&txn, after, limit.clamp(1, MAX_CHANGES_PAGE), store)
}

/// The most entries one page of the change log holds.
pub const MAX_CHANGES_PAGE: usize = 1000;

/// The body of [`crate::Database::last_change`].
pub(crate) fn last_change(db: &Engine) -> Result<u64, Error> {
    db.settle_log()?;
    crate::changes::last(&db.backend.begin_read()?)
}

/// The body of [`crate::MemoryStore::last_change`]: the last number of `store`'s feed.
pub(crate) fn store_last_change(db: &Engine, store: &str) -> Result<u64, Error> {
    Ok(crate::changes::feed::bounds(&db.backend.begin_read()?, store)?.last)
}

/// The body of [`crate::Database::trim_changes`].
pub(crate) fn trim_changes(db: &Engine) -> Result<u64, Error> {
    let retention = db.pipeline.commits.changes;
    let now_ms = db.now_ms();
    db.transact(&[], true, |txn, _| {
        // What is committed and not numbered yet counts too.
        txn.log_settle()?;
        let removed = crate::changes::trim(txn, &retention, now_ms)?;
        let finish = if removed > 0 {
            Finish::Commit
        } else {
            Finish::Abort
        };
        Ok((removed, finish))
    })
}
