//! One user's tree over a storage transaction: lookups, listings, and writes that keep the
//! directory index and every aggregate in step, inside the caller's transaction.
//!
//! Invariants, kept by every write here and checked by the model tests:
//! - every file has a `Node::File` under its index key and its content under its content key;
//! - every proper ancestor directory of a file (but the root) has a `Node::Dir` whose totals are
//!   the sum over the files below it, and no other `Node::Dir` exists (directories are implicit);
//! - the user's `UserTotals` are the sum over all files, and absent when there are none;
//! - every file has exactly one `Access` entry, under its `accessed_ms`, holding its size;
//! - every file's `sha256` is the SHA-256 of its content;
//! - every file's memory id has a live entry with its content key in `Memories`, and no other
//!   id does; every change to a file appends a version (`crate::history::append`), `write.rs`
//!   makes sure.

mod write;

use std::ops::ControlFlow;

use crate::error::Error;
use crate::history::append::Recorder;
use crate::layout::{self, FileMeta, Node, Totals, UserTotals};
use crate::path::MemoryPath;
use crate::storage::{Fetch, ReadTxn, Space};

/// Called for each child of a directory, with its name and node.
pub type ChildVisit<'v> = &'v mut dyn FnMut(&str, Node) -> Result<ControlFlow<()>, Error>;
/// Called for each file, with its path and metadata.
pub type FileVisit<'v> = &'v mut dyn FnMut(MemoryPath, FileMeta) -> Result<ControlFlow<()>, Error>;

/// A user's tree within one transaction.
pub struct Tree<'t, T: ?Sized> {
    txn: &'t mut T,
    user: &'t str,
    rec: Recorder<'t>,
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
        out.push(get(Space::Store, Vec::new()));
        // Where the store's feed stands: the write numbers its change-log entries.
        out.push(crate::changes::feed::fetch(user));
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
    out.push(Fetch::Get {
        space: Space::Store,
        user: user.to_owned(),
        key: Vec::new(),
    });
    out.push(Fetch::Range {
        space: Space::Nodes,
        user: user.to_owned(),
        start: Vec::new(),
        end: None,
    });
    // Where the store's feed stands: its commit numbers its change-log entries.
    out.push(crate::changes::feed::fetch(user));
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

    /// The transaction underneath.
    pub(crate) fn txn(&self) -> &'t T {
        self.txn
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
