//! `/v1/keys[/{key_id}]` (admin): add, list and revoke the API keys every server of the
//! database checks requests against ([`crate::keys`]). The key itself is in the answer of the
//! creation only; the database keeps its SHA-256.

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::Response;
use memkv::{ApiKey, Error, KeyScope, NewKey};
use serde::Deserialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::objects::{ApiKeyCreated, ApiKeyList, ApiKeyObject, DeletedApiKey};
use super::{failed, json_body, wire};
use crate::access::{Admin, Item};
use crate::error::ApiError;
use crate::routes::{KEY, KEYS};
use crate::spec::{ApiErrors, Beta};

/// A new API key.
#[derive(Deserialize, ToSchema)]
#[schema(as = ApiKeyCreate)]
#[serde(deny_unknown_fields)]
struct CreateKey {
    /// The store it opens; absent or null: every store (an admin key).
    #[serde(default)]
    #[schema(min_length = 1)]
    store: Option<String>,
    /// A store key that only reads.
    #[serde(default)]
    #[schema(required = false)]
    read_only: bool,
    /// A note for the operator; at most 200 characters.
    #[serde(default)]
    #[schema(required = false, max_length = 200)]
    label: String,
    /// When the key stops working (RFC 3339).
    #[serde(default)]
    #[schema(format = DateTime)]
    expires_at: Option<String>,
}

/// A key in the path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
struct KeyPath {
    /// The key (`key_…`).
    #[param(min_length = 1)]
    key_id: String,
}

/// An `api_key` object (never the key).
pub fn api_key(k: &ApiKey) -> Value {
    serde_json::to_value(ApiKeyObject::from(k)).expect("a key's record serializes")
}

fn refused(e: &Error) -> ApiError {
    match e {
        Error::InvalidKey(_) | Error::InvalidUser { .. } => ApiError::invalid(e.to_string()),
        _ => failed(e, ""),
    }
}

/// `POST /v1/keys`: `{"store"?, "read_only"?, "label"?, "expires_at"?}`; the answer holds
/// `key` (`mkv_…`), shown only here.
#[utoipa::path(post, path = KEYS, operation_id = "keys_create",
    summary = "Add an API key",
    description = "Admin key. A key for one store (`store`; `read_only`: reads only) or, without `store`, for every store (admin), with an optional label and expiry. The answer's `key` is shown only here: the database keeps its SHA-256. This server accepts it at once, every other server of the database within milliseconds (told by PostgreSQL's notifications).",
    params(Beta), request_body = CreateKey,
    responses((status = 200, description = "The key's record and the key", body = ApiKeyCreated), ApiErrors))]
pub async fn create_key(
    admin: Admin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let req: CreateKey = json_body(&admin.state, &headers, body).await?;
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
    admin
        .answer("keys.create", move |db| {
            let (added, key) = db.add_key(&new).map_err(|e| refused(&e))?;
            Ok(ApiKeyCreated::new(&added, key))
        })
        .await
}

/// `GET /v1/keys`: every key, by id (never the keys).
#[utoipa::path(get, path = KEYS, operation_id = "keys_list",
    summary = "List API keys",
    description = "Admin key. Every key's record (never a key), expired ones included.",
    params(Beta),
    responses((status = 200, description = "Every key", body = ApiKeyList), ApiErrors))]
pub async fn list_keys(admin: Admin) -> Result<Response, ApiError> {
    admin
        .answer("keys.list", |db| {
            let keys = db.api_keys().map_err(|e| refused(&e))?;
            Ok(ApiKeyList {
                data: keys.iter().map(ApiKeyObject::from).collect(),
            })
        })
        .await
}

/// `DELETE /v1/keys/{key_id}`: revokes the key on every server of the database (on this one at
/// once, on the others within milliseconds).
#[utoipa::path(delete, path = KEY, operation_id = "keys_delete",
    summary = "Revoke an API key",
    description = "Admin key. This server refuses the key at once, every other server of the database within milliseconds (told by PostgreSQL's notifications).",
    params(KeyPath, Beta),
    responses((status = 200, description = "The key is revoked", body = DeletedApiKey), ApiErrors))]
pub async fn delete_key(admin: Admin, Item(id): Item<String>) -> Result<Response, ApiError> {
    admin
        .answer("keys.delete", move |db| {
            let gone = db.revoke_key(&id).map_err(|e| refused(&e))?;
            gone.then(|| DeletedApiKey::new(id))
                .ok_or_else(ApiError::not_found)
        })
        .await
}
