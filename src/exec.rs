//! The semantics of the six commands, written once over [`crate::storage`].
//!
//! Each command runs in one transaction: `view` in a read snapshot, every other command in a write
//! transaction that is committed only when the command succeeds. A command that ends in an error
//! is dropped uncommitted, so an error never changes stored data.

use std::ops::ControlFlow;

use crate::ToolOutput;
use crate::command::{Command, ViewRange};
use crate::error::Error;
use crate::layout::{FileMeta, Node, Totals};
use crate::limits::Limits;
use crate::messages;
use crate::path::MemoryPath;
use crate::storage::{Backend, ReadTxn, WriteTxn};
use crate::tree::{Tree, TreeRead};

/// Runs `command` for `user` in its own transaction.
pub(crate) fn execute<B: Backend + ?Sized>(
    backend: &B,
    user: &str,
    limits: &Limits,
    command: &Command,
    now_ms: i64,
) -> Result<ToolOutput, Error> {
    if let Command::View { path, view_range } = command {
        let txn = backend.begin_read()?;
        return view(&TreeRead::new(&txn, user), limits, path, *view_range);
    }
    let mut txn = backend.begin_write()?;
    let output = write(&mut Tree::new(&mut txn, user), limits, command, now_ms)?;
    if !output.is_error {
        txn.commit()?;
    }
    Ok(output)
}

/// Runs a write command inside `tree`'s transaction without committing it.
pub(crate) fn write<T: WriteTxn + ?Sized>(
    tree: &mut Tree<'_, T>,
    limits: &Limits,
    command: &Command,
    now_ms: i64,
) -> Result<ToolOutput, Error> {
    match command {
        Command::View { path, view_range } => view(&tree.read(), limits, path, *view_range),
        Command::Create { path, file_text } => create(tree, limits, path, file_text, now_ms),
        Command::StrReplace {
            path,
            old_str,
            new_str,
        } => str_replace(
            tree,
            limits,
            path,
            old_str,
            new_str.as_deref().unwrap_or(""),
            now_ms,
        ),
        Command::Insert {
            path,
            insert_line,
            insert_text,
        } => insert(tree, limits, path, *insert_line, insert_text, now_ms),
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

fn view<T: ReadTxn + ?Sized>(
    tree: &TreeRead<'_, T>,
    limits: &Limits,
    raw: &str,
    range: Option<ViewRange>,
) -> Result<ToolOutput, Error> {
    let path = parse_or_fail!(raw);
    match tree.node(&path)? {
        None => fail(messages::not_found_please(raw)),
        Some(Node::Dir(totals)) => ok(view_dir(tree, limits, &path, totals)?),
        Some(Node::File(_)) => {
            let content = tree
                .content(&path)?
                .ok_or_else(|| Error::Corrupt(format!("{path} has no content")))?;
            view_file(limits, raw, &content, range)
        }
    }
}

fn is_hidden(name: &str) -> bool {
    name.starts_with('.') || name == "node_modules"
}

fn view_dir<T: ReadTxn + ?Sized>(
    tree: &TreeRead<'_, T>,
    limits: &Limits,
    dir: &MemoryPath,
    totals: Totals,
) -> Result<String, Error> {
    let dir_text = dir.to_string();
    let mut entries = Vec::new();
    let mut subdirs = Vec::new();
    tree.children(dir, &mut |name, node| {
        if !is_hidden(name) {
            subdirs.push((entries.len(), name.to_owned(), node));
            entries.push(String::new());
        }
        Ok(ControlFlow::Continue(()))
    })?;
    // Each child's line, then (for directories) its own visible children.
    let mut lines = Vec::with_capacity(entries.len());
    for (_, name, node) in subdirs {
        let child = format!("{dir_text}/{name}");
        match node {
            Node::File(meta) => lines.push(messages::view_dir_entry(meta.size, &child)),
            Node::Dir(t) => {
                lines.push(messages::view_dir_entry(t.bytes, &format!("{child}/")));
                let child_path = dir
                    .join(&name)
                    .map_err(|e| Error::Corrupt(format!("stored name {name:?}: {e}")))?;
                tree.children(&child_path, &mut |grand, node| {
                    if !is_hidden(grand) {
                        let line = match node {
                            Node::File(meta) => {
                                messages::view_dir_entry(meta.size, &format!("{child}/{grand}"))
                            }
                            Node::Dir(t) => {
                                messages::view_dir_entry(t.bytes, &format!("{child}/{grand}/"))
                            }
                        };
                        lines.push(line);
                    }
                    Ok(ControlFlow::Continue(()))
                })?;
            }
        }
    }
    let mut out = messages::view_dir_header(&dir_text);
    out.push('\n');
    out.push_str(&messages::view_dir_entry(totals.bytes, &dir_text));
    let mut used = out.chars().count();
    let total = lines.len();
    for (shown, line) in lines.iter().enumerate() {
        let n = 1 + line.chars().count();
        if used + n > limits.view_max_chars {
            out.push_str(&messages::view_dir_truncated(shown, total));
            return Ok(out);
        }
        out.push('\n');
        out.push_str(line);
        used += n;
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

/// PROTOCOL.md's limits, in the order of its table, for `content` written at `raw`.
/// `old` is what the path held before (nothing for a new file).
fn check_limits(
    limits: &Limits,
    raw: &str,
    content: &str,
    old: Option<FileMeta>,
    user: Totals,
) -> Option<String> {
    let size = content.len() as u64;
    if size > limits.max_file_bytes {
        return Some(messages::file_too_large(raw, size, limits.max_file_bytes));
    }
    if count_lines(content) > limits.max_lines {
        return Some(messages::too_many_lines(raw, limits.max_lines));
    }
    if old.is_none() && user.files + 1 > limits.max_files {
        return Some(messages::quota_files(limits.max_files));
    }
    let bytes_after = user.bytes - old.map_or(0, |m| m.size) + size;
    if bytes_after > limits.max_bytes {
        return Some(messages::quota_bytes(limits.max_bytes));
    }
    None
}

/// Validates a write of `content` over the existing file `old` and performs it.
fn store<T: WriteTxn + ?Sized>(
    tree: &mut Tree<'_, T>,
    limits: &Limits,
    raw: &str,
    path: &MemoryPath,
    content: &str,
    old: Option<FileMeta>,
    now_ms: i64,
) -> Result<Option<String>, Error> {
    let totals = tree.read().totals()?;
    if let Some(message) = check_limits(limits, raw, content, old, totals) {
        return Ok(Some(message));
    }
    tree.write_file(path, content, old, now_ms)?;
    Ok(None)
}

fn create<T: WriteTxn + ?Sized>(
    tree: &mut Tree<'_, T>,
    limits: &Limits,
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
    match store(tree, limits, raw, &path, file_text, None, now_ms)? {
        Some(message) => fail(message),
        None => ok(messages::created(raw)),
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
    limits: &Limits,
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
    let starts: Vec<usize> = content.match_indices(old_str).map(|(i, _)| i).collect();
    let at = match starts.as_slice() {
        [] => return fail(messages::no_match(old_str, raw)),
        [at] => *at,
        _ => {
            let mut lines: Vec<usize> = starts
                .iter()
                .map(|&i| 1 + content[..i].bytes().filter(|&b| b == b'\n').count())
                .collect();
            lines.dedup();
            return fail(messages::multiple_matches(old_str, &lines));
        }
    };
    let new_content = [&content[..at], new_str, &content[at + old_str.len()..]].concat();
    if let Some(message) = store(tree, limits, raw, &path, &new_content, Some(meta), now_ms)? {
        return fail(message);
    }
    // The snippet: two lines around the inserted text, in the new content.
    let first = 1 + content[..at].bytes().filter(|&b| b == b'\n').count();
    let inserted = new_str.strip_suffix('\n').unwrap_or(new_str);
    let last = first + inserted.bytes().filter(|&b| b == b'\n').count();
    let lines = split_lines(&new_content);
    let from = first.saturating_sub(2).max(1);
    let to = (last + 2).min(lines.len());
    let shown = if from <= to {
        &lines[from - 1..to]
    } else {
        &[][..]
    };
    let snippet = messages::numbered_lines(from, shown.iter().copied());
    ok(messages::edited_with_snippet(&snippet))
}

fn insert<T: WriteTxn + ?Sized>(
    tree: &mut Tree<'_, T>,
    limits: &Limits,
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
    if let Some(message) = store(tree, limits, raw, &path, &new_content, Some(meta), now_ms)? {
        return fail(message);
    }
    ok(messages::inserted(raw))
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
