//! The diff of two versions' contents: line by line in unified hunks (three lines of context),
//! with the words that changed inside a changed line marked (`similar`'s inline changes).

use std::time::{Duration, Instant};

use maud::{Markup, html};
use similar::{ChangeTag, TextDiff};

/// Lines of context around each change.
const CONTEXT: usize = 3;
/// A diff of large, very different contents stops refining after this long in all (the result
/// is still a correct diff, only coarser).
const DEADLINE: Duration = Duration::from_millis(500);

/// A hunk's range as unified diffs write it: the first line (from 1; the line before, for an
/// empty range) and the count.
fn range(start: usize, end: usize) -> String {
    let count = end - start;
    let first = if count == 0 { start } else { start + 1 };
    format!("{first},{count}")
}

/// Lines added and removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Lines only in the newer content.
    pub added: usize,
    /// Lines only in the older content.
    pub removed: usize,
}

/// The unified diff of `old` to `new` as a table, and its counts.
pub fn render(old: &str, new: &str) -> (Markup, Counts) {
    let deadline = Instant::now() + DEADLINE;
    let diff = TextDiff::configure()
        .deadline(deadline)
        .diff_lines(old, new);
    let mut counts = Counts::default();
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => counts.added += 1,
            ChangeTag::Delete => counts.removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let groups = diff.grouped_ops(CONTEXT);
    let markup = html! {
        @if groups.is_empty() {
            p { "The two contents are the same." }
        } @else {
            table.diff {
                caption.visually-hidden { "Changed lines: removed lines are marked −, added lines +" }
                thead { tr {
                    th scope="col" class="num" { "Old" } th scope="col" class="num" { "New" }
                    th scope="col" { span.visually-hidden { "Change" } } th scope="col" { "Line" }
                } }
                @for group in &groups {
                    @let first = group.first().map(|op| (op.old_range().start, op.new_range().start));
                    @let last = group.last().map(|op| (op.old_range().end, op.new_range().end));
                    @if let (Some((os, ns)), Some((oe, ne))) = (first, last) {
                        tbody {
                            tr.hunk { td colspan="4" { "@@ -" (range(os, oe)) " +" (range(ns, ne)) " @@" } }
                            @for op in group {
                                @for change in diff.iter_inline_changes_deadline(op, Some(deadline)) {
                                    @let tag = change.tag();
                                    tr class=(match tag { ChangeTag::Insert => "add", ChangeTag::Delete => "del", ChangeTag::Equal => "same" }) {
                                        td.num { @if let Some(i) = change.old_index() { (i + 1) } }
                                        td.num { @if let Some(i) = change.new_index() { (i + 1) } }
                                        td.sign { (match tag { ChangeTag::Insert => "+", ChangeTag::Delete => "−", ChangeTag::Equal => " " }) }
                                        td { code {
                                            @for (emphasized, text) in change.iter_strings_lossy() {
                                                @let text = text.trim_end_matches(['\n', '\r']).to_owned();
                                                @if emphasized {
                                                    @if tag == ChangeTag::Insert { ins { (text) } } @else { del { (text) } }
                                                } @else { (text) }
                                            }
                                        } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    (markup, counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_lines_and_words_are_marked() {
        let (markup, counts) = render("a\nthe old word\nc\n", "a\nthe new word\nc\nd\n");
        let html = markup.into_string();
        assert_eq!(
            counts,
            Counts {
                added: 2,
                removed: 1
            }
        );
        assert!(html.contains("<del>old</del>"), "{html}");
        assert!(html.contains("<ins>new</ins>"), "{html}");
        assert!(html.contains("@@ -1,3 +1,4 @@"), "{html}");
        let (markup, _) = render("", "a\n");
        assert!(markup.into_string().contains("@@ -0,0 +1,1 @@"));
    }

    #[test]
    fn same_contents_say_so_and_markup_is_text() {
        let (markup, counts) = render("x", "x");
        assert_eq!(counts, Counts::default());
        assert!(markup.into_string().contains("the same"));
        let (markup, _) = render("<b>", "<script>alert(1)</script>");
        let html = markup.into_string();
        assert!(
            !html.contains("<script>") && !html.contains("<b>"),
            "{html}"
        );
    }
}
