//! The templates of docs/protocol.md, with the items of src/messages.rs that build them.

/// The template's name in this file, its text exactly as the doc writes it (`\n` and `\t`
/// literal), and the items of src/messages.rs that build it.
pub(super) type Entry = (&'static str, &'static str, &'static [&'static str]);

/// Every template of docs/protocol.md.
pub(super) const TEMPLATES: &[Entry] = &[
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
        &[
            "numbered_line",
            "numbered_lines",
            "push_numbered_line",
            "numbered_line_chars",
        ],
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
