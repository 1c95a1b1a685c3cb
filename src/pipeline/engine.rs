//! [`Engine`]: what a database handle holds, below the public face: the backend, the policies
//! every write is checked against, the clock, the write pipeline and the pending access times.
//! Every module that does the work of a public method takes an `&Engine` (and a [`Scope`] for
//! one memory store), so that they sit below `crate::api` and never name it.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{Pipeline, transact};
use crate::access::{self, PendingAccess};
use crate::blocks::ToolOutput;
use crate::command::ViewRange;
use crate::error::Error;
use crate::exec::{self, Expired};
use crate::history::change::Changes;
use crate::history::{Actor, Retention};
use crate::limits::{Expiry, Limits, Settings};
use crate::path::MemoryPath;
use crate::secrets::SecretPolicy;
use crate::storage::{AnyBackend, Backend, Finish, ReadTxn, WriteTxn};
use crate::time::millis;
use crate::tree::TreeRead;

/// The state of one open database.
#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) backend: AnyBackend,
    pub(crate) limits: Limits,
    pub(crate) expiry: Expiry,
    pub(crate) secrets: SecretPolicy,
    pub(crate) clock: Clock,
    pub(crate) retention: Retention,
    pub(crate) pipeline: Pipeline,
    /// Access times noted by views, written with the next writes (see [`crate::access`]).
    pub(crate) access: PendingAccess,
    /// Bumped after every change of the API keys this process commits (`crate::keys`), so a
    /// cache of them knows at once that it is stale.
    pub(crate) key_changes: std::sync::atomic::AtomicU64,
    /// Every store's own settings (`crate::settings`), laid over the defaults above.
    pub(crate) store_settings: crate::limits::SettingsCache,
}

/// One memory store of an engine, and who writes to it.
#[derive(Clone, Copy)]
pub(crate) struct Scope<'a> {
    pub(crate) engine: &'a Engine,
    pub(crate) user: &'a str,
    pub(crate) actor: Option<&'a Actor>,
}

/// Where a database reads the time: the system clock unless a builder sets another.
#[derive(Clone, Default)]
pub(crate) struct Clock(pub(crate) Option<Arc<dyn Fn() -> SystemTime + Send + Sync>>);

impl Clock {
    pub(crate) fn now_ms(&self) -> i64 {
        let now = match &self.0 {
            Some(f) => f(),
            None => SystemTime::now(),
        };
        now.duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Clock(custom)"
        } else {
            "Clock(system)"
        })
    }
}

/// Access times that views noted are written before the database goes (best effort: a failure
/// here can only let those files expire earlier than they would have).
impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.flush_access_times();
    }
}

impl super::AsSignal for Engine {
    fn signal(&self) -> &super::Signal {
        &self.pipeline.commits.signal
    }
}

impl Engine {
    /// The current time, in ms since the epoch.
    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Notes that this process committed a change of the API keys.
    pub(crate) fn keys_changed(&self) {
        self.key_changes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Everything a command of `user` is checked against.
    pub(crate) fn settings(&self, user: &str) -> Settings {
        let mut settings = Settings {
            limits: self.limits,
            secrets: self.secrets,
            ttl_ms: self.expiry.ttl_for(user).map(millis),
            granularity_ms: millis(self.expiry.granularity),
            retention: self.retention,
        };
        self.store_settings.apply(user, &mut settings);
        // A short time-to-live is not held up by a coarse granularity: reads are recorded at
        // least ten times per time-to-live, so a file expires within 110% of it.
        if let Some(ttl) = settings.ttl_ms {
            settings.granularity_ms = settings.granularity_ms.min(ttl / 10);
        }
        settings
    }

    /// Runs `f` in one write transaction through the write pipeline (see [`transact`]), with
    /// this database's commit hooks.
    pub(crate) fn transact<R>(
        &self,
        lock: &[&str],
        frees_space: bool,
        f: impl FnMut(&mut dyn WriteTxn, &Changes) -> Result<(R, Finish), Error>,
    ) -> Result<R, Error> {
        transact(&self.backend, &self.pipeline.commits, lock, frees_space, f)
    }

    /// Numbers the change log's committed entries that wait for it (PostgreSQL numbers them
    /// after their commits: `crate::storage::WriteTxn::log_settle`), so that a read that follows
    /// sees every change committed before this call. Nothing on a backend that numbers as it
    /// writes, or on a read-only open (whose reads see what writers numbered).
    pub(crate) fn settle_log(&self) -> Result<(), Error> {
        if self.backend.capabilities().embedded {
            return Ok(());
        }
        let settled = self.transact(&[], false, |txn, _| {
            txn.log_settle()?;
            Ok(((), Finish::Commit))
        });
        match settled {
            Err(Error::ReadOnly) => Ok(()),
            other => other,
        }
    }

    /// The body of [`crate::Database::flush_access_times`].
    pub(crate) fn flush_access_times(&self) -> Result<(), Error> {
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
    pub(crate) fn note_access(&self, user: &str, path: &MemoryPath, now_ms: i64) {
        if self.access.note(user, path, now_ms) > access::MAX_PENDING {
            let _ = self.flush_access_times();
        }
    }

    /// The files of `user` that views used after `cutoff_ms` but whose time is not written yet.
    pub(crate) fn used_after(&self, user: &str, cutoff_ms: Option<i64>) -> Vec<MemoryPath> {
        cutoff_ms.map_or_else(Vec::new, |cutoff| self.access.used_after(user, cutoff))
    }

    /// A `view` of `user`'s tree, in a read snapshot: it never waits for a lock or a flush. Notes
    /// the access time of a file whose recorded one is stale (written with the next writes).
    pub(crate) fn view(
        &self,
        user: &str,
        path: &str,
        view_range: Option<ViewRange>,
    ) -> Result<ToolOutput, Error> {
        let now = self.now_ms();
        let settings = self.settings(user);
        let used = self.used_after(user, settings.expiry_cutoff(now));
        let (output, stale) = exec::read(
            &self.backend,
            user,
            &settings,
            (path, view_range),
            now,
            &used,
        )?;
        if let Some(path) = stale {
            self.note_access(user, &path, now);
        }
        Ok(output)
    }

    /// The expired files of `user`'s tree, as of now (those that views used meanwhile are not).
    pub(crate) fn expired<T: ReadTxn + ?Sized>(
        &self,
        user: &str,
        tree: &TreeRead<'_, T>,
    ) -> Result<Expired, Error> {
        let cutoff = self.settings(user).expiry_cutoff(self.now_ms());
        Ok(Expired::load(tree, cutoff)?.except(&self.used_after(user, cutoff)))
    }
}
