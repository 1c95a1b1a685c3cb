//! What a committed write changed, as commit hooks see it.
//!
//! Every change to a memory store is noted where it is made, inside its transaction: a memory's
//! new version by `crate::history::append` (the one function that appends versions), a
//! redaction and an exact restore by `crate::tree`, a store's record by `crate::stores`. The
//! notes of one transaction collect in its [`Changes`], which only the write pipeline
//! (`crate::pipeline`) creates; once the transaction is durable, the pipeline hands them, in the
//! order they were made, to every [`CommitHook`] the database was built with. An aborted or
//! failed transaction's notes are dropped with it, so a hook never sees a change that did not
//! commit. It sees every one that did, with one exception: when a PostgreSQL commit is lost in
//! flight (`Error::OutcomeUnknown`: the commit may or may not have applied), its changes are not
//! handed to the hooks.

use std::cell::RefCell;
use std::sync::Arc;

use crate::history::{Actor, MemoryId, VersionId};

/// What kind of change a [`Change`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChangeKind {
    /// A memory was created (by a write, an import, or a restored version of a deleted memory).
    MemoryCreated,
    /// A memory's content changed (its path may have changed too: see
    /// [`Change::previous_path`]).
    MemoryModified,
    /// A memory moved to another path with its content unchanged (a directory rename moves
    /// each memory below it).
    MemoryRenamed,
    /// A memory was deleted (by a command, the API, or expiry).
    MemoryDeleted,
    /// A store record was created.
    StoreCreated,
    /// A store's name, description or metadata changed.
    StoreUpdated,
    /// A store was archived (read-only from then on).
    StoreArchived,
    /// A store was deleted with every memory and version.
    StoreDeleted,
    /// A version's content, path and hash were erased.
    VersionRedacted,
}

/// One committed change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// What happened.
    pub kind: ChangeKind,
    /// The memory store (user id) it happened in.
    pub store: String,
    /// The memory, for a memory's change or a redaction.
    pub memory: Option<MemoryId>,
    /// The version the change recorded (or the version redacted).
    pub version: Option<VersionId>,
    /// The memory's path after the change (before it, for a deletion); `None` for a store's
    /// change and a redaction.
    pub path: Option<String>,
    /// The path before a move.
    pub previous_path: Option<String>,
    /// SHA-256 of the content after the change; `None` for a deletion.
    pub sha256: Option<[u8; 32]>,
    /// Size of the content after the change, in bytes; `None` for a deletion.
    pub size: Option<u64>,
    /// Who made it (`None`: nobody in particular, such as expiry).
    pub actor: Option<Actor>,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: i64,
}

impl Change {
    /// A change of the store `store` itself (no memory).
    pub(crate) fn of_store(kind: ChangeKind, store: &str, at_ms: i64) -> Change {
        Change {
            kind,
            store: store.to_owned(),
            memory: None,
            version: None,
            path: None,
            previous_path: None,
            sha256: None,
            size: None,
            actor: None,
            at_ms,
        }
    }

    /// This change, recorded as made by `actor`.
    pub(crate) fn by(mut self, actor: Option<&Actor>) -> Change {
        self.actor = actor.cloned();
        self
    }
}

/// Called by the write pipeline after each commit, with every change of the transaction in the
/// order it was made (see the module documentation). Register one with
/// [`crate::DatabaseBuilder::commit_hook`].
///
/// Commits of batches that run at once (PostgreSQL's write lanes) may reach the hooks in
/// another order than they committed; the change log ([`crate::Database::changes`]) has the
/// commit order.
///
/// A hook runs on the committing thread before any writer of the batch is answered, so a
/// writer that got its answer knows every hook has seen its change: keep it short (hand the
/// changes to a queue of your own for slow work). A panic in a hook is caught and ignored: the
/// changes are committed whatever a hook does. A hook must not write to the same database: it
/// runs while its batch still holds the write queue's lane, so such a write would wait for
/// itself.
pub trait CommitHook: Send + Sync + 'static {
    /// The changes of one committed transaction (never empty).
    fn committed(&self, changes: &[Change]);
}

/// The hooks a database calls after each commit.
#[derive(Clone, Default)]
pub(crate) struct Hooks(Arc<[Arc<dyn CommitHook>]>);

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hooks({})", self.0.len())
    }
}

impl Hooks {
    pub(crate) fn new(hooks: Vec<Arc<dyn CommitHook>>) -> Hooks {
        Hooks(hooks.into())
    }

    /// Hands `changes` to every hook (none when there are none).
    pub(crate) fn committed(&self, changes: &[Change]) {
        if changes.is_empty() {
            return;
        }
        for hook in self.0.iter() {
            let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                hook.committed(changes);
            }));
            // The changes are durable whatever the hook did; a panicking hook loses only its
            // own view of them.
            drop(called);
        }
    }
}

/// The changes noted inside one write transaction, in order, and the paths its redactions
/// erased (for the change log's scrub, never handed to the hooks).
#[derive(Debug, Default)]
pub(crate) struct Changes(RefCell<Vec<Change>>, RefCell<Vec<Erased>>);

/// A path a redaction erased: of version `version` of store `store`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Erased {
    pub(crate) store: String,
    pub(crate) version: u64,
    pub(crate) path: String,
}

impl Changes {
    pub(crate) fn note(&self, change: Change) {
        self.0.borrow_mut().push(change);
    }

    /// Notes the path the redaction of `version` erased.
    pub(crate) fn erased(&self, store: &str, version: u64, path: &str) {
        self.1.borrow_mut().push(Erased {
            store: store.to_owned(),
            version,
            path: path.to_owned(),
        });
    }

    pub(crate) fn take(&self) -> Vec<Change> {
        std::mem::take(&mut self.0.borrow_mut())
    }

    pub(crate) fn take_erased(&self) -> Vec<Erased> {
        std::mem::take(&mut self.1.borrow_mut())
    }
}
