//! One change-log entry: how it is stored (postcard) and how every face shows it (JSON in the
//! memory-stores API's naming).

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::history::change::{Change, ChangeKind};
use crate::history::{Actor, MemoryId, VersionId};

/// A committed change and its place in the change log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeEntry {
    /// Its sequence number: increasing across the whole database, in commit order.
    pub seq: u64,
    /// What changed. A redaction scrubs `path`, `previous_path`, `sha256` and `size` from the
    /// entries of the version it erased (see `docs/design.md`, The change log).
    pub change: Change,
}

/// The stored form (postcard, field order as listed; `docs/design.md`). `store_seq`, its number
/// in its store's feed (`feed`), came last in format 9; a record written before it
/// ([`RecordV8`]) reads with 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    pub kind: u8,
    pub store: String,
    pub memory: Option<u64>,
    pub version: Option<u64>,
    pub path: Option<String>,
    pub previous_path: Option<String>,
    pub sha256: Option<[u8; 32]>,
    pub size: Option<u64>,
    pub actor: Option<Actor>,
    pub at_ms: i64,
    pub store_seq: u64,
}

/// [`Record`] as formats 7 and 8 wrote it.
#[derive(Debug, Clone, Deserialize)]
struct RecordV8 {
    kind: u8,
    store: String,
    memory: Option<u64>,
    version: Option<u64>,
    path: Option<String>,
    previous_path: Option<String>,
    sha256: Option<[u8; 32]>,
    size: Option<u64>,
    actor: Option<Actor>,
    at_ms: i64,
}

/// The stored number of each kind; changing one is a layout change.
const KINDS: [(ChangeKind, u8, &str); 9] = [
    (ChangeKind::MemoryCreated, 0, "memory.created"),
    (ChangeKind::MemoryModified, 1, "memory.modified"),
    (ChangeKind::MemoryRenamed, 2, "memory.renamed"),
    (ChangeKind::MemoryDeleted, 3, "memory.deleted"),
    (ChangeKind::StoreCreated, 4, "store.created"),
    (ChangeKind::StoreUpdated, 5, "store.updated"),
    (ChangeKind::StoreArchived, 6, "store.archived"),
    (ChangeKind::StoreDeleted, 7, "store.deleted"),
    (ChangeKind::VersionRedacted, 8, "version.redacted"),
];

impl ChangeKind {
    /// The entry's `type`: `memory.created`, `store.archived`, `version.redacted`, ….
    pub fn event_type(self) -> &'static str {
        KINDS
            .iter()
            .find(|(k, ..)| *k == self)
            .map_or("unknown", |(.., name)| name)
    }

    /// The kind of an entry's `type`.
    pub fn from_event_type(name: &str) -> Option<ChangeKind> {
        KINDS.iter().find(|(.., n)| *n == name).map(|(k, ..)| *k)
    }

    /// Every kind, in the order of [`Self::event_type`]'s list.
    pub fn all() -> impl Iterator<Item = ChangeKind> {
        KINDS.iter().map(|(k, ..)| *k)
    }

    pub(crate) fn number(self) -> u8 {
        KINDS
            .iter()
            .find(|(k, ..)| *k == self)
            .map_or(u8::MAX, |(_, n, _)| *n)
    }
}

impl Record {
    pub(crate) fn of(change: &Change) -> Record {
        Record {
            kind: change.kind.number(),
            store: change.store.clone(),
            memory: change.memory.map(|m| m.0),
            version: change.version.map(|v| v.0),
            path: change.path.clone(),
            previous_path: change.previous_path.clone(),
            sha256: change.sha256,
            size: change.size,
            actor: change.actor.clone(),
            at_ms: change.at_ms,
            store_seq: 0,
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a record always encodes")
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Record, Error> {
        if let Ok(record) = postcard::from_bytes::<Record>(bytes) {
            return Ok(record);
        }
        let v8: RecordV8 = postcard::from_bytes(bytes)
            .map_err(|e| Error::Corrupt(format!("a change-log entry does not decode: {e}")))?;
        Ok(Record {
            kind: v8.kind,
            store: v8.store,
            memory: v8.memory,
            version: v8.version,
            path: v8.path,
            previous_path: v8.previous_path,
            sha256: v8.sha256,
            size: v8.size,
            actor: v8.actor,
            at_ms: v8.at_ms,
            store_seq: 0,
        })
    }

    pub(crate) fn change(self) -> Result<Change, Error> {
        let kind = KINDS
            .iter()
            .find(|(_, n, _)| *n == self.kind)
            .map(|(k, ..)| *k)
            .ok_or_else(|| Error::Corrupt(format!("unknown change-log kind {}", self.kind)))?;
        Ok(Change {
            kind,
            store: self.store,
            memory: self.memory.map(MemoryId),
            version: self.version.map(VersionId),
            path: self.path,
            previous_path: self.previous_path,
            sha256: self.sha256,
            size: self.size,
            actor: self.actor,
            at_ms: self.at_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_round_trip_and_keep_their_numbers() {
        for (kind, n, name) in KINDS {
            assert_eq!(kind.number(), n);
            assert_eq!(ChangeKind::from_event_type(name), Some(kind));
            assert_eq!(kind.event_type(), name);
        }
        assert_eq!(ChangeKind::all().count(), 9);
    }

    #[test]
    fn an_entry_shows_in_the_apis_naming() {
        let change = Change {
            kind: ChangeKind::MemoryRenamed,
            store: "alice".into(),
            memory: Some(MemoryId(1)),
            version: Some(VersionId(3)),
            path: Some("/memories/b.md".into()),
            previous_path: Some("/memories/a.md".into()),
            sha256: Some([0xab; 32]),
            size: Some(5),
            actor: Some(Actor::ApiKey("key_1".into())),
            at_ms: 1_796_000_000_123,
        };
        let record = Record::of(&change);
        let back = Record::decode(&record.encode()).unwrap().change().unwrap();
        assert_eq!(back, change);
        let json = ChangeEntry { seq: 7, change }.to_json();
        assert_eq!(
            json,
            json!({
                "seq": 7,
                "type": "memory.renamed",
                "memory_store_id": "alice",
                "memory_id": "mem_0000000000000001",
                "memory_version_id": "memver_0000000000000003",
                "path": "/b.md",
                "previous_path": "/a.md",
                "content_sha256": "ab".repeat(32),
                "content_size_bytes": 5,
                "created_by": {"type": "api_actor", "api_key_id": "key_1"},
                "created_at": "2026-11-30T00:53:20.123Z",
            })
        );
    }
}
