//! `/v1/memory_stores/{memory_store_id}/memory_versions[/{memory_version_id}[/redact]]`: the
//! store's history, oldest first, and redaction. Every change to a memory, through this API or
//! the memory tool, is a version; versions outlive their memory.

use axum::response::Response;
use memkv::{Actor, MemoryId, Operation, Page, VersionFilter, VersionId};
use serde::Deserialize;
use utoipa::IntoParams;

use super::objects::{MemoryVersionObject, MemoryVersionPage, Operation as VersionOperation};
use super::{failed, settled};
use crate::access::{Item, Reads, Writes};
use crate::error::ApiError;
use crate::params::{Created, Paging, Params, ViewBasic, ViewFull};
use crate::routes::{REDACT, VERSION, VERSIONS};
use crate::spec::{ApiErrors, Beta, StorePath, VersionPath};

/// The filters of the version listing.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct VersionQuery {
    /// Only this memory's versions (`mem_…`), deleted or not.
    memory_id: Option<String>,
    /// Only this kind of change.
    #[param(value_type = Option<VersionOperation>, inline)]
    operation: Option<String>,
    /// Only changes made with this key (`key_…`).
    api_key_id: Option<String>,
    /// Only changes made by this session.
    session_id: Option<String>,
    /// Only changes made by this service account (memkv has none: no version matches).
    service_account_id: Option<String>,
}

/// The filter of a version listing; `None` when no version can match (a service account, or
/// two different authors).
fn filter(q: &VersionQuery, created: &Created) -> Result<Option<VersionFilter>, ApiError> {
    let memory = q
        .memory_id
        .as_deref()
        .map(|m| {
            m.parse::<MemoryId>().map_err(|_| {
                ApiError::invalid(format!("memory_id must be a memory id (mem_…), not {m:?}"))
            })
        })
        .transpose()?;
    let operation = match q.operation.as_deref() {
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
    let (created_gte_ms, created_lte_ms) = created.range()?;
    let authors: Vec<Actor> = [
        q.api_key_id.clone().map(Actor::ApiKey),
        q.session_id.clone().map(Actor::Session),
    ]
    .into_iter()
    .flatten()
    .collect();
    // memkv records no service accounts: nothing was written by one.
    if q.service_account_id.is_some() || authors.len() > 1 {
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
    params(StorePath, VersionQuery, Created, Paging, ViewBasic, Beta),
    responses((status = 200, description = "A page of versions", body = MemoryVersionPage), ApiErrors))]
pub async fn list_versions(
    store: Reads,
    Params(view): Params<ViewBasic>,
    Params(paging): Params<Paging>,
    Params(q): Params<VersionQuery>,
    Params(created): Params<Created>,
) -> Result<Response, ApiError> {
    let full = view.full()?;
    let limit = paging.limit(full)?;
    let filter = filter(&q, &created)?;
    let page = paging.page().map(str::to_owned);
    store
        .answer("memory_versions.list", move |user, key| {
            let page = match filter {
                None => Page {
                    items: Vec::new(),
                    next: None,
                },
                Some(filter) => settled(user.versions(&filter, page.as_deref(), limit, full), key)?,
            };
            Ok(MemoryVersionPage {
                data: page
                    .items
                    .iter()
                    .map(|v| MemoryVersionObject::new(key, v, full))
                    .collect(),
                next_page: page.next,
            })
        })
        .await
}

/// `GET /v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}` (`view`
/// defaults to `full`).
#[utoipa::path(get, path = VERSION, operation_id = "memory_versions_retrieve",
    summary = "Retrieve a memory version", params(StorePath, VersionPath, ViewFull, Beta),
    responses((status = 200, description = "The version", body = MemoryVersionObject), ApiErrors))]
pub async fn retrieve_version(
    store: Reads,
    Item(version): Item<VersionId>,
    Params(view): Params<ViewFull>,
) -> Result<Response, ApiError> {
    let full = view.full()?;
    store
        .answer("memory_versions.retrieve", move |user, key| {
            let v = user
                .version(version, full)
                .map_err(|e| failed(&e, key))?
                .ok_or_else(ApiError::not_found)?;
            Ok(MemoryVersionObject::new(key, &v, full))
        })
        .await
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
    store: Writes,
    Item(version): Item<VersionId>,
) -> Result<Response, ApiError> {
    store
        .answer("memory_versions.redact", move |user, key| {
            let v = settled(user.redact(version), key)?;
            Ok(MemoryVersionObject::new(key, &v, false))
        })
        .await
}
