//! `/v1/memory_stores/{memory_store_id}/memory_versions[/{memory_version_id}[/redact]]`: the
//! store's history, oldest first, and redaction. Every change to a memory, through this API or
//! the memory tool, is a version; versions outlive their memory.

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use memkv::{Actor, MemoryId, Operation, Page, VersionFilter};

use utoipa::IntoParams;

use super::objects::{MemoryVersionObject, MemoryVersionPage, Operation as VersionOperation};
use super::{
    Query, answer, failed, ids, on_store, refused, respond, scoped, scoped_write, store_id,
};
use crate::AppState;
use crate::error::ApiError;
use crate::routes::{REDACT, VERSION, VERSIONS};
use crate::spec::{ApiErrors, Beta, Paging, StorePath, VersionPath, ViewBasic, ViewFull};

/// The filters of the version listing.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct VersionQuery {
    /// Only this memory's versions (`mem_…`), deleted or not.
    memory_id: Option<String>,
    /// Only this kind of change.
    #[param(inline)]
    operation: Option<VersionOperation>,
    /// Only changes made with this key (`key_…`).
    api_key_id: Option<String>,
    /// Only changes made by this session.
    session_id: Option<String>,
    /// Only changes made by this service account (memkv has none: no version matches).
    service_account_id: Option<String>,
    /// Only versions written at or after this time.
    #[param(rename = "created_at[gte]", format = DateTime)]
    created_gte: Option<String>,
    /// Only versions written at or before this time.
    #[param(rename = "created_at[lte]", format = DateTime)]
    created_lte: Option<String>,
}

/// The filter of a version listing; `None` when no version can match (a service account, or
/// two different authors).
fn filter(q: &Query) -> Result<Option<VersionFilter>, ApiError> {
    let memory = q
        .get("memory_id")
        .map(|m| {
            m.parse::<MemoryId>().map_err(|_| {
                ApiError::invalid(format!("memory_id must be a memory id (mem_…), not {m:?}"))
            })
        })
        .transpose()?;
    let operation = match q.get("operation") {
        None => None,
        Some("created") => Some(Operation::Created),
        Some("modified") => Some(Operation::Modified),
        Some("deleted") => Some(Operation::Deleted),
        Some(o) => {
            return Err(ApiError::invalid(format!(
                "operation must be created, modified or deleted, not {o:?}"
            )));
        }
    };
    let created_gte_ms = q.time("created_at[gte]")?;
    let created_lte_ms = q.time("created_at[lte]")?;
    let authors: Vec<Actor> = [
        q.get("api_key_id").map(|k| Actor::ApiKey(k.to_owned())),
        q.get("session_id").map(|s| Actor::Session(s.to_owned())),
    ]
    .into_iter()
    .flatten()
    .collect();
    // memkv records no service accounts: nothing was written by one.
    if q.get("service_account_id").is_some() || authors.len() > 1 {
        return Ok(None);
    }
    Ok(Some(VersionFilter {
        memory,
        operation,
        actor: authors.into_iter().next(),
        created_gte_ms,
        created_lte_ms,
    }))
}

/// `GET /v1/memory_stores/{memory_store_id}/memory_versions`: oldest first; filters
/// `memory_id` (a deleted memory's too), `operation`, `api_key_id`, `session_id`,
/// `service_account_id`, `created_at[gte]`, `created_at[lte]`; `limit`, `page`, `view`
/// (defaults to `basic`).
#[utoipa::path(get, path = VERSIONS, operation_id = "memory_versions_list",
    summary = "List memory versions",
    description = "Oldest first. Every change to a memory, through this API or the memory tool, is a version; a deleted memory's versions stay.",
    params(StorePath, VersionQuery, Paging, ViewBasic, Beta),
    responses((status = 200, description = "A page of versions", body = MemoryVersionPage), ApiErrors))]
pub async fn list_versions(
    State(state): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    respond(
        async {
            let id = store_id(id)?;
            let caller = scoped(&state, &headers, &id)?;
            let q = Query::of(&uri);
            let full = q.view(false)?;
            let limit = q.limit(full)?;
            let filter = filter(&q)?;
            let page = q.page().map(str::to_owned);
            let page = on_store(&state, &id, caller, move |user, key| {
                let Some(filter) = filter else {
                    return Ok(Page {
                        items: Vec::new(),
                        next: None,
                    });
                };
                user.versions(&filter, page.as_deref(), limit, full)
                    .map_err(|e| failed(&e, key))?
                    .map_err(|r| refused(&r, false))
            })
            .await?;
            let data = page
                .items
                .iter()
                .map(|v| MemoryVersionObject::new(&id, v, full))
                .collect();
            let page = MemoryVersionPage {
                data,
                next_page: page.next,
            };
            Ok(answer(&id, "memory_versions.list", &page))
        }
        .await,
    )
}

/// `GET /v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}` (`view`
/// defaults to `full`).
#[utoipa::path(get, path = VERSION, operation_id = "memory_versions_retrieve",
    summary = "Retrieve a memory version", params(StorePath, VersionPath, ViewFull, Beta),
    responses((status = 200, description = "The version", body = MemoryVersionObject), ApiErrors))]
pub async fn retrieve_version(
    State(state): State<Arc<AppState>>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    respond(
        async {
            let (id, version) = ids(path)?;
            let caller = scoped(&state, &headers, &id)?;
            let full = Query::of(&uri).view(true)?;
            let v = on_store(&state, &id, caller, move |user, key| {
                user.version(version, full)
                    .map_err(|e| failed(&e, key))?
                    .ok_or_else(ApiError::not_found)
            })
            .await?;
            Ok(answer(
                &id,
                "memory_versions.retrieve",
                &MemoryVersionObject::new(&id, &v, full),
            ))
        }
        .await,
    )
}

/// `POST /v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}/redact`:
/// nulls the version's content, path, hash and size, and records when and by whom (allowed on
/// an archived store).
#[utoipa::path(post, path = REDACT, operation_id = "memory_versions_redact",
    summary = "Redact a memory version",
    description = "Nulls its content, path, hash and size and records when and by whom. Allowed on an archived store.",
    params(StorePath, VersionPath, Beta),
    responses((status = 200, description = "The redacted version", body = MemoryVersionObject), ApiErrors))]
pub async fn redact_version(
    State(state): State<Arc<AppState>>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
) -> Response {
    respond(
        async {
            let (id, version) = ids(path)?;
            let caller = scoped_write(&state, &headers, &id)?;
            let v = on_store(&state, &id, caller, move |user, key| {
                user.redact(version)
                    .map_err(|e| failed(&e, key))?
                    .map_err(|r| refused(&r, false))
            })
            .await?;
            Ok(answer(
                &id,
                "memory_versions.redact",
                &MemoryVersionObject::new(&id, &v, false),
            ))
        }
        .await,
    )
}
