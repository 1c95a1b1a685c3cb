//! docs/protocol.md, held to the code.
//!
//! Every line of a ```template block of docs/protocol.md is listed in [`TEMPLATES`], with the
//! items of src/messages.rs that build it. The cases below fill each template with sample
//! values and compare it, byte for byte, with what memkv answers for the same values (through
//! the public API: `messages` is private). The tests fail when the doc has a template the table
//! lacks or the other way round, when an item of src/messages.rs is covered by no template or
//! the table names one that is gone, when a template is exercised by no case, when a limit's
//! default in the doc is not the code's, and when a filled template is not memkv's answer.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::Duration;

use memkv::protocol::{self, Message, Response};
use memkv::{
    Database, InvalidMessage, Limits, MemoryStore, SearchMode, SearchRequest, SecretPolicy,
    ToolOutput,
};
use serde_json::{Value, json};

/// The template's name in this file, its text exactly as the doc writes it (`\n` and `\t`
/// literal), and the items of src/messages.rs that build it.
type Entry = (&'static str, &'static str, &'static [&'static str]);

/// Every template of docs/protocol.md.
const TEMPLATES: &[Entry] = &[
    // Paths.
    (
        "path_outside",
        r"Error: Path must start with /memories, got: {path}",
        &["path_error", "path_reason"],
    ),
    (
        "path_dot",
        r"Error: Invalid path {path}: '.' and '..' segments are not allowed",
        &["path_error", "path_reason"],
    ),
    (
        "path_empty",
        r"Error: Invalid path {path}: empty path segment",
        &["path_error", "path_reason"],
    ),
    (
        "path_separator",
        r"Error: Invalid path {path}: '\' and encoded separators are not allowed",
        &["path_error", "path_reason"],
    ),
    (
        "path_control",
        r"Error: Invalid path {path}: control and format characters are not allowed",
        &["path_error", "path_reason"],
    ),
    (
        "path_too_long",
        r"Error: Invalid path {path}: too long",
        &["path_error", "path_reason"],
    ),
    // view.
    (
        "dir_header",
        r"Here're the files and directories up to 2 levels deep in {dir}, excluding hidden items and node_modules:",
        &["view_dir_header"],
    ),
    (
        "dir_entry",
        r"{size}\t{path}",
        &["view_dir_entry", "human_size"],
    ),
    (
        "dir_truncated",
        r"\n[Output truncated: {shown} of {total} entries shown. View a subdirectory to see the rest.]",
        &["view_dir_truncated"],
    ),
    (
        "file_header",
        r"Here's the content of {path} with line numbers:",
        &["view_file_header"],
    ),
    (
        "numbered_line",
        r"{n:>6}\t{line}",
        &["numbered_line", "numbered_lines"],
    ),
    (
        "file_truncated",
        r"\n[Output truncated: showing lines {first}-{last} of {total}. Use view_range to see other lines.]",
        &["view_file_truncated"],
    ),
    (
        "not_found_please",
        r"The path {path} does not exist. Please provide a valid path.",
        &["not_found_please"],
    ),
    (
        "view_range",
        r"Error: Invalid `view_range` parameter. It should be [start_line, end_line] with 1 <= start_line <= {n_lines} and end_line >= start_line or -1",
        &["invalid_view_range"],
    ),
    (
        "view_too_many_lines",
        r"File {path} exceeds maximum line limit of {max_lines} lines.",
        &["view_too_many_lines"],
    ),
    // create.
    (
        "created",
        r"File created successfully at: {path}",
        &["created"],
    ),
    (
        "already_exists",
        r"Error: File {path} already exists",
        &["already_exists"],
    ),
    (
        "parent_is_file",
        r"Error: Cannot create {path}: {parent} is a file",
        &["parent_is_file"],
    ),
    // str_replace.
    (
        "edited",
        r"The memory file has been edited. Here is the snippet showing the change (with line numbers):\n{snippet}",
        &["edited_with_snippet"],
    ),
    (
        "str_replace_not_found",
        r"Error: The path {path} does not exist. Please provide a valid path.",
        &["str_replace_not_found"],
    ),
    (
        "empty_old_str",
        r"Error: old_str must not be empty",
        &["empty_old_str"],
    ),
    (
        "no_match",
        r"No replacement was performed, old_str `{old_str}` did not appear verbatim in {path}.",
        &["no_match"],
    ),
    (
        "multiple_matches",
        r"No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines: {lines}. Please ensure it is unique",
        &["multiple_matches"],
    ),
    (
        "multiple_matches_more",
        r"No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines: {lines} and {more} more. Please ensure it is unique",
        &["multiple_matches", "MAX_LISTED_LINES"],
    ),
    // insert.
    (
        "inserted",
        r"The file {path} has been edited.",
        &["inserted"],
    ),
    (
        "not_found",
        r"Error: The path {path} does not exist",
        &["not_found"],
    ),
    (
        "invalid_insert_line",
        r"Error: Invalid `insert_line` parameter: {insert_line}. It should be within the range of lines of the file: [0, {n_lines}]",
        &["invalid_insert_line"],
    ),
    // delete.
    ("deleted", r"Successfully deleted {path}", &["deleted"]),
    (
        "cannot_delete_root",
        r"Error: Cannot delete the /memories directory itself",
        &["cannot_delete_root"],
    ),
    // rename.
    (
        "renamed",
        r"Successfully renamed {old_path} to {new_path}",
        &["renamed"],
    ),
    (
        "cannot_rename_root",
        r"Error: Cannot rename the /memories directory itself",
        &["cannot_rename_root"],
    ),
    (
        "rename_not_found",
        r"Error: The path {old_path} does not exist",
        &["not_found"],
    ),
    (
        "destination_exists",
        r"Error: The destination {new_path} already exists",
        &["destination_exists"],
    ),
    (
        "move_into_itself",
        r"Error: Cannot move {old_path} into itself",
        &["move_into_itself"],
    ),
    (
        "rename_parent_is_file",
        r"Error: Cannot create {new_path}: {parent} is a file",
        &["parent_is_file"],
    ),
    // Limits.
    (
        "file_too_large",
        r"Error: File {path} would be {size} bytes, over the limit of {limit} bytes",
        &["refusal", "refusal_reason"],
    ),
    (
        "too_many_lines",
        r"Error: File {path} would have more than {max_lines} lines",
        &["refusal", "refusal_reason"],
    ),
    (
        "quota_files",
        r"Error: Memory quota exceeded: at most {limit} files",
        &["refusal", "refusal_reason"],
    ),
    (
        "quota_bytes",
        r"Error: Memory quota exceeded: at most {limit} bytes in total",
        &["refusal", "refusal_reason"],
    ),
    // The secrets guard.
    (
        "secret",
        r"Error: The content appears to contain a secret ({kind}). Secrets must not be stored in memory; remove it and try again.",
        &["refusal", "refusal_reason"],
    ),
    (
        "redacted",
        r"{message}\nNote: the content appeared to contain secrets ({kinds}); each was replaced with [REDACTED:<kind>] before saving.",
        &["with_redactions"],
    ),
    // Malformed input.
    (
        "unknown_command",
        r"Error: Unknown command: {command_json}",
        &["unknown_command"],
    ),
    (
        "missing_parameter",
        r"Error: Missing required parameter `{field}` for command `{command}`",
        &["missing_parameter"],
    ),
    (
        "invalid_parameter",
        r"Error: Invalid parameter `{field}` for command `{command}`: expected {type}",
        &["invalid_parameter"],
    ),
    // Refused messages.
    (
        "invalid_json",
        r"Error: Invalid JSON: {reason}",
        &["invalid_json"],
    ),
    (
        "invalid_json_too_long",
        r"Error: Invalid JSON: the line is longer than {limit} bytes",
        &["invalid_json"],
    ),
    (
        "unknown_tool",
        r"Error: Unknown tool: {name_json}",
        &["unknown_tool"],
    ),
    (
        "block_missing",
        r"Error: Invalid tool_use block: `{field}` is missing",
        &["invalid_block"],
    ),
    (
        "block_empty_id",
        r"Error: Invalid tool_use block: `id` is empty",
        &["invalid_block"],
    ),
    (
        "block_not_a_string",
        r"Error: Invalid tool_use block: `{field}` must be a string",
        &["invalid_block"],
    ),
    (
        "block_empty_array",
        r"Error: Invalid tool_use block: an array of tool_use blocks must not be empty",
        &["invalid_block"],
    ),
    (
        "block_not_a_block",
        r"Error: Invalid tool_use block: element {i} of the array is not a tool_use block",
        &["invalid_block"],
    ),
    (
        "block_element",
        r"Error: Invalid tool_use block: element {i}: {reason}",
        &["invalid_block"],
    ),
    // Read-only stores and storage failures.
    (
        "store_archived",
        r"Error: This memory store is archived and read-only; the command was not applied.",
        &["store_archived"],
    ),
    (
        "read_only_store",
        r"Error: This memory store is read-only for this session; the {command} command was not applied.",
        &["read_only_store"],
    ),
    (
        "storage_failure",
        r"Error: The memory store failed; the command was not applied. Try again later.",
        &["storage_failure"],
    ),
    // memory_search: its definition.
    (
        "search_description",
        r"Search your memory directory (/memories) without opening every file. Use it before you view files when you look for something you may have noted (a person, a preference, a decision) and do not know which file holds it, or to find every place that mentions something before you change it. mode ranked (the default) answers the files most about the query's words, best first, each with its best lines; mode literal or regex answers every line that contains the text or matches the pattern. Lines are shown as /memories/path:line_number: line. Use the memory tool to read or change what you find.",
        &["SEARCH_TOOL_DESCRIPTION"],
    ),
    (
        "schema_query",
        r"What to find: words (ranked), the exact text (literal), or a regular expression in Rust/ripgrep syntax (regex).",
        &[],
    ),
    (
        "schema_mode",
        r"ranked (the default): the files most about the query's words; literal: lines containing the text; regex: lines matching the pattern.",
        &[],
    ),
    (
        "schema_case_insensitive",
        r"literal and regex: match letters of either case (default false; ranked always does).",
        &[],
    ),
    (
        "schema_path_prefix",
        r"Only search this file or the files below this directory, e.g. /memories/projects.",
        &[],
    ),
    (
        "schema_context",
        r"Lines to show before and after each line shown (default 0).",
        &[],
    ),
    (
        "schema_limit",
        r"The most files (ranked, default 10) or matching lines (literal and regex, default 50) to show.",
        &[],
    ),
    // memory_search: its answers.
    ("search_hit", r"{path} (score {score})\n", &["search_hit"]),
    ("search_match", r"{path}:{n}: {line}\n", &["search_line"]),
    (
        "search_context_line",
        r"{path}-{n}- {line}\n",
        &["search_line"],
    ),
    (
        "search_cut_line",
        r"{path}:{n}: {line_start} …\n",
        &["search_line", "SEARCH_LINE_CHARS"],
    ),
    ("search_gap", r"--\n", &["SEARCH_GAP"]),
    (
        "search_more_memories",
        r"\n[and {n} more matching memories: narrow the search with path_prefix or more words]",
        &["search_more_memories"],
    ),
    (
        "search_more",
        r"\n[and {n} more matching lines: narrow the search with path_prefix or a longer query]",
        &["search_more"],
    ),
    (
        "search_stopped",
        r"\n[The search stopped after {seconds} s: {n} memories were not searched.]",
        &["search_stopped"],
    ),
    (
        "search_no_match",
        r"No memory matches {quoted_query}.",
        &["search_no_match"],
    ),
    // memory_search: its refusals.
    (
        "search_not_an_object",
        r"Error: the input must be an object with a query",
        &["search_refused", "search_input_not_an_object"],
    ),
    (
        "search_unknown_parameter",
        r"Error: unknown parameter `{name}`",
        &["search_refused", "search_unknown_parameter"],
    ),
    (
        "search_missing_query",
        r"Error: `query` is missing",
        &["search_refused", "search_missing_query"],
    ),
    (
        "search_query_type",
        r"Error: `query` must be a string",
        &["search_refused", "search_field_type"],
    ),
    (
        "search_mode_type",
        r"Error: `mode` must be a string",
        &["search_refused", "search_field_type"],
    ),
    (
        "search_case_insensitive_type",
        r"Error: `case_insensitive` must be true or false",
        &["search_refused", "search_field_type"],
    ),
    (
        "search_path_prefix_type",
        r"Error: `path_prefix` must be a string",
        &["search_refused", "search_field_type"],
    ),
    (
        "search_count_type",
        r"Error: `{field}` must be a non-negative integer",
        &["search_refused", "search_field_type"],
    ),
    (
        "search_input_mode",
        r"Error: `mode` must be ranked, literal or regex, not {mode_json}",
        &["search_refused", "search_input_mode"],
    ),
    (
        "search_query_empty",
        r"Error: the query is empty",
        &["search_refused", "search_query_empty"],
    ),
    (
        "search_query_too_long",
        r"Error: the query is {len} bytes; the most is {max}",
        &["search_refused", "search_query_too_long"],
    ),
    (
        "search_query_line_break",
        r"Error: the query holds a line break; matches are within one line",
        &["search_refused", "search_query_line_break"],
    ),
    (
        "search_limit",
        r"Error: the limit must be 1 to {max}, not {limit}",
        &["search_refused", "search_limit"],
    ),
    (
        "search_context",
        r"Error: the context must be 0 to {max} lines, not {context}",
        &["search_refused", "search_context"],
    ),
    (
        "search_regex_too_large",
        r"Error: the regular expression is too large once compiled (the most is {max_bytes} bytes)",
        &["search_refused", "search_regex_too_large"],
    ),
    (
        "search_regex_invalid",
        r"Error: the regular expression is invalid: {error}",
        &["search_refused", "search_regex_invalid"],
    ),
    (
        "search_no_words",
        r"Error: the query has no words to rank by; search it with mode literal or regex",
        &["search_refused", "search_no_words"],
    ),
    (
        "search_ranked_unavailable",
        r"Error: ranked search needs memkv built with its `ranked` feature",
        &["search_refused", "search_ranked_unavailable"],
    ),
    (
        "search_time_budget",
        r"Error: the time budget must be at most {max_seconds} s",
        &["search_refused", "search_time_budget"],
    ),
    (
        "search_mode",
        r"the search mode must be ranked, regex or literal, not {quoted_mode}",
        &["search_mode"],
    ),
];

/// Templates no case of this build can reach (the other build's ranked-search answers).
fn unreachable_here() -> &'static [&'static str] {
    if cfg!(feature = "ranked") {
        &["search_ranked_unavailable"]
    } else {
        &["search_no_words", "search_hit", "search_more_memories"]
    }
}

fn read(relative: &str) -> String {
    let path = format!("{}/{relative}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The lines of the doc's ```template blocks, as written.
fn doc_templates(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in doc.lines() {
        if inside {
            if line.trim_start().starts_with("```") {
                inside = false;
            } else {
                out.push(line.to_owned());
            }
        } else if line.trim_end() == "```template" {
            inside = true;
        }
    }
    assert!(
        !inside,
        "docs/protocol.md: a ```template block is not closed"
    );
    out
}

/// The public items of src/messages.rs (`pub` or `pub(crate)` functions, constants, statics),
/// before its unit tests.
fn message_items(source: &str) -> BTreeSet<String> {
    let mut items = BTreeSet::new();
    for line in source.lines() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let Some(rest) = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|p| line.strip_prefix(p))
        else {
            continue;
        };
        let Some(rest) = ["fn ", "const ", "static "]
            .iter()
            .find_map(|p| rest.strip_prefix(p))
        else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        items.insert(name);
    }
    items
}

/// A template as written in the doc, made into the text it stands for: `\n` is a line break,
/// `\t` a tab, and every other character itself.
fn unescape(template: &str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some('n')) => {
                out.push('\n');
                chars.next();
            }
            ('\\', Some('t')) => {
                out.push('\t');
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// `template` with each `{name}` replaced by its value and each `{name:>W}` by its value
/// right-aligned in `W` columns. Every placeholder needs a value and every value a placeholder.
fn fill(template: &str, values: &[(&str, &str)]) -> Result<String, String> {
    let mut out = String::new();
    let mut used = vec![false; values.len()];
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = open
            + rest[open..]
                .find('}')
                .ok_or_else(|| format!("an unclosed `{{` in {template:?}"))?;
        let inner = &rest[open + 1..close];
        let (name, width) = match inner.split_once(":>") {
            Some((name, width)) => {
                let width = width
                    .parse::<usize>()
                    .map_err(|_| format!("a bad width in {{{inner}}}"))?;
                (name, Some(width))
            }
            None => (inner, None),
        };
        let i = values
            .iter()
            .position(|(key, _)| *key == name)
            .ok_or_else(|| format!("no value for {{{name}}}"))?;
        used[i] = true;
        let value = values[i].1;
        match width {
            Some(width) => out.push_str(&format!("{value:>width$}")),
            None => out.push_str(value),
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(format!("no placeholder {{{}}}", values[i].0));
    }
    Ok(out)
}

/// `n` with thousands separators, as the doc writes its limits.
fn separated(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn the_doc_lists_every_template_and_every_limit() {
    let doc = read("docs/protocol.md");
    let lines = doc_templates(&doc);
    let in_doc: BTreeSet<&str> = lines.iter().map(String::as_str).collect();
    let in_table: BTreeSet<&str> = TEMPLATES.iter().map(|(_, text, _)| *text).collect();
    let mut failures = Vec::new();
    for t in in_doc.difference(&in_table) {
        failures.push(format!(
            "docs/protocol.md has a template that tests/it/protocol_doc.rs does not know (a typo, \
             or a new template: add it to TEMPLATES with a case):\n    {t}"
        ));
    }
    for t in in_table.difference(&in_doc) {
        failures.push(format!(
            "docs/protocol.md lacks this template of tests/it/protocol_doc.rs's TEMPLATES (put it \
             in a ```template block, or drop it from the table):\n    {t}"
        ));
    }
    let ids: BTreeSet<&str> = TEMPLATES.iter().map(|(id, _, _)| *id).collect();
    assert_eq!(ids.len(), TEMPLATES.len(), "two templates share a name");

    // Every item of src/messages.rs builds some template, and the table names no other.
    let items = message_items(&read("src/messages.rs"));
    assert!(
        items.len() > 40,
        "src/messages.rs was not parsed: {items:?}"
    );
    let covered: BTreeSet<String> = TEMPLATES
        .iter()
        .flat_map(|(_, _, items)| items.iter().map(|s| s.to_string()))
        .collect();
    for item in items.difference(&covered) {
        failures.push(format!(
            "src/messages.rs has `{item}`, which no template of docs/protocol.md covers: add its \
             strings to the doc and to TEMPLATES here"
        ));
    }
    for item in covered.difference(&items) {
        failures.push(format!(
            "TEMPLATES names `{item}`, which src/messages.rs no longer has"
        ));
    }

    // The limits and their defaults, as the doc's tables give them.
    let d = Limits::DEFAULT;
    let limits = [
        ("max_file_bytes", separated(d.max_file_bytes)),
        ("max_lines", separated(d.max_lines)),
        ("max_files", separated(d.max_files)),
        ("max_bytes", separated(d.max_bytes)),
        ("view_max_chars", separated(d.view_max_chars as u64)),
        (
            "MAX_PATH_BYTES",
            separated(memkv::path::MAX_PATH_BYTES as u64),
        ),
        ("MAX_DEPTH", separated(memkv::path::MAX_DEPTH as u64)),
        (
            "MAX_SEGMENT_BYTES",
            separated(memkv::path::MAX_SEGMENT_BYTES as u64),
        ),
        (
            "MAX_QUERY_BYTES",
            separated(memkv::search::MAX_QUERY_BYTES as u64),
        ),
        ("MAX_LIMIT", separated(memkv::search::MAX_LIMIT as u64)),
        ("MAX_CONTEXT", separated(memkv::search::MAX_CONTEXT as u64)),
        (
            "MAX_REGEX_BYTES",
            separated(memkv::search::MAX_REGEX_BYTES as u64),
        ),
        (
            "TIME_BUDGET",
            format!("{} s", memkv::search::TIME_BUDGET.as_secs()),
        ),
    ];
    for (name, value) in limits {
        let row = format!("| `{name}` | {value} |");
        if !doc.contains(&row) {
            failures.push(format!(
                "docs/protocol.md has no table row starting `{row}` (the code's value)"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n\n"));
}

/// The doc's templates, filled, against memkv's answers.
struct Check {
    /// The template lines of docs/protocol.md, as written.
    doc: BTreeSet<String>,
    used: RefCell<BTreeSet<&'static str>>,
    failures: RefCell<Vec<String>>,
}

impl Check {
    /// The template `id` of the doc, filled with `values`.
    #[track_caller]
    fn fill(&self, id: &str, values: &[(&str, &str)]) -> String {
        let (id, text, _) = TEMPLATES
            .iter()
            .find(|(name, _, _)| *name == id)
            .unwrap_or_else(|| panic!("no template named `{id}` in TEMPLATES"));
        if self.used.borrow_mut().insert(id) && !self.doc.contains(*text) {
            self.failures.borrow_mut().push(format!(
                "template `{id}` is not in a ```template block of docs/protocol.md:\n    {text}"
            ));
        }
        fill(&unescape(text), values).unwrap_or_else(|e| panic!("template `{id}`: {e}"))
    }

    /// `got` is `want`.
    fn same(&self, what: &str, got: &str, want: &str) {
        if got != want {
            self.failures.borrow_mut().push(format!(
                "{what}:\n    memkv answers   {got:?}\n    the doc says    {want:?}"
            ));
        }
    }

    /// `out` is `want`, and an error when `is_error`.
    fn answer(&self, what: &str, out: &ToolOutput, want: &str, is_error: bool) {
        self.same(what, &out.content, want);
        if out.is_error != is_error {
            self.failures.borrow_mut().push(format!(
                "{what}: is_error is {}, not {is_error}",
                out.is_error
            ));
        }
    }

    /// `out` is the error of template `id` filled with `values`.
    #[track_caller]
    fn err(&self, out: &ToolOutput, id: &str, values: &[(&str, &str)]) {
        let want = self.fill(id, values);
        self.answer(&format!("{id} {values:?}"), out, &want, true);
    }

    /// `out` is the success of template `id` filled with `values`.
    #[track_caller]
    fn ok(&self, out: &ToolOutput, id: &str, values: &[(&str, &str)]) {
        let want = self.fill(id, values);
        self.answer(&format!("{id} {values:?}"), out, &want, false);
    }

    /// A numbered line of `view` and of a snippet.
    fn line(&self, n: usize, line: &str) -> String {
        self.fill("numbered_line", &[("n", &n.to_string()), ("line", line)])
    }
}

/// A message as text, the template it is refused with, and the template's values.
type RawCase = (
    &'static [u8],
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// A `memory_search` input, the template it is answered with, and the template's values.
type Case<'a> = (Value, &'a str, Vec<(&'a str, &'a str)>);

fn run(user: &MemoryStore<'_>, input: Value) -> ToolOutput {
    user.execute_json(&input).unwrap()
}

/// Creates `path` with `text`, which must succeed with the `created` template.
fn create(c: &Check, user: &MemoryStore<'_>, path: &str, text: &str) {
    let out = run(
        user,
        json!({"command": "create", "path": path, "file_text": text}),
    );
    c.ok(&out, "created", &[("path", path)]);
}

fn paths(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    let long = format!("/memories/{}", "a".repeat(256));
    let deep = format!("/memories{}", "/d".repeat(21));
    let cases = [
        ("path_outside", "/tmp/notes.md"),
        ("path_outside", "/memoriesX/a.md"),
        ("path_outside", ""),
        ("path_dot", "/memories/../etc/passwd"),
        ("path_dot", "/memories/%2e%2E/x"),
        ("path_empty", "/memories//a.md"),
        ("path_separator", "/memories/a\\b.md"),
        ("path_separator", "/memories/a%2Fb.md"),
        ("path_control", "/memories/a\u{202e}b.md"),
        ("path_control", "/memories/a\u{2028}"),
        ("path_too_long", &long),
        ("path_too_long", &deep),
    ];
    for (id, path) in cases {
        for input in [
            json!({"command": "view", "path": path}),
            json!({"command": "create", "path": path, "file_text": "x"}),
            json!({"command": "str_replace", "path": path, "old_str": "x"}),
            json!({"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"}),
            json!({"command": "delete", "path": path}),
        ] {
            c.err(&run(&u, input), id, &[("path", path)]);
        }
    }
    // rename: `old_path`, then `new_path`.
    c.err(
        &run(
            &u,
            json!({"command": "rename", "old_path": "/memories/../x", "new_path": "/x"}),
        ),
        "path_dot",
        &[("path", "/memories/../x")],
    );
    c.err(
        &run(
            &u,
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/x"}),
        ),
        "path_outside",
        &[("path", "/x")],
    );
}

fn view_directories(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    let entry = |size: &str, path: &str| c.fill("dir_entry", &[("size", size), ("path", path)]);
    let header = c.fill("dir_header", &[("dir", "/memories")]);
    c.answer(
        "view of an empty tree",
        &run(&u, json!({"command": "view", "path": "/memories"})),
        &[header.clone(), entry("0B", "/memories")].join("\n"),
        false,
    );
    create(c, &u, "/memories/profile.md", "Name: Dana\nLikes: tea\n");
    create(c, &u, "/memories/projects/memkv.md", &"x".repeat(1500));
    create(c, &u, "/memories/projects/old/2023.md", &"y".repeat(600));
    create(c, &u, "/memories/projects/node_modules/m.js", "q");
    create(c, &u, "/memories/.cache/x", "z");
    // `/memories/` is listed as `/memories`; `view_range` is ignored; hidden files count in
    // their directories' sizes (2,124 bytes in all).
    let want = [
        header,
        entry("2.1K", "/memories"),
        entry("22B", "/memories/profile.md"),
        entry("2.1K", "/memories/projects/"),
        entry("1.5K", "/memories/projects/memkv.md"),
        entry("600B", "/memories/projects/old/"),
    ]
    .join("\n");
    c.answer(
        "view of a directory",
        &run(
            &u,
            json!({"command": "view", "path": "/memories/", "view_range": [1, 2]}),
        ),
        &want,
        false,
    );
    let want = [
        c.fill("dir_header", &[("dir", "/memories/projects")]),
        entry("2.1K", "/memories/projects"),
        entry("1.5K", "/memories/projects/memkv.md"),
        entry("600B", "/memories/projects/old/"),
        entry("600B", "/memories/projects/old/2023.md"),
    ]
    .join("\n");
    c.answer(
        "view of a subdirectory",
        &run(
            &u,
            json!({"command": "view", "path": "/memories/projects/"}),
        ),
        &want,
        false,
    );

    // Cut to the budget: the header, the directory's line, the entries that fit, the note.
    let budget = 300;
    let db = Database::builder()
        .view_max_chars(budget)
        .in_memory()
        .unwrap();
    let u = db.user("dana").unwrap();
    for i in 0..30 {
        create(c, &u, &format!("/memories/f{i:02}.md"), "x");
    }
    let mut want = [
        c.fill("dir_header", &[("dir", "/memories")]),
        entry("30B", "/memories"),
    ]
    .join("\n");
    let mut used = want.chars().count();
    let mut shown = 0;
    for i in 0..30 {
        let line = entry("1B", &format!("/memories/f{i:02}.md"));
        if used + 1 + line.chars().count() > budget {
            break;
        }
        used += 1 + line.chars().count();
        want = format!("{want}\n{line}");
        shown += 1;
    }
    assert!(0 < shown && shown < 30);
    want.push_str(&c.fill(
        "dir_truncated",
        &[("shown", &shown.to_string()), ("total", "30")],
    ));
    c.answer(
        "view of a directory over the budget",
        &run(&u, json!({"command": "view", "path": "/memories"})),
        &want,
        false,
    );
}

fn view_files(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    create(c, &u, "/memories/profile.md", "Name: Dana\nLikes: tea\n");
    let header = c.fill("file_header", &[("path", "/memories/profile.md")]);
    c.answer(
        "view of a file",
        &run(
            &u,
            json!({"command": "view", "path": "/memories/profile.md"}),
        ),
        &[
            header.clone(),
            c.line(1, "Name: Dana"),
            c.line(2, "Likes: tea"),
        ]
        .join("\n"),
        false,
    );
    c.answer(
        "view of a file with a view_range",
        &run(
            &u,
            json!({"command": "view", "path": "/memories/profile.md", "view_range": [2, -1]}),
        ),
        &[header, c.line(2, "Likes: tea")].join("\n"),
        false,
    );
    create(c, &u, "/memories/empty.md", "");
    c.ok(
        &run(
            &u,
            json!({"command": "view", "path": "/memories/empty.md/"}),
        ),
        "file_header",
        &[("path", "/memories/empty.md/")],
    );
    for path in ["/memories/nope.md", "/memories/profile.md/x"] {
        c.err(
            &run(&u, json!({"command": "view", "path": path})),
            "not_found_please",
            &[("path", path)],
        );
    }
    for range in [json!([0, 2]), json!([3, -1]), json!([2, 1]), json!("1-2")] {
        c.err(
            &run(
                &u,
                json!({"command": "view", "path": "/memories/profile.md", "view_range": range}),
            ),
            "view_range",
            &[("n_lines", "2")],
        );
    }

    // Cut to the budget: the header, the whole lines that fit, the note.
    let budget = 100;
    let db = Database::builder()
        .view_max_chars(budget)
        .in_memory()
        .unwrap();
    let u = db.user("dana").unwrap();
    let lines: Vec<String> = (1..=10).map(|i| format!("entry {i}")).collect();
    create(c, &u, "/memories/log.md", &lines.join("\n"));
    let mut want = c.fill("file_header", &[("path", "/memories/log.md")]);
    let mut used = want.chars().count();
    let mut last = 0;
    for (i, text) in lines.iter().enumerate() {
        let line = c.line(i + 1, text);
        if used + 1 + line.chars().count() > budget {
            break;
        }
        used += 1 + line.chars().count();
        want = format!("{want}\n{line}");
        last = i + 1;
    }
    assert!(0 < last && last < 10);
    want.push_str(&c.fill(
        "file_truncated",
        &[("first", "1"), ("last", &last.to_string()), ("total", "10")],
    ));
    c.answer(
        "view of a file over the budget",
        &run(&u, json!({"command": "view", "path": "/memories/log.md"})),
        &want,
        false,
    );
}

/// The line limit, with thousands separators: a file written under a larger limit, viewed and
/// written under a smaller one.
fn line_limit(c: &Check) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memkv.redb");
    {
        let db = Database::open(&path).unwrap();
        create(
            c,
            &db.user("dana").unwrap(),
            "/memories/many.md",
            &"l\n".repeat(1001),
        );
    }
    let db = Database::builder().max_lines(1000).open(&path).unwrap();
    let u = db.user("dana").unwrap();
    c.err(
        &run(&u, json!({"command": "view", "path": "/memories/many.md"})),
        "view_too_many_lines",
        &[("path", "/memories/many.md"), ("max_lines", "1,000")],
    );
    c.err(
        &run(
            &u,
            json!({"command": "create", "path": "/memories/more.md", "file_text": "l\n".repeat(1001)}),
        ),
        "too_many_lines",
        &[("path", "/memories/more.md"), ("max_lines", "1,000")],
    );
}

fn create_errors(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    create(c, &u, "/memories/profile.md", "x");
    for path in ["/memories/profile.md", "/memories", "/memories/"] {
        c.err(
            &run(
                &u,
                json!({"command": "create", "path": path, "file_text": "y"}),
            ),
            "already_exists",
            &[("path", path)],
        );
    }
    create(c, &u, "/memories/caf\u{e9}", "x");
    for (path, parent) in [
        ("/memories/profile.md/x", "/memories/profile.md"),
        ("/memories/cafe\u{301}/x/", "/memories/caf\u{e9}"),
    ] {
        c.err(
            &run(
                &u,
                json!({"command": "create", "path": path, "file_text": "y"}),
            ),
            "parent_is_file",
            &[("path", path), ("parent", parent)],
        );
    }
}

fn str_replace(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    create(c, &u, "/memories/profile.md", "Name: Dana\nLikes: tea\n");
    create(c, &u, "/memories/d/x.md", "");
    for path in ["/memories/nope.md", "/memories/d"] {
        c.err(
            &run(
                &u,
                json!({"command": "str_replace", "path": path, "old_str": "a", "new_str": "b"}),
            ),
            "str_replace_not_found",
            &[("path", path)],
        );
    }
    c.err(
        &run(
            &u,
            json!({"command": "str_replace", "path": "/memories/profile.md", "old_str": ""}),
        ),
        "empty_old_str",
        &[],
    );
    c.err(
        &run(
            &u,
            json!({"command": "str_replace", "path": "/memories/profile.md", "old_str": "coffee", "new_str": "x"}),
        ),
        "no_match",
        &[("old_str", "coffee"), ("path", "/memories/profile.md")],
    );
    create(
        c,
        &u,
        "/memories/tea.md",
        "tea\ngreen tea\nblack tea, more tea\n",
    );
    c.err(
        &run(
            &u,
            json!({"command": "str_replace", "path": "/memories/tea.md", "old_str": "tea", "new_str": "x"}),
        ),
        "multiple_matches",
        &[("old_str", "tea"), ("lines", "1, 2, 3")],
    );
    create(c, &u, "/memories/many.md", &"a\n".repeat(1100));
    let listed: Vec<String> = (1..=100).map(|n| n.to_string()).collect();
    c.err(
        &run(
            &u,
            json!({"command": "str_replace", "path": "/memories/many.md", "old_str": "a"}),
        ),
        "multiple_matches_more",
        &[
            ("old_str", "a"),
            ("lines", &listed.join(", ")),
            ("more", "1,000"),
        ],
    );
    let snippet = [c.line(1, "Name: Dana"), c.line(2, "Likes: coffee")].join("\n");
    c.ok(
        &run(
            &u,
            json!({"command": "str_replace", "path": "/memories/profile.md", "old_str": "tea", "new_str": "coffee"}),
        ),
        "edited",
        &[("snippet", &snippet)],
    );
}

fn insert(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    create(c, &u, "/memories/profile.md", "Name: Dana\nLikes: tea\n");
    create(c, &u, "/memories/d/x.md", "");
    for path in ["/memories/nope.md", "/memories/d"] {
        c.err(
            &run(
                &u,
                json!({"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"}),
            ),
            "not_found",
            &[("path", path)],
        );
    }
    for line in [-1, 3, 99] {
        c.err(
            &run(
                &u,
                json!({"command": "insert", "path": "/memories/profile.md", "insert_line": line, "insert_text": "x"}),
            ),
            "invalid_insert_line",
            &[("insert_line", &line.to_string()), ("n_lines", "2")],
        );
    }
    c.ok(
        &run(
            &u,
            json!({"command": "insert", "path": "/memories/profile.md", "insert_line": 2, "insert_text": "Lives: Paris\n"}),
        ),
        "inserted",
        &[("path", "/memories/profile.md")],
    );
}

fn delete(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    create(c, &u, "/memories/projects/a.md", "x");
    for path in ["/memories", "/memories/"] {
        c.err(
            &run(&u, json!({"command": "delete", "path": path})),
            "cannot_delete_root",
            &[],
        );
    }
    c.err(
        &run(&u, json!({"command": "delete", "path": "/memories/nope"})),
        "not_found",
        &[("path", "/memories/nope")],
    );
    c.ok(
        &run(
            &u,
            json!({"command": "delete", "path": "/memories/projects/"}),
        ),
        "deleted",
        &[("path", "/memories/projects/")],
    );
}

fn rename(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    create(c, &u, "/memories/a/f", "1");
    create(c, &u, "/memories/a/sub/g", "22");
    create(c, &u, "/memories/file", "333");
    let rename = |old: &str, new: &str| {
        run(
            &u,
            json!({"command": "rename", "old_path": old, "new_path": new}),
        )
    };
    c.err(
        &rename("/memories/", "/memories/b"),
        "cannot_rename_root",
        &[],
    );
    c.err(
        &rename("/memories/nope", "/memories/b"),
        "rename_not_found",
        &[("old_path", "/memories/nope")],
    );
    for new in ["/memories/file", "/memories", "/memories/a"] {
        c.err(
            &rename("/memories/a", new),
            "destination_exists",
            &[("new_path", new)],
        );
    }
    c.err(
        &rename("/memories/a", "/memories/a/b"),
        "move_into_itself",
        &[("old_path", "/memories/a")],
    );
    c.err(
        &rename("/memories/a", "/memories/file/x"),
        "rename_parent_is_file",
        &[
            ("new_path", "/memories/file/x"),
            ("parent", "/memories/file"),
        ],
    );
    // A path below the moved directory would be too deep at its new place.
    let deep = format!("/memories/deep{}", "/d".repeat(18));
    create(c, &u, &format!("{deep}/f"), "x");
    let moved = format!("/memories/x/y/deep{}/f", "/d".repeat(18));
    c.err(
        &rename("/memories/deep", "/memories/x/y/deep"),
        "path_too_long",
        &[("path", &moved)],
    );
    c.ok(
        &rename("/memories/a", "/memories/z/moved"),
        "renamed",
        &[
            ("old_path", "/memories/a"),
            ("new_path", "/memories/z/moved"),
        ],
    );
}

fn limits(c: &Check) {
    let db = Database::builder()
        .max_file_bytes(10)
        .max_lines(3)
        .max_files(2)
        .max_bytes(15)
        .in_memory()
        .unwrap();
    let u = db.user("dana").unwrap();
    let write = |path: &str, text: &str| {
        run(
            &u,
            json!({"command": "create", "path": path, "file_text": text}),
        )
    };
    c.err(
        &write("/memories/a", "a\nb\nc\nd\ne\nf"),
        "file_too_large",
        &[("path", "/memories/a"), ("size", "11"), ("limit", "10")],
    );
    c.err(
        &write("/memories/a", "a\nb\nc\nd"),
        "too_many_lines",
        &[("path", "/memories/a"), ("max_lines", "3")],
    );
    create(c, &u, "/memories/a", "0123456789");
    c.err(
        &write("/memories/b", "123456"),
        "quota_bytes",
        &[("limit", "15")],
    );
    create(c, &u, "/memories/b", "12345");
    c.err(&write("/memories/c", ""), "quota_files", &[("limit", "2")]);
    // Edits are checked the same way.
    c.err(
        &run(
            &u,
            json!({"command": "insert", "path": "/memories/a", "insert_line": 0, "insert_text": "x"}),
        ),
        "file_too_large",
        &[("path", "/memories/a"), ("size", "12"), ("limit", "10")],
    );
}

fn secrets(c: &Check) {
    // A random-looking (not real) AWS access key id.
    let key = "AKIAUJZDEGXDNCF32EPF";
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    c.err(
        &run(
            &u,
            json!({"command": "create", "path": "/memories/a", "file_text": format!("id {key}\n")}),
        ),
        "secret",
        &[("kind", "AWS access key")],
    );
    let db = Database::builder()
        .secrets(SecretPolicy::Redact)
        .in_memory()
        .unwrap();
    let u = db.user("dana").unwrap();
    let created = c.fill("created", &[("path", "/memories/a")]);
    c.ok(
        &run(
            &u,
            json!({"command": "create", "path": "/memories/a", "file_text": format!("id {key}\n")}),
        ),
        "redacted",
        &[("message", &created), ("kinds", "AWS access key")],
    );
}

fn malformed_input(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    for (input, command) in [
        (json!({"path": "/memories"}), "null"),
        (json!({"command": null}), "null"),
        (json!({"command": "list"}), "\"list\""),
        (json!({"command": 7}), "7"),
        (json!({"command": ["view"]}), "[\"view\"]"),
        (json!("view"), "null"),
    ] {
        c.err(
            &run(&u, input),
            "unknown_command",
            &[("command_json", command)],
        );
    }
    for (input, field, command) in [
        (json!({"command": "view"}), "path", "view"),
        (
            json!({"command": "create", "path": "/etc/passwd"}),
            "file_text",
            "create",
        ),
        (
            json!({"command": "str_replace", "path": "/memories/a"}),
            "old_str",
            "str_replace",
        ),
        (
            json!({"command": "insert", "path": "/memories/a", "insert_text": "x"}),
            "insert_line",
            "insert",
        ),
        (json!({"command": "delete", "path": null}), "path", "delete"),
        (
            json!({"command": "rename", "new_path": "/memories/b"}),
            "old_path",
            "rename",
        ),
    ] {
        c.err(
            &run(&u, input),
            "missing_parameter",
            &[("field", field), ("command", command)],
        );
    }
    for (input, field, command, expected) in [
        (
            json!({"command": "view", "path": 3}),
            "path",
            "view",
            "string",
        ),
        (
            json!({"command": "str_replace", "path": "/memories/a", "old_str": "x", "new_str": false}),
            "new_str",
            "str_replace",
            "string",
        ),
        (
            json!({"command": "insert", "path": "/memories/a", "insert_line": "2", "insert_text": "x"}),
            "insert_line",
            "insert",
            "integer",
        ),
        (
            json!({"command": "insert", "path": "/memories/a", "insert_line": 2.0, "insert_text": "x"}),
            "insert_line",
            "insert",
            "integer",
        ),
    ] {
        c.err(
            &run(&u, input),
            "invalid_parameter",
            &[("field", field), ("command", command), ("type", expected)],
        );
    }
}

fn refused_messages(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    let refused = |text: &[u8]| match Message::parse(text) {
        Err(e) => (e.clone(), e.output()),
        Ok(m) => panic!("{m:?} was not refused"),
    };
    let (e, out) = refused(b"{\"command\": ");
    let InvalidMessage::Json(reason) = e else {
        panic!("{e:?}")
    };
    assert!(!reason.is_empty());
    c.err(&out, "invalid_json", &[("reason", &reason)]);
    c.err(
        &InvalidMessage::TooLong { limit: 1_228_864 }.output(),
        "invalid_json_too_long",
        &[("limit", "1228864")],
    );
    let cases: [RawCase; 7] = [
        (
            br#"{"type": "tool_use", "name": "memory", "input": {}}"#,
            "block_missing",
            &[("field", "id")],
        ),
        (
            br#"{"type": "tool_use", "id": "t1", "input": {}}"#,
            "block_missing",
            &[("field", "name")],
        ),
        (
            br#"{"type": "tool_use", "id": "", "name": "memory", "input": {}}"#,
            "block_empty_id",
            &[],
        ),
        (
            br#"{"type": "tool_use", "id": 7, "name": "memory", "input": {}}"#,
            "block_not_a_string",
            &[("field", "id")],
        ),
        (b"[]", "block_empty_array", &[]),
        (
            br#"[{"type": "tool_use", "id": "t1", "name": "memory", "input": {}}, {"command": "view"}]"#,
            "block_not_a_block",
            &[("i", "1")],
        ),
        (
            br#"[{"type": "tool_use", "id": "t1", "name": "memory", "input": {}}, {"type": "tool_use", "id": "t2", "name": false}]"#,
            "block_element",
            &[("i", "1"), ("reason", "`name` must be a string")],
        ),
    ];
    for (text, id, values) in cases {
        c.err(&refused(text).1, id, values);
    }
    // Another tool's block is answered in its own tool_result.
    let message = Message::from_json(
        json!({"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}),
    )
    .unwrap();
    let (response, errors) = protocol::answer(&u, message);
    assert!(errors.is_empty());
    let Response::Result(result) = response else {
        panic!("{response:?}")
    };
    assert_eq!(result.tool_use_id, "t1");
    c.err(
        &ToolOutput {
            content: result.content,
            is_error: result.is_error,
        },
        "unknown_tool",
        &[("name_json", "\"bash\"")],
    );
}

fn read_only_and_failures(c: &Check) {
    let db = Database::in_memory().unwrap();
    create(c, &db.user("dana").unwrap(), "/memories/a.md", "x");
    let reader = db.user("dana").unwrap().read_only(true);
    for (command, input) in [
        (
            "create",
            json!({"command": "create", "path": "/memories/b.md", "file_text": "x"}),
        ),
        (
            "rename",
            json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/c.md"}),
        ),
    ] {
        c.err(
            &run(&reader, input),
            "read_only_store",
            &[("command", command)],
        );
    }
    db.archive_store("dana").unwrap().unwrap();
    let u = db.user("dana").unwrap();
    for input in [
        json!({"command": "create", "path": "/memories/b.md", "file_text": "x"}),
        json!({"command": "delete", "path": "/memories/a.md"}),
    ] {
        c.err(&run(&u, input), "store_archived", &[]);
    }
    // A call left without a result is answered as a storage failure.
    let message = Message::from_json(json!({"command": "view", "path": "/memories"})).unwrap();
    let (response, errors) = message.respond(Vec::new());
    assert_eq!(errors.len(), 1);
    let Response::Output(out) = response else {
        panic!("{response:?}")
    };
    c.err(&out, "storage_failure", &[]);
}

fn search_definition(c: &Check) {
    c.same(
        "SEARCH_TOOL_DESCRIPTION",
        memkv::SEARCH_TOOL_DESCRIPTION,
        &c.fill("search_description", &[]),
    );
    let schema = memkv::search_tool_schema();
    for field in [
        "query",
        "mode",
        "case_insensitive",
        "path_prefix",
        "context",
        "limit",
    ] {
        let id = format!("schema_{field}");
        let description = schema["properties"][field]["description"]
            .as_str()
            .unwrap_or_else(|| panic!("no description of `{field}`"));
        c.same(&id, description, &c.fill(&id, &[]));
    }
}

fn search_answers(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    let tz = "/memories/notes/tz.md";
    let trips = "/memories/trips.md";
    create(
        c,
        &u,
        tz,
        "# Timezone\nThe user lives in Paris.\nTimezone: Europe/Paris\n",
    );
    create(c, &u, trips, "Rome in May\nParis in June\n");
    let search = |input: Value| u.answer_search(&input).unwrap();
    let found = |path: &str, n: u64, line: &str| {
        c.fill(
            "search_match",
            &[("path", path), ("n", &n.to_string()), ("line", line)],
        )
    };
    let context = |path: &str, n: u64, line: &str| {
        c.fill(
            "search_context_line",
            &[("path", path), ("n", &n.to_string()), ("line", line)],
        )
    };
    // The lines, each with its line break, without the last.
    let answer = |parts: &[String]| {
        let mut text = parts.concat();
        assert_eq!(text.pop(), Some('\n'));
        text
    };
    c.answer(
        "memory_search literal",
        &search(json!({"query": "Paris", "mode": "literal"})),
        &answer(&[
            found(tz, 2, "The user lives in Paris."),
            found(tz, 3, "Timezone: Europe/Paris"),
            found(trips, 2, "Paris in June"),
        ]),
        false,
    );
    c.answer(
        "memory_search regex with context",
        &search(json!({"query": "Par.s", "mode": "regex", "context": 1})),
        &answer(&[
            context(tz, 1, "# Timezone"),
            found(tz, 2, "The user lives in Paris."),
            found(tz, 3, "Timezone: Europe/Paris"),
            c.fill("search_gap", &[]),
            context(trips, 1, "Rome in May"),
            found(trips, 2, "Paris in June"),
        ]),
        false,
    );
    c.answer(
        "memory_search over its limit",
        &search(json!({"query": "paris", "mode": "literal", "case_insensitive": true, "limit": 1})),
        &(answer(&[found(tz, 2, "The user lives in Paris.")])
            + &c.fill("search_more", &[("n", "2")])),
        false,
    );
    c.ok(
        &search(json!({"query": "Berlin \"Mitte\"", "mode": "literal"})),
        "search_no_match",
        &[("quoted_query", r#""Berlin \"Mitte\"""#)],
    );
    // The time budget ran out before the first memory.
    let mut request = SearchRequest::new("Paris", SearchMode::Literal);
    request.time_budget = Duration::ZERO;
    c.answer(
        "memory_search out of time",
        &u.search_output(&request).unwrap(),
        &(c.fill("search_no_match", &[("quoted_query", "\"Paris\"")])
            + &c.fill("search_stopped", &[("seconds", "0"), ("n", "2")])),
        false,
    );
    // A long line is cut at 500 characters.
    create(c, &u, "/memories/long.md", &"z".repeat(600));
    c.answer(
        "memory_search of a long line",
        &search(json!({"query": "z", "mode": "literal", "path_prefix": "/memories/long.md"})),
        &answer(&[c.fill(
            "search_cut_line",
            &[
                ("path", "/memories/long.md"),
                ("n", "1"),
                ("line_start", &"z".repeat(500)),
            ],
        )]),
        false,
    );

    if cfg!(feature = "ranked") {
        // One memory of one word: idf ln(1 + 0.5 / 1.5) = 0.29.
        let db = Database::in_memory().unwrap();
        let u = db.user("dana").unwrap();
        create(c, &u, "/memories/x", "hi");
        let hit =
            |path: &str, score: &str| c.fill("search_hit", &[("path", path), ("score", score)]);
        c.answer(
            "memory_search ranked",
            &u.answer_search(&json!({"query": "hi"})).unwrap(),
            &answer(&[hit("/memories/x", "0.29"), found("/memories/x", 1, "hi")]),
            false,
        );
        // A shorter memory ranks first.
        create(c, &u, "/memories/y", "hi there, hi");
        c.answer(
            "memory_search ranked over its limit",
            &u.answer_search(&json!({"query": "hi", "limit": 1}))
                .unwrap(),
            &(answer(&[hit("/memories/x", "0.23"), found("/memories/x", 1, "hi")])
                + &c.fill("search_more_memories", &[("n", "1")])),
            false,
        );
    }
}

fn search_refusals(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    create(c, &u, "/memories/a.md", "hello");
    let search = |input: Value| u.answer_search(&input).unwrap();
    let unclosed = String::from("(");
    let regex_error = regex::Regex::new(&unclosed).unwrap_err().to_string();
    let long = "q".repeat(1001);
    let cases: Vec<Case> = vec![
        (json!("hello"), "search_not_an_object", vec![]),
        (
            json!({"query": "x", "glob": "*.md"}),
            "search_unknown_parameter",
            vec![("name", "glob")],
        ),
        (json!({"mode": "regex"}), "search_missing_query", vec![]),
        (json!({"query": 7}), "search_query_type", vec![]),
        (json!({"query": "x", "mode": 7}), "search_mode_type", vec![]),
        (
            json!({"query": "x", "case_insensitive": "yes"}),
            "search_case_insensitive_type",
            vec![],
        ),
        (
            json!({"query": "x", "path_prefix": ["/memories"]}),
            "search_path_prefix_type",
            vec![],
        ),
        (
            json!({"query": "x", "context": -1}),
            "search_count_type",
            vec![("field", "context")],
        ),
        (
            json!({"query": "x", "limit": "5"}),
            "search_count_type",
            vec![("field", "limit")],
        ),
        (
            json!({"query": "x", "mode": "fuzzy"}),
            "search_input_mode",
            vec![("mode_json", "\"fuzzy\"")],
        ),
        (json!({"query": ""}), "search_query_empty", vec![]),
        (
            json!({"query": long, "mode": "literal"}),
            "search_query_too_long",
            vec![("len", "1001"), ("max", "1000")],
        ),
        (
            json!({"query": "a\nb", "mode": "literal"}),
            "search_query_line_break",
            vec![],
        ),
        (
            json!({"query": "x", "mode": "literal", "limit": 0}),
            "search_limit",
            vec![("max", "1000"), ("limit", "0")],
        ),
        (
            json!({"query": "x", "mode": "literal", "limit": 1001}),
            "search_limit",
            vec![("max", "1000"), ("limit", "1001")],
        ),
        (
            json!({"query": "x", "mode": "literal", "context": 11}),
            "search_context",
            vec![("max", "10"), ("context", "11")],
        ),
        (
            json!({"query": r"\w{1000}\w{1000}\w{1000}", "mode": "regex"}),
            "search_regex_too_large",
            vec![("max_bytes", "1048576")],
        ),
        (
            json!({"query": unclosed, "mode": "regex"}),
            "search_regex_invalid",
            vec![("error", &regex_error)],
        ),
        (
            json!({"query": "x", "mode": "literal", "path_prefix": "/tmp"}),
            "path_outside",
            vec![("path", "/tmp")],
        ),
        (
            json!({"query": "x", "mode": "literal", "path_prefix": "/memories/../x"}),
            "path_dot",
            vec![("path", "/memories/../x")],
        ),
    ];
    for (input, id, values) in cases {
        c.err(&search(input), id, &values);
    }
    if cfg!(feature = "ranked") {
        c.err(&search(json!({"query": "!!! ..."})), "search_no_words", &[]);
    } else {
        c.err(
            &search(json!({"query": "hello"})),
            "search_ranked_unavailable",
            &[],
        );
    }
    // Only through the library's own search calls.
    let mut request = SearchRequest::new("hello", SearchMode::Literal);
    request.time_budget = Duration::from_secs(3);
    c.err(
        &u.search_output(&request).unwrap(),
        "search_time_budget",
        &[("max_seconds", "2")],
    );
    match "fuzzy".parse::<SearchMode>() {
        Err(memkv::Error::InvalidSearch(reason)) => c.same(
            "search_mode",
            &reason,
            &c.fill("search_mode", &[("quoted_mode", "\"fuzzy\"")]),
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_template_is_memkvs_answer() {
    let c = Check {
        doc: doc_templates(&read("docs/protocol.md"))
            .into_iter()
            .collect(),
        used: RefCell::default(),
        failures: RefCell::default(),
    };
    paths(&c);
    view_directories(&c);
    view_files(&c);
    line_limit(&c);
    create_errors(&c);
    str_replace(&c);
    insert(&c);
    delete(&c);
    rename(&c);
    limits(&c);
    secrets(&c);
    malformed_input(&c);
    refused_messages(&c);
    read_only_and_failures(&c);
    search_definition(&c);
    search_answers(&c);
    search_refusals(&c);
    let mut failures = c.failures.into_inner();
    let used = c.used.into_inner();
    for (id, text, _) in TEMPLATES {
        if !used.contains(id) && !unreachable_here().contains(id) {
            failures.push(format!(
                "template `{id}` is exercised by no case of tests/it/protocol_doc.rs:\n    {text}"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n\n"));
}
