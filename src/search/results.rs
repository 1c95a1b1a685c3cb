//! What a search found ([`SearchResults`]), and its JSON as the HTTP server answers it and
//! `memkv search --json` prints it ([`SearchResultsObject`]).

use serde::Serialize;

use crate::history::MemoryId;

/// What a search found.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct SearchResults {
    /// The memories with matches, in path order, each with its lines.
    pub hits: Vec<SearchHit>,
    /// Matching lines (ranked: memories) beyond the limit, not in `hits`.
    pub more: u64,
    /// Memories not searched because the time budget ran out (0 when all were).
    pub unsearched: u64,
}

impl SearchResults {
    /// Matching lines answered (context lines not counted).
    pub fn matching_lines(&self) -> usize {
        self.hits
            .iter()
            .map(|h| h.lines.iter().filter(|l| l.is_match).count())
            .sum()
    }

    /// The JSON the HTTP server answers and `memkv search --json` prints: `data`, one object per
    /// memory (`path` as the memory-stores API spells it, `memory_id`, `score` for ranked search,
    /// `lines` with `line_number`, `text`, `is_match`), then `more` and `unsearched`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(SearchResultsObject::from(self)).expect("search results serialize")
    }
}

/// One memory with matches.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SearchHit {
    /// Its path, `/memories/…`.
    pub path: String,
    /// Its id.
    pub memory_id: MemoryId,
    /// Its BM25 score (ranked search only).
    pub score: Option<f32>,
    /// Its matching lines (ranked: its best lines) with their context, in order.
    pub lines: Vec<SearchLine>,
}

/// One line of a memory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SearchLine {
    /// Its number, from 1.
    pub line_number: u64,
    /// The line, without its line break.
    pub text: String,
    /// A matching line (`false`: a line of context).
    pub is_match: bool,
}

/// What a search found, as the HTTP server answers it and `memkv search --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = SearchResults))]
#[serde(deny_unknown_fields)]
pub struct SearchResultsObject {
    /// The memories with matches, each with its lines.
    pub data: Vec<SearchHitObject>,
    /// Matching lines (ranked: memories) beyond `limit`, not answered.
    pub more: u64,
    /// Memories not searched because the time budget ran out.
    pub unsearched: u64,
}

/// One memory with matches.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = SearchHit))]
#[serde(deny_unknown_fields)]
pub struct SearchHitObject {
    /// Its path, relative to the store's root.
    pub path: String,
    /// Its id.
    #[cfg_attr(feature = "openapi", schema(pattern = "^mem_[0-9a-f]{16}$"))]
    pub memory_id: String,
    /// Ranked search: the memory's BM25 score.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub score: Option<f64>,
    /// Its matching lines (ranked: its best lines) with their context, in order.
    pub lines: Vec<SearchLineObject>,
}

/// One line of a memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = SearchLine))]
#[serde(deny_unknown_fields)]
pub struct SearchLineObject {
    /// Its number, from 1.
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub line_number: u64,
    /// Its text, without the line break.
    pub text: String,
    /// `false`: a line of context.
    pub is_match: bool,
}

impl From<&SearchResults> for SearchResultsObject {
    fn from(results: &SearchResults) -> Self {
        SearchResultsObject {
            data: results.hits.iter().map(SearchHitObject::from).collect(),
            more: results.more,
            unsearched: results.unsearched,
        }
    }
}

impl From<&SearchHit> for SearchHitObject {
    fn from(hit: &SearchHit) -> Self {
        SearchHitObject {
            path: crate::path::api_path(&hit.path),
            memory_id: hit.memory_id.to_string(),
            // The f32's own shortest decimal (not the f64 it widens to).
            score: hit
                .score
                .map(|s| s.to_string().parse().unwrap_or(f64::from(s))),
            lines: hit.lines.iter().map(SearchLineObject::from).collect(),
        }
    }
}

impl From<&SearchLine> for SearchLineObject {
    fn from(line: &SearchLine) -> Self {
        SearchLineObject {
            line_number: line.line_number,
            text: line.text.clone(),
            is_match: line.is_match,
        }
    }
}
