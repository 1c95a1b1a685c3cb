//! The semantics of the six commands, written once over [`crate::storage`].
//!
//! Each command runs in one transaction: `view` in a read snapshot, every other command in a write
//! transaction that is committed only when the command succeeds. A command that ends in an error
//! is dropped uncommitted, so an error never changes stored data.
//!
//! Invariant: every command finds all of its model errors *before its first write*. Group commit
//! (`crate::pipeline`) relies on it: a failing command in a shared transaction leaves no trace, so
//! the others in its batch can commit. The expired-file sweep that precedes a command is not part
//! of it: it changes nothing visible.

use crate::blocks::ToolOutput;
use crate::command::{Command, ViewRange};
use crate::error::Error;
use crate::layout::{Node, Totals};
use crate::limits::Settings;
use crate::messages;
use crate::path::MemoryPath;
use crate::storage::{Backend, Fetch, ReadTxn, WriteTxn};
use crate::tree::{self, Tree, TreeRead};

/// Parses `raw` or returns the model-facing path error from the enclosing function. (Defined
/// before the submodules, which use it.)
macro_rules! parse_or_fail {
    ($raw:expr) => {
        match MemoryPath::parse($raw) {
            Ok(path) => path,
            Err(e) => return fail(messages::path_error($raw, e)),
        }
    };
}

mod edit;
mod view;

pub(crate) use edit::{admit, check_limits, guard};

/// Runs a read-only command (`view`) in a read snapshot. `used` are files noted as used but not
/// yet recorded (`crate::access`): live whatever their recorded time. Also returns the file
/// viewed when its recorded access time is older than the granularity: the caller notes it.
/// Nothing is written here, so a read never waits for a flush.
pub(crate) fn read<B: Backend + ?Sized>(
    backend: &B,
    user: &str,
    settings: &Settings,
    (path, view_range): (&str, Option<ViewRange>),
    now_ms: i64,
    used: &[MemoryPath],
) -> Result<(ToolOutput, Option<MemoryPath>), Error> {
    let txn = backend.begin_read()?;
    let tree = TreeRead::new(&txn, user);
    if backend.capabilities().prefetch
        && let Ok(parsed) = MemoryPath::parse(path)
    {
        let mut fetches = Vec::new();
        tree::path_fetches(user, &parsed, true, false, &mut fetches);
        fetches.push(tree::children_fetch(user, &parsed));
        fetches.extend(tree::unused_fetch(user, settings.expiry_cutoff(now_ms)));
        tree.prefetch(&fetches, false)?;
    }
    let expired = Expired::load(&tree, settings.expiry_cutoff(now_ms))?.except(used);
    let (output, viewed) = view::view(&tree, &settings.limits, &expired, path, view_range)?;
    let stale = viewed
        .filter(|(_, meta)| meta.accessed_ms < now_ms.saturating_sub(settings.granularity_ms))
        .map(|(path, _)| path);
    Ok((output, stale))
}

/// What the write `command` of `user` reads before its first write, for
/// [`ReadTxn::prefetch`]: a backend with round trips fetches it all in one.
pub(crate) fn write_fetches(
    user: &str,
    settings: &Settings,
    command: &Command,
    now_ms: i64,
) -> Vec<Fetch> {
    let mut out = Vec::new();
    let mut add = |raw: &str, content: bool, subtree: bool| {
        if let Ok(path) = MemoryPath::parse(raw) {
            tree::path_fetches(user, &path, content, subtree, &mut out);
        }
    };
    match command {
        Command::View { .. } => {}
        Command::Create { path, .. } => add(path, false, false),
        Command::StrReplace { path, .. } | Command::Insert { path, .. } => add(path, true, false),
        Command::Delete { path } => add(path, false, true),
        Command::Rename { old_path, new_path } => {
            add(old_path, true, true);
            add(new_path, false, false);
        }
    }
    out.extend(tree::unused_fetch(user, settings.expiry_cutoff(now_ms)));
    out
}

/// Deletes the user's files last used at or before `cutoff_ms`; returns them with their sizes.
pub(crate) fn sweep<T: WriteTxn + ?Sized>(
    tree: &mut Tree<'_, T>,
    cutoff_ms: Option<i64>,
) -> Result<Vec<(MemoryPath, u64, i64)>, Error> {
    let Some(cutoff) = cutoff_ms else {
        return Ok(Vec::new());
    };
    let expired = tree.read().unused_since(cutoff)?;
    // Expiry deletes on nobody's behalf.
    let actor = if expired.is_empty() {
        None
    } else {
        tree.set_actor(None)
    };
    for (path, _, _) in &expired {
        match tree.read().node(path)? {
            Some(node @ Node::File(_)) => tree.remove(path, node)?,
            _ => {
                return Err(Error::Corrupt(format!(
                    "access entry for {path}, which is no file"
                )));
            }
        }
    }
    if !expired.is_empty() {
        tree.set_actor(actor);
    }
    Ok(expired)
}

/// The expired files of a user in a read snapshot, which a read cannot delete: `view` hides them
/// and leaves them out of every size and count.
pub(crate) struct Expired {
    files: Vec<(MemoryPath, u64)>,
}

impl Expired {
    pub(crate) fn load<T: ReadTxn + ?Sized>(
        tree: &TreeRead<'_, T>,
        cutoff_ms: Option<i64>,
    ) -> Result<Self, Error> {
        let files = match cutoff_ms {
            Some(cutoff) => tree
                .unused_since(cutoff)?
                .into_iter()
                .map(|(path, size, _)| (path, size))
                .collect(),
            None => Vec::new(),
        };
        Ok(Expired { files })
    }

    /// Without the files in `used` (used since their recorded time: live).
    pub(crate) fn except(mut self, used: &[MemoryPath]) -> Self {
        if !used.is_empty() {
            self.files.retain(|(p, _)| !used.contains(p));
        }
        self
    }

    pub(crate) fn contains(&self, path: &MemoryPath) -> bool {
        self.files.iter().any(|(p, _)| p == path)
    }

    /// No file is expired (ranked search's index skips its check of each hit then).
    #[cfg(feature = "ranked")]
    pub(crate) fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// `totals` of the directory `dir` without its expired files.
    pub(crate) fn live(&self, dir: &MemoryPath, totals: Totals) -> Totals {
        let mut live = totals;
        for (path, size) in &self.files {
            if path.is_strictly_inside(dir) {
                live.files = live.files.saturating_sub(1);
                live.bytes = live.bytes.saturating_sub(*size);
            }
        }
        live
    }

    /// The node as the user sees it: `None` if expired, or a directory of expired files only.
    pub(crate) fn visible(&self, path: &MemoryPath, node: Node) -> Option<Node> {
        if self.files.is_empty() {
            return Some(node);
        }
        match node {
            Node::File(_) if self.contains(path) => None,
            Node::File(_) => Some(node),
            Node::Dir(t) => {
                let live = self.live(path, t);
                (live.files > 0 || path.is_root()).then_some(Node::Dir(live))
            }
        }
    }
}

/// Runs a write command inside `tree`'s transaction without committing it.
pub(crate) fn write<T: WriteTxn + ?Sized>(
    tree: &mut Tree<'_, T>,
    settings: &Settings,
    command: &Command,
    now_ms: i64,
) -> Result<ToolOutput, Error> {
    if !command.is_read_only() && tree.archived()? {
        return fail(messages::store_archived());
    }
    match command {
        Command::View { path, view_range } => {
            let none = Expired { files: Vec::new() };
            Ok(view::view(&tree.read(), &settings.limits, &none, path, *view_range)?.0)
        }
        Command::Create { path, file_text } => {
            edit::create(tree, settings, path, file_text, now_ms)
        }
        Command::StrReplace {
            path,
            old_str,
            new_str,
        } => edit::str_replace(
            tree,
            settings,
            path,
            old_str,
            new_str.as_deref().unwrap_or(""),
            now_ms,
        ),
        Command::Insert {
            path,
            insert_line,
            insert_text,
        } => edit::insert(tree, settings, path, *insert_line, insert_text, now_ms),
        Command::Delete { path } => edit::delete(tree, path),
        Command::Rename { old_path, new_path } => edit::rename(tree, old_path, new_path),
    }
}

fn ok(content: String) -> Result<ToolOutput, Error> {
    Ok(ToolOutput {
        content,
        is_error: false,
    })
}

fn fail(content: String) -> Result<ToolOutput, Error> {
    Ok(ToolOutput {
        content,
        is_error: true,
    })
}

/// The lines of a file as `view` numbers them: split on `\n`, a final `\n` ends the last line.
pub(crate) fn split_lines(content: &str) -> Vec<&str> {
    if content.is_empty() {
        return Vec::new();
    }
    content
        .strip_suffix('\n')
        .unwrap_or(content)
        .split('\n')
        .collect()
}

/// `split_lines(content).len()` without allocating.
pub(crate) fn count_lines(content: &str) -> u64 {
    if content.is_empty() {
        return 0;
    }
    let newlines = content.bytes().filter(|&b| b == b'\n').count() as u64;
    newlines + u64::from(!content.ends_with('\n'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_counted_like_view() {
        for (text, n) in [
            ("", 0),
            ("a", 1),
            ("a\n", 1),
            ("\n", 1),
            ("a\nb", 2),
            ("a\n\n", 2),
            ("\r\n", 1),
        ] {
            assert_eq!(
                split_lines(text).len() as u64,
                count_lines(text),
                "{text:?}"
            );
            assert_eq!(count_lines(text), n, "{text:?}");
        }
    }
}
