//! `/v1/keys[/{key_id}]` (admin): add, list and revoke the API keys every server of the
//! database checks requests against ([`crate::keys`]). The key itself is in the answer of the
//! creation only; the database keeps its SHA-256.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use memkv::{ApiKey, Error, KeyScope, NewKey};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{admin, answer, blocking, failed, json_body, respond, wire};
use crate::AppState;
use crate::error::ApiError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateKey {
    /// The store it opens; absent or null: every store (an admin key).
    #[serde(default)]
    store: Option<String>,
    #[serde(default)]
    read_only: bool,
    #[serde(default)]
    label: String,
    /// RFC 3339.
    #[serde(default)]
    expires_at: Option<String>,
}

/// An `api_key` object (never the key).
pub fn api_key(k: &ApiKey) -> Value {
    json!({
        "type": "api_key",
        "id": k.id,
        "store": k.scope.store(),
        "read_only": k.scope.read_only(),
        "label": k.label,
        "created_at": wire::rfc3339(k.created_ms),
        "expires_at": k.expires_ms.map(wire::rfc3339),
        "last_used_at": k.last_used_ms.map(wire::rfc3339),
    })
}

fn refused(e: &Error) -> ApiError {
    match e {
        Error::InvalidKey(_) | Error::InvalidUser { .. } => ApiError::invalid(e.to_string()),
        _ => failed(e, ""),
    }
}

/// `POST /v1/keys`: `{"store"?, "read_only"?, "label"?, "expires_at"?}`; the answer holds
/// `key` (`mkv_…`), shown only here.
pub async fn create_key(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
            admin(&state, &headers, "adding an API key")?;
            let req: CreateKey = json_body(&state, &headers, body).await?;
            let scope = match req.store {
                Some(store) => KeyScope::Store {
                    store,
                    read_only: req.read_only,
                },
                None if req.read_only => {
                    return Err(ApiError::invalid(
                        "read_only is for a store key: name the store",
                    ));
                }
                None => KeyScope::Admin,
            };
            let expires_ms = match &req.expires_at {
                None => None,
                Some(t) => Some(wire::parse_rfc3339(t).ok_or_else(|| {
                    ApiError::invalid(format!("expires_at is not an RFC 3339 time: {t:?}"))
                })?),
            };
            let new = NewKey {
                scope,
                label: req.label,
                expires_ms,
            };
            let (added, key) =
                blocking(&state, move |db| db.add_key(&new).map_err(|e| refused(&e))).await?;
            let mut out = api_key(&added);
            out["key"] = json!(key);
            Ok(answer("", "keys.create", &out))
        }
        .await,
    )
}

/// `GET /v1/keys`: every key, by id (never the keys).
pub async fn list_keys(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    respond(
        async {
            admin(&state, &headers, "listing API keys")?;
            let keys = blocking(&state, |db| db.api_keys().map_err(|e| refused(&e))).await?;
            let data: Vec<Value> = keys.iter().map(api_key).collect();
            Ok(answer("", "keys.list", &json!({"data": data})))
        }
        .await,
    )
}

/// `DELETE /v1/keys/{key_id}`: revokes the key on every server of the database (on this one at
/// once, on the others within a second).
pub async fn delete_key(
    State(state): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Response {
    respond(
        async {
            admin(&state, &headers, "revoking an API key")?;
            let Path(id) = id.map_err(|_| ApiError::not_found())?;
            let gone = id.clone();
            let removed = blocking(&state, move |db| {
                db.revoke_key(&gone).map_err(|e| refused(&e))
            })
            .await?;
            if !removed {
                return Err(ApiError::not_found());
            }
            Ok(answer(
                "",
                "keys.delete",
                &json!({"type": "api_key_deleted", "id": id}),
            ))
        }
        .await,
    )
}
