//! An answer in the HTTP server's shape: a status and a JSON body.

use serde_json::{Value, json};

/// What an operation answers: `status` as the HTTP route would give it (200, or 400/404/409/413/
/// 500 with the error envelope `{"type": "error", "error": {"type", "message"}}`) and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP route's status for the same request.
    pub status: u16,
    /// The JSON body, as the route sends it.
    pub body: String,
}

impl Answer {
    /// 200 with `body`, already JSON.
    pub fn ok(body: String) -> Answer {
        Answer { status: 200, body }
    }

    /// 200 with `value` as JSON.
    pub fn json(value: &Value) -> Answer {
        Answer::ok(value.to_string())
    }

    /// A refusal: `status`, the envelope's `kind` (`invalid_request_error`, …) and `message`.
    pub fn error(status: u16, kind: &str, message: impl Into<String>) -> Answer {
        let body = json!({"type": "error", "error": {"type": kind, "message": message.into()}});
        Answer {
            status,
            body: body.to_string(),
        }
    }

    /// 400 `invalid_request_error`.
    pub fn invalid(message: impl Into<String>) -> Answer {
        Answer::error(400, "invalid_request_error", message)
    }

    /// 404 `not_found_error`.
    pub fn not_found(message: impl Into<String>) -> Answer {
        Answer::error(404, "not_found_error", message)
    }

    /// A failure of the library, as `memkv serve` answers it: a bad id, path or import 400, a
    /// write to a read-only open 400, and a storage failure as [`memkv::wire::storage_failure`]
    /// says.
    pub fn failed(e: &memkv::Error) -> Answer {
        match e {
            memkv::Error::InvalidUser { .. }
            | memkv::Error::InvalidPath { .. }
            | memkv::Error::Import { .. } => Answer::invalid(e.to_string()),
            memkv::Error::ReadOnly => {
                Answer::invalid("the database was opened read-only: this call writes")
            }
            _ => {
                let (status, message) = memkv::wire::storage_failure(e);
                Answer::error(status, memkv::wire::error_type(status), message)
            }
        }
    }

    /// Whether it is a 200.
    pub fn is_ok(&self) -> bool {
        self.status == 200
    }
}
