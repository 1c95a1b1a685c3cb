//! Errors of the library.
//!
//! Everything the *model* did wrong is not an error here: it is a [`crate::ToolOutput`] with
//! `is_error: true`. [`Error`] is for the operator: a database that cannot be opened, a bad user
//! id, a failing disk.

use std::path::PathBuf;

use crate::path::PathError;

/// What can go wrong when opening or using a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another process has the database open. memkv allows one process per redb file.
    #[error(
        "{location}: the database is open in another process (one process at a time may use it)"
    )]
    Locked {
        /// The database (a path, or a URL without credentials).
        location: String,
    },
    /// The database does not exist (and the operation does not create one).
    #[error("{location}: no such database")]
    NotFound {
        /// The database (a path, or a URL without credentials).
        location: String,
    },
    /// The database kept aborting the transaction for the sake of concurrent writers
    /// (serialization failures, deadlocks) and memkv gave up after a bounded number of retries,
    /// or (`attempts` 0) no pooled connection became free in time. Nothing was changed; the
    /// command may be sent again.
    #[error(
        "{location}: the database is busy ({}); nothing was changed, try again",
        busy_reason(*attempts)
    )]
    Busy {
        /// The database.
        location: String,
        /// How many times the transaction ran (0: it never started, no connection was free).
        attempts: u32,
    },
    /// The commit's outcome could not be learnt (a PostgreSQL connection lost while it
    /// committed, a journal whose flush failed and could not be cut): the command may or may not
    /// have been applied. memkv never re-runs it on its own; look (`view`) before sending it again.
    #[error("{location}: {reason}; the command may or may not have been applied")]
    OutcomeUnknown {
        /// The database (or its journal).
        location: String,
        /// What happened, in words.
        reason: String,
    },
    /// This build cannot open a database of that kind (a `postgres://` URL without the
    /// `postgres` feature).
    #[error("{location}: {reason}")]
    Unsupported {
        /// The database (a URL without credentials).
        location: String,
        /// Why.
        reason: String,
    },
    /// The database was written with a storage format this build cannot read.
    #[error(
        "{location}: the database uses memkv storage format {found}, this memkv reads format {supported}; open it with a memkv that reads format {found}, or export and import it"
    )]
    UnsupportedFormat {
        /// The database file, or `memory`.
        location: String,
        /// The version found in the file.
        found: u64,
        /// The version this build reads and writes.
        supported: u64,
    },
    /// The file is not a memkv database (another redb file, or not a redb file at all).
    #[error("{location}: not a memkv database: {reason}")]
    NotMemkv {
        /// The database file.
        location: String,
        /// What gave it away.
        reason: String,
    },
    /// A reader of the change log asked for entries that retention has removed: following on
    /// from `after` would skip changes. Start again from a full export, which says the `seq`
    /// it was taken at.
    #[error(
        "cursor expired: the change log no longer holds the entries after {after} (retention removed every entry up to {trimmed}); start again from a full export"
    )]
    CursorExpired {
        /// The cursor asked for.
        after: u64,
        /// Every entry up to this `seq` is gone.
        trimmed: u64,
    },
    /// A reader of the change log gave a cursor past its end: one from another database, or
    /// from this one before it was restored from an older export. Following on from it would
    /// skip changes; start again from a full export.
    #[error(
        "cursor ahead: the change log ends at seq {last}, so the cursor {after} comes from another database or from before a restore; start again from a full export"
    )]
    CursorAhead {
        /// The cursor asked for.
        after: u64,
        /// The log's last `seq`.
        last: u64,
    },
    /// A webhook endpoint memkv does not accept (its URL, its secret, too many endpoints).
    #[error("webhook refused: {0}")]
    InvalidWebhook(String),
    /// An API key memkv does not add (its store, label or expiry; too many keys).
    #[error("key refused: {0}")]
    InvalidKey(String),
    /// A store setting memkv does not accept (a zero quota, say).
    #[error("settings refused: {0}")]
    InvalidSettings(String),
    /// A search memkv does not run (an empty or oversized query, a bad regular expression, a
    /// limit out of range), in a sentence.
    #[error("search refused: {0}")]
    InvalidSearch(String),
    /// An incremental export asked to start after a `seq` the change log has not reached.
    #[error("the change log ends at seq {last}; an export cannot start after {since}")]
    InvalidSince {
        /// The `seq` asked for.
        since: u64,
        /// The log's last `seq`.
        last: u64,
    },
    /// A read-only open found work that only a writer can do (redb's repair after a writer
    /// died mid-write, or commits in the journal that the file does not hold yet), and this
    /// process may not write the file or its directory. Nothing was changed.
    #[error(
        "{location}: {what}; that needs write access to the file and its directory, which this user lacks: run any memkv command on it once as a user who may write it (`memkv --db {location} check`, say)"
    )]
    NeedsWriter {
        /// The database file.
        location: String,
        /// What must be done, in words.
        what: String,
    },
    /// The database was opened read-only and the operation writes.
    #[error("the database was opened read-only")]
    ReadOnly,
    /// The database is in an older storage format that must be migrated by a writer first.
    #[error(
        "{location}: the database uses memkv storage format {found} and needs a migration to format {supported}; open it once for writing (for example with `memkv exec` or `memkv expire --dry-run`)"
    )]
    NeedsMigration {
        /// The database file.
        location: String,
        /// The version found in the file.
        found: u64,
        /// The version this build reads and writes.
        supported: u64,
    },
    /// A user id that memkv does not accept.
    #[error("invalid user id {user:?}: {reason}")]
    InvalidUser {
        /// The id as given.
        user: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// A path given to an operator call (not a model command) that the path rules reject.
    #[error("invalid memory path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Which rule it breaks.
        reason: PathError,
    },
    /// An import file was refused; nothing was changed.
    #[error("{}{reason}", if *line == 0 { String::new() } else { format!("line {line}: ") })]
    Import {
        /// The 1-based line of the export file (0 for the file as a whole: the message then
        /// names no line).
        line: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A file of the host filesystem could not be read or written (import and export).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// An operator call named a user who has no files (live or expired).
    #[error("no such user: {user:?} has no files")]
    UnknownUser {
        /// The id as given.
        user: String,
    },
    /// Writing an export failed (a full disk, a closed pipe: see [`std::io::Error::kind`]).
    #[error("writing the export: {0}")]
    Output(#[source] std::io::Error),
    /// The database is damaged: a stored record memkv cannot decode, a page the storage engine
    /// refuses (or panics on), data edited by hand.
    #[error("the database is damaged: {0}")]
    Corrupt(String),
    /// The disk holding the database is full; the write was not applied. Writes that free
    /// space still commit: a redb file keeps a reserve of the disk for them (see
    /// [`crate::DatabaseBuilder::disk_reserve`]).
    #[error(
        "{location}: the disk is full; nothing was changed. Writes that free space still work (delete or rename memories, `memkv expire`, `memkv prune`, redact versions), or free space on the disk"
    )]
    DiskFull {
        /// The database (a path, or a URL without credentials).
        location: String,
    },
    /// The storage engine or the disk failed.
    #[error("storage error: {0}")]
    Storage(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    pub(crate) fn storage(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Error::Storage(e.into())
    }

    /// The SQLSTATE of a [`Error::Storage`] that a database server reported (PostgreSQL's
    /// five-character code, such as `40001`), if it is one.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            Error::Storage(e) => e.downcast_ref::<DatabaseError>()?.sqlstate.as_deref(),
            _ => None,
        }
    }
}

/// What a database server or the connection to it reported, as the source of an
/// [`Error::Storage`]: its text for people, and its SQLSTATE for code ([`Error::sqlstate`]).
#[derive(Debug, thiserror::Error)]
#[error("{location}: {text}")]
pub struct DatabaseError {
    /// The database (a URL without credentials).
    pub location: String,
    /// What happened, with the server's code in parentheses when it sent one.
    pub text: String,
    /// The server's SQLSTATE, when the server answered (not when the connection broke).
    pub sqlstate: Option<String>,
}

/// Why [`Error::Busy`] gave up: the transaction's retries, or no free connection.
fn busy_reason(attempts: u32) -> String {
    if attempts == 0 {
        "no connection to it became free in time".to_owned()
    } else {
        format!("the transaction was retried {attempts} times")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_says_why() {
        let busy = |attempts| {
            Error::Busy {
                location: "postgres://db".into(),
                attempts,
            }
            .to_string()
        };
        assert_eq!(
            busy(0),
            "postgres://db: the database is busy (no connection to it became free in time); nothing was changed, try again"
        );
        assert_eq!(
            busy(8),
            "postgres://db: the database is busy (the transaction was retried 8 times); nothing was changed, try again"
        );
    }
}
