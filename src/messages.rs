//! Every string the model reads, and nothing else.
//!
//! These are the byte-exact strings of docs/protocol.md; `tests/it/golden.rs` pins each one.
//! `{path}` arguments are passed in as the model sent them unless the parameter says `canonical`.

use crate::limits::Refusal;
use crate::path::PathError;

// ---- paths -------------------------------------------------------------------------------

/// The message for a path the rules of PROTOCOL.md reject.
pub fn path_error(raw: &str, error: PathError) -> String {
    format!("Error: {}", path_reason(raw, error))
}

/// Why the rules of PROTOCOL.md reject a path, without `Error: ` (for an operator or the
/// memory-stores API).
pub fn path_reason(raw: &str, error: PathError) -> String {
    match error {
        PathError::OutsideRoot => format!("Path must start with /memories, got: {raw}"),
        PathError::DotSegment => {
            format!("Invalid path {raw}: '.' and '..' segments are not allowed")
        }
        PathError::EmptySegment => format!("Invalid path {raw}: empty path segment"),
        PathError::Separator => {
            format!("Invalid path {raw}: '\\' and encoded separators are not allowed")
        }
        PathError::ControlCharacter => {
            format!("Invalid path {raw}: control and format characters are not allowed")
        }
        PathError::TooLong => format!("Invalid path {raw}: too long"),
    }
}

// ---- view --------------------------------------------------------------------------------

/// First line of a directory listing (`dir` canonical).
pub fn view_dir_header(dir: &str) -> String {
    format!(
        "Here're the files and directories up to 2 levels deep in {dir}, excluding hidden items and node_modules:"
    )
}

/// One line of a directory listing: the size, a tab, the path (directories end with `/`).
pub fn view_dir_entry(size: u64, path: &str) -> String {
    format!("{}\t{path}", human_size(size))
}

/// The note after a directory listing cut to the output budget.
pub fn view_dir_truncated(shown: usize, total: usize) -> String {
    format!(
        "\n[Output truncated: {shown} of {total} entries shown. View a subdirectory to see the rest.]"
    )
}

/// First line of a file view.
pub fn view_file_header(path: &str) -> String {
    format!("Here's the content of {path} with line numbers:")
}

/// One numbered line, as `view` and the `str_replace` snippet print it.
pub fn numbered_line(number: usize, line: &str) -> String {
    let mut out = String::with_capacity(8 + line.len());
    push_numbered_line(&mut out, number, line);
    out
}

/// [`numbered_line`] appended to `out`: `{number:>6}\t{line}`, written without a formatter or an
/// allocation of its own (a file `view` writes one per line; `format!` was most of its time).
pub fn push_numbered_line(out: &mut String, number: usize, line: &str) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = number;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for _ in (digits.len() - at)..6 {
        out.push(' ');
    }
    for &d in &digits[at..] {
        out.push(char::from(d));
    }
    out.push('\t');
    out.push_str(line);
}

/// The characters [`numbered_line`] makes of a line of `line_chars` characters.
pub fn numbered_line_chars(number: usize, line_chars: usize) -> usize {
    let digits = number.checked_ilog10().map_or(1, |d| d as usize + 1);
    digits.max(6) + 1 + line_chars
}

/// The note after a file view cut to the output budget.
pub fn view_file_truncated(first: usize, last: usize, total: usize) -> String {
    format!(
        "\n[Output truncated: showing lines {first}-{last} of {total}. Use view_range to see other lines.]"
    )
}

/// A file with more lines than `view` numbers.
pub fn view_too_many_lines(path: &str, max_lines: u64) -> String {
    format!(
        "File {path} exceeds maximum line limit of {} lines.",
        thousands(max_lines)
    )
}

/// A `view_range` that is malformed or out of bounds.
pub fn invalid_view_range(n_lines: usize) -> String {
    format!(
        "Error: Invalid `view_range` parameter. It should be [start_line, end_line] with 1 <= start_line <= {n_lines} and end_line >= start_line or -1"
    )
}

/// `view` (and `str_replace`) of a missing path.
pub fn not_found_please(path: &str) -> String {
    format!("The path {path} does not exist. Please provide a valid path.")
}

// ---- create ------------------------------------------------------------------------------

/// `create` of a path that is already a file or a directory.
pub fn already_exists(path: &str) -> String {
    format!("Error: File {path} already exists")
}

/// A write whose parent (canonical) is a file.
pub fn parent_is_file(path: &str, parent: &str) -> String {
    format!("Error: Cannot create {path}: {parent} is a file")
}

/// `create` succeeded.
pub fn created(path: &str) -> String {
    format!("File created successfully at: {path}")
}

// ---- str_replace -------------------------------------------------------------------------

/// `str_replace` on a missing path or a directory.
pub fn str_replace_not_found(path: &str) -> String {
    format!("Error: {}", not_found_please(path))
}

/// `str_replace` with an empty `old_str`.
pub fn empty_old_str() -> String {
    "Error: old_str must not be empty".to_owned()
}

/// `old_str` does not occur.
pub fn no_match(old_str: &str, path: &str) -> String {
    format!("No replacement was performed, old_str `{old_str}` did not appear verbatim in {path}.")
}

/// `old_str` occurs more than once; `lines` are the distinct 1-based lines where matches start.
pub fn multiple_matches(old_str: &str, (lines, total): &(Vec<usize>, usize)) -> String {
    let list: Vec<String> = lines.iter().map(usize::to_string).collect();
    let mut list = list.join(", ");
    if *total > lines.len() {
        list.push_str(&more_lines(total - lines.len()));
    }
    format!(
        "No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines: {list}. Please ensure it is unique"
    )
}

/// At most this many line numbers are listed for multiple matches (PROTOCOL.md sets no bound;
/// tens of thousands of matches would make a reply of hundreds of kilobytes).
pub const MAX_LISTED_LINES: usize = 100;

/// memkv's own suffix after the [`MAX_LISTED_LINES`] listed line numbers when there are more:
/// `1, 2, …, 100 and 4,900 more`.
fn more_lines(n: usize) -> String {
    format!(" and {} more", thousands(n as u64))
}

/// `str_replace` succeeded; `snippet` is already formatted with [`numbered_line`].
pub fn edited_with_snippet(snippet: &str) -> String {
    format!(
        "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n{snippet}"
    )
}

// ---- insert ------------------------------------------------------------------------------

/// `insert`, `delete` or `rename` of a missing path (no trailing sentence).
pub fn not_found(path: &str) -> String {
    format!("Error: The path {path} does not exist")
}

/// `insert_line` outside `[0, n_lines]`.
pub fn invalid_insert_line(insert_line: i64, n_lines: usize) -> String {
    format!(
        "Error: Invalid `insert_line` parameter: {insert_line}. It should be within the range of lines of the file: [0, {n_lines}]"
    )
}

/// `insert` succeeded.
pub fn inserted(path: &str) -> String {
    format!("The file {path} has been edited.")
}

// ---- delete ------------------------------------------------------------------------------

/// `delete` of `/memories`.
pub fn cannot_delete_root() -> String {
    "Error: Cannot delete the /memories directory itself".to_owned()
}

/// `delete` succeeded.
pub fn deleted(path: &str) -> String {
    format!("Successfully deleted {path}")
}

// ---- rename ------------------------------------------------------------------------------

/// `rename` of `/memories`.
pub fn cannot_rename_root() -> String {
    "Error: Cannot rename the /memories directory itself".to_owned()
}

/// `rename` onto an existing path.
pub fn destination_exists(path: &str) -> String {
    format!("Error: The destination {path} already exists")
}

/// `rename` of a directory into itself.
pub fn move_into_itself(old_path: &str) -> String {
    format!("Error: Cannot move {old_path} into itself")
}

/// `rename` succeeded.
pub fn renamed(old_path: &str, new_path: &str) -> String {
    format!("Successfully renamed {old_path} to {new_path}")
}

// ---- limits ------------------------------------------------------------------------------

/// A refused write, as the model reads it.
pub(crate) fn refusal(path: &str, why: &Refusal) -> String {
    format!("Error: {}", refusal_reason(path, why))
}

/// A refused write, as an operator reads it (in an import's error): the model's message
/// without its `Error: ` prefix.
pub(crate) fn refusal_reason(path: &str, why: &Refusal) -> String {
    match *why {
        Refusal::FileTooLarge { size, limit } => {
            format!("File {path} would be {size} bytes, over the limit of {limit} bytes")
        }
        Refusal::TooManyLines { limit } => {
            format!(
                "File {path} would have more than {} lines",
                thousands(limit)
            )
        }
        // PROTOCOL.md's template, byte for byte, even for a limit of 1.
        Refusal::QuotaFiles { limit } => format!("Memory quota exceeded: at most {limit} files"),
        Refusal::QuotaBytes { limit } => {
            format!("Memory quota exceeded: at most {limit} bytes in total")
        }
        Refusal::Secret { kind } => format!(
            "The content appears to contain a secret ({kind}). Secrets must not be stored in memory; remove it and try again."
        ),
    }
}

// ---- malformed input ---------------------------------------------------------------------

/// `command` missing or unknown; `command_json` is the field as JSON (`null` when missing).
pub fn unknown_command(command_json: &str) -> String {
    format!("Error: Unknown command: {command_json}")
}

/// A required field missing or `null`.
pub fn missing_parameter(field: &str, command: &str) -> String {
    format!("Error: Missing required parameter `{field}` for command `{command}`")
}

/// A field of the wrong JSON type (`expected` is `string` or `integer`).
pub fn invalid_parameter(field: &str, command: &str, expected: &str) -> String {
    format!("Error: Invalid parameter `{field}` for command `{command}`: expected {expected}")
}

/// A line of a line-oriented interface that is not JSON.
pub fn invalid_json(reason: &str) -> String {
    format!("Error: Invalid JSON: {reason}")
}

// ---- secrets guard -----------------------------------------------------------------------

/// A success message, with a note when secrets were redacted from the content written.
pub fn with_redactions(message: String, kinds: &[&str]) -> String {
    if kinds.is_empty() {
        return message;
    }
    format!(
        "{message}\nNote: the content appeared to contain secrets ({}); each was replaced with [REDACTED:<kind>] before saving.",
        kinds.join(", ")
    )
}

// ---- memkv's own (not in the SDK; documented in docs/design.md) ---------------------------

/// A `tool_use` block that cannot be answered (no string `id`, say); nothing was executed.
pub fn invalid_block(reason: &str) -> String {
    format!("Error: Invalid tool_use block: {reason}")
}

/// A `tool_use` block for a tool other than `memory` (`name_json` is the name as JSON).
pub fn unknown_tool(name_json: &str) -> String {
    format!("Error: Unknown tool: {name_json}")
}

/// A write to an archived memory store (archived stores are read-only); nothing was changed.
pub fn store_archived() -> String {
    "Error: This memory store is archived and read-only; the command was not applied.".to_owned()
}

/// A write through a read-only API key (`command`: the command's name); nothing was changed.
pub fn read_only_store(command: &str) -> String {
    format!(
        "Error: This memory store is read-only for this session; the {command} command was not applied."
    )
}

/// The storage failed; the command was not applied.
pub fn storage_failure() -> String {
    "Error: The memory store failed; the command was not applied. Try again later.".to_owned()
}

// ---- formatting --------------------------------------------------------------------------

/// Sizes as PROTOCOL.md prints them: `512B`, `1.0K`, `1.5K`, `1.2M` (powers of 1,024).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["K", "M", "G", "T"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while unit + 1 < UNITS.len() && (value >= 1024.0 || format!("{value:.1}") == "1024.0") {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1}{}", UNITS[unit])
}

/// `999999` as `999,999`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Lines formatted as `view` prints them, numbered from `first`, joined by `\n`.
pub fn numbered_lines<'a>(first: usize, lines: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for (i, line) in lines.into_iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        push_numbered_line(&mut out, first + i, line);
    }
    out
}

// ---- memory_search (memkv's own tool, not part of memory_20250818: docs/search.md) ---------

/// The longest line `memory_search` shows, in Unicode scalar values; a longer one ends in ` …`.
pub const SEARCH_LINE_CHARS: usize = 500;

/// One line of a `memory_search` answer, with its line break: a matching line as
/// `{path}:{n}: {line}`, a line of context as `{path}-{n}- {line}` (ripgrep's marks).
pub fn search_line(path: &str, line_number: u64, is_match: bool, text: &str) -> String {
    let mark = if is_match { ':' } else { '-' };
    let mut shown: String = text.chars().take(SEARCH_LINE_CHARS).collect();
    if shown.len() < text.len() {
        shown.push_str(" …");
    }
    format!("{path}{mark}{line_number}{mark} {shown}\n")
}

/// A memory found by ranked search, before its best lines: `{path} (score {score})`, the BM25
/// score with two decimals, with its line break.
pub fn search_hit(path: &str, score: f32) -> String {
    format!("{path} (score {score:.2})\n")
}

/// After a ranked search's memories, when `n` more matched (beyond the limit or the character
/// cap).
pub fn search_more_memories(n: u64) -> String {
    format!(
        "\n[and {} more matching memories: narrow the search with path_prefix or more words]",
        thousands(n)
    )
}

/// Between two groups of lines that are not adjacent, when context lines are shown (as
/// ripgrep).
pub const SEARCH_GAP: &str = "--\n";

/// `memory_search` found nothing.
pub fn search_no_match(query: &str) -> String {
    format!("No memory matches {query:?}.")
}

/// After the lines shown, when `n` more matched (beyond the limit or the character cap).
pub fn search_more(n: u64) -> String {
    format!(
        "\n[and {} more matching lines: narrow the search with path_prefix or a longer query]",
        thousands(n)
    )
}

/// After the lines shown, when the time budget ran out with `n` memories not searched.
pub fn search_stopped(seconds: f64, n: u64) -> String {
    format!(
        "\n[The search stopped after {seconds} s: {} memories were not searched.]",
        thousands(n)
    )
}

/// What the model reads about `memory_search` (its definition: `crate::search::tool`).
pub const SEARCH_TOOL_DESCRIPTION: &str = "Search your memory directory (/memories) without \
opening every file. Use it before you view files when you look for something you may have noted \
(a person, a preference, a decision) and do not know which file holds it, or to find every place \
that mentions something before you change it. mode ranked (the default) answers the files most \
about the query's words, best first, each with its best lines; mode literal or regex answers \
every line that contains the text or matches the pattern. Lines are shown as \
/memories/path:line_number: line. Use the memory tool to read or change what you find.";

// Why a search is refused: the reason of `Error::InvalidSearch`, which `memory_search` answers
// after `Error: ` (`search_refused`).

/// A `memory_search` input that is not an object.
pub fn search_input_not_an_object() -> String {
    "the input must be an object with a query".into()
}

/// A `memory_search` input field the tool does not have.
pub fn search_unknown_parameter(name: &str) -> String {
    format!("unknown parameter `{name}`")
}

/// A `memory_search` input without its query.
pub fn search_missing_query() -> String {
    "`query` is missing".into()
}

/// A `memory_search` input field of the wrong type: `what` it must be.
pub fn search_field_type(field: &str, what: &str) -> String {
    format!("`{field}` must be {what}")
}

/// A `memory_search` input's `mode` that is no mode; `raw` as JSON.
pub fn search_input_mode(raw: &str) -> String {
    format!("`mode` must be ranked, literal or regex, not {raw}")
}

/// A search mode that is none of the three.
pub fn search_mode(other: &str) -> String {
    format!("the search mode must be ranked, regex or literal, not {other:?}")
}

/// An empty query.
pub fn search_query_empty() -> String {
    "the query is empty".into()
}

/// A query over `max` bytes.
pub fn search_query_too_long(len: usize, max: usize) -> String {
    format!("the query is {len} bytes; the most is {max}")
}

/// A query holding a line break.
pub fn search_query_line_break() -> String {
    "the query holds a line break; matches are within one line".into()
}

/// A limit out of range.
pub fn search_limit(limit: usize, max: usize) -> String {
    format!("the limit must be 1 to {max}, not {limit}")
}

/// A time budget over the most.
pub fn search_time_budget(max_seconds: u64) -> String {
    format!("the time budget must be at most {max_seconds} s")
}

/// Context lines out of range.
pub fn search_context(context: usize, max: usize) -> String {
    format!("the context must be 0 to {max} lines, not {context}")
}

/// A regular expression over the size limit once compiled.
pub fn search_regex_too_large(max_bytes: usize) -> String {
    format!("the regular expression is too large once compiled (the most is {max_bytes} bytes)")
}

/// A regular expression that does not parse: the `regex` crate's words.
pub fn search_regex_invalid(error: &dyn std::fmt::Display) -> String {
    format!("the regular expression is invalid: {error}")
}

/// A ranked query without a word.
#[cfg(feature = "ranked")]
pub fn search_no_words() -> String {
    "the query has no words to rank by; search it with mode literal or regex".into()
}

/// Ranked search in a build without it.
#[cfg(not(feature = "ranked"))]
pub fn search_ranked_unavailable() -> String {
    "ranked search needs memkv built with its `ranked` feature".into()
}

/// `memory_search` was refused (a bad pattern, an empty query, a bad path): the reason.
pub fn search_refused(reason: &str) -> String {
    format!("Error: {reason}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written numbering is `format!("{number:>6}\t{line}")`, character for character.
    #[test]
    fn numbered_lines_are_formats_padding() {
        let mut numbers: Vec<usize> = (0..1200).collect();
        numbers.extend([
            9_999,
            99_999,
            100_000,
            999_999,
            1_000_000,
            123_456_789,
            usize::MAX,
        ]);
        for n in numbers {
            for line in ["", "text", "ünïcödé"] {
                let want = format!("{n:>6}\t{line}");
                assert_eq!(numbered_line(n, line), want);
                assert_eq!(
                    numbered_line_chars(n, line.chars().count()),
                    want.chars().count()
                );
            }
        }
    }

    #[test]
    fn sizes() {
        let cases = [
            (0, "0B"),
            (512, "512B"),
            (1023, "1023B"),
            (1024, "1.0K"),
            (1536, "1.5K"),
            (4096, "4.0K"),
            (1024 * 1024 - 1, "1.0M"),
            (1048524, "1023.9K"),
            (1048525, "1.0M"),
            (1258291, "1.2M"),
            (1024 * 1024 * 1024, "1.0G"),
            (1024u64.pow(4), "1.0T"),
            (1024u64.pow(5), "1024.0T"),
        ];
        for (n, s) in cases {
            assert_eq!(human_size(n), s, "{n}");
        }
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(999_999), "999,999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
