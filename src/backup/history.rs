//! The history in an export (format version 2): store and version lines, their checks in an
//! import's first pass, and the records an import restores from them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Line, import_error, sha256_hex};
use crate::error::Error;
use crate::history::body::Body;
use crate::history::record::{StoreRecord, VersionRecord};
use crate::history::{Actor, HistoryTotals, MemoryId, Operation, Redaction, VersionId};
use crate::path::MemoryPath;
use crate::stores::fields;

/// Who made a change, as an export spells it: `{"type":"session","id":"exec:42"}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(
    tag = "type",
    content = "id",
    rename_all = "snake_case",
    deny_unknown_fields
)]
pub(super) enum ActorLine {
    ApiKey(String),
    Session(String),
    User(String),
}

impl ActorLine {
    /// The actor's id, whatever its kind.
    fn id(&self) -> &str {
        match self {
            ActorLine::ApiKey(id) | ActorLine::Session(id) | ActorLine::User(id) => id,
        }
    }
}

impl From<&Actor> for ActorLine {
    fn from(actor: &Actor) -> Self {
        match actor {
            Actor::ApiKey(id) => ActorLine::ApiKey(id.clone()),
            Actor::Session(id) => ActorLine::Session(id.clone()),
            Actor::User(id) => ActorLine::User(id.clone()),
        }
    }
}

impl From<ActorLine> for Actor {
    fn from(actor: ActorLine) -> Self {
        match actor {
            ActorLine::ApiKey(id) => Actor::ApiKey(id),
            ActorLine::Session(id) => Actor::Session(id),
            ActorLine::User(id) => Actor::User(id),
        }
    }
}

/// When and by whom a version was redacted.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RedactionLine {
    at_ms: i64,
    by: Option<ActorLine>,
}

/// A version line's fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct VersionLine {
    pub user: String,
    pub id: String,
    pub memory: String,
    operation: String,
    created_ms: i64,
    actor: Option<ActorLine>,
    pub path: Option<String>,
    pub content: Option<String>,
    size: Option<u64>,
    sha256: Option<String>,
    redacted: Option<RedactionLine>,
}

/// The store line of `user`'s record.
pub(super) fn store_line(user: &str, r: &StoreRecord, feed_seq: u64) -> Line {
    Line::Store {
        feed_seq: Some(feed_seq),
        user: user.to_owned(),
        name: r.name.clone(),
        description: r.description.clone(),
        metadata: r.metadata.iter().cloned().collect(),
        created_ms: r.created_ms,
        updated_ms: r.updated_ms,
        archived_ms: r.archived_ms,
        next_seq: r.next_seq,
        pruned_versions: r.history.pruned_versions,
        pruned_bytes: r.history.pruned_bytes,
    }
}

/// The version line of `user`'s version `seq`, whose content is `content` (rebuilt by
/// `crate::history::content::content`).
pub(super) fn version_line(
    user: &str,
    seq: u64,
    r: VersionRecord,
    content: Option<String>,
) -> Line {
    Line::Version(VersionLine {
        user: user.to_owned(),
        id: VersionId(seq).to_string(),
        memory: MemoryId(r.memory).to_string(),
        operation: r.operation.as_str().to_owned(),
        created_ms: r.created_ms,
        actor: r.actor.as_ref().map(ActorLine::from),
        path: r.path,
        size: r.size,
        sha256: r.sha256.map(hex::encode),
        content,
        redacted: r.redacted.map(|r| RedactionLine {
            at_ms: r.at_ms,
            by: r.by.as_ref().map(ActorLine::from),
        }),
    })
}

/// The record a store line restores: its history counts only what was pruned so far; the
/// import counts the versions it restores ([`count_version`]).
pub(super) fn restored_store(line: &Line) -> Option<StoreRecord> {
    let Line::Store {
        name,
        description,
        metadata,
        created_ms,
        updated_ms,
        archived_ms,
        next_seq,
        pruned_versions,
        pruned_bytes,
        ..
    } = line
    else {
        return None;
    };
    Some(StoreRecord {
        name: name.clone(),
        description: description.clone(),
        metadata: metadata.clone().into_iter().collect(),
        created_ms: *created_ms,
        updated_ms: *updated_ms,
        archived_ms: *archived_ms,
        next_seq: *next_seq,
        history: HistoryTotals {
            pruned_versions: *pruned_versions,
            pruned_bytes: *pruned_bytes,
            ..HistoryTotals::default()
        },
    })
}

/// Counts a restored version in its store's record (versions come oldest first).
pub(super) fn count_version(store: &mut StoreRecord, record: &VersionRecord) {
    let h = &mut store.history;
    if h.versions == 0 {
        h.oldest_ms = record.created_ms;
    }
    h.versions += 1;
    h.bytes += record.weight();
}

impl VersionLine {
    /// The version's number and record, with `guard` applied to its content (the importing
    /// store's secrets policy): its hash and size follow the content it returns. The line passed
    /// [`Block::version`].
    pub(super) fn restored(
        &self,
        guard: impl Fn(&str) -> Result<String, String>,
    ) -> Result<(u64, VersionRecord), String> {
        let parse = || -> Option<(u64, u64, Operation)> {
            Some((
                self.id.parse::<VersionId>().ok()?.0,
                self.memory.parse::<MemoryId>().ok()?.0,
                Operation::parse(&self.operation)?,
            ))
        };
        let (seq, memory, operation) = parse().ok_or("a version line was not verified")?;
        let mut sha256 = None;
        let content = match &self.content {
            Some(content) => {
                let guarded = guard(content)?;
                sha256 = Some(crate::layout::sha256(guarded.as_bytes()));
                Some(guarded)
            }
            None => None,
        };
        Ok((
            seq,
            VersionRecord {
                memory,
                operation,
                created_ms: self.created_ms,
                actor: self.actor.clone().map(Actor::from),
                path: self.path.clone(),
                size: content.as_ref().map(|c| c.len() as u64),
                body: content.map_or(Body::Empty, Body::Full),
                sha256,
                redacted: self.redacted.as_ref().map(|r| Redaction {
                    at_ms: r.at_ms,
                    by: r.by.clone().map(Actor::from),
                }),
                previous: None, // the importer chains the versions
            },
        ))
    }
}

/// The first pass's view of one store's block of lines: its store line, then its files, then
/// its versions, oldest first. Holds what the checks need of its files (ids and hashes), so
/// memory grows with a store's files, not with its history.
pub(super) struct Block {
    pub user: String,
    next_seq: u64,
    /// The memory ids of its files, with their current versions.
    memories: BTreeMap<u64, u64>,
    /// Its files' current versions: the memory and the content hash (hex) they must have.
    current: BTreeMap<u64, (u64, String)>,
    /// The last version seen.
    last: Option<u64>,
    /// Version lines seen (none of its files may follow).
    pub versions: u64,
}

/// `ms` if within 0 ..= `latest`.
fn check_time(n: u64, what: &str, ms: i64, latest: i64) -> Result<(), Error> {
    if (0..=latest).contains(&ms) {
        Ok(())
    } else {
        Err(import_error(
            n,
            format!(
                "{what} {ms} is out of range (0, 1970-01-01, to a day after this machine's clock, {})",
                crate::time::utc(latest)
            ),
        ))
    }
}

/// The largest `next_seq` an import takes: far beyond any store's history, far below the end
/// of the ids (2^53: exact in every JSON reader).
pub(super) const MAX_NEXT_SEQ: u64 = 1 << 53;

impl Block {
    /// Checks the store line `n` of `user`; its times must lie within 0 ..= `latest`.
    pub fn store(n: u64, user: &str, line: &Line, latest: i64) -> Result<Block, Error> {
        let Line::Store {
            name,
            description,
            metadata,
            created_ms,
            updated_ms,
            archived_ms,
            next_seq,
            ..
        } = line
        else {
            return Err(import_error(n, "not a store line"));
        };
        // What the memory-stores API refuses, an import refuses too.
        let problem = fields::name(name)
            .or_else(|| fields::description(description))
            .or_else(|| fields::count(metadata.len()))
            .or_else(|| {
                metadata
                    .iter()
                    .find_map(|(k, v)| fields::pair(k, Some(v.as_str())))
            });
        if let Some(why) = problem {
            return Err(import_error(n, why));
        }
        check_time(n, "created_ms", *created_ms, latest)?;
        check_time(n, "updated_ms", *updated_ms, latest)?;
        if let Some(ms) = archived_ms {
            check_time(n, "archived_ms", *ms, latest)?;
        }
        if *next_seq == 0 {
            return Err(import_error(n, "next_seq is 0; ids start at 1"));
        }
        if *next_seq > MAX_NEXT_SEQ {
            // A store at the end of its ids could never be written again.
            return Err(import_error(
                n,
                format!(
                    "next_seq {next_seq} is beyond 2^53, more versions than any store makes (was the export edited?)"
                ),
            ));
        }
        Ok(Block {
            user: user.to_owned(),
            next_seq: *next_seq,
            memories: BTreeMap::new(),
            current: BTreeMap::new(),
            last: None,
            versions: 0,
        })
    }

    /// Checks the ids of the file line `n` at `path` whose content hashes to `sha256`.
    pub fn file(
        &mut self,
        n: u64,
        path: &str,
        memory: Option<&str>,
        version: Option<&str>,
        sha256: &str,
    ) -> Result<(), Error> {
        if self.versions > 0 {
            return Err(import_error(
                n,
                format!("{path}: a file line after the versions of its store"),
            ));
        }
        let (Some(memory), Some(version)) = (memory, version) else {
            return Err(import_error(
                n,
                format!("{path}: a version-2 file line needs its memory and version ids"),
            ));
        };
        let memory = parse_id::<MemoryId>(n, memory)?.0;
        let version = parse_id::<VersionId>(n, version)?.0;
        if memory > version || version >= self.next_seq {
            return Err(import_error(
                n,
                format!(
                    "{path}: ids {} and {} do not fit its store (memory ≤ version < next_seq {})",
                    MemoryId(memory),
                    VersionId(version),
                    self.next_seq
                ),
            ));
        }
        if self.memories.insert(memory, version).is_some() {
            return Err(import_error(
                n,
                format!("{path}: memory {} is another file too", MemoryId(memory)),
            ));
        }
        self.current.insert(version, (memory, sha256.to_owned()));
        Ok(())
    }

    /// Checks the version line `n`.
    pub fn version(&mut self, n: u64, v: &VersionLine, latest: i64) -> Result<(), Error> {
        let id = parse_id::<VersionId>(n, &v.id)?.0;
        let memory = parse_id::<MemoryId>(n, &v.memory)?.0;
        let fail = |why: String| Err(import_error(n, format!("{}: {why}", v.id)));
        if self.last.is_some_and(|last| id <= last) || id >= self.next_seq {
            return fail(format!(
                "out of order (versions come oldest first, below next_seq {})",
                self.next_seq
            ));
        }
        let Some(operation) = Operation::parse(&v.operation) else {
            return fail(format!("unknown operation {:?}", v.operation));
        };
        let lineage_ok = match operation {
            Operation::Created => memory == id,
            _ => memory < id,
        };
        if !lineage_ok {
            return fail(format!(
                "a {} version of {} (a memory's id is the number of its created version)",
                v.operation, v.memory
            ));
        }
        check_time(n, "created_ms", v.created_ms, latest)?;
        let actors = [
            v.actor.as_ref(),
            v.redacted.as_ref().and_then(|r| r.by.as_ref()),
        ];
        if let Some(why) = actors
            .into_iter()
            .flatten()
            .find_map(|a| fields::actor_id(a.id()))
        {
            return fail(why);
        }
        let what = (&v.path, &v.content, v.size, &v.sha256);
        match (&v.redacted, operation) {
            (Some(r), _) => {
                check_time(n, "redacted.at_ms", r.at_ms, latest)?;
                if what != (&None, &None, None, &None) {
                    return fail("redacted, yet it has a path, content, size or hash".into());
                }
            }
            (None, Operation::Deleted) => {
                if v.path.is_none() || (&v.content, v.size, &v.sha256) != (&None, None, &None) {
                    return fail("a deletion has a path and no content, size or hash".into());
                }
            }
            (None, _) => {
                let (Some(_), Some(content), Some(size), Some(sha256)) = what else {
                    return fail("a version has a path, content, size and hash".into());
                };
                if &sha256_hex(content.as_bytes()) != sha256 || content.len() as u64 != size {
                    return fail("checksum mismatch: the content was changed".into());
                }
            }
        }
        if let Some(path) = &v.path {
            match MemoryPath::parse(path) {
                Ok(p) if !p.is_root() && &p.to_string() == path => {}
                _ => return fail(format!("invalid or non-canonical path {path:?}")),
            }
        }
        if let Some(&current) = self.memories.get(&memory)
            && id > current
        {
            return fail(format!(
                "newer than {}, the current version of its file",
                VersionId(current)
            ));
        }
        if let Some((file_memory, file_sha)) = self.current.get(&id) {
            if *file_memory != memory {
                return fail(format!(
                    "the current version of {} belongs to {}",
                    MemoryId(*file_memory),
                    v.memory
                ));
            }
            if v.redacted.is_none() && v.sha256.as_ref() != Some(file_sha) {
                return fail("the current version of a file, with other content".into());
            }
        }
        self.last = Some(id);
        self.versions += 1;
        Ok(())
    }
}

fn parse_id<T: std::str::FromStr>(n: u64, text: &str) -> Result<T, Error> {
    text.parse()
        .map_err(|_| import_error(n, format!("{text:?} is not a memkv id")))
}
