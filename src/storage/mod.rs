//! The storage seam: a narrow, transactional, ordered key-value interface.
//!
//! The six commands are written once, in `crate::tree` and `crate::exec`, against these
//! traits. A backend only has to store bytes under `(space, user, key)` in key order and give
//! all-or-nothing transactions; it never sees paths or commands. [`redb`] is the embedded default
//! and today's only implementation; a networked database can slot in by implementing the same
//! three traits.
//!
//! Keys within one user and space are compared as plain bytes. User ids are opaque strings that a
//! backend must keep apart exactly (no normalization, no concatenation that could alias).

pub mod redb;

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
}

impl Space {
    /// Every space, in a fixed order.
    pub const ALL: [Space; 4] = [Space::Nodes, Space::Contents, Space::Totals, Space::Access];
}

/// Called for each entry of a scan, in key order; return `ControlFlow::Break(())` to stop.
pub type Visit<'v> = &'v mut dyn FnMut(&[u8], &[u8]) -> Result<ControlFlow<()>, Error>;

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

    /// Runs `f` in one write transaction (one at a time; a second caller waits), then commits
    /// it, durably, if `f` says [`Finish::Commit`], and discards it if `f` says
    /// [`Finish::Abort`] or fails. A read-only backend returns [`Error::ReadOnly`].
    fn write<R>(
        &self,
        f: impl FnOnce(&mut dyn WriteTxn) -> Result<(R, Finish), Error>,
    ) -> Result<R, Error>;

    /// Checks the stored bytes beneath the records (page checksums, say) without changing
    /// anything, for `Store::check`; the problems found, as sentences. By default, none.
    fn verify_storage(&self) -> Result<Vec<String>, Error> {
        Ok(Vec::new())
    }
}

/// Reads, within one transaction.
pub trait ReadTxn {
    /// The storage format version the data was written in (see `docs/design.md`).
    fn format_version(&self) -> Result<u64, Error>;

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
}

/// Writes, within one transaction.
pub trait WriteTxn: ReadTxn {
    /// Stores `value` under `key`, replacing any previous value.
    fn put(&mut self, space: Space, user: &str, key: &[u8], value: &[u8]) -> Result<(), Error>;
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
    /// Records that the data is now in storage format `version`.
    fn set_format_version(&mut self, version: u64) -> Result<(), Error>;
}
