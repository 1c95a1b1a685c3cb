//! The memory-stores API: anthropic's beta `memory_stores`, `memories` and `memory_versions`
//! resources (the `client.beta.memory_stores` of the anthropic SDKs, 2.14.0), served over the
//! same stores as the memory tool. A memkv user is a memory store: `POST /v1/memory_stores`
//! makes one (`memstore_…`) that the tool route serves at once, and a store the tool wrote is
//! readable here under its user id.
//!
//! Every handler goes the same way, most of it in its extractors: the key and the store it may
//! use (`crate::access`'s `Reads`, `Writes` or `Admin`: 401, then 404, the same answer
//! for a store that is not the key's and one that does not exist, then 429 and a read-only key's
//! 403), the query (`crate::params::Params`, one struct parsed and documented), the body (400,
//! 413), room to run (`crate::work`: 503), then the library call on tokio's blocking pool, whose
//! [`ApiRefusal`] is mapped to a status in [`refused`] and nowhere else. Handlers return
//! `Result<Response, ApiError>`.
//!
//! - [`objects`]: the JSON objects as types (serialized by serde, described by utoipa);
//!   [`wire`]: times, hashes, durations and the API ↔ model path conversion;
//! - `stores`, `memories`, `versions`: the handlers of each resource; `search`: exact search
//!   over a store; `changes`: the change feed; `webhooks`: the endpoints it is delivered to;
//!   `keys`: the API keys (admin).

pub mod objects;
pub mod wire;

pub mod backup;
pub mod changes;
pub mod keys;
pub mod memories;
pub mod search;
pub mod settings;
pub mod stores;
pub mod versions;
pub mod webhooks;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use memkv::{ApiRefusal, Database, Error};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::AppState;
use crate::access::{Admin, Scoped};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::tool::{self, ToolInfo};
pub use crate::work::blocking;

/// The status and message of a refusal: the one place refusals become HTTP answers.
///
/// `store_update` is set for `POST /v1/memory_stores/{id}`, which the SDK documents as failing
/// with 400 on an archived store; every other write to an archived store is a 409 conflict.
pub fn refused(refusal: &ApiRefusal, store_update: bool) -> ApiError {
    let message = refusal.message();
    match refusal {
        ApiRefusal::NotFound => ApiError::not_found(),
        ApiRefusal::Archived if store_update => ApiError::invalid(message),
        ApiRefusal::PreconditionFailed { .. }
        | ApiRefusal::PathExists { .. }
        | ApiRefusal::LiveVersion { .. }
        | ApiRefusal::Archived => ApiError::new(StatusCode::CONFLICT, message),
        // InvalidPath, ParentIsFile, Limit, InvalidPage, NotRestorable: the request is wrong.
        _ => ApiError::invalid(message),
    }
}

/// A storage failure: logged for the operator, answered 503 when a retry may succeed, else 500.
pub fn failed(e: &Error, store: &str) -> ApiError {
    tracing::error!(store, error = %e, "storage failure; nothing was applied");
    let (status, message) = memkv::wire::storage_failure(e);
    ApiError::new(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        message,
    )
}

/// The request's JSON body as `T`: at most the body cap, within the body timeout, sent as
/// `application/json`; 400 with serde's words for anything else.
pub async fn json_body<T: DeserializeOwned>(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<T, ApiError> {
    let bytes = tool::read_body(state, headers, body).await?;
    if bytes.is_empty() {
        return Err(ApiError::invalid("the request needs a JSON body"));
    }
    tool::check_content_type(headers)?;
    serde_json::from_slice(&bytes).map_err(|e| ApiError::invalid(body_refusal(&e)))
}

/// Why a JSON body was refused, in words a caller (or a model reading the error) can act on:
/// not JSON at all, or JSON of the wrong shape; where, by line and column.
fn body_refusal(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let at = format!("line {} column {}", e.line(), e.column());
    match e.classify() {
        Category::Syntax | Category::Eof => format!(
            "the request body is not JSON (at {at}); send a JSON object with content-type application/json"
        ),
        Category::Data => {
            // serde's own words say which field and what it expected; drop its position.
            let what = e.to_string();
            let what = what.split(" at line ").next().unwrap_or(&what);
            format!("the request body is JSON but not what this route takes: {what} (at {at})")
        }
        Category::Io => format!("the request body could not be read ({e})"),
    }
}

/// What a library call that may be refused came to: its value, or its storage failure
/// ([`failed`]) or its refusal ([`refused`]; not the store update's) as an answer.
pub fn settled<T>(
    outcome: Result<Result<T, ApiRefusal>, Error>,
    store: &str,
) -> Result<T, ApiError> {
    outcome
        .map_err(|e| failed(&e, store))?
        .map_err(|r| refused(&r, false))
}

/// A JSON answer, carrying the store and operation for the request's log line.
pub fn answer<T: Serialize>(store: &str, operation: &'static str, value: &T) -> Response {
    let body = match serde_json::to_string(value) {
        Ok(body) => body,
        Err(e) => {
            tracing::error!(error = %e, operation, "an answer did not serialize");
            return ApiError::internal("the answer could not be written").into_response();
        }
    };
    let mut response = ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    response.extensions_mut().insert(ToolInfo {
        store: store.to_owned(),
        commands: vec![operation],
    });
    response
}

/// A page token that was not made by this API.
pub fn bad_page() -> ApiError {
    ApiError::invalid("page is not a next_page value from this list")
}

/// The record of store `id`: 404 for an id memkv does not accept and for a store that does not
/// exist.
pub fn existing(store: &Database, id: &str) -> Result<memkv::StoreInfo, ApiError> {
    if store.user(id).is_err() {
        return Err(ApiError::not_found());
    }
    store
        .store_info(id)
        .map_err(|e| failed(&e, id))?
        .ok_or_else(ApiError::not_found)
}

/// The handle of existing store `id`, recording `caller`'s key as the author of its writes.
pub fn handle<'s>(
    store: &'s Database,
    id: &str,
    caller: &Caller,
) -> Result<memkv::MemoryStore<'s>, ApiError> {
    handle_and_info(store, id, caller).map(|(handle, _)| handle)
}

/// As [`handle`], with the store's record (read once).
pub fn handle_and_info<'s>(
    store: &'s Database,
    id: &str,
    caller: &Caller,
) -> Result<(memkv::MemoryStore<'s>, memkv::StoreInfo), ApiError> {
    let info = existing(store, id)?;
    let user = store.user(id).map_err(|_| ApiError::not_found())?;
    Ok((user.with_actor(caller.actor()), info))
}

/// Runs `work` on the blocking pool (as [`blocking`]) with the handle of existing store `id`
/// (as [`handle`]: `caller` recorded as the author of its writes) and the id.
pub async fn on_store<T: Send + 'static>(
    state: &Arc<AppState>,
    id: &str,
    caller: Caller,
    work: impl FnOnce(memkv::MemoryStore<'_>, &str) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let id = id.to_owned();
    blocking(state, move |store| work(handle(store, &id, &caller)?, &id)).await
}

/// Runs `work` on the blocking pool (as [`blocking`]) with the database and `id` (a store's id,
/// or `""` for a route of no one store), answering what it returns as JSON (`operation` names
/// it in the request's log line).
pub async fn answer_on_db<T: Serialize + Send + 'static>(
    state: &Arc<AppState>,
    id: &str,
    operation: &'static str,
    work: impl FnOnce(&Database, &str) -> Result<T, ApiError> + Send + 'static,
) -> Result<Response, ApiError> {
    let key = id.to_owned();
    let value = blocking(state, move |db| work(db, &key)).await?;
    Ok(answer(id, operation, &value))
}

impl<K> Scoped<K> {
    /// As [`on_store`] on this store, answering what `work` returns as JSON (`operation` names
    /// it in the request's log line).
    pub async fn answer<T: Serialize + Send + 'static>(
        self,
        operation: &'static str,
        work: impl FnOnce(memkv::MemoryStore<'_>, &str) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<Response, ApiError> {
        let value = on_store(&self.state, &self.id, self.caller, work).await?;
        Ok(answer(&self.id, operation, &value))
    }

    /// As [`answer_on_db`] with this store's id.
    pub async fn answer_db<T: Serialize + Send + 'static>(
        &self,
        operation: &'static str,
        work: impl FnOnce(&Database, &str) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<Response, ApiError> {
        answer_on_db(&self.state, &self.id, operation, work).await
    }
}

impl Admin {
    /// As [`answer_on_db`] for a route of no one store: `work` gets the database.
    pub async fn answer<T: Serialize + Send + 'static>(
        &self,
        operation: &'static str,
        work: impl FnOnce(&Database) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<Response, ApiError> {
        answer_on_db(&self.state, "", operation, move |db, _| work(db)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Shape {
        name: String,
    }

    fn refusal(body: &str) -> String {
        body_refusal(&serde_json::from_str::<Shape>(body).unwrap_err())
    }

    #[test]
    fn a_refused_body_says_whether_it_was_json_and_where() {
        assert_eq!(
            refusal("name=x"),
            "the request body is not JSON (at line 1 column 2); send a JSON object with content-type application/json"
        );
        assert_eq!(
            refusal("{\"name\": "),
            "the request body is not JSON (at line 1 column 9); send a JSON object with content-type application/json"
        );
        assert_eq!(
            refusal("{\"name\": 5}"),
            "the request body is JSON but not what this route takes: invalid type: integer `5`, expected a string (at line 1 column 10)"
        );
        assert!(
            refusal("{\"colour\": \"blue\"}").starts_with(
                "the request body is JSON but not what this route takes: unknown field `colour`"
            ),
            "{}",
            refusal("{\"colour\": \"blue\"}")
        );
    }
}
