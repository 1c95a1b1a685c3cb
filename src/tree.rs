//! One user's tree over a storage transaction: lookups, listings, and writes that keep the
//! directory index and every aggregate in step, inside the caller's transaction.
//!
//! Invariants, kept by every write here and checked by the model tests:
//! - every file has a `Node::File` under its index key and its content under its content key;
//! - every proper ancestor directory of a file (but the root) has a `Node::Dir` whose totals are
//!   the sum over the files below it, and no other `Node::Dir` exists (directories are implicit);
//! - the user's `UserTotals` are the sum over all files, and absent when there are none;
//! - every file has exactly one `Access` entry, under its `accessed_ms`, holding its size;
//! - every file's `sha256` is the SHA-256 of its content.

use std::ops::ControlFlow;

use crate::error::Error;
use crate::layout::{self, FileMeta, Node, Totals, UserTotals};
use crate::path::{MemoryPath, PathError};
use crate::storage::{Fetch, ReadTxn, Space, WriteTxn};

/// Called for each child of a directory, with its name and node.
pub type ChildVisit<'v> = &'v mut dyn FnMut(&str, Node) -> Result<ControlFlow<()>, Error>;
/// Called for each file, with its path and metadata.
pub type FileVisit<'v> = &'v mut dyn FnMut(MemoryPath, FileMeta) -> Result<ControlFlow<()>, Error>;

/// A user's tree within one transaction.
pub struct Tree<'t, T: ?Sized> {
    txn: &'t mut T,
    user: &'t str,
}

/// Read access to a user's tree (works over a read or a write transaction).
pub struct TreeRead<'t, T: ?Sized> {
    txn: &'t T,
    user: &'t str,
}

/// What a command on `path` reads first, for [`ReadTxn::prefetch`]: the user's totals, the index
/// nodes of `path` and its ancestors, with `content` its content, and with `subtree` everything
/// below it (what a `delete` or `rename` of a directory moves).
pub fn path_fetches(
    user: &str,
    path: &MemoryPath,
    content: bool,
    subtree: bool,
    out: &mut Vec<Fetch>,
) {
    let get = |space, key| Fetch::Get {
        space,
        user: user.to_owned(),
        key,
    };
    let range = |space, (start, end): (Vec<u8>, Vec<u8>)| Fetch::Range {
        space,
        user: user.to_owned(),
        start,
        end: Some(end),
    };
    if !out
        .iter()
        .any(|f| matches!(f, Fetch::Get { space: Space::Totals, user: u, .. } if u == user))
    {
        out.push(get(Space::Totals, Vec::new()));
    }
    for n in 1..=path.segments().len() {
        out.push(get(Space::Nodes, layout::prefix_node_key(path, n)));
    }
    if path.is_root() {
        return;
    }
    if content {
        out.push(get(Space::Contents, layout::content_key(path)));
    }
    if subtree {
        out.push(range(Space::Nodes, layout::subtree_nodes(path)));
        out.push(range(Space::Contents, layout::subtree_contents(path)));
    }
}

/// Everything a bulk write into `user`'s tree reads (an import): the totals and the whole
/// directory index, for [`ReadTxn::prefetch`].
pub fn index_fetches(user: &str, out: &mut Vec<Fetch>) {
    out.push(Fetch::Get {
        space: Space::Totals,
        user: user.to_owned(),
        key: Vec::new(),
    });
    out.push(Fetch::Range {
        space: Space::Nodes,
        user: user.to_owned(),
        start: Vec::new(),
        end: None,
    });
}

/// The children of `dir`, for [`ReadTxn::prefetch`].
pub fn children_fetch(user: &str, dir: &MemoryPath) -> Fetch {
    let start = layout::children_prefix(dir);
    let end = layout::prefix_end(&start);
    Fetch::Range {
        space: Space::Nodes,
        user: user.to_owned(),
        start,
        end: Some(end),
    }
}

/// The access entries of files last used at or before `cutoff_ms` (what
/// [`TreeRead::unused_since`] reads), for [`ReadTxn::prefetch`].
pub fn unused_fetch(user: &str, cutoff_ms: Option<i64>) -> Option<Fetch> {
    let cutoff = cutoff_ms.filter(|c| *c >= 0)?;
    Some(Fetch::Range {
        space: Space::Access,
        user: user.to_owned(),
        start: Vec::new(),
        end: Some(layout::access_prefix(cutoff.saturating_add(1)).to_vec()),
    })
}

impl<'t, T: ReadTxn + ?Sized> TreeRead<'t, T> {
    /// The user's tree in `txn`.
    pub fn new(txn: &'t T, user: &'t str) -> Self {
        TreeRead { txn, user }
    }

    /// The user.
    pub fn user(&self) -> &str {
        self.user
    }

    /// Announces reads to the backend (see [`ReadTxn::prefetch`]).
    pub fn prefetch(&self, fetches: &[Fetch], last: bool) -> Result<(), Error> {
        self.txn.prefetch(fetches, last)
    }

    /// The user's totals (zero when the user has no files).
    pub fn totals(&self) -> Result<UserTotals, Error> {
        match self.txn.get(Space::Totals, self.user, &[])? {
            Some(bytes) => layout::decode(&bytes, "user totals"),
            None => Ok(UserTotals::default()),
        }
    }

    /// The node at `path`; the root always exists.
    pub fn node(&self, path: &MemoryPath) -> Result<Option<Node>, Error> {
        if path.is_root() {
            let t = self.totals()?;
            return Ok(Some(Node::Dir(Totals {
                files: t.files,
                bytes: t.bytes,
            })));
        }
        match self
            .txn
            .get(Space::Nodes, self.user, &layout::node_key(path))?
        {
            Some(bytes) => Ok(Some(layout::decode(&bytes, "index node")?)),
            None => Ok(None),
        }
    }

    /// The content of the file at `path`.
    pub fn content(&self, path: &MemoryPath) -> Result<Option<String>, Error> {
        match self
            .txn
            .get(Space::Contents, self.user, &layout::content_key(path))?
        {
            Some(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| Error::Corrupt(format!("content of {path} is not UTF-8"))),
            None => Ok(None),
        }
    }

    /// The one ancestor of `path` that is a file, if any (there is at most one: files have no
    /// children). Checked from the top.
    pub fn file_ancestor(&self, path: &MemoryPath) -> Result<Option<MemoryPath>, Error> {
        for n in 1..path.segments().len() {
            let key = layout::prefix_node_key(path, n);
            match self.txn.get(Space::Nodes, self.user, &key)? {
                Some(bytes) => match layout::decode(&bytes, "index node")? {
                    Node::File(_) => {
                        let ancestor = MemoryPath::from_segments(&path.segments()[..n])
                            .map_err(|e| Error::Corrupt(format!("{path}: {e}")))?;
                        return Ok(Some(ancestor));
                    }
                    Node::Dir(_) => {}
                },
                // Nothing below a missing directory exists either.
                None => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Visits the children of `dir` in byte order of their names.
    pub fn children(&self, dir: &MemoryPath, visit: ChildVisit<'_>) -> Result<(), Error> {
        let prefix = layout::children_prefix(dir);
        let end = layout::prefix_end(&prefix);
        self.txn.scan(
            Space::Nodes,
            self.user,
            &prefix,
            Some(&end),
            &mut |key, value| {
                let name = layout::child_name(key, prefix.len())?;
                visit(name, layout::decode(value, "index node")?)
            },
        )
    }

    /// The files last used at or before `cutoff_ms`, oldest first: `(path, size, accessed_ms)`.
    pub fn unused_since(&self, cutoff_ms: i64) -> Result<Vec<(MemoryPath, u64, i64)>, Error> {
        let mut out = Vec::new();
        if cutoff_ms < 0 {
            return Ok(out);
        }
        let end = layout::access_prefix(cutoff_ms.saturating_add(1));
        self.txn.scan(
            Space::Access,
            self.user,
            &[],
            Some(&end),
            &mut |key, value| {
                let (accessed, path) = layout::decode_access_key(key)?;
                out.push((path, layout::decode(value, "access entry")?, accessed));
                Ok(ControlFlow::Continue(()))
            },
        )?;
        Ok(out)
    }

    /// Visits every file of the user with its metadata, in path order (segment by segment).
    pub fn files(&self, visit: FileVisit<'_>) -> Result<(), Error> {
        self.walk(&MemoryPath::root(), visit, false).map(|_| ())
    }

    /// [`Self::files`] for a visitor that reads every file's content too (an export): a backend
    /// with round trips fetches each directory's contents, and its subdirectories' listings, at
    /// once.
    pub fn files_with_contents(&self, visit: FileVisit<'_>) -> Result<(), Error> {
        self.txn
            .prefetch(&[children_fetch(self.user, &MemoryPath::root())], false)?;
        self.walk(&MemoryPath::root(), visit, true).map(|_| ())
    }

    fn walk(
        &self,
        dir: &MemoryPath,
        visit: FileVisit<'_>,
        contents: bool,
    ) -> Result<ControlFlow<()>, Error> {
        let mut entries = Vec::new();
        self.children(dir, &mut |name, node| {
            entries.push((name.to_owned(), node));
            Ok(ControlFlow::Continue(()))
        })?;
        if contents {
            let fetches: Vec<Fetch> = entries
                .iter()
                .map(|(name, node)| {
                    let path = dir.child(name);
                    match node {
                        Node::File(_) => Fetch::Get {
                            space: Space::Contents,
                            user: self.user.to_owned(),
                            key: layout::content_key(&path),
                        },
                        Node::Dir(_) => children_fetch(self.user, &path),
                    }
                })
                .collect();
            self.txn.prefetch(&fetches, false)?;
        }
        for (name, node) in entries {
            let path = dir
                .join(&name)
                .map_err(|e| Error::Corrupt(format!("stored name {name:?}: {e}")))?;
            let flow = match node {
                Node::File(meta) => visit(path, meta)?,
                Node::Dir(_) => self.walk(&path, visit, contents)?,
            };
            if flow.is_break() {
                return Ok(flow);
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}

impl<'t, T: WriteTxn + ?Sized> Tree<'t, T> {
    /// The user's tree in `txn`, for writing.
    pub fn new(txn: &'t mut T, user: &'t str) -> Self {
        Tree { txn, user }
    }

    /// Read access within the same transaction.
    pub fn read(&self) -> TreeRead<'_, T> {
        TreeRead {
            txn: self.txn,
            user: self.user,
        }
    }

    /// Writes `content` to the file at `path` with the times of `meta` (its `size` and
    /// `sha256` are computed from `content` as written: build it with [`FileMeta::times`]), replacing the
    /// file `existing` if there is one. The caller has checked that no ancestor is a file and
    /// that `path` is no directory.
    pub fn write_file(
        &mut self,
        path: &MemoryPath,
        content: &str,
        existing: Option<FileMeta>,
        meta: FileMeta,
    ) -> Result<(), Error> {
        let meta = FileMeta::new(content, meta.created_ms, meta.modified_ms, meta.accessed_ms);
        let old = existing.map_or(Totals::default(), |m| Node::File(m).weight());
        if let Some(old) = existing {
            self.txn.remove(
                Space::Access,
                self.user,
                &layout::access_key(old.accessed_ms, path),
            )?;
        }
        self.put_node(path, &Node::File(meta))?;
        self.put_access(path, &meta)?;
        self.txn.put(
            Space::Contents,
            self.user,
            &layout::content_key(path),
            content.as_bytes(),
        )?;
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

    /// The access-index keys of every file below the directory `dir`.
    fn access_keys_below(&self, dir: &MemoryPath) -> Result<Vec<Vec<u8>>, Error> {
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
                    out.push([&layout::access_prefix(meta.accessed_ms)[..], &content_key].concat());
                }
                Ok(ControlFlow::Continue(()))
            },
        )?;
        Ok(out)
    }

    /// Removes the file or whole directory `node` at the non-root `path`.
    pub fn remove(&mut self, path: &MemoryPath, node: Node) -> Result<(), Error> {
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
                for access in self.access_keys_below(path)? {
                    self.txn.remove(Space::Access, self.user, &access)?;
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
    /// inside `from`, and has no file ancestor; [`Self::check_move`] passed). Times are kept.
    pub fn move_node(
        &mut self,
        from: &MemoryPath,
        to: &MemoryPath,
        node: Node,
    ) -> Result<(), Error> {
        let (old_enc, new_enc) = (layout::content_key(from), layout::content_key(to));
        let mut nodes = Vec::new();
        let mut contents = Vec::new();
        // Access entries keep their time and follow the path: (new key, size).
        let mut accesses: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        match node {
            Node::File(meta) => {
                let content = self
                    .txn
                    .get(Space::Contents, self.user, &old_enc)?
                    .ok_or_else(|| Error::Corrupt(format!("{from} has no content")))?;
                contents.push((new_enc.clone(), content));
                accesses.push((
                    layout::access_key(meta.accessed_ms, to),
                    layout::encode(&meta.size),
                ));
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
                for (key, value) in &nodes {
                    if let Node::File(meta) = layout::decode(value, "index node")? {
                        let content_key = layout::content_key_of_node_key(key)?;
                        let access =
                            [&layout::access_prefix(meta.accessed_ms)[..], &content_key].concat();
                        accesses.push((access, layout::encode(&meta.size)));
                    }
                }
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
        self.remove(from, node)?;
        self.put_node(to, &node)?;
        for (k, v) in nodes {
            self.txn.put(Space::Nodes, self.user, &k, &v)?;
        }
        for (k, v) in contents {
            self.txn.put(Space::Contents, self.user, &k, &v)?;
        }
        for (k, v) in accesses {
            self.txn.put(Space::Access, self.user, &k, &v)?;
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
        out.push((layout::rebase_key(k, from, to), v.to_vec()));
        Ok(ControlFlow::Continue(()))
    }
}
