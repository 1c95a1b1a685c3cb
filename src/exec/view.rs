//! `view`: a directory listing synthesized from key prefixes, or a file's numbered lines.

use std::ops::ControlFlow;

use super::{Expired, fail, ok, split_lines};
use crate::blocks::ToolOutput;
use crate::command::ViewRange;
use crate::error::Error;
use crate::layout::{FileMeta, Node, Totals};
use crate::limits::Limits;
use crate::messages;
use crate::path::MemoryPath;
use crate::storage::{Fetch, ReadTxn};
use crate::tree::{self, TreeRead};

/// `view`; also returns the file viewed, so its access time can be recorded.
pub(super) fn view<T: ReadTxn + ?Sized>(
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
    // Room for the lines shown, at most the budget's worth (four bytes a character at worst).
    let shown: usize = lines
        .get(start.saturating_sub(1)..end.min(n))
        .unwrap_or_default()
        .iter()
        .map(|l| l.len() + 8)
        .sum();
    out.reserve(shown.min(budget.saturating_mul(4)).saturating_add(128));
    for number in start..=end {
        let text = lines[number - 1];
        let len = 1 + messages::numbered_line_chars(number, text.chars().count());
        if used + len > budget {
            let line = messages::numbered_line(number, text);
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
        messages::push_numbered_line(&mut out, number, text);
        used += len;
    }
    ok(out)
}
