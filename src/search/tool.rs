//! `memory_search`, memkv's second tool for the model: its definition (name, description, input
//! schema) and its answer, for every face that offers it (MCP, the HTTP server, the SDK
//! adapters). It is memkv's own, not part of `memory_20250818`; docs/search.md documents it.

use serde_json::{Value, json};

use super::{MAX_CONTEXT, MAX_LIMIT, SearchMode, SearchRequest, SearchResults};
use crate::blocks::ToolOutput;
use crate::error::Error;
use crate::messages;

/// The tool's name.
pub const SEARCH_TOOL_NAME: &str = "memory_search";

/// What the model reads about the tool.
pub const SEARCH_TOOL_DESCRIPTION: &str = messages::SEARCH_TOOL_DESCRIPTION;

/// The tool's input schema (JSON Schema), as a tool definition carries it.
pub fn search_tool_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What to find: words (ranked), the exact text (literal), or a regular expression in Rust/ripgrep syntax (regex)."
            },
            "mode": {
                "type": "string",
                "enum": ["ranked", "literal", "regex"],
                "description": "ranked (the default): the files most about the query's words; literal: lines containing the text; regex: lines matching the pattern."
            },
            "case_insensitive": {
                "type": "boolean",
                "description": "literal and regex: match letters of either case (default false; ranked always does)."
            },
            "path_prefix": {
                "type": "string",
                "description": "Only search this file or the files below this directory, e.g. /memories/projects."
            },
            "context": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_CONTEXT,
                "description": "Lines to show before and after each line shown (default 0)."
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "description": "The most files (ranked, default 10) or matching lines (literal and regex, default 50) to show."
            }
        },
        "required": ["query"],
        "additionalProperties": false
    })
}

/// The search a `memory_search` input asks for, or why it is refused (in the model's words).
/// The fields are the schema's ([`search_tool_schema`]); no other is accepted.
pub fn search_request(input: &Value) -> Result<SearchRequest, String> {
    let Some(fields) = input.as_object() else {
        return Err(messages::search_input_not_an_object());
    };
    let schema = search_tool_schema();
    if let Some(unknown) = fields
        .keys()
        .find(|k| schema["properties"].get(k.as_str()).is_none())
    {
        return Err(messages::search_unknown_parameter(unknown));
    }
    let wrong = |field: &str, what: &str| messages::search_field_type(field, what);
    let query = match fields.get("query") {
        Some(Value::String(q)) => q.clone(),
        Some(_) => return Err(wrong("query", "a string")),
        None => return Err(messages::search_missing_query()),
    };
    let mode = match fields.get("mode") {
        None | Some(Value::Null) => SearchMode::Ranked,
        Some(Value::String(m)) => m
            .parse()
            .map_err(|_| messages::search_input_mode(&Value::String(m.clone()).to_string()))?,
        Some(_) => return Err(wrong("mode", "a string")),
    };
    let mut request = SearchRequest::new(query, mode);
    match fields.get("case_insensitive") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => request.case_insensitive = *b,
        Some(_) => return Err(wrong("case_insensitive", "true or false")),
    }
    match fields.get("path_prefix") {
        None | Some(Value::Null) => {}
        Some(Value::String(p)) => request.path_prefix = Some(p.clone()),
        Some(_) => return Err(wrong("path_prefix", "a string")),
    }
    let count = |name: &str, default: usize| match fields.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| wrong(name, "a non-negative integer")),
    };
    request.context = count("context", request.context)?;
    request.limit = count("limit", request.limit)?;
    Ok(request)
}

/// The answer of `memory_search` to `request`, given what the search returned (see
/// [`crate::MemoryStore::answer_search`]): the matches as the model reads them, or an error
/// output for a refused search. `Err` is a storage failure.
pub(crate) fn output(
    request: &SearchRequest,
    outcome: Result<SearchResults, Error>,
    max_chars: usize,
) -> Result<ToolOutput, Error> {
    let refused = |reason: &str| ToolOutput {
        content: messages::search_refused(reason),
        is_error: true,
    };
    match outcome {
        Ok(results) => Ok(ToolOutput {
            content: text(
                &request.query,
                &results,
                request.context > 0,
                max_chars,
                request.time_budget,
            ),
            is_error: false,
        }),
        Err(Error::InvalidSearch(reason)) => Ok(refused(&reason)),
        Err(Error::InvalidPath { path, reason }) => {
            Ok(refused(&messages::path_reason(&path, reason)))
        }
        Err(e) => Err(e),
    }
}

/// The error output of an input [`search_request`] refused.
pub(crate) fn refused_input(reason: &str) -> ToolOutput {
    ToolOutput {
        content: messages::search_refused(reason),
        is_error: true,
    }
}

/// The answer's text: the memories of `results` (ranked: each after its `path (score …)`
/// line) and their lines (`--` between groups when `context`), at most `max_chars` (as
/// `view`), then what was left out.
fn text(
    query: &str,
    results: &SearchResults,
    context: bool,
    max_chars: usize,
    budget: std::time::Duration,
) -> String {
    let mut out = String::new();
    let mut chars = 0;
    let mut left_out = results.more;
    let mut previous: Option<(&str, u64)> = None;
    let ranked = results.hits.iter().any(|h| h.score.is_some());
    'hits: for (h, hit) in results.hits.iter().enumerate() {
        if let Some(score) = hit.score {
            let header = messages::search_hit(&hit.path, score);
            let size = header.chars().count();
            if chars + size > max_chars && !out.is_empty() {
                left_out += (results.hits.len() - h) as u64;
                break;
            }
            chars += size;
            out.push_str(&header);
            previous = None;
        }
        for (l, line) in hit.lines.iter().enumerate() {
            let gap = context
                && previous.is_some_and(|(p, n)| p != hit.path || n + 1 != line.line_number);
            let mut entry = if gap {
                messages::SEARCH_GAP.to_owned()
            } else {
                String::new()
            };
            entry.push_str(&messages::search_line(
                &hit.path,
                line.line_number,
                line.is_match,
                &line.text,
            ));
            let size = entry.chars().count();
            if chars + size > max_chars && !out.is_empty() {
                // What is left out is counted: the memories after this one (ranked), or this
                // line's and every later line's matches.
                left_out += if ranked {
                    (results.hits.len() - h - 1) as u64
                } else {
                    results.hits[h..]
                        .iter()
                        .enumerate()
                        .flat_map(|(i, hit)| hit.lines.iter().skip(if i == 0 { l } else { 0 }))
                        .filter(|line| line.is_match)
                        .count() as u64
                };
                break 'hits;
            }
            chars += size;
            out.push_str(&entry);
            previous = Some((&hit.path, line.line_number));
        }
    }
    if out.is_empty() {
        out = messages::search_no_match(query);
    } else {
        out.pop();
    }
    if left_out > 0 {
        out.push_str(&if ranked {
            messages::search_more_memories(left_out)
        } else {
            messages::search_more(left_out)
        });
    }
    if results.unsearched > 0 {
        out.push_str(&messages::search_stopped(
            budget.as_secs_f64(),
            results.unsearched,
        ));
    }
    out
}
