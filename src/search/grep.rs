//! Exact search: the lines of each memory that a regular expression or a literal matches, as
//! `rg --hidden --no-ignore` finds them in the same tree written to a directory.
//!
//! Lines are split at `\n` (a final `\n` ends the last line, it does not start another), and a
//! match never spans a line break. Each memory's content is searched as one buffer, so a memory
//! without a match costs one pass of the regex engine's prefilter and DFA, as in ripgrep; only a
//! match found across a line break is checked again on its first line alone.

use std::ops::ControlFlow;
use std::time::Instant;

use regex::{Regex, RegexBuilder};

use super::{MAX_REGEX_BYTES, SearchHit, SearchLine, SearchMode, SearchRequest, SearchResults};
use crate::error::Error;
use crate::history::MemoryId;
use crate::layout::{self, Node};
use crate::messages;
use crate::path::MemoryPath;
use crate::pipeline::Scope;
use crate::storage::{Backend, ReadTxn, Space};
use crate::tree::TreeRead;

/// A compiled query.
#[derive(Debug)]
pub(crate) struct Matcher {
    regex: Regex,
}

impl Matcher {
    pub(crate) fn new(request: &SearchRequest) -> Result<Matcher, Error> {
        let pattern = match request.mode {
            SearchMode::Literal => regex::escape(&request.query),
            _ => request.query.clone(),
        };
        let regex = RegexBuilder::new(&pattern)
            .case_insensitive(request.case_insensitive)
            .multi_line(true)
            .size_limit(MAX_REGEX_BYTES)
            .dfa_size_limit(2 * MAX_REGEX_BYTES)
            .build()
            .map_err(|e| {
                Error::InvalidSearch(match e {
                    regex::Error::CompiledTooBig(_) => {
                        messages::search_regex_too_large(MAX_REGEX_BYTES)
                    }
                    other => messages::search_regex_invalid(&other),
                })
            })?;
        Ok(Matcher { regex })
    }

    /// The byte ranges of the lines of `text` that match, in order (without their `\n`).
    pub(crate) fn lines(&self, text: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos <= text.len() {
            let Some(m) = self.regex.find_at(text, pos) else {
                break;
            };
            // `pos` is always a line's start, so the match's line starts at or after it.
            let start = text[pos..m.start()]
                .rfind('\n')
                .map_or(pos, |i| pos + i + 1);
            if start == text.len() {
                // After the final line break: no line is there.
                break;
            }
            let end = text[m.start()..]
                .find('\n')
                .map_or(text.len(), |i| m.start() + i);
            if m.end() <= end || self.regex.is_match(&text[start..end]) {
                out.push((start, end));
            }
            pos = end + 1;
        }
        out
    }
}

/// Runs an exact search over the memories at or below `prefix`.
pub(super) fn run(
    scope: Scope<'_>,
    matcher: &Matcher,
    prefix: &MemoryPath,
    request: &SearchRequest,
) -> Result<SearchResults, Error> {
    let started = Instant::now();
    let txn = scope.engine.backend.begin_read()?;
    let tree = TreeRead::new(&txn, scope.user);
    let expired = scope.engine.expired(scope.user, &tree)?;
    let mut results = SearchResults::default();
    let mut answered = 0usize;
    let mut visit = |key: &[u8], value: &[u8]| -> Result<ControlFlow<()>, Error> {
        if started.elapsed() > request.time_budget {
            results.unsearched += 1;
            return Ok(ControlFlow::Continue(()));
        }
        let path = layout::path_of_content_key(key)?;
        if expired.contains(&path) {
            return Ok(ControlFlow::Continue(()));
        }
        let text = std::str::from_utf8(value)
            .map_err(|_| Error::Corrupt(format!("content of {path} is not UTF-8")))?;
        let found = matcher.lines(text);
        if found.is_empty() {
            return Ok(ControlFlow::Continue(()));
        }
        let room = request.limit - answered;
        if room == 0 {
            results.more += found.len() as u64;
            return Ok(ControlFlow::Continue(()));
        }
        let shown = found.len().min(room);
        results.more += (found.len() - shown) as u64;
        answered += shown;
        let memory_id = match tree.node(&path)? {
            Some(Node::File(meta)) => MemoryId(meta.memory),
            _ => return Err(Error::Corrupt(format!("{path} has content but no file"))),
        };
        results.hits.push(SearchHit {
            path: path.to_string(),
            memory_id,
            score: None,
            lines: with_context(text, &found[..shown], request.context),
        });
        Ok(ControlFlow::Continue(()))
    };
    if prefix.is_root() {
        txn.scan(Space::Contents, scope.user, &[], None, &mut visit)?;
    } else {
        let key = layout::content_key(prefix);
        if let Some(value) = txn.get(Space::Contents, scope.user, &key)?.as_deref() {
            // A file: only it.
            visit(&key, value).map(drop)?;
        } else {
            let (start, end) = layout::subtree_contents(prefix);
            txn.scan(Space::Contents, scope.user, &start, Some(&end), &mut visit)?;
        }
    }
    Ok(results)
}

/// The matching lines `found` of `text` as numbered lines, with `context` lines around each
/// (each line once, in order).
pub(super) fn with_context(
    text: &str,
    found: &[(usize, usize)],
    context: usize,
) -> Vec<SearchLine> {
    let line = |number: usize, (start, end): (usize, usize), is_match: bool| SearchLine {
        line_number: number as u64,
        text: text[start..end].to_owned(),
        is_match,
    };
    if context == 0 {
        let mut number = 1;
        let mut counted = 0;
        return found
            .iter()
            .map(|&(start, end)| {
                number += text.as_bytes()[counted..start]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count();
                counted = start;
                line(number, (start, end), true)
            })
            .collect();
    }
    // Only memories with a match get here: splitting one into lines is cheap beside the search.
    let mut bounds = Vec::new();
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' {
            bounds.push((start, i));
            start = i + 1;
        }
    }
    if start < text.len() {
        bounds.push((start, text.len()));
    }
    let matched: Vec<usize> = found
        .iter()
        .map(|&(start, _)| bounds.partition_point(|&(s, _)| s < start))
        .collect();
    let mut out = Vec::new();
    let mut next = 0; // the first line not shown yet
    for &at in &matched {
        let to = (at + context).min(bounds.len() - 1);
        let from = at.saturating_sub(context).max(next);
        for (i, &b) in bounds.iter().enumerate().take(to + 1).skip(from) {
            out.push(line(i + 1, b, matched.binary_search(&i).is_ok()));
        }
        next = next.max(to + 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(query: &str, mode: SearchMode, ci: bool) -> Matcher {
        Matcher::new(&SearchRequest::new(query, mode).case_insensitive(ci)).unwrap()
    }

    fn lines<'a>(m: &Matcher, text: &'a str) -> Vec<&'a str> {
        m.lines(text)
            .into_iter()
            .map(|(s, e)| &text[s..e])
            .collect()
    }

    #[test]
    fn lines_are_split_at_line_breaks_and_a_final_break_starts_no_line() {
        let m = matcher("x*", SearchMode::Regex, false);
        assert_eq!(lines(&m, "a\nb\n"), ["a", "b"]);
        assert_eq!(lines(&m, "a\n\nb"), ["a", "", "b"]);
        assert!(lines(&m, "").is_empty());
    }

    #[test]
    fn a_match_never_spans_a_line_break() {
        let m = matcher(r"a\sb", SearchMode::Regex, false);
        assert!(lines(&m, "xa\nb").is_empty());
        assert_eq!(lines(&m, "xa\nb\na b"), ["a b"]);
        let anchored = matcher("^b$", SearchMode::Regex, false);
        assert_eq!(lines(&anchored, "a\nb\nbb\nb"), ["b", "b"]);
    }

    #[test]
    fn literals_escape_and_case_folds() {
        let m = matcher("a.b(", SearchMode::Literal, false);
        assert_eq!(lines(&m, "axb(\na.b(\n"), ["a.b("]);
        let ci = matcher("straße", SearchMode::Literal, true);
        assert_eq!(
            lines(&ci, "STRASSE\nStraße\nSTRAẞE\n"),
            ["Straße", "STRAẞE"]
        );
    }

    #[test]
    fn context_lines_merge_and_keep_matches_marked() {
        let text = "1\n2 x\n3\n4 x\n5\n6\n7\n8 x\n9\n";
        let m = matcher("x", SearchMode::Literal, false);
        let found = m.lines(text);
        let out = with_context(text, &found, 1);
        let shown: Vec<(u64, bool)> = out.iter().map(|l| (l.line_number, l.is_match)).collect();
        assert_eq!(
            shown,
            [
                (1, false),
                (2, true),
                (3, false),
                (4, true),
                (5, false),
                (7, false),
                (8, true),
                (9, false)
            ]
        );
        let bare = with_context(text, &found, 0);
        let numbers: Vec<u64> = bare.iter().map(|l| l.line_number).collect();
        assert_eq!(numbers, [2, 4, 8]);
    }

    #[test]
    fn bad_and_huge_patterns_are_refused() {
        let bad = Matcher::new(&SearchRequest::new("a(", SearchMode::Regex));
        assert!(matches!(bad, Err(Error::InvalidSearch(m)) if m.contains("invalid")));
        let huge = Matcher::new(&SearchRequest::new(r"\w{1000}{1000}", SearchMode::Regex));
        assert!(matches!(huge, Err(Error::InvalidSearch(m)) if m.contains("too large")));
    }
}
