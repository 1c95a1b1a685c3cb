//! The semantics of the six commands, written once over [`crate::storage`].
//!
//! Each command runs in one transaction: `view` in a read snapshot, every other command in a write
//! transaction that is committed only when the command succeeds. A command that ends in an error
//! is dropped uncommitted, so an error never changes stored data.
//!
//! Invariant: every command finds all of its model errors *before its first write*. Group commit
//! (`crate::group`) relies on it: a failing command in a shared transaction leaves no trace, so
//! the others in its batch can commit. The expired-file sweep that precedes a command is not part
//! of it: it changes nothing visible.

use std::borrow::Cow;
use std::ops::ControlFlow;

use crate::blocks::ToolOutput;
use crate::command::{Command, ViewRange};
use crate::error::Error;
use crate::history::Actor;
use crate::layout::{FileMeta, Node, Totals, UserTotals};
use crate::limits::{Limits, Refusal, Settings};
use crate::messages;
use crate::path::MemoryPath;
use crate::secrets::{self, SecretPolicy};
use crate::storage::{Backend, Fetch, Finish, ReadTxn, WriteTxn};
use crate::tree::{self, Tree, TreeRead};

/// Runs `command` for `user` in its own transaction (a `view` in a read snapshot, noting
/// nothing; see [`read`]).
pub(crate) fn execute<B: Backend + ?Sized>(
    backend: &B,
    user: &str,
    settings: &Settings,
    command: &Command,
    now_ms: i64,
    actor: Option<&Actor>,
) -> Result<ToolOutput, Error> {
    if command.is_read_only() {
        return read(backend, user, settings, command, now_ms, &[]).map(|(output, _)| output);
    }
    let fetches = if backend.wants_prefetch() {
        write_fetches(user, settings, command, now_ms)
    } else {
        Vec::new()
    };
    backend.write(&[user], |txn| {
        txn.prefetch(&fetches, false)?;
        let mut tree = Tree::new(txn, user, settings.recorder(now_ms, actor));
        sweep(&mut tree, settings.expiry_cutoff(now_ms))?;
        let output = write(&mut tree, settings, command, now_ms)?;
        let finish = if output.is_error {
            Finish::Abort
        } else {
            Finish::Commit
        };
        Ok((output, finish))
    })
}

/// Runs a read-only command (`view`) in a read snapshot. `used` are files noted as used but not
/// yet recorded (`crate::access`): live whatever their recorded time. Also returns the file
/// viewed when its recorded access time is older than the granularity: the caller notes it.
/// Nothing is written here, so a read never waits for a flush.
pub(crate) fn read<B: Backend + ?Sized>(
    backend: &B,
    user: &str,
    settings: &Settings,
    command: &Command,
    now_ms: i64,
    used: &[MemoryPath],
) -> Result<(ToolOutput, Option<MemoryPath>), Error> {
    let Command::View { path, view_range } = command else {
        return execute(backend, user, settings, command, now_ms, None)
            .map(|output| (output, None));
    };
    let txn = backend.begin_read()?;
    let tree = TreeRead::new(&txn, user);
    if backend.wants_prefetch()
        && let Ok(parsed) = MemoryPath::parse(path)
    {
        let mut fetches = Vec::new();
        tree::path_fetches(user, &parsed, true, false, &mut fetches);
        fetches.push(tree::children_fetch(user, &parsed));
        fetches.extend(tree::unused_fetch(user, settings.expiry_cutoff(now_ms)));
        tree.prefetch(&fetches, false)?;
    }
    let expired = Expired::load(&tree, settings.expiry_cutoff(now_ms))?.except(used);
    let (output, viewed) = view(&tree, &settings.limits, &expired, path, *view_range)?;
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
            Ok(view(&tree.read(), &settings.limits, &none, path, *view_range)?.0)
        }
        Command::Create { path, file_text } => create(tree, settings, path, file_text, now_ms),
        Command::StrReplace {
            path,
            old_str,
            new_str,
        } => str_replace(
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
        } => insert(tree, settings, path, *insert_line, insert_text, now_ms),
        Command::Delete { path } => delete(tree, path),
        Command::Rename { old_path, new_path } => rename(tree, old_path, new_path),
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

/// Parses `raw` or returns the model-facing path error from the enclosing function.
macro_rules! parse_or_fail {
    ($raw:expr) => {
        match MemoryPath::parse($raw) {
            Ok(path) => path,
            Err(e) => return fail(messages::path_error($raw, e)),
        }
    };
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

// ---- view --------------------------------------------------------------------------------

/// `view`; also returns the file viewed, so its access time can be recorded.
fn view<T: ReadTxn + ?Sized>(
    tree: &TreeRead<'_, T>,
    limits: &Limits,
    expired: &Expired,
    raw: &str,
    range: Option<ViewRange>,
) -> Result<(ToolOutput, Option<(MemoryPath, FileMeta)>), Error> {
    let path = match MemoryPath::parse(raw) {
        Ok(path) => path,
        Err(e) => return Ok((fail(messages::path_error(raw, e))?, None)),
    };
    let node = tree.node(&path)?.and_then(|n| expired.visible(&path, n));
    match node {
        None => Ok((fail(messages::not_found_please(raw))?, None)),
        Some(Node::Dir(totals)) => Ok((ok(view_dir(tree, limits, expired, &path, totals)?)?, None)),
        Some(Node::File(meta)) => {
            let content = tree
                .content(&path)?
                .ok_or_else(|| Error::Corrupt(format!("{path} has no content")))?;
            let output = view_file(limits, raw, &content, range)?;
            Ok((output, Some((path, meta))))
        }
    }
}

fn is_hidden(name: &str) -> bool {
    name.starts_with('.') || name == "node_modules"
}

/// A directory listing's body, cut to the output budget: once a line does not fit, the rest
/// are only counted (for the truncation note), never formatted.
struct Listing {
    out: String,
    used: usize,
    budget: usize,
    shown: usize,
    total: usize,
}

impl Listing {
    fn entry(&mut self, size: u64, path: impl FnOnce() -> String) {
        self.total += 1;
        if self.shown + 1 < self.total {
            return; // already full
        }
        let line = messages::view_dir_entry(size, &path());
        let n = 1 + line.chars().count();
        if self.used + n > self.budget {
            return;
        }
        self.out.push('\n');
        self.out.push_str(&line);
        self.used += n;
        self.shown += 1;
    }
}

fn view_dir<T: ReadTxn + ?Sized>(
    tree: &TreeRead<'_, T>,
    limits: &Limits,
    expired: &Expired,
    dir: &MemoryPath,
    totals: Totals,
) -> Result<String, Error> {
    let dir_text = dir.to_string();
    let mut out = messages::view_dir_header(&dir_text);
    out.push('\n');
    out.push_str(&messages::view_dir_entry(totals.bytes, &dir_text));
    let mut listing = Listing {
        used: out.chars().count(),
        out,
        budget: limits.view_max_chars,
        shown: 0,
        total: 0,
    };
    let mut children = Vec::new();
    tree.children(dir, &mut |name, node| {
        if !is_hidden(name) {
            children.push((name.to_owned(), node));
        }
        Ok(ControlFlow::Continue(()))
    })?;
    // Each child's line, then (for directories) its own visible children: fetched at once.
    let grandchildren: Vec<Fetch> = children
        .iter()
        .filter(|(_, node)| matches!(node, Node::Dir(_)))
        .map(|(name, _)| tree::children_fetch(tree.user(), &dir.child(name)))
        .collect();
    tree.prefetch(&grandchildren, true)?;
    for (name, node) in children {
        let child_path = dir.child(&name);
        let Some(node) = expired.visible(&child_path, node) else {
            continue;
        };
        let child = || format!("{dir_text}/{name}");
        match node {
            Node::File(meta) => listing.entry(meta.size, child),
            Node::Dir(t) => {
                listing.entry(t.bytes, || format!("{}/", child()));
                tree.children(&child_path, &mut |grand, node| {
                    if is_hidden(grand) {
                        return Ok(ControlFlow::Continue(()));
                    }
                    let Some(node) = expired.visible(&child_path.child(grand), node) else {
                        return Ok(ControlFlow::Continue(()));
                    };
                    match node {
                        Node::File(meta) => {
                            listing.entry(meta.size, || format!("{}/{grand}", child()))
                        }
                        Node::Dir(t) => listing.entry(t.bytes, || format!("{}/{grand}/", child())),
                    }
                    Ok(ControlFlow::Continue(()))
                })?;
            }
        }
    }
    let mut out = listing.out;
    if listing.shown < listing.total {
        out.push_str(&messages::view_dir_truncated(listing.shown, listing.total));
    }
    Ok(out)
}

fn view_file(
    limits: &Limits,
    raw: &str,
    content: &str,
    range: Option<ViewRange>,
) -> Result<ToolOutput, Error> {
    let lines = split_lines(content);
    let n = lines.len();
    if n as u64 > limits.max_lines {
        return fail(messages::view_too_many_lines(raw, limits.max_lines));
    }
    let (start, end) = match range {
        None => (1, n),
        Some(ViewRange::Malformed) => return fail(messages::invalid_view_range(n)),
        Some(ViewRange::Lines(start, end)) => {
            let past_end = n > 0 && start > n as i64;
            if start < 1 || past_end || (end != -1 && end < start) {
                return fail(messages::invalid_view_range(n));
            }
            let end = if end == -1 {
                n
            } else {
                (end as u64).min(n as u64) as usize
            };
            (start as usize, end)
        }
    };
    let mut out = messages::view_file_header(raw);
    let mut used = out.chars().count();
    let budget = limits.view_max_chars;
    for number in start..=end {
        let line = messages::numbered_line(number, lines[number - 1]);
        let len = 1 + line.chars().count();
        if used + len > budget {
            let last = if number == start {
                // Not even the first line fits: cut it to fit.
                out.push('\n');
                out.extend(line.chars().take(budget.saturating_sub(used + 1)));
                number
            } else {
                number - 1
            };
            out.push_str(&messages::view_file_truncated(start, last, n));
            return ok(out);
        }
        out.push('\n');
        out.push_str(&line);
        used += len;
    }
    ok(out)
}

// ---- writes ------------------------------------------------------------------------------

/// PROTOCOL.md's limits, in the order of its table, for `content` written over `old` (what the
/// path held before; nothing for a new file) in a store with the totals `user`.
pub(crate) fn check_limits(
    limits: &Limits,
    content: &str,
    old: Option<FileMeta>,
    user: UserTotals,
) -> Option<Refusal> {
    let size = content.len() as u64;
    if size > limits.max_file_bytes {
        return Some(Refusal::FileTooLarge {
            size,
            limit: limits.max_file_bytes,
        });
    }
    if count_lines(content) > limits.max_lines {
        return Some(Refusal::TooManyLines {
            limit: limits.max_lines,
        });
    }
    if old.is_none() && user.files + 1 > limits.max_files {
        return Some(Refusal::QuotaFiles {
            limit: limits.max_files,
        });
    }
    let bytes_after = (user.bytes.saturating_sub(old.map_or(0, |m| m.size))).saturating_add(size);
    // A write that does not add bytes is always allowed, so that a user over a lowered quota
    // can still shrink and edit what they have.
    if bytes_after > limits.max_bytes && bytes_after > user.bytes {
        return Some(Refusal::QuotaBytes {
            limit: limits.max_bytes,
        });
    }
    None
}

/// Applies the secrets policy to content about to be written: the content to write and the
/// kinds redacted, or why it is refused.
pub(crate) fn guard(
    policy: SecretPolicy,
    content: &str,
) -> Result<(Cow<'_, str>, Vec<&'static str>), Refusal> {
    match policy {
        SecretPolicy::Off => Ok((Cow::Borrowed(content), Vec::new())),
        SecretPolicy::Reject => match secrets::find(content) {
            Some(kind) => Err(Refusal::Secret { kind }),
            None => Ok((Cow::Borrowed(content), Vec::new())),
        },
        SecretPolicy::Redact => {
            let (text, kinds) = secrets::redact(content);
            if kinds.is_empty() {
                Ok((Cow::Borrowed(content), kinds))
            } else {
                Ok((Cow::Owned(text), kinds))
            }
        }
    }
}

/// What [`store`] wrote.
struct Stored<'c> {
    content: Cow<'c, str>,
    redacted: Vec<&'static str>,
}

/// Checks `content` against the secrets policy and the limits, then writes it over the
/// existing file `old`. `Err` holds the message refusing the write.
fn store<'c, T: WriteTxn + ?Sized>(
    tree: &mut Tree<'_, T>,
    settings: &Settings,
    raw: &str,
    path: &MemoryPath,
    content: &'c str,
    old: Option<FileMeta>,
    now_ms: i64,
) -> Result<Result<Stored<'c>, String>, Error> {
    let (content, redacted) = match guard(settings.secrets, content) {
        Ok(guarded) => guarded,
        Err(why) => return Ok(Err(messages::refusal(raw, &why))),
    };
    let totals = tree.read().totals()?;
    if let Some(why) = check_limits(&settings.limits, &content, old, totals) {
        return Ok(Err(messages::refusal(raw, &why)));
    }
    let meta = FileMeta::times(old.map_or(now_ms, |m| m.created_ms), now_ms, now_ms);
    tree.write_file(path, &content, old, meta)?;
    Ok(Ok(Stored { content, redacted }))
}

fn create<T: WriteTxn + ?Sized>(
    tree: &mut Tree<'_, T>,
    settings: &Settings,
    raw: &str,
    file_text: &str,
    now_ms: i64,
) -> Result<ToolOutput, Error> {
    let path = parse_or_fail!(raw);
    if tree.read().node(&path)?.is_some() {
        return fail(messages::already_exists(raw));
    }
    if let Some(parent) = tree.read().file_ancestor(&path)? {
        return fail(messages::parent_is_file(raw, &parent.to_string()));
    }
    match store(tree, settings, raw, &path, file_text, None, now_ms)? {
        Err(message) => fail(message),
        Ok(stored) => ok(messages::with_redactions(
            messages::created(raw),
            &stored.redacted,
        )),
    }
}

/// The file at `path` with its content, or `None` when it is missing or a directory.
fn existing_file<T: WriteTxn + ?Sized>(
    tree: &Tree<'_, T>,
    path: &MemoryPath,
) -> Result<Option<(FileMeta, String)>, Error> {
    let Some(Node::File(meta)) = tree.read().node(path)? else {
        return Ok(None);
    };
    let content = tree
        .read()
        .content(path)?
        .ok_or_else(|| Error::Corrupt(format!("{path} has no content")))?;
    Ok(Some((meta, content)))
}

fn str_replace<T: WriteTxn + ?Sized>(
    tree: &mut Tree<'_, T>,
    settings: &Settings,
    raw: &str,
    old_str: &str,
    new_str: &str,
    now_ms: i64,
) -> Result<ToolOutput, Error> {
    let path = parse_or_fail!(raw);
    let Some((meta, content)) = existing_file(tree, &path)? else {
        return fail(messages::str_replace_not_found(raw));
    };
    if old_str.is_empty() {
        return fail(messages::empty_old_str());
    }
    let mut matches = content.match_indices(old_str).map(|(i, _)| i);
    let at = match (matches.next(), matches.next()) {
        (None, _) => return fail(messages::no_match(old_str, raw)),
        (Some(at), None) => at,
        (Some(first), Some(second)) => {
            let lines = match_lines(&content, [first, second].into_iter().chain(matches));
            return fail(messages::multiple_matches(old_str, &lines));
        }
    };
    let new_content = [&content[..at], new_str, &content[at + old_str.len()..]].concat();
    let stored = match store(tree, settings, raw, &path, &new_content, Some(meta), now_ms)? {
        Err(message) => return fail(message),
        Ok(stored) => stored,
    };
    // The snippet: two lines around the inserted text, in the content as stored.
    let first = 1 + content[..at].bytes().filter(|&b| b == b'\n').count();
    let inserted = new_str.strip_suffix('\n').unwrap_or(new_str);
    let last = first + inserted.bytes().filter(|&b| b == b'\n').count();
    let lines = split_lines(&stored.content);
    let from = first.saturating_sub(2).max(1);
    let to = (last + 2).min(lines.len());
    let shown = if from <= to {
        &lines[from - 1..to]
    } else {
        &[][..]
    };
    let snippet = messages::numbered_lines(from, shown.iter().copied());
    let message = messages::edited_with_snippet(&snippet);
    ok(messages::with_redactions(message, &stored.redacted))
}

/// The distinct 1-based line numbers on which the matches at `starts` (ascending) begin, with
/// how many there are in all: at most [`messages::MAX_LISTED_LINES`] are kept. One pass over
/// the content, however many matches.
fn match_lines(content: &str, starts: impl Iterator<Item = usize>) -> (Vec<usize>, usize) {
    let (mut listed, mut total) = (Vec::new(), 0);
    let (mut line, mut scanned) = (1, 0);
    let mut last = 0;
    for start in starts {
        line += content.as_bytes()[scanned..start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        scanned = start;
        if line != last {
            last = line;
            total += 1;
            if listed.len() < messages::MAX_LISTED_LINES {
                listed.push(line);
            }
        }
    }
    (listed, total)
}

fn insert<T: WriteTxn + ?Sized>(
    tree: &mut Tree<'_, T>,
    settings: &Settings,
    raw: &str,
    insert_line: i64,
    insert_text: &str,
    now_ms: i64,
) -> Result<ToolOutput, Error> {
    let path = parse_or_fail!(raw);
    let Some((meta, content)) = existing_file(tree, &path)? else {
        return fail(messages::not_found(raw));
    };
    let mut lines = split_lines(&content);
    let n = lines.len();
    if insert_line < 0 || insert_line as u64 > n as u64 {
        return fail(messages::invalid_insert_line(insert_line, n));
    }
    let text = insert_text.strip_suffix('\n').unwrap_or(insert_text);
    let at = insert_line as usize;
    lines.splice(at..at, text.split('\n'));
    let mut new_content = lines.join("\n");
    if content.is_empty() || content.ends_with('\n') {
        new_content.push('\n');
    }
    match store(tree, settings, raw, &path, &new_content, Some(meta), now_ms)? {
        Err(message) => fail(message),
        Ok(stored) => ok(messages::with_redactions(
            messages::inserted(raw),
            &stored.redacted,
        )),
    }
}

fn delete<T: WriteTxn + ?Sized>(tree: &mut Tree<'_, T>, raw: &str) -> Result<ToolOutput, Error> {
    let path = parse_or_fail!(raw);
    if path.is_root() {
        return fail(messages::cannot_delete_root());
    }
    let Some(node) = tree.read().node(&path)? else {
        return fail(messages::not_found(raw));
    };
    tree.remove(&path, node)?;
    ok(messages::deleted(raw))
}

fn rename<T: WriteTxn + ?Sized>(
    tree: &mut Tree<'_, T>,
    raw_old: &str,
    raw_new: &str,
) -> Result<ToolOutput, Error> {
    let old = parse_or_fail!(raw_old);
    let new = parse_or_fail!(raw_new);
    if old.is_root() {
        return fail(messages::cannot_rename_root());
    }
    let Some(node) = tree.read().node(&old)? else {
        return fail(messages::not_found(raw_old));
    };
    if tree.read().node(&new)?.is_some() {
        return fail(messages::destination_exists(raw_new));
    }
    if new.is_strictly_inside(&old) {
        return fail(messages::move_into_itself(raw_old));
    }
    if let Some(parent) = tree.read().file_ancestor(&new)? {
        return fail(messages::parent_is_file(raw_new, &parent.to_string()));
    }
    if let Err((moved, e)) = tree.check_move(&old, &new, node)? {
        // A path below the destination would break the path rules: name the first that does.
        let suffix = &moved.segments()[old.segments().len()..];
        return fail(messages::path_error(
            &format!("{new}/{}", suffix.join("/")),
            e,
        ));
    }
    tree.move_node(&old, &new, node)?;
    ok(messages::renamed(raw_old, raw_new))
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
