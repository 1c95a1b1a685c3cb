//! HTTP errors in the Anthropic API's envelope:
//! `{"type":"error","error":{"type":"…_error","message":"…"}}`.
//!
//! Only requests memkv cannot answer get one. A model's mistake (a bad path, a missing file) is
//! a tool result with `is_error: true` and status 200.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// Seconds a client is told to wait before retrying a 429 or 503.
pub const RETRY_AFTER_SECS: u64 = 1;

/// Whether a client may send the same request again, for the `x-should-retry` header that the
/// anthropic SDKs obey before their own rules (which retry every 408, 409, 429 and 5xx).
///
/// A busy server (429, 503) or a timed-out request (408) may answer differently in a moment:
/// retry. Every other 4xx is about the request or the stored state, which a retry sends
/// unchanged: a failed precondition, a taken path, an archived store (409), a bad or missing
/// key. A full disk (507) stays full until an operator frees space. Other 5xx get no advice, so
/// the SDK's own rule (retry) holds: a 500 may be a lost connection to PostgreSQL.
pub fn should_retry(status: StatusCode) -> Option<bool> {
    match status.as_u16() {
        408 | 429 | 503 => Some(true),
        400..=499 | 507 => Some(false),
        _ => None,
    }
}

/// Adds the retry advice to any answer, whoever made it (a handler, a fallback, the MCP
/// service): `x-should-retry` from [`should_retry`], and `Retry-After` on 429 and 503.
pub fn advise_retry(status: StatusCode, headers: &mut HeaderMap) {
    if let Some(retry) = should_retry(status) {
        headers.insert(
            "x-should-retry",
            HeaderValue::from_static(if retry { "true" } else { "false" }),
        );
    }
    if matches!(status.as_u16(), 429 | 503) && !headers.contains_key(header::RETRY_AFTER) {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    }
}

/// An HTTP error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The status.
    pub status: StatusCode,
    /// The human-readable message (never a key, never stored content).
    pub message: String,
    /// `Retry-After`, in seconds, when it is not the default one second (a rate limit's).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// 400 `invalid_request_error`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 401 `authentication_error`.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, message)
    }

    /// 403 `permission_error`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, message)
    }

    /// 404 `not_found_error`. The same answer for a store that is not the key's and for a route
    /// that does not exist: a store key learns nothing about other stores.
    pub fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "Not found")
    }

    /// 413 `request_too_large`.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, message)
    }

    /// 503 `overloaded_error`, with `Retry-After`.
    pub fn overloaded(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    /// 429 `rate_limit_error`, with `Retry-After: seconds`.
    pub fn rate_limited(message: impl Into<String>, seconds: u64) -> Self {
        ApiError {
            retry_after: Some(seconds),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, message)
        }
    }

    /// 500 `api_error`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// Any status; the error type follows from it.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The envelope's `error.type` for a status.
    pub fn error_type(status: StatusCode) -> &'static str {
        memkv::wire::error_type(status.as_u16())
    }

    /// The body, as sent.
    pub fn body(&self) -> String {
        serde_json::to_string(&ErrorBody {
            r#type: ErrorTag::Error,
            error: ErrorDetail {
                r#type: Self::error_type(self.status),
                message: &self.message,
            },
        })
        .expect("plain structs serialize")
    }
}

/// An error answer: `{"type": "error", "error": {"type": …, "message": …}}`, the Anthropic API's
/// envelope.
#[derive(Serialize, ToSchema)]
#[schema(as = Error)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody<'a> {
    #[schema(inline)]
    r#type: ErrorTag,
    error: ErrorDetail<'a>,
}

#[derive(Serialize, ToSchema)]
enum ErrorTag {
    #[serde(rename = "error")]
    Error,
}

/// What went wrong.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ErrorDetail<'a> {
    // The kind of error, from the status (`ApiError::error_type`). No doc comment: utoipa
    // would wrap the inlined enum in an `allOf` with an object.
    #[schema(value_type = ErrorType, inline)]
    r#type: &'static str,
    /// What went wrong, for a person to read.
    message: &'a str,
}

/// The error types of the Anthropic API that memkv answers.
#[derive(ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum ErrorType {
    InvalidRequestError,
    AuthenticationError,
    PermissionError,
    NotFoundError,
    #[serde(rename = "request_too_large")]
    RequestTooLarge,
    RateLimitError,
    ApiError,
    OverloadedError,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            self.body(),
        )
            .into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        advise_retry(self.status, response.headers_mut());
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_name_the_anthropic_error_types() {
        for (status, kind) in [
            (400, "invalid_request_error"),
            (401, "authentication_error"),
            (403, "permission_error"),
            (404, "not_found_error"),
            (405, "invalid_request_error"),
            (413, "request_too_large"),
            (429, "rate_limit_error"),
            (500, "api_error"),
            (503, "overloaded_error"),
        ] {
            let e = ApiError::new(StatusCode::from_u16(status).unwrap(), "m \"q\"");
            assert_eq!(
                e.body(),
                format!(r#"{{"type":"error","error":{{"type":"{kind}","message":"m \"q\""}}}}"#)
            );
        }
        let r = ApiError::overloaded("busy").into_response();
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
    }

    #[test]
    fn only_answers_that_may_change_are_retryable() {
        for (status, advice, retry_after) in [
            (200, None, false),
            (400, Some("false"), false),
            (401, Some("false"), false),
            (404, Some("false"), false),
            (408, Some("true"), false),
            (409, Some("false"), false),
            (413, Some("false"), false),
            (429, Some("true"), true),
            (500, None, false),
            (503, Some("true"), true),
            (507, Some("false"), false),
        ] {
            let mut headers = HeaderMap::new();
            advise_retry(StatusCode::from_u16(status).unwrap(), &mut headers);
            let got = headers.get("x-should-retry").map(|v| v.to_str().unwrap());
            assert_eq!(got, advice, "{status}");
            assert_eq!(
                headers.contains_key(header::RETRY_AFTER),
                retry_after,
                "{status}"
            );
        }
        let mut headers = HeaderMap::new();
        headers.insert(header::RETRY_AFTER, HeaderValue::from(7));
        advise_retry(StatusCode::TOO_MANY_REQUESTS, &mut headers);
        assert_eq!(headers[header::RETRY_AFTER], "7");
    }
}
