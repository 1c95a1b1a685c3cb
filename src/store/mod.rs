//! The public face of the crate: a [`Store`] and per-user [`UserHandle`]s.

mod admin;
mod builder;
mod user;

pub use admin::{ExpiredFile, PrunedHistory, UserSummary};
use builder::Clock;
pub use builder::StoreBuilder;
pub use user::{OwnedUserHandle, UserHandle};

use std::ffi::OsStr;
use std::sync::Arc;

use crate::access::{self, PendingAccess};
use crate::blocks::ToolOutput;
use crate::change::Changes;
use crate::command::Command;
use crate::error::Error;
use crate::history::{Actor, Retention};
use crate::limits::{Expiry, Limits, Settings};
use crate::path::MemoryPath;
use crate::pipeline::jobs::ToolJob;
use crate::pipeline::{self, Job, Pipeline};
use crate::secrets::SecretPolicy;
use crate::storage::{AnyBackend, Backend, Finish, WriteTxn};
use crate::time::millis;

/// Longest accepted user id, in UTF-8 bytes.
pub const MAX_USER_ID_BYTES: usize = 256;

/// A memory store: many users' `/memories` trees in one database.
///
/// `Store` is `Sync`: share it between threads by reference or in an `Arc`. Reads run in
/// parallel; writes are serialized by the backend, one transaction per command.
#[derive(Debug)]
pub struct Store {
    pub(crate) backend: AnyBackend,
    limits: Limits,
    expiry: Expiry,
    secrets: SecretPolicy,
    clock: Clock,
    retention: Retention,
    pub(crate) pipeline: Pipeline,
    /// Access times noted by views, written with the next writes (see [`crate::access`]).
    pub(crate) access: PendingAccess,
}

/// Access times that views noted are written before the store goes (best effort: a failure
/// here can only let those files expire earlier than they would have).
impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.flush_access_times();
    }
}

/// One file of a user's tree, as listed by [`UserHandle::files`].
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
    /// Last use, milliseconds since the Unix epoch (recorded coarsely, see [`Expiry`]).
    pub accessed_ms: i64,
}

impl Store {
    /// A builder with PROTOCOL.md's default limits.
    pub fn builder() -> StoreBuilder {
        StoreBuilder::default()
    }

    /// Opens (or creates) the database at `db` (a redb file path or a `postgres://` URL) with
    /// default limits.
    pub fn open(db: impl AsRef<OsStr>) -> Result<Store, Error> {
        Self::builder().open(db)
    }

    /// An in-memory store with default limits.
    pub fn in_memory() -> Result<Store, Error> {
        Self::builder().in_memory()
    }
}

impl Store {
    /// The backend (for its own statistics, such as
    /// [`AnyBackend::round_trips`](crate::storage::AnyBackend::round_trips)).
    pub fn storage(&self) -> &AnyBackend {
        &self.backend
    }

    /// Where the database lives (a path, `memory`, or a URL without its password).
    pub fn location(&self) -> &str {
        self.backend.location()
    }

    /// How much history each store keeps.
    pub fn retention(&self) -> &Retention {
        &self.retention
    }

    /// The limits every command is checked against.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The handle of user `id`. Any non-empty string of at most 256 bytes without control or
    /// format characters and without whitespace at either end is a user id
    /// (`alice@example.com`, `.`, `team/a`, `Zoë Ng` …); ids are compared exactly.
    ///
    /// # Errors
    /// [`Error::InvalidUser`] for an id that breaks these rules (see `validate_user`).
    pub fn user(&self, id: &str) -> Result<UserHandle<'_>, Error> {
        validate_user(id)?;
        Ok(UserHandle {
            store: self,
            id: id.into(),
            actor: None,
        })
    }

    /// An owned handle of user `id`, for tasks that must own what they use (`spawn_blocking`,
    /// async servers): the `Arc` of the store plus the id.
    ///
    /// # Errors
    /// As [`Self::user`].
    pub fn owned_user(self: &Arc<Self>, id: &str) -> Result<OwnedUserHandle, Error> {
        validate_user(id)?;
        Ok(OwnedUserHandle {
            store: Arc::clone(self),
            id: id.into(),
            actor: None,
        })
    }

    /// The expiry settings.
    pub fn expiry(&self) -> &Expiry {
        &self.expiry
    }

    /// The secrets policy.
    pub fn secret_policy(&self) -> SecretPolicy {
        self.secrets
    }

    /// The store's current time, in ms since the epoch.
    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Write transactions of the pipeline committed so far, and the writes in them that changed
    /// something (a refused write is not counted): their ratio is the writes per disk flush that
    /// concurrent callers achieved.
    pub fn commit_stats(&self) -> (u64, u64) {
        self.pipeline.stats()
    }

    /// Runs `f` in one write transaction through the write pipeline (see
    /// [`crate::pipeline::transact`]), with this store's commit hooks.
    pub(crate) fn transact<R>(
        &self,
        lock: &[&str],
        frees_space: bool,
        f: impl FnMut(&mut dyn WriteTxn, &Changes) -> Result<(R, Finish), Error>,
    ) -> Result<R, Error> {
        pipeline::transact(&self.backend, &self.pipeline.hooks, lock, frees_space, f)
    }

    /// Runs `setup` first on each writer thread the store starts for async writers (a server
    /// lowers their priority there). Call it before the first async write; `false` when a setup
    /// was set already.
    pub fn on_writer_thread(&self, setup: fn()) -> bool {
        self.pipeline.writers.set_setup(setup)
    }

    /// Runs `commands` (user, command) in order in one write transaction with one commit, and
    /// returns each one's result, as concurrent callers of [`UserHandle::execute`] would get
    /// them. For servers that form their own batches; a failing command does not affect the
    /// others. A `view` in a batch sees the batch's earlier writes (and records no access time).
    ///
    /// # Errors
    /// Per command: [`Error::InvalidUser`] for a bad user id, or a storage failure.
    pub fn execute_batch(&self, commands: &[(String, Command)]) -> Vec<Result<ToolOutput, Error>> {
        self.batch(commands.iter().map(|(user, command)| (user, command, None)))
    }

    /// As [`Self::execute_batch`], each command's changes recorded as made by its actor (as
    /// [`UserHandle::with_actor`] records them).
    ///
    /// # Errors
    /// Per command: [`Error::InvalidUser`] for a bad user id, or a storage failure.
    pub fn execute_batch_as(
        &self,
        commands: &[(String, Command, Option<Actor>)],
    ) -> Vec<Result<ToolOutput, Error>> {
        self.batch(
            commands
                .iter()
                .map(|(user, command, actor)| (user, command, actor.as_ref())),
        )
    }

    fn batch<'a>(
        &self,
        commands: impl ExactSizeIterator<Item = (&'a String, &'a Command, Option<&'a Actor>)>,
    ) -> Vec<Result<ToolOutput, Error>> {
        let mut results: Vec<Option<Result<ToolOutput, Error>>> =
            Vec::with_capacity(commands.len());
        let mut valid: Vec<Box<dyn Job>> = Vec::new();
        for (user, command, actor) in commands {
            match validate_user(user) {
                Ok(()) => {
                    valid.push(Box::new(ToolJob {
                        user: user.as_str().into(),
                        command: command.clone(),
                        actor: actor.cloned(),
                    }));
                    results.push(None);
                }
                Err(e) => results.push(Some(Err(e))),
            }
        }
        let mut applied = pipeline::batch::run(self, &mut valid).into_iter();
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    let answer = applied.next().expect("one answer per valid command")?;
                    Ok(*answer
                        .downcast::<ToolOutput>()
                        .expect("a command answers with its output"))
                })
            })
            .collect()
    }

    /// Writes the access times that views noted and that no write batch has written yet (see
    /// `src/access.rs`), in one transaction. A read-only store has none to write.
    ///
    /// Runs by itself with the next write batch, before [`Self::expire`], and when the store
    /// is dropped; a server may call it at shutdown. Until then, every expiry decision of this
    /// store counts the noted times.
    ///
    /// # Errors
    /// A storage failure; the notes are kept for the next write.
    pub fn flush_access_times(&self) -> Result<(), Error> {
        let notes = self.access.take();
        if notes.is_empty() {
            return Ok(());
        }
        let mut lock: Vec<&str> = notes.iter().map(|(user, _, _)| user.as_str()).collect();
        lock.sort_unstable();
        lock.dedup();
        let written = self.transact(&lock, false, |txn, changes| {
            access::apply(txn, &notes, changes)?;
            Ok(((), Finish::Commit))
        });
        match written {
            Ok(()) | Err(Error::ReadOnly) => Ok(()),
            Err(e) => {
                self.access.restore(notes);
                Err(e)
            }
        }
    }

    /// Notes a view of a file whose recorded access time is stale; writes the notes at once
    /// when too many wait (best effort: the view has succeeded whatever happens here).
    fn note_access(&self, user: &str, path: &MemoryPath, now_ms: i64) {
        if self.access.note(user, path, now_ms) > access::MAX_PENDING {
            let _ = self.flush_access_times();
        }
    }

    /// The files of `user` that views used after `cutoff_ms` but whose time is not written yet.
    pub(crate) fn used_after(&self, user: &str, cutoff_ms: Option<i64>) -> Vec<MemoryPath> {
        cutoff_ms.map_or_else(Vec::new, |cutoff| self.access.used_after(user, cutoff))
    }

    /// Everything a command of `user` is checked against.
    pub(crate) fn settings(&self, user: &str) -> Settings {
        Settings {
            limits: self.limits,
            secrets: self.secrets,
            ttl_ms: self.expiry.ttl_for(user).map(millis),
            granularity_ms: millis(self.expiry.granularity),
            retention: self.retention,
        }
    }
}

/// The rules for user ids, in one place: non-empty, at most [`MAX_USER_ID_BYTES`], no control
/// or format characters (C0, DEL, C1, category Cf: zero-width, bidi controls, BOM …), no line or
/// paragraph separator (U+2028, U+2029; the same set the path rules refuse), and no whitespace at
/// either end, so that every id prints unambiguously in `users` and logs.
pub(crate) fn validate_user(id: &str) -> Result<(), Error> {
    let reason = if id.is_empty() {
        "must not be empty"
    } else if id.len() > MAX_USER_ID_BYTES {
        "longer than 256 bytes"
    } else if id.chars().any(crate::path::is_forbidden_char) {
        "contains a control or format character (such as a zero-width space, a bidi control, \
         a byte order mark or a line separator)"
    } else if id.starts_with(char::is_whitespace) || id.ends_with(char::is_whitespace) {
        "starts or ends with whitespace"
    } else {
        return Ok(());
    };
    Err(Error::InvalidUser {
        user: id.to_owned(),
        reason,
    })
}
