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

    /// A failure of the library, as `memkv serve` answers it: a bad id or path 400; a busy
    /// database 503; a full disk 507; a commit whose outcome was lost 500 saying so; any other
    /// storage failure 500 (nothing was applied).
    pub fn failed(e: &memkv::Error) -> Answer {
        match e {
            memkv::Error::InvalidUser { .. }
            | memkv::Error::InvalidPath { .. }
            | memkv::Error::Import { .. } => Answer::invalid(e.to_string()),
            memkv::Error::Busy { .. } => Answer::error(
                503,
                "overloaded_error",
                "the database is busy; nothing was changed, try again",
            ),
            memkv::Error::DiskFull { .. } => Answer::error(
                507,
                "api_error",
                "the disk holding the database is full; nothing was changed. Deleting memories, redacting versions and deleting stores still work",
            ),
            memkv::Error::OutcomeUnknown { .. } => Answer::error(
                500,
                "api_error",
                "the connection to the database was lost during the commit; the change may or may not have been applied",
            ),
            memkv::Error::ReadOnly => {
                Answer::invalid("the database was opened read-only: this call writes")
            }
            _ => Answer::error(500, "api_error", "storage failure; nothing was changed"),
        }
    }

    /// Whether it is a 200.
    pub fn is_ok(&self) -> bool {
        self.status == 200
    }
}
