//! Memories by id, with preconditions, and their listing: what the memory-stores API does to a
//! store's files, on [`crate::MemoryStore`]. Every write is one transaction through `crate::tree`,
//! so it records its version like a memory-tool command, checks the same limits and the secrets
//! policy, and changes nothing when refused.

use std::ops::ControlFlow;

use crate::error::Error;
use crate::exec;
use crate::history::record;
use crate::history::{ApiRefusal, Memory, MemoryId, Page};
use crate::layout::{self, FileMeta, Node};
use crate::limits::Settings;
use crate::messages;
use crate::path::MemoryPath;
use crate::pipeline::Scope;
use crate::pipeline::jobs::TreeJob;
use crate::storage::{Backend, ReadTxn, Space, WriteTxn};
use crate::tree::{Tree, TreeRead};

/// One item of a listing: a memory, or a directory standing for the memories below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListItem {
    /// A memory.
    Memory(Memory),
    /// A directory rolled up at the requested depth, as `/memories/dir/` (with the slash).
    Prefix(String),
}

/// A model path that names a memory (not the root), or why not.
fn memory_path(raw: &str) -> Result<MemoryPath, ApiRefusal> {
    let path = MemoryPath::parse(raw).map_err(|e| ApiRefusal::InvalidPath {
        path: raw.to_owned(),
        reason: messages::path_reason(raw, e),
    })?;
    if path.is_root() {
        return Err(ApiRefusal::InvalidPath {
            path: raw.to_owned(),
            reason: format!("{raw} is the root directory, not a memory"),
        });
    }
    Ok(path)
}

pub(crate) fn memory_of(path: &MemoryPath, meta: FileMeta, content: Option<String>) -> Memory {
    Memory {
        id: MemoryId(meta.memory),
        path: path.to_string(),
        version: crate::history::VersionId(meta.version),
        sha256: meta.sha256,
        size: meta.size,
        created_ms: meta.created_ms,
        updated_ms: meta.modified_ms,
        content,
    }
}

/// The live memory `id`: its path and metadata.
pub(crate) fn find<T: ReadTxn + ?Sized>(
    txn: &T,
    user: &str,
    id: MemoryId,
) -> Result<Option<(MemoryPath, FileMeta)>, Error> {
    let Some(key) = record::memory_path_key(txn, user, id.0)? else {
        return Ok(None);
    };
    let path = layout::path_of_content_key(&key)?;
    match TreeRead::new(txn, user).node(&path)? {
        Some(Node::File(meta)) if meta.memory == id.0 => Ok(Some((path, meta))),
        _ => Err(Error::Corrupt(format!(
            "memory {id} points at {path}, which is not it"
        ))),
    }
}

/// The memory `id` of the tree's store, checked against the caller's precondition on its
/// content's hash: its path and metadata, or the refusal.
fn find_expected<T: WriteTxn + ?Sized>(
    tree: &Tree<'_, T>,
    id: MemoryId,
    expected_sha256: Option<[u8; 32]>,
) -> Result<Result<(MemoryPath, FileMeta), ApiRefusal>, Error> {
    let user = tree.read().user().to_owned();
    let Some((path, meta)) = find(tree.read().txn(), &user, id)? else {
        return Ok(Err(ApiRefusal::NotFound));
    };
    if let Some(expected) = expected_sha256
        && expected != meta.sha256
    {
        return Ok(Err(ApiRefusal::PreconditionFailed {
            current: meta.sha256,
        }));
    }
    Ok(Ok((path, meta)))
}

/// Whether a memory may be made at `path`: nothing there, and no file above it; the refusal if
/// not.
pub(crate) fn path_is_free<T: WriteTxn + ?Sized>(
    tree: &Tree<'_, T>,
    path: &MemoryPath,
) -> Result<Result<(), ApiRefusal>, Error> {
    if tree.read().node(path)?.is_some() {
        return Ok(Err(ApiRefusal::PathExists {
            path: path.to_string(),
        }));
    }
    if let Some(parent) = tree.read().file_ancestor(path)? {
        return Ok(Err(ApiRefusal::ParentIsFile {
            path: path.to_string(),
            parent: parent.to_string(),
        }));
    }
    Ok(Ok(()))
}

/// Writes `content` once the write policy ([`exec::admit`]) lets it through (moving the file
/// `old` from `from` to `path` first when given): the refusal, or nothing.
pub(crate) fn store_content<T: WriteTxn + ?Sized>(
    tree: &mut Tree<'_, T>,
    settings: &Settings,
    path: &MemoryPath,
    content: &str,
    old: Option<(&MemoryPath, FileMeta)>,
) -> Result<Result<(), ApiRefusal>, Error> {
    let content = match exec::admit(tree, settings, content, old.map(|(_, m)| m))? {
        Ok(admitted) => admitted.content,
        Err(why) => {
            let raw = path.to_string();
            return Ok(Err(ApiRefusal::Limit(messages::refusal_reason(&raw, &why))));
        }
    };
    let now = tree.now_ms();
    match old {
        None => tree.write_file(path, &content, None, FileMeta::times(now, now, now))?,
        Some((from, meta)) => {
            let times = FileMeta::times(meta.created_ms, now, now);
            tree.update_file(from, path, &content, meta, times)?
        }
    }
    Ok(Ok(()))
}

/// The memory at `path` after a write, with its content when `with_content`.
fn written<T: ReadTxn + ?Sized>(
    tree: &TreeRead<'_, T>,
    path: &MemoryPath,
    with_content: bool,
) -> Result<Memory, Error> {
    let Some(Node::File(meta)) = tree.node(path)? else {
        return Err(Error::Corrupt(format!("{path} is missing after its write")));
    };
    let content = if with_content {
        tree.content(path)?
    } else {
        None
    };
    Ok(memory_of(path, meta, content))
}

/// Runs `f` over this store's tree through the write pipeline (batched with other writes,
/// after the expiry sweep); committed only when it returns `Ok(Ok(_))`, and a refusal has
/// written nothing (every refusal is found before the first write). `frees_space`: a write
/// that frees space (see [`crate::storage::Backend::write_freeing`]).
pub(crate) fn write_tree<R: Send + 'static>(
    scope: Scope<'_>,
    frees_space: bool,
    f: impl FnMut(&mut Tree<'_, dyn WriteTxn + '_>, &Settings) -> Result<Result<R, ApiRefusal>, Error>
    + Send
    + 'static,
) -> Result<Result<R, ApiRefusal>, Error> {
    crate::pipeline::submit(
        scope.engine,
        Box::new(TreeJob {
            user: scope.user.into(),
            actor: scope.actor.cloned(),
            frees_space,
            write: Box::new(f),
        }),
    )
}

/// The body of [`crate::MemoryStore::create_memory`].
pub(crate) fn create_memory(
    scope: Scope<'_>,
    path: &str,
    content: &str,
) -> Result<Result<Memory, ApiRefusal>, Error> {
    let path = match memory_path(path) {
        Ok(path) => path,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let content = content.to_owned();
    write_tree(scope, false, move |tree, settings| {
        if tree.archived()? {
            return Ok(Err(ApiRefusal::Archived));
        }
        if let Err(refusal) = path_is_free(tree, &path)? {
            return Ok(Err(refusal));
        }
        if let Err(refusal) = store_content(tree, settings, &path, &content, None)? {
            return Ok(Err(refusal));
        }
        Ok(Ok(written(&tree.read(), &path, false)?))
    })
}

/// The body of [`crate::MemoryStore::memory`].
pub(crate) fn memory(
    scope: Scope<'_>,
    id: MemoryId,
    with_content: bool,
) -> Result<Option<Memory>, Error> {
    let txn = scope.engine.backend.begin_read()?;
    let Some((path, meta)) = find(&txn, scope.user, id)? else {
        return Ok(None);
    };
    let tree = TreeRead::new(&txn, scope.user);
    if scope.engine.expired(scope.user, &tree)?.contains(&path) {
        return Ok(None);
    }
    let content = if with_content {
        tree.content(&path)?
    } else {
        None
    };
    Ok(Some(memory_of(&path, meta, content)))
}

/// The body of [`crate::MemoryStore::update_memory`].
pub(crate) fn update_memory(
    scope: Scope<'_>,
    id: MemoryId,
    content: Option<&str>,
    path: Option<&str>,
    expected_sha256: Option<[u8; 32]>,
) -> Result<Result<Memory, ApiRefusal>, Error> {
    let to = match path.map(memory_path).transpose() {
        Ok(to) => to,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let content = content.map(str::to_owned);
    write_tree(scope, false, move |tree, settings| {
        if tree.archived()? {
            return Ok(Err(ApiRefusal::Archived));
        }
        let (from, meta) = match find_expected(tree, id, expected_sha256)? {
            Ok(found) => found,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let to = to.clone().unwrap_or_else(|| from.clone());
        if to != from
            && let Err(refusal) = path_is_free(tree, &to)?
        {
            return Ok(Err(refusal));
        }
        let current;
        let content = match &content {
            Some(content) => content.as_str(),
            None => {
                current = tree
                    .read()
                    .content(&from)?
                    .ok_or_else(|| Error::Corrupt(format!("{from} has no content")))?;
                &current
            }
        };
        let unchanged = to == from && layout::sha256(content.as_bytes()) == meta.sha256;
        if !unchanged
            && let Err(refusal) = store_content(tree, settings, &to, content, Some((&from, meta)))?
        {
            return Ok(Err(refusal));
        }
        Ok(Ok(written(&tree.read(), &to, false)?))
    })
}

/// The body of [`crate::MemoryStore::delete_memory`].
pub(crate) fn delete_memory(
    scope: Scope<'_>,
    id: MemoryId,
    expected_sha256: Option<[u8; 32]>,
) -> Result<Result<(), ApiRefusal>, Error> {
    write_tree(scope, true, move |tree, _| {
        let (path, meta) = match find_expected(tree, id, expected_sha256)? {
            Ok(found) => found,
            Err(refusal) => return Ok(Err(refusal)),
        };
        tree.remove(&path, Node::File(meta))?;
        Ok(Ok(()))
    })
}

/// The body of [`crate::MemoryStore::list_memories`].
pub(crate) fn list_memories(
    scope: Scope<'_>,
    prefix: &str,
    depth: u32,
    page: Option<&str>,
    limit: usize,
    with_content: bool,
) -> Result<Result<Page<ListItem>, ApiRefusal>, Error> {
    let dir = match MemoryPath::parse(prefix) {
        Ok(dir) => dir,
        Err(e) => {
            return Ok(Err(ApiRefusal::InvalidPath {
                path: prefix.to_owned(),
                reason: messages::path_reason(prefix, e),
            }));
        }
    };
    let (start, end) = if dir.is_root() {
        (Vec::new(), None)
    } else {
        let (start, end) = layout::subtree_contents(&dir);
        (start, Some(end))
    };
    let start = match page {
        None => start,
        Some(token) => match unhex(token) {
            Some(key) if key >= start && end.as_ref().is_none_or(|e| &key <= e) => key,
            _ => return Ok(Err(ApiRefusal::InvalidPage)),
        },
    };
    let txn = scope.engine.backend.begin_read()?;
    let tree = TreeRead::new(&txn, scope.user);
    let expired = scope.engine.expired(scope.user, &tree)?;
    let base = dir.segments().len();
    let limit = limit.max(1);
    // (path, content) of memories and rolled-up prefixes, in key order.
    let mut found: Vec<(MemoryPath, Option<Vec<u8>>)> = Vec::new();
    let mut skip_below: Option<Vec<u8>> = None;
    let mut next = None;
    txn.scan(
        Space::Contents,
        scope.user,
        &start,
        end.as_deref(),
        &mut |key, value| {
            if skip_below
                .as_ref()
                .is_some_and(|bound| key < bound.as_slice())
            {
                return Ok(ControlFlow::Continue(()));
            }
            let path = layout::path_of_content_key(key)?;
            if expired.contains(&path) {
                return Ok(ControlFlow::Continue(()));
            }
            if found.len() == limit {
                next = Some(hex_of(key));
                return Ok(ControlFlow::Break(()));
            }
            let below = path.segments().len() - base;
            if depth > 0 && below > depth as usize {
                let rolled = MemoryPath::from_segments(
                    path.segments()[..base + depth as usize]
                        .iter()
                        .map(String::as_str),
                )
                .map_err(|e| Error::Corrupt(format!("a stored path is invalid: {e}")))?;
                let mut bound = layout::content_key(&rolled);
                bound.push(0x02);
                skip_below = Some(bound);
                found.push((rolled, None));
            } else {
                found.push((path, Some(value.to_vec())));
            }
            Ok(ControlFlow::Continue(()))
        },
    )?;
    let mut items = Vec::with_capacity(found.len());
    for (path, content) in found {
        match content {
            None => items.push(ListItem::Prefix(format!("{path}/"))),
            Some(content) => {
                let Some(Node::File(meta)) = tree.node(&path)? else {
                    return Err(Error::Corrupt(format!("{path} has content but no file")));
                };
                let content = if with_content {
                    Some(String::from_utf8(content).map_err(|_| {
                        Error::Corrupt(format!("the content of {path} is not UTF-8"))
                    })?)
                } else {
                    None
                };
                items.push(ListItem::Memory(memory_of(&path, meta, content)));
            }
        }
    }
    Ok(Ok(Page { items, next }))
}

/// A page token: the hex of the key the next page starts at.
pub(crate) fn hex_of(key: &[u8]) -> String {
    hex::encode(key)
}

/// The key of a page token; `None` for anything that is not lowercase hex.
pub(crate) fn unhex(token: &str) -> Option<Vec<u8>> {
    let lowercase = token
        .bytes()
        .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    if !lowercase || token.len() > 4096 {
        return None;
    }
    hex::decode(token).ok()
}
