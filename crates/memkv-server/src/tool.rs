//! `POST /v1/memory_stores/{store}/tool`: one message in, memkv's answer out.
//!
//! The checks run in an order that never reveals more than the key allows: the key (401), the
//! store it may use (404, the same answer whether or not the other store exists), the request
//! (400, 413), then room to run (503). The message itself is answered by
//! [`memkv::protocol`], like every other face answers it: for an embedded (redb) store, on the
//! async worker, views run in place and writes are awaited from the write pipeline (see
//! [`answer_here`]); for PostgreSQL, whose every command waits on the network,
//! [`memkv::protocol::answer`] runs on tokio's blocking pool.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use memkv::protocol::{self, Message};
use memkv::{Database, Error, OwnedMemoryStore};
use serde_json::Value;

use crate::AppState;
use crate::access::ToolStore;
use crate::error::ApiError;
use crate::routes::TOOL_ROUTE;
use crate::spec::ToolErrors;
use crate::work::{Place, blocking};

/// What the tool route takes: what `memkv exec` takes.
#[derive(utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum ToolMessage {
    /// One command's input: answered with a bare output.
    Input(memkv::wire::ToolInput),
    /// One `tool_use` block: answered with a `tool_result` block.
    Block(memkv::wire::ToolUseBlock),
    /// `tool_use` blocks, applied in order: answered with a `tool_result` for each.
    Blocks(Vec<memkv::wire::ToolUseBlock>),
}

/// memkv's answer: a bare output for an input, a `tool_result` block for a block, an array of
/// them for an array.
#[derive(utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum ToolAnswer {
    Output(memkv::wire::ToolOutputObject),
    Result(memkv::wire::ToolResultBlock),
    Results(Vec<memkv::wire::ToolResultBlock>),
}

/// The store in the tool route's path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
struct ToolPath {
    /// The memkv user id, as one percent-encoded path segment (`/` and `.` encoded too). At
    /// most 256 bytes, no control characters.
    #[param(min_length = 1)]
    store: String,
}

/// What the log line and metrics learn about a tool request, or a memory-stores API request
/// (never contents).
#[derive(Debug, Clone, Default)]
pub struct ToolInfo {
    /// The store, as decoded from the path.
    pub store: String,
    /// The commands, in order (`create`, `view`, …; `other` for anything else); for the
    /// memory-stores API, its operation (`memories.create`, …).
    pub commands: Vec<&'static str>,
}

/// `POST /v1/memory_stores/{store}/tool`. The request body's size cap and the most blocks in a
/// message are the server's settings, written into the document when it is made
/// (`crate::openapi::document`).
#[utoipa::path(post, path = TOOL_ROUTE, operation_id = "tool",
    summary = "Run memory-tool commands against one store",
    description = "Takes what `memkv exec` takes and answers exactly what it answers. Model mistakes (a bad path, a missing file) are answered 200 with `is_error: true`.",
    params(ToolPath),
    request_body(content = ToolMessage, description = "At most the body cap."),
    responses((status = 200, description = "memkv's answer: a bare output for an input, a tool_result block for a block, an array of them for an array", body = ToolAnswer),
        ToolErrors))]
pub async fn tool(
    ToolStore {
        id: store,
        caller,
        state,
        ..
    }: ToolStore,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let user = state
        .store
        .owned_user(&store)
        .map_err(|e| ApiError::invalid(e.to_string()))?
        .read_only(caller.read_only);
    let actor = caller.actor();
    check_content_type(&headers)?;
    let bytes = read_body(&state, &headers, body).await?;
    let message = Message::parse(&bytes).map_err(|e| ApiError::invalid(e.to_string()))?;
    if let Message::Blocks(blocks) = &message
        && blocks.len() > state.config.max_blocks
    {
        return Err(ApiError::too_large(format!(
            "at most {} tool_use blocks per request",
            state.config.max_blocks
        )));
    }
    let info = ToolInfo {
        store,
        commands: commands(&message),
    };
    for c in &info.commands {
        state.metrics.command(c);
    }
    let (response, errors) = if state.embedded {
        let _place = Place::take(&state)?;
        answer_here(&user.with_actor(actor), message).await
    } else {
        blocking(&state, move |_| {
            Ok(protocol::answer(&user.handle().with_actor(actor), message))
        })
        .await?
    };
    for e in &errors {
        log_failure(e, &info.store);
    }
    let mut response = (
        [(header::CONTENT_TYPE, "application/json")],
        protocol::to_line(&response),
    )
        .into_response();
    response.extensions_mut().insert(info);
    Ok(response)
}

/// Answers `message` on the async worker, for an embedded store, through the library's one
/// answer loop ([`protocol::answer_with`]): each view is a read snapshot of microseconds (bounded
/// by the `view` output budget) that never waits for a lock or a flush, cheaper to run here than
/// the hop to the blocking pool and back; each write joins the store's write pipeline and is
/// awaited (its batch is run by the store's writer thread); a search, which reads for up to its
/// time budget, runs on the blocking pool.
async fn answer_here(
    user: &OwnedMemoryStore,
    message: Message,
) -> (protocol::Response, Vec<Error>) {
    protocol::answer_with(
        message,
        |command| user.execute_async(command),
        |request| {
            let user = user.clone();
            async move {
                tokio::task::spawn_blocking(move || user.handle().search_output(&request))
                    .await
                    .unwrap_or_else(|_| Err(Error::Storage("the search did not finish".into())))
            }
        },
    )
    .await
}

fn log_failure(e: &Error, store: &str) {
    tracing::error!(store, error = %e, "storage failure; nothing was applied");
}

pub(crate) fn check_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let ok = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid("content-type must be application/json"))
    }
}

/// The body, at most the message cap, within the body timeout.
pub(crate) async fn read_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<Vec<u8>, ApiError> {
    read_body_within(headers, body, state.max_body, state.config.body_timeout).await
}

/// As [`read_body`], at most `cap` bytes within `timeout`.
pub(crate) async fn read_body_within(
    headers: &HeaderMap,
    body: Body,
    cap: usize,
    timeout: Duration,
) -> Result<Vec<u8>, ApiError> {
    let too_large = || ApiError::too_large(format!("the request body is over {cap} bytes"));
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > cap as u64) {
        return Err(too_large());
    }
    let read = async {
        let mut body = body;
        let mut buf = Vec::with_capacity(declared.map_or(0, |n| n as usize));
        while let Some(frame) = body.frame().await {
            let frame =
                frame.map_err(|_| ApiError::invalid("the request body could not be read"))?;
            if let Ok(data) = frame.into_data() {
                if buf.len() + data.len() > cap {
                    return Err(too_large());
                }
                buf.extend_from_slice(&data);
            }
        }
        Ok(buf)
    };
    tokio::time::timeout(timeout, read).await.map_err(|_| {
        ApiError::invalid(format!(
            "the request body was not received within {} s",
            timeout.as_secs_f64()
        ))
    })?
}

/// The command names of a message, for logs and metrics.
fn commands(message: &Message) -> Vec<&'static str> {
    fn name(input: &Value) -> &'static str {
        match input.get("command").and_then(Value::as_str) {
            Some("view") => "view",
            Some("create") => "create",
            Some("str_replace") => "str_replace",
            Some("insert") => "insert",
            Some("delete") => "delete",
            Some("rename") => "rename",
            _ => "other",
        }
    }
    let block = |b: &memkv::ToolUse| {
        if b.name == memkv::SEARCH_TOOL_NAME {
            "search"
        } else {
            name(&b.input)
        }
    };
    match message {
        Message::Input(input) => vec![name(input)],
        Message::Block(b) => vec![block(b)],
        Message::Blocks(blocks) => blocks.iter().map(block).collect(),
    }
}

/// The largest body accepted: the longest valid message under the store's limits.
pub fn max_body(store: &Database) -> usize {
    protocol::max_message_bytes(store.limits())
}
