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

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use memkv::search::{MAX_CONTEXT, MAX_LIMIT};
use memkv::{Error, SearchMode, SearchRequest};

use super::{Query, answer, failed, on_store, respond, scoped, store_id, wire};
use crate::AppState;
use crate::error::ApiError;

/// The request's search, or why it is refused (400).
fn request(q: &Query) -> Result<SearchRequest, ApiError> {
    let query = q
        .get("q")
        .ok_or_else(|| ApiError::invalid("q, the text to search for, is required"))?;
    let mode = match q.get("mode") {
        None => SearchMode::Ranked,
        Some(m) => m
            .parse()
            .map_err(|e: Error| ApiError::invalid(e.to_string()))?,
    };
    let mut request = SearchRequest::new(query, mode)
        .case_insensitive(q.flag("case_insensitive")?.unwrap_or(false))
        .limit(q.limit_within(SearchRequest::default_limit(mode), MAX_LIMIT)?);
    if let Some(context) = q.get("context") {
        request.context = context
            .parse::<usize>()
            .ok()
            .filter(|n| *n <= MAX_CONTEXT)
            .ok_or_else(|| {
                ApiError::invalid(format!(
                    "context must be an integer from 0 to {MAX_CONTEXT}, not {context:?}"
                ))
            })?;
    }
    if let Some(prefix) = q.get("path_prefix") {
        let model = if prefix.ends_with('/') {
            wire::model_dir(prefix)
        } else {
            wire::model_path(prefix)
        };
        request.path_prefix = Some(model.ok_or_else(|| {
            ApiError::invalid(format!("path_prefix must start with /, not {prefix:?}"))
        })?);
    }
    Ok(request)
}

/// `GET /v1/memory_stores/{memory_store_id}/search`.
pub async fn search(
    State(state): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    respond(
        async {
            let id = store_id(id)?;
            let caller = scoped(&state, &headers, &id)?;
            let request = request(&Query::of(&uri))?;
            on_store(&state, &id, caller, move |user, id| {
                match user.search(&request) {
                    Ok(results) => Ok(answer(id, "memories.search", &results.to_json())),
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
        .await,
    )
}
