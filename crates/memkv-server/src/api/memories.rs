//! `/v1/memory_stores/{memory_store_id}/memories[/{memory_id}]`: create, list, retrieve,
//! update (content and/or path, under a `content_sha256` precondition) and delete memories.
//! Paths here are relative to the store's root: `/notes.md` is the model's
//! `/memories/notes.md`, under the same path rules.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use memkv::{ApiRefusal, Page};
use serde::{Deserialize, Deserializer};
use serde_json::json;

use super::{
    Query, answer, failed, ids, json_body, on_store, refused, respond, scoped, scoped_write,
    store_id, wire,
};
use crate::AppState;
use crate::error::ApiError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateMemory {
    /// Required; `null` is an empty memory.
    #[serde(default, deserialize_with = "present")]
    content: Option<Option<String>>,
    path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateMemory {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    precondition: Option<Precondition>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Precondition {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    content_sha256: Option<String>,
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
pub async fn create_memory(
    State(state): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    uri: Uri,
    body: Body,
) -> Response {
    respond(
        async {
            let id = store_id(id)?;
            let caller = scoped_write(&state, &headers, &id)?;
            let full = Query::of(&uri).view(false)?;
            let req: CreateMemory = json_body(&state, &headers, body).await?;
            let Some(content) = req.content else {
                return Err(ApiError::invalid(
                    "content is required (\"\" for an empty memory)",
                ));
            };
            let content = content.unwrap_or_default();
            let path = model_path(&req.path)?;
            let memory = on_store(&state, &id, caller, move |user, key| {
                let mut m = user
                    .create_memory(&path, &content)
                    .map_err(|e| failed(&e, key))?
                    .map_err(|r| refused(&r, false))?;
                if full && m.content.is_none() {
                    m.content = Some(content);
                }
                Ok(m)
            })
            .await?;
            Ok(answer(
                &id,
                "memories.create",
                &wire::memory(&id, &memory, full),
            ))
        }
        .await,
    )
}

/// `GET /v1/memory_stores/{memory_store_id}/memories`: `path_prefix` (whole segments, ends
/// with `/`), `depth` (0: everything below; d: d segments below, deeper ones rolled up into
/// `memory_prefix` items), `limit`, `page`, `view` (defaults to `basic`).
pub async fn list_memories(
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
            let prefix = q.get("path_prefix").unwrap_or("/");
            let dir = wire::model_dir(prefix)
                .ok_or_else(|| ApiError::invalid("path_prefix must start and end with /"))?;
            let depth = match q.get("depth") {
                None => 0,
                Some(d) => d.parse::<u32>().map_err(|_| {
                    ApiError::invalid(format!("depth must be a non-negative integer, not {d:?}"))
                })?,
            };
            let page = q.page().map(str::to_owned);
            let page = on_store(&state, &id, caller, move |user, key| {
                match user
                    .list_memories(&dir, depth, page.as_deref(), limit, full)
                    .map_err(|e| failed(&e, key))?
                {
                    Ok(listed) => Ok(listed),
                    // Nothing below the prefix: an empty page.
                    Err(ApiRefusal::NotFound) => Ok(Page {
                        items: Vec::new(),
                        next: None,
                    }),
                    Err(r) => Err(refused(&r, false)),
                }
            })
            .await?;
            let data = page
                .items
                .iter()
                .map(|item| wire::list_item(&id, item, full))
                .collect();
            Ok(answer(&id, "memories.list", &wire::page(data, page.next)))
        }
        .await,
    )
}

/// `GET /v1/memory_stores/{memory_store_id}/memories/{memory_id}` (`view` defaults to `full`).
pub async fn retrieve_memory(
    State(state): State<Arc<AppState>>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    respond(
        async {
            let (id, memory) = ids(path)?;
            let caller = scoped(&state, &headers, &id)?;
            let full = Query::of(&uri).view(true)?;
            let m = on_store(&state, &id, caller, move |user, key| {
                user.memory(memory, full)
                    .map_err(|e| failed(&e, key))?
                    .ok_or_else(ApiError::not_found)
            })
            .await?;
            Ok(answer(
                &id,
                "memories.retrieve",
                &wire::memory(&id, &m, full),
            ))
        }
        .await,
    )
}

/// `POST /v1/memory_stores/{memory_store_id}/memories/{memory_id}`: new content and/or a new
/// path (the memory keeps its id); 409 when the precondition's `content_sha256` is not the
/// memory's, when the new path is taken, or when the store is archived. `view` defaults to
/// `basic`.
pub async fn update_memory(
    State(state): State<Arc<AppState>>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    uri: Uri,
    body: Body,
) -> Response {
    respond(
        async {
            let (id, memory) = ids(path)?;
            let caller = scoped_write(&state, &headers, &id)?;
            let full = Query::of(&uri).view(false)?;
            let req: UpdateMemory = json_body(&state, &headers, body).await?;
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
            let m = on_store(&state, &id, caller, move |user, key| {
                let mut m = user
                    .update_memory(
                        memory,
                        req.content.as_deref(),
                        new_path.as_deref(),
                        expected,
                    )
                    .map_err(|e| failed(&e, key))?
                    .map_err(|r| refused(&r, false))?;
                if full && m.content.is_none() {
                    m.content = match req.content {
                        Some(c) => Some(c),
                        None => user
                            .memory(memory, true)
                            .map_err(|e| failed(&e, key))?
                            .and_then(|again| again.content),
                    };
                }
                Ok(m)
            })
            .await?;
            Ok(answer(&id, "memories.update", &wire::memory(&id, &m, full)))
        }
        .await,
    )
}

/// `DELETE /v1/memory_stores/{memory_store_id}/memories/{memory_id}`: 409 (nothing deleted)
/// when `expected_content_sha256` is not the memory's. Its versions stay.
pub async fn delete_memory(
    State(state): State<Arc<AppState>>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    respond(
        async {
            let (id, memory) = ids(path)?;
            let caller = scoped_write(&state, &headers, &id)?;
            let expected = Query::of(&uri)
                .get("expected_content_sha256")
                .map(|h| sha256(h, "expected_content_sha256"))
                .transpose()?;
            on_store(&state, &id, caller, move |user, key| {
                user.delete_memory(memory, expected)
                    .map_err(|e| failed(&e, key))?
                    .map_err(|r| refused(&r, false))
            })
            .await?;
            Ok(answer(
                &id,
                "memories.delete",
                &json!({"type": "memory_deleted", "id": memory.to_string()}),
            ))
        }
        .await,
    )
}
