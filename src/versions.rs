//! A store's history, read and redacted, and versions restored: on [`crate::MemoryStore`].

use std::ops::ControlFlow;

use crate::error::Error;
use crate::history::content;
use crate::history::record::{self, VersionRecord};
use crate::history::{Actor, ApiRefusal, Memory, MemoryId, Operation, Page, Version, VersionId};
use crate::layout::Node;
use crate::memories::{self, store_content};
use crate::path::MemoryPath;
use crate::pipeline::Scope;
use crate::storage::{Backend, ReadTxn, Space};

/// Which versions a listing returns; every field set narrows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionFilter {
    /// Only versions of this memory.
    pub memory: Option<MemoryId>,
    /// Only versions that record this kind of change.
    pub operation: Option<Operation>,
    /// Only versions written by this actor.
    pub actor: Option<Actor>,
    /// Only versions written at or after this time (ms since the Unix epoch).
    pub created_gte_ms: Option<i64>,
    /// Only versions written at or before this time.
    pub created_lte_ms: Option<i64>,
}

impl VersionFilter {
    fn admits(&self, v: &VersionRecord) -> bool {
        self.memory.is_none_or(|m| m.0 == v.memory)
            && self.operation.is_none_or(|op| op == v.operation)
            && self
                .actor
                .as_ref()
                .is_none_or(|a| v.actor.as_ref() == Some(a))
            && self.created_gte_ms.is_none_or(|t| v.created_ms >= t)
            && self.created_lte_ms.is_none_or(|t| v.created_ms <= t)
    }
}

/// The version `seq` of `user` as the API shows it; with its content (rebuilt from `txn` when
/// kept as a delta) when `with_content`.
fn version_of<T: ReadTxn + ?Sized>(
    txn: &T,
    user: &str,
    seq: u64,
    record: VersionRecord,
    with_content: bool,
) -> Result<Version, Error> {
    let content = match with_content {
        true => content::content(txn, user, seq, &record)?,
        false => None,
    };
    Ok(Version {
        id: VersionId(seq),
        memory: MemoryId(record.memory),
        operation: record.operation,
        created_ms: record.created_ms,
        actor: record.actor,
        path: record.path,
        content,
        sha256: record.sha256,
        size: record.size,
        redacted: record.redacted,
    })
}

/// The body of [`crate::MemoryStore::versions`].
pub(crate) fn versions(
    scope: Scope<'_>,
    filter: &VersionFilter,
    page: Option<&str>,
    limit: usize,
    with_content: bool,
) -> Result<Result<Page<Version>, ApiRefusal>, Error> {
    let from = match page {
        None => 0,
        Some(token) => match memories::unhex(token) {
            Some(bytes) if bytes.len() == 8 => record::decode_seq(&bytes)?,
            _ => return Ok(Err(ApiRefusal::InvalidPage)),
        },
    };
    let limit = limit.max(1);
    let txn = scope.engine.backend.begin_read()?;
    let mut out = Vec::new();
    let mut next = None;
    let mut take = |seq: u64, record: VersionRecord| {
        if !filter.admits(&record) {
            return ControlFlow::Continue(());
        }
        if out.len() == limit {
            next = Some(memories::hex_of(&record::seq_key(seq)));
            return ControlFlow::Break(());
        }
        out.push((seq, record));
        ControlFlow::Continue(())
    };
    match filter.memory {
        Some(memory) => {
            // Its chain of versions, newest first, down to the page's start.
            let mut chain = Vec::new();
            let mut at = record::latest_version(&txn, scope.user, memory.0)?;
            while let Some(seq) = at.filter(|&seq| seq >= from) {
                let Some(record) = record::version(&txn, scope.user, seq)? else {
                    break; // pruned, and every older one with it
                };
                if record.memory != memory.0 || record.previous >= Some(seq) {
                    return Err(Error::Corrupt(format!(
                        "the versions of {} do not form a chain at {}",
                        MemoryId(memory.0),
                        VersionId(seq)
                    )));
                }
                at = record.previous;
                chain.push((seq, record));
            }
            for (seq, record) in chain.into_iter().rev() {
                if take(seq, record).is_break() {
                    break;
                }
            }
        }
        None => {
            txn.scan(
                Space::Versions,
                scope.user,
                &record::seq_key(from),
                None,
                &mut |key, value| {
                    let record = crate::layout::decode(value, "version")?;
                    Ok(take(record::decode_seq(key)?, record))
                },
            )?;
        }
    }
    let items = out
        .into_iter()
        .map(|(seq, record)| version_of(&txn, scope.user, seq, record, with_content))
        .collect::<Result<_, _>>()?;
    Ok(Ok(Page { items, next }))
}

/// The body of [`crate::MemoryStore::version`].
pub(crate) fn version(
    scope: Scope<'_>,
    id: VersionId,
    with_content: bool,
) -> Result<Option<Version>, Error> {
    let txn = scope.engine.backend.begin_read()?;
    record::version(&txn, scope.user, id.0)?
        .map(|r| version_of(&txn, scope.user, id.0, r, with_content))
        .transpose()
}

/// The body of [`crate::MemoryStore::redact`].
pub(crate) fn redact(
    scope: Scope<'_>,
    id: VersionId,
) -> Result<Result<Version, ApiRefusal>, Error> {
    let redacted = redact_in(scope, id)?;
    if redacted.is_ok() {
        // Best effort: the commit stands either way, and a journal not cut now is removed at
        // the next clean close (docs/design.md, what a redaction erases on disk).
        let _ = scope.engine.backend.erased();
    }
    Ok(redacted)
}

fn redact_in(scope: Scope<'_>, id: VersionId) -> Result<Result<Version, ApiRefusal>, Error> {
    crate::memories::write_tree(scope, true, move |tree, _| {
        let user = tree.read().user().to_owned();
        if let Some(record) = record::version(tree.txn(), &user, id.0)?
            && record.redacted.is_none()
            && record::memory_path_key(tree.txn(), &user, record.memory)?.is_some()
            && record::latest_version(tree.txn(), &user, record.memory)? == Some(id.0)
        {
            return Ok(Err(ApiRefusal::LiveVersion {
                memory: MemoryId(record.memory).to_string(),
            }));
        }
        match tree.redact(id.0)? {
            Some(record) => Ok(Ok(version_of(tree.txn(), &user, id.0, record, false)?)),
            None => Ok(Err(ApiRefusal::NotFound)),
        }
    })
}

/// The body of [`crate::MemoryStore::restore`].
pub(crate) fn restore(
    scope: Scope<'_>,
    id: VersionId,
) -> Result<Result<Memory, ApiRefusal>, Error> {
    crate::memories::write_tree(scope, false, move |tree, settings| {
        if tree.archived()? {
            return Ok(Err(ApiRefusal::Archived));
        }
        let user = tree.read().user().to_owned();
        let Some(record) = record::version(tree.read().txn(), &user, id.0)? else {
            return Ok(Err(ApiRefusal::NotFound));
        };
        if record.redacted.is_some() {
            return Ok(Err(ApiRefusal::NotRestorable("it is redacted".into())));
        }
        let content = content::content(tree.read().txn(), &user, id.0, &record)?;
        let (Some(content), Some(path)) = (content, record.path) else {
            return Ok(Err(ApiRefusal::NotRestorable(
                "it records a deletion".into(),
            )));
        };
        let live = memories::find(tree.read().txn(), &user, MemoryId(record.memory))?;
        let path = match live {
            Some((current, meta)) => {
                if let Err(refusal) =
                    store_content(tree, settings, &current, &content, Some((&current, meta)))?
                {
                    return Ok(Err(refusal));
                }
                current
            }
            None => {
                let path = MemoryPath::parse(&path)
                    .map_err(|e| Error::Corrupt(format!("a version's path is invalid: {e}")))?;
                if let Err(refusal) = crate::memories::path_is_free(tree, &path)? {
                    return Ok(Err(refusal));
                }
                if let Err(refusal) = store_content(tree, settings, &path, &content, None)? {
                    return Ok(Err(refusal));
                }
                path
            }
        };
        let Some(Node::File(meta)) = tree.read().node(&path)? else {
            return Err(Error::Corrupt(format!("{path} is missing after its write")));
        };
        Ok(Ok(memories::memory_of(&path, meta, None)))
    })
}

/// The body of [`crate::MemoryStore::history`].
pub(crate) fn history(
    scope: Scope<'_>,
    path: Option<&str>,
) -> Result<Result<Vec<Version>, ApiRefusal>, Error> {
    let mut filter = VersionFilter::default();
    if let Some(raw) = path {
        let parsed = match MemoryPath::parse(raw) {
            Ok(p) => p,
            Err(e) => {
                return Ok(Err(ApiRefusal::InvalidPath {
                    path: raw.to_owned(),
                    reason: crate::messages::path_reason(raw, e),
                }));
            }
        };
        let txn = scope.engine.backend.begin_read()?;
        match crate::tree::TreeRead::new(&txn, scope.user).node(&parsed)? {
            Some(Node::File(meta)) => filter.memory = Some(MemoryId(meta.memory)),
            _ => return Ok(Err(ApiRefusal::NotFound)),
        }
    }
    let mut all = Vec::new();
    let mut page: Option<String> = None;
    loop {
        match versions(scope, &filter, page.as_deref(), 1000, true)? {
            Ok(mut page_) => {
                all.append(&mut page_.items);
                match page_.next {
                    Some(next) => page = Some(next),
                    None => return Ok(Ok(all)),
                }
            }
            Err(refusal) => return Ok(Err(refusal)),
        }
    }
}
