//! HTTP errors in the Anthropic API's envelope:
//! `{"type":"error","error":{"type":"…_error","message":"…"}}`.
//!
//! Only requests memkv cannot answer get one. A model's mistake (a bad path, a missing file) is
//! a tool result with `is_error: true` and status 200.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Seconds a client is told to wait before retrying a 429 or 503.
pub const RETRY_AFTER_SECS: u64 = 1;

/// An HTTP error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The status.
    pub status: StatusCode,
    /// The human-readable message (never a key, never stored content).
    pub message: String,
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

    /// 500 `api_error`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// Any status; the error type follows from it.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// The envelope's `error.type` for a status.
    pub fn error_type(status: StatusCode) -> &'static str {
        match status.as_u16() {
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            503 | 529 => "overloaded_error",
            500..=599 => "api_error",
            _ => "invalid_request_error",
        }
    }

    /// The body, as sent.
    pub fn body(&self) -> String {
        #[derive(Serialize)]
        struct Envelope<'a> {
            r#type: &'a str,
            error: Inner<'a>,
        }
        #[derive(Serialize)]
        struct Inner<'a> {
            r#type: &'a str,
            message: &'a str,
        }
        serde_json::to_string(&Envelope {
            r#type: "error",
            error: Inner {
                r#type: Self::error_type(self.status),
                message: &self.message,
            },
        })
        .expect("plain structs serialize")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            self.body(),
        )
            .into_response();
        if matches!(self.status.as_u16(), 429 | 503) {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        }
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
}
