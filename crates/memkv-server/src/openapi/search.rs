//! The search route and its schemas in the OpenAPI document.

use serde_json::{Map, Value, json};

use super::stores::{ok, op, path_param, query};
use crate::app::SEARCH;

pub fn paths() -> Vec<(&'static str, Value)> {
    let mut required_q = query(
        "q",
        "The text to find (with `mode=regex`, a regular expression in ripgrep's syntax); 1 to 1,000 bytes, no line break.",
        json!({"type": "string", "minLength": 1, "maxLength": 1000}),
    );
    required_q["required"] = json!(true);
    let params = vec![
        path_param(
            "memory_store_id",
            "The store: its `memstore_…` id or memkv user id.",
        ),
        required_q,
        query(
            "mode",
            "`ranked` (the default): the memories most about `q`'s words, best first (BM25 over path and content), each with its best lines; `literal`: `q` as plain text; `regex`: a regular expression. `literal` and `regex` match line by line, as ripgrep matches.",
            json!({"type": "string", "enum": ["ranked", "literal", "regex"]}),
        ),
        query(
            "case_insensitive",
            "`literal` and `regex`: match letters of either case (Unicode simple case folding); ranked search always does.",
            json!({"type": "string", "enum": ["true", "false"]}),
        ),
        query(
            "path_prefix",
            "Only this memory (`/notes/tz.md`) or the memories below this directory (`/notes/`, whole segments).",
            json!({"type": "string", "pattern": "^/"}),
        ),
        query(
            "context",
            "Lines of context before and after each match (default 0).",
            json!({"type": "integer", "minimum": 0, "maximum": memkv::search::MAX_CONTEXT}),
        ),
        query(
            "limit",
            "The most memories (ranked, default 10) or matching lines (default 50) to answer; `more` counts those beyond.",
            json!({"type": "integer", "minimum": 1, "maximum": memkv::search::MAX_LIMIT}),
        ),
    ];
    vec![(
        SEARCH,
        json!({"get": op("memories_search", "Search a store's memories",
            "Ranked (the default): the memories most about `q`'s words, best first. Literal and regex: the lines of the store's current memories that contain `q` (or match it), in path order. Either way from one snapshot of the store. Deleted, expired and other stores' memories are never searched; versions are not searched. Reads for at most 2 s; `unsearched` counts the memories left when that ran out.",
            params, None, ok("SearchResults", "The matching lines, by memory"))}),
    )]
}

pub fn schemas() -> Map<String, Value> {
    let mut s = Map::new();
    s.insert(
        "SearchResults".into(),
        json!({"type": "object", "required": ["data", "more", "unsearched"], "additionalProperties": false,
            "properties": {
                "data": {"type": "array", "items": {"$ref": "#/components/schemas/SearchHit"}},
                "more": {"type": "integer", "minimum": 0, "description": "Matching lines beyond `limit`, not answered."},
                "unsearched": {"type": "integer", "minimum": 0, "description": "Memories not searched because the time budget ran out."}
            }}),
    );
    s.insert(
        "SearchHit".into(),
        json!({"type": "object", "required": ["path", "memory_id", "lines"], "additionalProperties": false,
            "properties": {
                "path": {"type": "string"},
                "memory_id": {"type": "string", "pattern": "^mem_[0-9a-f]{16}$"},
                "score": {"type": "number", "description": "Ranked search: the memory's BM25 score."},
                "lines": {"type": "array", "items": {
                    "type": "object", "required": ["line_number", "text", "is_match"], "additionalProperties": false,
                    "properties": {
                        "line_number": {"type": "integer", "minimum": 1},
                        "text": {"type": "string"},
                        "is_match": {"type": "boolean", "description": "`false`: a line of context."}
                    }}}
            }}),
    );
    s
}
