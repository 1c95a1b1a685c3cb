//! The five commands that write: `create`, `str_replace`, `insert`, `delete`, `rename`, and
//! the checks every write passes (the limits, the secrets guard).

use std::borrow::Cow;

use super::{count_lines, fail, ok, split_lines};
use crate::blocks::ToolOutput;
use crate::error::Error;
use crate::layout::{FileMeta, Node, UserTotals};
use crate::limits::{Limits, Refusal, Settings};
use crate::messages;
use crate::path::MemoryPath;
use crate::secrets::{self, SecretPolicy};
use crate::storage::WriteTxn;
use crate::tree::Tree;

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

/// What the write policy lets through: the content to write (the secrets policy may have
/// redacted it) and the kinds of secret it redacted.
pub(crate) struct Admitted<'c> {
    pub(crate) content: Cow<'c, str>,
    pub(crate) redacted: Vec<&'static str>,
}

/// The write-policy gate every write of content passes, whatever face it comes from (the
/// memory tool's commands, the memory-stores API's create and update, an import's entries):
/// the store's secrets policy, then its limits and quotas against the store's totals, `old`
/// being the file the write replaces. Each face checks first whether the store is archived
/// (what it may still do there differs: the API deletes, the tool does not) and words the
/// refusal its own way. `Err(refusal)`: nothing may be written.
pub(crate) fn admit<'c, T: WriteTxn + ?Sized>(
    tree: &Tree<'_, T>,
    settings: &Settings,
    content: &'c str,
    old: Option<FileMeta>,
) -> Result<Result<Admitted<'c>, Refusal>, Error> {
    let (content, redacted) = match guard(settings.secrets, content) {
        Ok(guarded) => guarded,
        Err(why) => return Ok(Err(why)),
    };
    let totals = tree.read().totals()?;
    if let Some(why) = check_limits(&settings.limits, &content, old, totals) {
        return Ok(Err(why));
    }
    Ok(Ok(Admitted { content, redacted }))
}

/// Writes `content` over the existing file `old` once [`admit`] lets it through. `Err` holds
/// the message refusing the write.
fn store<'c, T: WriteTxn + ?Sized>(
    tree: &mut Tree<'_, T>,
    settings: &Settings,
    raw: &str,
    path: &MemoryPath,
    content: &'c str,
    old: Option<FileMeta>,
    now_ms: i64,
) -> Result<Result<Admitted<'c>, String>, Error> {
    let admitted = match admit(tree, settings, content, old)? {
        Ok(admitted) => admitted,
        Err(why) => return Ok(Err(messages::refusal(raw, &why))),
    };
    let meta = FileMeta::times(old.map_or(now_ms, |m| m.created_ms), now_ms, now_ms);
    tree.write_file(path, &admitted.content, old, meta)?;
    Ok(Ok(admitted))
}

pub(super) fn create<T: WriteTxn + ?Sized>(
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

pub(super) fn str_replace<T: WriteTxn + ?Sized>(
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

pub(super) fn insert<T: WriteTxn + ?Sized>(
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

pub(super) fn delete<T: WriteTxn + ?Sized>(
    tree: &mut Tree<'_, T>,
    raw: &str,
) -> Result<ToolOutput, Error> {
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

pub(super) fn rename<T: WriteTxn + ?Sized>(
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
