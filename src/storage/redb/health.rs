//! What the redb backend does when redb fails: errors are classified, panics are contained.
//!
//! - After an I/O error (a full disk, say) redb refuses every later operation with "Previous I/O
//!   error" until the database is closed and opened again. [`Health::fail`] notes such errors,
//!   and the backend reopens the file before its next transaction, so the next command succeeds
//!   once the cause is gone (what the model is told: "Try again later").
//! - On some damaged pages redb panics (an `unreachable!`, a failed assertion, an index out of
//!   bounds) instead of returning an error. [`Health::guard`] runs every call into redb under
//!   `catch_unwind` and turns such a panic into [`Error::Corrupt`]: a CLI command reports it and
//!   exits non-zero, a server thread lives on. The database is reopened before its next use,
//!   since a panic may have left redb's in-memory state half updated.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::Error;

/// Whether the open database must be closed and opened again before its next use.
#[derive(Debug, Default)]
pub(super) struct Health {
    failed: AtomicBool,
    /// The last I/O error was a full disk (redb's later "previous I/O error" is that one).
    full: AtomicBool,
    /// The database, for messages.
    location: String,
}

/// Whether `e` says the disk (or the user's quota on it) is full.
pub(super) fn is_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

impl Health {
    pub(super) fn new(location: &str) -> Health {
        Health {
            location: location.to_owned(),
            ..Health::default()
        }
    }

    /// True once an I/O error or a panic has been seen since the last (re)open.
    pub(super) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The database must be reopened before its next use (its state in memory lags behind
    /// what is durable).
    pub(super) fn force_reopen(&self) {
        self.failed.store(true, Ordering::Release);
    }

    /// The database was (re)opened.
    pub(super) fn healed(&self) {
        self.failed.store(false, Ordering::Release);
    }

    /// Maps a redb error to memkv's, and notes the errors after which redb must be reopened.
    pub(super) fn fail(&self, e: impl Into<redb::Error>) -> Error {
        let e: redb::Error = e.into();
        let full = match &e {
            redb::Error::Io(io) => {
                let full = is_full(io);
                self.full.store(full, Ordering::Release);
                full
            }
            redb::Error::PreviousIo => self.full.load(Ordering::Acquire),
            _ => false,
        };
        if full {
            self.failed.store(true, Ordering::Release);
            return Error::DiskFull {
                location: self.location.clone(),
            };
        }
        match e {
            redb::Error::Corrupted(message) => {
                return Error::Corrupt(message);
            }
            redb::Error::Io(_)
            | redb::Error::PreviousIo
            | redb::Error::Backend(_)
            | redb::Error::DatabaseClosed
            | redb::Error::LockPoisoned(_) => self.failed.store(true, Ordering::Release),
            _ => {}
        }
        Error::storage(e)
    }

    /// Runs `f` (a call into redb), turning a panic into [`Error::Corrupt`].
    pub(super) fn guard<R>(&self, f: impl FnOnce() -> Result<R, Error>) -> Result<R, Error> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(result) => result,
            Err(payload) => {
                self.failed.store(true, Ordering::Release);
                Err(panicked(payload.as_ref()))
            }
        }
    }
}

/// The error for a panic inside the storage engine.
pub(super) fn panicked(payload: &(dyn Any + Send)) -> Error {
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message");
    Error::Corrupt(format!(
        "the storage engine stopped on a damaged page ({message})"
    ))
}

/// Runs `f` (closing or dropping a redb handle), containing a panic in it: there is no caller
/// left to tell.
pub(super) fn quietly(f: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(f));
}
