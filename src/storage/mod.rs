//! The storage seam: a narrow, transactional, ordered key-value interface.
//!
//! The six commands are written once, in `crate::tree` and `crate::exec`, against these
//! traits. A backend only has to store bytes under `(space, user, key)` in key order and give
//! all-or-nothing transactions; it never sees paths or commands. [`redb`] is the embedded default;
//! `postgres` (cargo feature `postgres`) keeps the same bytes in PostgreSQL. [`AnyBackend`] picks
//! one at run time from a location (a file path or a `postgres://` URL).
//!
//! Keys within one user and space are compared as plain bytes. User ids are opaque strings that a
//! backend must keep apart exactly (no normalization, no concatenation that could alias).
//!
//! Made for a networked database as well as an embedded one:
//! - [`Backend::write`] may run its closure more than once (a serialization failure or a deadlock
//!   is retried inside the backend, with backoff, a bounded number of times; then
//!   [`Error::Busy`]). A commit whose outcome is unknown is [`Error::OutcomeUnknown`] and is never
//!   retried.
//! - A writer names the users (stores) it touches; the backend locks them in sorted order before
//!   anything else, so writers of one store serialize across processes and batches never
//!   deadlock. redb has one writer at a time anyway.
//! - [`ReadTxn::prefetch`] announces the keys and ranges a command will read, so a backend with
//!   round trips fetches them in one; later reads of them are served from that fetch.
//!   [`ReadTxn::read_ahead`] does the same for reads that depend on earlier ones (the version a
//!   write retires), which a backend must fetch rather than assume.

mod any;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod redb;
pub mod watch;

pub use any::{AnyBackend, AnyRead, is_postgres_url};

use std::ops::ControlFlow;

use crate::error::Error;

/// The keyspaces memkv stores, each partitioned by user. See `docs/design.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    /// The directory index: one entry per file and per directory, keyed by parent and name.
    Nodes,
    /// File contents, keyed by full path.
    Contents,
    /// Per-user totals (files, bytes, last write) under the empty key.
    Totals,
    /// The access-time index: one entry per file, ordered by last access (for expiry).
    Access,
    /// The store's record under the empty key, until format 5 (since format 6: [`Space::Store`]).
    Meta,
    /// Live memories by id: the content key of each one's path (format 5 only; format 6 keeps
    /// them in [`Space::Memories`]).
    Ids,
    /// Each memory's versions: `memory seq` keys, empty values (format 5 only; format 6 chains
    /// versions instead).
    Lineage,
    /// Every version kept, by sequence number.
    Versions,
    /// The full content of versions kept as a snapshot, by sequence number (apart from
    /// `Versions`, so that the page of the newest versions stays small).
    Snapshots,
    /// The store's own record (name, metadata, archival, sequence, history totals) under the
    /// empty key. After `Versions` so that, in a backend that keeps keys in order, the record
    /// every write rewrites sits beside the newest version.
    Store,
    /// Each memory's entry, by id in descending order (so that, in a backend that keeps keys in
    /// order, a new memory's entry sits beside the store record): where it is while live, its
    /// last version once deleted.
    Memories,
    /// The webhook endpoints (since format 7), under the empty user id, which no store can
    /// have: one record per endpoint, by id.
    Webhooks,
    /// Records of the database itself (since format 7), under the empty user id: where the
    /// last export applied by an import stood (`restored`).
    Database,
    /// The API keys (since format 8), under the empty user id: one record per key, by id.
    Keys,
    /// A store's own settings (since format 8) under the empty key: quotas, time-to-live,
    /// history retention, secrets policy.
    Settings,
    /// A store's own numbering of its change-log entries (since format 9): its bounds under the
    /// empty key, and a copy of each entry by its number (`crate::changes::feed`). Kept when the
    /// store is deleted, so that its numbers are never given again.
    Feed,
}

/// What a backend declares about itself ([`Backend::capabilities`]), so that its callers choose
/// how to use it without probing which backend it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The database lives in this process: a transaction costs no round trip to a server, so
    /// one thread that runs every write back to back serves writers best (`memkv serve` runs
    /// one).
    pub embedded: bool,
    /// Whether [`ReadTxn::prefetch`] saves anything (round trips): callers skip working out
    /// their fetches when it does not.
    pub prefetch: bool,
    /// How many write transactions group commit may run at once (see `crate::pipeline`). One for
    /// a database with a single writer; more where the database orders writers of one store
    /// itself (the store locks of [`Backend::write`]) and flushes concurrent commits together.
    pub write_lanes: usize,
}

impl Capabilities {
    /// A database file in this process with a single writer.
    pub const EMBEDDED: Capabilities = Capabilities {
        embedded: true,
        prefetch: false,
        write_lanes: 1,
    };
}

/// A space's number in each backend's stored keys (see [`Space::numbers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceNumbers {
    /// The byte that starts the space's keys in redb's `memkv_data` table.
    pub redb: u8,
    /// The `space` column of PostgreSQL's `memkv_entries`.
    pub postgres: u8,
}

impl Space {
    /// The number each backend stores for this space, in every key: changing one is a layout
    /// change (docs/design.md). redb orders the small, hot records first and the contents last,
    /// so that the records one write touches share as few pages as they can: the newest access
    /// entries (the end of `Access`), the user's totals and the top-level directories (the start
    /// of `Nodes`) side by side, and so the newest versions (the end of `Versions`), the store
    /// record every write rewrites (`Store`) and the newest memory's entry (the start of
    /// `Memories`, in descending order). PostgreSQL, whose rows are not kept in key order, has
    /// `Snapshots` and `Store` the other way round, as layout 6 added them.
    pub const fn numbers(self) -> SpaceNumbers {
        let (redb, postgres) = match self {
            Space::Access => (1, 1),
            Space::Totals => (2, 2),
            Space::Nodes => (3, 3),
            Space::Contents => (4, 4),
            Space::Meta => (5, 5),
            Space::Ids => (6, 6),
            Space::Lineage => (7, 7),
            Space::Versions => (8, 8),
            Space::Store => (9, 10),
            Space::Snapshots => (10, 9),
            Space::Memories => (11, 11),
            Space::Webhooks => (12, 12),
            Space::Database => (13, 13),
            Space::Keys => (14, 14),
            Space::Settings => (15, 15),
            Space::Feed => (16, 16),
        };
        SpaceNumbers { redb, postgres }
    }

    /// Every space, in a fixed order.
    pub const ALL: [Space; 16] = [
        Space::Nodes,
        Space::Contents,
        Space::Totals,
        Space::Access,
        Space::Meta,
        Space::Ids,
        Space::Lineage,
        Space::Versions,
        Space::Snapshots,
        Space::Store,
        Space::Memories,
        Space::Webhooks,
        Space::Database,
        Space::Keys,
        Space::Settings,
        Space::Feed,
    ];
}

/// Where the change log stands (see `crate::changes`): the last sequence number given and the
/// last one trimmed away (every entry up to it is gone; 0 when none was).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogBounds {
    /// The highest `seq` committed (0: none yet).
    pub last: u64,
    /// Every entry with `seq <= trimmed` has been removed by retention.
    pub trimmed: u64,
}

/// Called for each entry of a scan, in key order; return `ControlFlow::Break(())` to stop.
pub type Visit<'v> = &'v mut dyn FnMut(&[u8], &[u8]) -> Result<ControlFlow<()>, Error>;

/// One read announced to [`ReadTxn::prefetch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetch {
    /// The value under one key.
    Get {
        /// The keyspace.
        space: Space,
        /// The user (store).
        user: String,
        /// The key.
        key: Vec<u8>,
    },
    /// Every entry with `start <= key < end` (`None` = to the end of the user's space).
    Range {
        /// The keyspace.
        space: Space,
        /// The user (store).
        user: String,
        /// First key.
        start: Vec<u8>,
        /// Bound (exclusive).
        end: Option<Vec<u8>>,
    },
}

/// How a write transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Make every change durable and visible.
    Commit,
    /// Discard every change.
    Abort,
}

/// A store of bytes that runs transactions.
pub trait Backend: Send + Sync {
    /// A read-only snapshot.
    type Read<'a>: ReadTxn
    where
        Self: 'a;

    /// Where the data lives, for messages (a path, `memory`, a URL without credentials).
    fn location(&self) -> &str;

    /// Begins a consistent read-only snapshot.
    fn begin_read(&self) -> Result<Self::Read<'_>, Error>;

    /// Runs `f` in one write transaction, then commits it, durably, if `f` says
    /// [`Finish::Commit`], and discards it if `f` says [`Finish::Abort`] or fails. Writers of
    /// the same user wait for each other: the backend locks every user of `lock` (in sorted
    /// order) before `f` runs. A read-only backend returns [`Error::ReadOnly`].
    ///
    /// `f` may run more than once: a transaction the database aborted (a serialization failure,
    /// a deadlock, a connection lost before the commit) is discarded and re-run, a bounded number
    /// of times, after which the backend returns [`Error::Busy`]. `f` must therefore derive
    /// everything from the transaction it is given. A connection lost *during* the commit is
    /// [`Error::OutcomeUnknown`]: the changes may or may not be stored, and nothing re-runs them.
    fn write<R>(
        &self,
        lock: &[&str],
        f: impl FnMut(&mut dyn WriteTxn) -> Result<(R, Finish), Error>,
    ) -> Result<R, Error>;

    /// [`Self::write`] for a write that frees space or needs little more than it frees (a
    /// delete, a rename, expiry, history pruning, a redaction): a backend that keeps a reserve
    /// of its disk (redb's) spends it on such a write when the disk is full, so that a store
    /// that filled its disk can always be shrunk. By default, [`Self::write`].
    fn write_freeing<R>(
        &self,
        lock: &[&str],
        f: impl FnMut(&mut dyn WriteTxn) -> Result<(R, Finish), Error>,
    ) -> Result<R, Error> {
        self.write(lock, f)
    }

    /// After the commit of a write that erased data (a redaction, a store's deletion): what the
    /// backend keeps beside its live data forgets it where it can at once (redb's journal is
    /// checkpointed and cut to nothing; the pages it freed keep their bytes until reused or
    /// `RedbBackend::compact`). By default nothing.
    fn erased(&self) -> Result<(), Error> {
        Ok(())
    }

    /// What this backend is, for the callers that choose how to use it. By default
    /// [`Capabilities::EMBEDDED`].
    fn capabilities(&self) -> Capabilities {
        Capabilities::EMBEDDED
    }

    /// Takes the role `key` if no other process of the database holds it (the webhook
    /// deliverer: one per database), until the [`Lease`] is dropped; `None` when another holds
    /// it. By default (a database one process writes) always granted.
    fn lease(&self, key: i64) -> Result<Option<Box<dyn Lease>>, Error> {
        let _ = key;
        Ok(Some(Box::new(Sole)))
    }

    /// Checks the stored bytes beneath the records (page checksums, say) without changing
    /// anything, for `Database::check`; the problems found, as sentences. By default, none.
    fn verify_storage(&self) -> Result<Vec<String>, Error> {
        Ok(Vec::new())
    }
}

/// A role held by this process ([`Backend::lease`]), given up when dropped.
pub trait Lease: Send {
    /// Whether the role is still held (a networked backend loses it with its connection).
    fn held(&mut self) -> bool;
}

/// The lease of a database only this process writes.
struct Sole;

impl Lease for Sole {
    fn held(&mut self) -> bool {
        true
    }
}

/// Reads, within one transaction.
pub trait ReadTxn {
    /// The logical layout version the data was written in (`crate::layout::LAYOUT_VERSION`;
    /// 0 for an empty database).
    fn layout_version(&self) -> Result<u64, Error>;

    /// Announces reads that are about to follow, so that a backend with round trips fetches them
    /// at once; later `get`s and `scan`s inside them are then served from the fetch. `last` says
    /// that no read outside them follows in this snapshot. A hint: the embedded backend ignores
    /// it, and reads outside a prefetch still work.
    fn prefetch(&self, fetches: &[Fetch], last: bool) -> Result<(), Error> {
        let _ = (fetches, last);
        Ok(())
    }

    /// Like [`Self::prefetch`], for reads a command could not announce with its others (they
    /// depend on what those returned: the version a write retires, say): fetched now, in one
    /// round trip, from the database itself, never answered from what a backend remembers of
    /// earlier transactions. By default, a prefetch.
    fn read_ahead(&self, fetches: &[Fetch]) -> Result<(), Error> {
        self.prefetch(fetches, false)
    }

    /// The value under `key`.
    fn get(&self, space: Space, user: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error>;

    /// Visits the entries with `start <= key < end` (`end: None` = to the end of the user's
    /// space) in ascending key order.
    fn scan(
        &self,
        space: Space,
        user: &str,
        start: &[u8],
        end: Option<&[u8]>,
        visit: Visit<'_>,
    ) -> Result<(), Error>;

    /// Visits every user that has an entry in `space` (in the backend's order).
    fn users(
        &self,
        space: Space,
        visit: &mut dyn FnMut(&str) -> Result<ControlFlow<()>, Error>,
    ) -> Result<(), Error>;

    /// The change log's entries with `seq > after`, oldest first, at most `limit` of them. The
    /// log is the database's, not a user's: a sequence across every store.
    fn log_read(&self, after: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>, Error>;

    /// Where the change log stands.
    fn log_bounds(&self) -> Result<LogBounds, Error>;
}

/// Writes, within one transaction.
pub trait WriteTxn: ReadTxn {
    /// Stores `value` under `key`, replacing any previous value.
    fn put(&mut self, space: Space, user: &str, key: &[u8], value: &[u8]) -> Result<(), Error>;
    /// Stores `value` under `key`, which the caller knows was absent when the transaction began:
    /// a key made new (a new version's number, a new memory's entry, a new file's contents and
    /// access entry). A backend may insert it without looking for it first; one that finds it
    /// present all the same (a damaged store) treats that as a failed assumption and runs the
    /// transaction again as if `put` had been called. Where knowing saves nothing, `put`.
    fn put_new(&mut self, space: Space, user: &str, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.put(space, user, key, value)
    }
    /// Removes `key`; removing a missing key is not an error.
    fn remove(&mut self, space: Space, user: &str, key: &[u8]) -> Result<(), Error>;
    /// Removes every key with `start <= key < end`.
    fn remove_range(
        &mut self,
        space: Space,
        user: &str,
        start: &[u8],
        end: &[u8],
    ) -> Result<(), Error>;
    /// Records that the data is now in layout version `version`.
    fn set_layout_version(&mut self, version: u64) -> Result<(), Error>;

    /// Appends `entries` to the change log, in order. Numbers are given in commit order
    /// across every writer of the database (at once, or by a later [`Self::log_settle`]), so
    /// that a reader that sees an entry sees every entry below it: a reader following the log
    /// never skips one that commits later with a lower number (`docs/design.md`, The change
    /// log).
    fn log_append(&mut self, entries: &[Vec<u8>]) -> Result<(), Error>;

    /// Numbers every committed entry not numbered yet, so that [`ReadTxn::log_read`] in this
    /// transaction sees every change committed before it (a backend that numbers entries in
    /// its writers' transactions, like redb, has none waiting: by default nothing).
    fn log_settle(&mut self) -> Result<(), Error> {
        Ok(())
    }

    /// What this transaction writes is bookkeeping other processes need not be told of (a
    /// webhook's cursor, a key's last use): its commit notifies no one (PostgreSQL's
    /// notifications, docs/postgres.md); they read it at their next read. A backend that does
    /// not notify: by default nothing.
    fn quiet(&mut self) {}

    /// Holds the numbering of the log for the rest of this transaction: no other transaction
    /// numbers entries ([`Self::log_settle`]) until this one ends, so that what this one reads
    /// of the log's bounds stays true until it commits (a restore moving the log on, a
    /// redaction scrubbing it, a migration rewriting it). A backend with one writer, like redb,
    /// has nothing to hold: by default nothing.
    fn log_hold(&mut self) -> Result<(), Error> {
        Ok(())
    }

    /// Replaces the entry `seq` (a redaction scrubs what it held); no entry, nothing done.
    fn log_rewrite(&mut self, seq: u64, value: &[u8]) -> Result<(), Error>;

    /// Removes every entry with `seq <= through` and records it in [`LogBounds::trimmed`].
    fn log_trim(&mut self, through: u64) -> Result<(), Error>;

    /// Moves the log on to `to` (beyond its last `seq`, after [`Self::log_hold`] and
    /// [`Self::log_settle`]): every
    /// entry is removed, [`LogBounds::last`] and [`LogBounds::trimmed`] become `to`, and the
    /// next entry is numbered `to + 1` (a restore, `crate::changes::skip`).
    fn log_skip(&mut self, to: u64) -> Result<(), Error>;
}

/// `url` without its password (in the user info or a `password=` parameter), for messages,
/// logs and `location()`.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some(parts) => parts,
        None => return url.to_owned(),
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{user}@{host}")
        }
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let kept: Vec<&str> = query
                .split('&')
                .filter(|p| !p.to_ascii_lowercase().starts_with("password="))
                .collect();
            if kept.is_empty() {
                path.to_owned()
            } else {
                format!("{path}?{}", kept.join("&"))
            }
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::{Space, redact_url};

    #[test]
    fn each_backend_numbers_every_space_once_as_stored() {
        // The numbers are in every stored key: this list changes only with the layout.
        let stored: Vec<(u8, u8)> = Space::ALL
            .iter()
            .map(|s| (s.numbers().redb, s.numbers().postgres))
            .collect();
        assert_eq!(
            stored,
            [
                (3, 3),
                (4, 4),
                (2, 2),
                (1, 1),
                (5, 5),
                (6, 6),
                (7, 7),
                (8, 8),
                (10, 9),
                (9, 10),
                (11, 11),
                (12, 12),
                (13, 13),
                (14, 14),
                (15, 15),
                (16, 16)
            ]
        );
        for numbers in [
            stored
                .iter()
                .map(|n| n.0)
                .collect::<std::collections::BTreeSet<_>>(),
            stored.iter().map(|n| n.1).collect(),
        ] {
            assert_eq!(numbers.len(), Space::ALL.len());
        }
    }

    #[test]
    fn passwords_never_reach_a_location() {
        for (url, want) in [
            ("postgres://u:secret@h:5432/db", "postgres://u@h:5432/db"),
            (
                "postgresql://u:p%40ss@h/db?sslmode=require",
                "postgresql://u@h/db?sslmode=require",
            ),
            (
                "postgres://h/db?password=secret&user=u",
                "postgres://h/db?user=u",
            ),
            ("postgres://h/db?PASSWORD=secret", "postgres://h/db"),
            ("postgres://u@h/db", "postgres://u@h/db"),
            ("postgres://u:a:b@c@h/db", "postgres://u@h/db"),
        ] {
            assert_eq!(redact_url(url), want);
            assert!(!redact_url(url).contains("secret"));
        }
    }
}
