//! The memory-stores API: anthropic's beta `memory_stores`, `memories` and `memory_versions`
//! resources (the `client.beta.memory_stores` of the anthropic SDKs, 2.14.0), served over the
//! same stores as the memory tool. A memkv user is a memory store: `POST /v1/memory_stores`
//! makes one (`memstore_…`) that the tool route serves at once, and a store the tool wrote is
//! readable here under its user id.
//!
//! Every handler goes the same way: the key (401), the store it may use (404, the same answer
//! for a store that is not the key's and one that does not exist), the request (400, 413),
//! room to run (503), then the library call on tokio's blocking pool, whose [`ApiRefusal`] is
//! mapped to a status in [`refused`] and nowhere else.
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
use axum::extract::Path;
use axum::extract::rejection::PathRejection;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use memkv::{ApiRefusal, Database, Error};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::AppState;
use crate::auth::{self, Allowed, Caller};
use crate::error::ApiError;
use crate::tool::{self, ToolInfo};

/// Items on a page when `limit` is not given, and the most with `view=full`.
pub const DEFAULT_LIMIT: usize = 20;
/// The most items a page may be asked for.
pub const MAX_LIMIT: usize = 100;

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
    match e {
        Error::Busy { .. } => {
            ApiError::overloaded("the database is busy; nothing was changed, try again")
        }
        Error::DiskFull { .. } => ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            "the disk holding the database is full; nothing was changed. Deleting memories, redacting versions and deleting stores still work",
        ),
        Error::OutcomeUnknown { .. } => ApiError::internal(
            "the connection to the database was lost during the commit; the change may or may not have been applied",
        ),
        _ => ApiError::internal("storage failure; nothing was changed"),
    }
}

/// The caller, allowed to use the store named in the path (404 otherwise, the same answer as
/// for a store that does not exist).
pub fn scoped(state: &AppState, headers: &HeaderMap, store: &str) -> Result<Caller, ApiError> {
    let caller = auth::identify(state, headers)?;
    if caller.may_use(store) {
        state.rates.store(store)?;
        Ok(caller)
    } else {
        Err(ApiError::not_found())
    }
}

/// As [`scoped`], for a request that changes the store: a read-only key is refused (403).
pub fn scoped_write(
    state: &AppState,
    headers: &HeaderMap,
    store: &str,
) -> Result<Caller, ApiError> {
    let caller = scoped(state, headers, store)?;
    if caller.read_only {
        return Err(ApiError::forbidden(
            "this API key is read-only: it cannot change the memory store",
        ));
    }
    Ok(caller)
}

/// The caller, with an admin key (or keyless on loopback): creating and listing stores.
pub fn admin(state: &AppState, headers: &HeaderMap, what: &str) -> Result<Caller, ApiError> {
    let caller = auth::identify(state, headers)?;
    match caller.allowed {
        Allowed::Open | Allowed::Admin => Ok(caller),
        Allowed::Store(_) => Err(ApiError::forbidden(format!("{what} needs an admin key"))),
    }
}

/// Runs `work` on the blocking pool under the in-flight limit (503 when it is reached).
pub async fn blocking<T: Send + 'static>(
    state: &Arc<AppState>,
    work: impl FnOnce(&Arc<Database>) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let Ok(permit) = Arc::clone(&state.in_flight).try_acquire_owned() else {
        state.metrics.overloaded.inc();
        return Err(ApiError::overloaded(
            "memkv is answering as many requests as it may; retry shortly",
        ));
    };
    state.metrics.in_flight.inc();
    let metrics = Arc::clone(&state.metrics);
    let store = Arc::clone(&state.store);
    tokio::task::spawn_blocking(move || {
        let out = work(&store);
        metrics.in_flight.dec();
        drop(permit);
        out
    })
    .await
    .map_err(|_| ApiError::internal("the request failed"))?
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

/// The query string's parameters, percent-decoded. Unknown ones are ignored (the SDK's
/// `?beta=true` among them); a repeated one counts once, the first time.
#[derive(Debug, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// The query of `uri`.
    pub fn of(uri: &Uri) -> Query {
        let text = uri.query().unwrap_or("");
        Query(
            form_urlencoded::parse(text.as_bytes())
                .into_owned()
                .collect(),
        )
    }

    /// Every value of `name`, in order.
    pub fn all<'q>(&'q self, name: &'q str) -> impl Iterator<Item = &'q str> + 'q {
        self.0
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// A parameter's value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// `view`: `full` (true) or `basic` (false), `default_full` when not given.
    pub fn view(&self, default_full: bool) -> Result<bool, ApiError> {
        match self.get("view") {
            None => Ok(default_full),
            Some("full") => Ok(true),
            Some("basic") => Ok(false),
            Some(v) => Err(ApiError::invalid(format!(
                "view must be basic or full, not {v:?}"
            ))),
        }
    }

    /// `limit`: 1 to 100, 20 when not given; with `view=full` a page holds at most 20.
    pub fn limit(&self, full: bool) -> Result<usize, ApiError> {
        let limit = self.limit_within(DEFAULT_LIMIT, MAX_LIMIT)?;
        Ok(if full {
            limit.min(DEFAULT_LIMIT)
        } else {
            limit
        })
    }

    /// `limit`: 1 to `max`, `default` when not given.
    pub fn limit_within(&self, default: usize, max: usize) -> Result<usize, ApiError> {
        match self.get("limit") {
            None => Ok(default),
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| {
                    ApiError::invalid(format!(
                        "limit must be an integer from 1 to {max}, not {v:?}"
                    ))
                }),
        }
    }

    /// A boolean parameter (`true` or `false`).
    pub fn flag(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(v) => Err(ApiError::invalid(format!(
                "{name} must be true or false, not {v:?}"
            ))),
        }
    }

    /// A time parameter in RFC 3339, as milliseconds since the epoch.
    pub fn time(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.get(name)
            .map(|v| {
                wire::parse_rfc3339(v).ok_or_else(|| {
                    ApiError::invalid(format!(
                        "{name} must be a time in RFC 3339 (2026-11-30T13:45:00Z), not {v:?}"
                    ))
                })
            })
            .transpose()
    }

    /// `page`: a `next_page` value from a previous answer (opaque; its owner checks it).
    pub fn page(&self) -> Option<&str> {
        self.get("page").filter(|p| !p.is_empty())
    }
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

/// The store id in the path; an id that is not UTF-8 names no store (404).
pub fn store_id(id: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    id.map(|Path(id)| id).map_err(|_| ApiError::not_found())
}

/// The store id and a memory or version id (`mem_…`, `memver_…`) in the path; an id that is
/// not one is not found (404).
pub fn ids<I: std::str::FromStr>(
    ids: Result<Path<(String, String)>, PathRejection>,
) -> Result<(String, I), ApiError> {
    let Path((store, id)) = ids.map_err(|_| ApiError::not_found())?;
    let id = id.parse::<I>().map_err(|_| ApiError::not_found())?;
    Ok((store, id))
}

/// A handler's outcome as the answer sent.
pub fn respond(outcome: Result<Response, ApiError>) -> Response {
    outcome.unwrap_or_else(IntoResponse::into_response)
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
