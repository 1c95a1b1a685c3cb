//! What operators ask of a whole store: its users, a full check, expiry, history pruning.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use super::Store;
use crate::check;
use crate::error::Error;
use crate::exec;
use crate::history::append;
use crate::history::record::{put_store_record, store_record};
use crate::path::MemoryPath;
use crate::storage::{Backend, Finish, ReadTxn, Space};
use crate::tree::{Tree, TreeRead};

/// What [`Store::prune_history`] pruned from one store.
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

/// One user's share of a store, as listed by [`Store::users`].
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

/// A file deleted (or, in a dry run, due to be deleted) by [`Store::expire`].
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

impl Store {
    /// Every user with at least one file (live or expired), with their totals, ordered by id.
    pub fn users(&self) -> Result<Vec<UserSummary>, Error> {
        let now = self.now_ms();
        let txn = self.backend.begin_read()?;
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
                let cutoff = self.settings(&user).expiry_cutoff(now);
                let used = self.used_after(&user, cutoff);
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

    /// Checks the file beneath the records (redb's page checksums, for a database file) and
    /// every user's data against memkv's invariants (index, contents and their SHA-256, totals,
    /// access times) in one snapshot; returns the problems found as `(user, description)`, those
    /// of the file itself first, with an empty user. Changes nothing.
    pub fn check(&self) -> Result<Vec<(String, String)>, Error> {
        let mut out: Vec<(String, String)> = self
            .backend
            .verify_storage()?
            .into_iter()
            .map(|problem| (String::new(), problem))
            .collect();
        match self.check_records() {
            Ok(found) => out.extend(found),
            // Damaged pages already found: the records they hold are part of that damage.
            Err(e @ Error::Corrupt(_)) if !out.is_empty() => {
                out.push((String::new(), e.to_string()))
            }
            Err(e) => return Err(e),
        }
        Ok(out)
    }

    fn check_records(&self) -> Result<Vec<(String, String)>, Error> {
        let txn = self.backend.begin_read()?;
        let mut users = BTreeSet::new();
        for space in Space::ALL {
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

    /// Deletes every expired file (or, with `dry_run`, only lists them), one transaction per
    /// user. Expired files are already invisible; this reclaims their space.
    pub fn expire(&self, dry_run: bool) -> Result<Vec<ExpiredFile>, Error> {
        self.flush_access_times()?;
        let now = self.now_ms();
        let mut out = Vec::new();
        for user in self.users()? {
            let Some(cutoff) = self.settings(&user.user).expiry_cutoff(now) else {
                continue;
            };
            let found = if dry_run {
                let txn = self.backend.begin_read()?;
                TreeRead::new(&txn, &user.user).unused_since(cutoff)?
            } else {
                self.transact(&[&user.user], true, |txn, changes| {
                    let rec = self.settings(&user.user).recorder(now, None, changes);
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

    /// Applies the history retention now, to every store: prunes the versions it no longer
    /// keeps, oldest first. Writes apply retention as they go; this reclaims the space of stores
    /// not written since, or after retention was tightened. One transaction per store, each of
    /// which may use the disk reserve on a full disk. Returns the stores that lost versions.
    ///
    /// # Errors
    /// A storage failure; stores pruned before it stay pruned.
    pub fn prune_history(&self) -> Result<Vec<PrunedHistory>, Error> {
        let mut users = Vec::new();
        self.backend.begin_read()?.users(Space::Store, &mut |u| {
            users.push(u.to_owned());
            Ok(ControlFlow::Continue(()))
        })?;
        let now = self.now_ms();
        let mut out = Vec::new();
        for user in users {
            let retention = self.settings(&user).retention;
            // Pruning drops versions no one can ask for any more; it changes no memory, so it
            // notes no change.
            let pruned = self.transact(&[&user], true, |txn, _| {
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
}
