//! What the handlers' `#[utoipa::path]` attributes share: the error answers every route of the
//! memory-stores API may give, the tool route's, the parameters several routes take, and the
//! retry headers. `crate::openapi` assembles the document from the handlers.

use utoipa::{IntoParams, IntoResponses, ToSchema};

use crate::error::ErrorBody;

/// `x-should-retry: false`: the same request gets the same answer, so the anthropic SDKs do
/// not retry it.
#[derive(ToSchema)]
#[allow(dead_code)]
pub enum NoRetry {
    #[serde(rename = "false")]
    False,
}

/// `x-should-retry: true`: retry after `Retry-After` seconds.
#[derive(ToSchema)]
#[allow(dead_code)]
pub enum Retry {
    #[serde(rename = "true")]
    True,
}

/// `Retry-After`: whole seconds.
#[derive(ToSchema)]
#[schema(value_type = String, pattern = "^[0-9]+$")]
#[allow(dead_code)]
pub struct Seconds(String);

/// The errors of the memory-stores API's routes, the same on each.
#[derive(IntoResponses)]
#[allow(dead_code)]
pub enum ApiErrors<'a> {
    /// A parameter or body memkv does not accept (invalid_request_error): a name, description,
    /// metadata, path, limit, view, page or hash outside its rules; content over the size limit;
    /// updating an archived store
    #[response(status = 400, headers(("x-should-retry" = inline(NoRetry))))]
    Invalid(ErrorBody<'a>),
    /// No API key, an unknown one, or an expired one (authentication_error)
    #[response(status = 401, headers(("x-should-retry" = inline(NoRetry))))]
    Unauthenticated(ErrorBody<'a>),
    /// A store key on a route that needs an admin key, a read-only key on a route that changes
    /// the store, or keyless access from a host name other than localhost (permission_error)
    #[response(status = 403, headers(("x-should-retry" = inline(NoRetry))))]
    Forbidden(ErrorBody<'a>),
    /// No such store, memory or version, or a store this key may not use: the same answer
    /// either way (not_found_error)
    #[response(status = 404, headers(("x-should-retry" = inline(NoRetry))))]
    NotFound(ErrorBody<'a>),
    /// A method the route does not have
    #[response(status = 405, headers(("x-should-retry" = inline(NoRetry))))]
    MethodNotAllowed(ErrorBody<'a>),
    /// A conflict (invalid_request_error): the precondition's content_sha256 is not the
    /// memory's, a memory exists at the path, or the store is archived
    #[response(status = 409, headers(("x-should-retry" = inline(NoRetry))))]
    Conflict(ErrorBody<'a>),
    /// The body is over the cap (request_too_large)
    #[response(status = 413, headers(("x-should-retry" = inline(NoRetry))))]
    TooLarge(ErrorBody<'a>),
    /// The key or the store is over its rate limit (rate_limit_error); retry after the given
    /// seconds
    #[response(status = 429, headers(("Retry-After" = inline(Seconds)), ("x-should-retry" = inline(Retry))))]
    RateLimited(ErrorBody<'a>),
    /// The API keys cannot be read, or the storage failed; nothing was changed (api_error)
    #[response(status = 500)]
    Internal(ErrorBody<'a>),
    /// The in-flight limit is reached, or the database is busy; retry after the given seconds
    #[response(status = 503, headers(("Retry-After" = inline(Seconds)), ("x-should-retry" = inline(Retry))))]
    Overloaded(ErrorBody<'a>),
    /// The disk holding the database is full; nothing was changed. Deletes, redactions and
    /// store deletions still work
    #[response(status = 507, headers(("x-should-retry" = inline(NoRetry))))]
    DiskFull(ErrorBody<'a>),
}

/// The errors of the tool route.
#[derive(IntoResponses)]
#[allow(dead_code)]
pub enum ToolErrors<'a> {
    /// The message is refused whole (not JSON, a block without an id, an empty array), the
    /// content type is not application/json, the store id is not one memkv accepts, or the body
    /// was not received in time
    #[response(status = 400, headers(("x-should-retry" = inline(NoRetry))))]
    Invalid(ErrorBody<'a>),
    /// No API key, or an unknown one (authentication_error)
    #[response(status = 401, headers(("x-should-retry" = inline(NoRetry))))]
    Unauthenticated(ErrorBody<'a>),
    /// Keyless access from a host name other than localhost (permission_error)
    #[response(status = 403, headers(("x-should-retry" = inline(NoRetry))))]
    Forbidden(ErrorBody<'a>),
    /// Not a store this key may use; the same answer whether it exists or not (not_found_error)
    #[response(status = 404, headers(("x-should-retry" = inline(NoRetry))))]
    NotFound(ErrorBody<'a>),
    /// Another method than POST
    #[response(status = 405, headers(("x-should-retry" = inline(NoRetry))))]
    MethodNotAllowed(ErrorBody<'a>),
    /// The body is over the cap, or holds too many blocks (request_too_large)
    #[response(status = 413, headers(("x-should-retry" = inline(NoRetry))))]
    TooLarge(ErrorBody<'a>),
    /// The key or the store is over its rate limit (rate_limit_error); retry after the given
    /// seconds
    #[response(status = 429, headers(("Retry-After" = inline(Seconds)), ("x-should-retry" = inline(Retry))))]
    RateLimited(ErrorBody<'a>),
    /// The API keys cannot be read (api_error)
    #[response(status = 500)]
    Internal(ErrorBody<'a>),
    /// The in-flight limit is reached; retry after the given seconds
    #[response(status = 503, headers(("Retry-After" = inline(Seconds)), ("x-should-retry" = inline(Retry))))]
    Overloaded(ErrorBody<'a>),
}

// 405 on the server's own routes (a comment, not a doc comment: utoipa would make it part of
// the response's description).
#[derive(IntoResponses)]
#[response(status = 405, description = "Another method than GET", headers(("x-should-retry" = inline(NoRetry))))]
#[allow(dead_code)]
pub struct GetOnly<'a>(ErrorBody<'a>);

/// The header the anthropic SDKs send with each request of the memory-stores API.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)]
pub struct Beta {
    /// Sent by the anthropic SDKs (`agent-memory-2026-07-22`); accepted and not required.
    #[param(rename = "anthropic-beta")]
    beta: Option<String>,
}

/// A store in the path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct StorePath {
    /// The store: its `memstore_…` id, or the memkv user id of a store the memory tool wrote
    /// (one percent-encoded segment).
    #[param(min_length = 1)]
    memory_store_id: String,
}

/// A memory in the path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct MemoryPath {
    /// The memory (`mem_…`).
    #[param(min_length = 1)]
    memory_id: String,
}

/// A version in the path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct VersionPath {
    /// The version (`memver_…`).
    #[param(min_length = 1)]
    memory_version_id: String,
}
