//! Writes to a user's tree: every change to a file keeps the index, the aggregates, the
//! access index and the memory ids in step, and appends the file's version
//! (`crate::history::append::append`) in the same transaction.

use std::collections::HashMap;
use std::ops::ControlFlow;

use super::{Tree, TreeRead};
use crate::error::Error;
use crate::history::append::{self, Before, Change, Previous, Recorder};
use crate::history::change::{self, ChangeKind};
use crate::history::record::{self, IdEntry, VersionRecord};
use crate::history::{Actor, MemoryId, Operation, VersionId};
use crate::layout::{self, FileMeta, Node, Totals, UserTotals};
use crate::path::{MemoryPath, PathError};
use crate::storage::{Space, WriteTxn};

impl<'t, T: WriteTxn + ?Sized> Tree<'t, T> {
    /// The user's tree in `txn`, for writing; changes are recorded with `rec`.
    pub fn new(txn: &'t mut T, user: &'t str, rec: Recorder<'t>) -> Self {
        Tree { txn, user, rec }
    }

    /// Records the following changes as made by `actor`; returns the previous actor.
    pub fn set_actor(&mut self, actor: Option<Actor>) -> Option<Actor> {
        std::mem::replace(&mut self.rec.actor, actor)
    }

    /// The time the changes are recorded at.
    pub fn now_ms(&self) -> i64 {
        self.rec.now_ms
    }

    /// The underlying transaction (for the store's own record).
    pub(crate) fn txn(&mut self) -> &mut T {
        self.txn
    }

    /// Whether the store is archived (read-only).
    pub fn archived(&self) -> Result<bool, Error> {
        Ok(record::store_record(self.txn, self.user)?.is_some_and(|r| r.archived_ms.is_some()))
    }

    /// Read access within the same transaction.
    pub fn read(&self) -> TreeRead<'_, T> {
        TreeRead {
            txn: self.txn,
            user: self.user,
        }
    }

    /// Writes `content` to the file at `path` with the times of `meta` (its size, hash and ids
    /// are filled in here: build it with [`FileMeta::times`]), replacing the file `existing` if
    /// there is one (a new version of that memory, unless the content is the same), else creating
    /// a memory. The caller has checked that no ancestor is a file and that `path` is no
    /// directory.
    pub fn write_file(
        &mut self,
        path: &MemoryPath,
        content: &str,
        existing: Option<FileMeta>,
        meta: FileMeta,
    ) -> Result<(), Error> {
        let meta = self.record_content(path, content, existing.map(|old| (old, path)), meta)?;
        self.place_file(path, content, existing, meta)
    }

    /// Replaces the file `old` at `from` by `content` at `to` (which may be `from`), keeping the
    /// memory's id: one `modified` version, none when neither the path nor the content change.
    /// The caller has checked `to` as for [`Self::write_file`] and that it is free (or `from`).
    pub fn update_file(
        &mut self,
        from: &MemoryPath,
        to: &MemoryPath,
        content: &str,
        old: FileMeta,
        meta: FileMeta,
    ) -> Result<(), Error> {
        if from == to {
            return self.write_file(to, content, Some(old), meta);
        }
        // The path changed: always a version (see `record_content`).
        let meta = self.record_content(to, content, Some((old, from)), meta)?;
        self.remove_entries(from, Node::File(old))?;
        self.place_file(to, content, None, meta)
    }

    /// The file `meta` with `content` at `path`, its size, hash and ids filled in, recording its
    /// version: of the memory `lineage` (the file it continues, and where that file's content
    /// still is) unless the content is the same, else of a new memory.
    fn record_content(
        &mut self,
        path: &MemoryPath,
        content: &str,
        lineage: Option<(FileMeta, &MemoryPath)>,
        meta: FileMeta,
    ) -> Result<FileMeta, Error> {
        let mut meta = FileMeta::new(content, meta.created_ms, meta.modified_ms, meta.accessed_ms);
        (meta.memory, meta.version) = match lineage {
            Some((old, at)) if old.sha256 == meta.sha256 && at == path => (old.memory, old.version),
            _ => append::append(
                self.txn,
                self.user,
                &self.rec,
                Change {
                    previous: lineage.map(|(old, at)| Previous {
                        memory: old.memory,
                        version: old.version,
                        content: Before::File(at),
                        moved_from: (at != path).then_some(at),
                    }),
                    operation: match lineage {
                        Some(_) => Operation::Modified,
                        None => Operation::Created,
                    },
                    path,
                    content: Some(content),
                    sha256: Some(meta.sha256),
                    unchanged: lineage.is_some_and(|(old, _)| old.sha256 == meta.sha256),
                },
            )?,
        };
        Ok(meta)
    }

    /// Writes the file at `path` as an import restores it, with the memory id and version of
    /// `meta` (its size and hash are computed here), recording no version: the import restores
    /// the versions themselves. The caller has checked that nothing is at `path` and no ancestor
    /// is a file.
    pub(crate) fn restore_file(
        &mut self,
        path: &MemoryPath,
        content: &str,
        meta: FileMeta,
    ) -> Result<(), Error> {
        let mut restored =
            FileMeta::new(content, meta.created_ms, meta.modified_ms, meta.accessed_ms);
        (restored.memory, restored.version) = (meta.memory, meta.version);
        record::put_id_entry(
            self.txn,
            self.user,
            restored.memory,
            &IdEntry::Live(layout::content_key(path)),
        )?;
        self.place_file(path, content, None, restored)?;
        self.rec.changes.note(change::Change {
            kind: ChangeKind::MemoryCreated,
            memory: Some(MemoryId(restored.memory)),
            version: Some(VersionId(restored.version)),
            path: Some(path.to_string()),
            sha256: Some(restored.sha256),
            size: Some(restored.size),
            actor: self.rec.actor.clone(),
            ..change::Change::of_store(ChangeKind::MemoryCreated, self.user, self.rec.now_ms)
        });
        Ok(())
    }

    /// Redacts the version `seq` (see [`append::redact`]) on behalf of this tree's actor, and
    /// notes it for the commit hooks. `None` when no such version is kept.
    pub(crate) fn redact(&mut self, seq: u64) -> Result<Option<VersionRecord>, Error> {
        let (by, now) = (self.rec.actor.clone(), self.rec.now_ms);
        let before = record::version(self.txn, self.user, seq)?;
        let redacted = append::redact(self.txn, self.user, seq, by.clone(), now)?;
        if let (Some(before), Some(_)) = (&before, &redacted)
            && before.redacted.is_none()
        {
            self.rec.changes.note(change::Change {
                memory: Some(MemoryId(before.memory)),
                version: Some(VersionId(seq)),
                actor: by,
                ..change::Change::of_store(ChangeKind::VersionRedacted, self.user, now)
            });
            // For the change log's scrub only (`crate::changes`): the path the log must forget,
            // also where the version's own entry is already gone.
            if let Some(path) = &before.path {
                self.rec.changes.erased(self.user, seq, path);
            }
        }
        Ok(redacted)
    }

    /// Puts the file `meta` (ids set) at `path` in the index, the access index and the contents,
    /// replacing `replaced`, and adjusts the totals above it.
    fn place_file(
        &mut self,
        path: &MemoryPath,
        content: &str,
        replaced: Option<FileMeta>,
        meta: FileMeta,
    ) -> Result<(), Error> {
        let old = replaced.map_or(Totals::default(), |m| Node::File(m).weight());
        if let Some(old) = replaced {
            self.txn.remove(
                Space::Access,
                self.user,
                &layout::access_key(old.accessed_ms, path),
            )?;
        }
        self.put_node(path, &Node::File(meta))?;
        let access = layout::access_key(meta.accessed_ms, path);
        let size = layout::encode(&meta.size);
        let contents = layout::content_key(path);
        if replaced.is_some() {
            self.txn.put(Space::Access, self.user, &access, &size)?;
            self.txn
                .put(Space::Contents, self.user, &contents, content.as_bytes())?;
        } else {
            // Nothing was at `path` (the callers' contract): a file's contents and access entry
            // exist exactly while it does (invariants 1 and 4).
            self.txn.put_new(Space::Access, self.user, &access, &size)?;
            self.txn
                .put_new(Space::Contents, self.user, &contents, content.as_bytes())?;
        }
        self.adjust_ancestors(path, old, Node::File(meta).weight(), Some(meta.modified_ms))
    }

    /// Records a read of the file at `path` at `now_ms`.
    pub fn touch(&mut self, path: &MemoryPath, meta: FileMeta, now_ms: i64) -> Result<(), Error> {
        self.txn.remove(
            Space::Access,
            self.user,
            &layout::access_key(meta.accessed_ms, path),
        )?;
        let meta = FileMeta {
            accessed_ms: now_ms,
            ..meta
        };
        self.put_node(path, &Node::File(meta))?;
        self.put_access(path, &meta)
    }

    fn put_access(&mut self, path: &MemoryPath, meta: &FileMeta) -> Result<(), Error> {
        self.txn.put(
            Space::Access,
            self.user,
            &layout::access_key(meta.accessed_ms, path),
            &layout::encode(&meta.size),
        )
    }

    /// Every file below the directory `dir`, with its metadata.
    fn files_below(&self, dir: &MemoryPath) -> Result<Vec<(MemoryPath, FileMeta)>, Error> {
        let (start, end) = layout::subtree_nodes(dir);
        let mut out = Vec::new();
        self.txn.scan(
            Space::Nodes,
            self.user,
            &start,
            Some(&end),
            &mut |key, value| {
                if let Node::File(meta) = layout::decode(value, "index node")? {
                    let content_key = layout::content_key_of_node_key(key)?;
                    out.push((layout::path_of_content_key(&content_key)?, meta));
                }
                Ok(ControlFlow::Continue(()))
            },
        )?;
        Ok(out)
    }

    /// Removes the file or whole directory `node` at the non-root `path`: a `deleted` version
    /// for each memory.
    pub fn remove(&mut self, path: &MemoryPath, node: Node) -> Result<(), Error> {
        let files = match node {
            Node::File(meta) => vec![(path.clone(), meta)],
            Node::Dir(_) => self.files_below(path)?,
        };
        if files.len() > 1 {
            let latest: Vec<_> = files.iter().map(|(f, m)| (m.version, Some(f))).collect();
            append::prefetch_latest(self.txn, self.user, &latest)?;
        }
        for (file, meta) in &files {
            append::append(
                self.txn,
                self.user,
                &self.rec,
                Change {
                    previous: Some(Previous {
                        memory: meta.memory,
                        version: meta.version,
                        content: Before::File(file),
                        moved_from: None,
                    }),
                    operation: Operation::Deleted,
                    path: file,
                    content: None,
                    sha256: None,
                    unchanged: false,
                },
            )?;
        }
        self.remove_entries(path, node)
    }

    /// Removes the file or directory `node` at `path` from the index, the contents and the
    /// access index, recording nothing (the caller does).
    fn remove_entries(&mut self, path: &MemoryPath, node: Node) -> Result<(), Error> {
        self.txn
            .remove(Space::Nodes, self.user, &layout::node_key(path))?;
        match node {
            Node::File(meta) => {
                self.txn
                    .remove(Space::Contents, self.user, &layout::content_key(path))?;
                self.txn.remove(
                    Space::Access,
                    self.user,
                    &layout::access_key(meta.accessed_ms, path),
                )?;
            }
            Node::Dir(_) => {
                for (file, meta) in self.files_below(path)? {
                    self.txn.remove(
                        Space::Access,
                        self.user,
                        &layout::access_key(meta.accessed_ms, &file),
                    )?;
                }
                let (start, end) = layout::subtree_nodes(path);
                self.txn
                    .remove_range(Space::Nodes, self.user, &start, &end)?;
                let (start, end) = layout::subtree_contents(path);
                self.txn
                    .remove_range(Space::Contents, self.user, &start, &end)?;
            }
        }
        self.adjust_ancestors(path, node.weight(), Totals::default(), None)
    }

    /// Every path below (or at) `from` rebased onto `to`, checked against the path rules, so a
    /// move that would make some path too long is refused before anything changes.
    pub fn check_move(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        node: Node,
    ) -> Result<Result<(), (MemoryPath, PathError)>, Error> {
        if let Node::File(_) = node {
            return Ok(Ok(()));
        }
        // Only the deepest paths can break the rules; files are the leaves, so checking the
        // content keys covers every path below.
        let (start, end) = layout::subtree_contents(from);
        let mut verdict = Ok(());
        self.txn.scan(
            Space::Contents,
            self.user,
            &start,
            Some(&end),
            &mut |key, _| {
                let old = layout::path_of_content_key(key)?;
                match old.rebase(from, to) {
                    Some(Ok(_)) => Ok(ControlFlow::Continue(())),
                    Some(Err(e)) => {
                        verdict = Err((old, e));
                        Ok(ControlFlow::Break(()))
                    }
                    None => Err(Error::Corrupt(format!("{old} is listed below {from}"))),
                }
            },
        )?;
        Ok(verdict)
    }

    /// Moves the file or directory `node` from `from` to `to` (which does not exist, is not
    /// inside `from`, and has no file ancestor; [`Self::check_move`] passed). Times and ids are
    /// kept; each memory moved gets a `modified` version at its new path.
    pub fn move_node(
        &mut self,
        from: &MemoryPath,
        to: &MemoryPath,
        node: Node,
    ) -> Result<(), Error> {
        let (old_enc, new_enc) = (layout::content_key(from), layout::content_key(to));
        let mut nodes = Vec::new();
        let mut contents = Vec::new();
        match node {
            Node::File(meta) => {
                let content = self
                    .txn
                    .get(Space::Contents, self.user, &old_enc)?
                    .ok_or_else(|| Error::Corrupt(format!("{from} has no content")))?;
                contents.push((new_enc.clone(), content));
                nodes.push((layout::node_key(to), layout::encode(&Node::File(meta))));
            }
            Node::Dir(_) => {
                let (start, end) = layout::subtree_nodes(from);
                self.txn.scan(
                    Space::Nodes,
                    self.user,
                    &start,
                    Some(&end),
                    &mut rebased_into(&mut nodes, &old_enc, &new_enc),
                )?;
                let (start, end) = layout::subtree_contents(from);
                self.txn.scan(
                    Space::Contents,
                    self.user,
                    &start,
                    Some(&end),
                    &mut rebased_into(&mut contents, &old_enc, &new_enc),
                )?;
            }
        }
        // Removing the last file drops the user's totals with their last-write time; a move
        // writes no content, so the time it had is the time it keeps.
        let last_write_ms = self.read().totals()?.last_write_ms;
        self.remove_entries(from, node)?;
        if let Node::Dir(_) = node {
            self.put_node(to, &node)?;
        }
        let mut latest = Vec::new();
        for (_, value) in &nodes {
            if let Node::File(meta) = layout::decode(value, "index node")? {
                latest.push((meta.version, None));
            }
        }
        if latest.len() > 1 {
            append::prefetch_latest(self.txn, self.user, &latest)?;
        }
        let by_key: HashMap<&[u8], &[u8]> = contents
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        for (key, value) in &nodes {
            let mut value = value.clone();
            if let Node::File(mut meta) = layout::decode(&value, "index node")? {
                let content_key = layout::content_key_of_node_key(key)?;
                let path = layout::path_of_content_key(&content_key)?;
                let old_path = rebased_back(&path, to, from)?;
                let content = by_key
                    .get(content_key.as_slice())
                    .ok_or_else(|| Error::Corrupt(format!("{path} has no content")))?;
                let content = std::str::from_utf8(content)
                    .map_err(|_| Error::Corrupt(format!("the content of {path} is not UTF-8")))?;
                (_, meta.version) = append::append(
                    self.txn,
                    self.user,
                    &self.rec,
                    Change {
                        previous: Some(Previous {
                            memory: meta.memory,
                            version: meta.version,
                            content: Before::Text(content),
                            moved_from: Some(&old_path),
                        }),
                        operation: Operation::Modified,
                        path: &path,
                        content: Some(content),
                        sha256: Some(meta.sha256),
                        unchanged: true,
                    },
                )?;
                value = layout::encode(&Node::File(meta));
                self.put_access(&path, &meta)?;
            }
            self.txn.put(Space::Nodes, self.user, key, &value)?;
        }
        for (k, v) in &contents {
            self.txn.put(Space::Contents, self.user, k, v)?;
        }
        self.adjust_ancestors(to, Totals::default(), node.weight(), Some(last_write_ms))
    }

    fn put_node(&mut self, path: &MemoryPath, node: &Node) -> Result<(), Error> {
        self.txn.put(
            Space::Nodes,
            self.user,
            &layout::node_key(path),
            &layout::encode(node),
        )
    }

    /// Replaces `old` by `new` in the totals of every ancestor of `path` and of the user,
    /// creating directories that gain their first file and dropping those that lose their last.
    /// `wrote_ms` is the time of a content write, for the user's last-write time.
    fn adjust_ancestors(
        &mut self,
        path: &MemoryPath,
        old: Totals,
        new: Totals,
        wrote_ms: Option<i64>,
    ) -> Result<(), Error> {
        let apply = |files: u64, bytes: u64| -> Result<(u64, u64), Error> {
            let files = (files + new.files).checked_sub(old.files);
            let bytes = (bytes + new.bytes).checked_sub(old.bytes);
            match (files, bytes) {
                (Some(files), Some(bytes)) => Ok((files, bytes)),
                _ => Err(Error::Corrupt(format!("totals above {path} went negative"))),
            }
        };
        for n in 0..path.segments().len() {
            if n == 0 {
                let t = self.read().totals()?;
                let (files, bytes) = apply(t.files, t.bytes)?;
                if files == 0 {
                    self.txn.remove(Space::Totals, self.user, &[])?;
                } else {
                    let totals = UserTotals {
                        files,
                        bytes,
                        last_write_ms: t.last_write_ms.max(wrote_ms.unwrap_or(i64::MIN)),
                    };
                    self.txn
                        .put(Space::Totals, self.user, &[], &layout::encode(&totals))?;
                }
                continue;
            }
            let key = layout::prefix_node_key(path, n);
            let current = match self.txn.get(Space::Nodes, self.user, &key)? {
                None => Totals::default(),
                Some(bytes) => match layout::decode(&bytes, "index node")? {
                    Node::Dir(t) => t,
                    Node::File(_) => {
                        return Err(Error::Corrupt(format!(
                            "an ancestor of {path} is a file with files below it"
                        )));
                    }
                },
            };
            let (files, bytes) = apply(current.files, current.bytes)?;
            if files == 0 {
                self.txn.remove(Space::Nodes, self.user, &key)?;
            } else {
                let node = Node::Dir(Totals { files, bytes });
                self.txn
                    .put(Space::Nodes, self.user, &key, &layout::encode(&node))?;
            }
        }
        Ok(())
    }
}

/// A scan visitor that collects entries with their keys moved from `from` to `to`.
fn rebased_into<'a>(
    out: &'a mut Vec<(Vec<u8>, Vec<u8>)>,
    from: &'a [u8],
    to: &'a [u8],
) -> impl FnMut(&[u8], &[u8]) -> Result<ControlFlow<()>, Error> + 'a {
    move |k, v| {
        out.push((layout::rebase_key(k, from, to)?, v.to_vec()));
        Ok(ControlFlow::Continue(()))
    }
}

/// The path `path` (below `to`) had before its directory moved from `from` to `to`.
fn rebased_back(
    path: &MemoryPath,
    to: &MemoryPath,
    from: &MemoryPath,
) -> Result<MemoryPath, Error> {
    let below = path
        .segments()
        .get(to.segments().len()..)
        .ok_or_else(|| Error::Corrupt(format!("{path} is not below {to}")))?;
    MemoryPath::from_segments(from.segments().iter().chain(below).map(String::as_str))
        .map_err(|e| Error::Corrupt(format!("{path}: {e}")))
}
