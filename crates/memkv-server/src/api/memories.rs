//! `/v1/memory_stores/{memory_store_id}/memories[/{memory_id}]`: create, list, retrieve,
//! update (content and/or path, under a `content_sha256` precondition) and delete memories.
//! Paths here are relative to the store's root: `/notes.md` is the model's
//! `/memories/notes.md`, under the same path rules.

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::Response;
use memkv::{ApiRefusal, MemoryId, Page};
use serde::{Deserialize, Deserializer};
use utoipa::{IntoParams, ToSchema};

use super::objects::{DeletedMemory, MemoryItem, MemoryObject, MemoryPage};
use super::{failed, json_body, refused, settled, wire};
use crate::access::{Item, Reads, Writes};
use crate::error::ApiError;
use crate::params::{Paging, Params, ViewBasic, ViewFull};
use crate::routes::{MEMORIES, MEMORY};
use crate::spec::{ApiErrors, Beta, MemoryPath, StorePath};

/// A new memory.
#[derive(Deserialize, ToSchema)]
#[schema(as = MemoryCreate)]
#[serde(deny_unknown_fields)]
struct CreateMemory {
    /// The content (null: empty). At most the store's file-size limit.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, required = true)]
    content: Option<Option<String>>,
    /// Relative to the store's root, starting with `/`.
    #[schema(pattern = "^/.")]
    path: String,
}

/// Changes to a memory: new content and/or a new path.
#[derive(Deserialize, ToSchema)]
#[schema(as = MemoryUpdate)]
#[serde(deny_unknown_fields)]
struct UpdateMemory {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    #[schema(pattern = "^/.")]
    path: Option<String>,
    /// Apply only if the memory's content has this SHA-256.
    #[serde(default)]
    #[schema(value_type = Precondition)]
    precondition: Option<Precondition>,
}

/// A condition on the memory's current content.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct Precondition {
    #[serde(rename = "type")]
    #[schema(value_type = PreconditionType, inline)]
    kind: String,
    #[serde(default)]
    #[schema(value_type = String, required = true, pattern = "^[0-9a-f]{64}$")]
    content_sha256: Option<String>,
}

#[derive(ToSchema)]
#[allow(dead_code)]
enum PreconditionType {
    #[serde(rename = "content_sha256")]
    ContentSha256,
}

/// The filters of the memory listing.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MemoryFilter {
    /// Only memories below this directory, such as `/notes/`: it must start and end with `/`
    /// and matches whole segments.
    path_prefix: Option<String>,
    /// How many segments below `path_prefix` to list (0: all).
    #[param(value_type = Option<u32>)]
    depth: Option<String>,
}

impl MemoryFilter {
    /// The directory to list, as a model path.
    fn dir(&self) -> Result<String, ApiError> {
        wire::model_dir(self.path_prefix.as_deref().unwrap_or("/"))
            .ok_or_else(|| ApiError::invalid("path_prefix must start and end with /"))
    }

    /// `depth`: 0 (everything below) when not given.
    fn depth(&self) -> Result<u32, ApiError> {
        match &self.depth {
            None => Ok(0),
            Some(d) => d.parse::<u32>().map_err(|_| {
                ApiError::invalid(format!("depth must be a non-negative integer, not {d:?}"))
            }),
        }
    }
}

/// The precondition of a deletion.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeleteCondition {
    /// Delete only if the memory's content has this SHA-256 (64 lowercase hex digits).
    #[param(pattern = "^[0-9a-f]{64}$")]
    expected_content_sha256: Option<String>,
}

/// A field that must be present but may be `null`: `Some(None)` for `null`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// The model path of an API path, or 400.
fn model_path(path: &str) -> Result<String, ApiError> {
    wire::model_path(path).ok_or_else(|| {
        ApiError::invalid("path must start with / and name a memory below the store's root")
    })
}

/// The expected hash of a precondition or of `expected_content_sha256`, or 400.
fn sha256(text: &str, name: &str) -> Result<[u8; 32], ApiError> {
    wire::parse_sha256(text).ok_or_else(|| {
        ApiError::invalid(format!(
            "{name} must be 64 lowercase hexadecimal characters"
        ))
    })
}

/// `POST /v1/memory_stores/{memory_store_id}/memories` (`view` defaults to `basic`). 409 when
/// a memory exists at the path, or the store is archived.
#[utoipa::path(post, path = MEMORIES, operation_id = "memories_create",
    summary = "Create a memory",
    description = "The path is relative to the store's root: `/notes.md` is the memory tool's `/memories/notes.md`. 409 when a memory exists at the path or the store is archived.",
    params(StorePath, ViewBasic, Beta), request_body = CreateMemory,
    responses((status = 200, description = "The new memory", body = MemoryObject), ApiErrors))]
pub async fn create_memory(
    store: Writes,
    Params(view): Params<ViewBasic>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let full = view.full()?;
    let req: CreateMemory = json_body(&store.state, &headers, body).await?;
    let Some(content) = req.content else {
        return Err(ApiError::invalid(
            "content is required (\"\" for an empty memory)",
        ));
    };
    let content = content.unwrap_or_default();
    let path = model_path(&req.path)?;
    store
        .answer("memories.create", move |user, key| {
            let mut m = settled(user.create_memory(&path, &content), key)?;
            if full && m.content.is_none() {
                m.content = Some(content);
            }
            Ok(MemoryObject::new(key, &m, full))
        })
        .await
}

/// `GET /v1/memory_stores/{memory_store_id}/memories`: `path_prefix` (whole segments, ends
/// with `/`), `depth` (0: everything below; d: d segments below, deeper ones rolled up into
/// `memory_prefix` items), `limit`, `page`, `view` (defaults to `basic`).
#[utoipa::path(get, path = MEMORIES, operation_id = "memories_list",
    summary = "List memories",
    description = "In path order. `depth` 0 lists every memory below `path_prefix`; `depth` d lists memories at most d segments below it and rolls deeper ones up into `memory_prefix` items.",
    params(StorePath, MemoryFilter, Paging, ViewBasic, Beta),
    responses((status = 200, description = "A page of memories and prefixes", body = MemoryPage), ApiErrors))]
pub async fn list_memories(
    store: Reads,
    Params(view): Params<ViewBasic>,
    Params(paging): Params<Paging>,
    Params(filter): Params<MemoryFilter>,
) -> Result<Response, ApiError> {
    let full = view.full()?;
    let limit = paging.limit(full)?;
    let dir = filter.dir()?;
    let depth = filter.depth()?;
    let page = paging.page().map(str::to_owned);
    store
        .answer("memories.list", move |user, key| {
            let page = match user
                .list_memories(&dir, depth, page.as_deref(), limit, full)
                .map_err(|e| failed(&e, key))?
            {
                Ok(listed) => listed,
                // Nothing below the prefix: an empty page.
                Err(ApiRefusal::NotFound) => Page {
                    items: Vec::new(),
                    next: None,
                },
                Err(r) => return Err(refused(&r, false)),
            };
            Ok(MemoryPage {
                data: page
                    .items
                    .iter()
                    .map(|item| MemoryItem::new(key, item, full))
                    .collect(),
                next_page: page.next,
            })
        })
        .await
}

/// `GET /v1/memory_stores/{memory_store_id}/memories/{memory_id}` (`view` defaults to `full`).
#[utoipa::path(get, path = MEMORY, operation_id = "memories_retrieve",
    summary = "Retrieve a memory", params(StorePath, MemoryPath, ViewFull, Beta),
    responses((status = 200, description = "The memory", body = MemoryObject), ApiErrors))]
pub async fn retrieve_memory(
    store: Reads,
    Item(memory): Item<MemoryId>,
    Params(view): Params<ViewFull>,
) -> Result<Response, ApiError> {
    let full = view.full()?;
    store
        .answer("memories.retrieve", move |user, key| {
            let m = user
                .memory(memory, full)
                .map_err(|e| failed(&e, key))?
                .ok_or_else(ApiError::not_found)?;
            Ok(MemoryObject::new(key, &m, full))
        })
        .await
}

/// `POST /v1/memory_stores/{memory_store_id}/memories/{memory_id}`: new content and/or a new
/// path (the memory keeps its id); 409 when the precondition's `content_sha256` is not the
/// memory's, when the new path is taken, or when the store is archived. `view` defaults to
/// `basic`.
#[utoipa::path(post, path = MEMORY, operation_id = "memories_update",
    summary = "Update a memory",
    description = "New content and/or a new path (a rename: the memory keeps its id). 409 when the precondition fails, the new path is taken, or the store is archived.",
    params(StorePath, MemoryPath, ViewBasic, Beta), request_body = UpdateMemory,
    responses((status = 200, description = "The memory as changed", body = MemoryObject), ApiErrors))]
pub async fn update_memory(
    store: Writes,
    Item(memory): Item<MemoryId>,
    Params(view): Params<ViewBasic>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let full = view.full()?;
    let req: UpdateMemory = json_body(&store.state, &headers, body).await?;
    let expected = match &req.precondition {
        None => None,
        Some(p) if p.kind == "content_sha256" => {
            let Some(hash) = &p.content_sha256 else {
                return Err(ApiError::invalid("precondition.content_sha256 is required"));
            };
            Some(sha256(hash, "precondition.content_sha256")?)
        }
        Some(p) => {
            return Err(ApiError::invalid(format!(
                "precondition.type must be content_sha256, not {:?}",
                p.kind
            )));
        }
    };
    let new_path = req.path.as_deref().map(model_path).transpose()?;
    store
        .answer("memories.update", move |user, key| {
            let updated = user.update_memory(
                memory,
                req.content.as_deref(),
                new_path.as_deref(),
                expected,
            );
            let mut m = settled(updated, key)?;
            if full && m.content.is_none() {
                m.content = match req.content {
                    Some(c) => Some(c),
                    None => user
                        .memory(memory, true)
                        .map_err(|e| failed(&e, key))?
                        .and_then(|again| again.content),
                };
            }
            Ok(MemoryObject::new(key, &m, full))
        })
        .await
}

/// `DELETE /v1/memory_stores/{memory_store_id}/memories/{memory_id}`: 409 (nothing deleted)
/// when `expected_content_sha256` is not the memory's. Its versions stay.
#[utoipa::path(delete, path = MEMORY, operation_id = "memories_delete",
    summary = "Delete a memory",
    description = "Its versions stay. 409 (nothing deleted) when `expected_content_sha256` is not the memory's.",
    params(StorePath, MemoryPath, DeleteCondition, Beta),
    responses((status = 200, description = "The memory is deleted", body = DeletedMemory), ApiErrors))]
pub async fn delete_memory(
    store: Writes,
    Item(memory): Item<MemoryId>,
    Params(condition): Params<DeleteCondition>,
) -> Result<Response, ApiError> {
    let expected = condition
        .expected_content_sha256
        .as_deref()
        .map(|h| sha256(h, "expected_content_sha256"))
        .transpose()?;
    store
        .answer("memories.delete", move |user, key| {
            settled(user.delete_memory(memory, expected), key)?;
            Ok(DeletedMemory::new(memory.to_string()))
        })
        .await
}
