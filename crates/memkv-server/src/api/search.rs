//! `GET /v1/memory_stores/{memory_store_id}/search` (a store key or an admin key): exact search
//! over the store's current memories ([`memkv::MemoryStore::search`]), answering the library's
//! JSON ([`memkv::SearchResults::to_json`]): `data`, one object per memory with its `path` (as
//! this API spells paths), `memory_id`, `score` (ranked) and `lines`, then `more` and
//! `unsearched`.
//!
//! `q` (required), `mode` (`ranked`, the default, `literal` or `regex`), `case_insensitive`
//! (`true`/`false`), `path_prefix` (`/notes/`, a directory, or `/notes/tz.md`, a file),
//! `context` (0 to 10) and `limit` (1 to 1,000; 10 memories ranked, 50 lines exact by
//! default). A search memkv refuses is a 400 with the library's reason.

use axum::response::Response;
use memkv::search::{SearchParams, context_message, limit_message};
use memkv::wire::SearchResultsObject;
use memkv::{Error, SearchMode, SearchRequest};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::{answer, blocking, failed, wire};
use crate::access::Reads;
use crate::error::ApiError;
use crate::params::{Params, flag};
use crate::routes::SEARCH;
use crate::spec::{ApiErrors, Beta, StorePath};

/// A search's parameters.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchQuery {
    /// The text to find (with `mode=regex`, a regular expression in ripgrep's syntax); 1 to
    /// 1,000 bytes, no line break.
    #[param(value_type = String, required = true, min_length = 1, max_length = 1000)]
    q: Option<String>,
    /// `ranked` (the default): the memories most about `q`'s words, best first (BM25 over path
    /// and content), each with its best lines; `literal`: `q` as plain text; `regex`: a regular
    /// expression. `literal` and `regex` match line by line, as ripgrep matches.
    #[param(value_type = Option<Mode>, inline)]
    mode: Option<String>,
    /// `literal` and `regex`: match letters of either case (Unicode simple case folding);
    /// ranked search always does.
    #[param(value_type = Option<bool>)]
    case_insensitive: Option<String>,
    /// Only this memory (`/notes/tz.md`) or the memories below this directory (`/notes/`,
    /// whole segments).
    #[param(pattern = "^/")]
    path_prefix: Option<String>,
    /// Lines of context before and after each match (default 0).
    #[param(value_type = Option<u32>, minimum = 0, maximum = 10)]
    context: Option<String>,
    /// The most memories (ranked, default 10) or matching lines (default 50) to answer; `more`
    /// counts those beyond.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Mode {
    Ranked,
    Literal,
    Regex,
}

/// The request's search, or why it is refused (400).
fn request(q: &SearchQuery) -> Result<SearchRequest, ApiError> {
    let query =
        q.q.as_deref()
            .ok_or_else(|| ApiError::invalid("q, the text to search for, is required"))?;
    // The query string's numbers; their ranges, the mode and the paths are the library's.
    let number = |value: Option<&str>, refused: fn(&dyn std::fmt::Debug) -> String| {
        value
            .map(|v| v.parse::<i64>().map_err(|_| ApiError::invalid(refused(&v))))
            .transpose()
    };
    // Checked in the order the route always has: the mode, the flag, the limit, the context.
    if let Some(mode) = q.mode.as_deref() {
        mode.parse::<SearchMode>()
            .map_err(|e: Error| ApiError::invalid(e.to_string()))?;
    }
    let case_insensitive = flag("case_insensitive", q.case_insensitive.as_deref())?;
    let limit = number(q.limit.as_deref(), limit_message)?;
    let context = number(q.context.as_deref(), context_message)?;
    let params = SearchParams {
        query: query.to_owned(),
        mode: q.mode.clone(),
        case_insensitive,
        path_prefix: q.path_prefix.clone(),
        context,
        limit,
    };
    params.request().map_err(ApiError::invalid)
}

/// `GET /v1/memory_stores/{memory_store_id}/search`.
#[utoipa::path(get, path = SEARCH, operation_id = "memories_search",
    summary = "Search a store's memories",
    description = "Ranked (the default): the memories most about `q`'s words, best first. Literal and regex: the lines of the store's current memories that contain `q` (or match it), in path order. Either way from one snapshot of the store; a store never written (the tool route serves every store id) has no match. Deleted, expired and other stores' memories are never searched; versions are not searched. Reads for at most 2 s; `unsearched` counts the memories left when that ran out.",
    params(StorePath, SearchQuery, Beta),
    responses((status = 200, description = "The matching lines, by memory", body = SearchResultsObject), ApiErrors))]
pub async fn search(
    Reads { id, state, .. }: Reads,
    Params(q): Params<SearchQuery>,
) -> Result<Response, ApiError> {
    let request = request(&q)?;
    // Like the tool route's `memory_search`, a store never written is an empty store:
    // no match, rather than 404.
    blocking(&state, move |store| {
        let user = store.user(&id).map_err(|_| ApiError::not_found())?;
        let id = id.as_str();
        match user.search(&request) {
            Ok(results) => Ok(answer(
                id,
                "memories.search",
                &SearchResultsObject::from(&results),
            )),
            Err(e @ Error::InvalidSearch(_)) => Err(ApiError::invalid(e.to_string())),
            Err(Error::InvalidPath { path, reason }) => Err(ApiError::invalid(format!(
                "path_prefix {:?} is not a memory path: {reason}",
                wire::api_path(&path)
            ))),
            Err(e) => Err(failed(&e, id)),
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use memkv::search::{MAX_CONTEXT, MAX_LIMIT};

    /// The documented bounds are the library's.
    #[test]
    fn the_documented_bounds_are_the_searchs() {
        let params = serde_json::to_value(SearchQuery::into_params(|| None)).unwrap();
        let bound = |name: &str, key: &str| {
            params
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == name)
                .map(|p| p["schema"][key].as_f64().unwrap())
                .unwrap()
        };
        assert_eq!(bound("context", "maximum"), MAX_CONTEXT as f64);
        assert_eq!(bound("limit", "maximum"), MAX_LIMIT as f64);
        assert_eq!(
            bound("q", "maxLength"),
            memkv::search::MAX_QUERY_BYTES as f64
        );
    }
}
