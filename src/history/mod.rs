//! Every change kept: memory ids, versions, actors, the store's own record, retention.
//!
//! A memkv user is a memory store. Each file is a *memory* with an id ([`MemoryId`]) that stays
//! the same across renames; every change that alters one (through the memory tool, the
//! memory-stores API, the CLI, an import or expiry) appends an immutable [`Version`] in the same
//! transaction. [`append`] writes them (called by `crate::tree`, so no write path can skip it);
//! `crate::memories` reads them and serves the memory-stores API.
//!
//! Ids are per-store sequence numbers: `mem_` / `memver_` and 16 lowercase hex digits. A
//! memory's id is the number of its `created` version.

pub(crate) mod actor;
pub(crate) mod append;
pub(crate) mod body;
pub(crate) mod change;
pub(crate) mod content;
pub(crate) mod record;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use actor::Actor;

/// A memory's id: `mem_` and 16 lowercase hex digits. Stays the same across renames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemoryId(pub u64);

/// A version's id: `memver_` and 16 lowercase hex digits, increasing within a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VersionId(pub u64);

fn parse_hex_id(text: &str, prefix: &str) -> Result<u64, InvalidId> {
    let digits = text.strip_prefix(prefix).ok_or(InvalidId)?;
    if digits.len() != 16
        || !digits
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(InvalidId);
    }
    u64::from_str_radix(digits, 16).map_err(|_| InvalidId)
}

/// A string that is no memory or version id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a memkv id")]
pub struct InvalidId;

impl fmt::Display for MemoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mem_{:016x}", self.0)
    }
}

impl FromStr for MemoryId {
    type Err = InvalidId;
    fn from_str(s: &str) -> Result<Self, InvalidId> {
        parse_hex_id(s, "mem_").map(MemoryId)
    }
}

impl fmt::Display for VersionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "memver_{:016x}", self.0)
    }
}

impl FromStr for VersionId {
    type Err = InvalidId;
    fn from_str(s: &str) -> Result<Self, InvalidId> {
        parse_hex_id(s, "memver_").map(VersionId)
    }
}

/// The kind of change a version records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Operation {
    /// The memory was created: the first version of every memory.
    Created,
    /// Its content, its path, or both changed.
    Modified,
    /// It was deleted (no content, hash or size).
    Deleted,
}

impl Operation {
    /// `created`, `modified` or `deleted`, as the memory-stores API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Created => "created",
            Operation::Modified => "modified",
            Operation::Deleted => "deleted",
        }
    }

    /// The operation spelled `text` ([`Self::as_str`]).
    pub fn parse(text: &str) -> Option<Operation> {
        match text {
            "created" => Some(Operation::Created),
            "modified" => Some(Operation::Modified),
            "deleted" => Some(Operation::Deleted),
            _ => None,
        }
    }
}

/// When and by whom a version was redacted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redaction {
    /// When (ms since the Unix epoch).
    pub at_ms: i64,
    /// Who.
    pub by: Option<Actor>,
}

/// One entry of a memory's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// Its id.
    pub id: VersionId,
    /// The memory it belongs to (the id stays valid after the memory is deleted).
    pub memory: MemoryId,
    /// What changed.
    pub operation: Operation,
    /// When (ms since the Unix epoch).
    pub created_ms: i64,
    /// Who made the change, when recorded.
    pub actor: Option<Actor>,
    /// The memory's path (`/memories/…`) at that time; `None` once redacted.
    pub path: Option<String>,
    /// The content as of this version: `None` when redacted, for a deletion, or when not asked
    /// for.
    pub content: Option<String>,
    /// SHA-256 of the content: `None` when redacted or for a deletion.
    pub sha256: Option<[u8; 32]>,
    /// Size of the content in bytes: `None` when redacted or for a deletion.
    pub size: Option<u64>,
    /// Set once the version is redacted.
    pub redacted: Option<Redaction>,
}

/// A live memory (a file), as the memory-stores API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memory {
    /// Its id.
    pub id: MemoryId,
    /// Its path, `/memories/…`.
    pub path: String,
    /// The version holding its current content.
    pub version: VersionId,
    /// SHA-256 of its content.
    pub sha256: [u8; 32],
    /// Size of its content in bytes.
    pub size: u64,
    /// When it was created (ms since the Unix epoch).
    pub created_ms: i64,
    /// When its content or path last changed.
    pub updated_ms: i64,
    /// Its content, when asked for.
    pub content: Option<String>,
}

/// A memory store's own record: what the memory-stores API shows of a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreInfo {
    /// The store's id: the memkv user id.
    pub id: String,
    /// Human-readable name (the id, for a store first written through the memory tool).
    pub name: String,
    /// Free text; empty when unset.
    pub description: String,
    /// Key-value pairs for the application.
    pub metadata: BTreeMap<String, String>,
    /// When the store was created (ms since the Unix epoch).
    pub created_ms: i64,
    /// When its name, description, metadata or archival last changed.
    pub updated_ms: i64,
    /// When it was archived: archived stores are read-only.
    pub archived_ms: Option<i64>,
    /// Its history: versions kept, their bytes, and what retention has pruned.
    pub history: HistoryTotals,
}

/// A store's history, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryTotals {
    /// Versions kept.
    pub versions: u64,
    /// Bytes of the versions kept (paths and contents).
    pub bytes: u64,
    /// Versions pruned by retention, ever.
    pub pruned_versions: u64,
    /// Bytes pruned by retention, ever.
    pub pruned_bytes: u64,
    /// When the oldest version kept was written (ms; 0 when none is kept).
    pub oldest_ms: i64,
}

/// How much history a store keeps: versions older than `max_age`, beyond `max_versions`, or
/// beyond `max_bytes` (of paths and contents) are pruned, oldest first, by the write that goes
/// over. `keep_nothing` records no versions at all (ids are still kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retention {
    /// Keep versions at most this long. Default: 30 days.
    pub max_age: Option<Duration>,
    /// Keep at most this many versions per store. Default: 100,000.
    pub max_versions: Option<u64>,
    /// Keep at most this many bytes of versions per store. Default: 256 MiB.
    pub max_bytes: Option<u64>,
}

impl Retention {
    /// The defaults: 30 days, 100,000 versions, 256 MiB per store.
    pub const DEFAULT: Retention = Retention {
        max_age: Some(Duration::from_secs(30 * 24 * 3600)),
        max_versions: Some(100_000),
        max_bytes: Some(256 * 1024 * 1024),
    };

    /// Keep no history at all.
    pub const NONE: Retention = Retention {
        max_age: Some(Duration::ZERO),
        max_versions: Some(0),
        max_bytes: Some(0),
    };

    /// Keep everything.
    pub const FOREVER: Retention = Retention {
        max_age: None,
        max_versions: None,
        max_bytes: None,
    };

    /// Whether no version is ever kept.
    pub fn keeps_nothing(&self) -> bool {
        self.max_versions == Some(0)
            || self.max_bytes == Some(0)
            || self.max_age == Some(Duration::ZERO)
    }

    /// With these bounds (`None` = unbounded).
    pub fn new(
        max_age: Option<Duration>,
        max_versions: Option<u64>,
        max_bytes: Option<u64>,
    ) -> Self {
        Retention {
            max_age,
            max_versions,
            max_bytes,
        }
    }
}

impl Default for Retention {
    fn default() -> Self {
        Retention::DEFAULT
    }
}

/// One page of a listing: its items, and the token of the next page (`None` on the last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The items, in order.
    pub items: Vec<T>,
    /// Pass it back to get the next page; `None` when this is the last.
    pub next: Option<String>,
}

/// Why the memory-stores face refused a request; nothing changed. [`Self::message`] words it
/// for the API's error envelope; the server maps each to a status.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApiRefusal {
    /// No such memory, version or store.
    NotFound,
    /// The memory's content does not have the expected SHA-256.
    PreconditionFailed {
        /// The hash of its current content.
        current: [u8; 32],
    },
    /// Another file or directory is already at the path.
    PathExists {
        /// The path, `/memories/…`.
        path: String,
    },
    /// A file is where a directory of the path would be.
    ParentIsFile {
        /// The path, `/memories/…`.
        path: String,
        /// The file in the way.
        parent: String,
    },
    /// The store is archived: its memories can be read and deleted, nothing else.
    Archived,
    /// The path breaks the path rules.
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why, in a sentence.
        reason: String,
    },
    /// A size or quota limit, or the secrets policy (the reason, in a sentence).
    Limit(String),
    /// A page token that no listing of this kind returned.
    InvalidPage,
    /// The version cannot be restored: it is redacted or records a deletion.
    NotRestorable(String),
    /// The version is the current content of a live memory, which would go on serving it:
    /// redacting it would leave the content readable while its version says it is gone.
    LiveVersion {
        /// The memory, `mem_…`.
        memory: String,
    },
}

impl ApiRefusal {
    /// The reason, in a sentence without its closing period, for the API's error envelope: a
    /// client may append its own sentence, as the SDK's sandbox sync does when it shows the agent
    /// "`<message>`. Read the file again before you retry.".
    pub fn message(&self) -> String {
        match self {
            ApiRefusal::NotFound => "Not found".to_owned(),
            ApiRefusal::PreconditionFailed { current } => format!(
                "Precondition failed: the memory changed since it was read (its content_sha256 is now {})",
                hex::encode(current)
            ),
            ApiRefusal::PathExists { path } => format!("{path} already exists"),
            ApiRefusal::ParentIsFile { path, parent } => {
                format!("Cannot write {path}: {parent} is a file")
            }
            ApiRefusal::Archived => "The memory store is archived and read-only".to_owned(),
            ApiRefusal::InvalidPath { reason, .. } => reason.trim_end_matches('.').to_owned(),
            ApiRefusal::Limit(reason) => reason.trim_end_matches('.').to_owned(),
            ApiRefusal::InvalidPage => "Invalid page token".to_owned(),
            ApiRefusal::NotRestorable(why) => format!("Cannot restore this version: {why}"),
            ApiRefusal::LiveVersion { memory } => format!(
                "This version is the current content of memory {memory}, which still serves it: update the memory (a new version) or delete it first, then redact this version"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_refuse_anything_else() {
        assert_eq!(MemoryId(26).to_string(), "mem_000000000000001a");
        assert_eq!("mem_000000000000001a".parse(), Ok(MemoryId(26)));
        assert_eq!(VersionId(u64::MAX).to_string(), "memver_ffffffffffffffff");
        assert_eq!("memver_ffffffffffffffff".parse(), Ok(VersionId(u64::MAX)));
        for bad in [
            "",
            "mem_",
            "mem_1a",
            "mem_000000000000001A",
            "memver_000000000000001a",
            "mem_000000000000001a ",
            "mem_+00000000000001a",
            "mem_00000000000000１a",
        ] {
            assert_eq!(bad.parse::<MemoryId>(), Err(InvalidId), "{bad:?}");
        }
        assert!("mem_000000000000001a".parse::<VersionId>().is_err());
    }

    #[test]
    fn operations_spell_like_the_api() {
        for op in [Operation::Created, Operation::Modified, Operation::Deleted] {
            assert_eq!(Operation::parse(op.as_str()), Some(op));
        }
        assert_eq!(Operation::parse("Created"), None);
    }
}
